"""Values computed from int64 token ids alone: the integers an exporter
derives from the ids for further lookups (RoBERTa's padding-aware position
ids: ``Equal``, ``Not``, ``Cast``, ``CumSum``, ``Mul``, ``Add``; its token-type
ids, a zero buffer gathered by those positions).

Like a mask's values (:mod:`~pyparbench.graph.onnx.mask_values`), they are
found without reading the pattern: the nodes that depend on the ids alone
are evaluated on probe ids, and each integer value the rest of the network
reads is either the same for every probe (folded: a constant), the ids
themselves in another shape (a view), or the padding-aware positions of the ids for one padding id and offset (run
natively as a ``position_ids`` node, which an embedding lookup reads). The
padding id is one of the integer scalars the computation reads (the
exporter's constant it compares the ids with); every probe must agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pyparbench.graph.onnx.values import Array, Unsupported
from pyparbench.graph.positions import padded_positions

__all__ = ["IdValue", "as_id_value", "id_probes"]

# Random probes per candidate padding id, beside all-padding and no-padding ids.
_PROBES = 3
# Probe ids are drawn below this (a value the computation gathers by stays
# within any table), the padding candidates mixed in.
_ID_RANGE = 8


@dataclass(frozen=True)
class IdValue:
    """A value of ONNX name ``name`` computed from the int64 input ``ids``:
    ``constant`` where it does not depend on them, the ids ``reshaped``, or
    else the padding-aware positions of the ids for ``pad_id`` and ``offset``."""

    name: str
    ids: str
    constant: Array | None
    pad_id: int = 0
    offset: int = 0
    # The ids themselves in another shape (GPT-2's view of them); else ().
    reshaped: tuple[int, ...] = ()


def id_probes(shape: tuple[int, ...], candidates: Sequence[int]) -> list[Array]:
    """Probe ids of ``shape``: random ids that are none of the candidate
    padding ids; per candidate, all of it, and random ids with it mixed in
    (the first id among them)."""
    rng = np.random.default_rng(0)
    others = [v for v in range(_ID_RANGE + len(candidates)) if v not in candidates]
    probes = [rng.choice(others, size=shape).astype(np.int64) for _ in range(_PROBES)]
    for p in candidates:
        probes.append(np.full(shape, p, np.int64))
        for _ in range(_PROBES):
            ids = rng.choice(others, size=shape).astype(np.int64)
            ids[rng.random(shape) < 0.4] = p
            ids.reshape(-1)[0] = p
            probes.append(ids)
    return probes


def as_id_value(name: str, ids: str, shape: tuple[int, ...], candidates: Sequence[int],
                run: Callable[[Array], Array]) -> IdValue:
    """The integer value ``name`` (``run`` computes it from probe ids) as a
    constant or as padding-aware positions; :class:`Unsupported` otherwise."""
    why = f"value {name!r} computed from the int64 input {ids!r} alone"
    probes = id_probes(shape, candidates)
    got = [run(p) for p in probes]
    if all(g.shape == got[0].shape and np.array_equal(g, got[0]) for g in got[1:]):
        return IdValue(name, ids, got[0])
    if all(g.size == q.size and np.array_equal(g, q.reshape(g.shape))
           for q, g in zip(probes, got, strict=True)) and got[0].ndim:
        return IdValue(name, ids, None, reshaped=tuple(int(d) for d in got[0].shape))
    if len(shape) == 2:
        for p in candidates:
            offset = int(run(np.full(shape, p, np.int64)).reshape(-1)[0])
            if all(g.shape == shape and np.array_equal(g, padded_positions(q, p, offset))
                   for q, g in zip(probes, got, strict=True)):
                return IdValue(name, ids, None, int(p), offset)
    raise Unsupported(f"{why} is neither the same for every ids nor their padding-aware "
                      f"positions (for a padding id among {sorted(candidates)})")
