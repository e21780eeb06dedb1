"""transformers beside a torchvision built against another torch: its meta
registrations fail at import (``operator torchvision::nms does not
exist``), which takes transformers' model classes down with them; the
package's import stands in for the registrations, so torchvision (here a
stand-in that fails the same way) then imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support import IMPORTED_FROM

pytest.importorskip("transformers")

CHILD = textwrap.dedent("""
    import sys
    from pyparbench.frameworks.torch.hf_transformers import import_transformers
    transformers = import_transformers()
    import torchvision
    print(transformers.__name__, torchvision.__version__,
          type(sys.modules["torchvision._meta_registrations"]).__name__)
""")


def _broken_torchvision(root: Path) -> Path:
    """A torchvision whose C operators' registrations fail as a mismatched
    wheel's do."""
    pkg = root / "torchvision"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from torchvision import _meta_registrations\n"
                                     "__version__ = '0.0.0'\n")
    (pkg / "_meta_registrations.py").write_text(
        "raise RuntimeError('operator torchvision::nms does not exist')\n")
    return root


def test_transformers_imports_beside_a_broken_torchvision(tmp_path: Path) -> None:
    path = os.pathsep.join([str(_broken_torchvision(tmp_path)), IMPORTED_FROM])
    env = dict(os.environ, PYTHONPATH=path)
    plain = subprocess.run([sys.executable, "-P", "-c", "import torchvision"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert "torchvision::nms" in plain.stderr  # what transformers meets without it
    done = subprocess.run([sys.executable, "-P", "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["transformers", "0.0.0", "module"]
