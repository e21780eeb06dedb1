"""The recommender on a decoder's two phases: the prefill (compute-bound)
takes every core, the decode step (every weight streamed per token) fewer,
on synthetic machines and on hwloc files shaped like real ones (a 2-socket
Xeon; an EPYC in NPS4 and a hybrid desktop, where it needs as many), with the analytic model (these
machines are not this one); the bandwidth a compact team draws; the tie
rule; ``recommend --phase``."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import _topo_xml as tx
import pytest
from _support import cli_main

from pyparbench.graph.passes.precision import BF16_OPS
from pyparbench.models import build
from pyparbench.models.llama import llama_decode
from pyparbench.recommender import recommend
from pyparbench.recommender.bandwidth import streaming
from pyparbench.recommender.costmodel import AnalyticCostModel, MachineSpec
from pyparbench.recommender.modelchoice import topology_of
from pyparbench.recommender.selection import TIE, choose
from pyparbench.recommender.types import Prediction
from pyparbench.settings import Settings

SIZE = "llama-bandwidth"  # 495 MB of weights: past any last-level cache here


def _threads(topology: str | Path, phase: str) -> tuple[int, str]:
    g = build(SIZE, 1) if phase == "prefill" else llama_decode(1, size=SIZE)
    rec = recommend(g, topology=topology, calibrate=False, verify=0)
    return rec.settings.threads, "\n".join(rec.reasons)


@pytest.mark.parametrize("synthetic", ["package:1 core:32 pu:1", "package:2 core:28 pu:2"])
def test_decode_takes_fewer_threads_than_prefill(synthetic: str) -> None:
    prefill, why_prefill = _threads(synthetic, "prefill")
    decode, why_decode = _threads(synthetic, "decode")
    cores = 32 if "core:32" in synthetic else 56
    assert prefill == cores, why_prefill
    assert decode < prefill, why_decode
    assert "memory-bound" in why_decode and "memory-bound" not in why_prefill
    assert "5 threads per socket" in why_decode  # 200 GB/s a socket over 40 GB/s a core


@pytest.mark.skipif(tx.LSTOPO is None, reason="lstopo missing (apt-get install hwloc)")
@pytest.mark.parametrize("shape", ["intel_2s_interleaved", "epyc_nps4", "hybrid_desktop"])
def test_decode_takes_fewer_threads_on_hwloc_files(shape: str, tmp_path: Path) -> None:
    make = getattr(tx, shape)
    path = make(tmp_path / f"{shape}.xml", 28) if shape == "intel_2s_interleaved" else make(
        tmp_path / f"{shape}.xml")
    prefill, _ = _threads(path, "prefill")
    decode, why = _threads(path, "decode")
    assert "memory-bound" in why
    if shape == "intel_2s_interleaved":
        # 28 cores a socket, 5 of which draw its bandwidth.
        assert decode < prefill, why
    else:
        # An EPYC in NPS4 draws a quarter of its bandwidth per node of 16
        # cores, and a compact team fills one node after another: the
        # bandwidth needs every node. The desktop has 8 P cores.
        assert decode <= prefill, why


def test_a_small_decoder_in_cache_is_not_memory_bound() -> None:
    rec = recommend(llama_decode(1, size="llama-tiny"), topology="package:1 core:32 pu:1",
                    calibrate=False, verify=0)
    assert not any("memory-bound" in r for r in rec.reasons)


def test_a_compact_team_draws_each_domains_share() -> None:
    """A domain gives at most its share: one thread on a second socket adds
    one core's bandwidth, not a socket's."""
    spec = MachineSpec()
    m = AnalyticCostModel(spec, cores_per_socket=28)
    gb = 1e9
    assert m._mem_ns(gb, 1, from_memory=True) == pytest.approx(gb / spec.core_gbps)
    assert m._mem_ns(gb, 28, from_memory=True) == pytest.approx(gb / spec.socket_gbps)
    assert m._mem_ns(gb, 29, from_memory=True) == pytest.approx(
        gb / (spec.socket_gbps + spec.core_gbps))
    assert m._mem_ns(gb, 56, from_memory=True) == pytest.approx(gb / (2 * spec.socket_gbps))
    nps4 = AnalyticCostModel(spec, cores_per_socket=32, numa_per_socket=4)
    assert nps4._mem_ns(gb, 8, from_memory=True) == pytest.approx(gb / (spec.socket_gbps / 4))


def test_ties_go_to_the_fewest_threads_only_for_a_streaming_graph() -> None:
    rec = recommend(build("mlp-512", 1), topology="package:1 core:8 pu:1", calibrate=False,
                    verify=0)
    sim = rec.predicted.simulation
    preds = [Prediction(Settings(intra_op=t), 1000.0 * (1 + TIE * t / 16), 1, 1, sim)
             for t in (2, 4, 8)]
    assert choose(preds, "latency").settings.intra_op == 8
    assert choose(preds, "latency", fewest_threads=True).settings.intra_op == 2
    # Outside the tie, the faster setting, whatever its threads.
    preds.append(Prediction(Settings(intra_op=6), 900.0, 1, 1, sim))
    assert choose(preds, "latency", fewest_threads=True).settings.intra_op == 6


def test_the_phase_option(capsys: pytest.CaptureFixture[str]) -> None:
    topo = "package:2 core:28 pu:2"
    rc, out, _ = cli_main(capsys, "recommend", SIZE, "--phase", "decode", "--topology", topo,
                          "--json")
    assert rc == 0
    decode = json.loads(out)
    rc, out, _ = cli_main(capsys, "recommend", SIZE, "--phase", "prefill", "--topology", topo,
                          "--json")
    prefill = json.loads(out)
    threads = [d["settings"]["inter_op"] * d["settings"]["intra_op"] for d in (decode, prefill)]
    assert threads[0] < threads[1], threads
    assert any("memory-bound" in r for r in decode["reasons"])
    assert not any("memory-bound" in r for r in prefill["reasons"])
    rc, _, err = cli_main(capsys, "recommend", "resnet50", "--phase", "decode")
    assert rc == 2 and "'resnet50' is not a built-in decoder" in err, err


@pytest.mark.skipif(tx.LSTOPO is None, reason="lstopo missing (apt-get install hwloc)")
def test_decode_instances_share_the_memory_bandwidth(tmp_path: Path) -> None:
    """Requests served side by side (the throughput objective) each stream
    the weights: the predicted tokens per second of a 2-socket Xeon never
    read more bytes than its sockets give (within the co-run model's 25 %),
    where instances streaming apart would promise each its own bandwidth."""
    path = tx.intel_2s_interleaved(tmp_path / "m.xml", 28)
    g = llama_decode(1, size=SIZE)
    rec = recommend(g, topology=path, objective="throughput", calibrate=False, verify=0)
    spec = MachineSpec()
    read = rec.predicted.throughput * 4 * g.num_params / 1e9  # GB/s of weights
    assert read <= 1.25 * 2 * spec.socket_gbps, (rec.settings.label(), read)


def test_the_instance_factor_of_a_streaming_graph() -> None:
    spec = MachineSpec()
    g = llama_decode(1, size=SIZE)
    xeon = AnalyticCostModel(spec, cores_per_socket=28, sockets=2)
    # 8 instances of 7 cores: each draws 200 GB/s alone (5 cores saturate a
    # socket), four to a socket share one socket's 200.
    assert xeon.instance_factor(g, 8) == pytest.approx(4.0)
    # Two instances of 28 cores: one socket each, no sharing.
    assert xeon.instance_factor(g, 2) is None
    # An EPYC in NPS4: 8 instances of 8 cores, two to a node of 16 cores
    # and 50 GB/s, each drawing all 50 alone.
    epyc = AnalyticCostModel(spec, cores_per_socket=64, numa_per_socket=4, sockets=1)
    assert epyc.instance_factor(g, 8) == pytest.approx(2.0)
    # Unknown sockets, or a compute-bound graph: the co-run penalties stand in.
    assert AnalyticCostModel(spec, cores_per_socket=28).instance_factor(g, 8) is None
    assert xeon.instance_factor(build("resnet50", 8), 8) is None


def test_a_bf16_plan_streams_half_the_weight_bytes() -> None:
    """The decode step's FLOPs per byte at bf16 count its matrices' weights
    in two bytes (the plan converts them; the table and norms stay float32),
    so its intensity is nearly twice fp32's."""
    g = llama_decode(1, size=SIZE)
    topo, _ = topology_of("package:1 core:32 pu:1")
    fp32 = streaming(g, topo, ridge=4.0, cache_per_package=32 << 20)
    bf16 = streaming(g, topo, ridge=4.0, cache_per_package=32 << 20, precision="bf16")
    kept = sum(g.stats[n.id].params for n in g if n.op not in BF16_OPS)  # the table, norms
    assert kept and bf16.weight_bytes * 2 == fp32.weight_bytes + 4 * kept
    # The matrices' weights are nearly every byte a decode step moves: the
    # ratio is just under 2 (activations, one table row and the cache stay
    # float32).
    assert 1.8 < bf16.flop_per_byte / fp32.flop_per_byte < 2.0
    assert fp32.memory_bound and bf16.memory_bound


def test_the_analytic_model_does_not_keep_the_graphs_it_priced() -> None:
    cost = AnalyticCostModel()
    g = llama_decode(1, size="llama-tiny")
    assert all(cost.op_ns(g, n, 2) >= 0 for n in g)
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None
