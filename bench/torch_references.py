"""Hand-written ``torch.nn`` models, as a PyTorch user writes them, of the
graphs :mod:`framework_fairness` measures: ResNet-50 (Keras' variant, as
pyparbench's graph: biased convolutions, the stride on the first 1x1, batch
norm epsilon 1.001e-5), GoogLeNet (torchvision's layout with the paper's
5x5 branch, as the graph), the study's MLP and DLRM (dlrm_s_pytorch.py's
structure: bottom MLP, one ``nn.EmbeddingBag`` per table, the dot
interaction with ``torch.bmm``, top MLP, sigmoid; its sparse inputs are a
list, as there; the triangle's indices are buffers made once).

:func:`build_reference` makes the one for a graph and loads the graph's
weights into it (modules in definition order against the graph's
parameterised nodes in graph order, shapes checked). Imported in the
benchmark's children only (it imports torch).
"""

# No "from __future__ import annotations": TorchScript reads these annotations.
from typing import Any, List

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["build_reference", "reference_args"]


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, eps: float) -> None:
        super().__init__()
        out = width * 4
        self.downsample = None
        if stride != 1 or cin != out:
            self.downsample = nn.Sequential(nn.Conv2d(cin, out, 1, stride),
                                            nn.BatchNorm2d(out, eps=eps))
        self.conv1 = nn.Conv2d(cin, width, 1, stride)
        self.bn1 = nn.BatchNorm2d(width, eps=eps)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(width, eps=eps)
        self.conv3 = nn.Conv2d(width, out, 1)
        self.bn3 = nn.BatchNorm2d(out, eps=eps)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        if self.downsample is not None:
            identity = self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        eps = 1.001e-5
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3)
        self.bn1 = nn.BatchNorm2d(64, eps=eps)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        blocks: list[nn.Module] = []
        cin = 64
        for i, (width, n) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for j in range(n):
                blocks.append(_Bottleneck(cin, width, 2 if j == 0 and i > 0 else 1, eps))
                cin = width * 4
        self.layers = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return torch.softmax(self.fc(torch.flatten(self.avgpool(x), 1)), 1)


class _BasicConv2d(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.bn(self.conv(x)))


class _Inception(nn.Module):
    def __init__(self, cin: int, c1: int, r3: int, c3: int, r5: int, c5: int, pp: int
                 ) -> None:
        super().__init__()
        self.branch1 = _BasicConv2d(cin, c1, 1)
        self.branch2 = nn.Sequential(_BasicConv2d(cin, r3, 1), _BasicConv2d(r3, c3, 3))
        self.branch3 = nn.Sequential(_BasicConv2d(cin, r5, 1), _BasicConv2d(r5, c5, 5))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), _BasicConv2d(cin, pp, 1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)],
                         1)


class GoogLeNet(nn.Module):
    # (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj): the paper's Table 1.
    MODULES = ((64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64),
               (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64),
               (128, 128, 256, 24, 64, 64), (112, 144, 288, 32, 64, 64),
               (256, 160, 320, 32, 128, 128), (256, 160, 320, 32, 128, 128),
               (384, 192, 384, 48, 128, 128))

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = _BasicConv2d(3, 64, 7, 2)
        self.maxpool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = _BasicConv2d(64, 64, 1)
        self.conv3 = _BasicConv2d(64, 192, 3)
        self.maxpool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        layers: list[nn.Module] = []
        cin = 192
        for i, w in enumerate(self.MODULES):
            layers.append(_Inception(cin, *w))
            cin = w[0] + w[2] + w[4] + w[5]
            if i in (1, 6):  # after 3b and 4e
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
        self.inception = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(1024, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.inception(x)
        return torch.softmax(self.fc(torch.flatten(self.avgpool(x), 1)), 1)


def _mlp(widths: list[int], relu_last: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if relu_last or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, dense: int, bottom: list[int], top: list[int], rows: list[int],
                 dim: int) -> None:
        super().__init__()
        self.bot_l = _mlp([dense, *bottom], relu_last=True)
        self.emb_l = nn.ModuleList(nn.EmbeddingBag(r, dim, mode="sum") for r in rows)
        n = len(rows) + 1
        self.top_l = _mlp([dim + n * (n - 1) // 2, *top], relu_last=False)
        li, lj = np.tril_indices(n, k=-1)
        self.register_buffer("li", torch.from_numpy(li.astype(np.int64)))
        self.register_buffer("lj", torch.from_numpy(lj.astype(np.int64)))

    def forward(self, dense_x: Tensor, ls_i: List[Tensor]) -> Tensor:
        x = self.bot_l(dense_x)
        ly: List[Tensor] = []
        for k, e in enumerate(self.emb_l):  # TorchScript unrolls a loop over a ModuleList
            ly.append(e(ls_i[k]))
        batch, d = x.shape
        t = torch.cat([x] + ly, dim=1).view((batch, -1, d))
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
        return torch.sigmoid(self.top_l(r))


def _load(model: nn.Module, graph: Any) -> None:
    """The graph's weights into the model: modules in definition order
    against parameterised nodes in graph order, shapes checked."""
    kinds = {nn.Conv2d: "conv2d", nn.BatchNorm2d: "batch_norm", nn.Linear: "linear",
             nn.EmbeddingBag: "embedding_bag"}
    mods = [m for m in model.modules() if type(m) in kinds]
    nodes = [n for n in graph.nodes if n.op in kinds.values()]
    if [kinds[type(m)] for m in mods] != [n.op for n in nodes]:
        raise ValueError(f"{type(model).__name__} does not match graph {graph.name!r} layer "
                         "for layer")
    with torch.no_grad():
        for m, n in zip(mods, nodes, strict=True):
            p = {k: torch.from_numpy(np.array(n.params[k], np.float32)) for k in n.params}
            pairs: list[tuple[Tensor, Tensor]]
            if n.op == "batch_norm":
                scale = p.get("scale", torch.ones_like(p["shift"]))
                pairs = [(m.running_mean, p["mean"]), (m.running_var, p["var"]),
                         (m.weight, scale), (m.bias, p["shift"])]
            elif n.op == "embedding_bag":
                pairs = [(m.weight, p["table"])]
            else:
                pairs = [(m.weight, p["weight"])]
                if m.bias is not None:
                    pairs.append((m.bias, p["bias"]))
            for dst, src in pairs:
                if dst.shape != src.shape:
                    raise ValueError(f"node {n.name!r}: shape {tuple(src.shape)}, module "
                                     f"{tuple(dst.shape)}")
                dst.copy_(src)


def build_reference(torch_mod: Any, graph: Any) -> tuple[nn.Module, str]:
    """The hand-written module for ``graph`` (eval mode, the graph's
    weights) and a line saying what it is."""
    model = graph.meta["model"]
    m: nn.Module
    if model == "resnet50":
        m, what = ResNet50(graph.meta["classes"]), "hand-written torch.nn ResNet-50"
    elif model == "googlenet":
        m, what = GoogLeNet(graph.meta["classes"]), "hand-written torch.nn GoogLeNet"
    elif model.startswith("mlp"):
        width, layers = graph.meta["width"], graph.meta["layers"]
        m = _mlp([width] * (layers + 1), relu_last=False)
        what = f"torch.nn.Sequential of {layers} nn.Linear + nn.ReLU"
    elif model == "dlrm":
        meta = graph.meta
        m = DLRM(meta["dense_features"], meta["bottom"], meta["top"], meta["table_rows"],
                 meta["dim"])
        what = "hand-written torch.nn DLRM (dlrm_s_pytorch.py's structure)"
    else:
        raise ValueError(f"no torch.nn reference for model {model!r}")
    _load(m, graph)
    return m.eval(), what


def reference_args(graph: Any, feeds: list[Tensor]) -> tuple[Any, ...]:
    """The reference module's call arguments from the graph's inputs in
    order (DLRM takes its sparse inputs as one list)."""
    if graph.meta["model"] == "dlrm":
        return (feeds[0], feeds[1:])
    return tuple(feeds)
