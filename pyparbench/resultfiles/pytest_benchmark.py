"""pytest-benchmark's JSON files (``--benchmark-json``, ``--benchmark-save``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

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

__all__ = ["bench_threads", "merge_processes", "pytest_benchmark_fields", "read_pytest_benchmark",
           "short_name"]


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
        base = fullname.split("[", 1)[0]
        rest = {k: v for k, v in (params or {}).items() if k not in ("ppb_threads", "threads")}
        sweep = canonical({"test": base, "params": rest}) if threads is not None else None
        if fullname in rows:
            raise ResultFileError(where, f"benchmark {fullname!r} appears twice")
        rest_ids = ",".join(f"{k}={v}" for k, v in sorted(rest.items()))
        rows[fullname] = Row(fullname, printable(short_name(fullname)), "ok", median, samples,
                             threads, sweep, float(gflop) if gflop is not None else None,
                             sweep_label=printable(short_name(base)
                                                   + (f"[{rest_ids}]" if rest_ids else "")),
                             blocks=blocks)
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


def merge_processes(folder: Path, sets: list[ResultSet]) -> ResultSet:
    """One input of several pytest-benchmark files of one suite (a folder,
    as ``--benchmark-autosave`` fills one), each file a process: each row's
    ``processes`` are its files' medians, its median theirs, its runs all of
    theirs. compare then tests rows over processes, with the spread between
    processes pooled over the rows (:mod:`pyparbench.stats.spread`), where
    one file a side can only be tested on its runs' blocks.

    Raises
    ------
    ResultFileError
        A file measured on another machine than the first (its fingerprint).
    """
    import statistics

    first = sets[0]
    for rs in sets[1:]:
        if rs.fields != first.fields:
            differ = sorted(k for k in {*rs.fields, *first.fields}
                            if rs.fields.get(k) != first.fields.get(k))
            raise ResultFileError(rs.source, f"measured on another machine than "
                                             f"{Path(first.source).name} ({', '.join(differ)} "
                                             "differ): a folder's files are processes of one "
                                             "machine")
    rows: dict[str, Row] = {}
    for key in dict.fromkeys(k for rs in sets for k in rs.rows):
        got = [rs.rows[key] for rs in sets if key in rs.rows]
        ok = [r for r in got if r.status == "ok" and r.median_ns is not None]
        if not ok:
            rows[key] = got[0]
            continue
        medians = tuple(float(r.median_ns) for r in ok if r.median_ns is not None)
        rows[key] = replace(ok[0], median_ns=statistics.median(medians), processes=medians,
                            samples_ns=tuple(x for r in ok for x in r.samples_ns), blocks=())
    merged = ResultSet(str(folder), str(folder), "pytest-benchmark", rows, first.machine,
                       first.fields, first.cores, first.peak_gflops,
                       [f"{len(sets)} pytest-benchmark files, each a process"],
                       [r.processes for r in rows.values() if len(r.processes) >= 2])
    return merged
