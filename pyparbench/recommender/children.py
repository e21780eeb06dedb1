"""Measuring children, one per OpenMP wait policy, taking turns.

libgomp reads its wait policy once, when it starts, so settings that
differ in ``omp_wait`` are measured in processes of their own. Starting a
process per measurement costs seconds (Python, pyparbench, the model
built and compiled), so each policy gets one child for the whole
measurement, and the children take turns, round by round: the policies
are measured interleaved, so that a slow spell of a shared machine hits
them alike.

While one child measures, the others are stopped (SIGSTOP): under the
active policy an idle child's OpenMP threads spin for minutes, and would
take the CPUs from the child measuring.

A child runs ``python -m pyparbench.recommender.children`` (a
:class:`pyparbench.child_process.Session`: a fresh interpreter with the
policy's environment, ended with its parent) and answers one JSON line per
JSON request line:

* ``{"do": "gaps", "threads": [t, ...], "gaps": [ns, ...]}`` ->
  ``{"regions": {"t": [median region ns at each gap]}}``
  (:func:`pyparbench.threading.omp.omp_gap`);
* ``{"do": "load", "model": name, "runs": [{"settings": {...}, "batch": b}, ...]}``
  -> ``{"estimates": [ns of one warm run of each]}``: each setting's graphs
  built (the model at ``b``, one copy per instance) and compiled;
* ``{"do": "round", "repeats": [n, ...]}`` -> ``{"ns": [median ns of each]}``:
  each loaded setting run ``n`` times after an untimed run;
* ``{"do": "env"}`` -> ``{"env": {...}}``: the OpenMP variables the child
  started with (what its policy is);

each answer with ``cpu_s``, the CPU time the child used for it, or
``{"error": "..."}``. The parent reads each answer once, with the bounds a
result file's values get, as a :class:`PolicyAnswer`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ChildFailed is re-exported: it is this module's documented failure.
from pyparbench.child_process import ChildFailed, Session, ask_all, child_env
from pyparbench.models import build
from pyparbench.recommender.costmodel import wait_key
from pyparbench.recommender.side_by_side import ROUND_WARMUP, runner
from pyparbench.resultfiles.values import (
    ResultFileError,
    duration,
    durations,
    is_number,
    show,
)
from pyparbench.settings import OmpWait, Settings
from pyparbench.threading.omp import omp_fork_join, omp_gap

__all__ = ["ChildFailed", "PolicyAnswer", "PolicyChildren"]

MODULE = "pyparbench.recommender.children"
# A child that answers nothing for this long is taken for hung.
ANSWER_TIMEOUT_S = 300.0
# The repeats of one gap: about this long, between these bounds.
GAP_WINDOW_NS = 40e6
GAP_REPEATS = (20, 400)


@dataclass(frozen=True)
class PolicyAnswer:
    """A measuring child's answer to one request: the CPU seconds it used,
    and what the request asked for (the others empty): ``regions`` (per
    team size, the median region ns after each gap), ``estimates`` (ns of
    one warm run of each loaded setting), ``ns`` (each loaded setting's
    median in a round), ``env`` (the OpenMP variables it started with)."""

    cpu_s: float = 0.0
    regions: dict[str, tuple[float, ...]] = field(default_factory=dict)
    estimates: tuple[float, ...] = ()
    ns: tuple[float, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, where: str, raw: Mapping[str, Any]) -> PolicyAnswer:
        """An answer line, as JSON.

        Raises
        ------
        ResultFileError
            A field out of its bounds (named).
        """
        regions = raw.get("regions", {})
        env = raw.get("env", {})
        if not isinstance(regions, dict):
            raise ResultFileError(where, f"regions must be an object, got {show(regions)}")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ResultFileError(where, f"env must be an object of strings, got {show(env)}")
        return cls(duration(where, raw.get("cpu_s", 0.0), "cpu_s", positive=False, scale=1.0),
                   {str(t): durations(where, v, f"regions[{t}]", scale=1.0)
                    for t, v in regions.items()},
                   durations(where, raw.get("estimates", []), "estimates", scale=1.0),
                   durations(where, raw.get("ns", []), "ns", scale=1.0), dict(env))


def _cpu_s(answer: Mapping[str, Any] | None) -> float:
    """The CPU seconds an error answer says its child used (0 if none)."""
    v: Any = answer.get("cpu_s") if answer is not None else None
    return max(0.0, float(v)) if is_number(v) else 0.0


class PolicyChildren:
    """One measuring child per wait policy (see the module docstring), each
    a :class:`~pyparbench.child_process.Session`; a context manager that
    ends them all.

    Raises
    ------
    ChildFailed
        A child could not be started; from :meth:`ask`: the child died (with
        its error text), gave no answer within ``timeout_s``, or answered
        with an error.
    """

    def __init__(self, policies: Sequence[OmpWait], *, timeout_s: float = ANSWER_TIMEOUT_S
                 ) -> None:
        self.policies = list(dict.fromkeys(policies))
        self.timeout_s = timeout_s
        self.cpu_s = 0.0  # the children's CPU time, for the foreign-load figure
        self._sessions: dict[str, Session] = {}

    def __enter__(self) -> PolicyChildren:
        try:
            for p in self.policies:
                k = wait_key(p)
                self._sessions[k] = Session.start(
                    MODULE, cpus=None, env=child_env(Settings(omp_wait=p)),
                    name=f"the measuring child of omp_wait={k}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ask(self, policy: OmpWait, request: Mapping[str, Any]) -> PolicyAnswer:
        """Send ``request`` to ``policy``'s child and return its answer; the
        child runs only meanwhile."""
        return self.ask_all({wait_key(policy): request})[wait_key(policy)]

    def ask_all(self, requests: Mapping[str, Mapping[str, Any]]) -> dict[str, PolicyAnswer]:
        """Send each child (by policy name: ``"default"``, ``"passive"``,
        ...) its request, all at once, and return their answers: for work
        that is neither timed nor sets up what is (the imports; not loading
        a model: see :func:`~pyparbench.recommender.waitpolicy.measure_variants`)."""
        try:
            raw = ask_all(self._sessions, requests, self.timeout_s)
        except ChildFailed as e:
            self.cpu_s += _cpu_s(e.answer)  # it worked before it failed
            raise
        answers = {}
        for k, got in raw.items():
            try:
                answers[k] = PolicyAnswer.parse(f"the answer of omp_wait={k}", got)
            except ResultFileError as e:
                raise ChildFailed(str(e), answer=got) from None
            self.cpu_s += answers[k].cpu_s
        return answers

    def close(self) -> None:
        """End every child: each is let go on, its stdin closed, and killed
        if it has not ended within a few seconds."""
        for session in self._sessions.values():
            session.end()
        self._sessions.clear()


# ------------------------------------------------------------------ the child


def _gaps(threads: Sequence[int], gaps: Sequence[float]) -> dict[str, list[float]]:
    """Each team size's median region ns after each gap."""
    out: dict[str, list[float]] = {}
    for t in threads:
        omp_fork_join(t, repeats=200, warmup=50)  # the team made and warm
        medians = []
        for g in gaps:
            repeats = max(GAP_REPEATS[0], min(GAP_REPEATS[1], int(GAP_WINDOW_NS / max(g, 5e4))))
            region, _ = omp_gap(t, g, repeats=repeats, warmup=5)
            medians.append(float(statistics.median(region)))
        out[str(t)] = medians
    return out


def _load(model: str, runs: Sequence[Mapping[str, Any]]
          ) -> list[tuple[Settings, Callable[[Settings, int, int], list[float]]]]:
    """Each run's setting and the runner of its graphs (one per instance)."""
    out = []
    for r in runs:
        s = Settings.from_dict(dict(r["settings"]))
        out.append((s, runner([build(model, int(r["batch"])) for _ in range(s.instances)])))
    return out


def _main() -> int:
    loaded: list[tuple[Settings, Callable[[Settings, int, int], list[float]]]] = []
    for line in sys.stdin:
        cpu = time.process_time()
        try:
            req = json.loads(line)
            if req["do"] == "gaps":
                answer: dict[str, Any] = {"regions": _gaps(req["threads"], req["gaps"])}
            elif req["do"] == "load":
                loaded = _load(str(req["model"]), req["runs"])
                answer = {"estimates": [min(run(s, 1, 1)) for s, run in loaded]}
            elif req["do"] == "env":
                answer = {"env": {k: v for k, v in os.environ.items()
                                  if k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}}
            elif req["do"] == "round":
                answer = {"ns": [statistics.median(run(s, int(n), ROUND_WARMUP))
                                 for (s, run), n in zip(loaded, req["repeats"], strict=True)]}
            else:
                answer = {"error": f"unknown request {req['do']!r}"}
        except Exception as e:  # the parent says which child failed, and how
            answer = {"error": f"{type(e).__name__}: {e}"}
        answer["cpu_s"] = time.process_time() - cpu
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
