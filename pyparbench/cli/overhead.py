"""``pyparbench overhead``: one model in TensorFlow, PyTorch and ONNX Runtime
beside pyparbench's executor, under the same thread settings.

Each run is its own process, pinned before its framework is imported. The
table shows each framework's latency (median [IQR]), the native latency, the
kernel sums (the graph as built and the executed graph), the native time
outside kernels split into executor cost, memory / cache effects (the
kernels timed with the chain's data between calls, and with every cache
flushed as a bound) and the rest, each runner's latency beyond the kernels
as the chain meets them, the framework overhead (framework - native,
absolute and as a ratio), the share of the framework's time outside its
kernels, the split per op type (from each framework's profiler against the
executor's per-node trace) and the per-node dispatch cost at one thread and
at all: chains of 401 and of 1 tiny ops (ReLU and tanh in turn), graph
passes off, (t(401) - t(1)) / 400, natively with its kernel's and the
executor's shares. ``--scaling`` adds each heavy op's latency
at 1..N threads.

MODEL may be an ONNX file: ONNX Runtime then runs the file itself (not a
translation of the imported graph), its outputs checked against the
executor's on the same inputs; TensorFlow and PyTorch are not applicable (no
original module to run).

JSON (``--json``): ``model``, ``batch``, ``settings``, ``machine``,
``graph``; ``native`` {``latency``, ``kernel_sum_ns`` (the graph as built,
before the passes, each node an isolated kernel), ``executed_kernel_sum_ns``
(the executed graph's plan kernels, each alone, warm), ``outside_kernels_ns``,
``split`` (that time split: ``executor_ns``, ``memory_cache_ns``,
``rest_ns``, ``cold_bound_ns``, ``kernels_in_chain_ns``, ``labels``),
``beyond_kernels_ns``, ``per_op``, ``audit``};
``frameworks`` [{``framework``, ``mode``, ``status``, ``latency``,
``overhead_ns``, ``overhead_ratio``, ``output_error`` (an ONNX file: max
|native - framework| / max |framework| over the outputs), ``kernel_ns``,
``outside_kernels_ns``, ``outside_share``, ``beyond_kernels_ns`` (latency less
the native kernels as the chain meets them: the same baseline for every
runner), ``per_op``, ``reported``, ``not_applicable``,
``proc_audit`` | ``error``}]; ``dispatch`` {``nodes``, ``threads``,
``by_threads`` {T: {``native``, ``frameworks``}}: microseconds per node};
``scaling`` with ``--scaling``. Other times are nanoseconds.

How the settings map onto each framework's knobs:

"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from pyparbench.cli._common import (
    add_settings_args,
    add_shape_arg,
    model_from_args,
    non_negative_int,
    positive_float,
    positive_int,
    print_json,
    settings_from_args,
)
from pyparbench.frameworks import mapping
from pyparbench.frameworks.overhead import measure_overhead
from pyparbench.frameworks.precision import UNSUPPORTED_AT
from pyparbench.frameworks.spec import NO_MODULE
from pyparbench.models import build

__all__ = ["add_command"]


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _mode(text: str) -> tuple[str, list[str]]:
    fw, sep, modes = text.partition("=")
    if not sep or fw not in mapping.FRAMEWORKS:
        raise argparse.ArgumentTypeError(
            f"expected FRAMEWORK=MODE[,MODE] with FRAMEWORK one of "
            f"{', '.join(mapping.FRAMEWORKS)}, got {text!r}")
    chosen = [m for m in modes.split(",") if m]
    bad = [m for m in chosen if m not in mapping.MODES[fw]]
    if bad or not chosen:
        raise argparse.ArgumentTypeError(
            f"{fw} modes are {', '.join(mapping.MODES[fw])}, got {modes!r}")
    return fw, chosen


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3g}"


def _lat(lat: dict[str, Any] | None) -> str:
    if not lat:
        return "-"
    return f"{lat['median'] / 1e6:.4g} [{lat['q1'] / 1e6:.4g}, {lat['q3'] / 1e6:.4g}]"


def _print(result: dict[str, Any]) -> None:
    console = Console()
    native = result["native"]
    title = (f"{result['model']} batch {result['batch']}, {result['settings_label']} "
             f"({result['machine'].get('cpu_model', '')})")
    t = Table(title=title)
    for col in ("runner", "latency ms [IQR]", "vs native", "overhead ms", "kernels ms",
                "outside kernels"):
        t.add_column(col)
    if native["status"] == "ok":
        outside = native.get("outside_kernels_ns")
        t.add_row("native (pyparbench)", _lat(native["latency"]), "1", "0",
                  f"{_ms(native.get('executed_kernel_sum_ns'))} executed, "
                  f"{_ms(native['kernel_sum_ns'])} as built",
                  "-" if outside is None else
                  f"{outside / float(native['latency']['median']):.0%}")
    else:
        t.add_row("native (pyparbench)", "error", "", "", "", "")
    reports: list[str] = []
    notes: list[str] = []
    for f in result["frameworks"]:
        name = f"{f['framework']} ({f['mode']})"
        na = "; ".join(f"{n['knob']}={n['value']}: {n['reason']}"
                       for n in f.get("not_applicable", [])
                       if f["status"] != "not_applicable")
        if na:
            notes.append(f"{name} not applicable: {na}")
        if f["status"] == "not_applicable":  # an ONNX file in TF / PyTorch; ORT at bf16
            error = str(f.get("error", ""))
            at = error.find(UNSUPPORTED_AT)
            t.add_row(name, "not applicable" if at < 0 else error[at:].split(":")[0],
                      "", "", "", "")
            notes.append(f"{name} {NO_MODULE if at < 0 else error[at:]}")
            continue
        if f["status"] != "ok":
            t.add_row(name, "error", "", "", "", "")
            continue
        rep = f.get("reported", {})
        held = {**rep.get("session_options", {}), **rep.get("compiled_properties", {})}
        threads = {k: v for k, v in {**rep, **held}.items()
                   if any(w in k.lower() for w in ("thread", "synchronous", "streams",
                                                     "precision"))
                   and not isinstance(v, dict)}
        reports.append(f"{name} reports " + ", ".join(f"{k}={v}" for k, v in threads.items()))
        if f.get("output_error") is not None:  # an ONNX file, run by ONNX Runtime as it is
            reports.append(f"{name} ran the file itself; outputs: max |native - {name}| / "
                           f"max |{name}| = {f['output_error']:.2e}")
        share = f.get("outside_share")
        ratio = f.get("overhead_ratio")
        t.add_row(name, _lat(f["latency"]), "-" if ratio is None else f"{ratio:.2f}x",
                  _ms(f.get("overhead_ns")), _ms(f.get("kernel_ns")),
                  "-" if share is None else f"{share:.0%}")
    console.print(t)
    console.print("native kernels: each plan kernel of the executed (optimised) graph alone, "
                  "and each node of the graph as built (before the passes) as an isolated "
                  "kernel; 'outside kernels' is read against the executed graph", soft_wrap=True)
    if native["status"] == "ok" and native.get("split"):
        _print_split(console, native["split"], result["frameworks"],
                     native.get("beyond_kernels_ns"))
    for line in reports + notes:
        console.print(line, soft_wrap=True)
    ok = [f for f in result["frameworks"] if f["status"] == "ok" and f.get("per_op")]
    if ok:
        ops = Table(title="per op type, ms per run (framework / native)")
        ops.add_column("op")
        ops.add_column("native")
        for f in ok:
            ops.add_column(f"{f['framework']} ({f['mode']})")
        names = list(dict.fromkeys(r["op"] for f in ok for r in f["per_op"]))
        for op in names:
            nat = native.get("per_op", {}).get(op) if native["status"] == "ok" else None
            cells = [op, "-" if nat is None else f"{_ms(nat['ns'])} ({nat['nodes']:.0f})"]
            for f in ok:
                row = next((r for r in f["per_op"] if r["op"] == op), None)
                if row is None or row["framework_ns"] is None:
                    cells.append("-")
                    continue
                ratio = f" {row['ratio']:.2f}x" if row.get("ratio") else ""
                cells.append(f"{_ms(row['framework_ns'])}{ratio}")
            ops.add_row(*cells)
        console.print(ops)
    disp = result.get("dispatch")
    if disp:
        _print_dispatch(console, disp)
    sc = result.get("scaling")
    if sc:
        threads = sc["threads"]
        s = Table(title=f"heavy ops at {', '.join(map(str, threads))} threads, ms "
                        f"(speed-up {threads[0]} -> {threads[-1]})")
        s.add_column("op (count)")
        runners = list(sc["ops"][0]["ns"]) if sc["ops"] else []
        for r in runners:
            s.add_column(r)
        for o in sc["ops"]:
            cells = [f"{o['describe']} ({o['count']})"]
            for r in runners:
                by_t = o["ns"][r]
                times = "/".join(_ms(by_t.get(str(t))) for t in threads)
                sp = o["speedup"].get(r)
                cells.append(times + (f" (x{sp:.2f})" if sp else ""))
            s.add_row(*cells)
        console.print(s)
        for e in sc["errors"]:
            console.print(f"[red]error:[/red] {e}")
    errors = ([native["error"]] if native["status"] != "ok" else []) + [
        f["error"] for f in result["frameworks"] if f["status"] not in ("ok", "not_applicable")]
    for e in errors:
        console.print(f"[red]error:[/red] {e}")


def _print_split(console: Any, split: dict[str, Any], frameworks: list[dict[str, Any]],
                 native_beyond: float | None) -> None:
    def us(v: float | None) -> str:
        return "-" if v is None else f"{v / 1e3:.4g}"

    lat = split["latency_ns"]
    t = Table(title=f"native latency {us(lat)} us, split")
    t.add_column("part")
    t.add_column("us", justify="right")
    t.add_column("of latency", justify="right")
    labels = split["labels"]
    for key in ("kernels_warm_ns", "memory_cache_ns", "executor_ns", "rest_ns"):
        v = split[key]
        t.add_row(labels[key], us(v), "-" if v is None else f"{v / lat:.0%}")
    t.add_row(labels["cold_bound_ns"], us(split["cold_bound_ns"]), "")
    console.print(t)
    per = split["executor_us_per_node"]
    console.print(
        f"outside kernels (latency less warm kernels): {us(split['outside_kernels_ns'])} us = "
        f"executor {us(split['executor_ns'])} ("
        + ("-" if per is None else f"{per:.3g}") + f" us x {split['executed_nodes']} nodes)"
        f" + memory / cache {us(split['memory_cache_ns'])} + rest {us(split['rest_ns'])}; "
        f"chain: {_mib(split['chain_flush_bytes'])} read between calls (what one run "
        f"touches), cold: {_mib(split['cold_flush_bytes'])} (twice the caches)",
        soft_wrap=True)
    for m in split["missing"]:
        console.print(f"not measured: {m}", soft_wrap=True)
    if split.get("kernels_in_chain_ns") is not None:
        beyond = [f"native {us(native_beyond)}"] + [
            f"{f['framework']} ({f['mode']}) {us(f.get('beyond_kernels_ns'))}"
            for f in frameworks if f["status"] == "ok"]
        console.print(f"beyond the kernels as the chain meets them "
                      f"({us(split['kernels_in_chain_ns'])} us), each runner: "
                      + ", ".join(beyond) + " us", soft_wrap=True)


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.3g} MiB"


def _us(v: dict[str, Any] | None) -> str:
    if not v or "us_per_node" not in v:
        return "error"
    lo, hi = v["range_us"]
    return f"{v['us_per_node']:.3g} [{lo:.3g}, {hi:.3g}]"


def _print_dispatch(console: Any, disp: dict[str, Any]) -> None:
    ops = ", ".join(disp["ops"])
    d = Table(title=f"dispatch, us per node: chains of {disp['nodes'] + 1} and 1 tiny ops "
                    f"({ops} in turn on {tuple(disp['shape'])}), graph passes off")
    d.add_column("runner")
    rows = disp["by_threads"]
    for t in disp["threads"]:
        d.add_column(f"{t} thread{'s' if t > 1 else ''}")
    names = list(dict.fromkeys(n for r in rows.values() for n in r["frameworks"]))
    nat = [rows[str(t)]["native"] for t in disp["threads"]]
    d.add_row("native (pyparbench)", *map(_us, nat))
    d.add_row("  its kernel alone", *(f"{v['kernel_alone_us']:.3g}" if v and "kernel_alone_us"
                                      in v else "-" for v in nat))
    d.add_row("  the executor", *(f"{v['executor_us']:.3g}" if v and "executor_us" in v
                                  else "-" for v in nat))
    for name in names:
        d.add_row(name, *(_us(rows[str(t)]["frameworks"].get(name)) for t in disp["threads"]))
    console.print(d)
    for t in disp["threads"]:
        r = rows[str(t)]
        for name, v in [("native", r["native"]), *r["frameworks"].items()]:
            if v and "error" in v:
                console.print(f"[red]dispatch error[/red] ({name}, {t} threads): {v['error']}")


def _run(args: argparse.Namespace) -> int:
    args.model = model_from_args(args)  # an ONNX file: its name, checked before anything runs
    frameworks = "all" if not args.framework or "all" in args.framework else args.framework
    modes: dict[str, list[str]] = {}
    for fw, ms in args.mode or []:
        modes.setdefault(fw, []).extend(ms)
    if frameworks != "all":
        extra = set(modes) - set(frameworks)
        if extra:
            raise ValueError(f"--mode given for {', '.join(sorted(extra))}, which --framework "
                             "does not choose")
    kwargs = dict(args.model_arg or [])
    graph = build(args.model, args.batch, **kwargs)
    settings = settings_from_args(args, graph)
    progress = None if args.json else (lambda line: print(f"running {line} ...",
                                                          file=sys.stderr, flush=True))
    result = measure_overhead(
        args.model, args.batch, settings, frameworks=frameworks, modes=modes or None,
        repeats=args.repeats, warmup=args.warmup, profile=args.profile,
        cold_repeats=args.cold_repeats,
        dispatch=not args.no_dispatch, scaling=args.scaling, max_threads=args.max_threads,
        model_kwargs=kwargs, seed=args.seed, timeout=args.timeout, progress=progress)
    if args.json:
        print_json(result)
    else:
        _print(result)
    ran = [f for f in result["frameworks"] if f["status"] != "not_applicable"]
    failed = result["native"]["status"] != "ok" or bool(ran) and all(
        f["status"] != "ok" for f in ran)
    return 1 if failed else 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``overhead`` on the ``pyparbench`` command's subparsers."""
    doc = __doc__ or ""
    p = sub.add_parser(
        "overhead", help="a model in TensorFlow, PyTorch, ONNX Runtime vs the native executor",
        description=doc + (mapping.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a model name (see `pyparbench models`) or an ONNX file")
    add_shape_arg(p)
    p.add_argument("--batch", type=positive_int("--batch"), default=1,
                   help="batch size (default 1)")
    p.add_argument("--framework", action="append",
                   choices=[*mapping.FRAMEWORKS, "all"],
                   help="a framework, or all (the default); may be repeated")
    p.add_argument("--mode", action="append", type=_mode, metavar="FRAMEWORK=MODE[,MODE]",
                   help="modes of a framework (default: tensorflow=function, "
                        "torch=eager,script, onnxruntime=all, openvino=f32); may be repeated")
    p.add_argument("--repeats", type=positive_int("--repeats"), default=20,
                   help="timed runs (20)")
    p.add_argument("--warmup", type=non_negative_int("--warmup"), default=5,
                   help="untimed runs first (5)")
    p.add_argument("--profile", type=non_negative_int("--profile"), default=10,
                   help="profiled iterations for the per-op split (10; 0: none)")
    p.add_argument("--cold-repeats", type=non_negative_int("--cold-repeats"), default=3,
                   help="calls of each kernel with every cache flushed before it (3; 0: "
                        "none; each flush reads twice the caches the topology reports)")
    p.add_argument("--no-dispatch", action="store_true",
                   help="leave out the chains of tiny ops (per-node dispatch cost at 1 "
                        "thread and at all)")
    p.add_argument("--scaling", action="store_true",
                   help="also each heavy op's latency at 1..N threads")
    p.add_argument("--max-threads", type=positive_int("--max-threads"), default=None,
                   help="N for --scaling (default: the CPUs this process may use)")
    p.add_argument("--model-arg", action="append", type=_key_value, metavar="KEY=VALUE",
                   help="a model builder argument, e.g. image_size=64; may be repeated")
    p.add_argument("--seed", type=non_negative_int("--seed"), default=0,
                   help="seed of the weights (0)")
    p.add_argument("--timeout", type=positive_float("--timeout"), default=900.0,
                   help="seconds each process may take (900)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_settings_args(p)
    p.set_defaults(func=_run)
