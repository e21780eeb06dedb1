"""int8 against fp32 and bf16 on the standard shapes, and the 8-bit embedding bag against fp32.

  python bench/int8_ops.py [--threads 1 2] [--rounds 5] [--calls 3] [--json out.json]

DeepBench's inference-device GEMMs and the suite models' fully connected
layers as packed ``Linear`` layers (constant weights, the way int8 inference
runs them: ``QuantizedLinear`` packs its int8 weights once), and ResNet-50's
convolutions at batch 1, channels-last; each prepared in fp32, bf16 and int8
(u8 activations with a zero point, s8 weights per output channel, fp32
output) and timed in interleaved rounds in one process, at each thread count;
the best run of each is compared (on a shared machine the slower runs hold
other processes' time slices). Every int8 output is checked against the
dequantised float64 reference first; the table says which implementation
oneDNN picked for int8 and whether it runs int8 dot products natively
(VNNI, AMX). Then DLRM-like embedding bags: an fp32 table against its 8-bit
rowwise copy (a quarter of the bytes plus 8 a row).
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
from pyparbench.quantization import (
    byte_rowwise_dequantize,
    byte_rowwise_prepack,
    channel_scales,
    quantize,
    tensor_params,
)
from pyparbench.reference import assert_near_int8, int8_conv2d_reference, int8_linear_reference
from pyparbench.shapes import conv_problems, gemm_problems
from pyparbench.timing import best_interleaved

PRECISIONS = ("fp32", "bf16", "int8")
FC_LAYERS = [(1, 512, 512), (8, 512, 512), (128, 3072, 768)]
# (rows, dim, bags, lookups per bag): DLRM-like tables, large enough to miss the caches.
BAGS = [(1_000_000, 64, 2048, 80), (200_000, 128, 2048, 40)]

Timer = Callable[[int, int], np.ndarray]


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _activations(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    scale, zp = tensor_params(x, "uint8")
    return quantize(x, scale, zp, "uint8"), scale, zp


def linear_case(m: int, n: int, k: int, threads: int, precision: str) -> tuple[Timer, str, bool]:
    rng = np.random.default_rng(0)
    x, w, bias = _rand(rng, m, k), _rand(rng, n, k), _rand(rng, n)
    if precision == "int8":
        xq, xs, xz = _activations(x)
        ws = channel_scales(w)
        wq = quantize(w, ws, 0, "int8", axis=0)
        q = ops.QuantizedLinear(m, n, k, weight_scales=list(ws), x_scale=xs, x_zero_point=xz,
                                bias=True, threads=threads)
        q.set_weights(wq, bias)
        out = q.run(xq)
        assert_near_int8(out, *int8_linear_reference(xq, xs, xz, wq, ws, bias), "linear")
        return (lambda r, wu: q.timeit(xq, out, repeats=r, warmup=wu)), q.implementation, \
            q.native
    lin = ops.Linear(m, n, k, bias=True, threads=threads,
                     precision=precision)  # type: ignore[arg-type]
    lin.set_weights(w, bias)
    xi = x.astype(ml_dtypes.bfloat16) if precision == "bf16" else x
    out = lin.run(xi)
    return (lambda r, wu: lin.timeit(xi, out, repeats=r, warmup=wu)), lin.implementation, \
        not lin.emulated


def conv_case(p: Any, threads: int, precision: str) -> tuple[Timer, str, bool]:
    rng = np.random.default_rng(0)
    nchw = (1, p.c, p.h, p.w)
    x = np.abs(_rand(rng, *nchw))  # after a ReLU
    w = _rand(rng, p.out_channels, p.c // p.groups, p.kh, p.kw)
    if precision == "int8":
        xq, xs, xz = _activations(x)
        ws = channel_scales(w)
        wq = quantize(w, ws, 0, "int8", axis=0)
        q = ops.QuantizedConv2d(nchw, p.out_channels, (p.kh, p.kw), stride=p.stride,
                                padding=list(p.padding), dilation=p.dilation, groups=p.groups,
                                weight_scales=list(ws), x_scale=xs, x_zero_point=xz,
                                nhwc=True, threads=threads)
        q.set_weights(wq)
        xi = np.ascontiguousarray(xq.transpose(0, 2, 3, 1))
        out = q.run(xi)
        assert_near_int8(out.transpose(0, 3, 1, 2), *int8_conv2d_reference(
            xq, xs, xz, wq, ws, None, p.stride, p.padding, p.dilation, p.groups), "conv2d")
        return (lambda r, wu: q.timeit(xi, out, repeats=r, warmup=wu)), q.implementation, \
            q.native
    conv = ops.Conv2d((1, p.h, p.w, p.c), p.out_channels, (p.kh, p.kw), stride=p.stride,
                      padding=p.padding, dilation=p.dilation, groups=p.groups, nhwc=True,
                      threads=threads, precision=precision)  # type: ignore[arg-type]
    conv.set_weights(w)
    xf = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    xi = xf.astype(ml_dtypes.bfloat16) if precision == "bf16" else xf
    out = conv.run(xi)
    return (lambda r, wu: conv.timeit(xi, out, repeats=r, warmup=wu)), conv.implementation, \
        not conv.emulated


def cases(threads: int) -> list[tuple[str, float, Callable[[str], tuple[Timer, str, bool]]]]:
    """(label, FLOPs, make(precision)) of every shape."""
    out: list[tuple[str, float, Callable[[str], tuple[Timer, str, bool]]]] = []
    for g in gemm_problems("inference_device"):
        out.append((f"gemm {g.m}x{g.n}x{g.k}", 2.0 * g.m * g.n * g.k,
                    partial(linear_case, g.m, g.n, g.k, threads)))
    for m, n, k in FC_LAYERS:
        out.append((f"linear {m}x{n}x{k}", 2.0 * m * n * k,
                    partial(linear_case, m, n, k, threads)))
    for p in conv_problems("resnet_50"):
        oh = (p.h + p.padding[0] + p.padding[1] - p.dilation[0] * (p.kh - 1) - 1) // p.stride[0] + 1
        ow = (p.w + p.padding[2] + p.padding[3] - p.dilation[1] * (p.kw - 1) - 1) // p.stride[1] + 1
        flops = 2.0 * p.out_channels * oh * ow * (p.c // p.groups) * p.kh * p.kw
        out.append((f"conv {p.name.split(':')[-1]}", flops, partial(conv_case, p, threads)))
    return out


def measure(threads: int, rounds: int, calls: int) -> list[dict[str, Any]]:
    rows = []
    for label, flops, make in cases(threads):
        made = {prec: make(prec) for prec in PRECISIONS}
        best = best_interleaved({prec: m[0] for prec, m in made.items()}, rounds=rounds,
                                calls=calls)
        rows.append({"op": label, "threads": threads, "flops": flops,
                     **{f"{prec}_us": best[prec] / 1e3 for prec in PRECISIONS},
                     "int8_vs_fp32": best["fp32"] / best["int8"],
                     "int8_vs_bf16": best["bf16"] / best["int8"],
                     "int8_implementation": made["int8"][1], "int8_native": made["int8"][2],
                     "bf16_native": made["bf16"][2]})
    return rows


def measure_bags(threads: int, rounds: int, calls: int) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(0)
    for n_rows, dim, bags, pooling in BAGS:
        table = rng.standard_normal((n_rows, dim)).astype(np.float32)
        packed = byte_rowwise_prepack(table)
        idx = rng.integers(0, n_rows, size=bags * pooling).astype(np.int64)
        off = np.arange(bags, dtype=np.int64) * pooling
        e = ops.EmbeddingBag(n_rows, dim, threads=threads)
        out_f, out_q = e.run(table, idx, off), e.run(packed, idx, off)
        sample = slice(0, 4)  # a few bags against the dequantised reference
        want = byte_rowwise_dequantize(packed)[idx[: 4 * pooling]].reshape(4, pooling, dim).sum(1)
        np.testing.assert_allclose(out_q[sample], want, rtol=1e-4, atol=1e-3)
        timers = {
            "fp32": lambda r, w: e.timeit(table, idx, off, None, out_f, repeats=r, warmup=w),
            "byte": lambda r, w: e.timeit(packed, idx, off, None, out_q, repeats=r, warmup=w)}
        best = best_interleaved(timers, rounds=rounds, calls=calls)
        rows.append({"op": f"bag {n_rows}x{dim} {bags}x{pooling}", "threads": threads,
                     "fp32_us": best["fp32"] / 1e3, "byte_us": best["byte"] / 1e3,
                     "speedup": best["fp32"] / best["byte"], "isa": ops.EmbeddingBag.isa})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", nargs="+", type=positive_int("--threads"), default=[1, 2])
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=5)
    ap.add_argument("--calls", type=positive_int("--calls"), default=3,
                    help="timed calls per round")
    ap.add_argument("--no-bags", action="store_true", help="leave out the embedding bags")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    rows = [r for t in args.threads for r in measure(t, args.rounds, args.calls)]
    table = Table(title=f"int8 against fp32 and bf16 (best us of {args.rounds} interleaved "
                        f"rounds of {args.calls} runs; convolutions nhwc)")
    for col in ("op", "threads", "fp32 us", "bf16 us", "int8 us", "fp32 / int8", "bf16 / int8",
                "int8 GOP/s", "int8 implementation"):
        table.add_column(col, justify="left" if col in ("op", "int8 implementation")
                         else "right")
    for r in rows:
        table.add_row(r["op"], str(r["threads"]), f"{r['fp32_us']:.1f}", f"{r['bf16_us']:.1f}",
                      f"{r['int8_us']:.1f}", f"{r['int8_vs_fp32']:.2f}x",
                      f"{r['int8_vs_bf16']:.2f}x", f"{r['flops'] / r['int8_us'] / 1e3:.0f}",
                      r["int8_implementation"] + ("" if r["int8_native"] else " (not native)"))
    for t in args.threads:
        mine = [r for r in rows if r["threads"] == t]
        vs_fp32 = sum(r["fp32_us"] for r in mine) / sum(r["int8_us"] for r in mine)
        vs_bf16 = sum(r["bf16_us"] for r in mine) / sum(r["int8_us"] for r in mine)
        table.add_section()
        table.add_row("all (sum of times)", str(t), "", "", "", f"{vs_fp32:.2f}x",
                      f"{vs_bf16:.2f}x", "", "")
    console = Console(width=max(Console().width, 130))
    console.print(table)
    bag_rows = [] if args.no_bags else [
        r for t in args.threads for r in measure_bags(t, args.rounds, args.calls)]
    if bag_rows:
        bag_table = Table(title="8-bit rowwise against fp32 embedding bags (best us)")
        for col in ("op", "threads", "fp32 us", "8-bit us", "fp32 / 8-bit", "kernel"):
            bag_table.add_column(col, justify="left" if col in ("op", "kernel") else "right")
        for r in bag_rows:
            bag_table.add_row(r["op"], str(r["threads"]), f"{r['fp32_us']:.1f}",
                              f"{r['byte_us']:.1f}", f"{r['speedup']:.2f}x", r["isa"])
        console.print(bag_table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ops": rows, "embedding_bags": bag_rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
