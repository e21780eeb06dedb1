"""The Python package's architecture: no import circles, and each area imports
only from the areas below it (README, Layout).

Every import is read from the source: at module level, inside functions and
under ``TYPE_CHECKING`` alike (an import that runs late still ties the two
modules together; a circle through one is only hidden until it runs).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pyparbench

PACKAGE = Path(__file__).resolve().parents[1] / "pyparbench"

# The areas from bottom to top: an area may import from its own and from
# those before it. Each is a package (or one module) of pyparbench; the
# package root (pyparbench/__init__.py) re-exports the public API and sits
# above everything.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_bfloat16", "_checks", "_version", "choices", "cpuinfo", "cpulist", "quantization",
     "shapes", "timing"),
    ("_core",),
    ("memory", "threading"),
    ("graph",),
    ("settings",),
    ("machine", "child_process", "ops", "models", "reference"),
    ("resultfiles",),
    ("stats",),
    ("executor",),
    ("frameworks",),
    ("recommender",),
    ("report",),
    ("harness", "pytest_plugin"),
    ("compare",),
    ("cli", "__main__"),
    ("__init__",),
)
# Imports that close a circle but are allowed, each with its reason:
# (importing module, imported module) -> why.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


# The compiled core (its stubs are .pyi files): imports nothing of the package.
CORE = "pyparbench._core"


def _resolve(name: str) -> str | None:
    """The pyparbench module ``name`` is, or the nearest package holding it."""
    if name == CORE or name.startswith(CORE + "."):
        return CORE
    while name:
        if name in MODULES:
            return name
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return None


def imports(module: str) -> Iterator[tuple[str, int]]:
    """(imported pyparbench module, line) for every import statement."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".")
                if not is_package:
                    here = here[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            if not base.startswith("pyparbench"):
                continue
            for alias in node.names:
                # `from pyparbench.graph import passes` imports the module passes.
                full = f"{base}.{alias.name}"
                is_module = full in MODULES or full == CORE or full.startswith(CORE + ".")
                target = _resolve(full if is_module else base)
                if target:
                    yield target, node.lineno


GRAPH = {m: {t for t, _ in imports(m) if t != m} for m in MODULES}
GRAPH[CORE] = set()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _without_allowed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: {t for t in ts if (m, t) not in ALLOWED} for m, ts in graph.items()}


def area(module: str) -> str:
    """The area a module belongs to: its package under pyparbench, or itself."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_the_package_is_found() -> None:
    assert {"pyparbench", "pyparbench.settings", "pyparbench.graph"} <= set(MODULES)


def test_no_import_circle_between_modules() -> None:
    circles = _cycles(_without_allowed(GRAPH))
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_no_import_circle_between_areas() -> None:
    areas: dict[str, set[str]] = {}
    for m, ts in _without_allowed(GRAPH).items():
        areas.setdefault(area(m), set()).update(area(t) for t in ts if area(t) != area(m))
    circles = _cycles(areas)
    assert not circles, "areas in a circle: " + "; ".join(" <-> ".join(c) for c in circles)


def test_every_area_has_a_place_in_the_order() -> None:
    placed = {a for layer in LAYERS for a in layer}
    assert {area(m) for m in GRAPH} <= placed


def test_areas_import_only_from_below() -> None:
    rank = {a: i for i, layer in enumerate(LAYERS) for a in layer}
    wrong = []
    for m, ts in GRAPH.items():
        for t in ts:
            if (m, t) not in ALLOWED and rank[area(t)] > rank[area(m)]:
                wrong.append(f"{m} imports {t}")
    assert not wrong, "imports against the order (README, Layout):\n" + "\n".join(wrong)


def test_nothing_imports_the_package_root() -> None:
    # The root re-exports the API: a module that imports it imports everything.
    wrong = [f"{m} (line {line})" for m in MODULES if m != "pyparbench"
             for t, line in imports(m) if t == "pyparbench"]
    assert not wrong, "modules importing the package root: " + ", ".join(wrong)


@pytest.mark.parametrize("source, circle", [
    ({"a": "from pyparbench import b", "b": "def f():\n    from pyparbench import a"},
     ["pyparbench.a", "pyparbench.b"]),
    ({"a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyparbench.b import x",
      "b": "import pyparbench.a"}, ["pyparbench.a", "pyparbench.b"]),
])
def test_the_circle_finder_sees_late_imports(tmp_path: Path, source: dict[str, str],
                                            circle: list[str], monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    pkg = tmp_path / "pyparbench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in source.items():
        (pkg / f"{name}.py").write_text(text + "\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    modules = {module_name(p): p for p in sorted(pkg.rglob("*.py"))}
    monkeypatch.setattr(sys.modules[__name__], "MODULES", modules)
    graph = {m: {t for t, _ in imports(m) if t != m} for m in modules}
    assert _cycles(graph) == [circle]


def test_a_framework_child_imports_no_native_core() -> None:
    """A framework's child process builds graphs and reads settings but must
    never load the native core (its OpenMP beside the framework's): the
    modules it imports keep the core's imports inside the functions that
    need it."""
    code = ("import sys, pyparbench.frameworks.child, pyparbench.graph.passes, "
            "pyparbench.settings; "
            "print(sorted(m for m in sys.modules if m.startswith('pyparbench._core')))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYPARBENCH_NO_CORE": "1"}, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_importing_the_package_loads_none_of_its_api() -> None:
    """``import pyparbench`` loads its public names on first use: no native
    core, no numpy, no heavy library until one is asked for; each name then
    resolves to the object its module defines."""
    code = ("import sys, pyparbench\n"
            "print(sorted(m for m in sys.modules if m.startswith('pyparbench')\n"
            "             or m.split('.')[0] in ('numpy', 'onnx', 'torch', 'matplotlib')))\n"
            "from pyparbench.threading.topology import topology\n"
            "import pyparbench.ops, pyparbench._core\n"
            "assert pyparbench.topology is topology\n"
            "assert pyparbench.ops is sys.modules['pyparbench.ops']\n"
            "assert pyparbench.DnnlError is pyparbench._core.DnnlError\n"
            "assert set(pyparbench.__all__) <= set(dir(pyparbench))\n"
            "print(sorted(n for n in pyparbench.__all__ if getattr(pyparbench, n) is None))\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded, unset = out.stdout.strip().splitlines()
    assert loaded == "['pyparbench', 'pyparbench._version']", loaded
    assert unset == "[]"


def test_an_unknown_name_of_the_package_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        pyparbench.no_such_name  # noqa: B018 (the lookup is the test)
