"""A source checkout in the working directory never shadows the installed
package: importing the source folder without its compiled core says so in
one sentence. (The main job run from the repository root, and with a
relative results path from another folder: tests/test_report.py.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_source_folder_without_its_core_fails_with_one_clear_sentence(tmp_path: Path
                                                                          ) -> None:
    shutil.copytree(REPO / "pyparbench", tmp_path / "pyparbench",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    proc = subprocess.run([sys.executable, "-c", "import pyparbench.executor"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pyparbench was imported from")
    assert "no compiled core" in last and "pip install ." in last
