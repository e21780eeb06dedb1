"""The recommender against an exhaustive sweep measured on this machine.

  python bench/recommend_regret.py                       # default suite, 3 passes
  python bench/recommend_regret.py --models googlenet --batches 1 --passes 1
  python bench/recommend_regret.py --server-only         # the synthetic 2-socket server

For every model and batch of the default suite (ResNet-50, GoogLeNet,
FC-512, DLRM Criteo-Kaggle, the BERT encoder layer, at batch 1 and 8):

1. ``pyparbench.recommend`` (calibrated on this machine, cached) gives its
   setting and a predicted latency for every setting below.
2. Every setting is measured in a fresh process
   (``pyparbench.runner.run_config``): the presets (TensorFlow's defaults,
   Intel's advice, the study's tuner), the suite's sweep, every candidate of
   the recommender on this machine (sync / async, inter x intra, library /
   framework with each pool, instances), and the recommended setting itself
   as its own configuration. ``--passes`` passes interleave the whole list
   (a slow spell of the machine hits every setting alike); a setting's
   figure is the median over passes of each process's median.
3. Regret = ours / best measured - 1; the tuner's ratio to ours; the
   simulation's prediction error (predicted / measured - 1) for ours and
   over every measured setting.

Then the recommendation for a synthetic 2-socket, 28-core server
("package:2 core:28 pu:2", analytic model) for each model, with its reasons.
Raw records go to ``<out>/pass<k>.jsonl`` (an interrupted run resumes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from pyparbench import models
from pyparbench.recommend import Prediction, Recommendation, Resources, predict, recommend
from pyparbench.runner import Config, ResultStore, run_configs
from pyparbench.settings import PRESETS, Settings, allowed_cores, preset
from pyparbench.suite import DEFAULT_BATCHES, DEFAULT_MODELS, sweep
from pyparbench.threading.topology import topology

SERVER = "package:2 core:28 pu:2"


def _key(s: Settings) -> str:
    """A setting's identity without its name (a preset equal to a sweep point
    is one setting)."""
    return json.dumps(s.with_(name="").as_dict(), sort_keys=True)


def settings_for(rec: Recommendation, graph_name: str, batch: int) -> list[Settings]:
    """Presets, the suite's sweep, the recommender's candidates, ours."""
    topo = topology()
    cores = allowed_cores(topo)
    graph = models.build(graph_name, batch)
    chosen: dict[str, Settings] = {}
    for p in PRESETS:
        s = preset(p, topo, graph)
        chosen.setdefault(_key(s), s)
    for s in sweep(cores) + [c.settings for c in rec.candidates]:
        chosen.setdefault(_key(s), s)
    out = list(chosen.values())
    out.append(rec.settings)  # measured as its own configuration, named "recommended"
    return out


def measure(rows: list[tuple[str, int, Recommendation]], passes: int, repeats: int,
            out: Path) -> dict[tuple[str, int], dict[str, list[float]]]:
    """Every row's settings in fresh processes, ``passes`` times; returns
    (model, batch) -> setting label key -> per-pass medians (ns)."""
    configs = [Config(m, b, s, repeats=repeats) for m, b, rec in rows
               for s in settings_for(rec, m, b)]
    got: dict[tuple[str, int], dict[str, list[float]]] = {}
    for k in range(passes):
        store = ResultStore(out / f"pass{k}.jsonl")
        n = len(configs)
        for i, r in enumerate(run_configs(configs, store), 1):
            c = r["config"]
            label = f"{r['status']:5s} {c['model']} b{c['batch']} "
            print(f"\rpass {k + 1}/{passes}: {i}/{n} {label:40s}", end="", file=sys.stderr)
            if r["status"] != "ok":
                continue
            s = Config.from_dict(c).settings
            name = "recommended" if s.name == "recommended" else _key(s)
            got.setdefault((c["model"], c["batch"]), {}).setdefault(name, []).append(
                r["summary"]["median"])
        print(file=sys.stderr)
    return got


def _pred(rec: Recommendation, model_name: str, batch: int, s: Settings) -> Prediction | None:
    """The recommender's prediction of any setting (None: its cost model has
    no figures for it, e.g. a math library it did not calibrate)."""
    for c in [*rec.candidates, *rec.presets.values()]:
        if _key(c.settings) == _key(s):
            return c
    from pyparbench.recommend.calibrate import load_calibration

    model = load_calibration().model()
    try:
        return predict(models.build(model_name, batch), s, model,
                       Resources.from_topology(topology()))
    except KeyError:
        return None


def report(rows: list[tuple[str, int, Recommendation]],
           measured: dict[tuple[str, int], dict[str, list[float]]]) -> list[dict[str, Any]]:
    """One summary dict per row, and prints the table."""
    out = []
    for m, b, rec in rows:
        got = measured.get((m, b), {})
        med = {k: statistics.median(v) for k, v in got.items() if v}
        if "recommended" not in med or not med:
            continue
        ours = med["recommended"]
        best_key = min(med, key=med.__getitem__)
        best = med[best_key]
        presets: dict[str, float | None] = {
            name: med.get(_key(pred.settings)) for name, pred in rec.presets.items()}
        errors = []
        for k, v in med.items():
            if k == "recommended":
                continue
            guess = _pred(rec, m, b, _settings(k))
            if guess is not None:
                errors.append(guess.latency_ns / v - 1)
        tuner = presets.get("tftuner")
        row: dict[str, Any] = {
            "model": m, "batch": b,
            "best_ms": best / 1e6,
            "best": "recommended" if best_key == "recommended" else _settings(best_key).label(),
            "ours": rec.settings.label().replace("recommended ", ""),
            "ours_ms": ours / 1e6,
            "regret": ours / min(v for k, v in med.items()) - 1,
            "regret_vs_others": ours / min(v for k, v in med.items() if k != "recommended") - 1,
            "tuner_over_ours": tuner / ours if tuner else None,
            "presets_ms": {k: (v / 1e6 if v else None) for k, v in presets.items()},
            "pred_ms": rec.predicted.latency_ns / 1e6,
            "pred_error_ours": rec.predicted.latency_ns / ours - 1,
            "pred_abs_error_median": statistics.median(abs(e) for e in errors) if errors else None,
            "pred_abs_error_max": max(abs(e) for e in errors) if errors else None,
            "settings_measured": len(med),
            "passes": min(len(v) for v in got.values()),
        }
        out.append(row)
    print("\n| model | batch | best measured | tensorflow | intel | tftuner | ours | regret "
          "| tuner / ours | pred. error ours | median / max abs pred. error (all settings) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    def ms(v: float | None) -> str:
        return f"{v:.3f}" if v is not None else "-"

    for r in out:
        p = r["presets_ms"]
        print(f"| {r['model']} | {r['batch']} | {r['best_ms']:.3f} ms ({r['best']}) | "
              f"{ms(p['tensorflow'])} | {ms(p['intel'])} | {ms(p['tftuner'])} | "
              f"{r['ours_ms']:.3f} ({r['ours']}) | {r['regret']:+.1%} | "
              f"{ms(r['tuner_over_ours'])}x | {r['pred_error_ours']:+.1%} | "
              f"{r['pred_abs_error_median']:.1%} / {r['pred_abs_error_max']:.1%} |")
    return out


def _settings(key: str) -> Settings:
    d = json.loads(key)
    if isinstance(d["affinity"], list):
        d["affinity"] = tuple(tuple(c) for c in d["affinity"])
    return Settings(**d)


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
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per process")
    ap.add_argument("-o", "--out", default="recommend-regret", help="directory for results")
    ap.add_argument("--recalibrate", action="store_true")
    ap.add_argument("--server-only", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    if not args.server_only:
        rows = []
        for m in args.models:
            for b in args.batches:
                rec = recommend(models.build(m, b), recalibrate=args.recalibrate)
                print(f"{m} b{b}: {rec.settings.label()} predicted "
                      f"{rec.predicted.latency_ns / 1e6:.3f} ms; {rec.reasons[0]}",
                      file=sys.stderr)
                rows.append((m, b, rec))
        measured = measure(rows, args.passes, args.repeats, out)
        summary["rows"] = report(rows, measured)
        summary["recommendations"] = [rec.as_dict() for _, _, rec in rows]
    summary["server"] = server(args.models, args.batches)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
