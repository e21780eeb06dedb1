"""The report page: one self-contained HTML file (figures as base64 PNG,
inline CSS, no script, nothing fetched) rendered from the summary dict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyparbench.report import plots
from pyparbench.report.legend import framework_label
from pyparbench.report.page import escape, figure, page, table
from pyparbench.report.summary import model_tag, regret_unsure

__all__ = ["model_anchor", "render_html"]


def model_anchor(model: str, batch: int, precision: str = "fp32") -> str:
    """The id of a model's section (``#model-resnet50-b1``; at bf16
    ``#model-resnet50-b1-bf16``)."""
    return f"model-{model}-b{batch}" + (f"-{precision}" if precision != "fp32" else "")


def _machine(summary: Mapping[str, Any]) -> str:
    m = summary["machine"]
    cpus = m.get("cpus", {})
    onednn = m.get("onednn", {})
    openmp = m.get("openmp", {})
    rows = [("fingerprint id", m.get("fingerprint_id", "")), ("host", m.get("host", "")),
            ("CPU", m.get("cpu_model", "")), ("frequency governor", m.get("governor") or "n/a"),
            ("logical CPUs / physical cores",
             f"{cpus.get('logical')} / {cpus.get('physical_cores')}"),
            ("sockets / NUMA nodes", f"{cpus.get('sockets')} / {cpus.get('numa_nodes')}"),
            ("CPUs allowed", ",".join(map(str, cpus.get("allowed", [])))),
            ("oneDNN",
             f"{onednn.get('version')} ({onednn.get('isa')}, {onednn.get('cpu_runtime')})"),
            ("OpenMP", openmp.get("library", "")),
            ("pyparbench / Python", f"{m.get('pyparbench')} / {m.get('python')}")]
    cond = summary.get("conditions") or {}
    if "busy_cpus_start" in cond:
        rows.append(("CPUs other processes used before the run",
                     f"{cond['busy_cpus_start']:.2f} of {cond.get('cpus')}"))
    if "loadavg_start" in cond:
        rows.append(("load average before the run",
                     f"{cond['loadavg_start']:.2f} on {cond.get('cpus')} CPUs"))
    out = ["<h2 id='machine'>Machine</h2>", table(["what", "value"], rows)]
    if cond.get("busy"):
        out.append(f"<p class='bad'>Note: {escape(cond['busy'])}.</p>")
    if cond.get("forced"):
        out.append(f"<p class='bad'>Merged with --force: {escape(cond['forced'])}.</p>")
    hosts = summary.get("hosts") or []
    if len(hosts) > 1:
        out.append(f"<p>The records were measured on {len(hosts)} hosts (or CPU sets of one "
                   "host); each operator's % of peak is of its own host's ceilings.</p>")
        out.append(table(
            ["host", "CPUs allowed", "layout", "configurations", "operator tasks",
             "FMA GFLOP/s", "fingerprint id"],
            [(h["host"], ",".join(map(str, h["cpus_allowed"] or [])), h["allowed_layout"] or "",
              h["configs"], h["operator_tasks"],
              f"{h['peak']['fma_gflops']:.1f}" if h["peak"] else "n/a", h["fingerprint_id"])
             for h in hosts], [False, False, False, True, True, True, False]))
    peak = summary.get("peak")
    if peak:
        clock = peak["clock"]
        readings = "; ".join(f"{k}: {v:.0f} MHz" for k, v in clock["readings"].items())
        out.append(f"<p>Ceilings (<code>pyparbench peak</code>): FMA kernel <b>{escape(peak['isa'])}"
                   f"</b> ({peak['lanes']} fp32 lanes, {peak['chains']} independent chains per "
                   f"thread, {'fused' if peak['fused'] else 'multiply + add'}). Theoretical "
                   f"peak = threads x {clock['mhz']:.0f} MHz x {peak['fma_pipes']} pipes x "
                   f"{peak['lanes']} lanes x 2; clock assumed from <i>{escape(clock['source'])}</i> "
                   f"(readings: {escape(readings)}). One thread reached "
                   f"{peak['fma_ops_per_cycle']:.2f} vector FMAs per cycle at the measured clock."
                   f" Triad arrays {peak['triad_array_bytes'] / 2**20:.0f} MiB each, gather "
                   f"table {peak['gather_table_bytes'] / 2**20:.0f} MiB (dim "
                   f"{peak['gather_dim']}, {peak['gather_bag']} rows per bag); last-level cache "
                   f"{peak['llc_bytes'] / 2**20:.0f} MiB. Best of the repeats (median in "
                   f"brackets).</p>")
        points = [(p["threads"], f"{p['fma_gflops']:.1f} ({p['fma_gflops_median']:.1f})",
                 f"{p['theoretical_gflops']:.1f}",
                 f"{100 * p['fma_gflops'] / p['theoretical_gflops']:.0f}%",
                 f"{p['triad_gbs']:.1f} ({p['triad_gbs_median']:.1f})",
                 f"{p['gather_gbs']:.1f} ({p['gather_gbs_median']:.1f})")
                  for p in peak["points"]]
        out.append(table(["threads", "FMA GFLOP/s", "theoretical", "of theoretical",
                           "triad GB/s", "gather GB/s"], points, [True] * 6))
        if peak.get("fma_warning"):
            out.append(f"<p><b>Warning:</b> {escape(peak['fma_warning'])}</p>")
    return "\n".join(out)


def _overview(summary: Mapping[str, Any]) -> str:
    rows = []
    for m in summary["models"]:
        link = model_tag(m)
        if m["best"] is None:
            rows.append((link, "all failed", "", "", "", "", "", "", ""))
            continue
        sp = m.get("speedup", {})
        pred = m.get("prediction")
        rows.append((link, f"{m['best']['median_ms']:.4g}", m["best"]["label"],
                     *[f"x{sp[k]:.2f}" if k in sp else "-"
                       for k in ("tensorflow", "intel", "tftuner")],
                     *[_regret_cell(m, k) for k in ("tftuner", "recommended")],
                     "-" if pred is None else f"{100 * pred['error']:+.0f}%"))
    c = summary["counts"]
    head = (f"<p>{c['configs']} configurations ({c['ok']} ok, {c['failed']} not), "
            f"{c['operator_tasks']} operator measurements ({c['operator_failed']} not ok). "
            f"Speed-up: a preset's median latency over the best setting's; regret: how much "
            f"slower the study's tuner's choice, and the recommender's, are than the best "
            f"measured, with its 95 % interval over processes in brackets (from how far the "
            f"processes of one setting differ on this run{_spread_note(summary)}); ?: the "
            f"interval includes 0, so these processes cannot tell the choice from the best; "
            f"prediction: the recommender's predicted latency of its setting against the "
            f"measured one.</p>")
    links = " ".join(f"<a href='#{_anchor(m)}'>{escape(model_tag(m))}</a>"
                     for m in summary["models"])
    return head + table(["model", "best ms", "best setting", "vs tensorflow", "vs intel",
                          "vs tftuner", "tuner regret", "recommended regret", "prediction"],
                         rows, [False, True, False, True, True, True, True, True, True]
                         ) + f"<p>{links}</p>"


def _regret_cell(m: Mapping[str, Any], chooser: str) -> str:
    """'4.1%? [-1.2, +9.8]': the regret, ? when its interval includes 0, the interval."""
    regret = m.get("regret", {}).get(chooser)
    if regret is None:
        return "-"
    text = f"{100 * regret:.1f}%" + ("?" if regret_unsure(m, chooser) else "")
    interval = (m.get("regret_interval") or {}).get(chooser)
    if interval is not None and interval["high"] > interval["low"]:
        text += f" [{100 * interval['low']:+.1f}, {100 * interval['high']:+.1f}]"
    return text


def _spread_note(summary: Mapping[str, Any]) -> str:
    spread = summary.get("spread")
    if not spread:
        return ": no setting was measured twice, so there are no intervals"
    return (f": {100 * spread['sigma']:.1f} % between processes, from "
            f"{spread['settings']} settings measured in several")


def _anchor(m: Mapping[str, Any]) -> str:
    return model_anchor(m["model"], m["batch"], m.get("precision", "fp32"))


def _model_section(m: Mapping[str, Any]) -> str:
    precision = m.get("precision", "fp32")
    tag = f"{m['model']} batch {m['batch']}" + (f" {precision}" if precision != "fp32" else "")
    out = [f"<section class='model' id='{_anchor(m)}'>",
           f"<h3>{escape(tag)}</h3>"]
    g = m.get("graph")
    if g:
        out.append(f"<p class='note'>{g['gflops']:.3g} GFLOPs per pass, {g['heavy_ops']} heavy "
                   f"ops, heavy depth {g['depth']}, average width {g['avg_width']:.2f}; "
                   f"{m['total']} settings, {m['failed']} failed.</p>")
    if m["best"] is None:
        out.append("<p class='bad'>Every configuration of this model failed.</p></section>")
        return "\n".join(out)
    if m["failed"]:
        out.append(f"<p class='bad'>{m['failed']} of {m['total']} configurations failed; "
                   "the figures use the others.</p>")
    out.append("<div class='figs'>")
    out.append(figure(plots.heatmap_png(m), f"{tag}: inter_op x intra_op heatmap"))
    out.append(figure(plots.speedup_png(m), f"{tag}: speed-up over the presets"))
    out.append(figure(plots.model_effects_png(m), f"{tag}: layer effects"))
    out.append("</div>")
    eff = m.get("effects", {})
    if eff:
        rows = [(e["name"], f"{e['ratio']:.2f}", e["numerator"]["label"],
                 f"{e['numerator']['median_ms']:.4g}", e["denominator"]["label"],
                 f"{e['denominator']['median_ms']:.4g}") for e in eff.values()]
        out.append(table(["ratio", "value", "numerator", "ms", "denominator", "ms"], rows,
                          [False, True, False, True, False, True]))
    every = [(c["label"], f"{c['median_ms']:.4g}", f"{c['q1_ms']:.4g} - {c['q3_ms']:.4g}")
             for c in m["configs"]]
    out.append("<details><summary>every setting measured</summary>"
               + table(["setting", "median ms", "IQR ms"], every, [False, True, True])
               + "</details>")
    out.append("</section>")
    return "\n".join(out)


def _operators(summary: Mapping[str, Any]) -> str:
    ops = summary.get("operators", {})
    scaling, roofline = ops.get("scaling", []), ops.get("roofline", [])
    out = ["<h2 id='scaling'>Operator scaling</h2>"]
    if scaling:
        out.append("<p class='note'>Standard shapes (from <code>bench/shapes</code>) as prepared "
                   "kernels timed in their C++ loop, one pinned thread per core. Percent: of "
                   "the ceiling that bounds the op at that thread count (compute, triad "
                   "bandwidth x intensity, or gather bandwidth).</p>")
        out.append(figure(plots.scaling_png(scaling), "operator scaling curves"))
        rows = []
        for s in scaling:
            for p in s["points"]:
                rows.append((s["name"], p["threads"], f"{p['median_ms']:.4g}",
                             f"{p['gflops']:.1f}", f"{p['gbs']:.1f}", f"{p['intensity']:.3g}",
                             p["bound"], f"{p['percent']:.0f}%"))
        out.append(table(["shape", "threads", "ms", "GFLOP/s", "GB/s", "FLOP/B", "bound",
                           "of bound"], rows, [False, True, True, True, True, True, False,
                                               True]))
        out.append("<p class='note'>Sources: " + "; ".join(
            f"{escape(s['name'])}: {escape(s['source'])}" for s in scaling) + "</p>")
    else:
        out.append("<p>No operator scaling measured in this run.</p>")
    out.append("<h2 id='roofline'>Roofline</h2>")
    img = plots.roofline_png(roofline, scaling, summary.get("peak"))
    if img is None:
        out.append("<p>No roofline points in this run.</p>")
        return "\n".join(out)
    out.append("<p class='note'>Each heavy node of the suite's models (median of per-node "
               "traces, the graph run synchronously on every core with oneDNN) at its "
               "arithmetic intensity from the graph analysis.</p>")
    out.append(figure(img, "roofline"))
    for r in roofline:
        nodes = [(n["name"], n["op"], "x".join(map(str, n.get("shape") or [])),
                 f"{n['median_ms']:.4g}", f"{n['gflops']:.1f}", f"{n['gbs']:.1f}",
                 f"{n['intensity']:.3g}", n["bound"], f"{n['percent']:.0f}%")
                 for n in r["nodes"]]
        out.append(f"<details><summary>{escape(r['model'])} b{r['batch']}: {len(nodes)} heavy "
                   f"nodes at {r['threads']} threads, graph {r['graph_ms']:.4g} ms</summary>"
                   + table(["node", "op", "output", "ms", "GFLOP/s", "GB/s", "FLOP/B",
                             "bound", "of bound"], nodes,
                            [False, False, False, True, True, True, True, False, True])
                   + "</details>")
    return "\n".join(out)


def _generation(summary: Mapping[str, Any]) -> str:
    entries = (summary.get("operators") or {}).get("generation") or []
    if not entries:
        return ""
    out = ["<h2 id='generation'>Generation</h2>",
           "<p class='note'>A built-in decoder generating greedily at each thread count, "
           "each generation in a fresh process pinned to its threads' CPUs (one untimed "
           "generation first), natively, and in llama.cpp and PyTorch (transformers' "
           "LlamaForCausalLM) on the same weights where they are installed. Prefill: the "
           "prompt's tokens per second of the time to first token "
           "(TTFT: the prompt's step and the first token's choice); decode: tokens per second "
           "of the time per output token after it (TPOT, the median token step); GB/s: the "
           "bytes a token step reads (weights, one embedding row per sequence, the cache at "
           "its mean length) over TPOT.</p>"]
    for g in entries:
        tag = f"{g['model']}: batch {g['batch']}, prompt {g['prompt']} + {g['new']} new"
        img = plots.generation_png(g)
        if img is not None:
            out.append(figure(img, f"{tag}: tokens/s against threads"))
        rows = [(p["framework"], p["threads"], f"{p['prefill_tokens_per_s']:.0f}",
                 f"{p['tokens_per_s']:.1f}", f"{p['ttft_ms']:.3g}", f"{p['tpot_ms']:.3g}",
                 f"{p['bytes_per_token'] / 1e6:.2f}", f"{p['decode_gbs']:.2f}")
                for p in g["points"]]
        out.append(f"<h3>{escape(tag)}</h3>" + table(
            ["runtime", "threads", "prefill tok/s", "decode tok/s", "TTFT ms", "TPOT ms",
             "MB/token", "decode GB/s"], rows, [False] + [True] * 7))
    return "\n".join(out)


def _overhead(summary: Mapping[str, Any]) -> str:
    items = summary.get("framework_overhead")
    out = ["<h2 id='overhead'>Framework overhead</h2>"]
    if not items:
        out.append("<p>No framework ran in this run, so there is no framework overhead to "
                   "show.</p>")
        return "\n".join(out)
    out.append(figure(plots.overhead_png(items), "framework overhead"))
    out.append("<p>The same graph, weights and input in each framework, in its own process "
               "pinned to the same CPUs as the native run beside it. Overhead: framework "
               "latency minus the native executor's, as a share of the framework's; a "
               "negative overhead means the framework ran the graph faster than pyparbench's "
               "executor did. Both runs meet the same kernels' cache misses (the same "
               "graph and weights), so the difference is the runtimes' own cost, not memory "
               "effects. <code>pyparbench overhead MODEL</code> splits it per op type with "
               "each framework's profiler, and splits the native time outside kernels into "
               "executor cost and memory / cache effects (kernels timed with the chain's "
               "data between calls).</p>")
    rows = [(i["model"], i["batch"], framework_label(i), i["setting"],
             f"{i['native_ms']:.4g}", f"{i['framework_ms']:.4g}", f"{i['overhead_ms']:.4g}",
             f"{i['overhead_pct']:.0f}%", f"x{i['framework_ms'] / i['native_ms']:.2f}"
             if i["native_ms"] > 0 else "-", _agreement_cell(i)) for i in items]
    out.append(table(["model", "batch", "framework", "setting", "native ms", "framework ms",
                       "overhead ms", "overhead", "framework / native",
                       "outputs: max |native - framework| / max |framework|"], rows,
                      [False, True, False, False, True, True, True, True, True, True]))
    if any("output_error" in i for i in items):
        out.append("<p>The outputs are compared where ONNX Runtime runs a user's file as it "
                   "is (not a translation of pyparbench's graph): one run of each on the same "
                   "inputs.</p>")
    out.append(_framework_presets(summary.get("framework_presets") or []))
    return "\n".join(out)


def _framework_presets(items: Sequence[Mapping[str, Any]]) -> str:
    """A framework under its own presets against itself under the shared setting."""
    if not items:
        return ""
    rows = []
    for i in items:
        compiled = i.get("compiled") or {}
        chose = ", ".join(f"{k} {compiled[k]}" for k in ("NUM_STREAMS", "INFERENCE_NUM_THREADS")
                          if compiled.get(k) is not None) or "-"
        rows.append((i["model"], i["batch"], framework_label(i), i["preset"], f"{i['ms']:.4g}",
                     i["setting"] or "-",
                     f"{i['setting_ms']:.4g}" if i["setting_ms"] is not None else "-",
                     f"x{i['ratio']:.2f}" if i["ratio"] is not None else "-", chose))
    return ("<h3>A framework's own tuner</h3><p>OpenVINO under its LATENCY and THROUGHPUT "
            "hints (its tuner picks streams and threads, on every CPU) against OpenVINO under "
            "the setting it shares with the native executor; above 1, the shared setting is "
            "faster.</p>"
            + table(["model", "batch", "framework", "preset", "ms", "shared setting",
                     "shared ms", "preset / shared", "its tuner chose"], rows,
                    [False, True, False, False, True, False, True, True, False]))


def _agreement_cell(item: Mapping[str, Any]) -> str:
    if "output_error" not in item:
        return "-"
    if item["output_error"] is None:
        return f"not compared: {item.get('output_error_note') or 'no outputs'}"
    return f"{item['output_error']:.1e}"


def _failures(summary: Mapping[str, Any]) -> str:
    fails = summary.get("failures") or []
    if not fails:
        return ""
    rows = [(f["model"], f["batch"], f["setting"], f["status"], f["error"]) for f in fails]
    return ("<h2 id='failures' class='bad'>Failed configurations</h2>"
            + table(["model", "batch", "setting", "status", "error"], rows))


def render_html(summary: Mapping[str, Any]) -> str:
    """The whole page for a summary dict."""
    effects = plots.effects_png(summary["models"])
    return page("pyparbench report", [
        (f"<p class='note'>Generated {escape(summary['generated'])}. Every latency is the median "
         "of its repeats, each configuration run in a fresh process.</p>"),
        _machine(summary),
        "<h2 id='summary'>Best setting vs the presets</h2>", _overview(summary),
        "<h2 id='effects'>Scheduler, Operator and Library effects</h2>",
        ("<p class='note'>As the study's figures: per model, the best latency with the first "
         "option over the best with the second, the other knobs free.</p>"),
        figure(effects, "scheduler, operator and library effects") if effects else
        "<p>Not enough settings measured to compare the layers.</p>",
        "<h2 id='models'>Models</h2>",
        *[_model_section(m) for m in summary["models"]],
        _operators(summary), _generation(summary), _overhead(summary), _failures(summary),
    ], heading="pyparbench: parallelism settings, operators and ceilings")
