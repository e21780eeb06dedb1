"""A setting as a user deploys it: per instance, the launch line that gives
the process its CPUs (and, on a machine with several NUMA nodes, their
memory); per framework (TensorFlow, PyTorch, ONNX Runtime, a plain OpenMP
program), the environment and the code that set the rest.

Every knob comes from :func:`~pyparbench.frameworks.mapping.map_settings`,
the mapping pyparbench's own framework runs apply, and the code is written
by each framework's ``knobs`` module beside the function that applies the
same knobs in a framework's child. Each instance is a process of its own:
the setting is mapped once per instance (with ``instances=1``) onto that
instance's CPUs, in placement order, so that a per-thread binding
(GOMP_CPU_AFFINITY, ONNX Runtime's thread affinities, OMP_PLACES) is the
instance's own. A knob a framework cannot take is listed with why, and the
closest setting it takes instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pyparbench.cpulist import cpu_str
from pyparbench.frameworks.mapping import (
    FRAMEWORKS,
    OPENMP,
    FrameworkConfig,
    NotApplicable,
    map_settings,
)
from pyparbench.frameworks.openvino.knobs import benchmark_app_line
from pyparbench.frameworks.openvino.knobs import code as ov_code
from pyparbench.settings import Settings

if TYPE_CHECKING:
    from pyparbench.threading.topology import Topology

__all__ = ["FORMS", "PROGRAM", "TARGETS", "Deployment", "Instance", "Target", "deployment"]

TARGETS = (*FRAMEWORKS, OPENMP)
FORMS = ("shell", "python")
PROGRAM = "python serve.py"
_NAMES = {"tensorflow": "TensorFlow", "torch": "PyTorch", "onnxruntime": "ONNX Runtime",
          "openvino": "OpenVINO", OPENMP: "an OpenMP program"}
# What a target's environment cannot say, whatever the setting.
_NOTES = {
    "tensorflow": "OpenMP environment: none read. TensorFlow's oneDNN runs on TensorFlow's "
                  "own intra-op pool (the pip build links no OpenMP runtime), so "
                  "OMP_NUM_THREADS, KMP_AFFINITY / OMP_PROC_BIND and KMP_BLOCKTIME / "
                  "GOMP_SPINCOUNT set none of its threads; the intra-op count sets oneDNN's "
                  "concurrency.",
    "openvino": "OpenMP environment: none read (OpenVINO's threads are TBB's). "
                "benchmark_app has no hyper-threading flag: the CPUs its launch line "
                "confines it to decide which logical processors its streams use.",
}


@dataclass(frozen=True)
class Instance:
    """One process of the deployment: its CPUs (in placement order) and the
    NUMA nodes they lie on (empty where the machine has one)."""

    index: int
    cpus: tuple[int, ...]
    nodes: tuple[int, ...]

    def launch(self, program: str = PROGRAM) -> str:
        """``numactl --physcpubind=... --membind=N program`` (several NUMA
        nodes), else ``taskset -c ... program``."""
        if self.nodes:
            return (f"numactl --physcpubind={cpu_str(self.cpus)} "
                    f"--membind={','.join(map(str, self.nodes))} {program}")
        return f"taskset -c {cpu_str(self.cpus)} {program}"


@dataclass(frozen=True)
class Target:
    """One framework's side of the deployment: one mapping per instance."""

    name: str
    configs: tuple[FrameworkConfig, ...]

    @property
    def mode(self) -> str:
        return self.configs[0].mode

    @property
    def not_applicable(self) -> list[NotApplicable]:
        """What the framework cannot take (the same for every instance: the
        reasons never name an instance's CPUs)."""
        return self.configs[0].not_applicable

    def env(self, i: int) -> dict[str, str]:
        return dict(self.configs[i].env)

    def shared_env(self) -> dict[str, str]:
        """The variables every instance sets to the same value."""
        first = self.configs[0].env
        return {k: v for k, v in first.items() if all(c.env.get(k) == v for c in self.configs)}

    def knob_code(self, i: int) -> list[str]:
        """The framework calls of instance ``i`` (no environment)."""
        knobs = self.configs[i].knobs
        if self.name == "torch":
            from pyparbench.frameworks.torch.knobs import code as torch_code  # noqa: PLC0415 (heavy: loads torch)

            return torch_code(knobs)
        if self.name == "tensorflow":
            from pyparbench.frameworks.tensorflow.knobs import code as tf_code  # noqa: PLC0415 (heavy: loads tensorflow)

            return tf_code(knobs)
        if self.name == "onnxruntime":
            from pyparbench.frameworks.onnxruntime.knobs import code as ort_code  # noqa: PLC0415 (heavy: loads onnxruntime)

            return ort_code(knobs)
        if self.name == "openvino":
            return ov_code(knobs)
        return []

    def code(self, i: int) -> list[str]:
        """Instance ``i``'s Python: its environment, set before the framework
        (or the library running OpenMP) is loaded, then the framework calls."""
        lines: list[str] = []
        env = self.configs[i].env
        if env:
            lines += ["import os", f"os.environ.update({env!r})  # before {_loaded(self.name)}"]
        return lines + self.knob_code(i)


@dataclass(frozen=True)
class Deployment:
    """A setting as deployed: its instances and, per target, what sets it."""

    settings: Settings
    instances: tuple[Instance, ...]
    batch: int
    targets: dict[str, Target]
    program: str = PROGRAM

    def _target(self, name: str) -> Target:
        if name not in self.targets:
            raise ValueError(f"no deployment for {name!r}; this one has "
                             f"{', '.join(self.targets)}")
        return self.targets[name]

    def shell(self, name: str) -> str:
        """The start script for target ``name``: the shared environment
        exported, then one launch line per instance (in the background, with
        a ``wait``, when there are several), each with its own variables."""
        t = self._target(name)
        shared = t.shared_env()
        lines = [f"# {_NAMES[name]}: {self.settings.label()}; "
                 f"{self._instances_text()}"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in shared.items()]
        many = len(self.instances) > 1
        for inst in self.instances:
            own = " ".join(f"{k}={shlex.quote(v)}" for k, v in t.env(inst.index).items()
                           if k not in shared)
            line = f"{own} {inst.launch(self.program)}" if own else inst.launch(self.program)
            lines.append(line + (" &" if many else ""))
        if many:
            lines.append("wait")
        if name == "openvino":  # the same setting as OpenVINO's own benchmark measures it
            lines.append("# the same setting in benchmark_app (model.onnx: your model):")
            lines += [f"# {inst.launch(benchmark_app_line(t.configs[inst.index].knobs))}"
                      for inst in self.instances]
            lines.append(f"# {self._program_name()} sets the rest ({_NAMES[name]}'s calls): "
                         "see --emit python")
        return "\n".join(lines) + "\n"

    def python(self, name: str) -> str:
        """The code for the top of the served program: the environment every
        instance shares, set before the framework is imported (what differs
        per instance its launch line sets), then the framework's calls; one
        block of calls per instance where they differ."""
        t = self._target(name)
        shared = t.shared_env()
        own = sorted({k for i in self.instances for k in t.env(i.index) if k not in shared})
        head: list[str] = []
        if shared:
            head += ["import os", f"os.environ.update({shared!r})  # before {_loaded(name)}"]
        if own:
            head.append(f"# {', '.join(own)}: each instance's own, set by its launch line "
                        "(--emit shell)")
        blocks = [t.knob_code(i.index) for i in self.instances]
        if all(b == blocks[0] for b in blocks):
            return "\n".join(head + blocks[0]) + "\n"
        out = list(head)
        for inst, block in zip(self.instances, blocks):
            out += ["", f"# instance {inst.index} ({inst.launch(self.program)})", *block]
        return "\n".join(out) + "\n"

    def _instances_text(self) -> str:
        n = len(self.instances)
        return (f"1 instance, batch {self.batch}" if n == 1
                else f"{n} instances, batch {self.batch} each")

    def _program_name(self) -> str:
        words = self.program.split()
        return words[-1] if words else self.program

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_per_instance": self.batch, "program": self.program,
            "instances": [{"index": i.index, "cpus": list(i.cpus), "numa_nodes": list(i.nodes),
                           "launch": i.launch(self.program)} for i in self.instances],
            "frameworks": {name: {
                "mode": t.mode,
                "env": [t.env(i.index) for i in self.instances],
                "knobs": [dict(t.configs[i.index].knobs) for i in self.instances],
                "code": ["\n".join(t.code(i.index)) for i in self.instances],
                "not_applicable": [asdict(n) for n in t.not_applicable],
                "notes": [_NOTES[name]] if name in _NOTES else [],
                "shell": self.shell(name), "python": self.python(name),
            } for name, t in self.targets.items()},
        }

    def format(self) -> str:
        """Plain text: the launch lines, then per target its environment,
        code and what it cannot take."""
        lines = [f"  deploy: {self._instances_text()}, one process per instance:"]
        lines += [f"    instance {i.index}: {i.launch(self.program)}" for i in self.instances]
        for name, t in self.targets.items():
            lines.append(f"  {_NAMES[name]} ({name}, {t.mode}):")
            shared = t.shared_env()
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in shared.items())
            lines.append(f"    environment: {env or 'none'}")
            for inst in self.instances:
                own = {k: v for k, v in t.env(inst.index).items() if k not in shared}
                if own:
                    lines.append(f"      instance {inst.index}: " + " ".join(
                        f"{k}={shlex.quote(v)}" for k, v in own.items()))
            codes = [t.knob_code(i.index) for i in self.instances]
            if codes[0]:
                lines.append("    code:" if all(c == codes[0] for c in codes)
                             else "    code (instance 0; the others differ as below):")
                lines += [f"      {c}" for c in codes[0]]
                for inst, c in zip(self.instances[1:], codes[1:]):
                    lines += [f"      instance {inst.index}: {x}" for x in c
                              if x not in codes[0]]
            if name in _NOTES:
                lines.append(f"    note: {_NOTES[name]}")
            for n in t.not_applicable:
                lines.append(f"    cannot take {n.knob}={n.value}: {n.reason}"
                             + (f"; instead: {n.instead}" if n.instead else ""))
        return "\n".join(lines)


def _loaded(name: str) -> str:
    return "the OpenMP library is loaded" if name == OPENMP else f"{name} is imported"


def _numa_nodes(topo: Topology, cpus: Sequence[int]) -> tuple[int, ...]:
    """The NUMA nodes (OS numbers) holding ``cpus``; () where the CPUs this
    process may use lie on one node (nothing to bind memory to)."""
    allowed = set(topo.allowed_cpus)
    homes = [n for n in topo.numa_nodes if not n.memory_only and allowed & set(n.pus)]
    if len(homes) < 2:
        return ()
    want = set(cpus)
    return tuple(sorted(n.os_index for n in homes if want & set(n.pus)))


def deployment(settings: Settings, cpus: Sequence[Sequence[int]], topology: Topology, *,
               batch: int, targets: Sequence[str] = TARGETS,
               modes: Mapping[str, str] | None = None, program: str = PROGRAM) -> Deployment:
    """``settings`` as deployed on ``topology``.

    Parameters
    ----------
    settings
        The setting (e.g. a Recommendation's).
    cpus
        One list of OS CPU numbers per instance, in placement order (a
        Recommendation's ``cpus``).
    topology
        The machine, for the NUMA nodes of each instance.
    batch
        The batch each instance serves.
    targets
        Which of :data:`TARGETS` to write.
    modes
        A framework's mode (its default where not given).
    program
        What each launch line starts.

    Raises
    ------
    ValueError
        An unknown target or mode; not one CPU list per instance, or an
        empty one; a batch below 1; an empty program.
    """
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a pyparbench Settings, got {settings!r}")
    for t in targets:
        if t not in TARGETS:
            raise ValueError(f"unknown framework {t!r}; valid: {', '.join(TARGETS)}")
    if len(cpus) != settings.instances or any(len(c) == 0 for c in cpus):
        raise ValueError(f"a deployment needs one non-empty CPU list per instance "
                         f"({settings.instances}), got {[list(c) for c in cpus]}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    if not program.strip():
        raise ValueError("program must be a command, got an empty one")
    one = settings.with_(instances=1)
    # Threads are bound one by one only where the setting pins them (as in
    # pyparbench's own framework runs); the launch line confines each
    # instance to its CPUs either way.
    pinned = settings.affinity != "none"
    instances = tuple(Instance(i, tuple(c), _numa_nodes(topology, c)) for i, c in enumerate(cpus))
    found = {t: Target(t, tuple(map_settings(t, one, (modes or {}).get(t),
                                             list(i.cpus) if pinned else None)
                                for i in instances))
             for t in targets}
    return Deployment(settings, instances, batch, found, program)
