"""A one-node Slurm cluster on this machine, for the tests that run the
README's job array for real: munged, slurmctld and slurmd started as child
processes (no systemd) with a generated slurm.conf describing this machine,
their state, spool, sockets and logs in one scratch folder, and stopped by
their process ids.

:func:`start_cluster` raises :class:`SlurmUnavailable` with the reason
where Slurm cannot start here (not root, packages missing, a daemon that
does not come up); the tests skip with it, or fail in CI.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SlurmCluster", "SlurmUnavailable", "start_cluster"]

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
# The node must be idle within this long after the daemons start.
START_TIMEOUT_S = 60.0
# A daemon that ignores SIGTERM this long is killed.
STOP_TIMEOUT_S = 15.0
# slurmctld keeps a finished job's record this long (scontrol show job reads it).
MIN_JOB_AGE_S = 600


class SlurmUnavailable(RuntimeError):
    """Slurm cannot start on this machine (the message says why)."""


def _which(name: str) -> str | None:
    # The daemons live in /usr/sbin, which a non-login PATH may lack.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class SlurmCluster:
    """The started daemons and what a client needs to reach them."""

    root: Path
    conf: Path
    node: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with ``SLURM_CONF`` pointing at the cluster."""
        path = os.environ.get("PATH", "")
        return {**os.environ, "SLURM_CONF": str(self.conf),
                "PATH": f"{path}:/usr/sbin:/sbin" if path else "/usr/bin:/usr/sbin"}

    def client(self, *args: str, timeout: float = 30.0) -> str:
        """Run a Slurm client command against this cluster; its stdout.

        Raises
        ------
        RuntimeError
            The command failed (with its stderr).
        """
        done = subprocess.run(list(args), capture_output=True, text=True, env=self.env,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: "
                               f"{done.stderr.strip()}")
        return done.stdout

    def job_state(self, job: str) -> dict[str, str]:
        """``scontrol show job``'s fields (of the first task of an array)."""
        text = self.client("scontrol", "-o", "show", "job", job)
        first = text.strip().splitlines()[0] if text.strip() else ""
        return dict(re.findall(r"(\w+)=(\S*)", first))

    def tasks(self, job: str) -> list[dict[str, str]]:
        """Every task of an array job (or the one job), as ``scontrol -o show job`` gives them."""
        text = self.client("scontrol", "-o", "show", "job", job)
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in text.strip().splitlines()]

    def wait(self, jobs: Sequence[str], timeout: float) -> None:
        """Until none of ``jobs`` is queued or running.

        Raises
        ------
        TimeoutError
            Still in the queue after ``timeout`` seconds (saying their states).
        """
        deadline = time.monotonic() + timeout
        while True:
            out = self.client("squeue", "-h", "-o", "%i %T %r", "-j", ",".join(jobs))
            if not out.strip():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm jobs still queued after {timeout:.0f} s: "
                                   f"{out.strip()!r}; slurmd log: "
                                   f"{_tail(self.root / 'slurmd.log')}")
            time.sleep(1.0)

    def stop(self) -> None:
        """Cancel what is left in the queue, then stop the daemons by their
        process ids (SIGTERM, then SIGKILL after a while), the last started first."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            try:
                self.client("scancel", "--full", "-u", str(os.getuid()))
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while self.client("squeue", "-h").strip() and time.monotonic() < deadline:
                    time.sleep(0.5)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass  # stopping anyway
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # Job steps end with their daemon; what is left after a while is killed by pid.
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not self.running():
            shutil.rmtree(self.root, ignore_errors=True)  # state, spool, sockets, logs

    def running(self) -> list[str]:
        """The started daemons still alive, and any other process of this
        cluster (a job step, a job's children): those whose environment
        names this cluster's slurm.conf."""
        return ([n for n, p in self.procs.items() if p.poll() is None]
                + [f"pid {pid}" for pid in self.leftovers()])

    def leftovers(self) -> list[int]:
        """Live processes, other than this one, started with ``SLURM_CONF``
        pointing at this cluster (a zombie has no environment left)."""
        mark = f"SLURM_CONF={self.conf}".encode()
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue  # gone, or not ours to read
            if mark in env.split(b"\0"):
                out.append(int(entry.name))
        return out


def _node_line(slurmd: str) -> tuple[str, str]:
    """(node name, NodeName line) from ``slurmd -C``, its memory lowered a
    little (slurmd refuses a node with less memory than configured)."""
    done = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=30)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("NodeName=")), None)
    if done.returncode != 0 or line is None:
        raise SlurmUnavailable(f"slurmd -C failed: {done.stderr.strip() or done.stdout.strip()}")
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    mem = int(fields.get("RealMemory", "1000"))
    fields["RealMemory"] = str(max(100, int(mem * 0.9)))
    fields.pop("UpTime", None)
    return fields["NodeName"], " ".join(f"{k}={v}" for k, v in fields.items())


def _conf(root: Path, node: str, node_line: str) -> str:
    host = socket.gethostname()
    return "\n".join([
        "ClusterName=ppbtest",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={root / 'munge.socket'}",
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd.log'}",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        f"MinJobAge={MIN_JOB_AGE_S}",
        "MailProg=/bin/true",
        node_line,
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _start(name: str, argv: list[str], root: Path, env: Mapping[str, str]
           ) -> subprocess.Popen[bytes]:
    out = (root / f"{name}.out").open("wb")
    try:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                stdin=subprocess.DEVNULL, cwd=root)
    finally:
        out.close()


def start_cluster() -> SlurmCluster:
    """Start munged, slurmctld and slurmd on this machine, and wait until
    the node is idle. The caller stops them (:meth:`SlurmCluster.stop`),
    whatever happens.

    Raises
    ------
    SlurmUnavailable
        Why Slurm cannot run here (the daemons started so far are stopped).
    """
    if not sys.platform.startswith("linux"):
        raise SlurmUnavailable(f"Slurm runs on Linux, this is {sys.platform}")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the Slurm daemons are started as root, and this is uid "
                               f"{os.geteuid()}")
    paths = {n: _which(n) for n in (*DAEMONS, *CLIENTS)}
    missing = [n for n, p in paths.items() if p is None]
    if missing:
        raise SlurmUnavailable(f"not installed: {', '.join(missing)} (Debian: apt-get install "
                               "slurmctld slurmd slurm-client munge)")
    # Short: the munge socket's path must fit a Unix socket address (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="ppb-slurm-"))
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node, node_line = _node_line(str(paths["slurmd"]))
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, node, node_line))
    cluster = SlurmCluster(root, conf, node)
    env = cluster.env
    try:
        cluster.procs["munged"] = _start("munged", [
            str(paths["munged"]), "-F", "-f", f"--socket={root / 'munge.socket'}",
            f"--key-file={key}", f"--log-file={root / 'munged.log'}",
            f"--pid-file={root / 'munged.pid'}", f"--seed-file={root / 'munged.seed'}"],
            root, env)
        _until(lambda: (root / "munge.socket").exists(), "munged", cluster, root / "munged.log")
        cluster.procs["slurmctld"] = _start("slurmctld", [str(paths["slurmctld"]), "-D", "-i"],
                                            root, env)
        cluster.procs["slurmd"] = _start("slurmd", [str(paths["slurmd"]), "-D"], root, env)

        def idle() -> bool:
            done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                  env=env, timeout=10)
            return done.returncode == 0 and done.stdout.strip() == "idle"

        _until(idle, "slurmctld and slurmd (node idle)", cluster, root / "slurmd.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _until(ready: Callable[[], bool], what: str, cluster: SlurmCluster, log: Path) -> None:
    """Poll ``ready()`` until true; SlurmUnavailable when a daemon died or
    ``START_TIMEOUT_S`` passed (with the end of ``log``)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not ready in {START_TIMEOUT_S:.0f} s"
            raise SlurmUnavailable(f"{what}: {why}; log: {_tail(log)}; "
                                   f"{_tail(cluster.root / (dead[0] + '.out')) if dead else ''}")
        time.sleep(0.5)
