"""embedding_bag / EmbeddingBag against a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from _support import THREAD_COUNTS, assert_close, poisoned, rand, ref_embedding_bag

import pyparbench as ppb


# Sums of up to ~100 fp32 rows of O(1) values.
RTOL = 1e-5




def random_bags(rng: np.random.Generator, rows: int, bags: int, max_len: int,
                empty_every: int = 0) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(0, max_len + 1, size=bags)
    if empty_every:
        lengths[::empty_every] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    indices = rng.integers(0, rows, size=int(lengths.sum())).astype(np.int64)
    return indices, offsets


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [1, 3, 16, 32, 64, 100, 128, 130])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_offsets_form(dim: int, mode: str, threads: int, rng: np.random.Generator) -> None:
    table = rand(rng, 57, dim)
    idx, off = random_bags(rng, 57, 23, 9, empty_every=5)
    got = ppb.ops.embedding_bag(table, idx, off, mode=mode, threads=threads)
    assert_close(got, ref_embedding_bag(table, idx, off, mode, None), RTOL)
    assert (got[::5] == 0).all()  # empty bags give zeros


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [16, 7])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_fixed_bag_size(dim: int, mode: str, threads: int, rng: np.random.Generator) -> None:
    table = rand(rng, 1000, dim)
    idx = rng.integers(0, 1000, size=(31, 100))
    got = ppb.ops.embedding_bag(table, idx, mode=mode, threads=threads)
    assert_close(got, ref_embedding_bag(table, idx, None, mode, None), RTOL)


@pytest.mark.aarch64
@pytest.mark.parametrize("fixed", [False, True])
def test_per_sample_weights(fixed: bool, threads: int, rng: np.random.Generator) -> None:
    table = rand(rng, 40, 64)
    if fixed:
        idx, off = rng.integers(0, 40, size=(12, 5)), None
    else:
        idx, off = random_bags(rng, 40, 12, 6)
    w = rand(rng, *idx.shape)
    got = ppb.ops.embedding_bag(table, idx, off, per_sample_weights=w, threads=threads)
    assert_close(got, ref_embedding_bag(table, idx, off, "sum", w), RTOL)


@pytest.mark.aarch64
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_index_dtypes(dtype: type, rng: np.random.Generator) -> None:
    table = rand(rng, 20, 32)
    idx, off = random_bags(rng, 20, 8, 4)
    k = ppb.ops.EmbeddingBag(20, 32, mode="mean", threads=1)
    got = k.run(table, idx.astype(dtype), off.astype(dtype))
    assert_close(got, ref_embedding_bag(table, idx, off, "mean", None), RTOL)


@pytest.mark.aarch64
def test_function_converts_what_the_kernel_does_not_take(rng: np.random.Generator) -> None:
    """Arguments in the kernel's form take a direct path; every other form
    (float64 or strided table, Python lists, other index dtypes, offsets of
    another dtype, numpy ints as threads) is converted and gives the same."""
    table = rand(rng, 50, 24)
    idx, off = random_bags(rng, 50, 9, 7)
    want = ppb.ops.embedding_bag(table, idx, off)
    assert_close(want, ref_embedding_bag(table, idx, off, "sum", None), RTOL)
    wide = np.zeros((50, 48), np.float32)
    wide[:, ::2] = table
    for args, kw in [
        ((table.astype(np.float64), idx, off), {}),
        ((wide[:, ::2], idx, off), {}),
        ((table.tolist(), idx.tolist(), off.tolist()), {}),
        ((table, idx.astype(np.uint16), off.astype(np.int16)), {}),
        ((table, idx.astype(np.int32), off), {}),
        ((table, idx, off), {"threads": np.int64(2)}),
        ((table, idx, off), {"out": np.empty((9, 24), np.float32)}),
    ]:
        assert np.array_equal(ppb.ops.embedding_bag(*args, **kw), want)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        ppb.ops.embedding_bag(table, idx, off, threads=0)
    with pytest.raises(TypeError, match="threads must be an int"):
        ppb.ops.embedding_bag(table, idx, off, threads=True)
    with pytest.raises(TypeError, match="out must be float32"):
        ppb.ops.embedding_bag(table, idx, off, out=np.empty((9, 24)))
    with pytest.raises(ValueError, match=r"out has shape \(9, 23\)"):
        ppb.ops.embedding_bag(table, idx, off, out=np.empty((9, 23), np.float32))


def test_all_bags_empty_and_no_bags(rng: np.random.Generator) -> None:
    table = rand(rng, 5, 8)
    got = ppb.ops.embedding_bag(table, np.zeros(0, np.int64), np.zeros(4, np.int64))
    assert got.shape == (4, 8) and (got == 0).all()
    none = ppb.ops.embedding_bag(table, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert none.shape == (0, 8)


@pytest.mark.aarch64
def test_out_is_fully_written(threads: int, rng: np.random.Generator) -> None:
    table = rand(rng, 100, 64)
    idx, off = random_bags(rng, 100, 50, 10, empty_every=7)
    out = poisoned((50, 64))
    assert ppb.ops.embedding_bag(table, idx, off, threads=threads, out=out) is out
    assert_close(out, ref_embedding_bag(table, idx, off, "sum", None), RTOL)


def test_matches_torch_when_installed(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    table = rand(rng, 300, 64)
    idx, off = random_bags(rng, 300, 40, 20, empty_every=9)
    for mode in ("sum", "mean"):
        want = torch.nn.functional.embedding_bag(torch.from_numpy(idx), torch.from_numpy(table),
                                                 torch.from_numpy(off), mode=mode).numpy()
        np.testing.assert_allclose(ppb.ops.embedding_bag(table, idx, off, mode=mode), want,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.aarch64
def test_prepared_kernel(rng: np.random.Generator) -> None:
    k = ppb.ops.EmbeddingBag(1000, 64, threads=THREAD_COUNTS[-1])
    assert (k.rows, k.dim, k.mode, k.threads) == (1000, 64, "sum", THREAD_COUNTS[-1])
    table = rand(rng, 1000, 64)
    idx = rng.integers(0, 1000, size=(16, 20))
    assert_close(k.run(table, idx), ref_embedding_bag(table, idx, None, "sum", None), RTOL)
    ns = k.timeit(table, idx, repeats=5, warmup=1)
    assert ns.shape == (5,) and (ns > 0).all()
    assert k.bytes_moved(320, 16) == 4 * 320 * 64 + 8 * 320 + 4 * 16 * 64


@pytest.mark.parametrize("rows", [1000, 70_000])  # 70k x 64: on huge pages
def test_prepared_kernel_keeps_an_aligned_copy_of_the_table(rows: int, threads: int,
                                                           rng: np.random.Generator) -> None:
    k = ppb.ops.EmbeddingBag(rows, 64, mode="mean", threads=threads)
    assert not k.has_table
    with pytest.raises(ValueError, match="no table"):
        k.run(None, rng.integers(0, rows, size=(4, 3)))
    table = unaligned(rand(rng, rows, 64))
    k.set_table(table)
    assert k.has_table
    idx = rng.integers(0, rows, size=(600, 30))  # enough lookups for a team of threads
    want = ref_embedding_bag(table, idx, None, "mean", None)
    assert_close(k.run(None, idx), want, RTOL)
    assert (k.timeit(None, idx, repeats=2, warmup=0) > 0).all()
    # A copy: later writes to the array are not seen until set_table again;
    # a table passed to run() is used for that run alone.
    table *= 2.0
    assert_close(k.run(None, idx), want, RTOL)
    assert_close(k.run(table, idx), 2.0 * want, RTOL)
    k.set_table(table)
    assert_close(k.run(None, idx), 2.0 * want, RTOL)
    with pytest.raises(ValueError, match=r"table has shape \(10, 64\)"):
        k.set_table(rand(rng, 10, 64))
    with pytest.raises(TypeError, match="float32"):
        k.set_table(table.astype(np.float64))


def unaligned(table: np.ndarray, floats: int = 1) -> np.ndarray:
    """A copy of `table` whose data starts `floats` floats past a 64-byte
    boundary (numpy itself aligns to 16 bytes only): rows straddle lines."""
    buf = np.empty(table.size + 32, np.float32)
    start = (-buf.ctypes.data % 64) // 4 + floats
    view = buf[start:start + table.size].reshape(table.shape)
    view[...] = table
    assert view.ctypes.data % 64 == 4 * floats
    return view


# Enough lookups that every thread count runs a team (the kernel uses one
# thread below a few hundred lookups per thread), with bags of uneven sizes,
# so the split by lookups and the prefetch across bags and runs are exercised.
@pytest.mark.parametrize("dim", [1, 5, 16, 32, 64, 100, 128, 130])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_large_uneven_bags(dim: int, dtype: type, mode: str, threads: int,
                           rng: np.random.Generator) -> None:
    table = unaligned(rand(rng, 3000, dim))
    idx, off = random_bags(rng, 3000, 150, 60, empty_every=7)
    idx, off = idx.astype(dtype), off.astype(dtype)
    w = rand(rng, idx.size) if mode == "sum" else None
    out = poisoned((150, dim))
    got = ppb.ops.embedding_bag(table, idx, off, mode=mode, per_sample_weights=w,
                                threads=threads, out=out)
    assert got is out
    assert_close(got, ref_embedding_bag(table, idx, off, mode, w), RTOL)
    assert (got[::7] == 0).all()


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [16, 64, 128])
def test_large_fixed_bags_unaligned(dim: int, threads: int, rng: np.random.Generator) -> None:
    table = unaligned(rand(rng, 5000, dim))
    idx = rng.integers(0, 5000, size=(64, 100)).astype(np.int32)
    got = ppb.ops.EmbeddingBag(5000, dim, mode="mean", threads=threads).run(table, idx)
    assert_close(got, ref_embedding_bag(table, idx, None, "mean", None), RTOL)


@pytest.mark.aarch64
@pytest.mark.parametrize("dim", [16, 32, 64, 128])
@pytest.mark.parametrize("weighted", [False, True])
def test_every_offset_of_the_table_in_a_line(dim: int, weighted: bool,
                                             rng: np.random.Generator) -> None:
    """Rows of whole lines starting anywhere in a line, the first and last
    rows of the table among them."""
    base = rand(rng, 300, dim)
    idx, off = random_bags(rng, 300, 120, 40, empty_every=11)
    idx[:3] = [0, 299, 0]
    idx[-2:] = [299, 0]
    w = rand(rng, idx.size) if weighted else None
    want = ref_embedding_bag(base, idx, off, "sum", w)
    for floats in range(16):
        table = unaligned(base, floats)
        for threads in (1, 2):
            got = ppb.ops.embedding_bag(table, idx, off, per_sample_weights=w, threads=threads)
            assert_close(got, want, RTOL)
        got = ppb.ops.embedding_bag(table, idx.reshape(-1)[:100].reshape(4, 25), mode="mean")
        assert_close(got, ref_embedding_bag(base, idx.reshape(-1)[:100].reshape(4, 25), None,
                                            "mean", None), RTOL)


@pytest.mark.aarch64
def test_skewed_bags(threads: int, rng: np.random.Generator) -> None:
    """One bag holds most lookups: several threads' shares fall inside it."""
    lengths = np.array([3, 0, 6000, 1, 0, 2, 500, 0], np.int64)
    off = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    # Zipf-like: a few rows take most lookups.
    idx = np.minimum(rng.zipf(1.3, size=int(lengths.sum())) - 1, 199).astype(np.int64)
    table = rand(rng, 200, 64)
    got = ppb.ops.embedding_bag(table, idx, off, threads=threads)
    assert_close(got, ref_embedding_bag(table, idx, off, "sum", None), 1e-4)


# ------------------------------------------------------------------ bad input


@pytest.mark.aarch64
@pytest.mark.parametrize("bad,pos", [(-1, 3), (10, 0), (2**40, 7)])
def test_index_out_of_range_names_index_and_position(bad: int, pos: int, threads: int,
                                                     rng: np.random.Generator) -> None:
    table = rand(rng, 10, 16)
    idx = rng.integers(0, 10, size=12)
    idx[pos] = bad
    with pytest.raises(IndexError, match=f"index {bad} at position {pos} .* 10 rows"):
        ppb.ops.embedding_bag(table, idx, np.array([0, 4, 8]), threads=threads)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_bad_index_in_a_large_run(dtype: type, where: str, threads: int,
                                  rng: np.random.Generator) -> None:
    """A bad index anywhere in a team's run is reported, whichever thread met it."""
    idx = rng.integers(0, 300, size=(80, 50)).astype(dtype)
    pos = {"first": 0, "middle": idx.size // 2 + 3, "last": idx.size - 1}[where]
    idx.reshape(-1)[pos] = -7 if where == "middle" else 300
    bad = int(idx.reshape(-1)[pos])
    with pytest.raises(IndexError, match=f"index {bad} at position {pos} .* 300 rows"):
        ppb.ops.embedding_bag(rand(rng, 300, 32), idx, threads=threads)


@pytest.mark.aarch64
def test_int32_index_out_of_range(rng: np.random.Generator) -> None:
    idx = np.array([[1, 2], [3, -5]], np.int32)
    with pytest.raises(IndexError, match="index -5 at position 3"):
        ppb.ops.EmbeddingBag(4, 16).run(rand(rng, 4, 16), idx)


@pytest.mark.parametrize("offsets,match", [
    ([1, 2], r"offsets\[0\] must be 0, got 1"),
    ([0, 5, 3], r"non-decreasing: offsets\[2\] = 3 < offsets\[1\] = 5"),
    ([0, 2, 9], r"offsets\[2\] = 9 is past the end of indices \(6 indices\)"),
])
@pytest.mark.aarch64
def test_bad_offsets(offsets: list[int], match: str, rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=match):
        ppb.ops.embedding_bag(rand(rng, 10, 4), np.arange(6), np.array(offsets))


@pytest.mark.aarch64
def test_bad_arguments(rng: np.random.Generator) -> None:
    table = rand(rng, 10, 4)
    with pytest.raises(ValueError, match="offsets are required when indices is 1-D"):
        ppb.ops.embedding_bag(table, np.arange(4))
    with pytest.raises(ValueError, match="offsets must be None when indices is 2-D"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2), np.int64), np.array([0, 2]))
    with pytest.raises(ValueError, match="mode must be 'sum' or 'mean', got 'max'"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2), np.int64), mode="max")
    with pytest.raises(ValueError, match="per_sample_weights are only supported with mode='sum'"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2), np.int64), mode="mean",
                              per_sample_weights=np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"per_sample_weights has shape \(3,\), expected \(2, 2\)"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2), np.int64), per_sample_weights=np.ones(3))
    with pytest.raises(TypeError, match="indices must be an integer array, got dtype float64"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="indices must be 1-D or 2-D"):
        ppb.ops.embedding_bag(table, np.zeros((2, 2, 2), np.int64))
    with pytest.raises(ValueError, match="table must be 2-D"):
        ppb.ops.embedding_bag(np.ones(5), np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="rows must be >= 1, got 0"):
        ppb.ops.EmbeddingBag(0, 4)
    k = ppb.ops.EmbeddingBag(10, 4)
    with pytest.raises(ValueError, match=r"table has shape \(10, 5\), expected \(10, 4\)"):
        k.run(rand(rng, 10, 5), np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="same dtype"):
        k.run(table, np.arange(4, dtype=np.int32), np.array([0, 2], np.int64))
    with pytest.raises(TypeError, match="indices must be int32 or int64, got float32"):
        k.run(table, np.zeros((2, 2), np.float32))


def test_aligned_tables(rng: np.random.Generator) -> None:
    from pyparbench.memory import aligned_copy, aligned_empty

    t = aligned_empty((100, 64))
    assert t.ctypes.data % 64 == 0 and t.dtype == np.float32 and t.flags.c_contiguous
    table = rand(rng, 100, 64)
    a = aligned_copy(table)
    assert a.ctypes.data % 64 == 0 and np.array_equal(a, table)
    idx = rng.integers(0, 100, size=(8, 5))
    assert np.array_equal(ppb.ops.embedding_bag(a, idx), ppb.ops.embedding_bag(table, idx))
    assert aligned_empty(7, np.int64, align=128).ctypes.data % 128 == 0
    with pytest.raises(ValueError, match="power of two, got 48"):
        aligned_empty((2, 2), align=48)
