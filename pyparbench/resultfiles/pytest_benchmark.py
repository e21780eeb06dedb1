"""pytest-benchmark's JSON files (``--benchmark-json``, ``--benchmark-save``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyparbench.choices import PRECISIONS
from pyparbench.resultfiles.fingerprint import minor_version
from pyparbench.resultfiles.rows import ResultSet, Row, set_machine
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    canonical,
    duration,
    durations,
    get_object,
    get_string,
    is_number,
    json_type,
    printable,
    show,
)

__all__ = ["bench_threads", "pytest_benchmark_fields", "read_pytest_benchmark", "short_name"]


def read_pytest_benchmark(source: Path, value: dict[str, Any]) -> ResultSet:
    """Rows of a pytest-benchmark file, keyed by the benchmark's full name
    (its parameters included); times in ns."""
    benches = value["benchmarks"]
    if not isinstance(benches, list):
        raise ResultFileError(source, f"benchmarks must be a list, got {show(benches)}")
    info = value.get("machine_info")
    if not isinstance(info, dict):
        raise ResultFileError(source, "no machine_info object: not a pytest-benchmark file")
    rows: dict[str, Row] = {}
    for i, b in enumerate(benches):
        where = f"{source}: benchmarks[{i}]"
        if not isinstance(b, dict):
            raise ResultFileError(where, f"a JSON {json_type(b)}, not a benchmark")
        get_string(where, b, "name")  # every pytest-benchmark entry has one
        fullname = get_string(where, b, "fullname")
        params = b.get("params")
        if params is not None and not isinstance(params, dict):
            raise ResultFileError(where, f"params must be an object or null, got {show(params)}")
        extra = b.get("extra_info", {})
        if not isinstance(extra, dict):
            raise ResultFileError(where, f"extra_info must be an object, got {show(extra)}")
        st = get_object(where, b, "stats")
        median = duration(where, st.get("median"), "stats.median", positive=True, scale=1e9)
        samples: tuple[float, ...] = ()
        if "data" in st:
            samples = durations(where, st["data"], "stats.data", scale=1e9)
        threads = bench_threads(where, params or {}, extra)
        gflop = extra.get("gflop")
        if gflop is not None and (not is_number(gflop) or not 0 < float(gflop) < 1e12):
            raise ResultFileError(where, f"extra_info.gflop must be a positive number, "
                                         f"got {show(gflop)}")
        blocks = _blocks(where, extra, len(samples))
        # ppb_model records its precision (--ppb-precision); absent: fp32.
        precision = extra.get("precision", "fp32")
        if precision not in PRECISIONS:
            raise ResultFileError(where, f"extra_info.precision must be one of "
                                         f"{', '.join(PRECISIONS)}, got {show(precision)}")
        tag = "" if precision == "fp32" else f" {precision}"
        base = fullname.split("[", 1)[0]
        rest = {k: v for k, v in (params or {}).items() if k not in ("ppb_threads", "threads")}
        sweep = (canonical({"test": base, "params": rest,
                            **({"precision": precision} if tag else {})})
                 if threads is not None else None)
        # A bf16 run of a test is another row than its fp32 run.
        key = fullname + tag
        if key in rows:
            raise ResultFileError(where, f"benchmark {fullname!r} appears twice")
        rest_ids = ",".join(f"{k}={v}" for k, v in sorted(rest.items()))
        rows[key] = Row(key, printable(short_name(fullname) + tag), "ok", median, samples,
                        threads, sweep, float(gflop) if gflop is not None else None,
                        sweep_label=printable(short_name(base)
                                              + (f"[{rest_ids}]" if rest_ids else "") + tag),
                        blocks=blocks, precision=precision)
    if not rows:
        raise ResultFileError(source, "a pytest-benchmark file with no benchmarks")
    rs = ResultSet(str(source), str(source), "pytest-benchmark", rows, None, {}, None)
    ours = info.get("pyparbench")
    if isinstance(ours, dict) and "error" not in ours:
        set_machine(rs, source, "machine_info.pyparbench", ours)
    else:
        rs.machine = info
        rs.fields = pytest_benchmark_fields(source, info)
        rs.notes.append(f"{source}: saved without the pyparbench plugin; only pytest-benchmark's "
                        "own machine_info (CPU brand and count, Python) can be compared")
    return rs


def _blocks(where: str, extra: dict[str, Any], runs: int) -> tuple[int, ...]:
    """``extra_info["ppb_blocks"]``: the run counts of the blocks ``ppb_bench``
    timed, in order; () when absent or when the runs were not saved."""
    v = extra.get("ppb_blocks")
    if v is None or runs == 0:
        return ()
    if not isinstance(v, list) or not v or any(
            isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in v):
        raise ResultFileError(where, f"extra_info.ppb_blocks must be a list of run counts, "
                                     f"got {show(v)}")
    if sum(v) != runs:
        raise ResultFileError(where, f"extra_info.ppb_blocks adds up to {sum(v)} runs, but "
                                     f"stats.data holds {runs}")
    return tuple(v)


def bench_threads(where: str, params: dict[str, Any], extra: dict[str, Any]) -> int | None:
    """A benchmark's thread count: its ``ppb_threads`` or ``threads``
    parameter, or ``extra_info["threads"]`` (``ppb_bench`` records it)."""
    for name, src in (("ppb_threads", params), ("threads", params), ("threads", extra)):
        v = src.get(name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
            raise ResultFileError(where, f"{name} must be a thread count, got {show(v)}")
        return v
    return None


def short_name(fullname: str) -> str:
    """'bench/test_ops.py::test_gemm[t2]' -> 'test_ops.py::test_gemm[t2]'."""
    path, sep, rest = fullname.partition("::")
    return f"{path.rsplit('/', 1)[-1]}{sep}{rest}" if sep else fullname


def pytest_benchmark_fields(source: Path, info: dict[str, Any]) -> dict[str, str]:
    """The comparable fields of pytest-benchmark's own machine_info."""
    out: dict[str, str] = {}
    cpu = info.get("cpu")
    if isinstance(cpu, dict):
        brand = cpu.get("brand_raw") or cpu.get("brand")
        if isinstance(brand, str):
            out["cpu_model"] = printable(brand[:200])
        if isinstance(cpu.get("count"), int):
            out["cpus.logical"] = str(cpu["count"])
    if isinstance(info.get("python_version"), str):
        out["python"] = minor_version(info["python_version"])
    return out
