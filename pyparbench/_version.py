"""The package's version: one source, the installed distribution's (pyproject.toml).

A module of its own, so that what needs the version (the machine
fingerprint, a framework's child) never imports the package root, which
re-exports the whole API."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("pyparbench")
except PackageNotFoundError:  # a build used in place, not installed
    __version__ = "0+unknown"
