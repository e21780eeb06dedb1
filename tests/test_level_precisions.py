"""The main job measures every precision the CPU multiplies natively: fp32
as always, and each other one (bf16, int8) under the presets at the first
batch, its own rows in the report; an emulated one is left out with the
reason."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pyparbench.choices import PRESETS
from pyparbench.cli import build_parser
from pyparbench.cli.run import options_from_args
from pyparbench.harness.levels import resolve_level
from pyparbench.harness.suite import default_suite, estimate_config_s, plan_suite
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.models import build
from pyparbench.ops import implementation, quantized_implementation


def test_native_precisions_join_the_level() -> None:
    level = resolve_level("default", models=["mlp-512"], precision=None,
                          native=["fp32", "bf16", "int8"])
    assert level.precision == "fp32" and level.more_precisions == ("bf16", "int8")
    assert level.left_out == ""
    emulated = resolve_level("default", models=["mlp-512"], precision=None, native=["fp32"])
    assert emulated.more_precisions == ()
    assert emulated.left_out.startswith("bf16, int8 left out: not native here")
    int8_only = resolve_level("default", models=["mlp-512"], precision=None,
                              native=["fp32", "int8"])
    assert int8_only.more_precisions == ("int8",)
    assert int8_only.left_out.startswith("bf16 left out: not native here")
    # A precision asked for is the run's only one.
    for asked in ("fp32", "bf16", "int8"):
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


def test_the_frameworks_that_run_the_other_precision_join_it() -> None:
    """At bf16 each framework that has it runs beside the native run of its
    settings, at the first batch; ONNX Runtime (no bf16 kernels on x86) does
    not; a framework's own presets stay at fp32 (they set no precision)."""
    level = resolve_level("default", models=["mlp-512"], precision=None,
                          native=["fp32", "bf16"])
    runs = [("torch", "script"), ("onnxruntime", "all"), ("openvino", "f32"),
            ("tensorflow", "xla")]
    configs = default_suite(level, cores=2, frameworks=runs)
    bf16 = [c for c in configs if c.settings.precision == "bf16" and c.framework]
    assert sorted((c.framework, c.mode) for c in bf16) == [("openvino", "bf16"),
                                                           ("torch", "script")]
    assert all(c.batch == level.batches[0] and not c.settings.name.startswith("openvino")
               for c in bf16)
    native = {c.settings.with_(name="") for c in configs
              if c.framework is None and c.settings.precision == "bf16"}
    assert {c.settings.with_(name="") for c in bf16} <= native
    fp32 = [c for c in configs if c.settings.precision == "fp32" and c.framework]
    assert len(fp32) == len([c for c in default_suite(replace(level, more_precisions=()),
                                                      cores=2, frameworks=runs)
                             if c.framework])


def test_a_budget_keeps_one_models_frameworks_at_the_other_precision() -> None:
    """Fitted to a budget, the frameworks at bf16 are kept for the model
    whose bf16 runs cost least (with its fp32 runs, to read side by side),
    where that is at most a tenth of the budget; every other bf16 framework
    run goes before any fp32 one."""
    runs = [("torch", "script"), ("torch", "eager"), ("openvino", "f32")]
    level = resolve_level("default", models=["mlp-512", "resnet50"], precision=None,
                          native=["fp32", "bf16"])
    whole = plan_suite(replace(level, budget_s=None), cores=2, operators=False,
                       frameworks=runs)
    bf16_s = {m: sum(s for c, s in zip(whole.configs, whole.config_s)
                     if c.framework and c.model == m and c.settings.precision == "bf16")
              for m in level.models}
    cheapest = min(bf16_s, key=bf16_s.__getitem__)
    plan = plan_suite(replace(level, budget_s=10 * bf16_s[cheapest] + 1), cores=2,
                      operators=False, frameworks=runs)
    assert any(c.framework and c.settings.precision == "fp32" for c in plan.dropped)
    kept = {(c.model, c.framework, c.settings.precision) for c in plan.configs if c.framework}
    assert {m for m, f, p in kept if p == "bf16"} == {cheapest}, kept
    assert {(f, p) for m, f, p in kept if m == cheapest} == {
        (f, p) for f, _ in runs for p in ("fp32", "bf16")}, kept
    # The native bf16 run they are read against is kept beside them.
    native = {c.settings.with_(name="") for c in plan.configs
              if c.framework is None and c.model == cheapest and c.settings.precision == "bf16"}
    assert {c.settings.with_(name="") for c in plan.configs
            if c.framework and c.settings.precision == "bf16"} <= native
    # Over a tenth of the budget: none is kept, and no fp32 framework run
    # went while a bf16 one stayed.
    tight = plan_suite(replace(level, budget_s=10 * bf16_s[cheapest] - 1), cores=2,
                       operators=False, frameworks=runs)
    assert not any(c.framework and c.settings.precision == "bf16" for c in tight.configs)


def test_int8_rows_are_the_presets_at_the_first_batch_with_their_calibration_estimated(
        ) -> None:
    level = resolve_level("default", models=["mlp-512", "dlrm-kaggle"], precision=None,
                          native=["fp32", "int8"])
    configs = default_suite(level, cores=2)
    int8 = [c for c in configs if c.settings.precision == "int8"]
    assert {(c.model, c.batch) for c in int8} == {("mlp-512", 1), ("dlrm-kaggle", 1)}
    assert sorted(c.settings.name for c in int8 if c.model == "mlp-512") == sorted(PRESETS)
    assert all(c.framework is None and c.settings.library == "onednn" for c in int8)
    # An int8 run's estimate holds its calibration: more than the same
    # setting's fp32 run.
    graph = build("dlrm-kaggle", 1)
    for c in int8:
        if c.model == "dlrm-kaggle":
            fp32 = replace(c, settings=c.settings.with_(precision="fp32"))
            assert estimate_config_s(c, graph) > estimate_config_s(fp32, graph)
    # At --precision int8 no framework run is planned (none translates the
    # int8 graphs).
    asked = resolve_level("default", models=["mlp-512"], precision="int8")
    planned = default_suite(asked, cores=2, frameworks=[("torch", "eager")])
    assert planned and all(c.framework is None and c.settings.precision == "int8"
                           for c in planned)


def test_pyparbench_run_measures_this_cpus_native_precisions() -> None:
    args = build_parser().parse_args(["run", "--models", "mlp-512"])
    level = options_from_args(args).level
    native = "bf16" in cpu_features()["precisions"] and not implementation(
        "gemm", np.ones((4, 4), np.float32), np.ones((4, 4), np.float32),
        precision="bf16").emulated
    int8 = "int8" in cpu_features()["precisions"] and quantized_implementation(
        "quantized_linear", np.ones((4, 4), np.uint8), np.ones((4, 4), np.int8), x_scale=1.0,
        weight_scale=np.ones(4, np.float32))[1]
    assert level.more_precisions == (("bf16",) if native else ()) + (("int8",) if int8 else ())
    assert ("bf16" in level.left_out) == (not native)
    assert ("int8 left out" in level.left_out) == (not int8)
    args = build_parser().parse_args(["run", "--models", "mlp-512", "--precision", "fp32"])
    assert options_from_args(args).level.more_precisions == ()


@pytest.mark.parametrize("bad", ["fp16", ""])
def test_a_bad_precision_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="precision"):
        resolve_level("default", models=["mlp-512"], precision=bad)


@pytest.mark.parametrize("native", [["fp32"], ["fp32", "bf16"], ["fp32", "bf16", "int8"]])
def test_a_dry_run_says_which_precisions_it_measures_and_why_not_the_others(
        monkeypatch: pytest.MonkeyPatch, native: list[str]) -> None:
    """The plan a user reads before a run names this CPU's other native
    precisions and the reason each left out is, as the run's header does."""
    from pyparbench.harness import levels
    from pyparbench.harness.job import dry_run

    monkeypatch.setattr(levels, "_native_precisions", lambda: native)
    args = build_parser().parse_args(["run", "--dry-run", "--quick", "--no-recommend",
                                      "--models", "mlp-512"])
    notes = dry_run(options_from_args(args))["notes"]
    more = [p for p in ("bf16", "int8") if p in native]
    out = [p for p in ("bf16", "int8") if p not in native]
    assert any(n.startswith(f"{', '.join(more)} (this CPU's native precisions)")
               for n in notes) == bool(more), notes
    assert any(n.startswith(f"{', '.join(out)} left out: not native here")
               for n in notes) == bool(out), notes
