"""MobileNet-v2 (Sandler et al. 2018) exactly as ``keras.applications.MobileNetV2``
builds it with alpha 1.0.

A 3x3 stride-2 stem, 17 inverted residual blocks (1x1 expansion, 3x3
depthwise, linear 1x1 projection; a residual add where shapes allow), a
1x1 convolution to 1280 channels, global average pooling and a classifier.
Convolutions have no bias; batch norm epsilon 1e-3; activations ReLU6.
Strided convolutions pad as Keras' ``correct_pad``: one row and column
after for an even input, one on each side for an odd one. 3,538,984
parameters (Keras' ``count_params``, batch-norm statistics included); 301 M
multiply-adds at 224x224 (the paper's Table 4: 300 M, 3.4 M parameters).
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import classifier, conv_bn, image_input, vision_params

__all__ = ["mobilenet_v2"]

# (expansion t, output channels c, repeats n, first stride s): the paper's Table 2.
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1))
_EPS = 1e-3  # Keras' batch-norm epsilon here


def _strided_pad(b: GraphBuilder, x: int) -> tuple[int, int, int, int]:
    """Keras' ``correct_pad`` for a 3x3 stride-2 convolution: (kernel // 2 -
    adjust, kernel // 2) on each axis, adjust = 1 for an even size."""
    _, _, h, w = b.shape(x)
    return (1 - (h + 1) % 2, 1, 1 - (w + 1) % 2, 1)


def _inverted_residual(b: GraphBuilder, x: int, expansion: int, out: int, stride: int,
                       block_id: int) -> int:
    cin = b.shape(x)[1]
    with b.scope(f"block_{block_id}"):
        y = x
        if block_id:  # Keras' first block has no expansion convolution
            y = conv_bn(b, y, expansion * cin, 1, padding=0, act="relu6", eps=_EPS, name="expand")
        pad = _strided_pad(b, y) if stride == 2 else (1, 1, 1, 1)
        y = conv_bn(b, y, expansion * cin, 3, stride=stride, padding=pad,
                    groups=expansion * cin, act="relu6", eps=_EPS, name="depthwise")
        y = conv_bn(b, y, out, 1, padding=0, act=None, eps=_EPS, name="project")
        return b.add(y, x, name="add") if stride == 1 and cin == out else y


@vision_params()
def mobilenet_v2(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
                 seed: int = 0) -> Graph:
    """MobileNet-v2 (alpha 1.0) as ``keras.applications.MobileNetV2`` (3,538,984 parameters).
    """
    b = GraphBuilder("mobilenet_v2", seed)
    x = image_input(b, batch, image_size)
    x = conv_bn(b, x, 32, 3, stride=2, padding=_strided_pad(b, x), act="relu6", eps=_EPS,
                name="conv1")
    block_id = 0
    for t, c, n, s in BLOCKS:
        for i in range(n):
            x = _inverted_residual(b, x, t, c, s if i == 0 else 1, block_id)
            block_id += 1
    x = conv_bn(b, x, 1280, 1, padding=0, act="relu6", eps=_EPS, name="conv_last")
    meta = {"batch": batch, "image_size": image_size, "classes": classes, "alpha": 1.0}
    return b.build(classifier(b, x, classes), meta)
