"""The native executor with and without the graph passes, against PyTorch
(eager, torch.jit.freeze) and ONNX Runtime running the same architecture
with the same weights, side by side in one run; plus embedding_bag against
PyTorch's. Every runtime is measured in its own fresh process (two OpenMP
runtimes in one process distort each other), pinned to the same threads.

    python bench/figures_fusion.py [--models resnet50,...] [--batches 1,8] [--threads 2]

Prints medians (ms) with their interquartile range and native's ratio to the
fastest framework (above 1: native is faster). The framework models are
the Graph interpreted by torch.nn.functional calls (what a user's
nn.Module does per layer), traced and frozen for torch.jit, exported from
that trace to ONNX for ONNX Runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("resnet50", "inception-v3", "mobilenet-v2", "googlenet", "transformer", "dlrm")
SIZES: dict[str, dict[str, Any]] = {"dlrm": {"rows": 100_000}}


def _stats(ns: list[float]) -> dict[str, float]:
    q1, med, q3 = np.percentile(np.asarray(ns) / 1e6, [25, 50, 75])
    return {"median": float(med), "iqr": float(q3 - q1)}


# ----------------------------------------------------------------- children


def _native(name: str, batch: int, threads: int, repeats: int) -> dict[str, Any]:
    from pyparbench import models
    from pyparbench.executor import compile_graph
    from pyparbench.settings import Settings

    g = models.build(name, batch, **SIZES.get(name, {}))
    cg = compile_graph(g)
    out: dict[str, Any] = {}
    # Alternate the two plans so drift on a shared machine hits both alike.
    runs: dict[str, list[float]] = {"none": [], "full": []}
    for _ in range(3):
        for opt in runs:
            r = cg.run(Settings(intra_op=threads, graph_opt=opt), repeats=repeats, warmup=3)
            runs[opt] += r.ns
            out[f"info_{opt}"] = r.resolved["graph_opt"]
    for opt, ns in runs.items():
        out[f"native_{opt}"] = _stats(ns)
    r = cg.run(Settings(intra_op=threads), repeats=3, warmup=1, trace=True)
    by_op: dict[str, float] = {}
    for e in r.trace:
        by_op[e.op] = by_op.get(e.op, 0.0) + (e.end_ns - e.start_ns) / 1e6
    out["trace_full"] = dict(sorted(by_op.items(), key=lambda kv: -kv[1]))
    return out


def _torch_module(name: str, batch: int) -> tuple[Any, list[Any]]:
    import torch
    import torch.nn.functional as F

    from pyparbench import models

    g = models.build(name, batch, **SIZES.get(name, {}))
    inputs = g.random_inputs(seed=0)
    acts = {"relu": F.relu, "relu6": F.relu6, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
            "gelu": F.gelu}

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.p: dict[tuple[int, str], torch.Tensor] = {}
            for n in g.nodes:
                for k in n.params:
                    t = torch.from_numpy(np.array(n.params[k]))
                    self.register_buffer(f"n{n.id}_{k}", t)
                    self.p[(n.id, k)] = t
            self.tril = {}
            for n in g.nodes:
                if n.op == "tril_flatten":
                    m = g[n.inputs[0]].shape[-1]
                    li, lj = np.tril_indices(m, -1)
                    self.tril[n.id] = torch.from_numpy(li * m + lj)

        def forward(self, *xs: Any) -> Any:
            v: dict[int, Any] = dict(zip(g.inputs, xs))
            for n in g.nodes:
                if n.op == "input":
                    continue
                a, x = n.attrs, [v[i] for i in n.inputs]

                def p(k: str, i: int = n.id) -> Any:
                    return self.p[(i, k)]
                if n.op == "conv2d":
                    t, b_, l_, r_ = a["padding"]
                    y = x[0]
                    pad: Any = (t, l_)
                    if (t, l_) != (b_, r_):
                        y, pad = F.pad(y, (l_, r_, t, b_)), 0
                    y = F.conv2d(y, p("weight"), p("bias") if "bias" in n.params else None,
                                 a["stride"], pad, a["dilation"], a["groups"])
                    y = F.relu(y) if a["relu"] else y
                elif n.op == "linear":
                    y = F.linear(x[0], p("weight"), p("bias") if "bias" in n.params else None)
                    y = F.relu(y) if a["relu"] else y
                elif n.op == "matmul":
                    y = torch.matmul(x[0], x[1].transpose(-1, -2) if a["trans_b"] else x[1])
                elif n.op == "embedding_bag":
                    y = F.embedding_bag(x[0], p("table"), mode=a["mode"])
                elif n.op == "eltwise":
                    act: Any = acts[a["kind"]]
                    y = act(x[0])
                elif n.op == "add":
                    y = x[0] + x[1]
                    y = F.relu(y) if a["relu"] else y
                elif n.op == "mul":
                    y = x[0] * x[1]
                elif n.op == "concat":
                    y = torch.cat(x, a["axis"])
                elif n.op == "pool2d":
                    t, b_, l_, r_ = a["padding"]
                    y, pad = x[0], (t, l_)
                    if (t, l_) != (b_, r_):
                        fill = float("-inf") if a["kind"] == "max" else 0.0
                        y, pad = F.pad(y, (l_, r_, t, b_), value=fill), (0, 0)
                    if a["kind"] == "max":
                        y = F.max_pool2d(y, a["kernel"], a["stride"], pad, ceil_mode=a["ceil_mode"])
                    else:
                        y = F.avg_pool2d(y, a["kernel"], a["stride"], pad, ceil_mode=a["ceil_mode"],
                                         count_include_pad=a["count_include_pad"])
                elif n.op == "global_avg_pool":
                    y = x[0].mean((2, 3))
                elif n.op == "batch_norm":
                    y = F.batch_norm(x[0], p("mean"), p("var"),
                                     p("scale") if "scale" in n.params else None, p("shift"),
                                     False, 0.0, a["eps"])
                elif n.op == "layer_norm":
                    y = F.layer_norm(x[0], x[0].shape[-1:], p("scale"), p("shift"), a["eps"])
                elif n.op == "softmax":
                    y = torch.softmax(x[0], a["axis"])
                elif n.op == "reshape":
                    y = x[0].reshape(a["shape"])
                elif n.op == "transpose":
                    y = x[0].permute(a["perm"])
                elif n.op == "tril_flatten":
                    y = x[0].flatten(1)[:, self.tril[n.id]]
                else:
                    raise ValueError(f"no torch form for {n.op}")
                v[n.id] = y
            outs = [v[o] for o in g.outputs]
            return outs[0] if len(outs) == 1 else tuple(outs)

    args = [torch.from_numpy(inputs[g[i].name]) for i in g.inputs]
    return Net().eval(), args


def _time(fn: Any, repeats: int) -> list[float]:
    import time

    for _ in range(3):
        fn()
    ns = []
    for _ in range(repeats * 3):
        t0 = time.perf_counter_ns()
        fn()
        ns.append(float(time.perf_counter_ns() - t0))
    return ns


def _torch(name: str, batch: int, threads: int, repeats: int, onnx_path: str) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    net, args = _torch_module(name, batch)
    out: dict[str, Any] = {}
    with torch.inference_mode():
        out["torch_eager"] = _stats(_time(lambda: net(*args), repeats))
    with torch.no_grad():
        traced = torch.jit.trace(net, tuple(args), check_trace=False)  # type: ignore[no-untyped-call]
        frozen = torch.jit.freeze(traced)
        out["torch_freeze"] = _stats(_time(lambda: frozen(*args), repeats))
        try:
            torch.onnx.export(net, tuple(args), onnx_path, dynamo=False, opset_version=17)
        except Exception as e:  # noqa: BLE001 - reported, ORT then skipped
            out["onnx_export_error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def _ort(name: str, batch: int, threads: int, repeats: int, onnx_path: str) -> dict[str, Any]:
    import onnxruntime as ort  # type: ignore[import-untyped]

    from pyparbench import models

    g = models.build(name, batch, **SIZES.get(name, {}))
    inputs = g.random_inputs(seed=0)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: inputs[g[gi].name] for i, gi in zip(sess.get_inputs(), g.inputs)}
    return {"onnxruntime": _stats(_time(lambda: sess.run(None, feed), repeats))}


def _embedding(which: str, threads: int, repeats: int) -> dict[str, Any]:
    rows, dim, batch, bag = 1_000_000, 64, 2048, 100
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    idx = rng.integers(0, rows, size=(batch, bag), dtype=np.int64)
    if which == "torch":
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(threads)
        t, i = torch.from_numpy(table), torch.from_numpy(idx)
        with torch.inference_mode():
            return {"ns": _time(lambda: F.embedding_bag(i, t, mode="sum"), repeats)}
    import pyparbench as ppb
    from pyparbench.memory import aligned_copy

    if which == "ppb_aligned":
        table = aligned_copy(table)
    k = ppb.ops.EmbeddingBag(rows, dim, mode="sum", threads=threads)
    out = np.empty((batch, dim), np.float32)
    return {"ns": [float(x) for x in k.timeit(table, idx, out=out, repeats=repeats * 3,
                                                 warmup=3)]}


def _child(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "embedding":
        res = _embedding(rest[0], int(rest[1]), int(rest[2]))
    else:
        name, batch, threads, repeats, onnx_path = rest
        fn: Any = {"native": _native, "torch": _torch, "ort": _ort}[kind]
        args: list[Any] = [name, int(batch), int(threads), int(repeats)]
        res = fn(*args, onnx_path) if kind != "native" else fn(*args)
    print("RESULT " + json.dumps(res))


# ------------------------------------------------------------------- parent


def _spawn(args: list[str], threads: int) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    cmd = ["taskset", "-c", ",".join(map(str, cpus)), sys.executable, "-P", __file__,
           "--child", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                       cwd=Path(__file__).resolve().parent.parent)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res: dict[str, Any] = json.loads(line[7:])
            return res
    return {"error": (p.stderr or p.stdout)[-600:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--embedding-threads", default="1,2")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="ppb-fusion-")
    print(f"{'model':14s} {'b':>2s} {'native none':>12s} {'native full':>12s} {'eager':>9s} "
          f"{'freeze':>9s} {'ORT':>9s}  full/best  passes")
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            onnx_path = os.path.join(tmp, f"{name}-{batch}.onnx")
            common = [name, str(batch), str(a.threads), str(a.repeats), onnx_path]
            row: dict[str, Any] = {"model": name, "batch": batch}
            row.update(_spawn(["native", *common], a.threads))
            row.update(_spawn(["torch", *common], a.threads))
            if os.path.exists(onnx_path):
                row.update(_spawn(["ort", *common], a.threads))
            rows.append(row)
            fw = {k: row[k]["median"] for k in ("torch_eager", "torch_freeze", "onnxruntime")
                  if isinstance(row.get(k), dict)}
            best = min(fw.values()) if fw else float("nan")
            full = row.get("native_full", {}).get("median", float("nan"))

            def cell(k: str, row: dict[str, Any] = row) -> str:
                v = row.get(k)
                return f"{v['median']:7.2f}±{v['iqr']:.1f}" if isinstance(v, dict) else "     -"
            info = row.get("info_full", {})
            print(f"{name:14s} {batch:2d} {cell('native_none'):>12s} {cell('native_full'):>12s} "
                  f"{cell('torch_eager'):>9s} {cell('torch_freeze'):>9s} {cell('onnxruntime'):>9s}"
                  f"  {best / full:6.2f}x  {info.get('original_nodes')}->{info.get('nodes')} "
                  f"nodes, {info.get('original_flops', 0) / 1e9:.2f}->"
                  f"{info.get('flops', 0) / 1e9:.2f} GFLOP", flush=True)
            if "error" in row or "onnx_export_error" in row:
                print("   ", row.get("error", row.get("onnx_export_error")))
            if best < full:
                print(f"    native trace (ms per op type): {row.get('trace_full')}")
    print("\nembedding_bag (1M x 64 table, batch 2048, 100 lookups, sum): ms, ratio to PyTorch")
    for t in (int(x) for x in a.embedding_threads.split(",")):
        res = {w: _spawn(["embedding", w, str(t), str(a.repeats)], t)
               for w in ("torch", "ppb_default", "ppb_aligned")}
        med = {w: _stats(r["ns"])["median"] for w, r in res.items() if "ns" in r}
        print(f"  {t} thread(s): " + ", ".join(
            f"{w} {m:.2f} ms ({med['torch'] / m:.2f}x)" for w, m in med.items()))
        rows.append({"embedding_threads": t, **med})
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
