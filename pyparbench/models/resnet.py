"""ResNet-50 (as Keras applications builds it) and ResNeXt-50 (32x4d).

Both are four stages of bottleneck blocks (3, 4, 6, 3) after a 7x7 stride-2
stem and a 3x3 stride-2 max pool, then global average pooling and a
1000-way classifier. They differ in the bottleneck:

* ResNet-50, Keras' ``keras.applications.ResNet50`` ("v1"): the stride sits
  on the block's first 1x1 convolution, every convolution has a bias, batch
  norm epsilon 1.001e-5. 25,636,712 parameters (Keras' ``count_params``:
  batch-norm statistics included), 3.86 G multiply-adds at 224x224 (He et
  al. 2016 quote 3.8 G "FLOPs", i.e. multiply-adds).
* ResNeXt-50 32x4d (Xie et al. 2017, as torchvision builds it): the stride
  sits on the grouped 3x3 convolution (32 groups of width 4 per 64 base
  channels), convolutions have no bias, epsilon 1e-5. 25,028,904 trainable
  parameters (the paper's Table 1: 25.0 M), 25,097,128 with batch-norm
  statistics; 4.23 G multiply-adds (the paper: 4.2 G).

The last batch norm of each residual branch starts with a small scale
(0.1-0.3) so that activations stay O(1) over 16 blocks of random weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import classifier, conv_bn, image_input, vision_params

__all__ = ["resnet50", "resnext50_32x4d"]

STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))  # (base filters, blocks)
_RESIDUAL_SCALE = (0.1, 0.3)  # initial BN scale at the end of each residual branch


@dataclass(frozen=True)
class _Style:
    conv_bias: bool
    eps: float
    stride_on_3x3: bool
    groups: int
    width_factor: int  # bottleneck width = base filters * width_factor


_KERAS_RESNET = _Style(conv_bias=True, eps=1.001e-5, stride_on_3x3=False, groups=1,
                       width_factor=1)
# torchvision: width = planes * (width_per_group / 64) * groups = planes * 4 / 64 * 32.
_RESNEXT_32X4D = _Style(conv_bias=False, eps=1e-5, stride_on_3x3=True, groups=32,
                        width_factor=2)


def _bottleneck(b: GraphBuilder, x: int, filters: int, stride: int, style: _Style,
                name: str) -> int:
    width, out = filters * style.width_factor, filters * 4
    s1, s3 = (1, stride) if style.stride_on_3x3 else (stride, 1)
    bias, eps = style.conv_bias, style.eps
    with b.scope(name):
        shortcut = x
        if stride != 1 or b.shape(x)[1] != out:
            shortcut = conv_bn(b, x, out, 1, stride=stride, padding=0, act=None,
                               conv_bias=bias, eps=eps, name="0")
        y = conv_bn(b, x, width, 1, stride=s1, padding=0, conv_bias=bias, eps=eps, name="1")
        y = conv_bn(b, y, width, 3, stride=s3, padding=1, groups=style.groups, conv_bias=bias,
                    eps=eps, name="2")
        with b.scope("3"):  # conv_bn, but a small BN scale keeps the sum O(1)
            y = b.conv2d(y, out, 1, bias=style.conv_bias, name="conv")
            y = b.batch_norm(y, eps=style.eps, scale_range=_RESIDUAL_SCALE, name="bn")
        return b.add(y, shortcut, relu=True, name="add")


def _resnet(name: str, style: _Style, batch: int, classes: int, image_size: int,
            seed: int) -> Graph:
    b = GraphBuilder(name, seed)
    x = image_input(b, batch, image_size)
    x = conv_bn(b, x, 64, 7, stride=2, padding=3, conv_bias=style.conv_bias, eps=style.eps,
                name="conv1")
    # Padding is safe for max pooling here: its input is a ReLU output (>= 0).
    x = b.pool2d(x, "max", 3, stride=2, padding=1, name="pool1")
    for stage, (filters, blocks) in enumerate(STAGES, start=2):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 2 else 1
            x = _bottleneck(b, x, filters, stride, style, name=f"conv{stage}_block{i + 1}")
    meta = {"batch": batch, "image_size": image_size, "classes": classes}
    return b.build(classifier(b, x, classes), meta)


@vision_params()
def resnet50(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
             seed: int = 0) -> Graph:
    """ResNet-50 exactly as ``keras.applications.ResNet50`` (25,636,712 parameters).
    """
    return _resnet("resnet50", _KERAS_RESNET, batch, classes, image_size, seed)


def resnext50_32x4d(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
                    seed: int = 0) -> Graph:
    """ResNeXt-50 32x4d (Xie et al. 2017; torchvision's layout): 25.0 M parameters.

    Parameters as for :func:`resnet50`.
    """
    return _resnet("resnext50_32x4d", _RESNEXT_32X4D, batch, classes, image_size, seed)
