"""The nodes of the graph IR and their parameters.

A :class:`Node` is one operation of a :class:`~pyparbench.graph.ir.Graph`
(the op vocabulary is in :mod:`pyparbench.graph.ir`'s description). Its
parameters are made lazily (see :class:`Params`), so a graph's analysis never
allocates its weights: listing a DLRM with gigabytes of tables costs nothing
until something reads a table.

Apart from the graph so that the analysis (which reads nodes) and the graph
(whose base class the analysis is) both import it, and not each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pyparbench.graph._jsonable import jsonable
from pyparbench.graph.opdefs import HEAVY_OPS
from pyparbench.memory import aligned_copy, aligned_empty

__all__ = ["ArrayParams", "F32Array", "LazyParams", "Node", "ParamSpec", "Params", "Shape"]

Shape = tuple[int, ...]
F32Array = npt.NDArray[np.float32]

# ---------------------------------------------------------------- parameters


@dataclass(frozen=True)
class ParamSpec:
    """Shape and random initialiser of one parameter array.

    ``init`` "normal" draws N(a, b²); "uniform" draws U(a, b); "integers"
    draws whole numbers uniformly from a to b (an int8 node's weights).
    """

    shape: Shape
    init: Literal["normal", "uniform", "integers"]
    a: float
    b: float

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Params(Mapping[str, F32Array]):
    """A node's parameters: read-only float32 arrays made on first access.

    Each array comes from its own generator, seeded with (graph seed, node id
    or the CRC-32 of the node's name as its builder chooses, position of the
    name), so its values do not depend on which other arrays
    were made, or in what order. Arrays start on 64-byte boundaries. Arrays are cached and read-only (they are
    shared by everyone who runs the graph).
    """

    def __init__(self, specs: Mapping[str, ParamSpec], seed: int, node_id: int) -> None:
        self._specs = dict(specs)
        self._seed = seed
        self._node_id = node_id
        self._made: dict[str, F32Array] = {}

    @property
    def specs(self) -> Mapping[str, ParamSpec]:
        return self._specs

    @property
    def shapes(self) -> dict[str, Shape]:
        return {k: s.shape for k, s in self._specs.items()}

    @property
    def materialized(self) -> tuple[str, ...]:
        """Names of the arrays made so far."""
        return tuple(self._made)

    def __getitem__(self, key: str) -> F32Array:
        arr = self._made.get(key)
        if arr is None:
            spec = self._specs[key]  # KeyError for an unknown name, as a dict
            pos = list(self._specs).index(key)
            rng = np.random.default_rng(
                np.random.SeedSequence(self._seed, spawn_key=(self._node_id, pos)))
            # Made on cache-line boundaries (numpy aligns to 16 bytes): an
            # embedding table's rows of 16 floats then each fill one line,
            # which the gather kernel reads fastest.
            if spec.init == "normal":
                arr = aligned_empty(spec.shape, np.float32)
                rng.standard_normal(dtype=np.float32, out=arr)
                arr *= np.float32(spec.b)
                arr += np.float32(spec.a)
            elif spec.init == "integers":
                arr = aligned_copy(rng.integers(int(spec.a), int(spec.b), size=spec.shape,
                                                endpoint=True).astype(np.float32))
            else:
                arr = aligned_copy(rng.uniform(spec.a, spec.b, size=spec.shape).astype(np.float32))
            arr.flags.writeable = False
            self._made[key] = arr
        return arr

    def __contains__(self, key: object) -> bool:
        # Mapping's default would call __getitem__, making the array.
        return key in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Params({self.shapes})"


class ArrayParams(Params):
    """Parameters given as arrays (a model file's own weights), not drawn at
    random: copied once to float32 on 64-byte boundaries, read-only like any
    Params. The specs keep each array's shape (their initialiser fields are
    unused)."""

    def __init__(self, arrays: Mapping[str, npt.ArrayLike]) -> None:
        made: dict[str, F32Array] = {}
        for k, v in arrays.items():
            a = aligned_copy(np.asarray(v, dtype=np.float32))
            a.flags.writeable = False
            made[k] = a
        super().__init__({k: ParamSpec(tuple(int(d) for d in a.shape), "normal", 0.0, 0.0)
                          for k, a in made.items()}, 0, 0)
        self._made = made


class LazyParams(Params):
    """Parameters a builder derives rather than draws (the cos / sin tables of
    rotary positions): ``make`` returns every array at once, called on the
    first read, so that building and listing a graph still makes nothing.
    Several nodes may share one ``make`` whose arrays are cached."""

    def __init__(self, shapes: Mapping[str, Shape], make: Callable[[], Mapping[str, F32Array]]
                 ) -> None:
        super().__init__({k: ParamSpec(tuple(int(d) for d in s), "normal", 0.0, 0.0)
                          for k, s in shapes.items()}, 0, 0)
        self._make = make

    def __getitem__(self, key: str) -> F32Array:
        if key not in self._made:
            if key not in self._specs:
                raise KeyError(key)
            made = self._make()
            for k, s in self._specs.items():
                arr = made[k]
                if arr.shape != s.shape or arr.dtype != np.float32:
                    raise ValueError(f"parameter {k!r} was made {arr.dtype} {arr.shape}, "
                                     f"declared float32 {s.shape}")
                self._made[k] = arr
        return self._made[key]


# --------------------------------------------------------------------- nodes


@dataclass(frozen=True, eq=False)
class Node:
    """One operation: its op, input node ids, attributes, parameters and output.

    Frozen: fields cannot be reassigned (``attrs`` is a plain dict by
    convention left unmodified after building). Nodes compare by identity, so
    comparing never makes parameters.
    """

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    params: Params
    shape: Shape
    dtype: str
    name: str

    @property
    def heavy(self) -> bool:
        return self.op in HEAVY_OPS

    @property
    def num_params(self) -> int:
        return sum(s.size for s in self.params.specs.values())

    @property
    def trainable_params(self) -> int:
        """Parameters less the batch-norm statistics."""
        stats = ("mean", "var") if self.op == "batch_norm" else ()
        return sum(s.size for k, s in self.params.specs.items() if k not in stats)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able description, without weights."""
        return {
            "id": self.id,
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "attrs": jsonable(self.attrs),
            "params": {k: list(s) for k, s in self.params.shapes.items()},
            "shape": list(self.shape),
            "dtype": self.dtype,
        }
