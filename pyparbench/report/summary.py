"""Records of a run -> the summary dict written to ``summary.json``.

Input: the model-configuration records of ``results.jsonl`` (the runner's:
``key``, ``config`` {model, batch, settings, repeats, warmup}, ``status``,
``summary`` {median, q1, q3, min, max, n} in ns, ``resolved``, ``machine``,
``error``), the operator records of ``operators.jsonl``
(:mod:`pyparbench.op_bench`) and the machine's ceilings
(:class:`pyparbench.peak.Peak`).

Output (``SCHEMA`` 1), every latency in ms with the JSONL median in ns
beside it (``median_ns``) so the two can be matched exactly:

``machine``
    The fingerprint of the run's records (the first ok record's, else this
    process's) and its ``fingerprint_id``.
``conditions``
    What the machine was doing: ``busy_cpus_start`` (CPUs other processes
    kept busy over a second before the run), ``loadavg_start`` (the 1-minute
    load average then), ``cpus``, and ``busy``, a warning (or None) when
    other processes were using the cores.
``peak``
    The ceilings (:meth:`Peak.as_dict`), or None.
``counts``, ``failures``
    Configurations in all, ok, failed (error or timeout) and skipped (a
    setting this machine cannot hold); each one not ok with its model,
    batch, setting, status and error (the reason, for a skipped one).
``models``
    Per model and batch: ``best`` (the fastest setting measured), ``presets``
    (each preset's latency), ``speedup`` {preset: preset latency / best
    latency}, ``regret`` {chooser: chooser latency / best latency - 1}, for
    the study's tuner (``tftuner``) and, when configurations named
    ``recommended`` were run, the recommender (``recommended``);
    ``prediction`` (when the recommended configuration carries the
    recommender's prediction): {predicted_ms, measured_ms, error
    (predicted / measured - 1)};
    ``effects`` (the study's layers as ratios: ``scheduler`` sync / async,
    ``operator`` framework / library, ``library_eigen`` and ``library_blas``
    eigen or blas / onednn, ``pool_*`` in framework mode; a ratio above 1
    means the second is faster); ``grid`` (the fastest setting at each
    inter_op x intra_op); ``configs`` (every setting that ran, fastest
    first); ``total``, ``ok``, ``failed``, ``skipped`` (configurations by
    outcome); ``graph`` (GFLOPs, heavy ops, depth, average width) and ``status``:
    "ok", "partial" (some configurations failed) or "failed" (none ran).
    Each timing carries ``label`` and ``short`` (defaults left out) and
    ``processes``: a setting measured in several processes (under several
    names, such as a preset and the recommended setting, or again in the
    main job's confirmation rounds) is one setting whose latency is the
    median of its processes' medians, its ``q1_ms`` / ``q3_ms`` the lowest
    and highest of them, and its label names each name it ran under.
``framework_overhead``
    None unless framework runs are among the records. A framework run is a
    record whose ``config`` has a ``framework`` name ("tensorflow",
    "torch", "onnxruntime") and ``mode`` beside the model, batch and
    settings of a native run; each pair gives {model, batch, framework,
    mode, setting, native_ms, framework_ms, overhead_ms (framework -
    native), overhead_pct (of the framework latency), ratio (framework /
    native)}.
``operators``
    ``scaling``: per standard shape, each thread count's latency, GFLOP/s,
    GB/s, intensity, bound and percentage of it, and the speed-up at the
    most threads over one; ``roofline``: per model and batch, each heavy
    node's point (intensity, GFLOP/s, GB/s, bound, percentage).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyparbench.peak import Peak

__all__ = ["CHOOSERS", "PRESET_NAMES", "SCHEMA", "busy_note", "merge_settings", "settings_label",
           "summarize_run"]

SCHEMA = 1
PRESET_NAMES = ("tensorflow", "intel", "tftuner")
# Settings chosen by a method rather than measured best: their regret is reported.
CHOOSERS = ("tftuner", "recommended")


def settings_label(s: Mapping[str, Any], *, short: bool = False) -> str:
    """A compact description, e.g. 'tftuner: async 2x1 lib/onednn compact';
    ``short`` leaves out what is the default (library mode, oneDNN, unpinned):
    'tftuner: async 2x1 compact'."""
    aff = s.get("affinity", "none")
    aff = aff if isinstance(aff, str) else "explicit"
    framework = s.get("operator", "library") == "framework"
    op = f"fw/{s.get('pool', 'openmp')}" if framework else "lib"
    lib = s.get("library", "onednn")
    threads = f"{s.get('scheduler', 'sync')} {s.get('inter_op', 1)}x{s.get('intra_op', 1)}"
    if short:
        text = " ".join([threads, *([op] if framework else []),
                         *([lib] if lib != "onednn" else []), *([aff] if aff != "none" else [])])
    else:
        text = f"{threads} {op}/{lib} {aff}"
    extras = []
    if s.get("smt"):
        extras.append("smt")
    if s.get("instances", 1) != 1:
        extras.append(f"x{s['instances']}inst")
    if s.get("placement", "shared") != "shared":
        extras.append(str(s["placement"]))
    if s.get("omp_wait") is not None:
        extras.append(f"wait={s['omp_wait']}")
    text = " ".join([text, *extras])
    return f"{s['name']}: {text}" if s.get("name") else text


def _timing(r: Mapping[str, Any]) -> dict[str, Any]:
    s = r["summary"]
    return {"label": settings_label(r["config"]["settings"]),
            "short": settings_label(r["config"]["settings"], short=True),
            "settings": r["config"]["settings"], "key": r["key"],
            "median_ns": s["median"], "median_ms": s["median"] / 1e6,
            "q1_ms": s["q1"] / 1e6, "q3_ms": s["q3"] / 1e6, "n": s.get("n", 0),
            "processes": r.get("processes", 1)}


def _best(rs: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    found: Mapping[str, Any] | None = None
    for r in rs:
        if found is None or r["summary"]["median"] < found["summary"]["median"]:
            found = r
    return found


def _ratio(name: str, meaning: str, num: Iterable[Mapping[str, Any]],
           den: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """num's best latency / den's best latency, both sides named."""
    a, b = _best(num), _best(den)
    if a is None or b is None:
        return None
    return {"name": name, "meaning": meaning,
            "ratio": a["summary"]["median"] / b["summary"]["median"],
            "numerator": _timing(a), "denominator": _timing(b)}


def _effects(rs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The study's Scheduler, Operator and Library layers as latency ratios
    between the best settings that differ in that layer only."""
    def s(r: Mapping[str, Any]) -> Mapping[str, Any]:
        settings: Mapping[str, Any] = r["config"]["settings"]
        return settings

    single = [r for r in rs if s(r).get("instances", 1) == 1]
    lib = [r for r in single if s(r)["operator"] == "library"]
    onednn_lib = [r for r in lib if s(r)["library"] == "onednn"]
    sync_onednn = [r for r in single if s(r)["scheduler"] == "sync"
                   and s(r)["library"] == "onednn"]
    sync_lib = [r for r in lib if s(r)["scheduler"] == "sync"]
    fw = [r for r in single if s(r)["operator"] == "framework"]
    candidates = {
        "scheduler": _ratio("sync / async", "above 1: asynchronous scheduling with inter-op "
                            "workers is faster",
                            [r for r in onednn_lib if s(r)["scheduler"] == "sync"],
                            [r for r in onednn_lib if s(r)["scheduler"] == "async"]),
        "operator": _ratio("framework / library", "above 1: letting the library thread each "
                           "op beats splitting ops on the framework's pool",
                           [r for r in sync_onednn if s(r)["operator"] == "framework"],
                           [r for r in sync_onednn if s(r)["operator"] == "library"]),
        "library_eigen": _ratio("eigen / onednn", "above 1: oneDNN is faster than Eigen",
                                [r for r in sync_lib if s(r)["library"] == "eigen"],
                                [r for r in sync_lib if s(r)["library"] == "onednn"]),
        "library_blas": _ratio("blas / onednn", "above 1: oneDNN is faster than OpenBLAS",
                               [r for r in sync_lib if s(r)["library"] == "blas"],
                               [r for r in sync_lib if s(r)["library"] == "onednn"]),
        "pool_std": _ratio("std / openmp pool", "above 1: the OpenMP pool is faster than the "
                           "mutex + condition-variable pool (framework mode)",
                           [r for r in fw if s(r)["pool"] == "std"],
                           [r for r in fw if s(r)["pool"] == "openmp"]),
        "pool_eigen": _ratio("eigen / openmp pool", "above 1: the OpenMP pool is faster than "
                             "Eigen's non-blocking pool (framework mode)",
                             [r for r in fw if s(r)["pool"] == "eigen"],
                             [r for r in fw if s(r)["pool"] == "openmp"]),
    }
    return {k: v for k, v in candidates.items() if v is not None}


def _grid(rs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[int, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rs:
        s = r["config"]["settings"]
        if s.get("instances", 1) == 1:
            cells[(int(s["inter_op"]), int(s["intra_op"]))].append(r)
    out = []
    for (inter, intra), group in sorted(cells.items()):
        b = _best(group)
        assert b is not None
        out.append({"inter_op": inter, "intra_op": intra, **_timing(b)})
    return out


def _graph_info(model: str, batch: int) -> dict[str, Any] | None:
    from pyparbench.models import build

    try:
        g = build(model, batch)
    except (ValueError, KeyError):
        return None
    return {"gflops": g.flops / 1e9, "heavy_ops": g.heavy_ops, "depth": g.depth,
            "avg_width": g.avg_width, "nodes": len(g.nodes)}


def _identity(r: Mapping[str, Any]) -> str:
    """A record's setting, its name aside."""
    return json.dumps({k: v for k, v in r["config"]["settings"].items() if k != "name"},
                      sort_keys=True)


# How a setting run under several names lists them: the recommender's first.
_NAME_ORDER = ("recommended", *PRESET_NAMES)


def merge_settings(ok: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per setting, its name aside: a setting measured in several
    processes (under several names, such as a preset and the recommended
    setting, or again in confirmation rounds) gets the median of its
    processes' medians (``q1`` and ``q3`` then the lowest and highest of
    them), ``processes`` their count, ``names`` every name it ran under and
    ``records`` the records merged."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in ok:
        groups.setdefault(_identity(r), []).append(r)
    out = []
    for rs in groups.values():
        first = rs[0]
        names = sorted({str(r["config"]["settings"].get("name") or "") for r in rs} - {""},
                       key=lambda n: (_NAME_ORDER.index(n) if n in _NAME_ORDER else 99, n))
        config = {**first["config"], "settings": {**first["config"]["settings"],
                                                  "name": "/".join(names)},
                  "names": names}
        predicted = next((r["config"]["predicted_ns"] for r in rs
                          if r["config"].get("predicted_ns")), None)
        if predicted is not None:
            config["predicted_ns"] = predicted
        summary = dict(first["summary"])
        if len(rs) > 1:
            medians = [float(r["summary"]["median"]) for r in rs]
            summary.update(median=statistics.median(medians), q1=min(medians), q3=max(medians))
        out.append({**first, "config": config, "summary": summary, "processes": len(rs),
                    "records": rs})
    return out


def _named(r: Mapping[str, Any], name: str) -> bool:
    return name in r["config"].get("names", ())


def _model_entry(model: str, batch: int, rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    done = [r for r in rs if r.get("status") == "ok"]
    skipped = sum(1 for r in rs if r.get("status") == "skipped")
    failed = len(rs) - len(done) - skipped
    ok = merge_settings(done)
    entry: dict[str, Any] = {"model": model, "batch": batch, "total": len(rs),
                             "ok": len(done), "failed": failed, "skipped": skipped,
                             "status": "failed" if not ok else "partial" if failed else "ok",
                             "graph": _graph_info(model, batch)}
    best = _best(ok)
    entry["best"] = _timing(best) if best is not None else None
    presets: dict[str, Any] = {}
    for name in (*PRESET_NAMES, *[c for c in CHOOSERS if c not in PRESET_NAMES]):
        p = _best(r for r in ok if _named(r, name))
        if p is not None:
            presets[name] = _timing(p)
    entry["presets"] = {k: v for k, v in presets.items() if k in PRESET_NAMES}
    entry["chosen"] = {k: v for k, v in presets.items() if k in CHOOSERS}
    if best is not None:
        b = best["summary"]["median"]
        entry["speedup"] = {k: v["median_ns"] / b for k, v in entry["presets"].items()}
        entry["regret"] = {k: v["median_ns"] / b - 1.0 for k, v in entry["chosen"].items()}
    else:
        entry["speedup"], entry["regret"] = {}, {}
    rec = _best(r for r in ok if _named(r, "recommended") and r["config"].get("predicted_ns"))
    if rec is not None:
        pred, got = float(rec["config"]["predicted_ns"]), float(rec["summary"]["median"])
        entry["prediction"] = {"predicted_ms": pred / 1e6, "measured_ms": got / 1e6,
                               "error": pred / got - 1.0}
    entry["effects"] = _effects(ok)
    entry["grid"] = _grid(ok)
    entry["configs"] = sorted((_timing(r) for r in ok), key=lambda t: t["median_ns"])
    return entry


def _failure(r: Mapping[str, Any]) -> dict[str, Any]:
    c = r.get("config", {})
    return {"model": c.get("model"), "batch": c.get("batch"),
            "setting": settings_label(c["settings"]) if "settings" in c else "",
            "status": r.get("status", "error"), "error": r.get("error", "")}


def _framework_overhead(native: Sequence[Mapping[str, Any]],
                        framework: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    if not framework:
        return None
    by_setting = {}
    for r in native:
        c = r["config"]
        by_setting[(c["model"], c["batch"], settings_label(c["settings"]))] = r
    out = []
    for r in framework:
        c = r["config"]
        n = by_setting.get((c["model"], c["batch"], settings_label(c["settings"])))
        if n is None:
            continue
        nm, fm = n["summary"]["median"] / 1e6, r["summary"]["median"] / 1e6
        out.append({"model": c["model"], "batch": c["batch"], "framework": c["framework"],
                    "mode": c.get("mode"), "setting": settings_label(c["settings"]),
                    "native_ms": nm, "framework_ms": fm, "overhead_ms": fm - nm,
                    "overhead_pct": 100.0 * (fm - nm) / fm if fm > 0 else 0.0,
                    "ratio": fm / nm if nm > 0 else 0.0})
    return out


def _scaling(rec: Mapping[str, Any]) -> dict[str, Any]:
    shape = rec["task"]["shape"]
    points = []
    for p in rec["points"]:
        roof = p["roofline"]
        points.append({"threads": p["threads"], "median_ns": p["summary"]["median"],
                       "median_ms": p["summary"]["median"] / 1e6, "flops": p["flops"],
                       "bytes": p["bytes"], **roof})
    first, last = points[0], points[-1]
    return {"name": shape["name"], "kind": shape["kind"], "source": shape["source"],
            "params": shape["params"], "points": points,
            "speedup_at_max": first["median_ns"] / last["median_ns"],
            "max_threads": last["threads"]}


def _roofline(rec: Mapping[str, Any]) -> dict[str, Any]:
    task = rec["task"]
    nodes = [{"id": n["id"], "name": n["name"], "op": n["op"], "shape": n.get("shape"),
              "median_ms": n["median_ns"] / 1e6, "flops": n["flops"], "bytes": n["bytes"],
              **n["roofline"]} for n in rec["nodes"]]
    return {"model": task["model"], "batch": task["batch"], "threads": rec["threads"],
            "graph_ms": rec["graph_ns"]["median"] / 1e6, "nodes": nodes}


def busy_note(busy: float, cpus: int) -> str | None:
    """A warning when other processes were using the cores (at least half
    the CPUs busy with them when the run started: ``busy`` CPUs, from
    :func:`pyparbench.cpuload.busy_cpus`), else None."""
    if busy < 0.5 * cpus:
        return None
    return (f"the machine was busy when this run started (other processes used {busy:.1f} "
            f"of {cpus} CPUs): they shared the cores, so timings are noisy and "
            "multi-threaded settings suffer most")


def summarize_run(records: Sequence[Mapping[str, Any]],
                  op_records: Sequence[Mapping[str, Any]] = (),
                  peak: Peak | None = None, *,
                  fingerprint: Mapping[str, Any] | None = None,
                  conditions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary dict of a run (see the module docstring for its fields)."""
    from pyparbench.peak import fingerprint_id

    native = [r for r in records if not r.get("config", {}).get("framework")]
    framework = [r for r in records if r.get("config", {}).get("framework")
                 and r.get("status") == "ok"]
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in native:
        c = r.get("config", {})
        if "model" in c:
            groups[(c["model"], int(c["batch"]))].append(r)
    machine = next((dict(r["machine"]) for r in records
                    if r.get("status") == "ok" and r.get("machine")), None)
    if machine is None:
        if fingerprint is None:
            from pyparbench.runner import machine_fingerprint

            fingerprint = machine_fingerprint()
        machine = dict(fingerprint)
    machine["fingerprint_id"] = fingerprint_id(machine)
    not_ok = [r for r in records if r.get("status") != "ok"]
    skipped = sum(1 for r in not_ok if r.get("status") == "skipped")
    ok_ops = [r for r in op_records if r.get("status") == "ok"]
    return {
        "schema": SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "conditions": dict(conditions or {}),
        "peak": None if peak is None else {k: v for k, v in peak.as_dict().items()
                                           if k != "fingerprint"},
        "counts": {"configs": len(records), "ok": len(records) - len(not_ok),
                   "failed": len(not_ok) - skipped, "skipped": skipped,
                   "operator_tasks": len(op_records),
                   "operator_failed": len(op_records) - len(ok_ops)},
        "failures": [_failure(r) for r in not_ok] + [
            {"model": r["task"].get("model") or r["task"].get("shape", {}).get("name"),
             "batch": r["task"].get("batch"), "setting": r["task"]["kind"],
             "status": r.get("status", "error"), "error": r.get("error", "")}
            for r in op_records if r.get("status") != "ok"],
        "models": [_model_entry(m, b, rs) for (m, b), rs in groups.items()],
        "framework_overhead": _framework_overhead(
            [r for r in native if r.get("status") == "ok"], framework),
        "operators": {
            "scaling": [_scaling(r) for r in ok_ops if r["task"]["kind"] == "scaling"],
            "roofline": [_roofline(r) for r in ok_ops if r["task"]["kind"] == "nodes"],
        },
    }
