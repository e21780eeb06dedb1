"""``pyparbench overhead``: one model in TensorFlow, PyTorch and ONNX Runtime
beside pyparbench's executor, under the same thread settings.

Each run is its own process, pinned before its framework is imported. The
table shows each framework's latency (median [IQR]), the native latency,
the isolated kernels' sum, the framework overhead (framework - native,
absolute and as a ratio), the share of the framework's time outside its
kernels, the split per op type (from each framework's profiler against the
executor's per-node trace) and the per-node dispatch cost on a chain of 400
tiny ReLUs. ``--scaling`` adds each heavy op's latency at 1..N threads.

JSON (``--json``): ``model``, ``batch``, ``settings``, ``machine``,
``graph``; ``native`` {``latency``, ``kernel_sum_ns``, ``per_op``, ``audit``};
``frameworks`` [{``framework``, ``mode``, ``status``, ``latency``,
``overhead_ns``, ``overhead_ratio``, ``kernel_ns``, ``outside_kernels_ns``,
``outside_share``, ``per_op``, ``reported``, ``not_applicable``,
``proc_audit`` | ``error``}]; ``dispatch`` {``nodes``, ``native``,
``frameworks``}; ``scaling`` with ``--scaling``. Times are nanoseconds.

How the settings map onto each framework's knobs:

"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pyparbench.cli._common import (
    add_settings_args,
    positive_int,
    print_json,
    settings_from_args,
)
from pyparbench.frameworks import mapping

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


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3g}"


def _lat(lat: dict[str, Any] | None) -> str:
    if not lat:
        return "-"
    return f"{lat['median'] / 1e6:.4g} [{lat['q1'] / 1e6:.4g}, {lat['q3'] / 1e6:.4g}]"


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    native = result["native"]
    title = (f"{result['model']} batch {result['batch']}, {result['settings_label']} "
             f"({result['machine'].get('cpu_model', '')})")
    t = Table(title=title)
    for col in ("runner", "latency ms [IQR]", "vs native", "overhead ms", "kernels ms",
                "outside kernels"):
        t.add_column(col)
    if native["status"] == "ok":
        t.add_row("native (pyparbench)", _lat(native["latency"]), "1", "0",
                  f"{_ms(native['kernel_sum_ns'])} (isolated)", "-")
    else:
        t.add_row("native (pyparbench)", "error", "", "", "", "")
    reports: list[str] = []
    notes: list[str] = []
    for f in result["frameworks"]:
        name = f"{f['framework']} ({f['mode']})"
        na = "; ".join(f"{n['knob']}={n['value']}: {n['reason']}"
                       for n in f.get("not_applicable", []))
        if na:
            notes.append(f"{name} not applicable: {na}")
        if f["status"] != "ok":
            t.add_row(name, "error", "", "", "", "")
            continue
        rep = f.get("reported", {})
        threads = {k: v for k, v in {**rep, **rep.get("session_options", {})}.items()
                   if ("thread" in k or "synchronous" in k) and not isinstance(v, dict)}
        reports.append(f"{name} reports " + ", ".join(f"{k}={v}" for k, v in threads.items()))
        share = f.get("outside_share")
        ratio = f.get("overhead_ratio")
        t.add_row(name, _lat(f["latency"]), "-" if ratio is None else f"{ratio:.2f}x",
                  _ms(f.get("overhead_ns")), _ms(f.get("kernel_ns")),
                  "-" if share is None else f"{share:.0%}")
    console.print(t)
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
        d = Table(title=f"dispatch: a chain of {disp['nodes']} ReLUs on (1, 16), us per node")
        d.add_column("runner")
        d.add_column("us / node")
        nat = disp.get("native")
        if nat and "us_per_node" in nat:
            alone = nat.get("kernel_alone_us")
            d.add_row("native (pyparbench)", f"{nat['us_per_node']:.3g}"
                      + (f" (kernel alone {alone:.3g})" if alone is not None else ""))
        for name, v in disp["frameworks"].items():
            d.add_row(name, "error" if not v or "us_per_node" not in v
                      else f"{v['us_per_node']:.3g}")
        console.print(d)
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
        f["error"] for f in result["frameworks"] if f["status"] != "ok"]
    for e in errors:
        console.print(f"[red]error:[/red] {e}")


def _run(args: argparse.Namespace) -> int:
    from pyparbench.frameworks.overhead import measure_overhead
    from pyparbench.models import build

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
        dispatch=not args.no_dispatch, scaling=args.scaling, max_threads=args.max_threads,
        model_kwargs=kwargs, seed=args.seed, timeout=args.timeout, progress=progress)
    if args.json:
        print_json(result)
    else:
        _print(result)
    failed = result["native"]["status"] != "ok" or all(
        f["status"] != "ok" for f in result["frameworks"])
    return 1 if failed else 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``overhead`` on the ``pyparbench`` command's subparsers."""
    doc = __doc__ or ""
    p = sub.add_parser(
        "overhead", help="a model in TensorFlow, PyTorch, ONNX Runtime vs the native executor",
        description=doc + (mapping.__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a model name (see `pyparbench models`)")
    p.add_argument("--batch", type=positive_int("--batch"), default=1,
                   help="batch size (default 1)")
    p.add_argument("--framework", action="append",
                   choices=[*mapping.FRAMEWORKS, "all"],
                   help="a framework, or all (the default); may be repeated")
    p.add_argument("--mode", action="append", type=_mode, metavar="FRAMEWORK=MODE[,MODE]",
                   help="modes of a framework (default: tensorflow=function, "
                        "torch=eager,script, onnxruntime=all); may be repeated")
    p.add_argument("--repeats", type=positive_int("--repeats"), default=20,
                   help="timed runs (20)")
    p.add_argument("--warmup", type=_count, default=5, help="untimed runs first (5)")
    p.add_argument("--profile", type=_count, default=10,
                   help="profiled iterations for the per-op split (10; 0: none)")
    p.add_argument("--no-dispatch", action="store_true",
                   help="leave out the chain of tiny ops (per-node dispatch cost)")
    p.add_argument("--scaling", action="store_true",
                   help="also each heavy op's latency at 1..N threads")
    p.add_argument("--max-threads", type=positive_int("--max-threads"), default=None,
                   help="N for --scaling (default: the CPUs this process may use)")
    p.add_argument("--model-arg", action="append", type=_key_value, metavar="KEY=VALUE",
                   help="a model builder argument, e.g. image_size=64; may be repeated")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights (0)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds each process may take (900)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_settings_args(p)
    p.set_defaults(func=_run)
