"""bf16 against fp32 on the standard shapes: the speed-up of each heavy op, side by side.

  python bench/bf16_ops.py [--threads 1 2] [--rounds 5] [--calls 3] [--layout nhwc]
                           [--json out.json]

DeepBench's inference-device GEMMs, the suite models' fully connected layers
(the packed ``Linear``) and ResNet-50's convolutions at batch 1 (channels-last
by default: there oneDNN runs its brgconv kernels in both precisions, where
on plain NCHW it falls back to its gemm convolution), each
prepared once in fp32 and once in bf16 and timed in interleaved rounds in
one process, at each thread count; the best run of each is compared (on a
shared machine the slower runs hold other processes' time slices). bf16 means bfloat16 inputs and weights,
fp32 accumulation and fp32 outputs; the table says which implementation
oneDNN picked for bf16 and whether it emulates it (no bf16 dot-product
instructions under it), and every bf16 output is checked against the bf16
reference first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np
from rich.console import Console
from rich.table import Table

from pyparbench import ops
from pyparbench.cli._common import positive_int
from pyparbench.reference import assert_near_bf16, conv2d_reference, gemm_reference
from pyparbench.shapes import conv_problems, gemm_problems
from pyparbench.timing import best_interleaved

PRECISIONS = ("fp32", "bf16")
FC_LAYERS = [(1, 512, 512), (8, 512, 512), (128, 3072, 768)]

# One case: its label, then per precision a timer (repeats, warmup -> ns)
# and what oneDNN picked (implementation, emulated).
Timer = Callable[[int, int], np.ndarray]


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _inputs(x: np.ndarray, precision: str) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16) if precision == "bf16" else x


def gemm_case(m: int, n: int, k: int, trans_a: bool, trans_b: bool, threads: int,
              precision: str) -> tuple[Timer, str, bool]:
    rng = np.random.default_rng(0)
    g = ops.Gemm(m, n, k, trans_a=trans_a, trans_b=trans_b, threads=threads,
                 precision=precision)  # type: ignore[arg-type]
    a, b = _rand(rng, *g.a_shape), _rand(rng, *g.b_shape)
    ai, bi = _inputs(a, precision), _inputs(b, precision)
    out = g.run(ai, bi)
    if precision == "bf16":
        assert_near_bf16(out, gemm_reference(a, b, trans_a=trans_a, trans_b=trans_b,
                                             precision="bf16"), "gemm")
    return (lambda r, w: g.timeit(ai, bi, None, out, repeats=r, warmup=w)), \
        g.implementation, g.emulated


def linear_case(m: int, n: int, k: int, threads: int,
                precision: str) -> tuple[Timer, str, bool]:
    rng = np.random.default_rng(0)
    x, w, bias = _rand(rng, m, k), _rand(rng, n, k), _rand(rng, n)
    lin = ops.Linear(m, n, k, bias=True, threads=threads, precision=precision)  # type: ignore[arg-type]
    lin.set_weights(w, bias)
    xi = _inputs(x, precision)
    out = lin.run(xi)
    if precision == "bf16":
        assert_near_bf16(out, gemm_reference(x, w, bias, trans_b=True, precision="bf16"),
                         "linear")
    return (lambda r, wu: lin.timeit(xi, out, repeats=r, warmup=wu)), \
        lin.implementation, lin.emulated


def conv_case(p: Any, threads: int, nhwc: bool, precision: str) -> tuple[Timer, str, bool]:
    rng = np.random.default_rng(0)
    nchw = (1, p.c, p.h, p.w)
    shape = (1, p.h, p.w, p.c) if nhwc else nchw
    conv = ops.Conv2d(shape, p.out_channels, (p.kh, p.kw), stride=p.stride,
                      padding=p.padding, dilation=p.dilation, groups=p.groups, nhwc=nhwc,
                      threads=threads, precision=precision)  # type: ignore[arg-type]
    x, w = _rand(rng, *nchw), _rand(rng, *conv.weight_shape)
    conv.set_weights(w)
    xi = _inputs(x.transpose(0, 2, 3, 1).copy() if nhwc else x, precision)
    out = conv.run(xi)
    if precision == "bf16":
        got = out.transpose(0, 3, 1, 2) if nhwc else out
        assert_near_bf16(got, conv2d_reference(x, w, None, p.stride, p.padding, p.dilation,
                                               p.groups, False, precision="bf16"), "conv2d")
    return (lambda r, wu: conv.timeit(xi, out, repeats=r, warmup=wu)), \
        conv.implementation, conv.emulated


def cases(threads: int, nhwc: bool) -> list[tuple[str, float, Callable[[str], tuple[Timer, str, bool]]]]:
    """(label, FLOPs, make(precision)) of every shape."""
    out: list[tuple[str, float, Callable[[str], tuple[Timer, str, bool]]]] = []
    for g in gemm_problems("inference_device"):
        out.append((f"gemm {g.m}x{g.n}x{g.k}", 2.0 * g.m * g.n * g.k,
                    partial(gemm_case, g.m, g.n, g.k, g.trans_a, g.trans_b, threads)))
    for m, n, k in FC_LAYERS:
        out.append((f"linear {m}x{n}x{k}", 2.0 * m * n * k,
                    partial(linear_case, m, n, k, threads)))
    for p in conv_problems("resnet_50"):
        oh = (p.h + p.padding[0] + p.padding[1] - p.dilation[0] * (p.kh - 1) - 1) // p.stride[0] + 1
        ow = (p.w + p.padding[2] + p.padding[3] - p.dilation[1] * (p.kw - 1) - 1) // p.stride[1] + 1
        flops = 2.0 * p.out_channels * oh * ow * (p.c // p.groups) * p.kh * p.kw
        out.append((f"conv {p.name.split(':')[-1]}", flops,
                    partial(conv_case, p, threads, nhwc)))
    return out


def measure(threads: int, rounds: int, calls: int, nhwc: bool) -> list[dict[str, Any]]:
    rows = []
    for label, flops, make in cases(threads, nhwc):
        made = {prec: make(prec) for prec in PRECISIONS}
        med = best_interleaved({prec: m[0] for prec, m in made.items()}, rounds=rounds,
                               calls=calls)
        rows.append({"op": label, "threads": threads, "flops": flops,  # best run, us
                     "fp32_us": med["fp32"] / 1e3, "bf16_us": med["bf16"] / 1e3,
                     "speedup": med["fp32"] / med["bf16"],
                     "bf16_implementation": made["bf16"][1], "bf16_emulated": made["bf16"][2]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", nargs="+", type=positive_int("--threads"), default=[1, 2])
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=5)
    ap.add_argument("--calls", type=positive_int("--calls"), default=3,
                    help="timed calls per round")
    ap.add_argument("--layout", choices=["nhwc", "nchw"], default="nhwc",
                    help="the convolutions' activation layout")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    rows = [r for t in args.threads
            for r in measure(t, args.rounds, args.calls, args.layout == "nhwc")]
    table = Table(title=f"bf16 against fp32 (best us of {args.rounds} interleaved rounds of "
                        f"{args.calls} runs; convolutions {args.layout})")
    for col in ("op", "threads", "fp32 us", "bf16 us", "fp32 / bf16", "bf16 GFLOP/s",
                "bf16 implementation"):
        table.add_column(col, justify="left" if col in ("op", "bf16 implementation")
                         else "right")
    for r in rows:
        table.add_row(r["op"], str(r["threads"]), f"{r['fp32_us']:.1f}", f"{r['bf16_us']:.1f}",
                      f"{r['speedup']:.2f}x", f"{r['flops'] / r['bf16_us'] / 1e3:.0f}",
                      r["bf16_implementation"] + (" (emulated)" if r["bf16_emulated"] else ""))
    for t in args.threads:
        mine = [r for r in rows if r["threads"] == t]
        total = sum(r["fp32_us"] for r in mine) / sum(r["bf16_us"] for r in mine)
        table.add_section()
        table.add_row("all (sum of times)", str(t), "", "", f"{total:.2f}x", "", "")
    Console(width=max(Console().width, 120)).print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
