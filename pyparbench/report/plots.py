"""The report's figures, drawn from the summary dict (:mod:`.summary`) with
matplotlib's Agg renderer and returned as PNG bytes (None when there is
nothing to draw). No pyplot: figures are made directly, so nothing global
(backend, open figures) is touched."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from pyparbench.report.legend import framework_label
from pyparbench.report.page import png_bytes
from pyparbench.report.summary import model_tag

__all__ = ["effects_png", "generation_png", "heatmap_png", "model_effects_png", "overhead_png",
           "roofline_png", "scaling_png", "speedup_png"]

_PRESET_SHORT = {"tensorflow": "TensorFlow defaults", "intel": "Intel's advice",
                 "tftuner": "study's tuner"}
_EFFECT_SHORT = {"scheduler": "sync/async", "operator": "framework/library",
                 "library_eigen": "eigen/onednn", "library_blas": "blas/onednn",
                 "pool_std": "std/openmp pool", "pool_eigen": "eigen/openmp pool"}
_OP_MARKERS = {"conv2d": "o", "linear": "s", "matmul": "^", "embedding_bag": "D"}


def _tag(entry: Mapping[str, Any]) -> str:
    return model_tag(entry)


def heatmap_png(entry: Mapping[str, Any]) -> bytes | None:
    """inter_op x intra_op: the fastest setting measured at each cell (ms)."""
    grid = entry.get("grid") or []
    if not grid:
        return None
    inters = sorted({c["inter_op"] for c in grid})
    intras = sorted({c["intra_op"] for c in grid})

    z = np.full((len(inters), len(intras)), np.nan)
    for c in grid:
        z[inters.index(c["inter_op"]), intras.index(c["intra_op"])] = c["median_ms"]
    fig = Figure(figsize=(1.6 + 1.1 * len(intras), 1.2 + 0.8 * len(inters)))
    ax = fig.add_subplot()
    masked = np.ma.masked_invalid(z)
    im = ax.imshow(masked, cmap="viridis_r", aspect="auto", origin="lower")
    best = float(np.nanmin(z))
    for i in range(len(inters)):
        for j in range(len(intras)):
            if np.isnan(z[i, j]):
                ax.text(j, i, "-", ha="center", va="center", color="grey")
                continue
            text = f"{z[i, j]:.3g} ms"
            if z[i, j] == best:
                text += "\nbest"
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if z[i, j] > (best + float(np.nanmax(z))) / 2 else "black")
    ax.set_xticks(range(len(intras)), [str(v) for v in intras])
    ax.set_yticks(range(len(inters)), [str(v) for v in inters])
    ax.set_xlabel("intra_op threads")
    ax.set_ylabel("inter_op workers")
    ax.set_title(f"{_tag(entry)}: fastest setting per cell", fontsize=9)
    fig.colorbar(im, ax=ax, label="median ms")
    return png_bytes(fig)


def speedup_png(entry: Mapping[str, Any]) -> bytes | None:
    """The best setting's speed-up over each preset (bars; 1 = no gain)."""
    speedup = entry.get("speedup") or {}
    if not speedup:
        return None
    names = list(speedup)
    fig = Figure(figsize=(5.0, 0.6 + 0.45 * len(names)))
    ax = fig.add_subplot()
    vals = [speedup[n] for n in names]
    bars = ax.barh([_PRESET_SHORT.get(n, n) for n in names], vals, color="#4c72b0")
    ax.bar_label(bars, labels=[f"x{v:.2f}" for v in vals], padding=3, fontsize=8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlim(0, max(vals) * 1.2)
    ax.set_xlabel("best setting's speed-up over the preset")
    ax.set_title(f"{_tag(entry)}: best {entry['best']['median_ms']:.3g} ms "
                 f"({entry['best']['label']})", fontsize=8)
    return png_bytes(fig)


def _ratio_axis(ax: Axes, values: Sequence[float]) -> None:
    """A log axis centred on 1, so x2 and x0.5 look alike and an outlier
    does not flatten the rest."""
    lo, hi = min([1.0, *values]) / 1.6, max([1.0, *values]) * 1.6
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.axhline(1.0, color="black", lw=0.8)
    base = 2.0 if hi / lo < 2.0 ** 10 else 10.0
    ticks = [base ** k for k in range(math.floor(math.log(lo, base)),
                                      math.ceil(math.log(hi, base)) + 1)]
    ax.yaxis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _bars_from_one(ax: Axes, xs: Sequence[float], values: Sequence[float], width: float,
                   color: str, label: str | None = None) -> None:
    # Bars start at 1 (no effect) and go up (second faster) or down.
    bars = ax.bar(xs, [v - 1.0 for v in values], bottom=1.0, width=width, color=color,
                  label=label)
    for b, v in zip(bars, values, strict=True):
        ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v), ha="center",
                    va="bottom" if v >= 1 else "top", fontsize=7,
                    xytext=(0, 2 if v >= 1 else -2), textcoords="offset points")


def _ratio_bars(ax: Axes, labels: Sequence[str], values: Sequence[float], color: str) -> None:
    _bars_from_one(ax, list(range(len(values))), values, 0.8, color)
    _ratio_axis(ax, values)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)


def model_effects_png(entry: Mapping[str, Any]) -> bytes | None:
    """One model's layer effects as latency ratios (above 1: the second is faster)."""
    effects = entry.get("effects") or {}
    if not effects:
        return None
    keys = list(effects)
    fig = Figure(figsize=(1.2 + 0.9 * len(keys), 2.8))
    ax = fig.add_subplot()
    _ratio_bars(ax, [_EFFECT_SHORT.get(k, k) for k in keys],
                [effects[k]["ratio"] for k in keys], "#55a868")
    ax.set_ylabel("latency ratio")
    ax.set_title(f"{_tag(entry)}: scheduler, operator, library effects", fontsize=9)
    return png_bytes(fig)


def effects_png(models: Sequence[Mapping[str, Any]]) -> bytes | None:
    """The study's three layers side by side, one ratio bar per model:
    Scheduler (sync / async), Operator (framework / library), Library
    (eigen and blas / onednn)."""
    panels = [("Scheduler: sync / async", ["scheduler"], ["#4c72b0"]),
              ("Operator: framework / library", ["operator"], ["#55a868"]),
              ("Library: eigen, blas / onednn", ["library_eigen", "library_blas"],
               ["#c44e52", "#8172b2"])]
    if not any(k in m.get("effects", {}) for m in models for _, ks, _ in panels for k in ks):
        return None
    fig = Figure(figsize=(4.0 + 0.9 * len(models), 3.2 * len(panels)))
    axes = fig.subplots(len(panels), 1)
    tags = [_tag(m) for m in models]
    for ax, (title, keys, colors) in zip(axes, panels, strict=True):
        width = 0.8 / len(keys)
        shown: list[float] = []
        for i, (key, color) in enumerate(zip(keys, colors, strict=True)):
            xs, vals = [], []
            for j, m in enumerate(models):
                e = m.get("effects", {}).get(key)
                if e is not None:
                    xs.append(j + (i - (len(keys) - 1) / 2) * width)
                    vals.append(e["ratio"])
            if vals:
                _bars_from_one(ax, xs, vals, width, color, _EFFECT_SHORT[key])
                shown += vals
        _ratio_axis(ax, shown)
        ax.set_xticks(range(len(tags)), tags, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("latency ratio (log)")
        ax.set_title(title + " (above 1: the second is faster)", fontsize=9)
        if len(keys) > 1 and ax.get_legend_handles_labels()[0]:  # none where no model has them
            ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def scaling_png(scaling: Sequence[Mapping[str, Any]]) -> bytes | None:
    """GFLOP/s (GEMM, convolution) or GB/s (embedding) against threads, one
    panel per kind, each shape's ceiling dotted in its colour."""
    kinds = [k for k in ("gemm", "conv", "embedding") if any(s["kind"] == k for s in scaling)]
    if not kinds:
        return None
    fig = Figure(figsize=(4.2 * len(kinds), 3.6))
    axes = fig.subplots(1, len(kinds), squeeze=False)[0]
    titles = {"gemm": "GEMM (DeepBench)", "conv": "convolution (ResNet-50 layers)",
              "embedding": "embedding bag (DLRM tables)"}
    for ax, kind in zip(axes, kinds, strict=True):
        gb = kind == "embedding"
        for s in (s for s in scaling if s["kind"] == kind):
            t = [p["threads"] for p in s["points"]]
            y = [p["gbs"] if gb else p["gflops"] for p in s["points"]]
            line = ax.plot(t, y, marker="o", label=s["name"])[0]
            roof = [p["ceiling"] for p in s["points"]]
            ax.plot(t, roof, ls=":", color=line.get_color(), lw=1)
        ax.set_xlabel("threads")
        ax.set_ylabel("GB/s" if gb else "GFLOP/s")
        ax.set_title(titles[kind] + "; dotted: ceiling", fontsize=9)
        ax.set_xticks(sorted({p["threads"] for s in scaling for p in s["points"]}))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def generation_png(entry: Mapping[str, Any]) -> bytes | None:
    """A decoder's tokens/s against threads: prefill (solid) and decode
    (dashed), one colour per runtime; log tokens/s, as prefill runs many
    times faster than decode on a large model."""
    points = entry.get("points") or []
    if not points:
        return None
    fig = Figure(figsize=(5.6, 3.6))
    ax = fig.add_subplot()
    names = {"native": "native", "llamacpp": "llama.cpp", "torch": "PyTorch",
             "onnxruntime": "ONNX Runtime"}
    for framework in entry["frameworks"]:
        mine = sorted((p for p in points if p["framework"] == framework),
                      key=lambda p: p["threads"])
        t = [p["threads"] for p in mine]
        line = ax.plot(t, [p["prefill_tokens_per_s"] for p in mine], marker="o",
                       label=f"{names.get(framework, framework)} prefill")[0]
        ax.plot(t, [p["tokens_per_s"] for p in mine], marker="s", ls="--",
                color=line.get_color(), label=f"{names.get(framework, framework)} decode")
    ax.set_yscale("log")
    ax.set_xticks(sorted({p["threads"] for p in points}))
    ax.set_xlabel("threads")
    ax.set_ylabel("tokens/s")
    ax.set_title(f"{entry['model']}: prompt {entry['prompt']} + {entry['new']} new, batch "
                 f"{entry['batch']}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png_bytes(fig)


def roofline_png(roofline: Sequence[Mapping[str, Any]], scaling: Sequence[Mapping[str, Any]],
                 peak: Mapping[str, Any] | None) -> bytes | None:
    """Every heavy node of the suite (and each standard shape at the most
    threads) on the roofline of this machine at the most threads measured."""
    if peak is None or not (roofline or scaling):
        return None

    top = peak["points"][-1]
    fig = Figure(figsize=(9.0, 5.5))
    ax = fig.add_subplot()
    xs = [n["intensity"] for r in roofline for n in r["nodes"]]
    xs += [s["points"][-1]["intensity"] for s in scaling]
    lo = min([0.05, *[x for x in xs if x > 0]]) / 2
    hi = max([1000.0, *xs]) * 2
    ai = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.plot(ai, np.minimum(top["fma_gflops"], ai * top["triad_gbs"]), color="black",
            label=f"FMA {top['fma_gflops']:.0f} GFLOP/s, triad {top['triad_gbs']:.0f} GB/s")
    ax.plot(ai, np.minimum(top["fma_gflops"], ai * top["gather_gbs"]), color="black", ls="--",
            lw=0.8, label=f"gather {top['gather_gbs']:.0f} GB/s (embedding bags)")
    ax.axhline(top["theoretical_gflops"], color="grey", ls=":", lw=0.8,
               label=f"theoretical {top['theoretical_gflops']:.0f} GFLOP/s")
    ax.scatter([], [], marker="x", color="black", label="standard shape")
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3",
               "#8c8c8c", "#ccb974", "#64b5cd"]
    # Legends in the figure's right margin (kept by savefig, unlike an axes' extra legend).
    fig.subplots_adjust(right=0.7)
    fig.legend(*ax.get_legend_handles_labels(), fontsize=6, loc="upper left",
               bbox_to_anchor=(0.71, 0.88), title="ceilings", title_fontsize=7)
    model_handles = []
    ops_seen: set[str] = set()
    for i, r in enumerate(roofline):
        color = palette[i % len(palette)]
        for op, marker in _OP_MARKERS.items():
            pts = [n for n in r["nodes"] if n["op"] == op and n["intensity"] > 0
                   and n["gflops"] > 0]
            if pts:
                ops_seen.add(op)
                ax.scatter([n["intensity"] for n in pts], [n["gflops"] for n in pts],
                           marker=marker, s=18, color=color, alpha=0.75, edgecolors="none")
        model_handles.append(Patch(color=color, label=f"{r['model']} b{r['batch']}"))
    op_handles = [Line2D([], [], ls="", marker=m, color="black", label=op)
                  for op, m in _OP_MARKERS.items() if op in ops_seen]
    if model_handles:
        fig.legend(handles=model_handles + op_handles, fontsize=6, loc="lower left",
                   bbox_to_anchor=(0.71, 0.11), title="heavy nodes", title_fontsize=7)
    for s in scaling:
        p = s["points"][-1]
        if p["intensity"] > 0 and p["gflops"] > 0:
            ax.scatter([p["intensity"]], [p["gflops"]], marker="x", color="black", s=30)
            ax.annotate(s["name"], (p["intensity"], p["gflops"]), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=2.0 * max(top["theoretical_gflops"], top["fma_gflops"]))
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"roofline at {top['threads']} threads; x: standard shapes", fontsize=9)
    return png_bytes(fig)


def overhead_png(items: Sequence[Mapping[str, Any]] | None) -> bytes | None:
    """Framework latency over native latency, per model and batch, one bar
    per framework run (1: as fast as pyparbench's executor)."""
    if not items:
        return None
    def group(i: Mapping[str, Any]) -> str:  # a precision other than fp32 is its own group
        precision = i.get("precision", "fp32")
        return f"{i['model']} b{i['batch']}" + ("" if precision == "fp32" else f" {precision}")

    groups = list(dict.fromkeys(group(i) for i in items))
    runs = list(dict.fromkeys(framework_label(i) for i in items))
    ratio = {(group(i), framework_label(i)): i["framework_ms"] / i["native_ms"]
             for i in items if i["native_ms"] > 0}
    fig = Figure(figsize=(min(16.0, 2.0 + 0.9 * len(groups) * max(1, len(runs)) / 3), 3.4))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(runs))
    for k, run in enumerate(runs):
        xs = [g + (k - (len(runs) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [ratio.get((grp, run), 0.0) for grp in groups], width=width, label=run)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(range(len(groups))), groups, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("framework / native latency")
    ax.set_title("each framework's latency over pyparbench's executor (same graph, "
                 "settings and weights)", fontsize=9)
    ax.legend(fontsize=7, ncol=min(4, len(runs)))
    return png_bytes(fig)
