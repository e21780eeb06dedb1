"""Operator-core figures, each measured side by side in one run.

  python bench/figures_ops.py [--threads 1 2] [--quick] [--json out.json]

1. Python call overhead: a prepared 8x8x8 gemm called from a Python loop
   against the same kernel run in its C++ loop (target: < 1 us extra).
2. gemm 1024^3 fp32 called from Python against the same oneDNN primitive in
   the C++ loop (target: ratio >= 0.98), and its GFLOP/s.
3. embedding_bag on the DLRM CPU-benchmark shape (1M x 64 table, batch 2048,
   100 lookups per bag) against torch.nn.functional.embedding_bag at the same
   thread count (target: >= 1x, aim 1.5x), in GB/s; on a plain numpy table
   (16-byte aligned) and on a 64-byte aligned one.
Every figure is a median with its interquartile range.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

import pyparbench as ppb
from pyparbench.memory import aligned_empty
from pyparbench.reference import assert_near
from pyparbench.timing import Summary, summarize, time_native, time_python
from pyparbench.cli._common import positive_int


def call_overhead(threads: int, rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 8), np.float32), rng.random((8, 8), np.float32)
    out = np.empty((8, 8), np.float32)
    g = ppb.ops.Gemm(8, 8, 8, threads=threads)
    run = g.run
    py = time_python(lambda: run(a, b, None, out), calls=5000, rounds=rounds)
    native = time_native(lambda **kw: g.timeit(a, b, None, out, **kw), calls=5000, rounds=rounds)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5)
    return {"python": py, "native": native, "extra_ns": py.median - native.median}


def big_gemm(threads: int, size: int, rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((size, size), np.float32)
    b = rng.standard_normal((size, size), np.float32)
    out = np.empty((size, size), np.float32)
    g = ppb.ops.Gemm(size, size, size, threads=threads)
    run = g.run
    py = time_python(lambda: run(a, b, None, out), calls=3, rounds=rounds)
    native = time_native(lambda **kw: g.timeit(a, b, None, out, **kw), calls=3, rounds=rounds)
    check = slice(0, 64)
    np.testing.assert_allclose(out[check, check], (a[check].astype(np.float64) @ b[:, check]),
                               rtol=1e-3, atol=1e-3)
    return {"python": py, "native": native, "ratio": native.median / py.median,
            "gflops": g.flops / native.median}


def embedding(threads: int, aligned: bool, rounds: int, quick: bool) -> dict[str, Any]:
    import torch

    rows, dim, batch, lookups = (100_000 if quick else 1_000_000), 64, 2048, 100
    rng = np.random.default_rng(2)
    table = aligned_empty((rows, dim)) if aligned else np.empty((rows, dim), np.float32)
    table[:] = rng.standard_normal((rows, dim), np.float32)
    idx = rng.integers(0, rows, size=batch * lookups).astype(np.int64)
    off = np.arange(0, batch * lookups, lookups, dtype=np.int64)
    out = np.empty((batch, dim), np.float32)
    k = ppb.ops.EmbeddingBag(rows, dim, threads=threads)
    torch.set_num_threads(threads)
    tt, ti, to = torch.from_numpy(table), torch.from_numpy(idx), torch.from_numpy(off)
    f = torch.nn.functional.embedding_bag
    want = f(ti, tt, to, mode="sum").numpy()
    ours_ns, torch_ns = [], []
    k.timeit(table, idx, off, out=out, repeats=2, warmup=1)
    for _ in range(rounds):  # alternate, so both see the same machine state
        ours_ns.append(float(k.timeit(table, idx, off, out=out, repeats=1, warmup=0)[0]))
        t0 = time.perf_counter_ns()
        f(ti, tt, to, mode="sum")
        torch_ns.append(float(time.perf_counter_ns() - t0))
    assert_near(out, want)
    ours, theirs = summarize(ours_ns), summarize(torch_ns)
    return {"ours": ours, "torch": theirs, "speedup": theirs.median / ours.median,
            "gbps": k.bytes_moved(batch * lookups, batch) / ours.median,
            "rows": rows, "torch_version": torch.__version__}


def _record(op: str, threads: int, fig: dict[str, Any], **extra: Any) -> dict[str, Any]:
    plain = {k: (v.as_dict() if isinstance(v, Summary) else v) for k, v in fig.items()}
    return {"op": op, "threads": threads, **extra, **plain}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--threads", type=positive_int("--threads"), nargs="+", default=[1, 2])
    p.add_argument("--quick", action="store_true", help="small sizes, few rounds (smoke test)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    rounds = 5 if args.quick else 15
    size = 256 if args.quick else 1024
    results: dict[str, Any] = {"machine": ppb.info(), "figures": []}
    lines = []
    for t in args.threads:
        o = call_overhead(t, rounds)
        lines.append(f"[t={t}] gemm 8x8x8 per call: python {o['python'].fmt('ns')}, "
                     f"C++ loop {o['native'].fmt('ns')} -> extra {o['extra_ns']:.0f} ns")
        g = big_gemm(t, size, rounds)
        lines.append(f"[t={t}] gemm {size}^3: python {g['python'].fmt('ms')}, "
                     f"C++ loop {g['native'].fmt('ms')} -> ratio {g['ratio']:.3f}, "
                     f"{g['gflops']:.1f} GFLOP/s")
        for aligned in (False, True):
            try:
                e = embedding(t, aligned, rounds, args.quick)
            except ImportError:
                lines.append(f"[t={t}] embedding_bag: torch not installed, skipped")
                break
            tag = "64B-aligned" if aligned else "numpy-default"
            lines.append(f"[t={t}] embedding_bag {e['rows']}x64 b2048 L100 ({tag} table): "
                         f"ours {e['ours'].fmt('ms')}, torch {e['torch'].fmt('ms')} -> "
                         f"{e['speedup']:.2f}x, {e['gbps']:.1f} GB/s")
            results["figures"].append(_record("embedding_bag", t, e, aligned=aligned))
        results["figures"].append(_record("gemm8", t, o))
        results["figures"].append(_record(f"gemm{size}", t, g))
        for line in lines:
            print(line, flush=True)
        lines.clear()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
