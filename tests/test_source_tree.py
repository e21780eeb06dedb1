"""A source checkout in the working directory never shadows the installed
package: the main job works from the repository root, and importing the
source folder without its compiled core says so in one sentence."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pyparbench() -> list[str]:
    """The installed console script (as a user runs it), else the module in safe-path mode."""
    script = Path(sys.executable).parent / "pyparbench"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "pyparbench"]


def test_the_main_job_runs_from_the_repository_root(tmp_path: Path) -> None:
    assert (REPO / "pyparbench" / "__init__.py").exists()  # the source folder is right there
    out_dir = tmp_path / "r"
    proc = subprocess.run([*_pyparbench(), "run", "--models", "mlp-512", "--batches", "1",
                           "--repeats", "1", "--no-operators", "-o", str(out_dir)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line)
               for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "ok" for r in records), \
        [r.get("error") for r in records]


def test_a_relative_results_path_is_taken_from_the_users_directory(tmp_path: Path) -> None:
    proc = subprocess.run([*_pyparbench(), "run", "--models", "mlp-512", "--batches", "1",
                           "--repeats", "1", "--no-operators", "-o", "rel"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rel" / "results.jsonl").exists()


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
