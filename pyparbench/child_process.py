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
object on its last line (:func:`answer`). Both ways of talking to a child
end in the same two outcomes, an answer or a :class:`ChildFailed` (its
``status``, "error" or "timeout", and its error text), so that every caller
records the same status for the same event:

* a one-shot child gets one request and ends (:func:`call`);
* a paused child is kept for a conversation (:class:`Session`): it is
  resumed (SIGCONT) for each request, answers one line, and is stopped
  (SIGSTOP) again, so that an idle child's spinning OpenMP team never takes
  the CPUs of the one measuring; several can be asked at once
  (:func:`ask_all`). What else a child prints on stdout (a library's log
  line) is skipped, and kept for the error text.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal, TypeVar

from pyparbench.settings import Settings

__all__ = ["CHILD_CWD", "NO_CORE_ENV", "ChildFailed", "FailedStatus", "Finished", "Session", "answer", "ask_all",
           "call", "child_command", "child_cpus", "child_env", "crash_text", "json_line", "kill",
           "outcome", "run", "signal_group", "start", "timeout_text"]

# How a child that gave no answer failed (see ChildFailed).
FailedStatus = Literal["error", "timeout"]
# Where children run: never the user's directory (see the module docstring).
CHILD_CWD = tempfile.gettempdir()
# Set in a framework's child: the framework's own OpenMP and oneDNN must not
# meet the native core's, so the child imports only pyparbench's pure-Python parts.
NO_CORE_ENV = "PYPARBENCH_NO_CORE"
# Lines of a failed child's stderr kept in its error text.
STDERR_LINES = 6
# Characters of a failed child's stderr kept with its failure (a record's "stderr").
STDERR_CHARS = 4000
# Skipped stdout lines a session keeps for its error text.
SKIPPED_LINES = 20
# Seconds a session's child is given to exit once its stdin is closed.
END_WAIT_S = 10.0
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
    from pyparbench.threading.placement import place  # noqa: PLC0415 (framework child: no native core)
    from pyparbench.threading.topology import topology  # noqa: PLC0415 (framework child: no native core)

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
        from pyparbench.threading.omp import omp_wait_env  # noqa: PLC0415 (framework child: no native core)

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


class ChildFailed(RuntimeError):
    """A child that gave no answer, typed by how.

    Parameters
    ----------
    error
        Why, as a record's error text (also the exception's message).
    status
        "timeout": it ran past its time limit and was killed; "error": it
        could not start, died, ended without an answer, or answered with an
        error.
    stderr
        The end of what it printed on stderr ("" where unknown).
    answer
        Its answer, where it answered with an error (None otherwise).
    """

    def __init__(self, error: str, status: FailedStatus = "error", stderr: str = "",
                 answer: Mapping[str, Any] | None = None) -> None:
        super().__init__(error)
        self.error, self.status = error, status
        self.stderr = stderr[-STDERR_CHARS:]
        self.answer = dict(answer) if answer is not None else None


def outcome(done: Finished, timeout: float) -> dict[str, Any]:
    """The answer of a child that has ended (:func:`answer`).

    Raises
    ------
    ChildFailed
        "timeout" if it was killed at its ``timeout``; "error" if it exited
        badly (:func:`crash_text`), printed no answer line, or answered with
        an ``error``.
    """
    if done.timed_out:
        raise ChildFailed(timeout_text(timeout), "timeout", done.stderr)
    if done.returncode != 0:
        raise ChildFailed(crash_text(done.returncode, done.stderr), "error", done.stderr)
    try:
        got = answer(done.stdout)
    except ValueError as e:
        raise ChildFailed(str(e), "error", done.stderr) from None
    if "error" in got:
        raise ChildFailed(str(got["error"]), "error", done.stderr, got)
    return got


def call(module: str, request: Mapping[str, Any], *, cpus: Sequence[int] | None,
         env: Mapping[str, str], timeout: float, python: str | None = None) -> dict[str, Any]:
    """A one-shot child: run ``module`` (as :func:`run`) with ``request`` as
    one JSON line on its stdin, and return its answer (:func:`outcome`).

    Raises
    ------
    ChildFailed
        It could not be started ("error"), or as :func:`outcome` says.
    """
    try:
        done = run(module, json.dumps(request) + "\n", cpus=cpus, env=env, timeout=timeout,
                   python=python)
    except OSError as e:
        raise ChildFailed(f"cannot start the child: {e}") from e
    return outcome(done, timeout)


def json_line(line: str) -> dict[str, Any] | None:
    """The JSON object a line holds, None if it holds none (the answer lines
    of a :class:`Session`, by default)."""
    if not line.startswith("{"):
        return None
    try:
        got = json.loads(line)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


Request = Mapping[str, Any] | str


class Session:
    """A conversation with a started child: a request line on its stdin,
    answered by one answer line on its stdout.

    ``parse`` says which stdout lines are answers (default: JSON objects,
    :func:`json_line`); every other line is skipped and its last lines kept
    for the error text. With ``pause``, the child runs only while it is
    asked (SIGCONT before the request, SIGSTOP once it has answered).
    ``name`` starts every error text (none: the text alone). Its stderr
    goes to a file, which a child's logs can never fill and block.

    Raises
    ------
    ChildFailed
        From :meth:`ask` and :meth:`finish`: the child died, ended without
        an answer, or answered with an ``error`` ("error"), or gave no answer
        in time and was killed ("timeout").
    """

    def __init__(self, proc: subprocess.Popen[str], err: IO[bytes], *, name: str = "",
                 pause: bool = True,
                 parse: Callable[[str], dict[str, Any] | None] = json_line) -> None:
        assert proc.stdout is not None
        self.proc, self.name, self.pause = proc, name, pause
        self._err, self._parse = err, parse
        # Read unbuffered from the descriptor: select() on a buffered reader
        # misses lines already in its buffer (a log line and the answer
        # printed together would hang until the timeout).
        self._fd = proc.stdout.fileno()
        self._buf = b""
        self._skipped: list[str] = []
        self._ended = False

    @classmethod
    def start(cls, module: str, *, cpus: Sequence[int] | None, env: Mapping[str, str],
              python: str | None = None, name: str = "", pause: bool = True,
              parse: Callable[[str], dict[str, Any] | None] = json_line) -> Session:
        """Start ``module`` in a child (:func:`start`) to talk to.

        Raises
        ------
        ChildFailed
            The child could not be started ("error", as :func:`call` says it).
        """
        err = tempfile.TemporaryFile()
        try:
            proc = start(module, cpus=cpus, env=env, python=python, stderr=err)
        except OSError as e:
            err.close()
            text = f"cannot start the child: {e}"
            raise ChildFailed(f"{name}: {text}" if name else text) from e
        return cls(proc, err, name=name, pause=pause, parse=parse)

    def send(self, request: Request) -> None:
        """Write ``request`` (a JSON object, or a line as it is) without
        waiting for an answer; a child that has died is said to have when
        its answer is read."""
        assert self.proc.stdin is not None
        line = request if isinstance(request, str) else json.dumps(request)
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except OSError:  # BrokenPipeError: it died
            pass

    def ask(self, request: Request | None, timeout: float) -> dict[str, Any]:
        """Send ``request`` (None: nothing, only wait for the next answer)
        and return the child's answer, within ``timeout`` seconds."""
        return ask_all({0: self}, {0: request}, timeout)[0]

    def finish(self, timeout: float) -> dict[str, Any]:
        """Close the child's stdin, let it end within ``timeout`` seconds
        (killed after that), and return its last word: the last answer
        line, as a one-shot child's (:func:`outcome`). Ends the session."""
        self._signal(signal.SIGCONT)
        self._close_stdin()
        deadline = time.monotonic() + timeout
        timed_out = False
        while self._read(max(0.0, deadline - time.monotonic())) is not False:
            if time.monotonic() >= deadline:
                timed_out = True
                break
        if not timed_out:
            try:
                self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            kill(self.proc)
        self.proc.wait()
        out = "\n".join(self._skipped) + "\n" + self._buf.decode(errors="replace")
        stderr = self._stderr()
        self.end()
        try:
            return outcome(Finished(self.proc.returncode, out, stderr, timed_out), timeout)
        except ChildFailed as e:
            raise self._failed(e.error, e.status, e.answer, stderr) from None

    def end(self) -> None:
        """End the child if it has not ended (its stdin closed, killed if
        it is still there after a few seconds) and close its pipes; again,
        nothing."""
        if self._ended:
            return
        self._signal(signal.SIGCONT)
        self._ended = True
        try:
            self._close_stdin()
            self.proc.wait(timeout=END_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            kill(self.proc)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()

    def kill(self) -> None:
        """Kill the child and whatever it started."""
        kill(self.proc)

    # -- inside

    def _signal(self, sig: int) -> None:
        if self.pause and not self._ended:
            signal_group(self.proc, sig)

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:  # the buffered rest could not be written: it died
                pass

    def _take(self) -> dict[str, Any] | None:
        """The next answer in what was read, None if none is there yet."""
        while (nl := self._buf.find(b"\n")) >= 0:
            line = self._buf[:nl].decode(errors="replace")
            self._buf = self._buf[nl + 1:]
            got = self._parse(line)
            if got is not None:
                return got
            self._skipped = [*self._skipped, line][-SKIPPED_LINES:]
        return None

    def _read(self, timeout: float) -> bool | None:
        """Read what the child printed: True if something came, False at
        the end of its output, None if nothing came within ``timeout``."""
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(self._fd, 65536)
        if not chunk:
            if self._buf and not self._buf.endswith(b"\n"):
                self._buf += b"\n"  # its last line, cut short by its end
            return False
        self._buf += chunk
        return True

    def _stderr(self) -> str:
        """The end of what the child printed on stderr."""
        size = self._err.seek(0, os.SEEK_END)
        self._err.seek(max(0, size - 16 * STDERR_CHARS))
        return self._err.read().decode(errors="replace")

    def _failed(self, error: str, status: FailedStatus = "error",
                answer: Mapping[str, Any] | None = None,
                stderr: str | None = None) -> ChildFailed:
        if stderr is None:
            stderr = "" if self._ended else self._stderr()
        return ChildFailed(f"{self.name}: {error}" if self.name else error, status, stderr,
                           answer)

    def _died(self) -> ChildFailed:
        """Why a child whose output ended gave no answer."""
        try:
            self.proc.wait(timeout=END_WAIT_S)
        except subprocess.TimeoutExpired:  # it closed its stdout but runs on
            kill(self.proc)
            self.proc.wait()
        if self.proc.returncode != 0:
            return self._failed(crash_text(self.proc.returncode, self._stderr()))
        printed = "\n".join(self._skipped)
        return self._failed(f"the child ended without an answer; its output ends "
                            f"{printed[-200:]!r}")


K = TypeVar("K", bound=Hashable)


def ask_all(sessions: Mapping[K, Session], requests: Mapping[K, Request | None],
            timeout: float) -> dict[K, dict[str, Any]]:
    """Send each session of ``requests``' keys its request (None: nothing),
    all at once, and return their answers, all within ``timeout`` seconds.
    The children run together until each has answered; on a timeout those
    that have not are killed.

    Raises
    ------
    ChildFailed
        The first failure (see :class:`Session`); every child asked is
        stopped again all the same.
    """
    chosen = {k: sessions[k] for k in requests}
    answers: dict[K, dict[str, Any]] = {}
    try:
        for k, s in chosen.items():
            s._signal(signal.SIGCONT)
            request = requests[k]
            if request is not None:
                s.send(request)
        deadline = time.monotonic() + timeout
        while True:
            for k, s in chosen.items():
                if k not in answers and (got := s._take()) is not None:
                    answers[k] = got
            waiting = {s._fd: (k, s) for k, s in chosen.items() if k not in answers}
            if not waiting:
                break
            ready, _, _ = select.select(list(waiting), [], [],
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                for _, s in waiting.values():
                    s.kill()
                _, first = next(iter(waiting.values()))
                raise first._failed(timeout_text(timeout), "timeout")
            for fd in ready:
                k, s = waiting[fd]
                if s._read(0.0) is False:  # its output ended: an answer left in it, or none
                    got = s._take()
                    if got is None:
                        raise s._died()
                    answers[k] = got
    finally:
        for s in chosen.values():
            s._signal(signal.SIGSTOP)
    for k, got in answers.items():
        if "error" in got:
            raise chosen[k]._failed(str(got["error"]), answer=got)
    return answers
