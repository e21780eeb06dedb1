"""pyparbench's embedding_bag against PyTorch's, and both against the gather ceiling.

  python bench/embedding_bag_vs_torch.py                       # DLRM: 1e6 x 64, 2048 bags of 100
  python bench/embedding_bag_vs_torch.py --rows 100000 1000000 --dim 16 64 128 \\
      --batch 1 64 2048 --lookups 1 20 100 --dist uniform zipf --rounds 7 --json out.json
  python bench/embedding_bag_vs_torch.py --batch 128 --table fp32 byte_rowwise  # DLRM's 8-bit

``--table byte_rowwise`` times the 8-bit rowwise table of the same values
(each row's uint8 values, then its fp32 scale and bias: PyTorch's
``embedding_bag_byte_prepack`` layout, made by each child with its own
library's prepack, byte for byte the same): ``pyparbench.ops.embedding_bag``
(``EmbeddingBag.run`` with ``--api prepared``) on the packed uint8 array,
and PyTorch's ``torch.ops.quantized.embedding_bag_byte_rowwise_offsets`` (on
a ``torch.from_numpy`` view; on a torch copy with ``--api prepared``). The
packed table is as numpy allocates it whatever ``--align`` says (a row is
dim + 8 bytes, on no fixed line boundary). Its rows have no ``% ceiling``:
the ceiling is a gather of fp32 rows.

Each library runs in its own process (``python -P`` children of this
script): two OpenMP runtimes in one process distort each other, and the
torch child never imports pyparbench. A child is pinned to the first
``threads`` CPUs this process may use, with OMP_NUM_THREADS=threads and
OMP_PROC_BIND=true (the same environment for both), and sets its thread
count (``threads=`` for pyparbench, ``torch.set_num_threads``). Both time
the call a user makes on a plain numpy float32 table (``--align numpy``:
as numpy allocates it, 16-byte aligned, so a row of 64 floats straddles
five cache lines; ``64``: 64-byte aligned; ``4``: 4 bytes past a line),
with the output allocated by the call: ``pyparbench.ops.embedding_bag`` and
``torch.nn.functional.embedding_bag`` on ``torch.from_numpy`` views of the
same arrays (``--api function``). ``--api prepared`` times each library's
object that owns its table, as its users keep one: a
``pyparbench.ops.EmbeddingBag`` with ``set_table(table)`` (a copy on whole
cache lines) and a ``torch.nn.EmbeddingBag`` whose weight is a torch copy
of the table (torch's allocator aligns it to 64 bytes).

``--baseline PATH`` adds a third runner timed in the same rounds: the
pyparbench package under PATH (another checkout with its extension built,
e.g. of the main branch), for before / after figures on the same machine
state.

A round runs one child per (library, thread count), each timing every shape
(``--calls`` calls per shape, the median kept); rounds interleave the
libraries so that both see the same machine. Figures are medians over
rounds; the speed-up is the median of per-round torch / pyparbench ratios.

The gather ceiling is pyparbench's peak gather (``pyparbench.machine.peak``: sums
of rows drawn at random from a table of the same rows and dim, 100 rows per
bag, ~64 MiB of rows per run, on all the threads of the run; measured in a
third child per round; the best run of all rounds, as ``pyparbench.machine.peak``'s
``gather_gbs`` is a best run). ``% ceiling`` is the op's bandwidth (rows gathered,
indices, output: ``EmbeddingBag.bytes_moved``) as a share of it.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pyparbench.cli._common import positive_int

PEAK_BAG = 100  # rows per bag in the ceiling's gather, pyparbench.machine.peak's GATHER_BAG


# ------------------------------------------------------------------ inputs


def make_table(rows: int, dim: int, align: str, seed: int = 0) -> np.ndarray:
    """A rows x dim float32 table, as numpy allocates it or at a chosen offset."""
    rng = np.random.default_rng(seed)
    if align == "numpy":
        table = np.empty((rows, dim), np.float32)
    else:
        buf = np.empty(rows * dim + 32, np.float32)
        start = (-buf.ctypes.data % 64) // 4 + (1 if align == "4" else 0)
        table = buf[start:start + rows * dim].reshape(rows, dim)
    rng.random(out=table.reshape(-1), dtype=np.float32)
    return table


def make_indices(rows: int, batch: int, lookups: int, dist: str, dtype: str,
                 seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices and offsets of `batch` bags of `lookups` rows each.

    uniform: rows drawn uniformly. zipf: a Zipf-like skew (rank k drawn with
    probability ~1/k: floor(rows ** u) for uniform u), the ranks scattered
    over the table by a multiplicative hash so that hot rows are not adjacent.
    """
    rng = np.random.default_rng(seed)
    n = batch * lookups
    if dist == "uniform":
        idx = rng.integers(0, rows, size=n, dtype=np.int64)
    else:
        rank = np.floor(np.power(float(rows), rng.random(n))).astype(np.int64) - 1
        idx = (rank * 2_654_435_761) % rows
    offsets = np.arange(0, n, lookups, dtype=np.int64)
    return idx.astype(dtype), offsets.astype(dtype)


def _shapes(args: argparse.Namespace) -> list[dict[str, Any]]:
    return [{"table": t, "rows": r, "dim": d, "batch": b, "lookups": n, "dist": s}
            for t, r, d, b, n, s in itertools.product(args.table, args.rows, args.dim,
                                                      args.batch, args.lookups, args.dist)]


def row_bytes(dim: int, table: str) -> int:
    """Bytes of one table row: fp32 values, or uint8 values plus an fp32 scale and bias."""
    return dim + 8 if table == "byte_rowwise" else 4 * dim


def bytes_moved(dim: int, batch: int, lookups: int, table: str = "fp32") -> float:
    """EmbeddingBag.bytes_moved: rows gathered, 8-byte indices, the output."""
    n = batch * lookups
    return float(row_bytes(dim, table)) * n + 8.0 * n + 4.0 * batch * dim


# ------------------------------------------------------------------ children


def _time_calls(fn: Any, calls: int, budget_s: float) -> float:
    """Median ns of `calls` calls (fewer when they overrun `budget_s`), after warm-up."""
    for _ in range(3):
        fn()
    ts = []
    deadline = time.perf_counter() + budget_s
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
        if time.perf_counter() > deadline and len(ts) >= 5:
            break
    return float(np.median(ts))


def _child(lib: str, threads: int, shapes: list[dict[str, Any]], mode: str, align: str,
           dtype: str, calls: int, api: str = "function") -> list[float]:
    """Median ns per call of each shape, in this process (one library only)."""
    if lib == "torch":
        import torch

        torch.set_num_threads(threads)
        torch.set_grad_enabled(False)
    else:
        from pyparbench import ops
    tables: dict[tuple[str, int, int], np.ndarray] = {}
    owners: dict[tuple[str, int, int], Any] = {}  # --api prepared: each library's own table
    out = []
    for s in shapes:
        key = (s["table"], s["rows"], s["dim"])
        if key not in tables:
            tables.clear()  # one table at a time: they may be large
            owners.clear()
            tables[key] = make_table(s["rows"], s["dim"], align)
            if s["table"] == "byte_rowwise":
                tables[key] = _prepack(lib, tables[key])
        table = tables[key]
        idx, off = make_indices(s["rows"], s["batch"], s["lookups"], s["dist"], dtype)
        call: Callable[[], Any]
        if s["table"] == "byte_rowwise":
            call = _byte_rowwise_call(lib, api, table, idx, off, mode, threads)
        elif lib == "torch":
            t, i, o = torch.from_numpy(table), torch.from_numpy(idx), torch.from_numpy(off)
            if api == "prepared":
                if key not in owners:
                    owners[key] = torch.nn.EmbeddingBag.from_pretrained(
                        torch.tensor(table), mode=mode)
                call = functools.partial(owners[key], i, o)
            else:
                f = torch.nn.functional.embedding_bag
                call = functools.partial(f, i, t, o, mode=mode)
        elif api == "prepared":
            if key not in owners:
                owners[key] = ops.EmbeddingBag(s["rows"], s["dim"], mode=mode, threads=threads)
                owners[key].set_table(table)
            call = functools.partial(owners[key].run, None, idx, off)
        else:
            call = functools.partial(ops.embedding_bag, table, idx, off, mode=mode,
                                     threads=threads)
        out.append(_time_calls(call, calls, budget_s=0.5))
    return out


def _prepack(lib: str, table: np.ndarray) -> np.ndarray:
    """The 8-bit rowwise copy of `table`, by the child's own library (the
    torch child never imports pyparbench; the two are the same bytes)."""
    if lib == "torch":
        import torch

        packed: np.ndarray = torch.ops.quantized.embedding_bag_byte_prepack(
            torch.from_numpy(table)).numpy()
        return packed
    from pyparbench.quantization import byte_rowwise_prepack

    return byte_rowwise_prepack(table)


def _byte_rowwise_call(lib: str, api: str, packed: np.ndarray, idx: np.ndarray,
                       off: np.ndarray, mode: str, threads: int) -> Callable[[], Any]:
    """One call of the library's 8-bit rowwise bag on `packed`."""
    if lib == "torch":
        import torch

        t = torch.tensor(packed) if api == "prepared" else torch.from_numpy(packed)
        return functools.partial(torch.ops.quantized.embedding_bag_byte_rowwise_offsets, t,
                                 torch.from_numpy(idx), torch.from_numpy(off), False,
                                 0 if mode == "sum" else 1, False, None, None, False)
    from pyparbench import ops

    if api == "prepared":
        e = ops.EmbeddingBag(packed.shape[0], packed.shape[1] - 8, mode=mode, threads=threads)
        return functools.partial(e.run, packed, idx, off)
    return functools.partial(ops.embedding_bag, packed, idx, off, mode=mode, threads=threads)


def _child_gather(threads: int, shapes: list[dict[str, Any]]) -> list[float]:
    """The gather ceiling per distinct (rows, dim): GB/s of the best run, as
    pyparbench.machine.peak's gather_gbs."""
    from pyparbench._core import peak as _p

    res = []
    for rows, dim in sorted({(s["rows"], s["dim"]) for s in shapes}):
        bags = max(threads, 64 * 1024 * 1024 // (dim * 4 * PEAK_BAG + 8 * PEAK_BAG))
        ns, nbytes = _p.time_gather(threads, rows, dim, bags, PEAK_BAG, repeats=7, warmup=1,
                                    seed=threads)
        res.append(float(nbytes) / float(np.min(ns)))
    return res


def _cpus(threads: int) -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    if threads > len(allowed):
        raise SystemExit(f"--threads {threads}: only {len(allowed)} CPUs allowed")
    return allowed[:threads]


def _run_child(kind: str, threads: int, args: argparse.Namespace) -> list[float]:
    cpus = _cpus(threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "true"}
    env.pop("OMP_PLACES", None)
    if kind == "torch":
        env["PYPARBENCH_NO_CORE"] = "1"
    if kind == "baseline":  # another pyparbench, found first on the path
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(args.baseline).resolve()), *filter(None, [env.get("PYTHONPATH")])])
        kind = "pyparbench"
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", kind,
           "--threads", str(threads), "--mode", args.mode, "--align", args.align,
           "--index-dtype", args.index_dtype, "--calls", str(args.calls), "--api", args.api,
           "--rows", *map(str, args.rows), "--dim", *map(str, args.dim),
           "--batch", *map(str, args.batch), "--lookups", *map(str, args.lookups),
           "--dist", *args.dist, "--table", *args.table]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} child, {threads} thread(s): {proc.stderr[-3000:]}")
    result: list[float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -------------------------------------------------------------------- parent


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=positive_int("--rows"), nargs="+", default=[1_000_000])
    p.add_argument("--dim", type=positive_int("--dim"), nargs="+", default=[64])
    p.add_argument("--batch", type=positive_int("--batch"), nargs="+", default=[2048])
    p.add_argument("--lookups", type=positive_int("--lookups"), nargs="+",
                   default=[100], help="per bag")
    p.add_argument("--dist", nargs="+", default=["uniform"], choices=["uniform", "zipf"])
    p.add_argument("--table", nargs="+", default=["fp32"], choices=["fp32", "byte_rowwise"],
                   help="the table's format: fp32, or 8-bit rowwise (uint8 values, then an "
                        "fp32 scale and bias per row)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--mode", default="sum", choices=["sum", "mean"])
    p.add_argument("--align", default="numpy", choices=["numpy", "64", "4"],
                   help="the table's start: as numpy allocates it, on a cache line, "
                        "or 4 bytes past one")
    p.add_argument("--index-dtype", default="int64", choices=["int64", "int32"])
    p.add_argument("--api", default="function", choices=["function", "prepared"],
                   help="the op functions on the user's table, or each library's object "
                        "owning a copy of it (pyparbench EmbeddingBag.set_table, "
                        "torch.nn.EmbeddingBag)")
    p.add_argument("--rounds", type=positive_int("--rounds"), default=5)
    p.add_argument("--calls", type=positive_int("--calls"),
                   default=30, help="timed calls per shape and round")
    p.add_argument("--no-ceiling", action="store_true", help="skip the gather ceiling")
    p.add_argument("--baseline", metavar="PATH",
                   help="also time the pyparbench package under PATH (a checkout with its "
                        "_core built, e.g. of the main branch) in the same rounds")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--child", choices=["pyparbench", "torch", "gather"], help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        threads = [int(t) for t in str(args.threads).split(",")]
    except ValueError:
        parser.error(f"--threads must be comma-separated integers, got {args.threads!r}")
    allowed = len(os.sched_getaffinity(0))
    bad = [t for t in threads if not 1 <= t <= allowed]
    if bad:  # before any child starts (a child pinned to no CPU dies in its preexec_fn)
        parser.error(f"--threads must be 1..{allowed} (the CPUs this process may use), "
                     f"got {bad[0]}")
    shapes = _shapes(args)
    if args.child:
        if args.child == "gather":
            print(json.dumps(_child_gather(threads[0], shapes)))
        else:
            print(json.dumps(_child(args.child, threads[0], shapes, args.mode, args.align,
                                    args.index_dtype, args.calls, args.api)))
        return 0

    all_threads = max(threads)
    ours: dict[int, list[list[float]]] = {t: [] for t in threads}
    ref: dict[int, list[list[float]]] = {t: [] for t in threads}
    base: dict[int, list[list[float]]] = {t: [] for t in threads}
    runs = {"pyparbench": ours, "torch": ref, "baseline": base}
    libs = ["pyparbench", "torch", *(["baseline"] if args.baseline else [])]
    ceil: list[list[float]] = []
    for r in range(args.rounds):
        for t in threads:
            # Rotate which library goes first.
            for lib in libs[r % len(libs):] + libs[:r % len(libs)]:
                runs[lib][t].append(_run_child(lib, t, args))
        if not args.no_ceiling:
            ceil.append(_run_child("gather", all_threads, args))
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    tables = sorted({(s["rows"], s["dim"]) for s in shapes})
    # The best over rounds: a ceiling (each round's figure is its best run).
    ceiling = (dict(zip(tables, np.max(np.array(ceil), axis=0).tolist(), strict=True))
               if ceil else {})
    rows_out = []
    print(f"embedding_bag ({args.api}) mode={args.mode}, table align={args.align}, "
          f"indices {args.index_dtype}; median ms per call over {args.rounds} rounds; "
          f"speed-up = torch / pyparbench; % ceiling = share of the gather ceiling on "
          f"{all_threads} thread(s)")
    print(f"{'table':>12} {'rows':>8} {'dim':>4} {'batch':>5} {'look':>4} {'dist':>7} {'thr':>3} "
          f"{'pyparbench':>10} {'torch':>8} {'speed-up':>8} {'ours %':>7} {'torch %':>7}"
          + (f" {'baseline':>8} {'speed-up':>8} {'base %':>7}" if args.baseline else ""))
    for k, s in enumerate(shapes):
        for t in threads:
            a = np.array([row[k] for row in ours[t]])
            b = np.array([row[k] for row in ref[t]])
            nbytes = bytes_moved(s["dim"], s["batch"], s["lookups"], s["table"])
            # The ceiling is an fp32 gather's: no share for the 8-bit rows.
            c = None if s["table"] == "byte_rowwise" else ceiling.get((s["rows"], s["dim"]))
            rec = {**s, "threads": t, "mode": args.mode, "align": args.align, "api": args.api,
                   "index_dtype": args.index_dtype,
                   "pyparbench_ms": float(np.median(a)) / 1e6,
                   "torch_ms": float(np.median(b)) / 1e6,
                   "speedup": float(np.median(b / a)),
                   "speedup_iqr": [float(np.percentile(b / a, 25)),
                                   float(np.percentile(b / a, 75))],
                   "ceiling_gbs": c,
                   "pyparbench_pct_ceiling": None if c is None else
                   100.0 * nbytes / float(np.median(a)) / c,
                   "torch_pct_ceiling": None if c is None else
                   100.0 * nbytes / float(np.median(b)) / c,
                   "pyparbench_round_ms": (a / 1e6).tolist(), "torch_round_ms": (b / 1e6).tolist()}
            pct = ("" if c is None else
                   f" {rec['pyparbench_pct_ceiling']:6.1f}% {rec['torch_pct_ceiling']:6.1f}%")
            if args.baseline:
                z = np.array([row[k] for row in base[t]])
                rec.update({"baseline_ms": float(np.median(z)) / 1e6,
                            "baseline_speedup": float(np.median(b / z)),
                            "baseline_pct_ceiling": None if c is None else
                            100.0 * nbytes / float(np.median(z)) / c,
                            "baseline_round_ms": (z / 1e6).tolist()})
                pct += (f" {rec['baseline_ms']:8.4f} {rec['baseline_speedup']:7.2f}x"
                        + ("" if c is None else f" {rec['baseline_pct_ceiling']:6.1f}%"))
            rows_out.append(rec)
            print(f"{s['table']:>12} {s['rows']:>8} {s['dim']:>4} {s['batch']:>5} {s['lookups']:>4} "
                  f"{s['dist']:>7} {t:>3} {rec['pyparbench_ms']:10.4f} {rec['torch_ms']:8.4f} "
                  f"{rec['speedup']:7.2f}x{pct}", flush=True)
    if ceiling:
        for (rows, dim), gbs in ceiling.items():
            print(f"gather ceiling, {rows} x {dim} table, {all_threads} thread(s): "
                  f"{gbs:.1f} GB/s")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"threads": threads, "rounds": args.rounds, "rows": rows_out,
             "ceiling": [{"rows": r, "dim": d, "threads": all_threads, "gbs": g}
                         for (r, d), g in ceiling.items()]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
