"""Placement on synthetic machines: exact CPU lists, worked out by hand.

hwloc numbers the PUs of a synthetic machine in logical order, so with
``pu:2`` core c holds CPUs 2c (its first hardware thread) and 2c + 1 (its
SMT sibling); with ``pu:1`` core c is CPU c. For "package:2 core:24 pu:2"
socket 0 holds CPUs 0-47 and socket 1 CPUs 48-95; for "package:2 numa:2
core:12 pu:2" NUMA node n holds CPUs 24n .. 24n+23 (nodes 0, 1 on socket 0).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyparbench.settings import allowed_cores
from pyparbench.threading import Placement, place, topology

M1x2 = "package:1 core:2 pu:1"
M1x8x2 = "package:1 core:8 pu:2"
M2x24x2 = "package:2 core:24 pu:2"
M4NUMA = "package:2 numa:2 core:12 pu:2"


def ev(a: int, b: int) -> tuple[int, ...]:
    """Even CPUs a, a+2, ..., b (first hardware threads of cores a/2 .. b/2)."""
    return tuple(range(a, b + 1, 2))


CASES = [
    # machine, policy, pools, threads, smt, expected CPU lists
    (M1x2, "compact", 1, 2, False, [(0, 1)]),
    (M1x2, "compact", 2, 1, False, [(0,), (1,)]),
    (M1x2, "scatter", 1, 2, False, [(0, 1)]),
    (M1x2, "scatter", 2, 1, True, [(0,), (1,)]),
    # one socket, 8 cores x 2 threads
    (M1x8x2, "compact", 1, 8, False, [ev(0, 14)]),
    (M1x8x2, "compact", 1, 4, True, [(0, 2, 4, 6)]),  # SMT siblings last
    (M1x8x2, "compact", 1, 16, True, [ev(0, 14) + ev(1, 15)]),
    (M1x8x2, "compact", 2, 4, False, [(0, 2, 4, 6), (8, 10, 12, 14)]),
    (M1x8x2, "compact", 2, 8, True, [ev(0, 14), ev(1, 15)]),
    (M1x8x2, "compact", 3, 5, True,
     [(0, 2, 4, 6, 8), (10, 12, 14, 1, 3), (5, 7, 9, 11, 13)]),
    (M1x8x2, "scatter", 1, 4, False, [(0, 2, 4, 6)]),
    (M1x8x2, "scatter", 1, 10, True, [ev(0, 14) + (1, 3)]),
    # two sockets, 24 cores x 2 threads each
    (M2x24x2, "compact", 2, 24, False, [ev(0, 46), ev(48, 94)]),
    (M2x24x2, "compact", 4, 12, False, [ev(0, 22), ev(24, 46), ev(48, 70), ev(72, 94)]),
    (M2x24x2, "compact", 1, 30, True, [ev(0, 46) + ev(48, 58)]),
    (M2x24x2, "compact", 2, 48, True, [ev(0, 46) + ev(1, 47), ev(48, 94) + ev(49, 95)]),
    # a team that fits one socket goes to the socket with room, not across
    (M2x24x2, "compact", 3, 16, False, [ev(0, 30), ev(48, 78), ev(32, 46) + ev(80, 94)]),
    (M2x24x2, "scatter", 1, 4, False, [(0, 48, 2, 50)]),
    (M2x24x2, "scatter", 2, 2, False, [(0, 48), (2, 50)]),
    (M2x24x2, "scatter", 1, 96, True,
     [tuple(c for i in range(24) for c in (2 * i, 48 + 2 * i))
      + tuple(c for i in range(24) for c in (2 * i + 1, 49 + 2 * i))]),
    # two sockets x two NUMA nodes x 12 cores x 2 threads
    (M4NUMA, "compact", 4, 12, False, [ev(0, 22), ev(24, 46), ev(48, 70), ev(72, 94)]),
    (M4NUMA, "compact", 2, 20, False, [ev(0, 38), ev(48, 86)]),
    (M4NUMA, "compact", 1, 8, True, [ev(0, 14)]),
    (M4NUMA, "compact", 4, 24, True, [ev(0, 46), ev(48, 94), ev(1, 47), ev(49, 95)]),
    (M4NUMA, "compact", 8, 12, True,
     [ev(0, 22), ev(24, 46), ev(48, 70), ev(72, 94),
      ev(1, 23), ev(25, 47), ev(49, 71), ev(73, 95)]),
    # round-robin over sockets, then over the NUMA nodes within a socket
    (M4NUMA, "scatter", 1, 8, False, [(0, 48, 24, 72, 2, 50, 26, 74)]),
]


@pytest.mark.parametrize(("machine", "policy", "pools", "threads", "smt", "want"), CASES)
def test_policy_cpu_lists(machine: str, policy: str, pools: int, threads: int, smt: bool,
                          want: list[tuple[int, ...]]) -> None:
    p = place(topology(machine), policy, pools, threads, smt=smt)
    assert p == Placement(policy, smt, tuple(want))
    assert len(set(p.cpus)) == pools * threads  # disjoint


def test_none_pins_nothing() -> None:
    p = place(topology(M1x2), "none", pools=3, threads=4)
    assert p.pools == (None, None, None) and not p.pinned and p.cpus == ()


def test_explicit_lists() -> None:
    t = topology(M1x8x2)
    assert place(t, [0, 2, 4, 6], pools=2, threads=2).pools == ((0, 2), (4, 6))
    assert place(t, [[6, 4], [2, 0]], pools=2, threads=2).pools == ((6, 4), (2, 0))
    assert place(t, [0, 1], threads=2, smt=True).pools == ((0, 1),)
    assert place(t, [[3]], smt=True).policy == "explicit"


# ---------------------------------------------------------------- bad input


def test_unknown_policy_is_named() -> None:
    with pytest.raises(ValueError, match="'compactt'"):
        place(topology(M1x2), "compactt")


@pytest.mark.parametrize(("machine", "policy", "pools", "threads", "smt", "match"), [
    (M1x2, "compact", 1, 3, True, "needs 3 CPUs.*2 logical CPUs"),
    (M1x2, "scatter", 3, 1, False, "3 pools x 1 thread needs 3 CPUs.*2 physical cores"),
    (M1x8x2, "compact", 1, 9, False, "9 CPUs.*8 physical cores with smt=False.*16 logical"),
    (M2x24x2, "scatter", 2, 49, True, "98 CPUs.*96 logical CPUs"),
])
def test_more_threads_than_cpus(machine: str, policy: str, pools: int, threads: int,
                                smt: bool, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        place(topology(machine), policy, pools, threads, smt=smt)


def test_oversubscription_is_fine_without_pinning() -> None:
    assert place(topology(M1x2), "none", pools=4, threads=4).pools == (None,) * 4


def test_explicit_errors() -> None:
    t = topology(M1x8x2)
    with pytest.raises(ValueError, match="CPU 16 is not one this process may use"):
        place(t, [16])
    with pytest.raises(ValueError, match="CPU 2 is listed twice"):
        place(t, [[0, 2], [2, 4]], pools=2, threads=2)
    with pytest.raises(ValueError, match="SMT siblings.*smt=True"):
        place(t, [0, 1], threads=2)
    with pytest.raises(ValueError, match="3 CPUs for 2 pool"):
        place(t, [0, 2, 4], pools=2, threads=1)
    with pytest.raises(ValueError, match="pool 1 lists 1 CPU for 2 threads"):
        place(t, [[0, 2], [4]], pools=2, threads=2)
    with pytest.raises(ValueError, match="2 CPU lists for 1 pool"):
        place(t, [[0], [2]], pools=1, threads=1)
    with pytest.raises(ValueError, match="empty"):
        place(t, [])


def test_argument_errors() -> None:
    t = topology(M1x2)
    with pytest.raises(ValueError, match="pools must be >= 1, got 0"):
        place(t, "compact", pools=0)
    with pytest.raises(ValueError, match="threads must be >= 1, got -1"):
        place(t, "compact", threads=-1)
    with pytest.raises(TypeError, match="'2'"):
        place(t, "compact", threads="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="1.5"):
        place(t, [1.5])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="3.0"):
        place(t, 3.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="smt"):
        place(t, "compact", smt=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="topology"):
        place("package:1 core:2 pu:1", "compact")  # type: ignore[arg-type]


def test_this_machine_refuses_cpus_it_may_not_use() -> None:
    t = topology()
    allowed = list(t.allowed_cpus)
    bad = max(p.os_index for p in t.pus) + 1
    with pytest.raises(ValueError, match=f"CPU {bad} is not one this process may use"):
        place(t, [bad])
    with pytest.raises(ValueError, match="needs"):
        place(t, "compact", pools=len(allowed) + 1, threads=1, smt=True)
    # Every allowed CPU, one pool each, with smt=True; with smt=False (the
    # default) one CPU of each physical core, so as many pools as cores (fewer
    # than CPUs where SMT is on).
    assert sorted(place(t, "compact", pools=len(allowed), threads=1, smt=True).cpus) == allowed
    cores = allowed_cores(t)
    one_each = place(t, "compact", pools=cores, threads=1).cpus
    core_of = {p.os_index: p.core for p in t.pus}
    assert len({core_of[c] for c in one_each}) == cores
    if cores < len(allowed):
        with pytest.raises(ValueError, match="smt=False"):
            place(t, "compact", pools=len(allowed), threads=1)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_taskset_restricts_placement() -> None:
    """Bound to one CPU: the other CPU is refused by place(), Pool() and kernel.pin()."""
    keep, other = sorted(os.sched_getaffinity(0))[:2]
    code = f"""
import os
os.sched_setaffinity(0, {{{keep}}})
import pyparbench as ppb
from pyparbench.threading import Pool, place
t = ppb.topology()
assert list(t.allowed_cpus) == [{keep}], t.allowed_cpus
assert place(t, "compact").pools == (({keep},),)
for make in (lambda: place(t, [{other}]), lambda: Pool("std", 1, cpus=[{other}]),
             lambda: ppb.ops.Gemm(4, 4, 4, threads=1).pin([{other}]),
             lambda: place(t, "compact", pools=2)):
    try:
        make()
    except ValueError as e:
        print("ValueError:", e)
"""
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout
    for line in lines[:3]:
        assert f"CPU {other} is not one this process may use" in line
    assert "2 pools x 1 thread needs 2 CPUs" in lines[3]
