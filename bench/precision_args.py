"""The command line the whole-model precision benches share
(bench/bf16_models.py, bench/int8_models.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyparbench import models
from pyparbench.cli._common import positive_int


def model_bench_parser(description: str, default_models: Sequence[str]) -> argparse.ArgumentParser:
    """--models, --threads, --batch, --rounds (interleaved per precision),
    --repeats (per round) and --json."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", choices=list(models.MODELS),
                    default=list(default_models))
    ap.add_argument("--threads", nargs="+", type=positive_int("--threads"), default=[1, 2])
    ap.add_argument("--batch", type=positive_int("--batch"), default=1)
    ap.add_argument("--rounds", type=positive_int("--rounds"), default=3,
                    help="interleaved rounds per precision (the best is kept)")
    ap.add_argument("--repeats", type=positive_int("--repeats"), default=3,
                    help="timed runs per round (its best is the round's)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    return ap
