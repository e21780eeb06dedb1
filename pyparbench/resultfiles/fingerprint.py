"""A fingerprint read from a file, as compare and merge see it: the fields that
change what a measurement means (:mod:`pyparbench.machine.fingerprint`), as
comparable text, each checked (the file may be hostile).

Not compared, as they differ between runs of one machine: host names (the
nodes of a cluster are one machine), clock readings, times, values of one
process's environment (OpenMP's max threads, the CPU count Python sees) and
oneDNN's build hash; of the CPUs allowed, only their count."""

from __future__ import annotations

from typing import Any

from pyparbench.machine.fingerprint import compared_fields, dotted
from pyparbench.resultfiles.values import ResultFileError, int_ok, printable, show

__all__ = ["fingerprint_fields", "minor_version", "usable_cores"]


def fingerprint_fields(where: str, machine: dict[str, Any]) -> dict[str, str]:
    """The compared identity fields of a pyparbench fingerprint
    (:func:`pyparbench.machine.fingerprint.compared_fields`), as comparable
    text (absent fields are left out; a field of the wrong type is an error)."""
    out: dict[str, str] = {}
    for field in compared_fields():
        path = field.path
        v = dotted(machine, path)
        if v is None:
            continue
        if path == "cpus.allowed":
            # The count matters; which CPU numbers a job got (cgroups) does not.
            if not isinstance(v, list) or not all(int_ok(c, 0) for c in v):
                raise ResultFileError(where, f"machine.{path} must be a list of CPU numbers")
            out[path] = str(len(v))
        elif path.startswith("cpus.") and path != "cpus.allowed_layout":
            if not int_ok(v, 1):
                raise ResultFileError(where, f"machine.{path} must be a positive integer, "
                                             f"got {show(v)}")
            out[path] = str(v)
        elif isinstance(v, str):
            if path == "openmp.library":
                v = v.rsplit("/", 1)[-1]  # the runtime, wherever it is installed
            elif path == "python":
                v = minor_version(v)
            elif path == "governor" and not v:
                v = "(no cpufreq)"  # the fingerprint's "" when the kernel exposes no governor
            out[path] = printable(v[:200])
        else:
            raise ResultFileError(where, f"machine.{path} must be a string, got {show(v)}")
    return out


def minor_version(version: str) -> str:
    """'3.11.7' -> '3.11': patch releases do not change a measurement."""
    return ".".join(version.split(".")[:2])


def usable_cores(machine: dict[str, Any]) -> int | None:
    """Physical cores the measuring process could use: from the topology when
    the fingerprint has one, else min(physical cores, allowed CPUs)."""
    topo = machine.get("topology")
    allowed = dotted(machine, "cpus.allowed")
    allowed_set = ({c for c in allowed if int_ok(c, 0)} if isinstance(allowed, list)
                   else None)
    if isinstance(topo, dict) and isinstance(topo.get("cores"), list):
        # Only lists of CPU numbers count: anything else in a hostile file
        # (nested lists, objects) is ignored, never hashed.
        cores = [{x for x in c["cpus"] if int_ok(x, 0)} for c in topo["cores"]
                 if isinstance(c, dict) and isinstance(c.get("cpus"), list)]
        if allowed_set is None:
            allowed_set = set().union(*cores)
        n = sum(1 for c in cores if allowed_set & c)
        if n:
            return n
    phys = dotted(machine, "cpus.physical_cores")
    if int_ok(phys, 1):
        return min(int(phys), len(allowed_set)) if allowed_set else int(phys)
    return None
