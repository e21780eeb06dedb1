"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture")
exactly as ``keras.applications.InceptionV3`` builds it.

Every convolution is conv (no bias) -> batch norm (epsilon 1e-3, no scale:
beta, mean and variance only) -> ReLU, with TensorFlow "same" or "valid"
padding; average pools inside the modules are 3x3 stride 1 "same" and, as in
TensorFlow, do not count the padding. 23,851,784 parameters (Keras'
``count_params``, batch-norm statistics included) at 299x299; 5.71 G
multiply-adds (the paper: "5 billion multiply-adds").
"""

from __future__ import annotations

from collections.abc import Callable

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import classifier, conv_bn, image_input, vision_params

__all__ = ["inception_v3"]

Conv = Callable[..., int]


def _conv(b: GraphBuilder) -> Conv:
    """Keras' ``conv2d_bn``: conv (no bias) -> BN (no scale, eps 1e-3) -> ReLU."""
    def conv(x: int, filters: int, kh: int, kw: int, *, stride: int = 1,
             valid: bool = False, name: str) -> int:
        return conv_bn(b, x, filters, (kh, kw), stride=stride, padding=0 if valid else "same",
                       bn_scale=False, eps=1e-3, name=name)
    return conv


def _avg_branch(b: GraphBuilder, conv: Conv, x: int, filters: int) -> int:
    y = b.pool2d(x, "avg", 3, stride=1, padding=1, count_include_pad=False, name="pool")
    return conv(y, filters, 1, 1, name="pool_proj")


def _block_35(b: GraphBuilder, conv: Conv, x: int, pool_filters: int) -> int:
    """mixed0-2: 35x35 with 1x1, 5x5, double 3x3 and pool branches."""
    b1 = conv(x, 64, 1, 1, name="b1x1")
    b5 = conv(conv(x, 48, 1, 1, name="b5x5_1"), 64, 5, 5, name="b5x5_2")
    d = conv(x, 64, 1, 1, name="b3x3dbl_1")
    d = conv(conv(d, 96, 3, 3, name="b3x3dbl_2"), 96, 3, 3, name="b3x3dbl_3")
    return b.concat([b1, b5, d, _avg_branch(b, conv, x, pool_filters)], name="concat")


def _reduce_35(b: GraphBuilder, conv: Conv, x: int) -> int:
    """mixed3: 35x35 -> 17x17."""
    b3 = conv(x, 384, 3, 3, stride=2, valid=True, name="b3x3")
    d = conv(conv(x, 64, 1, 1, name="b3x3dbl_1"), 96, 3, 3, name="b3x3dbl_2")
    d = conv(d, 96, 3, 3, stride=2, valid=True, name="b3x3dbl_3")
    p = b.pool2d(x, "max", 3, stride=2, name="pool")
    return b.concat([b3, d, p], name="concat")


def _block_17(b: GraphBuilder, conv: Conv, x: int, c7: int) -> int:
    """mixed4-7: 17x17 with factorised 7x7 branches of width c7."""
    b1 = conv(x, 192, 1, 1, name="b1x1")
    s = conv(x, c7, 1, 1, name="b7x7_1")
    s = conv(conv(s, c7, 1, 7, name="b7x7_2"), 192, 7, 1, name="b7x7_3")
    d = conv(x, c7, 1, 1, name="b7x7dbl_1")
    for i, (kh, kw) in enumerate(((7, 1), (1, 7), (7, 1)), start=2):
        d = conv(d, c7, kh, kw, name=f"b7x7dbl_{i}")
    d = conv(d, 192, 1, 7, name="b7x7dbl_5")
    return b.concat([b1, s, d, _avg_branch(b, conv, x, 192)], name="concat")


def _reduce_17(b: GraphBuilder, conv: Conv, x: int) -> int:
    """mixed8: 17x17 -> 8x8."""
    b3 = conv(conv(x, 192, 1, 1, name="b3x3_1"), 320, 3, 3, stride=2, valid=True,
              name="b3x3_2")
    s = conv(x, 192, 1, 1, name="b7x7x3_1")
    s = conv(conv(s, 192, 1, 7, name="b7x7x3_2"), 192, 7, 1, name="b7x7x3_3")
    s = conv(s, 192, 3, 3, stride=2, valid=True, name="b7x7x3_4")
    p = b.pool2d(x, "max", 3, stride=2, name="pool")
    return b.concat([b3, s, p], name="concat")


def _block_8(b: GraphBuilder, conv: Conv, x: int) -> int:
    """mixed9-10: 8x8 with split 1x3 / 3x1 branches."""
    b1 = conv(x, 320, 1, 1, name="b1x1")
    s = conv(x, 384, 1, 1, name="b3x3_1")
    s = b.concat([conv(s, 384, 1, 3, name="b3x3_2a"), conv(s, 384, 3, 1, name="b3x3_2b")],
                 name="b3x3_concat")
    d = conv(conv(x, 448, 1, 1, name="b3x3dbl_1"), 384, 3, 3, name="b3x3dbl_2")
    d = b.concat([conv(d, 384, 1, 3, name="b3x3dbl_3a"), conv(d, 384, 3, 1, name="b3x3dbl_3b")],
                 name="b3x3dbl_concat")
    return b.concat([b1, s, d, _avg_branch(b, conv, x, 192)], name="concat")


@vision_params(' (at least 75)')
def inception_v3(batch: int = 1, *, classes: int = 1000, image_size: int = 299,
                 seed: int = 0) -> Graph:
    """Inception-v3 as ``keras.applications.InceptionV3`` (23,851,784 parameters).
    """
    b = GraphBuilder("inception_v3", seed)
    conv = _conv(b)
    x = image_input(b, batch, image_size)
    x = conv(x, 32, 3, 3, stride=2, valid=True, name="conv1")
    x = conv(x, 32, 3, 3, valid=True, name="conv2")
    x = conv(x, 64, 3, 3, name="conv3")
    x = b.pool2d(x, "max", 3, stride=2, name="pool1")
    x = conv(x, 80, 1, 1, valid=True, name="conv4")
    x = conv(x, 192, 3, 3, valid=True, name="conv5")
    x = b.pool2d(x, "max", 3, stride=2, name="pool2")
    for i, pool_filters in enumerate((32, 64, 64)):
        with b.scope(f"mixed{i}"):
            x = _block_35(b, conv, x, pool_filters)
    with b.scope("mixed3"):
        x = _reduce_35(b, conv, x)
    for i, c7 in enumerate((128, 160, 160, 192), start=4):
        with b.scope(f"mixed{i}"):
            x = _block_17(b, conv, x, c7)
    with b.scope("mixed8"):
        x = _reduce_17(b, conv, x)
    for i in (9, 10):
        with b.scope(f"mixed{i}"):
            x = _block_8(b, conv, x)
    meta = {"batch": batch, "image_size": image_size, "classes": classes}
    return b.build(classifier(b, x, classes), meta)
