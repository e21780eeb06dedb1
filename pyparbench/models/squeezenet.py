"""SqueezeNet 1.0 (Iandola et al. 2016), laid out as torchvision's ``squeezenet1_0``.

A 7x7 stride-2 convolution, eight Fire modules (1x1 squeeze, then 1x1 and
3x3 expand branches concatenated) with 3x3 stride-2 max pools (ceil mode)
after conv1, fire4 and fire8, and a 1x1 convolution to the classes followed
by global average pooling. Convolutions have biases and a fused ReLU; there
is no batch norm. 1,248,424 parameters, as the paper's Table 1 states;
0.82 G multiply-adds at 224x224.
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import image_input, vision_params

__all__ = ["FIRE_MODULES", "squeezenet1_0"]

# (squeeze 1x1, expand 1x1, expand 3x3) of fire2..fire9: the paper's Table 1.
FIRE_MODULES = ((16, 64, 64), (16, 64, 64), (32, 128, 128), (32, 128, 128),
                (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256))
_POOL_AFTER = (4, 8)  # a max pool follows fire4 and fire8


def _fire(b: GraphBuilder, x: int, squeeze: int, e1: int, e3: int) -> int:
    s = b.conv2d(x, squeeze, 1, relu=True, name="squeeze1x1")
    return b.concat([b.conv2d(s, e1, 1, relu=True, name="expand1x1"),
                     b.conv2d(s, e3, 3, padding=1, relu=True, name="expand3x3")], name="concat")


@vision_params()
def squeezenet1_0(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
                  seed: int = 0) -> Graph:
    """SqueezeNet 1.0: 1,248,424 parameters (the paper's Table 1).
    """
    b = GraphBuilder("squeezenet1_0", seed)
    x = image_input(b, batch, image_size)
    x = b.conv2d(x, 96, 7, stride=2, relu=True, name="conv1")
    x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool1")
    for i, (squeeze, e1, e3) in enumerate(FIRE_MODULES, start=2):
        with b.scope(f"fire{i}"):
            x = _fire(b, x, squeeze, e1, e3)
        if i in _POOL_AFTER:
            x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name=f"pool{i}")
    x = b.conv2d(x, classes, 1, relu=True, name="conv10")
    x = b.global_avg_pool(x, name="avg_pool")
    meta = {"batch": batch, "image_size": image_size, "classes": classes}
    return b.build(b.softmax(x, name="predictions"), meta)
