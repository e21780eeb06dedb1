"""The recommender against an exhaustive sweep measured on this machine.

  python bench/recommend_regret.py                       # default suite
  python bench/recommend_regret.py --models googlenet --batches 1 --passes 1
  python bench/recommend_regret.py -o DIR --report-only  # the tables again, from DIR
  python bench/recommend_regret.py --server-only         # the synthetic 2-socket server
  python bench/recommend_regret.py --models ./my.onnx --batches 1   # a user's file

For every model and batch of the default suite (ResNet-50, GoogLeNet,
FC-512, DLRM Criteo-Kaggle, the BERT encoder layer, at batch 1 and 8):

1. ``pyparbench.recommender.recommend`` (calibrated on this machine while it is quiet,
   cached) gives its setting, and its cost model predicts every setting
   below; both are saved at once (``<out>/recommendations.json``), so that
   what is measured is what was recommended.
2. Every setting is measured in a fresh process
   (``pyparbench.harness.runner.run_config``): the presets (TensorFlow's defaults,
   Intel's advice, the study's tuner), the suite's sweep, every candidate of
   the recommender on this machine (sync / async, inter x intra, library /
   framework with each pool, instances), and the recommended setting itself
   as its own configuration. The machine may be shared with other users:
   each record carries the share of the CPUs other processes used while it
   ran, rows are measured in bursts when the machine is quiet (other
   processes under 10 % of the CPUs), and each setting gets ``--passes``
   quiet measurements (or as many as quiet spells allow within ``--hours``).
   A setting's figure is the median of its quiet processes' medians, or its
   least disturbed process when none was quiet.
3. Regret = ours / best measured - 1 (and the same with each setting's
   fastest quiet process); the tuner's time over ours; the simulation's
   prediction error (predicted / measured - 1) for ours, and the median and
   largest absolute error over every measured setting.

Then the recommendation for a synthetic 2-socket, 28-core server
("package:2 core:28 pu:2", analytic model) for each model, with its reasons.
Raw records go to ``<out>/results.jsonl`` (an interrupted run resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pyparbench import models
from pyparbench.choices import PRESETS
from pyparbench.recommender import Recommendation, Resources, predict, recommend
from pyparbench.recommender.calibrate import MAX_ATTEMPTS
from pyparbench.harness.store import ResultStore
from pyparbench.harness.runner import Config, run_config
from pyparbench.machine.fingerprint import machine_fingerprint
from pyparbench.settings import Settings, allowed_cores, preset
from pyparbench.harness.levels import DEFAULT_BATCHES, DEFAULT_MODELS, resolve_level
from pyparbench.threading.topology import topology

SERVER = "package:2 core:28 pu:2"
# A measurement counts as quiet when other processes used less than this
# share of the CPUs while it ran.
QUIET = 0.10


def _key(s: Settings) -> str:
    """A setting's identity without its name (a preset equal to a sweep point
    is one setting)."""
    return json.dumps(s.with_(name="").as_dict(), sort_keys=True)


def _settings(key: str) -> Settings:
    d = json.loads(key)
    if isinstance(d["affinity"], list):
        d["affinity"] = tuple(tuple(c) for c in d["affinity"])
    return Settings(**d)


def calibrated(model_name: str, batch: int, quiet_wait_s: float, deadline: float,
               recalibrate: bool) -> Recommendation:
    """The recommendation, its calibration measured while the machine is
    quiet: wait for quiet before each call; figures other processes
    disturbed all the same are measured again by the next call (keeping the
    lower), up to the calibration's own attempt limit."""
    graph = models.build(model_name, batch)
    wait_for_quiet(quiet_wait_s)
    rec = recommend(graph, recalibrate=recalibrate)
    for _ in range(MAX_ATTEMPTS - 1):
        if not rec.calibration.get("disturbed") or time.monotonic() > deadline:
            break
        wait_for_quiet(quiet_wait_s)
        rec = recommend(graph)
    print(f"{model_name} b{batch}: {rec.settings.label()} predicted "
          f"{rec.predicted.latency_ns / 1e6:.3f} ms; {rec.reasons[0]}", file=sys.stderr)
    return rec


def plan_row(model_name: str, batch: int, rec: Recommendation) -> dict[str, Any]:
    """The settings to measure for one row and the recommender's prediction of
    each (None where its cost model has no figures, e.g. an uncalibrated
    math library)."""
    topo = topology()
    cores = allowed_cores(topo)
    graph = models.build(model_name, batch)
    chosen: dict[str, Settings] = {}
    for p in PRESETS:
        s = preset(p, topo, graph)
        chosen.setdefault(_key(s), s)
    for s in resolve_level("default").sweep(cores) + [c.settings for c in rec.candidates]:
        chosen.setdefault(_key(s), s)
    known = {_key(c.settings): c.latency_ns for c in [*rec.candidates, *rec.presets.values()]}
    from pyparbench.recommender.calibrate import load_calibration

    model = load_calibration().model()
    res = Resources.from_topology(topo)
    predicted: dict[str, float | None] = {}
    for k, s in chosen.items():
        if k in known:
            predicted[k] = known[k]
            continue
        try:
            predicted[k] = predict(graph, s, model, res).latency_ns
        except KeyError:
            predicted[k] = None
    return {"model": model_name, "batch": batch, "recommended": rec.settings.as_dict(),
            "recommended_key": _key(rec.settings), "predicted_ns": rec.predicted.latency_ns,
            "presets": {k: _key(v.settings) for k, v in rec.presets.items()},
            "settings": {k: s.as_dict() for k, s in chosen.items()},
            "predicted": predicted, "reasons": list(rec.reasons),
            "calibration": rec.calibration}


def _busy() -> float:
    """CPU seconds all CPUs have spent busy (from /proc/stat)."""
    with open("/proc/stat") as fh:
        f = [float(v) for v in fh.readline().split()[1:]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def foreign_load(window_s: float = 1.0) -> float:
    """The share of the CPUs other processes use, over ``window_s``."""
    b0, p0, t0 = _busy(), time.process_time(), time.monotonic()
    time.sleep(window_s)
    wall = time.monotonic() - t0
    return max(0.0, (_busy() - b0 - (time.process_time() - p0)) / (wall * (os.cpu_count() or 1)))


def wait_for_quiet(limit_s: float, threshold: float = QUIET) -> float:
    """Wait (at most ``limit_s``) until other processes use less than
    ``threshold`` of the CPUs; returns the last load seen."""
    t0 = time.monotonic()
    load = foreign_load()
    while load >= threshold and time.monotonic() - t0 < limit_s:
        load = foreign_load(2.0)
    return load


def _row_configs(row: dict[str, Any], repeats: int) -> list[Config]:
    """A row's settings, then the recommended one (named)."""
    configs = [Config(row["model"], row["batch"], _settings(k), repeats=repeats)
               for k in row["settings"]]
    rec = _settings(row["recommended_key"]).with_(name="recommended")
    return configs + [Config(row["model"], row["batch"], rec, repeats=repeats)]


def measure(plan: list[dict[str, Any]], passes: int, repeats: int, out: Path,
            quiet_wait_s: float, deadline: float) -> None:
    """Every row's settings (and the recommended one, named), each in a fresh
    process, until each has ``passes`` quiet measurements or the
    ``deadline`` (time.monotonic()) passes, into ``<out>/results.jsonl``.

    The machine may be shared, so rows are measured in bursts: wait (at most
    ``quiet_wait_s``) for other processes to leave the CPUs, then run the
    row's settings that still lack quiet measurements back to back; a busy
    machine moves on to the next row, to come back later. Every record
    carries ``foreign_load``: the share of the CPUs other processes used while
    it ran (busy CPU time less this process's and the child's own). At the
    deadline, a setting never measured is measured once whatever the load.
    """
    store = ResultStore(out / "results.jsonl")
    machine = machine_fingerprint()
    quiet: dict[str, int] = {}
    seen: set[str] = set()
    for r in store.check_resumable(machine):
        seen.add(r["key"])
        if r.get("status") == "ok" and r.get("foreign_load", 1.0) < QUIET:
            quiet[r["key"]] = quiet.get(r["key"], 0) + 1
    rows = [(row, _row_configs(row, repeats)) for row in plan]

    def run(config: Config) -> None:
        b0, c0, p0, t0 = _busy(), _children_cpu(), time.process_time(), time.monotonic()
        record = run_config(config, machine=machine).as_dict()
        wall = time.monotonic() - t0
        own = (_children_cpu() - c0) + (time.process_time() - p0)
        load = max(0.0, (_busy() - b0 - own) / (wall * (os.cpu_count() or 1)))
        record["foreign_load"] = load
        store.append(record)
        seen.add(config.key)
        if record["status"] == "ok" and load < QUIET:
            quiet[config.key] = quiet.get(config.key, 0) + 1
        done = sum(min(quiet.get(c.key, 0), passes) for _, cs in rows for c in cs)
        total = passes * sum(len(cs) for _, cs in rows)
        print(f"\r{done}/{total} quiet measurements; last: {config.model} b{config.batch} "
              f"{record['status']} load {load:.2f}        ", end="", file=sys.stderr)

    while time.monotonic() < deadline:
        todo = [(row, [c for c in cs if quiet.get(c.key, 0) < passes]) for row, cs in rows]
        todo = [(row, cs) for row, cs in todo if cs]
        if not todo:
            break
        for _, cs in todo:
            if time.monotonic() >= deadline:
                break
            if wait_for_quiet(quiet_wait_s) >= QUIET:
                continue
            for c in cs:
                run(c)
    for _, cs in rows:
        for c in cs:
            if c.key not in seen:
                run(c)
    print(file=sys.stderr)


def _collect(out: Path) -> dict[tuple[str, int], dict[str, list[float]]]:
    """(model, batch) -> setting key ("recommended" for ours) -> the process
    medians measured while the machine was quiet (other processes under
    ``QUIET`` of the CPUs); a setting never measured quietly keeps its least
    disturbed figure."""
    got: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = {}
    for f in sorted(out.glob("*.jsonl")):
        for r in ResultStore(f).records():
            if r.get("status") != "ok":
                continue
            c = r["config"]
            s = Config.from_dict(c).settings
            name = "recommended" if s.name == "recommended" else _key(s)
            got.setdefault((c["model"], c["batch"]), {}).setdefault(name, []).append(
                (float(r.get("foreign_load", 0.0)), r["summary"]["median"]))
    result: dict[tuple[str, int], dict[str, list[float]]] = {}
    for row, settings in got.items():
        for name, samples in settings.items():
            quiet = [ns for load, ns in samples if load < QUIET]
            result.setdefault(row, {})[name] = quiet or [min(samples)[1]]
    return result


def report(plan: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """One summary dict per row; prints the table."""
    measured = _collect(out)
    rows = []
    for row in plan:
        got = measured.get((row["model"], row["batch"]), {})
        if "recommended" not in got:
            continue
        med = {k: statistics.median(v) for k, v in got.items()}
        low = {k: min(v) for k, v in got.items()}
        ours, best_key = med["recommended"], min(med, key=med.__getitem__)
        best = med[best_key]
        presets = {name: med.get(k) for name, k in row["presets"].items()}
        errors = [row["predicted"][k] / v - 1 for k, v in med.items()
                  if k != "recommended" and row["predicted"].get(k) is not None]
        tuner = presets.get("tftuner")
        rows.append({
            "model": row["model"], "batch": row["batch"], "best_ms": best / 1e6,
            "best": "recommended" if best_key == "recommended" else _settings(best_key).label(),
            "ours": _settings(row["recommended_key"]).label(), "ours_ms": ours / 1e6,
            "regret": ours / best - 1,
            "regret_least_disturbed": low["recommended"] / min(low.values()) - 1,
            "tuner_over_ours": tuner / ours if tuner else None,
            "presets_ms": {k: (v / 1e6 if v else None) for k, v in presets.items()},
            "predicted_ms": row["predicted_ns"] / 1e6,
            "pred_error_ours": row["predicted_ns"] / ours - 1,
            "pred_abs_error_median": statistics.median(abs(e) for e in errors) if errors else None,
            "pred_abs_error_max": max(abs(e) for e in errors) if errors else None,
            "settings_measured": len(med), "passes": min(len(v) for v in got.values()),
        })

    def ms(v: float | None) -> str:
        return f"{v:.3f}" if v is not None else "-"

    def pct(v: float | None) -> str:
        return f"{v:.0%}" if v is not None else "-"

    print("\n| model | batch | best measured (ms) | tensorflow | intel | tftuner | ours (ms) "
          "| regret (least disturbed) | tuner / ours | pred. error, ours | |pred. error| "
          "median / max, all settings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["presets_ms"]
        print(f"| {r['model']} | {r['batch']} | {r['best_ms']:.3f} ({r['best']}) | "
              f"{ms(p['tensorflow'])} | {ms(p['intel'])} | {ms(p['tftuner'])} | "
              f"{r['ours_ms']:.3f} ({r['ours']}) | {r['regret']:+.1%} "
              f"({r['regret_least_disturbed']:+.1%}) | "
              f"{ms(r['tuner_over_ours'])}x | {r['pred_error_ours']:+.1%} | "
              f"{pct(r['pred_abs_error_median'])} / {pct(r['pred_abs_error_max'])} |")
    return rows


def server(model_names: list[str], batches: list[int]) -> list[dict[str, Any]]:
    """The synthetic 2-socket server's recommendation for each model and batch."""
    out = []
    for m in model_names:
        for b in batches:
            rec = recommend(models.build(m, b), SERVER)
            print(f"\n### {m}, batch {b}, {SERVER}\n")
            print("```\n" + rec.format() + "\n```")
            out.append(rec.as_dict())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--batches", nargs="+", type=int, default=list(DEFAULT_BATCHES))
    ap.add_argument("--passes", type=int, default=3,
                    help="quiet measurements wanted per setting")
    ap.add_argument("--hours", type=float, default=4.0,
                    help="stop waiting for quiet measurements after this long")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per process")
    ap.add_argument("-o", "--out", default="recommend-regret", help="directory for results")
    ap.add_argument("--recalibrate", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=60.0, metavar="S",
                    help="before each row's burst of measurements (and each calibration), "
                         "wait at most S seconds for other processes to leave the CPUs")
    ap.add_argument("--report-only", action="store_true",
                    help="print the tables from <out> without measuring")
    ap.add_argument("--server-only", action="store_true")
    args = ap.parse_args()
    # An ONNX file's path becomes its model name, registered for the children.
    args.models = [models.resolve(m) for m in args.models]
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    plan_file = out / "recommendations.json"
    if not args.server_only:
        deadline = time.monotonic() + args.hours * 3600
        if args.report_only or plan_file.exists():
            plan = json.loads(plan_file.read_text())
        else:
            plan = []
            for m in args.models:
                for b in args.batches:
                    plan.append(plan_row(m, b, calibrated(m, b, args.quiet_wait, deadline,
                                                          args.recalibrate)))
            plan_file.write_text(json.dumps(plan, indent=1))
        if not args.report_only:
            measure(plan, args.passes, args.repeats, out, args.quiet_wait, deadline)
        summary["rows"] = report(plan, out)
    summary["server"] = server(args.models, args.batches)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
