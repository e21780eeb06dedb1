"""Topologies from hwloc XML files (``lstopo --of xml`` on the machine to
plan): the model read from them, the `topology` command, bad files, and
every planning decision on them checked on its CPU lists.

The files are made here: ``lstopo --input "<synthetic>" --of xml``, edited
the way real machines differ (tests/_topo_xml.py), plus small hand-written
ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import _topo_xml as tx
from pyparbench.harness.levels import DEFAULT_BATCHES, DEFAULT_MODELS
from pyparbench.models import build
from pyparbench.recommender import recommend
from pyparbench.settings import Settings, instance_cpus, preset
from pyparbench.threading import place, topology
from pyparbench.threading.topology import Topology, describe, topology_dict

pytestmark = pytest.mark.skipif(tx.LSTOPO is None, reason="lstopo missing (apt-get install hwloc)")

SHAPES = {
    "intel-2s-interleaved": tx.intel_2s_interleaved,
    "intel-snc2": tx.intel_snc2,
    "epyc-nps4": tx.epyc_nps4,
    "hybrid": tx.hybrid_desktop,
    "memory-only": tx.with_memory_only,
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("topologies")
    return {name: make(d / f"{name}.xml") for name, make in SHAPES.items()}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "pyparbench", *args], capture_output=True,
                          text=True, timeout=300)


# --- the model read from a file -------------------------------------------------------


def test_interleaved_numbering_is_kept(files: dict[str, Path]) -> None:
    t = topology(files["intel-2s-interleaved"])
    assert t.kind == "file" and not t.synthetic and t.source == str(files["intel-2s-interleaved"])
    assert len(t.packages) == 2 and len(t.cores) == 8 and len(t.pus) == 16
    # even CPUs on package 0, odd on package 1; each core's sibling 8 above it
    assert sorted(t.packages[0].pus) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert sorted(t.packages[1].pus) == [1, 3, 5, 7, 9, 11, 13, 15]
    assert [list(c.pus) for c in t.cores[:2]] == [[0, 8], [2, 10]]
    assert {p.os_index: list(p.siblings) for p in t.pus}[8] == [0]
    assert list(t.allowed_cpus) == list(range(16)) and list(t.disallowed_cpus) == []
    assert [sorted(d) for d in t.l3_domains] == [sorted(t.packages[0].pus),
                                                  sorted(t.packages[1].pus)]


def test_numa_nodes_inside_packages(files: dict[str, Path]) -> None:
    t = topology(files["intel-snc2"])
    nodes = {n.os_index: n for n in t.numa_nodes}
    assert sorted(nodes) == [0, 1, 2, 3]
    assert [nodes[i].package for i in range(4)] == [0, 0, 1, 1]
    assert nodes[0].pus == [0, 1, 2, 3, 16, 17, 18, 19]
    assert not any(n.memory_only for n in t.numa_nodes)
    assert t.cores[5].numa == 1 and t.cores[12].numa == 3


def test_l3_domains_of_an_epyc(files: dict[str, Path]) -> None:
    t = topology(files["epyc-nps4"])
    assert len(t.l3_domains) == 8 and all(len(d) == 16 for d in t.l3_domains)
    assert sorted(t.l3_domains[1]) == list(range(8, 16)) + list(range(72, 80))
    assert [c.l3 for c in t.cores[:17:8]] == [0, 1, 2]
    assert len([n for n in t.numa_nodes if not n.memory_only]) == 4


def test_cpu_kinds_of_a_hybrid(files: dict[str, Path]) -> None:
    t = topology(files["hybrid"])
    assert len(t.cpu_kinds) == 2
    e, p = t.cpu_kinds
    assert e.pus == list(range(16, 24)) and p.pus == list(range(16))
    assert p.efficiency > e.efficiency
    assert p.infos == {"CoreType": "IntelCore", "FrequencyMaxMHz": "5400"}
    assert [c.kind for c in t.cores] == [1] * 8 + [0] * 8
    assert all(t.pus[i].kind == t.cores[t.pus[i].core].kind for i in range(len(t.pus)))


def test_memory_only_node_and_disallowed_cpus(files: dict[str, Path]) -> None:
    t = topology(files["memory-only"])
    cxl = [n for n in t.numa_nodes if n.memory_only]
    assert [n.os_index for n in cxl] == [2] and cxl[0].pus == [] and cxl[0].subtype == "CXL"
    assert sorted(cxl[0].local_pus) == list(range(16))
    assert sorted(c for n in t.numa_nodes for c in n.pus) == list(range(16))
    assert list(t.disallowed_cpus) == [1, 9]
    assert 1 not in t.allowed_cpus and len(t.allowed_cpus) == 14
    assert any(p.os_index == 1 for p in t.pus)  # still in the model


def test_a_small_hand_written_file(tmp_path: Path) -> None:
    # The smallest file: a machine, a core, two PUs numbered 4 and 9.
    f = tmp_path / "tiny.xml"
    f.write_text('<?xml version="1.0"?>\n<topology>\n'
                 ' <object type="Machine" os_index="0" cpuset="0x00000210"'
                 ' complete_cpuset="0x00000210" allowed_cpuset="0x00000210">\n'
                 '  <object type="Core" os_index="0" cpuset="0x00000210"'
                 ' complete_cpuset="0x00000210">\n'
                 '   <object type="PU" os_index="4" cpuset="0x00000010"'
                 ' complete_cpuset="0x00000010"/>\n'
                 '   <object type="PU" os_index="9" cpuset="0x00000200"'
                 ' complete_cpuset="0x00000200"/>\n'
                 '  </object>\n </object>\n</topology>\n')
    t = topology(str(f))
    assert [list(c.pus) for c in t.cores] == [[4, 9]]
    assert list(t.allowed_cpus) == [4, 9]
    assert place(t, "compact", 1, 1).pools == ((4,),)
    assert place(t, "compact", 1, 2, smt=True).pools == ((4, 9),)


def test_synthetic_strings_keep_working() -> None:
    t = topology("package:2 core:4 pu:2")
    assert t.kind == "synthetic" and t.synthetic and t.source == "package:2 core:4 pu:2"
    assert topology(synthetic="package:1 core:2 pu:1").kind == "synthetic"
    assert topology().kind == "machine"
    assert place(t, "compact", 2, 4).pools == ((0, 2, 4, 6), (8, 10, 12, 14))


# --- bad files ------------------------------------------------------------------------


def bad_files(d: Path) -> dict[str, tuple[Path, str]]:
    out: dict[str, tuple[Path, str]] = {}
    (d / "not.xml").write_text("package:2 core:4\n")
    out["not xml"] = (d / "not.xml", "is not XML")
    (d / "html.xml").write_text("<html><body>hello</body></html>")
    out["other xml"] = (d / "html.xml", "not an hwloc topology")
    (d / "broken.xml").write_text('<?xml version="1.0"?>\n<topology version="2.0">\n'
                                  '<object type="Machine" os_index="0" cpuset="0x1">\n')
    out["rejected"] = (d / "broken.xml", "hwloc rejects it")
    (d / "nopu.xml").write_text('<?xml version="1.0"?>\n<topology version="2.0">\n'
                                '<object type="Machine" os_index="0" cpuset="0x0" '
                                'complete_cpuset="0x0" allowed_cpuset="0x0"/>\n</topology>\n')
    out["no pu"] = (d / "nopu.xml", "")
    root = tx.lstopo_xml("package:1 core:2 pu:2")
    tx.fix_sets(root, disallowed=range(4))
    out["all disallowed"] = (tx.write(root, d / "none-allowed.xml"), "allows no CPU")
    big = d / "big.xml"
    with open(big, "wb") as f:
        f.truncate(65 << 20)
    out["too big"] = (big, "MiB, over the 64 MiB")
    out["missing"] = (d / "nowhere.xml", "no such file")
    return out


def test_bad_files_raise_value_errors_naming_them(tmp_path: Path) -> None:
    for what, (path, message) in bad_files(tmp_path).items():
        with pytest.raises(ValueError) as e:
            topology(path)
        assert str(path) in str(e.value), what
        assert message in str(e.value), (what, str(e.value))
        assert "\n" not in str(e.value), what


def test_bad_files_on_the_command_line_exit_2(tmp_path: Path) -> None:
    files = bad_files(tmp_path)
    for what in ("not xml", "rejected", "all disallowed", "too big"):
        path, message = files[what]
        for args in (("topology", str(path)), ("recommend", "mlp-512", "--no-calibrate",
                                                "--topology", str(path))):
            r = cli(*args)
            assert r.returncode == 2, (what, args, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], r.stderr


# --- the topology command --------------------------------------------------------------


def test_topology_command_prints_the_model(files: dict[str, Path]) -> None:
    r = cli("topology", str(files["memory-only"]))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "(file)" in out and "NUMA node 2 CXL: memory-only" in out
    assert "disallowed CPUs: 1,9" in out
    assert "core 0: CPUs 0,8 (package 0, NUMA 0)" in out
    r = cli("topology", str(files["hybrid"]), "--json")
    d = json.loads(r.stdout)
    assert d["kind"] == "file" and [k["name"] for k in d["cpu_kinds"]] == ["E", "P"]
    assert d["cpu_kinds"][1]["infos"]["FrequencyMaxMHz"] == "5400"
    text = "\n".join(describe(topology(files["epyc-nps4"])))
    assert "L3 1 (32 MiB): 8 cores, CPUs 8-15,72-79" in text
    assert "NUMA node 1 (package 0): CPUs 16-31,80-95" in text
    r = cli("topology", "package:2 core:2 pu:2")
    assert r.returncode == 0 and "(synthetic)" in r.stdout
    r = cli("topology", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["kind"] == "machine"


def test_topology_dict_is_json(files: dict[str, Path]) -> None:
    for f in files.values():
        d = topology_dict(topology(f))
        assert json.loads(json.dumps(d)) == d


# --- planning on each shape: invariants on the CPU lists -----------------------------


def check_cpus(t: Topology, lists: Sequence[Sequence[int]], *, smt: bool,
               numa: bool = True) -> None:
    """Exist, allowed, none twice, no two on one core without SMT, never on
    a memory-only node; with ``numa``, one instance inside one NUMA node when
    it fits one (scatter spreads on purpose)."""
    known = {p.os_index: p for p in t.pus}
    allowed = set(t.allowed_cpus)
    flat = [c for cpus in lists for c in cpus]
    assert all(c in known for c in flat), flat
    assert all(c in allowed for c in flat), flat
    assert len(flat) == len(set(flat)), flat
    if not smt:
        cores = [known[c].core for c in flat]
        assert len(cores) == len(set(cores)), flat
    nodes = [n for n in t.numa_nodes if not n.memory_only]
    # room in a node: its allowed CPUs with SMT, else its cores that have one
    free = {n.os_index: len(allowed & set(n.pus)) if smt else
            len({known[c].core for c in allowed & set(n.pus)}) for n in nodes}
    for cpus in lists:
        homes = {known[c].numa for c in cpus}
        assert all(h in free for h in homes)  # never on a memory-only node
        room = max(free.values()) if free else 0
        if numa and len(homes) > 1 and len(cpus) <= room and len(lists) == 1:
            pytest.fail(f"one instance {list(cpus)} crosses NUMA nodes it fits in")


def numa_fits(t: Topology, lists: Sequence[Sequence[int]], *, smt: bool) -> None:
    """Every instance of a size that fits a NUMA node lies in one."""
    known = {p.os_index: p for p in t.pus}
    allowed = set(t.allowed_cpus)
    sizes = sorted((len(allowed & set(n.pus)) if smt else
                    len({known[c].core for c in allowed & set(n.pus)})
                    for n in t.numa_nodes if not n.memory_only), reverse=True)
    if not lists or not sizes:
        return
    n = len(lists[0])
    # as many instances as fit side by side in whole NUMA nodes must each sit in one
    per_node = [s // n for s in sizes]
    if n <= sizes[0] and len(lists) <= sum(per_node):
        for cpus in lists:
            assert len({known[c].numa for c in cpus}) == 1, lists


@pytest.mark.parametrize("shape", list(SHAPES))
def test_placement_grid(files: dict[str, Path], shape: str) -> None:
    t = topology(files[shape])
    cores = len({t.pus[i].core for i in range(len(t.pus)) if t.pus[i].os_index
                 in set(t.allowed_cpus)})
    for smt in (False, True):
        cpus = len(t.allowed_cpus) if smt else cores
        for k in (1, 2, 4):
            for w in (1, 2):
                for threads in {1, 2, max(1, cpus // (k * w))}:
                    if k * w * threads > cpus:
                        continue
                    s = Settings(scheduler="sync" if w == 1 else "async", inter_op=w,
                                 intra_op=threads, affinity="compact", smt=smt, instances=k)
                    lists = instance_cpus(s, t)
                    assert [len(c) for c in lists] == [w * threads] * k
                    check_cpus(t, lists, smt=smt)
                    numa_fits(t, lists, smt=smt)
                    scatter = place(t, "scatter", k * w, threads, smt=smt)
                    check_cpus(t, scatter.pools, smt=smt, numa=False)  # type: ignore[arg-type]


def test_smt_siblings_found_by_core(files: dict[str, Path]) -> None:
    t = topology(files["intel-2s-interleaved"])
    one = place(t, "compact", 1, 4).pools[0]
    assert one == (0, 2, 4, 6)  # package 0's physical cores, not CPUs 0-3
    both = place(t, "compact", 2, 8, smt=True).pools
    assert sorted(both[0]) == [0, 2, 4, 6, 8, 10, 12, 14]  # one package, with siblings
    assert sorted(place(t, "compact", 1, 8, smt=True).pools[0]) == list(range(8))
    assert place(t, "scatter", 1, 4).pools[0] == (0, 1, 2, 3)  # dealt across packages


def test_instances_stay_in_their_numa_node(files: dict[str, Path]) -> None:
    t = topology(files["epyc-nps4"])  # 4 NUMA nodes of 16 cores, an L3 per 8
    # 3 workers x 5 threads = 15 threads: each instance in one NUMA node
    s = Settings(scheduler="async", inter_op=3, intra_op=5, affinity="compact", instances=4)
    lists = instance_cpus(s, t)
    numa = {p.os_index: p.numa for p in t.pus}
    assert [len({numa[c] for c in cpus}) for cpus in lists] == [1, 1, 1, 1]
    assert len({numa[cpus[0]] for cpus in lists}) == 4
    # 8 threads: one L3 each
    l3 = {c: i for i, d in enumerate(t.l3_domains) for c in d}
    lists = instance_cpus(Settings(intra_op=8, affinity="compact", instances=8), t)
    assert all(len({l3[c] for c in cpus}) == 1 for cpus in lists)


def test_hybrid_teams_stay_on_one_kind(files: dict[str, Path]) -> None:
    t = topology(files["hybrid"])
    p = set(t.cpu_kinds[1].pus)
    e = set(t.cpu_kinds[0].pus)
    assert set(place(t, "compact", 1, 8).pools[0]) <= p  # P cores first
    two = place(t, "compact", 2, 8).pools
    assert set(two[0]) <= p and set(two[1]) <= e
    three = place(t, "compact", 3, 8, smt=True).pools
    assert [set(x) <= p for x in three] == [True, False, True]
    assert set(three[1]) == e


def test_memory_only_nodes_and_disallowed_cpus_hold_no_threads(files: dict[str, Path]
                                                                ) -> None:
    t = topology(files["memory-only"])
    every = place(t, "compact", 1, 14, smt=True).pools[0]
    assert sorted(every) == sorted(t.allowed_cpus)
    assert 1 not in every and 9 not in every
    assert place(t, "compact", 1, 3).pools[0] == (0, 2, 3)  # core 1 (CPUs 1, 9) is out


def test_presets_on_files(files: dict[str, Path]) -> None:
    t = topology(files["intel-snc2"])
    intel = preset("intel", t)
    assert (intel.inter_op, intel.intra_op) == (2, 8)  # sockets, cores per socket
    check_cpus(t, instance_cpus(intel, t), smt=False)
    h = topology(files["memory-only"])
    assert preset("intel", h).intra_op == 3  # 7 allowed cores over 2 sockets
    assert preset("tensorflow", h).intra_op == 14


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_default_model_recommended_on_each_shape(files: dict[str, Path],
                                                        shape: str) -> None:
    t = topology(files[shape])
    for name in DEFAULT_MODELS:
        for batch in DEFAULT_BATCHES:
            rec = recommend(build(name, batch), topology=str(files[shape]), calibrate=False,
                            verify=0)
            assert rec.topology == str(files[shape])
            d = rec.as_dict()
            assert len(d["cpus"]) == rec.settings.instances
            assert all(len(c) == rec.settings.inter_op * rec.settings.intra_op
                       for c in d["cpus"])
            check_cpus(t, d["cpus"], smt=rec.settings.smt)
            numa_fits(t, d["cpus"], smt=rec.settings.smt)
            if t.cpu_kinds:
                kinds = {t.pus[i].os_index: t.pus[i].kind for i in range(len(t.pus))}
                assert all(len({kinds[c] for c in cpus}) == 1 for cpus in d["cpus"])


def test_recommend_cli_on_a_file(files: dict[str, Path]) -> None:
    f = str(files["intel-2s-interleaved"])
    r = cli("recommend", "resnet50", "--batch", "8", "--topology", f, "--no-calibrate",
            "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["topology"] == f and d["cpus"]
    check_cpus(topology(f), d["cpus"], smt=d["settings"]["smt"])
    r = cli("recommend", "resnet50", "--batch", "8", "--topology", f, "--no-calibrate")
    assert r.returncode == 0 and "  cpus: " in r.stdout
    r = cli("recommend", "mlp-512", "--topology", "package:2 core:4 pu:2", "--no-calibrate",
            "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["cpus"]


def test_dry_run_plans_a_file(files: dict[str, Path], tmp_path: Path) -> None:
    r = cli("run", "--dry-run", "--quick", "--topology",
            str(files["epyc-nps4"]), "--json", "--output", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert str(files["epyc-nps4"]) in r.stdout


def test_file_topology_is_not_this_machine(files: dict[str, Path]) -> None:
    from pyparbench.threading.cache_share import team_cache_bytes

    t = topology(files["epyc-nps4"])
    # a file describes a machine as it is: no hypervisor cap from this machine's CPU
    full = team_cache_bytes(t, t.l3_domains[0], under_hypervisor=False)
    assert team_cache_bytes(t, t.l3_domains[0]) == full
    assert os.fspath(files["epyc-nps4"]) == t.source


def test_speed_of_a_cpu_kind(tmp_path: Path) -> None:
    from pyparbench.threading.topology import kind_speed

    t = topology(tx.hybrid_desktop(tmp_path / "freq.xml"))
    assert kind_speed(t, 1) == (1.0, "the most powerful kind")
    speed, source = kind_speed(t, 0) or (0.0, "")
    assert speed == pytest.approx(3900 / 5400) and "FrequencyMaxMHz 3900 / 5400" in source
    # The kernel's capacity, where both kinds have one, before the clocks.
    cap = topology(tx.hybrid_desktop(
        tmp_path / "cap.xml", e_infos={"FrequencyMaxMHz": "3900", "LinuxCapacity": "410"},
        p_infos={"FrequencyMaxMHz": "5400", "LinuxCapacity": "1024"}))
    assert kind_speed(cap, 0) == (pytest.approx(410 / 1024),
                                  "the kernel's capacity, LinuxCapacity 410 / 1024")
    bare = topology(tx.hybrid_desktop(tmp_path / "bare.xml", e_infos={}, p_infos={}))
    assert kind_speed(bare, 0) is None
    assert kind_speed(topology(synthetic="package:1 core:4 pu:1"), 0) is None


def test_a_slower_kind_is_predicted_at_its_speed(tmp_path: Path) -> None:
    from pyparbench.recommender.costmodel import AnalyticCostModel
    from pyparbench.recommender.search import kind_cpus, on_kind, predict
    from pyparbench.recommender.simulate import Resources

    t = topology(tx.hybrid_desktop(
        tmp_path / "cap.xml", e_infos={"LinuxCapacity": "512"}, p_infos={"LinuxCapacity": "1024"}))
    p_res, e_res = Resources.from_topology(t), Resources.from_topology(t, 0)
    assert (p_res.cores, p_res.logical, p_res.kind, p_res.speed) == (8, 16, None, 1.0)
    assert (e_res.cores, e_res.logical, e_res.kind, e_res.speed) == (8, 8, 0, 0.5)
    assert kind_cpus(t, 0, smt=False) == list(range(16, 24))
    assert kind_cpus(t, 1, smt=False) == list(range(0, 16, 2))  # one CPU per P core first
    assert kind_cpus(t, 1, smt=True) == list(range(0, 16, 2)) + list(range(1, 16, 2))
    g = build("mlp-512", 1)
    model = AnalyticCostModel()
    for threads in (1, 4):
        s = Settings(intra_op=threads, affinity="compact")
        e = on_kind(s, t, 0)
        assert e.affinity == (tuple(range(16, 16 + threads)),)
        fast = predict(g, s, model, p_res).latency_ns
        slow = predict(g, e, model, e_res).latency_ns
        # Op times at half speed; the executor's dispatch is not scaled.
        assert 1.9 * fast < slow <= 2.0 * fast * (1 + 1e-9)
    with pytest.raises(ValueError, match="needs 9 CPUs; CPU kind 0 has 8"):
        on_kind(Settings(intra_op=9, affinity="compact"), t, 0)
    bare = topology(tx.hybrid_desktop(tmp_path / "bare.xml", e_infos={}, p_infos={}))
    with pytest.raises(ValueError, match="its speed is not known"):
        Resources.from_topology(bare, 0)


def _on_kind(t: Topology, cpus: Sequence[Sequence[int]], kind: int) -> bool:
    return {c for pool in cpus for c in pool} <= set(t.cpu_kinds[kind].pus)


def test_slower_cores_are_candidates_of_their_own(tmp_path: Path) -> None:
    # A laptop: 2 P cores, 8 E cores at 0.72 of their speed. Eight E cores
    # outrun two P cores on a convolution network's batch of 8.
    laptop = tx.hybrid_desktop(tmp_path / "laptop.xml", p_cores=2, e_cores=8)
    t = topology(laptop)
    rec = recommend(build("resnet50", 8), topology=str(laptop), calibrate=False, verify=0,
                    objective="throughput")
    assert _on_kind(t, rec.cpus, 0) and not isinstance(rec.settings.affinity, str)
    check_cpus(t, rec.cpus, smt=rec.settings.smt)
    hybrid = next(r for r in rec.reasons if r.startswith("hybrid CPU"))
    assert "E cores (CPUs 4-11, up to 3900 MHz) are candidates of their own, predicted at " \
           "0.72 of a P core's speed" in hybrid and "the chosen setting runs on them" in hybrid
    # Both kinds were predicted; the P-core candidates keep compact placement.
    assert any(p.settings.affinity == "compact" for p in rec.candidates)
    assert any(_on_kind(t, p.settings.affinity, 0) for p in rec.candidates
               if not isinstance(p.settings.affinity, str))
    # A desktop of 8 P and 8 E cores: the P cores win, the E cores' best is named.
    desk = tx.hybrid_desktop(tmp_path / "desk.xml")
    rec = recommend(build("resnet50", 8), topology=str(desk), calibrate=False, verify=0)
    assert _on_kind(topology(desk), rec.cpus, 1)
    hybrid = next(r for r in rec.reasons if r.startswith("hybrid CPU"))
    assert "their best, sync 1x8 library/onednn/openmp explicit, is predicted at" in hybrid
    # No speed in the file: the E cores are left out, and the reason says why.
    bare = tx.hybrid_desktop(tmp_path / "bare.xml", p_cores=2, e_cores=8, e_infos={},
                             p_infos={})
    rec = recommend(build("resnet50", 8), topology=str(bare), calibrate=False, verify=0,
                    objective="throughput")
    assert _on_kind(topology(bare), rec.cpus, 1)
    assert all(isinstance(p.settings.affinity, str) for p in rec.candidates)
    assert any("left to other work: the topology gives no speed for them" in r
               for r in rec.reasons)


def test_siblings_of_different_kinds_get_an_answer(tmp_path: Path) -> None:
    # Each P CPU is the SMT sibling of a slow one, and the slow kind spans both
    # cores: it has more cores (and instance counts) than the P kind, and the
    # calibration measures every thread count either kind's candidates take.
    path = tx.mixed_kind_siblings(tmp_path / "kinds.xml")
    t = topology(path)
    assert len(t.cpu_kinds) == 3 and len(t.cores) == 2
    rec = recommend(build("mlp-512", 8), topology=str(path), verify=0, objective="throughput",
                    cache_dir=tmp_path / "cache")
    check_cpus(t, rec.cpus, smt=rec.settings.smt)
    assert rec.predicted.latency_ns > 0
    assert any(p.settings.instances == 2 for p in rec.candidates)


def test_an_hwloc_1x_file(tmp_path: Path) -> None:
    # hwloc 1.x's format (what its lstopo wrote, and what hwloc 2 writes with
    # `--export-xml-flags v1`): NUMA nodes are parents of "Socket" objects.
    assert tx.LSTOPO is not None
    out = subprocess.run([tx.LSTOPO, "--input", "package:2 [numa] l3:1 core:4 pu:2",
                          "--export-xml-flags", "v1", "--of", "xml", "-"], check=True,
                         capture_output=True, text=True).stdout
    assert 'type="Socket"' in out and "hwloc2.dtd" not in out
    f = tmp_path / "v1.xml"
    f.write_text(out)
    t = topology(f)
    assert t.kind == "file" and len(t.packages) == 2 and len(t.cores) == 8
    assert [sorted(n.pus) for n in t.numa_nodes] == [list(range(8)), list(range(8, 16))]
    assert len(t.l3_domains) == 2
    rec = recommend(build("resnet50", 8), topology=str(f), calibrate=False, verify=0)
    check_cpus(t, rec.cpus, smt=rec.settings.smt)
    numa_fits(t, rec.cpus, smt=rec.settings.smt)
