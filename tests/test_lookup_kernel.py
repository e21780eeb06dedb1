"""The byte lookup (ops.byte_lookup, the int8 plans' gate lookups) at every
build this CPU runs, forced: equal to the bit to numpy's table[row] and to
the generic build, on random inputs of awkward lengths (tails of every
vector width, and runs split between threads), uint8 and int8 inputs, byte
tables and float32 ones (on a grid: looked up as bytes and scaled; off it:
gathered), at 1 to 3 threads; its errors; and which build runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from conftest import LOOKUP_TIERS

from pyparbench._core import ops as core_ops
from pyparbench.machine.cpu_features import cpu_features

# Tails of every vector (32 and 64 bytes), and lengths split between
# threads (from 16385 elements), into runs that end mid-vector.
LENGTHS = (0, 1, 7, 31, 33, 63, 65, 1000, 16385, 200_003)
SCALE = 0.0371


def _grid_table(rng: np.random.Generator, zero_point: int, lo: int, hi: int
                ) -> npt.NDArray[np.float32]:
    """Rows on a grid: (q - zero point) · scale, from float64 (exact) rounded
    once to float32, as a fake_quantize's float output is."""
    q = rng.integers(lo, hi + 1, 256)
    return ((q - zero_point) * np.float64(np.float32(SCALE))).astype(np.float32)


def _tables(rng: np.random.Generator) -> dict[str, tuple[npt.NDArray[Any], float | None]]:
    """Name -> (table, scale for byte_lookup)."""
    off_grid = rng.standard_normal(256).astype(np.float32)
    with_nan = _grid_table(rng, 3, -128, 127)
    with_nan[77] = np.nan
    return {
        "uint8": (rng.integers(0, 256, 256).astype(np.uint8), None),
        "int8": (rng.integers(-128, 128, 256).astype(np.int8), None),
        "uint8 grid": (_grid_table(rng, 128, 0, 255), SCALE),
        "int8 grid": (_grid_table(rng, -5, -128, 127), SCALE),
        # Values a float32 holds but no byte's step of the grid: gathered.
        "off grid": (off_grid, SCALE),
        "grid without its scale": (_grid_table(rng, 0, 0, 255), None),
        "grid with a NaN": (with_nan, SCALE),
        "grid wider than a byte": ((np.arange(256) * 2 * np.float64(np.float32(SCALE)))
                                   .astype(np.float32), SCALE),
    }


def _rows(x: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The table row each element reads: its value less the lowest one."""
    return x.astype(np.intp) - (-128 if x.dtype == np.int8 else 0)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
def test_every_build_looks_up_table_rows_to_the_bit(n: int, x_dtype: str, lookup_tier: str,
                                                    threads: int,
                                                    rng: np.random.Generator) -> None:
    assert core_ops.lookup_isa() == lookup_tier
    assert cpu_features()["kernels"]["byte_lookup"] == lookup_tier
    x = rng.integers(0, 256, n).astype(np.uint8).view(x_dtype)
    for name, (table, scale) in _tables(rng).items():
        want = table[_rows(x)]
        got = core_ops.byte_lookup(x, table, scale=scale, threads=threads)
        assert got.dtype == table.dtype and got.shape == x.shape, name
        assert got.tobytes() == want.tobytes(), (name, np.flatnonzero(got != want)[:5])
        # The generic build's loop, on the same arrays.
        core_ops.set_lookup_isa("generic")
        try:
            generic = core_ops.byte_lookup(x, table, scale=scale, threads=threads)
        finally:
            core_ops.set_lookup_isa(lookup_tier)
        assert got.tobytes() == generic.tobytes(), name


def test_every_byte_of_both_inputs_reads_its_row(lookup_tier: str) -> None:
    table = np.random.default_rng(3).integers(0, 256, 256).astype(np.uint8)
    x = np.tile(np.arange(256, dtype=np.uint8), 3)[5:]  # every byte, in every lane
    np.testing.assert_array_equal(core_ops.byte_lookup(x, table), table[x])
    np.testing.assert_array_equal(core_ops.byte_lookup(x.view(np.int8), table),
                                  table[x ^ 0x80])


def test_out_is_written_in_place_and_any_shape_is_read(rng: np.random.Generator) -> None:
    x = rng.integers(0, 256, (3, 5, 7)).astype(np.uint8)
    table = _grid_table(rng, 0, 0, 255)
    out = np.full((105,), np.nan, np.float32)
    assert core_ops.byte_lookup(x, table, out, scale=SCALE) is out
    np.testing.assert_array_equal(out, table[x.reshape(-1)])
    assert core_ops.byte_lookup(x, table).shape == (3, 5, 7)


def test_bad_arguments_are_refused_naming_them() -> None:
    x = np.zeros(10, np.uint8)
    table = np.zeros(256, np.uint8)
    with pytest.raises(TypeError, match="x must be uint8 or int8, got float32"):
        core_ops.byte_lookup(x.astype(np.float32), table)
    with pytest.raises(TypeError, match="x must be a numpy array.*got list"):
        core_ops.byte_lookup([1, 2], table)
    with pytest.raises(TypeError, match="x must be C-contiguous"):
        core_ops.byte_lookup(np.zeros(20, np.uint8)[::2], table)
    with pytest.raises(TypeError, match="table must be uint8, int8 or float32, got int16"):
        core_ops.byte_lookup(x, table.astype(np.int16))
    with pytest.raises(ValueError, match=r"table must hold 256 rows.*\(255,\)"):
        core_ops.byte_lookup(x, table[:255])
    with pytest.raises(TypeError, match="out must be uint8.*got int8"):
        core_ops.byte_lookup(x, table, np.zeros(10, np.int8))
    with pytest.raises(ValueError, match="out holds 9 elements, x 10"):
        core_ops.byte_lookup(x, table, np.zeros(9, np.uint8))
    ro = np.zeros(10, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        core_ops.byte_lookup(x, table, ro)
    both = np.zeros(20, np.uint8)
    with pytest.raises(ValueError, match="out overlaps x"):
        core_ops.byte_lookup(both[:10], table, both[5:15])
    with pytest.raises(ValueError, match="scale is for a float32 table, not uint8"):
        core_ops.byte_lookup(x, table, scale=0.5)
    with pytest.raises(ValueError, match="scale must be > 0, got -0.5"):
        core_ops.byte_lookup(x, table.astype(np.float32), scale=-0.5)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        core_ops.byte_lookup(x, table, threads=0)


def test_a_build_is_forced_by_name_and_refused_naming_the_missing_flags() -> None:
    with pytest.raises(ValueError, match="unknown ISA 'sse9'; expected avx512vbmi, avx512"):
        core_ops.set_lookup_isa("sse9")
    flags = set(cpu_features()["flags"])
    x86 = cpu_features()["arch"] == "x86_64"
    for tier, needs in LOOKUP_TIERS.items():
        missing = [f for f in needs if f not in flags]
        if missing:
            why = f"it lacks .*{missing[-1]}" if x86 else "not an x86 build"
            with pytest.raises(ValueError,
                               match=f"does not run the {tier} byte lookup kernel \\({why}"):
                core_ops.set_lookup_isa(tier)
    widest = next(t for t, needs in LOOKUP_TIERS.items() if set(needs) <= flags)
    try:
        core_ops.set_lookup_isa("generic")
        assert core_ops.lookup_isa() == "generic"
    finally:
        core_ops.set_lookup_isa("auto")
    assert core_ops.lookup_isa() == widest
