"""The README as a contract: every Python example runs as printed, and every
concrete ``pyparbench ...`` command line of a shell block parses.

Python blocks (```python) run each in a fresh interpreter, in a scratch
folder. A block whose first line is ``# continues the example above`` runs
after the block before it, in the same interpreter; one whose first line
names a file (``# test_mine.py``) is written under that name and run with
pytest; ``# needs: torch`` (or another package) skips it, saying why, where
the package is missing; ``# needs: bf16`` where oneDNN refuses bf16 products
(oneDNN 2.x on an x86 CPU without AVX-512). Command lines come from fenced shell blocks and
four-space indented blocks; a synopsis (with ``[...]`` or ``...``) is not a
concrete command and is left out. An unquoted shell expansion standing
alone (``${PYPARBENCH_RUN_ARGS:-}``: options a script's user supplies, maybe
none) is left out of the line before it is parsed.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _support import onednn_bf16_refusal

from pyparbench.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
CONTINUES = "# continues the example above"
_FILE = re.compile(r"^# (test_\w+\.py)\b")
_NEEDS = re.compile(r"^# needs: ([\w, ]+)$")
# A word that is only an unquoted variable's expansion: zero or more words.
_EXPANSION = re.compile(r"(?<=\s)\$\{?\w+(?::-[^}\s]*)?\}?(?=\s|$)")


@dataclass
class Example:
    """Python blocks run together, with where the first one starts."""

    line: int
    code: list[str] = field(default_factory=list)
    file: str | None = None
    needs: list[str] = field(default_factory=list)


def _blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of every fenced block."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((m.group(1), i + 2, lines[i + 1:j]))
            i = j
        i += 1
    return out


def examples() -> list[Example]:
    out: list[Example] = []
    for lang, line, body in _blocks(README.read_text()):
        if lang != "python":
            continue
        first = body[0] if body else ""
        if first == CONTINUES:
            assert out, f"README.md:{line}: continues no example"
            out[-1].code += body[1:]
            continue
        ex = Example(line, list(body))
        f = _FILE.match(first)
        if f:
            ex.file = f.group(1)
        for row in body[:3]:
            n = _NEEDS.match(row)
            if n:
                ex.needs = [x.strip() for x in n.group(1).split(",")]
        out.append(ex)
    return out


def command_lines() -> list[tuple[int, str]]:
    """(line number, arguments after 'pyparbench') of every concrete command
    in a shell block."""
    text = README.read_text()
    lines = text.splitlines()
    shell_lines: set[int] = set()
    for lang, line, body in _blocks(text):
        if lang in ("bash", "sh", "shell", "console", ""):
            shell_lines.update(range(line, line + len(body)))
    fenced = {n for lang, line, body in _blocks(text) for n in range(line - 1, line + len(body))}
    for n, row in enumerate(lines, 1):
        if row.startswith("    ") and n not in fenced:
            shell_lines.add(n)
    out = []
    n_sorted = sorted(shell_lines)
    for n in n_sorted:
        row = lines[n - 1].strip()
        # A continued line joins the next ones.
        if n - 1 > 0 and lines[n - 2].rstrip().endswith("\\") and (n - 1) in shell_lines:
            continue
        k = n
        while row.endswith("\\") and k < len(lines):
            row = row[:-1] + " " + lines[k].strip()
            k += 1
        row = row.split(" #", 1)[0].strip()
        row = _EXPANSION.sub("", row)
        m = re.match(r"^(?:\.venv/bin/)?pyparbench\s+(.*)$", row)
        if not m or "[" in row or "..." in row:
            continue
        out.append((n, m.group(1)))
    return out


EXAMPLES = examples()
COMMANDS = command_lines()


def test_the_readme_has_examples_and_commands() -> None:
    assert len(EXAMPLES) >= 4 and len(COMMANDS) >= 8


@pytest.mark.parametrize("ex", EXAMPLES, ids=[f"line{e.line}" for e in EXAMPLES])
def test_every_python_example_runs_as_printed(ex: Example, tmp_path: Path) -> None:
    refusal = onednn_bf16_refusal() if "bf16" in ex.needs else None
    if refusal is not None:
        pytest.skip(f"README.md:{ex.line} needs bf16: {refusal}")
    missing = [p for p in ex.needs if p != "bf16" and importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"README.md:{ex.line} needs {', '.join(missing)}, not installed")
    code = "\n".join(ex.code) + "\n"
    if ex.file:
        (tmp_path / ex.file).write_text(code)
        cmd = [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--benchmark-disable", ex.file]
    else:
        cmd = [sys.executable, "-P", "-c", code]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (f"README.md:{ex.line} failed:\n{done.stdout[-3000:]}\n"
                                  f"{done.stderr[-3000:]}")


@pytest.mark.parametrize("line, args", COMMANDS, ids=[f"line{n}" for n, _ in COMMANDS])
def test_every_command_line_parses(line: int, args: str) -> None:
    parser = build_parser()
    try:
        parser.parse_args(shlex.split(args))
    except SystemExit as e:
        pytest.fail(f"README.md:{line}: `pyparbench {args}` does not parse (exit {e.code})")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped but
    hyphens, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_contents_and_every_link_in_the_readme_reach_a_heading() -> None:
    text = README.read_text()
    in_code = False
    anchors: set[str] = set()
    sections: list[str] = []  # the "## " headings, in order
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"^(#{2,4}) (.+)$", line)):
            anchors.add(_slug(m.group(2)))
            if len(m.group(1)) == 2:
                sections.append(m.group(2))
    links = re.findall(r"\]\(#([^)\s]+)\)", text)
    assert not [a for a in links if a not in anchors]
    # The first section is the contents, and it names every other section.
    assert sections and sections[0] == "Contents", sections[:1]
    contents = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\(#([^)\s]+)\)", contents))
    assert [h for h in sections[1:] if _slug(h) not in listed] == []
