"""Run configurations each in a fresh process and keep every result.

A configuration (model, batch, :class:`~pyparbench.settings.Settings`) runs in
its own subprocess, because some of its state is process-wide and fixed once
set (the OpenMP wait policy, thread pools): the child gets the ``omp_wait``
environment and, when the settings pin threads, the CPUs it may use, before
it imports anything, in safe-path mode and a neutral working directory (so
a source checkout in the current directory is never imported). Each finished
configuration is appended to a JSONL file (:mod:`pyparbench.results`) at once
(flushed and synced), so an interrupted or crashed sweep loses no
finished result, and running the same sweep again skips what is already
there (``resume``). A configuration that fails is recorded with its error and
not retried unless asked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyparbench.results import Result, ResultStore
from pyparbench.settings import Settings

__all__ = ["MIN_MEASURE_S", "Config", "ResultStore", "check_config_record", "child_command",
           "child_error", "child_result", "machine_fingerprint", "run_config", "run_configs"]


@dataclass(frozen=True)
class Config:
    """One measurement to make: the model under ``settings`` in pyparbench's
    executor, or, with ``framework`` ("tensorflow", "torch", "onnxruntime")
    and its ``mode``, the same graph in that framework under the same
    settings mapped onto its knobs (:mod:`pyparbench.frameworks`).
    ``predicted_ns``: what the recommender predicted for this setting (kept
    with the result, not part of its identity). ``round`` > 0: a further
    measurement of the same configuration in another process, at another
    time (the main job's confirmation rounds)."""

    model: str
    batch: int
    settings: Settings
    repeats: int = 5
    warmup: int = 1
    framework: str | None = None
    mode: str | None = None
    predicted_ns: float | None = None
    round: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.round, bool) or not isinstance(self.round, int) or self.round < 0:
            raise ValueError(f"round must be an int >= 0, got {self.round!r}")
        if self.framework is None:
            if self.mode is not None:
                raise ValueError(f"mode {self.mode!r} without a framework: a mode is one "
                                 f"of a framework's (pyparbench.frameworks.MODES)")
            return
        from pyparbench.frameworks.mapping import check_mode

        # The mode a run records is the one the framework's child will use.
        object.__setattr__(self, "mode", check_mode(self.framework, self.mode))

    @property
    def key(self) -> str:
        """Stable identity, used to skip finished configurations on resume."""
        d: dict[str, Any] = {"model": self.model, "batch": self.batch,
                             "settings": self.settings.as_dict(), "repeats": self.repeats}
        if self.framework is not None:
            d.update(framework=self.framework, mode=self.mode)
        if self.round:
            d["round"] = self.round
        return json.dumps(d, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        d = {"model": self.model, "batch": self.batch, "settings": self.settings.as_dict(),
             "repeats": self.repeats, "warmup": self.warmup}
        if self.framework is not None:
            d.update(framework=self.framework, mode=self.mode)
        if self.predicted_ns is not None:
            d["predicted_ns"] = self.predicted_ns
        if self.round:
            d["round"] = self.round
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        predicted = d.get("predicted_ns")
        return cls(d["model"], int(d["batch"]), Settings.from_dict(d["settings"]),
                   int(d["repeats"]), int(d["warmup"]), d.get("framework"), d.get("mode"),
                   None if predicted is None else float(predicted), int(d.get("round", 0)))

    @property
    def what(self) -> str:
        """'resnet50 b1 sync 1x2 ...', or 'torch (script) resnet50 b1 sync 1x2 ...'."""
        head = "" if self.framework is None else f"{self.framework} ({self.mode}) "
        tail = f" (round {self.round + 1})" if self.round else ""
        return f"{head}{self.model} b{self.batch} {self.settings.label()}{tail}"


def machine_fingerprint() -> dict[str, Any]:
    """What a result must carry to be compared with another machine's."""
    import platform

    from pyparbench.info import info

    d = info()
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    governor = ""
    gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if gov.exists():
        governor = gov.read_text().strip()
    return {"host": platform.node(), "cpu_model": cpu_model, "governor": governor,
            "onednn": d["onednn"], "openmp": d["openmp"], "cpus": d["cpus"],
            "pyparbench": d["pyparbench"], "python": d["python"]}


def _child_env(settings: Settings) -> dict[str, str]:
    from pyparbench.threading.omp import omp_wait_env

    env = dict(os.environ)
    env.update(omp_wait_env(settings.omp_wait))
    return env


def _child_cpus(settings: Settings) -> list[int] | None:
    """The CPUs a pinned configuration uses: the child is confined to them
    from its start (None: not pinned)."""
    if settings.affinity == "none":
        return None
    from pyparbench.threading.placement import place
    from pyparbench.threading.topology import topology

    placement = place(topology(), settings.affinity,
                      settings.instances * settings.inter_op, settings.intra_op,
                      smt=settings.smt)
    return sorted(placement.cpus) if placement.pinned else None


def child_command(module: str, python: str | None = None) -> list[str]:
    """The command line of a fresh Python (this one, or ``python``) running
    ``module``, importing nothing from the current directory: safe-path mode
    (-P), and children are also started in a neutral directory
    (:data:`CHILD_CWD`), so a source checkout in the user's working directory
    never shadows the installed package."""
    return [python or sys.executable, "-P", "-m", module]


CHILD_CWD = tempfile.gettempdir()


def run_config(config: Config, *, timeout: float = 600.0,
               machine: dict[str, Any] | None = None) -> Result:
    """Run one configuration in a fresh Python process; returns its result
    (``status`` ok with the timings; error, timeout or skipped with why)."""
    started = time.time()
    machine = machine if machine is not None else machine_fingerprint()

    def failed(status: str, error: str) -> Result:
        return Result(config.key, config.as_dict(), status, started, machine, error=error)

    try:
        cpus = _child_cpus(config.settings)
    except ValueError as e:  # settings this machine cannot hold
        return failed("skipped", str(e))
    if config.framework is not None:
        return _run_framework_config(config, started, machine, timeout)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    try:
        proc = subprocess.run(child_command("pyparbench.runner"),
                              input=json.dumps(config.as_dict()), capture_output=True,
                              text=True, timeout=timeout, env=_child_env(config.settings),
                              preexec_fn=pin, cwd=CHILD_CWD)
    except subprocess.TimeoutExpired:
        return failed("timeout", f"timed out after {timeout:.0f} s")
    if proc.returncode != 0:
        return failed("error", child_error(proc.returncode, proc.stderr))
    try:
        out = child_result(proc.stdout)
        return Result(config.key, config.as_dict(), "ok", started, machine, ns=out["ns"],
                      summary=out["summary"], resolved=out["resolved"],
                      per_instance=out.get("per_instance"))
    except (KeyError, TypeError, ValueError) as e:
        return failed("error", str(e) if isinstance(e, ValueError) else
                      f"the child's result lacks {e}")


def _run_framework_config(config: Config, started: float, machine: dict[str, Any],
                          timeout: float) -> Result:
    """A framework configuration: the model in a fresh child of that
    framework (:func:`pyparbench.frameworks.run_framework`), pinned as the
    settings say; the framework's reported threads and the knobs it has no
    counterpart for go into ``resolved``."""
    from pyparbench.frameworks import ModelRef, run_framework
    from pyparbench.timing import summarize

    assert config.framework is not None
    res = run_framework(ModelRef(config.model, config.batch), config.framework,
                        config.settings, mode=config.mode, repeats=config.repeats,
                        warmup=config.warmup, timeout=timeout)
    if res.get("status") != "ok":
        return Result(config.key, config.as_dict(), "error", started, machine,
                      error=str(res.get("error", "no result")))
    ns = [float(v) for v in res["ns"]]
    resolved = {"framework": config.framework, "mode": config.mode,
                "reported": res.get("reported"),
                "not_applicable": res.get("not_applicable", [])}
    return Result(config.key, config.as_dict(), "ok", started, machine, ns=ns,
                  summary=summarize(ns).as_dict(), resolved=resolved)


def child_error(returncode: int, stderr: str) -> str:
    """Why a child failed: the signal that ended it (a crash) or its exit
    status, and the end of what it printed."""
    tail = "\n".join(stderr.strip().splitlines()[-5:])
    if returncode < 0:
        try:
            how = f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    else:
        how = f"exit status {returncode}"
    return f"{how}: {tail}" if tail else how


def child_result(stdout: str) -> dict[str, Any]:
    """The JSON object on a child's last line; ValueError saying what the
    child printed instead."""
    lines = stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise ValueError(f"the child ended without a result line; its output ends "
                         f"{stdout[-200:]!r}")
    return out


def check_config_record(where: str, record: dict[str, Any]) -> None:
    """Raise ValueError unless ``record`` is a configuration's result that a
    resumed run can use (its summary reads the configuration, settings and
    timings back)."""
    from pyparbench.resultfiles import check_record

    check_record(where, record)
    try:
        Settings.from_dict(record["config"]["settings"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: config.settings: {e}") from None


def run_configs(configs: Iterable[Config], store: ResultStore, *, resume: bool = True,
                retry_failed: bool = False, timeout: float = 600.0,
                on_result: Callable[[Config, dict[str, Any] | None], None] | None = None
                ) -> Iterator[dict[str, Any]]:
    """Run every configuration not in ``store`` yet, appending each result as
    soon as it is known; yields the records (skipped ones too, from the
    store). ``on_result(config, record)`` is called after each (record None
    for one already in the store), e.g. to advance a progress bar.

    Raises
    ------
    ValueError
        On resume, when the store holds another machine's or schema's results.
    """
    machine = machine_fingerprint()
    done = ({r["key"]: r for r in store.check_resumable(machine, check_config_record)}
            if resume else {})
    for config in configs:
        previous = done.get(config.key)
        if previous is not None and (previous.get("status") == "ok" or not retry_failed):
            if on_result:
                on_result(config, None)
            yield previous
            continue
        record = run_config(config, timeout=timeout, machine=machine).to_dict()
        store.append(record)
        if on_result:
            on_result(config, record)
        yield record


# A configuration's timed runs last at least this long (more repeats than
# asked for when they are short): the slow spells of a shared machine last
# tenths of a second, and a few sub-millisecond runs would fall into one
# whole.
MIN_MEASURE_S = 0.3

# Test hook, for the tests of crashed and hung configurations only: set in
# the environment as "segv" or "hang", or "segv:MODEL" / "hang:MODEL" for the
# configurations of one model, it makes the child crash with SIGSEGV or
# sleep until killed, before it measures anything.
TEST_FAULT_ENV = "PYPARBENCH_TEST_FAULT"


def _test_fault(config: Config) -> None:
    spec = os.environ.get(TEST_FAULT_ENV, "")
    kind, _, model = spec.partition(":")
    if not kind or (model and model != config.model):
        return
    if kind == "segv":
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    else:
        raise ValueError(f"{TEST_FAULT_ENV} must be segv or hang[:MODEL], got {spec!r}")


def _child_main() -> int:
    """In the fresh process: run the configuration read from stdin, print
    one JSON line with the timings and the resolved settings."""
    config = Config.from_dict(json.loads(sys.stdin.read()))
    _test_fault(config)
    from pyparbench.executor import run_model

    record = run_model(config.model, config.batch, config.settings, repeats=config.repeats,
                       warmup=config.warmup, min_time_s=MIN_MEASURE_S)
    out = record.as_dict()
    print(json.dumps({k: out[k] for k in ("ns", "summary", "resolved", "per_instance")}))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
