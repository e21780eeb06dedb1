"""What the fuzz tests share: hypothesis profiles, and a tally of the inputs
tried and of the distinct errors they reached, printed at the end of the run.

Profiles (``pytest --hypothesis-profile NAME``; ``PPB_FUZZ_PROFILE`` sets
the default):

``ci``
    the default: a few dozen inputs per test, minutes for the whole suite.
``long``
    20,000 inputs per test (``PPB_FUZZ_EXAMPLES`` sets another count): about
    20 minutes on two cores (3000 per test: 3 minutes, some 78,000 inputs).

Every fuzzed call goes through :func:`attempt`: it returns the call's result,
or None when the call raised one of the clear Python errors the API
promises (ValueError, TypeError, IndexError and their subclasses, such as
``ResultFileError``; a test may allow more); any other exception fails the
test, and a crash fails the whole run.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

T = TypeVar("T")

_COMMON: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                              HealthCheck.filter_too_much],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=40, **_COMMON)
settings.register_profile("long", max_examples=int(os.environ.get("PPB_FUZZ_EXAMPLES", "20000")),
                          **_COMMON)
settings.load_profile(os.environ.get("PPB_FUZZ_PROFILE", "ci"))

# The clear errors of the Python-facing API.
CLEAR = (ValueError, TypeError, IndexError)


def normalise(message: str) -> str:
    """An error message with its values blanked (numbers, tuples of them,
    quoted text, file paths), so that one check reached with different
    values counts once."""
    text = message.splitlines()[0] if message else ""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"(?:(?<=\s)|^)/\S*", "PATH", text)
    number = r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])"
    text = re.sub(number, "N", text)
    text = re.sub(r"[(\[]N(?:, N)*,?[)\]]", "N", text)
    return text[:160]


@dataclass
class Tally:
    """Inputs tried and errors reached, per fuzz target."""

    tried: Counter[str] = field(default_factory=Counter)
    ok: Counter[str] = field(default_factory=Counter)
    errors: dict[str, Counter[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, target: str, error: BaseException | None) -> None:
        with self.lock:
            self.tried[target] += 1
            if error is None:
                self.ok[target] += 1
            else:
                key = f"{type(error).__name__}: {normalise(str(error))}"
                self.errors.setdefault(target, Counter())[key] += 1

    def report(self) -> dict[str, Any]:
        distinct = {e for c in self.errors.values() for e in c}
        return {
            "profile": settings.get_current_profile_name(),
            "inputs": sum(self.tried.values()),
            "accepted": sum(self.ok.values()),
            "distinct_errors": len(distinct),
            "targets": {t: {"inputs": self.tried[t], "accepted": self.ok[t],
                            "errors": dict(self.errors.get(t, Counter()).most_common())}
                        for t in sorted(self.tried)},
        }

    def write(self, path: Path) -> dict[str, Any]:
        rep = self.report()
        path.write_text(json.dumps(rep, indent=1, ensure_ascii=False) + "\n")
        return rep


TALLY = Tally()
# Other figures of a hardening run (resident memory of the leak tests, kill
# trials), printed with the tally.
FIGURES: dict[str, str] = {}


def attempt(target: str, call: Callable[[], T], clear: tuple[type[BaseException], ...] = CLEAR
            ) -> T | None:
    """call(), counted under ``target``: its result, or None when it raised
    one of the ``clear`` errors (recorded with its message)."""
    try:
        result = call()
    except clear as e:
        assert str(e).strip(), f"{type(e).__name__} with no message"
        TALLY.record(target, e)
        return None
    TALLY.record(target, None)
    return result


def report_path() -> Path:
    """Where the run's tally is written (``PPB_FUZZ_REPORT`` or a temp file)."""
    env = os.environ.get("PPB_FUZZ_REPORT")
    if env:
        return Path(env)
    import tempfile

    return Path(tempfile.gettempdir()) / "pyparbench-fuzz-report.json"
