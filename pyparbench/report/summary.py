"""Records of a run -> the summary dict written to ``summary.json``.

Input: the model configurations' results (typed
:class:`pyparbench.resultfiles.Result` records, as the runner makes them or
as :func:`pyparbench.resultfiles.read_result` reads ``results.jsonl`` back),
the operator records of ``operators.jsonl`` (typed
:class:`pyparbench.resultfiles.OpResult` records,
:mod:`pyparbench.harness.operators`) and the machine's ceilings
(:class:`pyparbench.machine.peak.Peak`).

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
``spread``
    How much one setting's processes differ on this run (pooled over every
    setting measured in two or more processes, :mod:`pyparbench.stats.spread`):
    {sigma (of ln process median), df, settings}, or None when no setting
    was measured twice.
``hosts``
    Every machine whose records the run holds (a merge of shards run on
    several nodes, or on CPUs of one node given to co-located tasks; a
    shard resumed on another node): {host, fingerprint_id, cpus_allowed,
    allowed_layout, configs and operator_tasks (its records), peak (its
    ceilings at the most threads, or None)}.
``counts``, ``failures``
    Configurations in all, ok, failed (error or timeout) and skipped (a
    setting this machine cannot hold); each one not ok with its model,
    batch, setting, status and error (the reason, for a skipped one).
``models``
    Per model, batch and ``precision`` (the settings' ``Settings.precision``:
    fp32 and bf16 runs of one model are separate entries, each with its own
    best): ``best`` (the fastest setting measured), ``presets``
    (each preset's latency), ``speedup`` {preset: preset latency / best
    latency, read in pairs as the regret is: the median over the rounds that
    measured both of the ratio of their round medians, the ratio of their
    figures without a shared round (:func:`pyparbench.stats.paired_ratio_of`)},
    ``regret`` {chooser: how much slower than the best, 0 or more: the same
    paired ratio - 1 (:func:`pyparbench.stats.regret_of`)}, for
    the study's tuner (``tftuner``), Intel's preset (``intel``) and, when configurations named
    ``recommended`` were run, the recommender (``recommended``);
    ``regret_interval`` {chooser: {low, high, level (0.95), includes_zero,
    p_value, processes [the chooser's, the best's]}}: the regret's interval
    over its rounds (None without a ``spread``; the best against itself is
    exactly 0);
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
    median over rounds of each round's median of its processes' medians
    (:func:`pyparbench.stats.merge_settings`), its
    ``q1_ms`` / ``q3_ms`` the lowest and highest process median, and its
    label names each name it ran under.
``framework_overhead``
    None unless framework runs are among the records. A framework run is a
    record whose ``config`` has a ``framework`` name ("tensorflow",
    "torch", "onnxruntime") and ``mode`` beside the model, batch and
    settings of a native run; each pair gives {model, batch, framework,
    mode, setting, native_ms, framework_ms, overhead_ms (framework -
    native), overhead_pct (of the framework latency), ratio (framework /
    native)}; ONNX Runtime on a user's file (which it runs as it is) adds
    output_error, max |native - ORT| / max |ORT| on the same inputs (None
    with output_error_note where it could not be had).
``framework_presets``
    None unless a framework ran under one of its own presets (OpenVINO's
    LATENCY and THROUGHPUT hints: its tuner picks streams and threads on
    every CPU). Per such run {model, batch, framework, mode, preset, ms,
    compiled (what the tuner chose: streams, threads, precision), setting
    and setting_ms (the same framework under the setting it shares with the
    native executor), ratio (preset / setting; above 1: the shared setting
    is faster)}.
``operators``
    ``scaling``: per standard shape, each thread count's latency, GFLOP/s,
    GB/s, intensity, bound and percentage of it, and the speed-up at the
    most threads over one; ``roofline``: per model and batch, each heavy
    node's point (intensity, GFLOP/s, GB/s, bound, percentage);
    ``generation``: per decoder generation task {model, batch, prompt, new,
    frameworks, points}, a point per runtime and thread count {framework,
    threads, prefill_tokens_per_s (batch x prompt / time to first token),
    tokens_per_s (decode: batch / tpot), ttft_ms, tpot_ms, bytes_per_token,
    decode_gbs (bytes_per_token / tpot)}.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyparbench.machine.fingerprint import fingerprint_id
from pyparbench.choices import PRESETS
from pyparbench.resultfiles import OpResult, Result
from pyparbench.settings import Settings
from pyparbench.stats import (
    MergedSetting,
    ProcessSpread,
    merge_settings,
    paired_ratio_of,
    regret_estimate,
    regret_of,
    run_spread,
)

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak

__all__ = ["CHOOSERS", "PRESET_NAMES", "SCHEMA", "busy_note", "merge_settings", "model_tag",
           "regret_unsure", "settings_label", "summarize_run"]

SCHEMA = 1
PRESET_NAMES = PRESETS
# Settings chosen by a method or an advice rather than measured best: their
# regret is reported (Intel's preset too: the recommender is held against it).
CHOOSERS = ("tftuner", "intel", "recommended")


def settings_label(s: Settings, *, short: bool = False) -> str:
    """A compact description, e.g. 'tftuner: async 2x1 lib/onednn compact';
    ``short`` leaves out what is the default (library mode, oneDNN, unpinned):
    'tftuner: async 2x1 compact'."""
    aff = s.affinity if isinstance(s.affinity, str) else "explicit"
    framework = s.operator == "framework"
    op = f"fw/{s.pool}" if framework else "lib"
    threads = f"{s.scheduler} {s.inter_op}x{s.intra_op}"
    if short:
        text = " ".join([threads, *([op] if framework else []),
                         *([s.library] if s.library != "onednn" else []),
                         *([aff] if aff != "none" else [])])
    else:
        text = f"{threads} {op}/{s.library} {aff}"
    extras = []
    if s.smt:
        extras.append("smt")
    if s.instances != 1:
        extras.append(f"x{s.instances}inst")
    if s.placement != "shared":
        extras.append(s.placement)
    if s.omp_wait is not None:
        extras.append(f"wait={s.omp_wait}")
    if s.precision != "fp32":
        extras.append(s.precision)
    text = " ".join([text, *extras])
    return f"{s.name}: {text}" if s.name else text


def _timing(m: MergedSetting) -> dict[str, Any]:
    s = m.summary
    return {"label": settings_label(m.settings), "short": settings_label(m.settings, short=True),
            "settings": m.settings.as_dict(), "key": m.key,
            "median_ns": s.median, "median_ms": s.median / 1e6,
            "q1_ms": s.q1 / 1e6, "q3_ms": s.q3 / 1e6, "n": s.n, "processes": m.processes}


def _best(ms: Iterable[MergedSetting]) -> MergedSetting | None:
    return min(ms, key=lambda m: m.median, default=None)


def _ratio(name: str, meaning: str, num: Iterable[MergedSetting],
           den: Iterable[MergedSetting]) -> dict[str, Any] | None:
    """num's best latency / den's best latency, both sides named."""
    a, b = _best(num), _best(den)
    if a is None or b is None:
        return None
    return {"name": name, "meaning": meaning, "ratio": a.median / b.median,
            "numerator": _timing(a), "denominator": _timing(b)}


def _effects(ms: Sequence[MergedSetting]) -> dict[str, dict[str, Any]]:
    """The study's Scheduler, Operator and Library layers as latency ratios
    between the best settings that differ in that layer only."""
    single = [m for m in ms if m.settings.instances == 1]
    lib = [m for m in single if m.settings.operator == "library"]
    onednn_lib = [m for m in lib if m.settings.library == "onednn"]
    sync_onednn = [m for m in single if m.settings.scheduler == "sync"
                   and m.settings.library == "onednn"]
    sync_lib = [m for m in lib if m.settings.scheduler == "sync"]
    fw = [m for m in single if m.settings.operator == "framework"]
    candidates = {
        "scheduler": _ratio("sync / async", "above 1: asynchronous scheduling with inter-op "
                            "workers is faster",
                            [m for m in onednn_lib if m.settings.scheduler == "sync"],
                            [m for m in onednn_lib if m.settings.scheduler == "async"]),
        "operator": _ratio("framework / library", "above 1: letting the library thread each "
                           "op beats splitting ops on the framework's pool",
                           [m for m in sync_onednn if m.settings.operator == "framework"],
                           [m for m in sync_onednn if m.settings.operator == "library"]),
        "library_eigen": _ratio("eigen / onednn", "above 1: oneDNN is faster than Eigen",
                                [m for m in sync_lib if m.settings.library == "eigen"],
                                [m for m in sync_lib if m.settings.library == "onednn"]),
        "library_blas": _ratio("blas / onednn", "above 1: oneDNN is faster than OpenBLAS",
                               [m for m in sync_lib if m.settings.library == "blas"],
                               [m for m in sync_lib if m.settings.library == "onednn"]),
        "pool_std": _ratio("std / openmp pool", "above 1: the OpenMP pool is faster than the "
                           "mutex + condition-variable pool (framework mode)",
                           [m for m in fw if m.settings.pool == "std"],
                           [m for m in fw if m.settings.pool == "openmp"]),
        "pool_eigen": _ratio("eigen / openmp pool", "above 1: the OpenMP pool is faster than "
                             "Eigen's non-blocking pool (framework mode)",
                             [m for m in fw if m.settings.pool == "eigen"],
                             [m for m in fw if m.settings.pool == "openmp"]),
    }
    return {k: v for k, v in candidates.items() if v is not None}


def _grid(ms: Sequence[MergedSetting]) -> list[dict[str, Any]]:
    cells: dict[tuple[int, int], list[MergedSetting]] = defaultdict(list)
    for m in ms:
        if m.settings.instances == 1:
            cells[(m.settings.inter_op, m.settings.intra_op)].append(m)
    out = []
    for (inter, intra), group in sorted(cells.items()):
        b = _best(group)
        assert b is not None
        out.append({"inter_op": inter, "intra_op": intra, **_timing(b)})
    return out


def _interval(chosen: MergedSetting, best: MergedSetting, spread: ProcessSpread | None
              ) -> dict[str, Any] | None:
    """A regret's interval over processes (:func:`regret_estimate`), or None."""
    est = regret_estimate(chosen, best, spread)
    if est is None:
        return None
    return {"low": est.low - 1.0, "high": est.high - 1.0, "level": est.level,
            "includes_zero": est.includes_one, "p_value": est.p_value,
            "processes": [chosen.processes, best.processes]}


def regret_unsure(entry: Mapping[str, Any], chooser: str) -> bool:
    """Whether a summary entry's regret of ``chooser`` is above 0 while its
    interval over processes includes 0 (the tables mark it: the processes
    measured cannot tell the chooser's setting from the best)."""
    regret = entry.get("regret", {}).get(chooser)
    interval = (entry.get("regret_interval") or {}).get(chooser)
    return regret is not None and regret > 0 and interval is not None and bool(
        interval["includes_zero"])


def model_tag(entry: Mapping[str, Any]) -> str:
    """A model entry's name for a person: 'resnet50 b1', and its precision
    when not fp32 ('resnet50 b1 bf16'; an entry without one is fp32)."""
    precision = entry.get("precision", "fp32")
    return f"{entry['model']} b{entry['batch']}" + (f" {precision}" if precision != "fp32"
                                                    else "")


def _model_entry(model: str, batch: int, rs: Sequence[Result], spread: ProcessSpread | None,
                 graph: Mapping[str, Any] | None, precision: str = "fp32") -> dict[str, Any]:
    done = [r for r in rs if r.ok]
    skipped = sum(1 for r in rs if r.status == "skipped")
    failed = len(rs) - len(done) - skipped
    ok = merge_settings(done)
    entry: dict[str, Any] = {"model": model, "batch": batch, "precision": precision,
                             "total": len(rs),
                             "ok": len(done), "failed": failed, "skipped": skipped,
                             "status": "failed" if not ok else "partial" if failed else "ok",
                             "graph": dict(graph) if graph is not None else None}
    best = _best(ok)
    entry["best"] = _timing(best) if best is not None else None
    named: dict[str, MergedSetting] = {}
    for name in (*PRESET_NAMES, *[c for c in CHOOSERS if c not in PRESET_NAMES]):
        p = _best(m for m in ok if m.named(name))
        if p is not None:
            named[name] = p
    entry["presets"] = {k: _timing(v) for k, v in named.items() if k in PRESET_NAMES}
    chosen = {k: v for k, v in named.items() if k in CHOOSERS}
    entry["chosen"] = {k: _timing(v) for k, v in chosen.items()}
    if best is not None:
        entry["speedup"] = {k: paired_ratio_of(v, best) for k, v in named.items()
                            if k in PRESET_NAMES}
        entry["regret"] = {k: regret_of(v, best) for k, v in chosen.items()}
        entry["regret_interval"] = {k: _interval(v, best, spread) for k, v in chosen.items()}
    else:
        entry["speedup"], entry["regret"], entry["regret_interval"] = {}, {}, {}
    rec = _best(m for m in ok if m.named("recommended") and m.config.predicted_ns)
    if rec is not None and rec.config.predicted_ns is not None:
        pred, got = rec.config.predicted_ns, rec.median
        entry["prediction"] = {"predicted_ms": pred / 1e6, "measured_ms": got / 1e6,
                               "error": pred / got - 1.0}
    entry["effects"] = _effects(ok)
    entry["grid"] = _grid(ok)
    entry["configs"] = sorted((_timing(m) for m in ok), key=lambda t: t["median_ns"])
    return entry


def _failure(r: Result) -> dict[str, Any]:
    c = r.config
    return {"model": c.model, "batch": c.batch, "setting": settings_label(c.settings),
            "status": r.status, "error": r.error or ""}


def _framework_overhead(native: Sequence[Result],
                        framework: Sequence[Result]) -> list[dict[str, Any]] | None:
    if not framework:
        return None
    by_setting = {}
    for r in native:
        c = r.config
        by_setting[(c.model, c.batch, settings_label(c.settings))] = r
    out = []
    for r in framework:
        c = r.config
        if _preset_of(r) is not None:  # no native run of the same setting: see below
            continue
        n = by_setting.get((c.model, c.batch, settings_label(c.settings)))
        if n is None:
            continue
        nm, fm = n.timing.median / 1e6, r.timing.median / 1e6
        item = {"model": c.model, "batch": c.batch, "precision": c.settings.precision,
                "framework": c.framework, "mode": c.mode, "setting": settings_label(c.settings),
                "native_ms": nm, "framework_ms": fm, "overhead_ms": fm - nm,
                "overhead_pct": 100.0 * (fm - nm) / fm if fm > 0 else 0.0,
                "ratio": fm / nm if nm > 0 else 0.0}
        agreement = {k: v for k, v in (r.resolved or {}).items()
                     if k in ("output_error", "output_error_note")}
        out.append({**item, **agreement})
    return out


def _preset_of(r: Result) -> str | None:
    """The framework's own preset a framework run ran under, if any."""
    preset = (r.resolved or {}).get("preset")
    return preset if isinstance(preset, str) else None


def _framework_presets(framework: Sequence[Result]) -> list[dict[str, Any]] | None:
    plain: dict[tuple[str, int, str | None, str | None], Result] = {}
    for r in framework:
        c = r.config
        if _preset_of(r) is None:
            plain.setdefault((c.model, c.batch, c.framework, c.mode), r)
    out = []
    for r in framework:
        c, preset = r.config, _preset_of(r)
        if preset is None:
            continue
        ms = r.timing.median / 1e6
        item: dict[str, Any] = {"model": c.model, "batch": c.batch, "framework": c.framework,
                                "mode": c.mode, "preset": preset, "ms": ms,
                                "compiled": (r.resolved or {}).get("compiled"),
                                "setting": None, "setting_ms": None, "ratio": None}
        shared = plain.get((c.model, c.batch, c.framework, c.mode))
        if shared is not None:
            sm = shared.timing.median / 1e6
            item.update(setting=settings_label(shared.config.settings), setting_ms=sm,
                        ratio=ms / sm if sm > 0 else None)
        out.append(item)
    return out or None


def _scaling(rec: OpResult) -> dict[str, Any]:
    shape = rec.task.shape
    assert shape is not None and rec.points  # an ok scaling record has both
    points = []
    for p in rec.points:
        roof = p.roofline.as_dict() if p.roofline is not None else {}
        points.append({"threads": p.threads, "median_ns": p.summary.median,
                       "median_ms": p.summary.median / 1e6, "flops": p.flops,
                       "bytes": p.bytes, **roof})
    first, last = points[0], points[-1]
    return {"name": shape.name, "kind": shape.kind, "source": shape.source,
            "params": dict(shape.params), "points": points,
            "speedup_at_max": first["median_ns"] / last["median_ns"],
            "max_threads": last["threads"]}


def _roofline(rec: OpResult) -> dict[str, Any]:
    assert rec.graph_ns is not None  # an ok nodes record has its graph's time
    nodes = [{"id": n.id, "name": n.name, "op": n.op,
              "shape": None if n.shape is None else list(n.shape),
              "median_ms": n.median_ns / 1e6, "flops": n.flops, "bytes": n.bytes,
              **(n.roofline.as_dict() if n.roofline is not None else {})}
             for n in rec.nodes or ()]
    return {"model": rec.task.model, "batch": rec.task.batch, "threads": rec.threads,
            "graph_ms": rec.graph_ns.median / 1e6, "nodes": nodes}


def _generation(rec: OpResult) -> dict[str, Any]:
    assert rec.generation  # an ok generation record has its points
    points = [{"framework": g.framework, "threads": g.threads,
               "prefill_tokens_per_s": g.prefill_tokens_per_s, "tokens_per_s": g.tokens_per_s,
               "ttft_ms": g.ttft_ms, "tpot_ms": g.tpot_ms, "bytes_per_token": g.bytes_per_token,
               "decode_gbs": g.decode_gbs} for g in rec.generation]
    t = rec.task
    return {"model": t.model, "batch": t.batch, "prompt": t.prompt, "new": t.new,
            "frameworks": list(dict.fromkeys(p["framework"] for p in points)),
            "points": points}


def _op_failure(r: OpResult) -> dict[str, Any]:
    return {"model": r.name, "batch": r.task.batch if r.task.model else None,
            "setting": r.kind, "status": r.status, "error": r.error or ""}


def busy_note(busy: float, cpus: int) -> str | None:
    """A warning when other processes were using the cores (at least half
    the CPUs busy with them when the run started: ``busy`` CPUs, from
    :func:`pyparbench.machine.cpuload.busy_cpus`), else None."""
    if busy < 0.5 * cpus:
        return None
    return (f"the machine was busy when this run started (other processes used {busy:.1f} "
            f"of {cpus} CPUs): they shared the cores, so timings are noisy and "
            "multi-threaded settings suffer most")


def _hosts(records: Sequence[Result], op_records: Sequence[OpResult],
           peaks: Mapping[str, Peak]) -> list[dict[str, Any]]:
    """Each machine (host and its allowed CPUs) the records were measured on."""
    hosts: dict[str, dict[str, Any]] = {}
    machines: list[tuple[str, Any]] = [("configs", r.machine) for r in records]
    machines += [("operator_tasks", r.machine) for r in op_records]
    for count, m in machines:
        if isinstance(m, Mapping) and m:
            fid = fingerprint_id(m)
            raw = m.get("cpus")
            cpus: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            allowed, layout = cpus.get("allowed"), cpus.get("allowed_layout")
            # A file from elsewhere: only values of the right type are shown.
            h = hosts.setdefault(fid, {
                "host": str(m.get("host")), "fingerprint_id": fid,
                "cpus_allowed": allowed if isinstance(allowed, list) and all(
                    isinstance(c, int) for c in allowed) else None,
                "allowed_layout": layout if isinstance(layout, str) else None,
                "configs": 0, "operator_tasks": 0, "peak": None})
            h[count] += 1
    for fid, h in hosts.items():
        if fid in peaks:
            top = peaks[fid].points[-1]
            h["peak"] = {"threads": top.threads, "fma_gflops": top.fma_gflops,
                         "triad_gbs": top.triad_gbs, "gather_gbs": top.gather_gbs,
                         "fma_shared": bool(peaks[fid].fma_warning)}
    return list(hosts.values())


def summarize_run(records: Sequence[Result],
                  op_records: Sequence[OpResult] = (),
                  peak: Peak | None = None, *,
                  fingerprint: Mapping[str, Any] | None = None,
                  conditions: Mapping[str, Any] | None = None,
                  peaks: Mapping[str, Peak] | None = None,
                  graphs: Mapping[tuple[str, int], Mapping[str, Any]] | None = None
                  ) -> dict[str, Any]:
    """The summary dict of a run (see the module docstring for its fields).
    ``peaks``: every host's ceilings by fingerprint id (a merged folder's);
    ``graphs``: each (model, batch)'s graph figures, as the plan carries
    them (a model's entry has none without); ``fingerprint``: the machine
    when no record finished (none measured again here)."""
    native = [r for r in records if not r.config.framework]
    framework = [r for r in records if r.config.framework and r.ok]
    # One entry per model, batch and precision: a bf16 run is never the best
    # setting of, nor a preset's speed-up over, the fp32 runs.
    groups: dict[tuple[str, int, str], list[Result]] = defaultdict(list)
    for r in native:
        groups[(r.config.model, r.config.batch, r.config.settings.precision)].append(r)
    machine = next((dict(r.machine) for r in records if r.ok and r.machine), None)
    if machine is None:  # nothing finished: the machine as the caller knows it
        machine = dict(fingerprint or {})
    machine["fingerprint_id"] = fingerprint_id(machine)
    not_ok = [r for r in records if not r.ok]
    skipped = sum(1 for r in not_ok if r.status == "skipped")
    ok_ops = [r for r in op_records if r.ok]
    spread = run_spread(native)
    return {
        "schema": SCHEMA,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "conditions": dict(conditions or {}),
        "peak": None if peak is None else {k: v for k, v in peak.as_dict().items()
                                           if k != "fingerprint"},
        "hosts": _hosts(records, op_records, {
            **({fingerprint_id(peak.fingerprint): peak} if peak is not None else {}),
            **(peaks or {})}),
        "counts": {"configs": len(records), "ok": len(records) - len(not_ok),
                   "failed": len(not_ok) - skipped, "skipped": skipped,
                   "operator_tasks": len(op_records),
                   "operator_failed": len(op_records) - len(ok_ops)},
        "failures": [_failure(r) for r in not_ok]
                    + [_op_failure(r) for r in op_records if not r.ok],
        "spread": None if spread is None else spread.as_dict(),
        "models": [_model_entry(m, b, rs, spread, (graphs or {}).get((m, b)), p)
                   for (m, b, p), rs in groups.items()],
        "framework_overhead": _framework_overhead([r for r in native if r.ok], framework),
        "framework_presets": _framework_presets(framework),
        "operators": {
            "scaling": [_scaling(r) for r in ok_ops if r.kind == "scaling"],
            "roofline": [_roofline(r) for r in ok_ops if r.kind == "nodes"],
            "generation": [_generation(r) for r in ok_ops if r.kind == "generation"],
        },
    }
