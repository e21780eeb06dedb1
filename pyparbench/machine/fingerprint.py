"""The machine fingerprint a result carries, and the fields that identify a machine.

* :func:`machine_fingerprint` takes it (host, CPU architecture, model and
  features, CPUs and topology, oneDNN, OpenMP, governor, versions).
* :data:`IDENTITY` lists the fields that make two machines different ones,
  each with why it matters and which of the two questions it answers:
* :func:`resume_conflicts`: may results stored in a folder be resumed on
  this machine? (a folder holds one kind of machine's results: a shard
  re-run on another node of the same kind resumes its folder);
* :func:`fingerprint_differences`: in what do the machines of several result
  sets differ? (``compare`` reports it above its tables; ``merge`` refuses
  to put different machines into one table). Host names are not asked
  here: the nodes of a cluster are one machine for a comparison.
* :func:`fingerprint_id` names a machine in a file name (the measured
  ceilings, ``peak-<id>.json``); :func:`identity` gives the identity
  values (the recommender's calibration cache is keyed by them).

Nothing here reads a file: values from files are checked and turned into
comparable text by :mod:`pyparbench.resultfiles`, which then asks
:func:`fingerprint_differences`.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IDENTITY", "Difference", "IdentityField", "compared_fields", "dotted",
           "fingerprint_differences", "fingerprint_id", "identity", "machine_fingerprint",
           "resume_conflicts"]


@dataclass(frozen=True)
class IdentityField:
    """A fingerprint field that makes two machines different ones."""

    path: str  # dotted path in the fingerprint
    label: str  # the words reports use
    why: str  # why a measurement means something else when it differs
    resume: bool  # a stored result with another value is not resumed here
    compare: bool  # reported when the machines of compared or merged results differ


IDENTITY: tuple[IdentityField, ...] = (
    IdentityField("host", "host", "the nodes of one kind are one machine: a folder is "
                  "resumed on another (a failed shard re-run elsewhere; each record keeps "
                  "its host), and compared and merged across them", False, False),
    IdentityField("arch", "CPU architecture", "the instruction set every kernel is built "
                  "for (x86_64, aarch64)", True, True),
    IdentityField("cpu_model", "CPU model", "the cores: their pipes, caches and clocks",
                  True, True),
    IdentityField("onednn.isa", "ISA oneDNN dispatches to", "which kernels run (AVX-512, "
                  "AVX2, ...)", True, True),
    IdentityField("onednn.version", "oneDNN version", "kernels change between releases",
                  True, True),
    IdentityField("onednn.cpu_runtime", "oneDNN CPU runtime", "who runs oneDNN's threads "
                  "(OpenMP or a thread pool)", False, True),
    IdentityField("openmp.library", "OpenMP runtime", "fork/join and spinning differ between "
                  "libgomp and libiomp", False, True),
    IdentityField("cpus.sockets", "sockets", "what beyond-one-socket settings can use",
                  True, True),
    IdentityField("cpus.numa_nodes", "NUMA nodes", "memory bandwidth and its locality",
                  False, True),
    IdentityField("cpus.physical_cores", "physical cores", "what every thread count means",
                  True, True),
    IdentityField("cpus.logical", "logical CPUs", "SMT siblings, and the presets' thread "
                  "counts", True, True),
    IdentityField("cpus.allowed", "CPUs allowed to the process", "how many a run could use "
                  "(their count; which numbers a job got does not matter)", False, True),
    IdentityField("cpus.allowed_layout", "layout of the allowed CPUs", "what a thread count "
                  "means: cores of their own or SMT siblings, one socket or several (which "
                  "CPU numbers a job got does not matter)", True, True),
    IdentityField("governor", "CPU frequency governor", "clocks under load", False, True),
    IdentityField("pyparbench", "pyparbench version", "the executor and kernels measured",
                  False, True),
    IdentityField("python", "Python version", "the frameworks' and the harness' interpreter",
                  False, True),
)


def compared_fields() -> tuple[IdentityField, ...]:
    """The fields :func:`fingerprint_differences` looks at."""
    return tuple(f for f in IDENTITY if f.compare)


def dotted(d: Mapping[str, Any], path: str) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``; None where a level is missing or not a mapping."""
    v: Any = d
    for part in path.split("."):
        if not isinstance(v, Mapping):
            return None
        v = v.get(part)
    return v


def machine_fingerprint() -> dict[str, Any]:
    """What a result must carry to be compared with another machine's."""
    from pyparbench.machine.info import info  # noqa: PLC0415 (framework child: no native core)

    d = info()
    governor = ""
    gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if gov.exists():
        governor = gov.read_text().strip()
    cpu = d["cpu"]
    return {"host": platform.node(), "arch": cpu["arch"], "cpu_model": cpu["model"],
            "cpu_features": {"flags": cpu["flags"], "sve_vector_bits": cpu["sve_vector_bits"]},
            "governor": governor, "onednn": d["onednn"], "openmp": d["openmp"], "cpus": d["cpus"],
            "pyparbench": d["pyparbench"], "python": d["python"]}


def identity(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the fields that decide whether results may be resumed
    (by dotted path; None where absent)."""
    return {f.path: dotted(fingerprint, f.path) for f in IDENTITY if f.resume}


def fingerprint_id(fingerprint: Mapping[str, Any]) -> str:
    """A short stable id of the machine parts of a fingerprint (host, CPU
    model, CPUs, oneDNN and pyparbench versions)."""
    keep = {k: fingerprint.get(k) for k in ("host", "cpu_model", "cpus", "onednn", "pyparbench")}
    text = json.dumps(keep, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Difference:
    """A field in which machines differ: its value per input (None: unknown)."""

    field: IdentityField
    values: tuple[Any, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field.path, "label": self.field.label,
                "values": list(self.values)}


def resume_conflicts(stored: Mapping[str, Any], here: Mapping[str, Any]) -> list[Difference]:
    """The identity fields in which a stored result's fingerprint differs from
    this machine's: any of them means the results are another machine's. A
    field the stored fingerprint lacks (written before pyparbench recorded
    it) is unknown, not a difference."""
    out = []
    for f in IDENTITY:
        theirs = dotted(stored, f.path)
        if f.resume and theirs is not None and theirs != dotted(here, f.path):
            out.append(Difference(f, (theirs, dotted(here, f.path))))
    return out


def fingerprint_differences(fields: Sequence[Mapping[str, str] | None]) -> list[Difference]:
    """The compared fields whose known values differ between inputs.

    ``fields``: per input, its fingerprint as comparable text by dotted path
    (:func:`pyparbench.resultfiles.fingerprint_fields`), None for an input
    with no fingerprint. A field unknown to an input is not a difference.
    """
    out = []
    for f in compared_fields():
        values = tuple(None if fs is None else fs.get(f.path) for fs in fields)
        if len({v for v in values if v is not None}) > 1:
            out.append(Difference(f, values))
    return out
