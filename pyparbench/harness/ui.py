"""What the main job shows while it runs: lines, a status spinner, progress
bars weighted by estimated seconds, and the summary table.

:class:`ConsoleUI` prints to a rich console within 80 columns; the main job
(:func:`pyparbench.harness.job.run_main_job`) sees only this interface, so a
caller may give it another console (a file, a test's captured output).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from pyparbench.report.terminal import print_summary

__all__ = ["ConsoleUI", "Step"]

# Advances a progress bar: (estimated seconds done, what, how it ended).
Step = Callable[[float, str, str], None]
WIDTH = 80


class ConsoleUI:
    """The main job's terminal output (rich)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console if console is not None else Console()

    @property
    def width(self) -> int:
        return min(self.console.width, WIDTH)

    def say(self, text: str, *, style: str | None = None, wrap: bool = True) -> None:
        """One line (plain text: brackets are shown, not read as markup)."""
        self.console.print(escape(text), style=style, width=self.width if wrap else None,
                           soft_wrap=not wrap)

    def warn(self, text: str) -> None:
        self.say(text, style="yellow")

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[Callable[[str], None]]:
        """A spinner with ``text``; yields a function that changes the text."""
        with self.console.status(text) as status:
            yield lambda t: status.update(t)

    @contextlib.contextmanager
    def progress(self, total_s: float, items: int, *, eta: bool = True) -> Iterator[Step]:
        """A bar over ``items`` items whose units are estimated seconds (so
        its ETA weighs each item); yields the function that advances it."""
        columns: list[Any] = [TextColumn("{task.fields[n]:>4}/{task.fields[of]}"),
                              BarColumn(bar_width=20), TimeElapsedColumn()]
        if eta:
            columns += [TextColumn("ETA"), TimeRemainingColumn()]
        columns.append(TextColumn("{task.description}"))
        with Progress(*columns, console=self.console, transient=False) as progress:
            bar = progress.add_task("starting", total=total_s, n=0, of=items)
            done = [0]

            def step(weight_s: float, what: str, status: str) -> None:
                done[0] += 1
                progress.update(bar, advance=weight_s, n=done[0],
                                description=f"{what[:38]}: {status}")

            yield step

    def plan(self, plan: dict[str, Any]) -> None:
        """A dry run's plan (:func:`pyparbench.harness.job.dry_run`): every
        item with its estimated seconds, what the budget drops, the total."""
        self.say(f"pyparbench run --dry-run ({plan['level']}) for {plan['machine']}: "
                 f"{plan['cores']} cores, {plan['logical_cpus']} logical CPUs"
                 + (f", shard {plan['shard']}" if plan["shard"] else ""))
        self.say(f"ceilings: {plan['ceilings']}")
        for title, key in (("model configurations", "configurations"),
                           ("operator measurements", "operators")):
            items = plan[key]
            self.say(f"{title} ({len(items)}, {sum(i['estimated_s'] for i in items):.0f} s):")
            for i in items:
                self.say(f"  {i['estimated_s']:7.1f} s  {i['label']}", wrap=False)
        # One group per reason: grid settings and framework runs apart.
        for why in dict.fromkeys(i["why"] for i in plan["dropped"]):
            group = [i for i in plan["dropped"] if i["why"] == why]
            self.say(f"left out ({len(group)}): {why}:")
            for i in group:
                self.say(f"  {i['estimated_s']:7.1f} s  {i['label']}", wrap=False)
        for note in plan["notes"]:
            self.warn(f"note: {note}")
        budget = plan["budget_s"]
        reserve = plan["confirm_reserve_s"]
        self.say(f"total: about {plan['estimated_s']:.0f} s ({plan['estimated_s'] / 60:.1f} min)"
                 + (f" against a budget of {budget:.0f} s" if budget is not None else
                    ", no budget")
                 + (f", {reserve:.0f} s more kept for confirmation rounds" if reserve else ""))

    def summary(self, summary: dict[str, Any]) -> None:
        """The summary's tables (:func:`pyparbench.report.terminal.print_summary`)."""
        print_summary(summary, self.console)
