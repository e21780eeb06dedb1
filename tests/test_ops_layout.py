"""mul, transpose and tril_flatten (the glue of attention and DLRM) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import pyparbench as ppb
from _support import assert_close, poisoned, rand


@pytest.mark.parametrize("a_shape,b_shape", [((4, 7), (4, 7)), ((2, 3, 5), (1, 3, 1)),
                                             ((6, 1), (1, 1))])
def test_mul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], threads: int,
             rng: np.random.Generator) -> None:
    a, b = rand(rng, *a_shape), rand(rng, *b_shape)
    out = poisoned(a_shape)
    ppb.ops.mul(a, b, threads=threads, out=out)
    assert_close(out, a.astype(np.float64) * b, 1e-7)


@pytest.mark.parametrize("shape,perm", [((2, 3), (1, 0)), ((2, 5, 3, 4), (0, 2, 1, 3)),
                                        ((3, 1, 4), (2, 0, 1)), ((7,), (0,)),
                                        ((2, 3, 4, 5, 2), (4, 3, 2, 1, 0))])
def test_transpose(shape: tuple[int, ...], perm: tuple[int, ...], threads: int,
                   rng: np.random.Generator) -> None:
    x = rand(rng, *shape)
    out = poisoned(tuple(shape[p] for p in perm))
    assert ppb.ops.transpose(x, perm, threads=threads, out=out) is out
    assert np.array_equal(out, x.transpose(perm))


@pytest.mark.parametrize("b,n", [(1, 2), (3, 5), (16, 27), (2, 1)])
def test_tril_flatten_is_dlrm_interaction_order(b: int, n: int, threads: int,
                                                rng: np.random.Generator) -> None:
    x = rand(rng, b, n, n)
    # dlrm's interact_features (no self-interaction): li/lj pairs with j < i.
    li = [i for i in range(n) for j in range(i)]
    lj = [j for i in range(n) for j in range(i)]
    out = poisoned((b, n * (n - 1) // 2))
    ppb.ops.tril_flatten(x, threads=threads, out=out)
    assert np.array_equal(out, x[:, li, lj])


def test_bad_layout_arguments(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=r"perm \(0, 0\) is not a permutation .* \(2, 3\)"):
        ppb.ops.transpose(rand(rng, 2, 3), (0, 0))
    with pytest.raises(ValueError, match=r"perm \(1, 0, 2\) is not a permutation"):
        ppb.ops.transpose(rand(rng, 2, 3), (1, 0, 2))
    with pytest.raises(ValueError, match=r"tril_flatten expects \(B, n, n\), got shape \(2, 3, 4\)"):
        ppb.ops.tril_flatten(rand(rng, 2, 3, 4))
    with pytest.raises(ValueError, match="binary kind must be 'add' or 'mul', got 'sub'"):
        ppb.ops.Binary("sub", [2], [2])
    with pytest.raises(ValueError, match=r"mul: b of shape \(3,\) does not broadcast"):
        ppb.ops.mul(rand(rng, 2), rand(rng, 3))
