"""Declarative grids of settings, as benchdnn's settings lists are: lists of
values per knob, crossed, then filtered by what the machine can hold.

>>> Grid({"inter_op": ALL, "affinity": ("compact",)}).expand(cores=4)  # doctest: +SKIP

expands to sync 1x4 compact, async 2x2 compact and async 4x1 compact: the
thread axes take :data:`ALL` (1..cores), an ``intra_op`` left out is the
cores left per worker, and the scheduler left out is ``async`` exactly when
there is more than one worker. A combination is kept only if it is feasible:
a valid :class:`~pyparbench.settings.Settings` that uses every core once
(instances x inter_op x intra_op = cores: no oversubscription, no idle core)
or, with ``fill=False``, at most every core.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pyparbench.settings import Settings

__all__ = ["ALL", "Grid", "expand_all"]

ALL = "all"  # a thread axis over 1..cores
_THREAD_AXES = ("inter_op", "intra_op", "instances")
_KNOBS = {f.name for f in fields(Settings)} - {"name"}


@dataclass(frozen=True)
class Grid:
    """Values per knob (a tuple each, or :data:`ALL` for a thread axis), crossed."""

    knobs: Mapping[str, Sequence[Any] | str]
    fill: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.knobs) - _KNOBS
        if unknown:
            raise ValueError(f"unknown knob(s) {sorted(unknown)}; knobs are {sorted(_KNOBS)}")
        for k, v in self.knobs.items():
            if v == ALL and k not in _THREAD_AXES:
                raise ValueError(f"{ALL!r} is for thread axes {_THREAD_AXES}, not {k!r}")
            if v != ALL and (isinstance(v, str) or not len(v)):
                raise ValueError(f"knob {k!r} needs a non-empty sequence of values, got {v!r}")

    def expand(self, cores: int) -> list[Settings]:
        """Every feasible setting of the grid on ``cores`` cores, in grid order."""
        axes = {k: tuple(range(1, cores + 1)) if v == ALL else tuple(v)
                for k, v in self.knobs.items()}
        out: list[Settings] = []
        for combo in itertools.product(*axes.values()):
            s = self._settings(dict(zip(axes, combo, strict=True)), cores)
            if s is not None and s not in out:
                out.append(s)
        return out

    def _settings(self, d: dict[str, Any], cores: int) -> Settings | None:
        inter, instances = d.get("inter_op", 1), d.get("instances", 1)
        if "intra_op" not in d:
            if cores % (inter * instances):
                return None
            d["intra_op"] = max(1, cores // (inter * instances))
        d.setdefault("scheduler", "async" if inter > 1 else "sync")
        used = instances * inter * d["intra_op"]
        if used > cores or (self.fill and used != cores):
            return None
        try:
            return Settings(**d)
        except ValueError:  # a combination the knobs forbid (sync with 2 workers, ...)
            return None


def expand_all(grids: Iterable[Grid], cores: int) -> list[Settings]:
    """The union of several grids' settings, each once, in order."""
    out: list[Settings] = []
    for g in grids:
        out += [s for s in g.expand(cores) if s not in out]
    return out
