"""Run configurations each in a fresh process and keep every result.

A configuration (model, batch, :class:`~pyparbench.settings.Settings`) runs in
its own subprocess, because some of its state is process-wide and fixed once
set (the OpenMP wait policy, thread pools): the child gets the ``omp_wait``
environment and, when the settings pin threads, the CPUs it may use, before
it imports anything, in safe-path mode and a neutral working directory (so
a source checkout in the current directory is never imported). Each finished
configuration is appended to a JSONL file (:mod:`pyparbench.harness.store`) at once
(flushed and synced), so an interrupted or crashed sweep loses no
finished result, and running the same sweep again skips what is already
there (``resume``). A configuration that fails is recorded with its error and
not retried unless asked.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyparbench import child_process
from pyparbench.executor import run_model
from pyparbench.frameworks import FrameworkRun, ModelRef, run_framework
from pyparbench.frameworks.mapping import OPENVINO_PRESETS
from pyparbench.frameworks.precision import UNSUPPORTED_AT
from pyparbench.frameworks.spec import NO_MODULE
from pyparbench.harness.resumable import run_resumable
from pyparbench.harness.store import ResultStore
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.models.files import is_file_key
from pyparbench.reference import output_error
from pyparbench.resultfiles import Result, RunConfig, read_result
from pyparbench.timing import Summary, summarize

__all__ = ["MIN_MEASURE_S", "TEST_FAULT_ENV", "Config", "apply_test_fault", "check_config_record",
           "record_failures", "run_config", "run_configs"]


# A user's file's native outputs per (model key, batch): every framework row
# of one file and batch (ONNX Runtime's and OpenVINO's, under each setting)
# is checked against one native run, since the native executor's outputs
# under any setting agree to float rounding. A run takes its files one
# after another, so a few are kept.
_NATIVE_OUTPUTS: OrderedDict[tuple[str, int], FrameworkRun] = OrderedDict()
_NATIVE_OUTPUTS_KEPT = 4

# One measurement to make: the configuration a result record names (its
# framework's mode resolved when made), under its older name.
Config = RunConfig


def run_config(config: Config, *, timeout: float = 600.0,
               machine: dict[str, Any] | None = None) -> Result:
    """Run one configuration in a fresh Python process; returns its result
    (``status`` ok with the timings; error, timeout or skipped with why)."""
    started = time.time()
    machine = machine if machine is not None else machine_fingerprint()

    def failed(status: str, error: str) -> Result:
        return Result(config.key, config, status, started, machine, error=error)

    try:
        cpus = child_process.child_cpus(config.settings)
    except ValueError as e:  # settings this machine cannot hold
        return failed("skipped", str(e))
    if config.framework is not None:
        return _run_framework_config(config, started, machine, timeout)
    try:
        out = child_process.call("pyparbench.harness.runner", config.as_dict(), cpus=cpus,
                                 env=child_process.child_env(config.settings), timeout=timeout)
    except child_process.ChildFailed as e:
        return failed(e.status, e.error)
    try:
        return Result(config.key, config, "ok", started, machine, ns=out["ns"],
                      summary=Summary(**out["summary"]), resolved=out["resolved"],
                      per_instance=out.get("per_instance"))
    except (KeyError, TypeError, ValueError) as e:
        return failed("error", f"the child's result lacks {e}" if isinstance(e, KeyError)
                      else f"the child's result does not read: {e}")


def _run_framework_config(config: Config, started: float, machine: dict[str, Any],
                          timeout: float) -> Result:
    """A framework configuration: the model in a fresh child of that
    framework (:func:`pyparbench.frameworks.run_framework`), pinned as the
    settings say; the framework's reported threads and the knobs it has no
    counterpart for go into ``resolved``. ONNX Runtime and OpenVINO on a
    user's file run the file itself, so ``resolved`` also says how far the native graph's
    outputs are from it (``output_error``, see :func:`_file_agreement`)."""
    assert config.framework is not None
    agree = config.framework in ("onnxruntime", "openvino") and is_file_key(config.model)
    preset = config.settings.name if config.settings.name in OPENVINO_PRESETS else None
    res = run_framework(ModelRef(config.model, config.batch), config.framework,
                        config.settings, mode=config.mode, repeats=config.repeats,
                        warmup=config.warmup, outputs=agree, timeout=timeout, preset=preset)
    if res.status == "not_applicable":  # an ONNX file in TF / PyTorch; ORT at bf16
        at = res.error.find(UNSUPPORTED_AT)
        return Result(config.key, config, "skipped", started, machine,
                      error=NO_MODULE if at < 0 else res.error[at:])
    if not res.ok:  # "timeout" as a native child's, else "error"
        return Result(config.key, config, res.status, started, machine, error=res.error)
    ns = list(res.job.ns)
    if not ns:
        return Result(config.key, config, "error", started, machine,
                      error=f"{config.framework}: the child's answer holds no timed run")
    resolved = {"framework": config.framework, "mode": config.mode,
                "reported": res.reported, "not_applicable": res.not_applicable}
    if preset is not None:  # what OpenVINO's tuner chose under its hint
        resolved.update(preset=preset, compiled=res.job.info.get("compiled_properties"))
    if agree:
        resolved.update(_file_agreement(config, res.job.outputs(), timeout))
    return Result(config.key, config, "ok", started, machine, ns=ns, summary=summarize(ns),
                  resolved=resolved)


def _file_agreement(config: Config, framework_outputs: dict[str, Any], timeout: float
                    ) -> dict[str, Any]:
    """How far the native executor's outputs are from the framework's (ONNX
    Runtime's or OpenVINO's) on the user's file, on the same inputs:
    ``output_error`` = max |native - framework| / max |framework|, or None
    with ``output_error_note`` saying why there is none. The native outputs
    come from one run in its own child per file and batch (under the first
    such row's settings; see ``_NATIVE_OUTPUTS``)."""
    key = (config.model, config.batch)
    native = _NATIVE_OUTPUTS.get(key)
    if native is None:
        native = run_framework(ModelRef(config.model, config.batch), "native",
                               config.settings, repeats=1, warmup=0, outputs=True,
                               timeout=timeout)
        _NATIVE_OUTPUTS[key] = native
        while len(_NATIVE_OUTPUTS) > _NATIVE_OUTPUTS_KEPT:
            _NATIVE_OUTPUTS.popitem(last=False)
    if not native.ok:
        return {"output_error": None,
                "output_error_note": f"the native run failed: {native.error}"}
    try:
        return {"output_error": output_error(native.job.outputs(), framework_outputs,
                                             labels=("native", "framework"))}
    except ValueError as e:
        return {"output_error": None, "output_error_note": str(e)}


def check_config_record(where: str, record: dict[str, Any]) -> None:
    """Raise ValueError unless ``record`` is a configuration's result that a
    resumed run can use: one that reads back as a typed result
    (:func:`pyparbench.resultfiles.read_result`)."""
    read_result(where, record)


def record_failures(failures: Iterable[tuple[Config, str]], store: ResultStore, *,
                    resume: bool = True) -> list[Result]:
    """Configurations that cannot be run, each with why (the recommender
    failed for its model, say): recorded as error records, as a failed run
    would be, once (on resume, a configuration the store already holds is
    not recorded again); returns the records.

    Raises
    ------
    ValueError
        On resume, a stored record of one of them that does not read back.
    """
    failures = list(failures)
    if not failures:
        return []
    machine = machine_fingerprint()
    wanted = {c.key for c, _ in failures}
    done = {r["key"]: read_result(f"{store.path}: record {i + 1}", r)
            for i, r in enumerate(store.records()) if r.get("key") in wanted} if resume else {}
    out = []
    for config, why in failures:
        record = done.get(config.key)
        if record is None:
            record = Result(config.key, config, "error", time.time(), machine, error=why)
            store.append(record)
        out.append(record)
    return out


def run_configs(configs: Iterable[Config], store: ResultStore, *, resume: bool = True,
                retry_failed: bool = False, timeout: float = 600.0,
                on_result: Callable[[Config, Result | None], None] | None = None
                ) -> Iterator[Result]:
    """Run every configuration not in ``store`` yet (see
    :func:`~pyparbench.harness.resumable.run_resumable`), each in a fresh
    process; yields the results, those read back from the store too.

    Raises
    ------
    ValueError
        On resume, when the store holds another machine's or schema's
        results, or a record that does not read back as a result.
    """
    return run_resumable(
        configs, store, lambda c, m: run_config(c, timeout=timeout, machine=m),
        read_result, resume=resume, retry_failed=retry_failed, on_result=on_result)


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


def apply_test_fault(config: Config) -> None:
    """Crash or hang as :data:`TEST_FAULT_ENV` asks, if it names this configuration."""
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
    apply_test_fault(config)

    record = run_model(config.model, config.batch, config.settings, repeats=config.repeats,
                       warmup=config.warmup, min_time_s=MIN_MEASURE_S)
    out = record.as_dict()
    # Where the measurement could run: its pinning, else the CPUs it inherited
    # (a Slurm task's, a taskset's).
    out["resolved"] = {**out["resolved"], "process_cpus": sorted(os.sched_getaffinity(0))}
    print(json.dumps({k: out[k] for k in ("ns", "summary", "resolved", "per_instance")}))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
