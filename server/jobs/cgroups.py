"""A cgroup per run: the kernel's limits and accounting of one sandboxed run, outside its reach.

Where the worker runs as root and the host mounts the cgroup v1 hierarchies `memory`, `pids` and
`cpuacct` (writable by root), each run gets a cgroup of its own in each, below the worker's own:
its memory (every process together, page cache and its files in tmpfs included), its processes and
threads, and the CPU time of all of them, counted by the kernel. Where the `cpu` hierarchy is
mounted too, the run is one cgroup there as well: the scheduler weighs the whole run as one task
(a fork bomb's hundred busy processes get the CPU share of one, and never starve a run beside
it). The run's first process joins them before it starts
bwrap, so nothing the system starts leaves them; the worker reads the counters after the run and
kills what is left in the cgroup. The system cannot stop, trace or signal the counting: it is the
kernel's.

Where there are none (no root, no v1 hierarchies), `RunCgroup.create` answers None and the sandbox
keeps its weaker limits (rlimits per process, a uid per run for the process limit; the
accounting of the run's first process); docs/blind-runs.md says which.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpuacct")  # required
OPTIONAL = ("cpu",)  # used where mounted (apart from cpuacct or mounted with it)


class CgroupFailed(OSError):
    """The host has the hierarchies but a run's cgroup could not be made: the server's failure."""


def _own_path(controller: str) -> str:
    """The worker's own cgroup in a v1 hierarchy ("/" when at its root)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _n, names, path = line.split(":", 2)
            if controller in names.split(","):
                return path or "/"
    except OSError:
        pass
    return "/"


def available() -> str | None:
    """None where runs get a cgroup each; else why not (the docs' weaker limits apply)."""
    if os.geteuid() != 0:
        return "the worker is not root: no cgroup per run"
    for c in CONTROLLERS:
        base = ROOT / c / _own_path(c).lstrip("/")
        if not (base / "cgroup.procs").is_file() or not os.access(base, os.W_OK):
            return f"no writable cgroup v1 hierarchy {c} at {ROOT / c}"
    return None


PREFIX = "palimpsest-run-"


def _sweep(parent: Path) -> None:
    """Remove the run cgroups under `parent` whose maker is dead (a worker killed mid-run): once
    the last process in one is gone, nothing else would."""
    for d in parent.glob(f"{PREFIX}*"):
        pid = d.name[len(PREFIX) :].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its maker lives: its run's, or about to be
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            d.rmdir()  # refused while a process is left in it: the next sweep tries again
        except OSError:
            pass


class RunCgroup:
    """One run's cgroups (memory, pids, cpuacct, and cpu where mounted); `join` in the run's
    first process, `usage` and `close` in the worker."""

    def __init__(self, dirs: dict[str, Path]):
        self.dirs = dirs
        self.hits_before_kill: int | None = None  # forks refused before the run was killed

    @classmethod
    def create(cls, *, memory_mb: int, processes: int) -> RunCgroup | None:
        """The run's cgroups; None where the host has none (`available`); raises CgroupFailed
        where it has them but they cannot be made (the run then fails "infra", uncharged)."""
        if available() is not None:
            return None
        # the process that makes it in the name: a worker killed mid-run leaves its run's cgroups,
        # which the next run made beside them removes (`_sweep`)
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        dirs: dict[str, Path] = {}
        try:
            made: set[Path] = set()
            for c in (*CONTROLLERS, *OPTIONAL):
                parent = ROOT / c / _own_path(c).lstrip("/")
                if c in OPTIONAL and (
                    not (parent / "cgroup.procs").is_file() or parent.resolve() in made
                ):
                    continue  # not mounted, or the same hierarchy as cpuacct ("cpu,cpuacct")
                made.add(parent.resolve())
                _sweep(parent)
                d = parent / name
                d.mkdir()
                dirs[c] = d
            mem = memory_mb * 1024 * 1024
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(mem))
            swap = dirs["memory"] / "memory.memsw.limit_in_bytes"
            if swap.exists():  # no swap beyond the limit either
                try:
                    swap.write_text(str(mem))
                except OSError:
                    pass
            (dirs["pids"] / "pids.max").write_text(str(processes))
        except OSError as e:
            cls(dirs).close()
            raise CgroupFailed(f"cannot make the run's cgroup: {e}") from None
        return cls(dirs)

    def join(self) -> None:
        """Move the calling process (the run's first, before it execs) into the cgroups."""
        pid = str(os.getpid())
        for d in self.dirs.values():
            with open(d / "cgroup.procs", "w") as f:
                f.write(pid)

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.dirs[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    def cpu_seconds(self) -> float:
        v = self._read("cpuacct", "cpuacct.usage").strip()
        return int(v) / 1e9 if v.isdigit() else 0.0

    def oom_kills(self) -> int:
        for line in self._read("memory", "memory.oom_control").splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill" and v.strip().isdigit():
                return int(v)
        return 0

    def process_limit_hits(self) -> int:
        """How many times a process of the run could not start (the process limit)."""
        events = self._read("pids", "pids.events").split()
        return int(events[1]) if len(events) == 2 and events[1].isdigit() else 0

    def usage(self) -> dict:
        """What the run used, by the kernel's counters: CPU seconds, peak memory (MB), and
        whether the memory or the process limit was hit."""
        peak = self._read("memory", "memory.max_usage_in_bytes").strip()
        failcnt = self._read("memory", "memory.failcnt").strip()
        oom_kills = self.oom_kills()
        pids_max_hits = self.process_limit_hits()
        if self.hits_before_kill is not None:  # not the forks refused while it was killed
            pids_max_hits = min(pids_max_hits, self.hits_before_kill)
        return {
            "cpu": self.cpu_seconds(),
            "rss_mb": int(peak) / 1024 / 1024 if peak.isdigit() else 0.0,
            "memory_hit": oom_kills > 0 or (failcnt.isdigit() and int(failcnt) > 0),
            "oom_kills": oom_kills,
            "processes_hit": pids_max_hits > 0,
        }

    def pids(self) -> list[int]:
        return [int(p) for p in self._read("pids", "cgroup.procs").split() if p.isdigit()]

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process left in the run's cgroup until none is; no process may start
        meanwhile (a fork bomb would refill every freed slot)."""
        if self.hits_before_kill is None:
            self.hits_before_kill = self.process_limit_hits()
        try:
            (self.dirs["pids"] / "pids.max").write_text("0")
        except (OSError, KeyError):
            pass
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left or time.monotonic() > deadline:
                return
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def close(self) -> None:
        """Kill what is left and remove the cgroups."""
        if self.dirs:
            self.kill_all()
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
