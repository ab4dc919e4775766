"""Child processes that die with their parent, and finding the leftovers of one that did not.

`palimpsest serve` starts the embedded Redis and the workers. On Linux each asks the kernel for a
signal when its parent dies (`prctl(PR_SET_PDEATHSIG)`, through ctypes): a `kill -9` of `serve`
sends SIGTERM to its Redis (which saves and exits) and its workers (which finish or time out their
job and exit). What still outlives it is found at the next start from the pid files it keeps in
`<data directory>/run/`, checked against the process's command line and data directory so that a
recycled pid is never signalled, and stopped.

The kernel sends the signal when the *thread* that started the child ends: the supervisor starts
children from its main thread only.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: int = signal.SIGTERM, parent_pid: int | None = None) -> bool:
    """Ask for `sig` when this process's parent dies (Linux; elsewhere a no-op returning False).
    With `parent_pid`, a parent gone already (the race before the call) sends `sig` at once."""
    prctl = _prctl()
    if prctl is None:
        return False
    prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True


def preexec_die_with_parent(sig: int = signal.SIGTERM):
    """A `preexec_fn` for Popen doing `die_with_parent` in the child before it execs (the library
    function is looked up here, in the parent, so the child runs no more than the call)."""
    prctl = _prctl()
    parent = os.getpid()
    if prctl is None:
        return None

    def preexec():
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


# ----------------------------------------------------------------------------- pid files


def pid_alive(pid: int) -> bool:
    """True for a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def env_of(pid: int, name: str) -> str | None:
    try:
        for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            k, _, v = item.partition(b"=")
            if k.decode(errors="replace") == name:
                return v.decode(errors="replace")
    except OSError:
        return None
    return None


def stop_pid(pid: int, grace: float = 10.0, *, twice: bool = False) -> str:
    """SIGTERM (twice for an RQ worker: its second one is a cold shutdown), then SIGKILL after
    `grace` seconds; returns how it ended."""
    if not pid_alive(pid):
        return "gone"
    try:
        os.kill(pid, signal.SIGTERM)
        if twice:
            time.sleep(1.1)  # RQ ignores a second signal within a second of the first
            if pid_alive(pid):
                os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return "stopped"
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "stopped"
    while pid_alive(pid) and time.monotonic() < deadline + 5:
        time.sleep(0.05)
    return "killed"


class RunDir:
    """`<home>/run/`: serve's lock and the pids of the children it started."""

    def __init__(self, home: Path | str):
        self.home = Path(home)
        self.dir = self.home / "run"
        self.children = self.dir / "children.json"
        self._lock = None

    def lock(self) -> int | None:
        """Hold the data directory's serve lock for this process's life; returns the pid of the
        `serve` that holds it already, or None when this process has it now."""
        self.dir.mkdir(parents=True, exist_ok=True)
        f = open(self.dir / "serve.lock", "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            try:
                return int(f.read().strip() or 0) or -1
            except ValueError:
                return -1
            finally:
                f.close()
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._lock = f
        return None

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def read(self) -> dict:
        try:
            return json.loads(self.children.read_text())
        except (OSError, ValueError):
            return {}

    def write(self, *, workers: list[int], redis: int | None) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.children.with_suffix(".tmp")
        tmp.write_text(json.dumps({"serve": os.getpid(), "workers": workers, "redis": redis}))
        tmp.replace(self.children)

    def leftover_workers(self) -> list[int]:
        """Pids in the file that still run `server.jobs.worker` on this data directory."""
        out = []
        for pid in self.read().get("workers", []):
            if (
                isinstance(pid, int)
                and pid != os.getpid()
                and pid_alive(pid)
                and "server.jobs.worker" in cmdline(pid)
                and env_of(pid, "PALIMPSEST_HOME") in (str(self.home), None)
            ):
                out.append(pid)
        return out
