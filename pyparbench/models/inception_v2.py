"""Inception-v2 / BN-Inception (Ioffe & Szegedy 2015, "Batch Normalization", Figure 5).

GoogLeNet with batch normalisation after every convolution (conv without
bias, as the paper notes the bias is cancelled by the mean subtraction ->
batch norm -> ReLU), the 5x5 convolutions replaced by two 3x3 ones, average
pooling in most modules and two stride-2 modules (3c, 4e) whose pooling
branch passes its input through. Max pools are 3x3 stride 2 in ceil mode;
in-module average pools are 3x3 stride 1 padded by 1, counting the padding
(Caffe's rule).

Figure 5's output depths do not add up for modules 4c, 4d and 4e (its branch
widths give 608, 608 and 1056 channels where it prints 576, 576 and 1024);
this graph follows the branch widths, as the released Caffe BN-Inception
does. The paper states 13.6 M parameters for the network, more than
Figure 5's layers add up to: 11,285,224 trainable parameters here (11.3 M,
as other implementations of the figure have), 11,305,256 with batch-norm
statistics; 2.03 G multiply-adds at 224x224 (the paper gives none).
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import classifier, conv_bn, image_input, vision_params

__all__ = ["INCEPTION_MODULES", "inception_v2"]

# name: (#1x1, #3x3 reduce, #3x3, double #3x3 reduce, double #3x3, pool, proj):
# Figure 5. A stride-2 module has no 1x1 branch (0) and proj 0 (pass-through).
INCEPTION_MODULES = {
    "3a": (64, 64, 64, 64, 96, "avg", 32),
    "3b": (64, 64, 96, 64, 96, "avg", 64),
    "3c": (0, 128, 160, 64, 96, "max", 0),
    "4a": (224, 64, 96, 96, 128, "avg", 128),
    "4b": (192, 96, 128, 96, 128, "avg", 128),
    "4c": (160, 128, 160, 128, 160, "avg", 128),
    "4d": (96, 128, 192, 160, 192, "avg", 128),
    "4e": (0, 128, 192, 192, 256, "max", 0),
    "5a": (352, 192, 320, 160, 224, "avg", 128),
    "5b": (352, 192, 320, 192, 224, "max", 128),
}


def _conv(b: GraphBuilder, x: int, filters: int, kernel: int, *, stride: int = 1,
          name: str) -> int:
    return conv_bn(b, x, filters, kernel, stride=stride, padding=kernel // 2, name=name)


def _inception(b: GraphBuilder, x: int,
               widths: tuple[int, int, int, int, int, str, int]) -> int:
    c1, r3, c3, rd, cd, pool, proj = widths
    stride = 2 if c1 == 0 else 1  # the modules without a 1x1 branch reduce the grid
    branches = [] if c1 == 0 else [_conv(b, x, c1, 1, name="b1x1")]
    branches.append(_conv(b, _conv(b, x, r3, 1, name="b3x3_reduce"), c3, 3, stride=stride,
                          name="b3x3"))
    d = _conv(b, _conv(b, x, rd, 1, name="b3x3dbl_reduce"), cd, 3, name="b3x3dbl_1")
    branches.append(_conv(b, d, cd, 3, stride=stride, name="b3x3dbl_2"))
    if stride == 2:
        branches.append(b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool"))
    else:
        p = b.pool2d(x, pool, 3, stride=1, padding=1, name="pool")
        branches.append(_conv(b, p, proj, 1, name="pool_proj"))
    return b.concat(branches, name="concat")


@vision_params()
def inception_v2(batch: int = 1, *, classes: int = 1000, image_size: int = 224,
                 seed: int = 0) -> Graph:
    """BN-Inception (Inception-v2) from the batch-normalisation paper's Figure 5.
    """
    b = GraphBuilder("inception_v2", seed)
    x = image_input(b, batch, image_size)
    x = _conv(b, x, 64, 7, stride=2, name="conv1")
    x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool1")
    x = _conv(b, x, 64, 1, name="conv2_reduce")
    x = _conv(b, x, 192, 3, name="conv2")
    x = b.pool2d(x, "max", 3, stride=2, ceil_mode=True, name="pool2")
    for name, widths in INCEPTION_MODULES.items():
        with b.scope(f"inception_{name}"):
            x = _inception(b, x, widths)
    meta = {"batch": batch, "image_size": image_size, "classes": classes}
    return b.build(classifier(b, x, classes), meta)
