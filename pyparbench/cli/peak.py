"""``pyparbench peak``: this machine's measured ceilings (FMA throughput, the
bf16 and int8 dot-product throughput where the CPU has them, each naming its
instruction, triad and gather bandwidth at 1..N threads) beside the
theoretical peak."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from pyparbench.cli._common import add_precision_arg, output_folder, print_json
from pyparbench.harness.folder import load_or_measure
from pyparbench.machine.peak import measure_peak

if TYPE_CHECKING:
    from pyparbench.machine.peak import Peak

__all__ = ["add_command", "peak_renderable"]


def peak_renderable(peak: Peak) -> Group:
    """The ISA and clock lines and a table of the ceilings per thread count."""
    clock = peak.clock
    others = ", ".join(f"{k} {v:.0f} MHz" for k, v in clock.readings.items()
                       if k != clock.source)
    lines = [
        Text(f"ISA: {peak.isa} ({peak.lanes} fp32 lanes, "
             f"{'fused multiply-add' if peak.fused else 'multiply + add'}, {peak.chains} "
             f"independent chains per thread)"),
        Text(f"clock assumed: {clock.mhz:.0f} MHz from {clock.source}"
             + (f" (also: {others})" if others else "")),
        Text(f"theoretical peak per core: {clock.mhz / 1e3:.3f} GHz x {peak.fma_pipes} "
             f"pipe(s) x {peak.lanes} lanes x 2 = {peak.flops_per_cycle * clock.mhz / 1e3:.1f} "
             f"GFLOP/s; one thread reached {peak.fma_ops_per_cycle:.2f} vector FMAs/cycle at "
             f"the measured {peak.measured_clock_mhz:.0f} MHz"),
        Text(f"triad: 3 arrays of {peak.triad_array_bytes / 2**20:.0f} MiB; gather: "
             f"{peak.gather_table_bytes / 2**20:.0f} MiB table, dim {peak.gather_dim}, "
             f"{peak.gather_bag} rows per bag (last-level cache "
             f"{peak.llc_bytes / 2**20:.0f} MiB); best run (median)"),
    ]
    table = Table(title="measured ceilings", title_style="bold")
    for col in ("threads", "FMA GFLOP/s", "theoretical", "%", "triad GB/s", "gather GB/s"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in peak.points:
        table.add_row(str(p.threads), f"{p.fma_gflops:.1f} ({p.fma_gflops_median:.0f})",
                      f"{p.theoretical_gflops:.1f}", f"{100 * p.fma_fraction:.0f}%",
                      f"{p.triad_gbs:.1f} ({p.triad_gbs_median:.1f})",
                      f"{p.gather_gbs:.1f} ({p.gather_gbs_median:.1f})")
    parts: list[Any] = [*lines, table]
    dots = _dot_table(peak)
    if dots is not None:
        parts.append(dots)
    parts.extend(Text(f"{prec} dot products not measured: {why}")
                 for prec, why in peak.dot_absent.items())
    if peak.fma_warning:
        parts.append(Text(f"warning: {peak.fma_warning}", style="yellow"))
    return Group(*parts)


def _dot_table(peak: Peak) -> Table | None:
    """The dot-product ceilings measured (best run), beside the FMA's, each
    headed by the instruction it is of: bf16 FLOP/s and int8 OP/s count a
    multiply-add as 2, as the FMA's FLOP/s do."""
    cols = [(name + _instruction(peak, prec), attr)
            for name, attr, prec in (("bf16 GFLOP/s", "bf16_gflops", "bf16"),
                                     ("int8 GOP/s", "int8_gops", "int8"))
            if prec not in peak.dot_absent]
    if not cols:
        return None
    table = Table(title="dot-product ceilings (x the FMA's)", title_style="bold")
    for col in ("threads", *(name for name, _ in cols)):
        table.add_column(col, justify="right", no_wrap=True)
    for p in peak.points:
        cells = []
        for _, attr in cols:
            v = getattr(p, attr)
            cells.append("-" if v is None else f"{v:.1f} ({v / p.fma_gflops:.1f}x)")
        table.add_row(str(p.threads), *cells)
    return table


def _instruction(peak: Peak, precision: str) -> str:
    """The instruction of the precision's dot-product ceiling, as " (name)";
    "" where the peak file does not name one."""
    name = peak.dot_instructions.get(precision)
    return f" ({name})" if name else ""


def _ceiling_line(peak: Peak, precision: str) -> Text:
    """The compute ceiling a run at ``precision`` is measured against (its %
    of peak, compare's per-peak normalisation), and where it comes from."""
    dots = precision in ("bf16", "int8") and precision not in peak.dot_absent
    source = (f"the {precision} dot products'" + _instruction(peak, precision) if dots
              else "the FMA's" + (f" (no {precision} dot products: {precision} runs emulated "
                                  "on them)" if precision != "fp32" else ""))
    unit = "GOP/s" if precision == "int8" and dots else "GFLOP/s"
    values = ", ".join(f"{p.threads}: {p.compute_gflops(precision):.1f}" for p in peak.points)
    return Text(f"compute ceiling of {precision} runs, {source}, {unit} by threads: {values}")


def _cmd_peak(args: argparse.Namespace) -> int:
    if args.remeasure and not args.output:
        raise ValueError("--remeasure measures again the ceilings cached in a results folder: "
                         "it needs -o DIR (without -o every call measures)")
    if args.output:
        output_folder(args.output, "-o")
        peak, cached = load_or_measure(args.output, quick=args.quick, remeasure=args.remeasure)
    else:
        peak, cached = measure_peak(quick=args.quick, isa=args.isa), False
    precision = args.precision or "fp32"
    if args.json:
        print_json({**peak.as_dict(), "cached": cached, "precision": precision,
                    "compute_gflops": {str(p.threads): p.compute_gflops(precision)
                                       for p in peak.points}})
        return 0
    console = Console()
    console.print(peak_renderable(peak), width=min(console.width, 100))
    console.print(_ceiling_line(peak, precision))
    if cached:
        console.print(f"(measured {peak.measured_at}, cached in {args.output})")
    return 0


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``peak [--json] [--quick] [--isa ISA] [-o DIR [--remeasure]]``."""
    p = subparsers.add_parser("peak", help="measured FMA, triad and gather ceilings (the roofline)",
                       description=__doc__)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    p.add_argument("--isa", default="", choices=["avx512", "avx2", "generic"],
                   help="FMA kernel ISA (default: the widest this CPU runs)")
    p.add_argument("-o", "--output", default="",
                   help="results folder: reuse the ceilings cached there for this machine, "
                        "or measure and cache them")
    p.add_argument("--remeasure", action="store_true",
                   help="with -o: measure again even if cached")
    add_precision_arg(p, "the run precision whose compute ceiling is printed (fp32: the "
                      "FMA's; bf16: the bf16 dot products', the FMA's where the CPU has none)")
    p.set_defaults(func=_cmd_peak)
