"""The layering of the native core, csrc/pyparbench: a directory includes
only from itself and the directories below it, so no two directories depend
on each other.

Lowest first:

    core        views, checks, thread counts, engine, knobs (and the top-level
                dnnl_compat.hpp, which core may use)
    threading   topology, placement, pinning, pools, audit   } each on core only,
    timing      the native timing loop                       } never on each other
    info        build and runtime information                }
    ops         the kernel bases (Kernel, PrimitiveKernel) and the ops with one
                implementation
    math        the heavy ops behind one interface each, with every library's
                implementation; math may include ops (its kernels derive from
                ops' bases), ops never includes math
    graph       plan, node runners, executor: may include everything

Needs no compiled extension: the sources are read as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "csrc" / "pyparbench"

# Directory -> the directories it may include from besides itself; "" is
# csrc/pyparbench itself (dnnl_compat.hpp).
_BELOW_OPS = {"", "core", "threading", "timing"}
MAY_INCLUDE: dict[str, set[str]] = {
    "": set(),
    "core": {""},
    "threading": {"", "core"},
    "timing": {"", "core"},
    "info": {"", "core"},
    "ops": _BELOW_OPS,
    "math": _BELOW_OPS | {"ops"},
    "graph": _BELOW_OPS | {"ops", "math"},
}

QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANGLE_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>")


def sources() -> list[Path]:
    return sorted(p for p in CORE.rglob("*") if p.suffix in {".hpp", ".cpp", ".inc"})


def directory_of(path: Path) -> str:
    parts = path.relative_to(CORE).parts
    return parts[0] if len(parts) > 1 else ""


def included_directory(target: str, includer: Path) -> str:
    """The csrc/pyparbench directory an #include "target" reads from."""
    if target.startswith("pyparbench/"):
        parts = target.split("/")[1:]
        return parts[0] if len(parts) > 1 else ""
    if "/" not in target:  # next to the includer
        return directory_of(includer)
    return target  # outside the core (bindings/...): allowed nowhere


def test_the_sources_are_there() -> None:
    assert len(sources()) > 50, f"no native sources under {CORE}"


def test_every_directory_has_a_place_in_the_order() -> None:
    directories = {directory_of(p) for p in sources()}
    assert directories <= MAY_INCLUDE.keys(), (
        f"place {sorted(directories - MAY_INCLUDE.keys())} in MAY_INCLUDE")


def test_the_order_has_no_cycle() -> None:
    placed: list[str] = []
    while len(placed) < len(MAY_INCLUDE):
        ready = [d for d, below in MAY_INCLUDE.items()
                 if d not in placed and below <= set(placed)]
        assert ready, f"cycle among {sorted(set(MAY_INCLUDE) - set(placed))}"
        placed += ready


def test_directories_include_only_from_below() -> None:
    violations = []
    for path in sources():
        here = directory_of(path)
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = QUOTED_INCLUDE.match(line)
            if not m:
                continue
            there = included_directory(m.group(1), path)
            if there != here and there not in MAY_INCLUDE[here]:
                violations.append(f"{path.relative_to(CORE)}:{number} ({here or 'top'}) "
                                  f"includes {m.group(1)}")
    assert violations == []


@pytest.mark.parametrize("header", ["Python.h", "pybind11/"])
def test_the_core_holds_no_python(header: str) -> None:
    found = [f"{p.relative_to(CORE)}:{n}" for p in sources()
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if (m := ANGLE_INCLUDE.match(line)) and m.group(1).startswith(header)]
    assert found == []
