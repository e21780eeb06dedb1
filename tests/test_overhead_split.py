"""Kernels with their data out of cache, and the native time outside kernels split.

Real kernels and a real native child (no framework needed): the split's
parts add up, the flushes cost the kernels time, and each part carries its
label.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyparbench as ppb
from pyparbench.frameworks.launch import Job, run_child
from pyparbench.frameworks.native.cold import (
    Flush,
    all_caches_bytes,
    single_call_times,
    working_set_bytes,
)
from pyparbench.frameworks.native import node_kernel
from pyparbench.models.llama import llama_decode
from pyparbench.frameworks.overhead import (
    _native_section,
    dispatch_cost,
    dispatch_graph,
    measure_overhead,
)
from pyparbench.frameworks.overhead_split import LABELS, beyond_kernels, split_native
from pyparbench.frameworks.spec import ModelRef, build_graph, graph_to_spec
from pyparbench.graph import GraphBuilder
from pyparbench.models import build
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings


def test_the_working_set_of_mlp_512_is_its_weights_and_activations() -> None:
    g = build("mlp-512", 1)
    weights = 8 * (512 * 512 + 512) * 4  # eight layers of 512, with bias
    activations = sum(4 * int(np.prod(n.shape)) for n in g.nodes)
    assert activations == 4 * 512 * (1 + 8)  # the input and eight outputs
    assert working_set_bytes(g) == weights + activations


def test_flushing_every_cache_slows_a_kernel_whose_weights_were_in_cache() -> None:
    k = ppb.ops.Linear(1, 512, 512, bias=True, threads=1)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    k.set_weights(w, b)
    x = rng.standard_normal((1, 512), dtype=np.float32)
    out = np.empty((1, 512), np.float32)

    def run(r: int, w_: int) -> object:
        return k.timeit(x, out, repeats=r, warmup=w_)

    cold = Flush(all_caches_bytes())
    assert cold.nbytes >= 2 * 1 << 20  # twice at least one MiB of L2
    warm_ns = float(np.median(single_call_times(run, 9, None)))
    cold_ns = float(np.median(single_call_times(run, 5, cold)))
    # 1 MiB of weights (and the packed copy) from memory instead of L1/L2.
    assert cold_ns > 1.3 * warm_ns, (warm_ns, cold_ns)
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        single_call_times(run, 0, None)
    with pytest.raises(ValueError, match="bytes >= 0, got -1"):
        Flush(-1)


@pytest.fixture(scope="module")
def native_run() -> tuple[dict[str, object], float]:
    """mlp-512 with 4 layers natively (the kernels as overhead times them),
    and the executor's cost per node from the dispatch chains, at 1 thread."""
    settings = Settings()
    spec = ModelRef("mlp-512", 1, 0, {"layers": 4}).to_spec()
    res = run_child("native", [Job(spec, repeats=20, warmup=3, kernel_repeats=3,
                                   inline_repeats=5, inline_inner=1, cache_repeats=5,
                                   cold_repeats=2)], settings, timeout=600)
    assert res.ok, res.error
    chains = run_child("native", [Job(graph_to_spec(dispatch_graph(41)), repeats=50,
                                      warmup=5, inline_repeats=5),
                                  Job(graph_to_spec(dispatch_graph(1)), repeats=50, warmup=5)],
                       settings.with_(graph_opt="none"), timeout=600)
    cost = dispatch_cost(chains, 40)
    assert "executor_us" in cost, cost
    return _native_section(res), float(cost["executor_us"])


def test_the_split_adds_up_on_a_real_native_run(
        native_run: tuple[dict[str, object], float]) -> None:
    native, executor_us = native_run
    cache = native["cache_ns"]
    assert isinstance(cache, dict)
    graph = build_graph(ModelRef("mlp-512", 1, 0, {"layers": 4}).to_spec())
    assert cache["chain_bytes"] == working_set_bytes(graph)
    assert cache["cold_bytes"] == all_caches_bytes()
    assert len(cache["warm"]) == len(cache["chain"]) == len(cache["cold"]) == len(graph.nodes)
    linear = [i for i, n in enumerate(graph.nodes) if n.op == "linear"]
    assert len(linear) == 4 and all(cache["warm"][i] > 0 for i in linear)
    # Every cache flushed costs each linear layer time.
    assert sum(cache["cold"][i] for i in linear) > 1.2 * sum(cache["warm"][i] for i in linear)

    s = split_native(native, cache, executor_us)
    assert s is not None and s["missing"] == []
    assert s["executed_nodes"] == 4  # the four linear layers, ReLU fused
    assert s["executor_ns"] == pytest.approx(executor_us * 1e3 * 4)
    assert s["memory_cache_ns"] == pytest.approx(
        sum(c - w for c, w in zip(cache["chain"], cache["warm"])))
    assert s["cold_bound_ns"] == pytest.approx(
        sum(c - w for c, w in zip(cache["cold"], cache["warm"])))
    assert s["outside_kernels_ns"] == pytest.approx(
        s["executor_ns"] + s["memory_cache_ns"] + s["rest_ns"])
    assert s["outside_kernels_ns"] == pytest.approx(
        native["latency"]["median"] - native["executed_kernel_sum_ns"])  # type: ignore[index]
    assert s["kernels_in_chain_ns"] == pytest.approx(
        s["kernels_warm_ns"] + s["memory_cache_ns"])
    assert beyond_kernels(s["latency_ns"], s) == pytest.approx(
        s["executor_ns"] + s["rest_ns"])
    assert set(LABELS) <= set(s["labels"]) and "executor cost" in s["labels"]["executor_ns"]

    # Without the dispatch chains or the cache timings, the parts left out say so.
    s = split_native(native, cache, None)
    assert s is not None and s["executor_ns"] is None and s["rest_ns"] is None
    assert "executor" in s["missing"][0]
    s = split_native(native, None, executor_us)
    assert s is not None and s["memory_cache_ns"] is None and s["kernels_in_chain_ns"] is None
    assert beyond_kernels(1000.0, s) is None and "memory / cache" in s["missing"][0]


DECODER_OPS = {"rms_norm", "rotary", "attention", "glu"}


@pytest.mark.parametrize("threads", [1, 2])
def test_every_node_of_a_small_llama_is_a_timed_prepared_kernel(threads: int) -> None:
    g = build("llama-tiny", 1, layers=1, prompt=8)
    assert DECODER_OPS <= {n.op for n in g.nodes}
    inputs = g.random_inputs(0)
    values = reference_forward(g, inputs, np.float32, return_all=True)
    timed = set()
    for n in g.nodes:
        ins = [values[g.nodes[j].name] for j in n.inputs]
        made = node_kernel(n, ins, threads)
        if made is not None:
            times = made[1](2, 1)
            assert len(times) == 2 and min(times) > 0, n.name
            timed.add(n.op)
    assert DECODER_OPS <= timed


@pytest.mark.parametrize("threads", [1, 2])
def test_a_decode_step_node_is_a_timed_prepared_kernel_that_matches_its_reference(
        threads: int) -> None:
    g = llama_decode(1, size="llama-tiny", past=5, layers=1, hidden=64, heads=4, kv_heads=2,
                     intermediate=96, vocab=128)
    inputs = g.random_inputs(0)
    values = reference_forward(g, inputs, np.float32, return_all=True)
    (node,) = [n for n in g.nodes if n.op == "decode_attention"]
    ins = [values[g.nodes[j].name] for j in node.inputs]
    made = node_kernel(node, ins, threads)
    assert made is not None
    kernel, timer = made
    assert min(timer(2, 1)) > 0
    np.testing.assert_allclose(kernel.run(*ins), values[node.name], rtol=1e-5, atol=1e-6)


def test_a_position_ids_node_is_a_timed_prepared_kernel() -> None:
    b = GraphBuilder("positions")
    pos = b.position_ids(b.input("ids", (2, 6), "int64"), pad_id=1, offset=1, name="positions")
    g = b.build(pos)
    made = node_kernel(g.nodes[pos], [np.ones((2, 6), np.int64)], 1)
    assert made is not None and min(made[1](2, 0)) > 0


def test_overhead_runs_a_small_llama_natively_and_in_torch() -> None:
    pytest.importorskip("torch")
    res = measure_overhead("llama-tiny", 1, frameworks=["torch"], modes={"torch": ["eager"]},
                           repeats=3, warmup=1, profile=2, kernel_repeats=2, cold_repeats=0,
                           dispatch=False, model_kwargs={"layers": 1, "prompt": 8})
    native = res["native"]
    assert native["status"] == "ok", native.get("error")
    assert native["kernel_sum_ns"] > 0 and native["executed_kernel_sum_ns"] > 0
    assert DECODER_OPS <= set(native["per_op"])
    (torch_eager,) = res["frameworks"]
    assert torch_eager["status"] == "ok", torch_eager.get("error")
    assert torch_eager["overhead_ratio"] > 0
