"""float64 numpy references for the heavy ops (gemm, conv2d) and the
problems they are checked on, shared by every library's tests."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from conftest import rand

# fp32 accumulation over k terms of O(1) values: error grows ~ sqrt(k) * 6e-8.
GEMM_RTOL = 2e-5
# fp32 sums of C/g*kh*kw products of O(1) values.
CONV_RTOL = 3e-5

# (m, n, k): ones, odd sizes, a long k, a wide n.
GEMM_SHAPES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (17, 13, 11), (64, 33, 129), (3, 300, 2)]

CONV_CASES = [
    # (n, c, h, w, o, k, stride, padding, dilation, groups)
    (1, 3, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 5, 11, 7, 6, (3, 2), (2, 1), (0, 0, 0, 0), (1, 1), 1),
    (1, 4, 9, 9, 8, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),
    (3, 8, 10, 12, 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 8),  # depthwise
    (1, 6, 13, 5, 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),
    (2, 3, 7, 9, 5, (5, 3), (1, 2), (2, 1, 0, 3), (1, 1), 1),  # asymmetric padding
    (1, 16, 14, 14, 32, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (1, 3, 17, 17, 4, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
]


def gemm_reference(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None, relu: bool,
                   trans_a: bool, trans_b: bool) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if trans_a:
        a64 = np.swapaxes(a64, -1, -2)
    if trans_b:
        b64 = np.swapaxes(b64, -1, -2)
    c = a64 @ b64
    if bias is not None:
        c = c + bias
    return np.maximum(c, 0) if relu else c


def gemm_operands(rng: np.random.Generator, batch: int, m: int, n: int, k: int, trans_a: bool,
                  trans_b: bool) -> tuple[np.ndarray, np.ndarray]:
    lead = (batch,) if batch else ()
    a = rand(rng, *lead, *((k, m) if trans_a else (m, k)))
    b = rand(rng, *lead, *((n, k) if trans_b else (k, n)))
    return a, b


def conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                   stride: tuple[int, int], pad: tuple[int, int, int, int],
                   dilation: tuple[int, int], groups: int, relu: bool) -> np.ndarray:
    """Direct convolution by windows, NCHW / OIHW, in float64."""
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    span_h, span_w = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    win = sliding_window_view(xp, (span_h, span_w), axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]  # N C OH OW kh kw
    og = o // groups
    outs = []
    for g in range(groups):
        xs = win[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype(np.float64)
        outs.append(np.einsum("ncyxij,ocij->noyx", xs, ws))
    y = np.concatenate(outs, axis=1)
    if bias is not None:
        y = y + bias[None, :, None, None]
    return np.maximum(y, 0) if relu else y
