"""The recommender at bf16: calibration on this machine times the bf16
plan's nodes (the conversions and the bf16 matrix nodes, which fp32's
figures do not hold), and the analytic model gives a bf16 matrix node the
bf16 dot product's rate and half its weights' bytes."""

from __future__ import annotations

from typing import Any

import pytest
from _support import needs_onednn_bf16

from pyparbench.graph.passes import executed_graph
from pyparbench.models import build
from pyparbench.recommender import recommend
from pyparbench.recommender.costmodel import BF16_SPEEDUP, AnalyticCostModel
from pyparbench.settings import Settings


@needs_onednn_bf16()
def test_a_calibrated_recommendation_at_bf16(tmp_path: Any) -> None:
    """Every node of the bf16 plan has a measured time (the conversions
    included): the recommendation runs, at bf16, on the calibrated model."""
    pytest.importorskip("ml_dtypes")
    rec = recommend(build("mlp-512", 1), precision="bf16", verify=0, cache_dir=tmp_path)
    assert rec.model == "calibrated"
    assert rec.settings.precision == "bf16"
    assert all(p.settings.precision == "bf16" for p in rec.candidates)
    assert rec.predicted.latency_ns > 0


@pytest.mark.parametrize("model, batch", [("resnet50", 8), ("mlp-4096", 64)])
def test_the_analytic_model_at_bf16(model: str, batch: int) -> None:
    """A compute-bound matrix node at bf16: its compute at the bf16 rate
    (BF16_SPEEDUP times fp32's), its bytes less half its weights'."""
    g = build(model, batch)
    m = AnalyticCostModel()
    fp32 = executed_graph(g, Settings())
    bf16 = executed_graph(g, Settings(precision="bf16"))
    heavy = [n for n in bf16 if n.op in ("conv2d", "linear")
             and bf16[n.inputs[0]].dtype == "bfloat16"]
    assert heavy
    n = max(heavy, key=lambda x: bf16.stats[x.id].flops)
    twin = next(x for x in fp32 if x.name == n.name)
    c16, b16, _ = m._parts(bf16, n)
    c32, b32, _ = m._parts(fp32, twin)
    assert c16 == pytest.approx(c32 / BF16_SPEEDUP)
    assert b16 < b32
    assert m.op_ns(bf16, n, 1) < m.op_ns(fp32, twin, 1)
