"""The main job measures every precision the CPU multiplies natively: fp32
as always, and each other one under the presets at the first batch, its
own rows in the report; an emulated one is left out with the reason."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pyparbench.choices import PRESETS
from pyparbench.cli import build_parser
from pyparbench.cli.run import options_from_args
from pyparbench.harness.levels import resolve_level
from pyparbench.harness.suite import default_suite, plan_suite
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.ops import implementation


def test_native_precisions_join_the_level() -> None:
    level = resolve_level("default", models=["mlp-512"], precision=None,
                          native=["fp32", "bf16", "int8"])
    assert level.precision == "fp32" and level.more_precisions == ("bf16",)
    assert level.left_out == ""
    emulated = resolve_level("default", models=["mlp-512"], precision=None, native=["fp32"])
    assert emulated.more_precisions == ()
    assert emulated.left_out.startswith("bf16 left out: not native here")
    # A precision asked for is the run's only one.
    for asked in ("fp32", "bf16"):
        only = resolve_level("default", models=["mlp-512"], precision=asked, native=["bf16"])
        assert only.precision == asked and only.more_precisions == () and not only.left_out


def test_the_presets_run_at_the_other_precision_at_the_first_batch() -> None:
    level = resolve_level("default", models=["mlp-512", "ncf"], precision=None,
                          native=["fp32", "bf16"])
    configs = default_suite(level, cores=2)
    bf16 = [c for c in configs if c.settings.precision == "bf16"]
    assert {(c.model, c.batch) for c in bf16} == {("mlp-512", 1), ("ncf", 1)}
    assert sorted(c.settings.name for c in bf16 if c.model == "ncf") == sorted(PRESETS)
    assert all(c.framework is None for c in bf16)
    fp32 = [c for c in configs if c.settings.precision == "fp32"]
    assert len(fp32) == len(default_suite(replace(level, more_precisions=()), cores=2))
    # Kept whatever the budget, as the fp32 presets are.
    tight = plan_suite(replace(level, budget_s=0.0), cores=2, operators=False)
    assert {(c.model, c.settings.name) for c in tight.configs
            if c.settings.precision == "bf16"} == {(c.model, c.settings.name) for c in bf16}


def test_pyparbench_run_measures_this_cpus_native_precisions() -> None:
    args = build_parser().parse_args(["run", "--models", "mlp-512"])
    level = options_from_args(args).level
    native = "bf16" in cpu_features()["precisions"] and not implementation(
        "gemm", np.ones((4, 4), np.float32), np.ones((4, 4), np.float32),
        precision="bf16").emulated
    assert level.more_precisions == (("bf16",) if native else ())
    assert ("bf16 left out" in level.left_out) == (not native)
    args = build_parser().parse_args(["run", "--models", "mlp-512", "--precision", "fp32"])
    assert options_from_args(args).level.more_precisions == ()


@pytest.mark.parametrize("bad", ["fp16", ""])
def test_a_bad_precision_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="precision"):
        resolve_level("default", models=["mlp-512"], precision=bad)
