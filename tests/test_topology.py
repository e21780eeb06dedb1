"""Topology from hwloc: this machine, synthetic machines, and `pyparbench info`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import pyparbench as ppb
from pyparbench.threading import topology, topology_dict

# Also run in the emulated arm64 job (.ci/aarch64).
pytestmark = pytest.mark.aarch64

ALLOWED = sorted(os.sched_getaffinity(0))


def test_this_machine_matches_the_os() -> None:
    t = topology()
    assert not t.synthetic
    assert list(t.allowed_cpus) == ALLOWED
    pus = sorted(p.os_index for p in t.pus)
    assert set(ALLOWED) <= set(pus)
    assert len(pus) == len(set(pus))
    # every PU belongs to exactly one core, and its siblings are its core's other PUs
    for p in t.pus:
        core = t.cores[p.core]
        assert p.os_index in core.pus
        assert sorted(p.siblings) == sorted(c for c in core.pus if c != p.os_index)
    assert sum(len(c.pus) for c in t.cores) == len(t.pus)
    assert len(t.packages) >= 1
    assert ppb.topology is topology


def test_synthetic_smt_machine() -> None:
    t = topology("package:2 core:2 pu:2")
    assert t.synthetic and t.source == "package:2 core:2 pu:2"
    assert len(t.packages) == 2 and len(t.cores) == 4 and len(t.pus) == 8
    assert [list(c.pus) for c in t.cores] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [c.package for c in t.cores] == [0, 0, 1, 1]
    assert [list(p.pus) for p in t.packages] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert {p.os_index: list(p.siblings) for p in t.pus}[5] == [4]
    assert list(t.allowed_cpus) == list(range(8))


def test_synthetic_numa_nodes_sit_in_their_sockets() -> None:
    t = topology("package:2 numa:2 core:12 pu:2")
    assert len(t.packages) == 2 and len(t.cores) == 48 and len(t.pus) == 96
    nodes = {n.os_index: n for n in t.numa_nodes}
    assert sorted(nodes) == [0, 1, 2, 3]
    assert [nodes[i].package for i in range(4)] == [0, 0, 1, 1]
    assert [list(nodes[i].pus) for i in range(4)] == [
        list(range(0, 24)), list(range(24, 48)), list(range(48, 72)), list(range(72, 96))]
    assert t.cores[13].numa == 1 and t.cores[13].package == 0
    assert t.cores[30].numa == 2 and t.cores[30].package == 1


def test_synthetic_caches() -> None:
    t = topology("package:1 l3:1(size=8388608) l2:2(size=1048576) l1d:1(size=32768) "
                 "core:1 pu:2")
    caches = {(c.level, c.type): c for c in t.caches}
    assert caches[(3, "unified")].size == 8 << 20
    assert caches[(3, "unified")].count == 1
    assert caches[(3, "unified")].cpus_per_instance == 4
    assert caches[(2, "unified")].size == 1 << 20 and caches[(2, "unified")].count == 2
    assert caches[(1, "data")].size == 32 << 10 and caches[(1, "data")].cpus_per_instance == 2


def test_topology_dict_is_json() -> None:
    d = topology_dict(topology("package:2 core:2 pu:2"))
    json.dumps(d)
    assert d["packages"] == 2 and d["physical_cores"] == 4 and d["logical_cpus"] == 8
    assert d["smt_siblings"]["2"] == [3]
    assert d["cores"][1] == {"index": 1, "package": 0, "numa": 0, "l3": -1, "kind": -1,
                             "cpus": [2, 3]}


@pytest.mark.parametrize("bad", ["package:two", "banana:3", "core:0 pu:1"])
def test_bad_synthetic_description(bad: str) -> None:
    with pytest.raises(ValueError, match="synthetic"):
        topology(bad)


def test_bad_synthetic_types() -> None:
    with pytest.raises(TypeError, match="3"):
        topology(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hwloc"):
        topology("  ")


@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs 2 CPUs")
@pytest.mark.skipif(os.environ.get("PPB_TEST_EMULATED") == "1",
                    reason="under user-mode emulation hwloc does not see the binding")
def test_taskset_is_respected() -> None:
    """A process bound to one CPU before import sees only that CPU as allowed."""
    cpu = ALLOWED[-1]
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}})\n"
            "import pyparbench as ppb\n"
            "print(list(ppb.topology().allowed_cpus), len(ppb.topology().pus))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split("\n")[0]
    assert out.startswith(f"[{cpu}] ")


def test_info_has_a_topology_section() -> None:
    d = ppb.info()
    assert {"pyparbench", "onednn", "openmp", "cpus", "compiler", "default_threads"} <= set(d)
    assert d["topology"]["allowed_cpus"] == ALLOWED
    assert d["topology"]["logical_cpus"] == d["cpus"]["logical"]


def test_info_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from pyparbench.cli import main

    assert main(["info", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["topology"]["physical_cores"] == d["cpus"]["physical_cores"]
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "topology" in out and "socket 0" in out and "caches" in out
