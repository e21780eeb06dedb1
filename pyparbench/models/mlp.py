"""The study's multilayer perceptrons: FC-512 and FC-4096.

A stack of fully connected layers of one width (8 by default, as the study's
FC-512 and FC-4096; it also uses 10), whose input has that same width, each
followed by a ReLU except the last. Parameters: layers * (width² + width):
2,101,248 for FC-512, 134,250,496 for FC-4096.
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import check_batch, mlp

__all__ = ["fc_mlp"]


def fc_mlp(batch: int = 1, *, width: int = 512, layers: int = 8, seed: int = 0) -> Graph:
    """``layers`` fully connected layers of ``width`` units on a ``width``-wide input.

    Parameters
    ----------
    batch
        Rows per pass (>= 1).
    width
        Units per layer, and the input's width.
    layers
        Number of fully connected layers (>= 1).
    seed
        Seed of the random weights.
    """
    if width < 1 or layers < 1:
        raise ValueError(f"width and layers must be >= 1, got {width} and {layers}")
    b = GraphBuilder(f"fc{width}x{layers}", seed)
    x = b.input("x", (check_batch(batch), width))
    y = mlp(b, x, [width] * layers, relu_last=False, name="mlp")
    return b.build(y, {"batch": batch, "width": width, "layers": layers})
