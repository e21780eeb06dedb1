"""GoogLeNet / Inception-v1 (Szegedy et al. 2014, "Going Deeper with Convolutions").

Laid out as torchvision's ``googlenet`` (every convolution is conv without
bias -> batch norm, epsilon 1e-3 -> ReLU; max pools in ceil mode; no local
response normalisation, no auxiliary classifiers, no dropout: inference), but
with the paper's 5x5 convolution in the 5x5 branch where torchvision has a
3x3; the max pool after 4e is the paper's 3x3 stride 2 (torchvision: 2x2).
The module widths are the paper's Table 1.

The paper's Table 1 adds up to 6,798 K weights (K = 1024; "6.8 M") and
1,502 M multiply-adds at 224x224. This graph has 6,990,272 weights (conv and
fully connected: 6,826 K, +0.4 %), 7,005,832 trainable parameters with batch
norm and the classifier's bias, 7,020,392 with batch-norm statistics, and
1,583 M multiply-adds. The multiply-add difference is conv1 alone: the table
lists it at 2.7 K weights and 34 M multiply-adds, where a 7x7 convolution
from 3 to 64 channels at 112x112 has 9.4 K and 118 M; every other row
agrees within a few percent.
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import classifier, conv_bn, image_input, vision_params

__all__ = ["INCEPTION_MODULES", "googlenet"]

# name: (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj): the paper's Table 1.
INCEPTION_MODULES = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}
_POOL_AFTER = ("3b", "4e")  # a 3x3 stride-2 max pool follows these modules


def _conv(b: GraphBuilder, x: int, filters: int, kernel: int, *, stride: int = 1,
          name: str) -> int:
    return conv_bn(b, x, filters, kernel, stride=stride, padding=kernel // 2, eps=1e-3,
                   name=name)


def _inception(b: GraphBuilder, x: int, widths: tuple[int, int, int, int, int, int]) -> int:
    c1, r3, c3, r5, c5, pp = widths
    b1 = _conv(b, x, c1, 1, name="b1x1")
    b3 = _conv(b, _conv(b, x, r3, 1, name="b3x3_reduce"), c3, 3, name="b3x3")
    b5 = _conv(b, _conv(b, x, r5, 1, name="b5x5_reduce"), c5, 5, name="b5x5")
    p = b.pool2d(x, "max", 3, stride=1, padding=1, name="pool")
    return b.concat([b1, b3, b5, _conv(b, p, pp, 1, name="pool_proj")], name="concat")


@vision_params()
def googlenet(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
              seed: int = 0) -> Graph:
    """GoogLeNet / Inception-v1 (the paper's widths and 5x5 branch, torchvision's
    batch norm and pooling): 7.02 M parameters, 1.58 G multiply-adds.
    """
    b = GraphBuilder("googlenet", seed)
    x = image_input(b, batch, image_size)
    x = _conv(b, x, 64, 7, stride=2, name="conv1")
    x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool1")
    x = _conv(b, x, 64, 1, name="conv2")
    x = _conv(b, x, 192, 3, name="conv3")
    x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool2")
    for name, widths in INCEPTION_MODULES.items():
        with b.scope(f"inception_{name}"):
            x = _inception(b, x, widths)
        if name in _POOL_AFTER:
            x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name=f"pool_{name}")
    meta = {"batch": batch, "image_size": image_size, "classes": classes}
    return b.build(classifier(b, x, classes), meta)
