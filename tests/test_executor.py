"""The native executor against the numpy reference, under the study's knobs."""

from __future__ import annotations

import json
import os
import time
from functools import lru_cache
from typing import Any

import numpy as np
import pytest

from pyparbench import models
from pyparbench.executor import branch_groups, compile_graph, run_model
from pyparbench.graph import Graph, GraphBuilder
from pyparbench.reference import reference_forward
from pyparbench.settings import Settings

from _support import compact_cpus, needs_cores

# Small inputs keep the float64 reference quick; structure is unchanged.
SMALL = {"googlenet": {"image_size": 64}, "inception-v2": {"image_size": 64},
         "inception-v3": {"image_size": 75}, "resnet50": {"image_size": 64},
         "resnext50": {"image_size": 64}, "squeezenet": {"image_size": 64},
         "mobilenet-v2": {"image_size": 64}, "dlrm": {"rows": 1000, "lookups": 8},
         "dlrm-kaggle": {"max_rows": 1000}, "transformer": {"seq_len": 16},
         "ncf": {"num_users": 500, "num_items": 300}, "wide-deep": {"max_rows": 1000},
         # The decoder's larger shapes, one small layer of each.
         **{name: {"layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96,
                   "vocab": 128, "prompt": 8}
            for name in ("llama-bandwidth", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b")}}

SETTINGS = [
    Settings(),
    Settings(graph_opt="none"),
    Settings(intra_op=2, graph_opt="none"),
    Settings(operator="framework", intra_op=2, graph_opt="none"),
    Settings(graph_opt="layout"),
    Settings(scheduler="async", inter_op=2, intra_op=1, graph_opt="residual"),
    Settings(intra_op=2),
    Settings(scheduler="async", inter_op=2),
    Settings(operator="framework", intra_op=2, pool="openmp"),
    Settings(operator="framework", intra_op=2, pool="std"),
    Settings(scheduler="async", inter_op=2, intra_op=2, operator="framework", pool="eigen"),
    Settings(scheduler="async", inter_op=2, placement="per-socket"),
    Settings(intra_op=2, library="eigen"),
    Settings(library="blas"),
    Settings(scheduler="async", inter_op=2, library="eigen"),
    Settings(operator="framework", intra_op=2, library="blas", pool="std"),
]

# fp32 kernels against a float64 reference, through up to ~100 layers.
RTOL = 2e-4

# The model the emulated arm64 job (.ci/aarch64) runs under every setting
# (and its tests there use no other): the MLP takes ~10 s there, the others
# minutes each.
AARCH64_MODELS = {"mlp-512"}


def model_names() -> list[Any]:
    return [pytest.param(n, marks=pytest.mark.aarch64) if n in AARCH64_MODELS else n
            for n in sorted(models.MODELS)]


@lru_cache(maxsize=None)
def model(name: str, batch: int = 2) -> tuple[Graph, dict[str, np.ndarray]]:
    kw = SMALL.get(name, {})
    try:
        g = models.build(name, batch, **kw)
    except TypeError:  # a builder without that size knob
        g = models.build(name, batch)
    return g, reference_forward(g, g.random_inputs(seed=0))


def assert_matches(got: dict[str, np.ndarray], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for k in got:
        scale = max(1.0, float(np.abs(want[k]).max()))
        err = float(np.abs(got[k] - want[k]).max()) / scale
        assert err <= RTOL, f"output {k}: relative error {err:.3g}"


# Pinned: two workers on two physical cores (compact, smt=False), which a
# machine of one core (a 1-CPU container, a 2-vCPU VM of one SMT core) lacks.
PINNED = Settings(scheduler="async", inter_op=2, affinity="compact")


@pytest.mark.slow
@pytest.mark.parametrize("pinned", [
    pytest.param(False, id="settings"), pytest.param(True, marks=needs_cores(2), id="pinned")])
@pytest.mark.parametrize("name", model_names())
def test_every_model_matches_the_reference_under_every_setting(name: str, pinned: bool) -> None:
    g, want = model(name)
    cg = compile_graph(g)
    for s in [PINNED] if pinned else SETTINGS:
        cg.run(s, repeats=1, warmup=0)
        try:
            assert_matches(cg.outputs(), want)
        except AssertionError as e:
            raise AssertionError(f"{s.label()}: {e}") from None


@pytest.mark.slow
@pytest.mark.parametrize("name", model_names())
def test_every_model_at_batch_one_in_framework_mode(name: str) -> None:
    # Batch 1: ops are cut along channels or features instead of the batch.
    g, want = model(name, 1)
    cg = compile_graph(g)
    for s in (Settings(operator="framework", intra_op=2, pool="eigen"),
              Settings(operator="framework", intra_op=2, pool="std", graph_opt="none"),
              Settings(scheduler="async", inter_op=2, intra_op=2, operator="framework",
                       pool="std", library="blas")):
        cg.run(s, repeats=1, warmup=0)
        try:
            assert_matches(cg.outputs(), want)
        except AssertionError as e:
            raise AssertionError(f"{s.label()}: {e}") from None


def test_repeated_async_runs_agree() -> None:
    g, want = model("googlenet")
    cg = compile_graph(g)
    s = Settings(scheduler="async", inter_op=2, operator="framework", intra_op=2, pool="std")
    first = None
    for _ in range(5):
        cg.run(s, repeats=3, warmup=0)
        out = cg.outputs()
        assert_matches(out, want)
        if first is None:
            first = out
        for k in out:  # same kernels, same blocks: bit-identical
            assert np.array_equal(out[k], first[k])


def _overlaps(events: list[Any]) -> int:
    n = 0
    for i, a in enumerate(events):
        for b in events[i + 1:]:
            if a.start_ns < b.end_ns and b.start_ns < a.end_ns:
                n += 1
    return n


def test_trace_shows_branches_overlapping_only_under_async() -> None:
    g, _ = model("googlenet")
    cg = compile_graph(g)
    sync = cg.run(Settings(), repeats=1, trace=True)
    assert len(sync.trace) == len(cg.optimized()) < len(g.nodes)
    assert len(cg.run(Settings(graph_opt="none"), repeats=1, trace=True).trace) == len(g.nodes)
    assert _overlaps(sync.trace) == 0
    assert {e.worker for e in sync.trace} == {0}
    # Inception's four branches are independent: two workers run some at once.
    # A worker the OS does not schedule during a whole repeat (a shared VM)
    # misses it, so try for up to ten seconds; one in hundreds misses here.
    deadline = time.monotonic() + 10.0
    while True:
        r = cg.run(Settings(scheduler="async", inter_op=2), repeats=2, trace=True)
        both = _overlaps(r.trace) > 0 and {e.worker for e in r.trace} == {0, 1}
        if both or time.monotonic() > deadline:
            break
    if not both and os.getloadavg()[0] > 1.5 * (os.cpu_count() or 1):
        pytest.skip(f"the second worker got no branch for 10 s while the load average was "
                    f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: the OS, not the "
                    f"scheduler, decided")
    assert {e.worker for e in r.trace} == {0, 1}
    assert _overlaps(r.trace) > 0
    heavy = [e for e in r.trace if e.op == "conv2d"]
    assert all(e.end_ns >= e.start_ns >= 0 for e in heavy)


def test_chrome_trace_json(tmp_path: Any) -> None:
    g, _ = model("squeezenet")
    cg = compile_graph(g)
    r = cg.run(Settings(scheduler="async", inter_op=2), repeats=1, trace=True)
    path = tmp_path / "trace.json"
    r.write_chrome_trace(path)
    data = json.loads(path.read_text())
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(cg.optimized(Settings(scheduler="async", inter_op=2)))
    assert {e["tid"] for e in slices} <= {0, 1}
    assert all(e["dur"] >= 0 for e in slices)


def test_framework_mode_cuts_ops_into_blocks() -> None:
    g, _ = model("resnet50")
    cg = compile_graph(g)
    for opt in ("none", "full"):
        lib_s = Settings(intra_op=2, graph_opt=opt)
        fw_s = Settings(operator="framework", intra_op=2, graph_opt=opt)
        # The per-node rule off: every node on its 2 threads.
        lib, fw = cg.blocks(lib_s, alone_below_ns=0), cg.blocks(fw_s, alone_below_ns=0)
        for s, blocks, want in ((lib_s, lib, 1), (fw_s, fw, 2)):
            og = cg.optimized(s)
            computing = [i for i, n in enumerate(og.nodes) if n.op not in ("input", "reshape")]
            # Library mode: one block; batch 2 in framework mode: every op
            # splits along the batch into 2 blocks.
            assert computing and all(blocks[i] == want for i in computing), (opt, s.label())


@pytest.mark.aarch64
@needs_cores(2)
def test_audit_of_a_pinned_async_run() -> None:
    g, _ = model("mlp-512")
    r = compile_graph(g).run(Settings(scheduler="async", inter_op=2, affinity="compact"),
                             repeats=2, audit=True, strict=True)
    assert r.audit is not None and r.mismatches == []
    # One CPU on each of the first two cores this process may use: 0 and 1
    # on the machine the suite was written on, not on every machine.
    (c0,), (c1,) = want = compact_cpus(2)
    assert r.resolved["worker_cpus"] == want
    seen = {w: r.audit.team(w)[0].cpus_seen for w in (0, 1)}
    assert set(seen[0]) == {c0} and set(seen[1]) == {c1}


def test_per_socket_placement_groups_branches() -> None:
    b = GraphBuilder("fork", seed=0)
    x = b.input("x", (2, 8))
    left, right = b.linear(x, 8), b.linear(x, 8)
    out = b.add(b.linear(left, 8), right)
    g = b.build(out)
    groups = branch_groups(g, 2)
    assert groups[left] != groups[right]
    assert groups[left + 2] == groups[left]  # the branch's next node follows it


@pytest.mark.aarch64
@needs_cores(2)
def test_instances_split_the_batch() -> None:
    r = run_model("mlp-512", 4, Settings(instances=2, affinity="compact"), repeats=3, warmup=1)
    assert len(r.ns) == 3 and len(r.per_instance) == 2
    assert [i["worker_cpus"] for i in r.resolved["instances"]] == [[p] for p in compact_cpus(2)]
    # All together take at least as long as the slowest instance.
    for k in range(3):
        assert r.ns[k] >= max(e[k] for e in r.per_instance) * 0.999


# ------------------------------------------------------------------ bad input


@pytest.mark.aarch64
def test_bad_settings_and_models() -> None:
    with pytest.raises(ValueError, match="inter_op must be >= 1, got 0"):
        Settings(scheduler="async", inter_op=0)
    with pytest.raises(ValueError, match="library must be one of"):
        Settings(library="mkl")
    with pytest.raises(ValueError, match="inter_op must be 1"):
        Settings(inter_op=2)
    with pytest.raises(ValueError, match="unknown model"):
        models.build("alexnet", 1)
    with pytest.raises(ValueError, match="batch"):
        models.build("resnet50", 0)
    with pytest.raises(ValueError, match="instances > 1"):
        compile_graph(model("mlp-512")[0]).run(Settings(instances=2))
    with pytest.raises(ValueError, match="does not split into 3 instances"):
        run_model("mlp-512", 4, Settings(instances=3))


@pytest.mark.aarch64
def test_bad_inputs() -> None:
    g, _ = model("mlp-512")
    cg = compile_graph(g)
    with pytest.raises(ValueError, match="unknown graph inputs"):
        cg.set_inputs({"nope": np.zeros(3)})
    name = g[g.inputs[0]].name
    with pytest.raises(ValueError, match=r"has shape \(3,\), expected"):
        cg.set_inputs({name: np.zeros(3)})
    # Floats fed to int64 ids are refused, never truncated into other ids.
    ids = compile_graph(model("dlrm-kaggle")[0])
    int_input = next(ids.graph[i] for i in ids.graph.inputs if ids.graph[i].dtype == "int64")
    feeds = ids.graph.random_inputs(seed=1)
    ids.set_inputs(feeds)
    with pytest.raises(ValueError, match=rf"graph input '{int_input.name}' takes integers "
                                         r"\(int64\), got float64 values"):
        ids.set_inputs({**feeds, int_input.name: feeds[int_input.name] + 0.5})


@pytest.mark.aarch64
def test_native_settings_are_checked() -> None:
    from pyparbench._core import graph as _g

    g, _ = model("mlp-512")
    cg = compile_graph(g)
    s = _g.ExecSettings()
    s.library = "mkl"
    with pytest.raises(ValueError, match="library must be .*got 'mkl'"):
        cg._plan.run(s, repeats=1)
    s = _g.ExecSettings()
    with pytest.raises(ValueError, match="scheduler must be 'sync' or 'async', got 'fifo'"):
        s.scheduler = "fifo"
    s.intra_op = 0
    with pytest.raises(ValueError, match="intra_op must be >= 1, got 0"):
        cg._plan.run(s, repeats=1)


@pytest.mark.parametrize("name", ["mobilenet-v2", "resnext50", "mlp-512", "squeezenet"])
def test_framework_mode_cuts_batch_one_ops_by_feature(name: str) -> None:
    # Batch 1 cannot be cut along the batch: convs are cut by output channel
    # (whole groups: depthwise and ResNeXt), one-row linears by output
    # feature, channel-wise glue ops by channel.
    g, want = model(name, 1)
    cg = compile_graph(g)
    s = Settings(operator="framework", intra_op=2, pool="std")
    cg.run(s, repeats=1, warmup=0)
    assert_matches(cg.outputs(), want)
    for opt in ("none", "full"):
        s = s.with_(graph_opt=opt)
        blocks = cg.blocks(s, alone_below_ns=0)  # the per-node rule off
        og = cg.optimized(s)
        heavy = [i for i, n in enumerate(og.nodes) if n.op in ("conv2d", "linear")]
        assert heavy and all(blocks[i] == 2 for i in heavy)
        glue = [i for i, n in enumerate(og.nodes) if n.op in ("eltwise", "batch_norm", "pool2d")]
        assert all(blocks[i] == 2 for i in glue)


@pytest.mark.aarch64
@needs_cores(2)
def test_a_pinned_run_leaves_no_pinning_behind() -> None:
    import os

    g, _ = model("mlp-512")
    cg = compile_graph(g)
    cg.run(Settings(intra_op=2, affinity="compact"), repeats=1)
    r = cg.run(Settings(intra_op=2), repeats=1, audit=True)
    allowed = set(os.sched_getaffinity(0))
    assert r.audit is not None
    for rec in r.audit.team(0):
        assert set(rec.affinity) == allowed, rec


@needs_cores(2)
def test_a_pinned_run_keeps_its_team_pinned_after_a_pinned_kernel() -> None:
    # A kernel pinned earlier from the same thread leaves its team pinned;
    # the graph worker's own pinning (one CPU per team thread) must still
    # hold through every node of the run.
    import os

    from pyparbench import ops

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip(f"needs 2 CPUs this process may use (os.sched_getaffinity: {cpus})")
    k = ops.Gemm(64, 64, 64, threads=2)
    k.pin([cpus[1], cpus[0]])
    x = np.ones((64, 64), np.float32)
    k.run(x, x)
    g, _ = model("mlp-512")
    # The per-node rule off: a machine busy while the team's cost is
    # calibrated could run every node alone, and there would be no team.
    r = compile_graph(g).run(Settings(intra_op=2, affinity="compact"), repeats=1, audit=True,
                             alone_below_ns=0)
    assert r.audit is not None
    team = {rec.worker: rec for rec in r.audit.team(0)}
    assert set(team[1].affinity) == {r.resolved["worker_cpus"][0][1]}


@needs_cores(2)
def test_a_pinned_run_pins_every_team_thread_to_its_own_cpu() -> None:
    # The worker's own thread too: left on all the worker's CPUs, it could
    # sit on team thread 1's CPU spinning at a barrier while thread 1 waits
    # for the scheduler (a run's first region then took milliseconds).
    import os

    g, _ = model("mlp-512")
    # The per-node rule off, as above: the team is what is checked.
    r = compile_graph(g).run(Settings(intra_op=2, affinity="compact"), repeats=2, audit=True,
                             strict=True, alone_below_ns=0)
    assert r.audit is not None and r.mismatches == []
    cpus = r.resolved["worker_cpus"][0]
    affinity = sorted(rec.affinity for rec in r.audit.team(0))
    assert affinity == sorted((c,) for c in cpus[:2]), (affinity, cpus)
    assert set(os.sched_getaffinity(0)) >= set(cpus)  # given back after the run


@pytest.mark.parametrize("settings", [Settings(), Settings(intra_op=2),
                                      Settings(operator="framework", intra_op=2),
                                      Settings(library="eigen")],
                         ids=["default", "intra-2", "framework-2", "eigen"])
@pytest.mark.parametrize("rows", [1, 6])
def test_weights_read_in_place_give_the_packed_bits(settings: Settings, rows: int) -> None:
    """A plan whose linear nodes read the graph's weight arrays where they
    are (compile_graph(weights_in_place=True)) computes the same bits as one
    whose kernels pack copies: a decoder's rows of one token (the streamed
    product) and of a prompt (oneDNN's matmul, or on other libraries what
    reads them in place anyway)."""
    g = models.build("llama-tiny", 1, prompt=rows, layers=1, hidden=64, heads=4, kv_heads=2,
                     intermediate=96, vocab=128)
    outs = []
    for in_place in (False, True):
        cg = compile_graph(g, weights_in_place=in_place)
        assert cg._plan.weights_in_place == in_place
        cg.set_inputs({"input_ids": np.arange(rows).reshape(1, rows) % 128})
        cg.run(settings, repeats=1, warmup=0)
        outs.append(next(iter(cg.outputs().values())))
    np.testing.assert_array_equal(outs[1], outs[0])
