"""The ``pyparbench`` command: one module per subcommand, each with
``add_command(subparsers)`` setting ``func`` to its handler."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from pyparbench._core import PrecisionUnavailable

__all__ = ["COMMANDS", "build_parser", "main"]

# Subcommands in the order --help lists them (module pyparbench.cli.<name>).
COMMANDS = ("run", "peak", "models", "trace", "overhead", "generate", "recommend", "topology",
            "info", "compare", "merge", "report")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pyparbench",
        description="Measure deep-learning operators and graphs under CPU parallelism knobs.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"pyparbench.cli.{name}").add_command(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # What a command raises for bad input (ValueError naming the value, unless
    # the command names narrower types): said like argparse says it, with no
    # traceback. Anything else is a bug and keeps its traceback.
    user_errors: tuple[type[Exception], ...] = getattr(args, "user_errors", (ValueError,))
    try:
        return int(args.func(args))
    except user_errors as e:
        parser.exit(2, f"pyparbench {args.command}: error: {e}\n")
    except PrecisionUnavailable as e:
        # This machine's oneDNN has no kernel for the precision asked: a fact
        # about the machine, not a bug; status 1 as for a file.
        parser.exit(1, f"pyparbench {args.command}: error: {e}\n")
    except OSError as e:
        # A file that cannot be read or written (a full disk while results
        # are appended): one line naming it, status 1.
        parser.exit(1, f"pyparbench {args.command}: error: {e}\n")
