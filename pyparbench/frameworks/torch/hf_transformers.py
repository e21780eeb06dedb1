"""Importing Hugging Face ``transformers`` beside a torchvision that does
not match the installed torch.

``transformers`` imports torchvision when it is installed; a torchvision
wheel built against another torch fails in its C operators' meta
registrations at import, which takes ``transformers`` down with it. No
language model calls those operators, so where torchvision's import fails
a module standing in for its registrations is enough.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any

__all__ = ["import_transformers"]

_META = "torchvision._meta_registrations"


def import_transformers() -> Any:
    """The ``transformers`` module (ImportError where it is not installed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _META not in sys.modules:
            try:
                importlib.import_module("torchvision")  # only to see whether it loads
            except ModuleNotFoundError:
                pass  # not installed: transformers does without it
            except Exception:
                # Its meta registrations failed: drop the half-imported
                # modules and import again without them.
                for name in [m for m in sys.modules if m.startswith("torchvision")]:
                    del sys.modules[name]
                sys.modules[_META] = types.ModuleType(_META)
        import transformers  # noqa: PLC0415 (heavy and optional)

        return transformers
