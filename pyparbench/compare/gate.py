"""The regression gate of ``pyparbench compare --fail-slower PCT``: does any
row of the comparison run slower than the baseline by more than PCT?

Each matched row's hypothesis "slower by more than PCT" is tested one-sided
by the row's own test (:mod:`.slower`). A gate is judged on the whole
comparison, not per row: with dozens of rows a per-row level of 5 % fails
most pairs of runs of one configuration somewhere. So the family-wise error
over every tested row of every compared input is held at alpha by Holm's
step-down procedure: the k-th smallest p of m is compared with
alpha / (m - k + 1), and the gate stops at the first that is not below.
Holm needs no assumption about how the rows' tests depend on each other
(the rows of one run share its machine's state, so they do), which the
Benjamini-Hochberg or Hochberg procedures would, and it rejects whatever
Bonferroni rejects and more.

A row that cannot be tested (a side with too few samples, a summary's
medians) fails by its ratio alone and is marked so; it takes no part in the
correction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pyparbench.compare.match import Comparison
from pyparbench.compare.input_names import input_name
from pyparbench.stats import holm

__all__ = ["Gate", "Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    """The gate's verdict on one row."""

    slower: bool  # slower than the baseline by more than PCT, and shown so (or untested)
    tested: bool  # False: the row fails or passes by its ratio alone
    p_holm: float | None  # Holm-adjusted one-sided p of "slower beyond PCT" (tested rows)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """The verdict on every row (per compared input, in the order of its rows)."""

    percent: float  # PCT, 5.0 for 5 %
    alpha: float
    verdicts: list[list[Verdict]]
    failing: list[str]  # rows slower beyond PCT, "label" or "B: label" with several inputs
    untested: list[str]  # of those, the ones counted by their ratio alone
    rows: int  # matched rows with a ratio, over every compared input

    @property
    def failed(self) -> bool:
        return bool(self.failing)

    def line(self) -> str:
        """The closing line: 'N of M rows slower beyond PCT: ...'."""
        head = f"{len(self.failing)} of {self.rows} rows slower beyond {self.percent:g}%"
        if not self.failing:
            return head + f" (one-sided tests, Holm over the rows at alpha {self.alpha:g})"
        names = [f"{r} (untested: by its ratio alone)" if r in self.untested else r
                 for r in self.failing]
        return head + ": " + "; ".join(names)

    def as_dict(self) -> dict[str, Any]:
        return {"fail_slower_percent": self.percent, "alpha": self.alpha,
                "failed": self.failed, "rows": self.rows, "slower": len(self.failing),
                "failing": self.failing, "untested": self.untested, "line": self.line(),
                "method": "one-sided test per row of slower beyond PCT, Holm step-down over "
                          "every tested row (family-wise error at alpha); untested rows "
                          "by their ratio alone"}


def judge(c: Comparison) -> Gate:
    """The gate's verdict on comparison ``c`` (made with ``slower_than``).

    Raises
    ------
    ValueError
        ``c`` was made without ``slower_than``.
    """
    if c.slower_than is None:
        raise ValueError("the comparison was made without slower_than: no gate to judge")
    tested = [(i, j) for i, pair in enumerate(c.pairs) for j, r in enumerate(pair.rows)
              if r.slower_p is not None and r.ratio is not None]
    adjusted = dict(zip(tested, holm([c.pairs[i].rows[j].slower_p or 0.0 for i, j in tested]),
                        strict=True))
    several = len(c.pairs) > 1
    verdicts: list[list[Verdict]] = []
    failing: list[str] = []
    untested: list[str] = []
    rows = 0
    for i, pair in enumerate(c.pairs):
        out = []
        for j, r in enumerate(pair.rows):
            p = adjusted.get((i, j))
            beyond = r.ratio is not None and r.ratio > c.slower_than
            rows += r.ratio is not None
            slower = beyond and (p is None or p < c.alpha)
            out.append(Verdict(slower, p is not None, p))
            if slower:
                name = f"{input_name(i + 1)}: {r.label}" if several else r.label
                failing.append(name)
                if p is None:
                    untested.append(name)
        verdicts.append(out)
    return Gate(round((c.slower_than - 1.0) * 100.0, 9), c.alpha, verdicts, failing, untested,
                rows)
