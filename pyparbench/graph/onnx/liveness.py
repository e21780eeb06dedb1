"""Which nodes of an ONNX graph its outputs need run."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import onnx

__all__ = ["live_nodes"]


def live_nodes(nodes: Sequence[onnx.NodeProto], outputs: Iterable[str], *,
               known_at_import: Collection[str] = ()) -> set[int]:
    """The indexes of the nodes whose values ``outputs`` read. A node whose
    op is in ``known_at_import`` (Shape, Size: its value is known when the
    file is read) does not need what it reads run."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    live: set[int] = set()
    stack = list(outputs)
    seen: set[str] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        k = producer.get(v)
        if k is not None and k not in live:
            live.add(k)
            if nodes[k].op_type not in known_at_import:
                stack.extend(i for i in nodes[k].input if i)
    return live
