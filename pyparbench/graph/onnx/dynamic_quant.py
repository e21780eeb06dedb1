"""Dynamic quantization as onnxruntime.quantization.quantize_dynamic writes
it, one op of the IR per matrix product: for each MatMulInteger /
ConvInteger whose input is a DynamicQuantizeLinear's output (with its zero
point), the chain

    DynamicQuantizeLinear(x) -> (q, s, z)
    Mul(s, w_scale) -> scale
    MatMulInteger(q, w, z, w_zero_point) / ConvInteger(...) -> sum (int32)
    Cast(sum, float) -> Mul(., scale) [-> Add(., bias)] -> y

becomes one node ``DYNAMIC_MATMUL_OP`` / ``DYNAMIC_CONV_OP`` with inputs
(x, w, w_zero_point, w_scale, bias), at the place of the chain's last node
(where the bias is computed already), its attributes the ConvInteger's.
The DynamicQuantizeLinear goes where every reader of its outputs was fused
(several products may read one: a transformer's query, key and value).
A chain that differs is left as it is, for the mapping to refuse.

:func:`dequantized_embeddings`: quantize_dynamic also quantizes an
embedding table (Gather of the int8 / uint8 table, then DequantizeLinear of
the rows, per tensor): dequantising the table first gives the same rows,
and the constant folds at import into a float32 table."""

from __future__ import annotations

from collections.abc import Mapping

import onnx
from onnx import helper

__all__ = ["DYNAMIC_CONV_OP", "DYNAMIC_MATMUL_OP", "dequantized_embeddings",
           "fuse_dynamic_quantization"]

DYNAMIC_MATMUL_OP = "PyparbenchDynamicQuantizedMatMul"
DYNAMIC_CONV_OP = "PyparbenchDynamicQuantizedConv"
_INTEGER_OPS = {"MatMulInteger": DYNAMIC_MATMUL_OP, "ConvInteger": DYNAMIC_CONV_OP}
# Ops that compute a bias from constants (ConvInteger's bias is reshaped to
# (1, O, 1, 1) in the file).
_BIAS_VIEWS = ("Reshape", "Unsqueeze", "Identity")


def fuse_dynamic_quantization(nodes: list[onnx.NodeProto], values: Mapping[str, object],
                              outputs: set[str]) -> list[onnx.NodeProto]:
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            if i:
                readers.setdefault(i, []).append(k)

    def only(value: str, op: str) -> int | None:
        r = [] if value in outputs else readers.get(value, [])
        return r[0] if len(r) == 1 and nodes[r[0]].op_type == op else None

    def constant(name: str) -> bool:
        if name in values:
            return True
        k = producer.get(name)
        return k is not None and (nodes[k].op_type == "Constant" or (
            nodes[k].op_type in _BIAS_VIEWS and all(constant(i) for i in nodes[k].input if i)))

    removed: set[int] = set()
    placed: dict[int, onnx.NodeProto] = {}  # index of a chain's last node -> the fused node
    for k, n in enumerate(nodes):
        if n.op_type not in _INTEGER_OPS or n.domain not in ("", "ai.onnx") or len(n.input) < 3:
            continue
        d = producer.get(n.input[0])
        if d is None or nodes[d].op_type != "DynamicQuantizeLinear" or \
                list(nodes[d].output[::2]) != [n.input[0], n.input[2]] or n.input[1] not in values:
            continue
        cast = only(n.output[0], "Cast")
        if cast is None or not any(a.name == "to" and a.i == onnx.TensorProto.FLOAT
                                   for a in nodes[cast].attribute):
            continue
        mul = only(nodes[cast].output[0], "Mul")
        if mul is None:
            continue
        scale = next((i for i in nodes[mul].input if i != nodes[cast].output[0]), "")
        s = producer.get(scale)
        if s is None or nodes[s].op_type != "Mul" or only(scale, "Mul") != mul:
            continue
        w_scale = [i for i in nodes[s].input if i != nodes[d].output[1]]
        if len(w_scale) != 1 or w_scale[0] not in values:
            continue
        chain = [k, cast, mul, s]
        bias, last = "", nodes[mul].output[0]
        add = only(last, "Add")
        if add is not None:
            other = next((i for i in nodes[add].input if i != last), "")
            if other and constant(other) and list(nodes[add].input).count(last) == 1:
                chain.append(add)
                bias, last = other, nodes[add].output[0]
        fused = helper.make_node(
            _INTEGER_OPS[n.op_type],
            [nodes[d].input[0], n.input[1], n.input[3] if len(n.input) > 3 else "", w_scale[0],
             bias], [last], name=n.name or last)
        fused.attribute.extend(n.attribute)
        removed.update(chain)
        placed[max(chain)] = fused
    # A DynamicQuantizeLinear whose every reader was fused goes too.
    for k, n in enumerate(nodes):
        if n.op_type == "DynamicQuantizeLinear" and all(
                o not in outputs and all(r in removed for r in readers.get(o, []))
                for o in n.output if o) and any(readers.get(o) for o in n.output if o):
            removed.add(k)
    out: list[onnx.NodeProto] = []
    for k, n in enumerate(nodes):
        if k in placed:
            out.append(placed[k])
        elif k not in removed:
            out.append(n)
    return out


def dequantized_embeddings(nodes: list[onnx.NodeProto], values: Mapping[str, object],
                           outputs: set[str]) -> list[onnx.NodeProto]:
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in n.input:
            if i:
                readers.setdefault(i, []).append(k)
    out = list(nodes)
    for k, n in enumerate(nodes):
        if n.op_type != "Gather" or n.input[0] not in values or n.output[0] in outputs:
            continue
        r = readers.get(n.output[0], [])
        if len(r) != 1 or nodes[r[0]].op_type != "DequantizeLinear":
            continue
        dq = nodes[r[0]]
        grid = [values.get(i) for i in dq.input[1:]]
        if not all(getattr(v, "size", 0) == 1 for v in grid):
            continue  # per-axis scales: left to the mapping
        table = f"{n.input[0]}/dequantized"
        out[k] = helper.make_node("DequantizeLinear", [n.input[0], *dq.input[1:]], [table],
                                  name=f"{dq.name or table}/table")
        gather = helper.make_node("Gather", [table, *n.input[1:]], list(dq.output),
                                  name=n.name)
        gather.attribute.extend(n.attribute)
        out[r[0]] = gather
    return out
