"""Building blocks shared by the model builders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pyparbench.graph import GraphBuilder

__all__ = [
    "cap_rows",
    "check_batch",
    "classifier",
    "conv_bn",
    "image_input",
    "mlp",
    "same_padding",
    "vision_params",
]


def check_batch(batch: int) -> int:
    """``batch`` as an int, or ValueError when it is not an integer >= 1."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    return batch


def cap_rows(rows: Sequence[int], max_rows: int | None) -> list[int]:
    """Table sizes with each capped at ``max_rows`` (None: no cap)."""
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 or None, got {max_rows}")
    if any(r < 1 for r in rows):
        raise ValueError(f"table sizes must be >= 1, got {list(rows)}")
    return [r if max_rows is None else min(r, max_rows) for r in rows]


F = TypeVar("F", bound=Callable[..., Any])


def vision_params(size_note: str = "") -> Callable[[F], F]:
    """Appends the parameters every image-model builder shares to its docstring."""
    doc = f"""

    Parameters
    ----------
    batch
        Images per pass (>= 1).
    classes
        Classifier outputs.
    image_size
        Height and width of the input{size_note}.
    seed
        Seed of the random weights.
    """

    def add(fn: F) -> F:
        fn.__doc__ = (fn.__doc__ or "").rstrip() + doc
        return fn

    return add


def image_input(b: GraphBuilder, batch: int, size: int, channels: int = 3) -> int:
    """The (batch, channels, size, size) float image input named "image"."""
    return b.input("image", (check_batch(batch), channels, size, size))


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's "same" padding (before, after) of one spatial axis: the
    output has ceil(size / stride) positions and any odd pad goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def conv_bn(b: GraphBuilder, x: int, out_channels: int, kernel: int | tuple[int, int], *,
            stride: int = 1, padding: int | tuple[int, int, int, int] | str = "same",
            groups: int = 1, act: str | None = "relu", conv_bias: bool = False,
            bn_scale: bool = True, eps: float = 1e-5, name: str) -> int:
    """conv2d -> batch_norm -> optional activation ("relu" or "relu6").

    ``padding="same"`` is TensorFlow's rule for the input's spatial size (for
    stride 1 and odd kernels it is the symmetric PyTorch padding k // 2).
    """
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    if padding == "same":
        _, _, h, w = b.shape(x)
        pad: int | tuple[int, int, int, int] = (
            *same_padding(h, kh, stride), *same_padding(w, kw, stride))
    elif isinstance(padding, str):
        raise ValueError(f"padding must be 'same', an int or (t, b, l, r), got {padding!r}")
    else:
        pad = padding
    with b.scope(name):
        y = b.conv2d(x, out_channels, (kh, kw), stride=stride, padding=pad, groups=groups,
                     bias=conv_bias, name="conv")
        y = b.batch_norm(y, eps=eps, scale=bn_scale, name="bn")
        return y if act is None else b.eltwise(y, act, name=act)


def classifier(b: GraphBuilder, x: int, classes: int) -> int:
    """Global average pooling, a fully connected layer to ``classes``, softmax."""
    y = b.global_avg_pool(x, name="avg_pool")
    y = b.linear(y, classes, name="fc")
    return b.softmax(y, name="predictions")


def mlp(b: GraphBuilder, x: int, widths: Sequence[int], *, relu_last: bool, name: str) -> int:
    """Fully connected layers of the given widths, ReLU after each (the last
    one only with ``relu_last``)."""
    with b.scope(name):
        for i, width in enumerate(widths):
            x = b.linear(x, width, relu=relu_last or i < len(widths) - 1, name=f"fc{i}")
    return x
