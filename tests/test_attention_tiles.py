"""The fused attention kernel on shapes that cross its tiles: query counts
and key counts off its 4-row blocks and vector widths, causal offsets with
more keys than queries and fewer (whole rows hidden), grouped-query heads,
head sizes on and off the vector width, masks broadcast along each axis, at
1, 2 and 3 threads and on every ISA of the direct kernels; against the
float64 reference."""
from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from pyparbench import ops
from pyparbench._core import ops as _ops
from pyparbench.graph import transformer_math
from pyparbench.reference import assert_near

F32_MIN = float(np.finfo(np.float32).min)

# (B, H, Hkv, Sq, Sk, D, Dv, mask shape or None, causal, causal_fill)
CASES = [
    (1, 8, 1, 1, 1, 16, 16, None, False, F32_MIN),
    (2, 4, 4, 7, 7, 32, 32, None, True, F32_MIN),  # group 1
    (1, 8, 2, 33, 33, 32, 32, None, True, F32_MIN),  # group 4, as llama's
    (1, 8, 1, 130, 130, 64, 64, None, True, -math.inf),  # group 8
    (2, 4, 2, 7, 40, 80, 80, None, True, F32_MIN),  # queries at the end of more keys
    (1, 2, 1, 33, 17, 16, 80, None, True, -math.inf),  # fewer keys: the first rows see none
    (1, 2, 1, 33, 17, 16, 24, None, True, F32_MIN),  # ... and weigh every key alike
    (2, 4, 2, 130, 130, 64, 64, (2, 1, 1, 130), False, F32_MIN),  # a padding mask
    (2, 4, 4, 33, 19, 32, 16, (1, 4, 1, 1), False, F32_MIN),  # per head
    (2, 4, 2, 33, 19, 32, 16, (1, 1, 33, 1), True, F32_MIN),  # per query
    (2, 4, 2, 33, 19, 32, 5, (1, 1, 1, 19), True, -math.inf),  # per key, Dv off the vector
    (2, 4, 2, 7, 33, 80, 32, (2, 4, 7, 33), True, F32_MIN),  # full
    (1, 4, 1, 1, 130, 64, 64, (1, 1, 1, 130), True, -math.inf),  # one query
]
IDS = [f"b{c[0]}h{c[1]}kv{c[2]}q{c[3]}k{c[4]}d{c[5]}v{c[6]}"
       f"{'-mask' + 'x'.join(map(str, c[7])) if c[7] else ''}{'-causal' if c[8] else ''}"
       f"{'-inf' if c[9] == -math.inf else ''}" for c in CASES]


def _inputs(case: tuple, seed: int) -> tuple[np.ndarray, ...]:
    b, h, hkv, sq, sk, d, dv, mask_shape, _, _ = case
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, sk, dv)).astype(np.float32)
    if mask_shape is None:
        return q, k, v, None
    # Small scores, some keys padded away (a whole row at -1e9 would round
    # every score alike in float32, so only a mask along keys pads), some
    # -inf; where the mask varies along queries and keys, its first row is
    # all -inf (a zero row).
    mask = (0.5 * rng.standard_normal(mask_shape)).astype(np.float32)
    if mask_shape[3] > 1:
        mask[rng.random(mask_shape) < 0.2] = np.float32(-1e9)
    mask[rng.random(mask_shape) < 0.1] = -np.inf
    if mask_shape[2] > 1 and mask_shape[3] > 1:
        mask[..., 0, :] = -np.inf
    return q, k, v, mask


def _check(case: tuple, threads: int, seed: int = 0) -> None:
    q, k, v, mask = _inputs(case, seed)
    causal, fill = case[8], case[9]
    kernel = ops.Attention(q.shape, k.shape, v.shape,
                           mask_shape=None if mask is None else mask.shape, causal=causal,
                           scale=0.3, causal_fill=fill, threads=threads)
    want = transformer_math.attention(q.astype(np.float64), k.astype(np.float64),
                                      v.astype(np.float64), mask, causal, 0.3, fill)
    got = kernel.run(q, k, v, mask)
    assert_near(got, want)
    zero = np.all(want == 0, axis=-1)
    assert np.all(got[zero] == 0)
    out = np.full(kernel.output_shape, np.nan, np.float32)
    kernel.timeit(q, k, v, mask, out, repeats=2, warmup=1)
    assert np.array_equal(out, got)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_attention_matches_the_reference_across_tiles(case: tuple, threads: int) -> None:
    _check(case, threads)


def test_the_cases_hide_whole_rows() -> None:
    """The -inf cases hide rows, so the zero rows above are checked."""
    hidden = 0
    for case in CASES:
        if case[9] == -math.inf:
            q, k, v, mask = _inputs(case, 0)
            want = transformer_math.attention(q.astype(np.float64), k.astype(np.float64),
                                              v.astype(np.float64), mask, case[8], 0.3, case[9])
            hidden += int(np.all(want == 0, axis=-1).sum())
    assert hidden > 0


@pytest.fixture(params=["avx512", "avx2", "generic"])
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Kernels made in the test bind this ISA's tile."""
    if request.param not in _ops.direct_isas():
        pytest.skip(f"this CPU does not run the {request.param} direct kernels")
    _ops.set_direct_isa(request.param)
    try:
        yield str(request.param)
    finally:
        _ops.set_direct_isa("auto")


@pytest.mark.parametrize("case", [CASES[3], CASES[5], CASES[10], CASES[11]],
                         ids=[IDS[3], IDS[5], IDS[10], IDS[11]])
def test_attention_matches_the_reference_on_every_isa(isa: str, case: tuple) -> None:
    _check(case, 2, seed=1)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("causal", "fill"), [(False, F32_MIN), (True, -10.0), (True, -math.inf)])
def test_a_causal_mask_matches_the_reference(causal: bool, fill: float, threads: int) -> None:
    """An exporter's causal mask (the float32 minimum or -inf past each
    query's keys): a row weighs no key past the last its mask keeps, but a
    row the mask hides whole weighs every key alike, and a key at a value
    between the minimum and -1e30 past the kept ones leaves the row whole."""
    sq, sk = 37, 45
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 4, sq, 32)).astype(np.float32)
    k = rng.standard_normal((2, 2, sk, 32)).astype(np.float32)
    v = rng.standard_normal((2, 2, sk, 24)).astype(np.float32)
    hidden = np.arange(sk)[None, :] > np.arange(sq)[:, None] + sk - sq - 9
    mask = np.where(hidden, np.float32(F32_MIN), np.float32(0))[None, None]
    mask = np.repeat(mask, 2, axis=0)
    mask[0, 0, 1::3][hidden[1::3]] = -np.inf
    mask[0, 0, 2] = F32_MIN  # hidden whole
    mask[1, 0, 3, 30] = -1e35  # a key the mask lowers, not hides, past the kept ones
    kernel = ops.Attention(q.shape, k.shape, v.shape, mask_shape=mask.shape, causal=causal,
                           scale=0.3, causal_fill=fill, threads=threads)
    want = transformer_math.attention(q.astype(np.float64), k.astype(np.float64),
                                      v.astype(np.float64), mask, causal, 0.3, fill)
    assert_near(kernel.run(q, k, v, mask), want)
