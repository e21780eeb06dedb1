"""A Graph as the source of a PyTorch ``nn.Module``, as its users write one.

The module's source is generated, one line per graph node, into a file and
imported, so it is an ordinary ``nn.Module`` (``nn.Conv2d``,
``nn.BatchNorm2d``, ``nn.Linear``, ``nn.EmbeddingBag``, ``nn.LayerNorm``,
``nn.RMSNorm``, pooling modules and ``torch`` / ``F`` calls, attention as
``F.scaled_dot_product_attention``) that TorchScript can script
and ``torch.compile`` can trace. With ``fork``, each chain of nodes that
holds a heavy op and could run beside another becomes a method started with
``torch.jit.fork`` and joined with ``torch.jit.wait`` right before its first
use. Padding that PyTorch's modules cannot express (asymmetric, TensorFlow's
"same" at stride 2) is an explicit ``F.pad``, as users write it.
"""

from __future__ import annotations

import atexit
import importlib.util
import keyword
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pyparbench.frameworks._common import chains, parallel_chains, pool_geometry
from pyparbench.graph import Graph, Node

__all__ = ["build_module", "generate", "import_source"]

_ACT = {"relu": "torch.relu({})", "relu6": "F.relu6({})", "sigmoid": "torch.sigmoid({})",
        "tanh": "torch.tanh({})", "gelu": "F.gelu({})",
        "gelu_tanh": "F.gelu({}, approximate='tanh')", "swish": "F.silu({})",
        "hardswish": "F.hardswish({})"}
_WORKDIR: Path | None = None


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    if not s or s[0].isdigit() or keyword.iskeyword(s):
        s = "x_" + s
    return s


class _Gen:
    """Builds the module's source and the submodules it refers to."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.modules: dict[str, nn.Module] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.args = {i: _ident(graph.nodes[i].name) for i in graph.inputs}

    def value(self, nid: int) -> str:
        return self.args.get(nid, f"v{nid}")

    def owned(self, nid: int) -> bool:
        """Whether a node's value is read by one node only and is neither a
        graph input, a constant nor an output: that reader may overwrite it."""
        return (nid not in self.args and nid not in self.graph.outputs
                and self.graph.nodes[nid].op != "constant"
                and len(self.graph.consumers[nid]) == 1)

    def attr(self, node: Node, suffix: str = "") -> str:
        return f"n{node.id}_{_ident(node.name.split('/')[-1])}{suffix}"

    def line(self, node: Node) -> str:
        """``v<id> = ...`` for one node; registers its submodules and buffers."""
        g = self.graph
        a = node.attrs
        ins = [self.value(j) for j in node.inputs]
        x = ins[0] if ins else ""
        op = node.op
        expr: str
        if op == "conv2d":
            expr = self._conv2d(node, x)
        elif op == "linear":
            w = np.asarray(node.params["weight"])
            m = nn.Linear(w.shape[1], w.shape[0], bias="bias" in node.params)
            _load(m, weight=w, bias=node.params.get("bias"))
            expr = f"self.{self._add(node, m)}({x})"
            if a["relu"]:
                expr = f"torch.relu_({expr})"  # in place on a fresh result, as nn.ReLU(True)
        elif op == "matmul":
            b = f"{ins[1]}.transpose(-1, -2)" if a["trans_b"] else ins[1]
            expr = f"torch.matmul({x}, {b})"
        elif op == "embedding_bag":
            t = np.asarray(node.params["table"])
            e = nn.EmbeddingBag(t.shape[0], t.shape[1], mode=a["mode"])
            _load(e, weight=t)
            expr = f"self.{self._add(node, e)}({x})"
        elif op == "eltwise":
            kind = a["kind"]
            if kind in ("relu", "relu6") and self.owned(node.inputs[0]):
                # In place where nothing else reads the input, as nn.ReLU(inplace=True)
                # and nn.ReLU6(inplace=True) do in torchvision's models.
                expr = f"torch.relu_({x})" if kind == "relu" else f"F.relu6({x}, inplace=True)"
            else:
                expr = _ACT[kind].format(x)
        elif op == "add":
            expr = f"torch.relu_({x} + {ins[1]})" if a["relu"] else f"{x} + {ins[1]}"
        elif op == "mul":
            expr = f"{x} * {ins[1]}"
        elif op == "concat":
            expr = f"torch.cat([{', '.join(ins)}], {a['axis']})"
        elif op == "pool2d":
            expr = self._pool(node, x)
        elif op == "global_avg_pool":
            expr = f"torch.flatten(self.{self._add(node, nn.AdaptiveAvgPool2d((1, 1)))}({x}), 1)"
        elif op == "batch_norm":
            expr = self._batch_norm(node, x)
        elif op == "layer_norm":
            ln = nn.LayerNorm(node.shape[-1], eps=a["eps"])
            _load(ln, weight=node.params["scale"], bias=node.params["shift"])
            expr = f"self.{self._add(node, ln)}({x})"
        elif op == "softmax":
            expr = f"torch.softmax({x}, {a['axis']})"
        elif op == "rms_norm":
            rms = nn.RMSNorm(node.shape[-1], eps=a["eps"])
            _load(rms, weight=node.params["scale"])
            expr = f"self.{self._add(node, rms)}({x})"
        elif op == "rotary":
            expr = self._rotary(node, x)
        elif op == "attention":
            expr = self._attention(node, ins)
        elif op == "glu":
            expr = f"{_ACT[a['kind']].format(x)} * {ins[1]}"
        elif op == "reshape":
            expr = f"{x}.reshape({list(a['shape'])})"
        elif op == "transpose":
            expr = f"{x}.permute({list(a['perm'])})"
        elif op == "tril_flatten":
            n = g.nodes[node.inputs[0]].shape[1]
            li, lj = np.tril_indices(n, k=-1)
            bi, bj = self.attr(node, "_li"), self.attr(node, "_lj")
            self.buffers[bi] = torch.from_numpy(li.astype(np.int64))
            self.buffers[bj] = torch.from_numpy(lj.astype(np.int64))
            expr = f"{x}[:, self.{bi}, self.{bj}]"
        elif op == "constant":
            name = self.attr(node, "_value")
            self.buffers[name] = torch.from_numpy(np.array(node.params["value"], np.float32))
            expr = f"self.{name}"
        elif op == "reorder":  # a layout change of the native plan: an identity here
            expr = x
        elif op == "slice":  # a micro-batch of the native plan: rows of the batch
            expr = f"{x}[{a['start']}:{a['start'] + node.shape[0]}]"
        else:
            raise ValueError(f"node {node.name!r}: op {op!r} has no PyTorch form")
        # What the optimisation passes fuse: a conv's residual, then an activation.
        if op == "conv2d" and len(ins) == 2:
            expr = f"{expr} + {ins[1]}"
        if a.get("activation"):
            expr = _ACT[a["activation"]].format(expr)
        return f"v{node.id} = {expr}"

    def _add(self, node: Node, module: nn.Module) -> str:
        name = self.attr(node)
        self.modules[name] = module
        return name

    def _rotary(self, node: Node, x: str) -> str:
        """Rotate-half rotary positions, as ``transformers``' apply_rotary_pos_emb."""
        if "inv_freq" in node.params:
            raise ValueError(f"node {node.name!r}: a rotary computing its tables from "
                             "positions has no PyTorch form (run its ONNX file)")
        half = node.shape[-1] // 2
        cos, sin = self.attr(node, "_cos"), self.attr(node, "_sin")
        self.buffers[cos] = torch.from_numpy(np.array(node.params["cos"], np.float32))
        self.buffers[sin] = torch.from_numpy(np.array(node.params["sin"], np.float32))
        turned = f"torch.cat((-{x}[..., {half}:], {x}[..., :{half}]), -1)"
        return f"{x} * self.{cos} + {turned} * self.{sin}"

    def _attention(self, node: Node, ins: list[str]) -> str:
        """``F.scaled_dot_product_attention``, grouped-query heads read without
        a copy (``enable_gqa``); a causal prefill (as many queries as keys,
        no mask) is its ``is_causal``, else the hidden scores are a mask."""
        a = node.attrs
        q, k = (self.graph.nodes[j].shape for j in node.inputs[:2])
        sq, sk = q[2], k[2]
        mask = ins[3] if len(ins) > 3 else None
        is_causal = bool(a["causal"]) and mask is None and sq == sk
        if a["causal"] and not is_causal:
            hidden = self.attr(node, "_hidden")
            self.buffers[hidden] = torch.from_numpy(
                np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq)
            base = mask if mask is not None else "torch.zeros(1)"
            mask = f"torch.where(self.{hidden}, {a['causal_fill']!r}, {base})"
        return (f"F.scaled_dot_product_attention({ins[0]}, {ins[1]}, {ins[2]}, "
                f"attn_mask={mask}, is_causal={is_causal}, scale={a['scale']!r}, "
                f"enable_gqa={q[1] != k[1]})")

    def _conv2d(self, node: Node, x: str) -> str:
        a = node.attrs
        w = np.asarray(node.params["weight"])
        o, cg, kh, kw = w.shape
        pt, pb, pl, pr = a["padding"]
        symmetric = pt == pb and pl == pr
        conv = nn.Conv2d(cg * a["groups"], o, (kh, kw), stride=tuple(a["stride"]),
                         padding=(pt, pl) if symmetric else 0, dilation=tuple(a["dilation"]),
                         groups=a["groups"], bias="bias" in node.params)
        _load(conv, weight=w, bias=node.params.get("bias"))
        arg = x if symmetric else f"F.pad({x}, [{pl}, {pr}, {pt}, {pb}])"
        expr = f"self.{self._add(node, conv)}({arg})"
        return f"torch.relu_({expr})" if a["relu"] else expr

    def _pool(self, node: Node, x: str) -> str:
        a = node.attrs
        geo = pool_geometry(node, self.graph.nodes[node.inputs[0]].shape)
        (kh, kw), (sh, sw), (pt, _, pl, _) = geo.kernel, geo.stride, geo.padding
        if geo.symmetric:
            # The graph's pooling rules are PyTorch's: its modules fit exactly.
            m: nn.Module
            if geo.kind == "max":
                m = nn.MaxPool2d((kh, kw), (sh, sw), (pt, pl), ceil_mode=a["ceil_mode"])
            else:
                m = nn.AvgPool2d((kh, kw), (sh, sw), (pt, pl), ceil_mode=a["ceil_mode"],
                                 count_include_pad=a["count_include_pad"])
            return f"self.{self._add(node, m)}({x})"
        qt, qb, ql, qr = geo.pads
        oh, ow = geo.out
        if geo.kind == "max":
            return (f"F.max_pool2d(F.pad({x}, [{ql}, {qr}, {qt}, {qb}], value=float('-inf')), "
                    f"[{kh}, {kw}], [{sh}, {sw}])[:, :, :{oh}, :{ow}]")
        assert geo.count is not None
        scale = self.attr(node, "_scale")
        self.buffers[scale] = torch.from_numpy((kh * kw / geo.count).astype(np.float32))
        return (f"F.avg_pool2d(F.pad({x}, [{ql}, {qr}, {qt}, {qb}]), [{kh}, {kw}], "
                f"[{sh}, {sw}])[:, :, :{oh}, :{ow}] * self.{scale}")

    def _batch_norm(self, node: Node, x: str) -> str:
        p = node.params
        c = node.shape[1]
        scale = p["scale"] if "scale" in p else np.ones(c, np.float32)
        rank = len(node.shape)
        if rank in (2, 3, 4):
            bn = (nn.BatchNorm2d if rank == 4 else nn.BatchNorm1d)(c, eps=node.attrs["eps"])
            _load(bn, weight=scale, bias=p["shift"], running_mean=p["mean"],
                  running_var=p["var"])
            return f"self.{self._add(node, bn)}({x})"
        names = []
        for key, arr in (("mean", p["mean"]), ("var", p["var"]), ("scale", scale),
                         ("shift", p["shift"])):
            name = self.attr(node, f"_{key}")
            self.buffers[name] = torch.from_numpy(np.array(arr, np.float32))
            names.append(f"self.{name}")
        mean, var, w, b = names
        return f"F.batch_norm({x}, {mean}, {var}, {w}, {b}, False, 0.0, {node.attrs['eps']!r})"


def _load(m: nn.Module, **arrays: Any) -> None:
    """Copy graph parameters into a module's parameters and buffers."""
    with torch.no_grad():
        for name, arr in arrays.items():
            if arr is None:
                continue
            getattr(m, name).copy_(torch.from_numpy(np.array(arr, dtype=np.float32)))


_VALUE = re.compile(r"\bv\d+\b")


def _reuse_names(stmts: Sequence[str], live_out: Sequence[str]
                 ) -> tuple[list[str], dict[str, str]]:
    """Statements ``vA = ...vB...`` with each value in a variable ``x<k>`` that
    is reused once the value's last reader has run, as hand-written code
    reassigns ``x``: a dead activation is freed at once (and its memory
    reused), not held until the call returns. Returns the statements and
    each value's variable."""
    parsed = [(lhs, rhs) for lhs, _, rhs in (st.partition(" = ") for st in stmts)]
    last = {u: i for i, (_, rhs) in enumerate(parsed) for u in _VALUE.findall(rhs)}
    keep = set(live_out)
    slot: dict[str, str] = {}
    free: list[str] = []
    out = []
    for i, (lhs, rhs) in enumerate(parsed):
        uses = _VALUE.findall(rhs)
        rhs = _VALUE.sub(lambda m: slot.get(m.group(0), m.group(0)), rhs)
        for u in dict.fromkeys(uses):
            if last[u] == i and u not in keep and u in slot:
                free.append(slot[u])
        if _VALUE.fullmatch(lhs):
            slot[lhs] = free.pop() if free else f"x{len(set(slot.values()))}"
            lhs = slot[lhs]
        out.append(f"{lhs} = {rhs}")
    return out, slot


def generate(graph: Graph, fork: bool = False) -> tuple[str, dict[str, nn.Module],
                                                       dict[str, torch.Tensor]]:
    """The module's source code, its submodules and its buffers.

    ``fork``: start parallel chains with ``torch.jit.fork`` (TorchScript only).
    """
    gen = _Gen(graph)
    lines = {n.id: gen.line(n) for n in graph.nodes if n.op != "input"}
    params = ", ".join(f"{gen.args[i]}: Tensor" for i in graph.inputs)
    outs = [gen.value(o) for o in graph.outputs]
    ret_type = "Tensor" if len(outs) == 1 else f"Tuple[{', '.join(['Tensor'] * len(outs))}]"
    methods: list[str] = []
    body: list[str] = []
    parts = chains(graph)
    forked = parallel_chains(graph, parts) if fork else [False] * len(parts)
    pending: dict[str, str] = {}  # value -> future not yet waited for

    def need(values: Sequence[str]) -> None:
        for v in values:
            if v in pending:
                body.append(f"{v} = torch.jit.wait({pending.pop(v)})")

    for c, part in enumerate(parts):
        head = graph.nodes[part[0]]
        args = list(dict.fromkeys(gen.value(j) for j in head.inputs))
        need(args)
        if not forked[c]:
            body.extend(lines[i] for i in part)
            continue
        sig = ", ".join(f"{v}: Tensor" for v in args)
        code, slot = _reuse_names([lines[i] for i in part], [f"v{part[-1]}"])
        methods.append(f"    def _chain{c}(self, {sig}) -> Tensor:\n"
                       + "".join(f"        {ln}\n" for ln in code)
                       + f"        return {slot[f'v{part[-1]}']}\n")
        body.append(f"fut{c} = torch.jit.fork(self._chain{c}, {', '.join(args)})")
        pending[f"v{part[-1]}"] = f"fut{c}"
    need(outs)
    body, slot = _reuse_names(body, outs)
    ret = ", ".join(slot.get(o, o) for o in outs)
    if len(outs) > 1:
        ret = f"({ret})"
    src = (
        "# Generated by pyparbench.frameworks.torch.translate from graph "
        f"{graph.name!r}.\n"
        "from typing import Tuple\n\n"
        "import torch\n"
        "import torch.nn.functional as F\n"
        "from torch import Tensor, nn\n\n\n"
        "class GraphModule(nn.Module):\n"
        + "\n".join(methods) + ("\n" if methods else "")
        + f"    def forward(self, {params}) -> {ret_type}:\n"
        + "".join(f"        {ln}\n" for ln in body)
        + f"        return {ret}\n")
    return src, gen.modules, gen.buffers


def import_source(src: str) -> Any:
    """Import generated code from a real file (TorchScript reads the source)."""
    global _WORKDIR
    if _WORKDIR is None:
        _WORKDIR = Path(tempfile.mkdtemp(prefix="ppb-torch-"))
        atexit.register(shutil.rmtree, _WORKDIR, True)
    name = f"ppb_graph_module_{len(list(_WORKDIR.iterdir()))}"
    path = _WORKDIR / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def build_module(graph: Graph, fork: bool = False) -> tuple[nn.Module, str]:
    """The graph as an ``nn.Module`` in eval mode, with the graph's weights,
    and its source code."""
    source, modules, buffers = generate(graph, fork=fork)
    module = import_source(source).GraphModule()
    for name, m in modules.items():
        module.add_module(name, m)
    for name, t in buffers.items():
        module.register_buffer(name, t)
    return module.eval(), source
