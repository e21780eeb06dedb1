"""Fresh Python processes for measurements: how they start, where they run,
and how a failed one is described.

Every measurement whose process-wide state cannot be changed in place (the
OpenMP wait policy, thread pools fixed once created, a framework's own
runtimes) runs in a child started here: a main job's configuration, an
operator task, a framework run. A child is

* a fresh interpreter in safe-path mode (``-P``) started in a neutral
  working directory (:data:`CHILD_CWD`), so a source checkout in the user's
  directory never shadows the installed package;
* pinned to its CPUs (:func:`child_cpus`) between fork and exec, before it
  imports anything;
* given its environment (:func:`child_env`: the OpenMP wait policy for the
  native core; for a framework's child, no native core at all);
* in a session of its own, so that a timeout kills it and whatever it
  started (:func:`kill`), and ended with its parent: by the kernel when the
  parent dies (Linux's parent-death signal, so a killed main job leaves no
  measurement running), and by :func:`run` when the parent is interrupted.

A child that fails is described one way whoever started it
(:func:`crash_text`, :func:`timeout_text`), and its answer is the JSON
object on its last line (:func:`answer`).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyparbench.settings import Settings

__all__ = ["CHILD_CWD", "NO_CORE_ENV", "Finished", "answer", "child_command", "child_cpus",
           "child_env", "crash_text", "kill", "run", "signal_group", "start", "timeout_text"]

# Where children run: never the user's directory (see the module docstring).
CHILD_CWD = tempfile.gettempdir()
# Set in a framework's child: the framework's own OpenMP and oneDNN must not
# meet the native core's, so the child imports only pyparbench's pure-Python parts.
NO_CORE_ENV = "PYPARBENCH_NO_CORE"
# Lines of a failed child's stderr kept in its error text.
STDERR_LINES = 6
# prctl(2) option: the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1
# libc, loaded in the parent: nothing is loaded between fork and exec.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def child_command(module: str, python: str | None = None) -> list[str]:
    """The command line of a fresh Python (this one, or ``python``) running
    ``module`` in safe-path mode."""
    return [python or sys.executable, "-P", "-m", module]


def child_cpus(settings: Settings) -> list[int] | None:
    """The CPUs a pinned setting runs on, pool after pool (None: not pinned).

    Raises
    ------
    ValueError
        This machine cannot hold the setting (more threads than CPUs to pin).
    """
    if settings.affinity == "none":
        return None
    from pyparbench.threading.placement import place
    from pyparbench.threading.topology import topology

    placement = place(topology(), settings.affinity, settings.instances * settings.inter_op,
                      settings.intra_op, smt=settings.smt, group=settings.inter_op)
    return list(placement.cpus) if placement.pinned else None


def child_env(settings: Settings, *, core: bool = True,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child running ``settings``: with the
    native core (``core``), the OpenMP wait policy it asks for; without,
    the variable that keeps the core out (a framework's child); then ``extra``."""
    env = dict(os.environ)
    if core:
        from pyparbench.threading.omp import omp_wait_env

        env.pop(NO_CORE_ENV, None)
        env.update(omp_wait_env(settings.omp_wait))
    else:
        env[NO_CORE_ENV] = "1"
    env.update(extra or {})
    return env


def _before_exec(cpus: Sequence[int] | None) -> Callable[[], None]:
    """What the child does between fork and exec: die with its parent, and
    keep to its CPUs."""
    parent = os.getpid()

    def setup() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before the line above
                os._exit(1)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def start(module: str, *, cpus: Sequence[int] | None, env: Mapping[str, str],
          python: str | None = None, stderr: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    """Start ``module`` in a child pinned to ``cpus`` (None: not pinned), with
    pipes for its stdin and stdout (text)."""
    return subprocess.Popen(child_command(module, python), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=CHILD_CWD,
                            env=dict(env), preexec_fn=_before_exec(cpus),
                            start_new_session=True)


def kill(proc: subprocess.Popen[str]) -> None:
    """Kill a started child and whatever it started (its process group)."""
    signal_group(proc, signal.SIGKILL)


def signal_group(proc: subprocess.Popen[str], sig: int) -> None:
    """Signal a started child's process group (it is in a session of its
    own): SIGSTOP and SIGCONT pause and resume it with its threads."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


@dataclass(frozen=True)
class Finished:
    """How a child ended: its exit status (negative: the signal that ended
    it), what it printed, and whether it was killed at the time limit."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def run(module: str, request: str, *, cpus: Sequence[int] | None, env: Mapping[str, str],
        timeout: float, python: str | None = None) -> Finished:
    """Run ``module`` in a child, ``request`` on its stdin, until it ends or
    ``timeout`` seconds pass (then it is killed with what it started).

    Raises
    ------
    OSError
        The child could not be started.
    """
    proc = start(module, cpus=cpus, env=env, python=python)
    try:
        out, err = proc.communicate(request, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        out, err = proc.communicate()
        return Finished(proc.returncode, out, err, timed_out=True)
    except BaseException:  # interrupted (Ctrl-C): the child is in another session
        kill(proc)
        proc.wait()
        raise
    return Finished(proc.returncode, out, err)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def crash_text(returncode: int, stderr: str) -> str:
    """Why a child that ended badly failed: the signal that ended it or its
    exit status, then the end of what it printed."""
    how = (f"the child died of {_signal_name(-returncode)}" if returncode < 0
           else f"the child exited with status {returncode}")
    tail = "\n".join(stderr.strip().splitlines()[-STDERR_LINES:])
    return f"{how}:\n{tail}" if tail else how


def timeout_text(timeout: float) -> str:
    """Why a child that ran past its time limit failed."""
    return f"timed out after {timeout:g} s (killed)"


def answer(stdout: str) -> dict[str, Any]:
    """The JSON object on a child's last line that starts one.

    Raises
    ------
    ValueError
        The child printed no such line (saying what it printed instead).
    """
    lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise ValueError(f"the child ended without a result line; its output ends "
                         f"{stdout[-200:]!r}")
    return out
