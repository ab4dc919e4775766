"""A cgroup per run: the kernel's limits and accounting of one sandboxed run, outside its reach.

Where the worker runs as root and the host offers the controllers (writable by root), each run
gets a cgroup of its own, below the worker's own: its memory (every process together, page cache
and its files in tmpfs included, no swap), its processes and threads, and the CPU time of all of
them, counted by the kernel. Where the host offers the `cpu` controller too, the scheduler weighs
the whole run as one task (a fork bomb's hundred busy processes get the CPU share of one, and never
starve a run beside it). The run's first process joins them before it starts bwrap, so nothing the
system starts leaves them; the worker reads the counters after the run and kills what is left in
the cgroup. The system cannot stop, trace or signal the counting: it is the kernel's.

Both cgroup versions, and hosts that mount both ("hybrid"): each controller is taken from the v1
hierarchy of its name where one is mounted (`/sys/fs/cgroup/memory`, `pids`, `cpuacct`, `cpu`), else
from the cgroup v2 hierarchy (wherever it is mounted: `/sys/fs/cgroup` on current distributions),
where the run's cgroup gets `memory.max`, `memory.swap.max` 0 and `pids.max`, and its CPU time is
read from `cpu.stat` (which needs no controller); where a run has a v2 cgroup, its CPU is counted
there. On v2 the controllers are enabled in the worker's cgroup's `cgroup.subtree_control`; where
the worker's cgroup holds processes and is not the root (a systemd service with `Delegate=yes`),
they are first moved into a leaf of their own, `palimpsest-worker` (v2 allows no controller to a
cgroup's children while the cgroup itself holds processes).

A worker that is not root gets its runs' cgroups on v2 only, below its own cgroup where that is
delegated to its user (a systemd unit or scope with `Delegate=yes`: the cgroup, its `cgroup.procs`
and `cgroup.subtree_control` are then its user's). Where the worker's v2 cgroup does not offer
`memory` or `pids` (a cgroup v2 not delegated with them, or a hybrid host whose v1 hierarchies hold
them for someone else), runs still get a cgroup there: their CPU time counted from `cpu.stat`,
every process they started killed by `cgroup.kill` (neither needs a controller), and what is
offered; the limits of the missing controllers are held per process only (`gaps` says why, and
the worker's first line says so).

Where there are none (no root and no delegated v2, a controller neither on v1 nor offered on
v2), `RunCgroup.create` answers None and the sandbox keeps its weaker limits (rlimits per process,
a uid per run for the process limit; the accounting of the run's first process); `describe` says
which, for the worker's first log line and `/status`, and docs/blind-runs.md says what each
means.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpuacct")  # v1 hierarchies, each required where v2 lacks it
OPTIONAL = ("cpu",)  # used where mounted (apart from cpuacct or mounted with it)
LEAF = "palimpsest-worker"  # the worker's processes, where v2 needs its cgroup emptied


class CgroupFailed(OSError):
    """The host has the controllers but a run's cgroup could not be made: the server's failure."""


def _own_path(controller: str) -> str:
    """The worker's own cgroup in a v1 hierarchy, or in v2 for controller "" ("/" at its root)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _n, names, path = line.split(":", 2)
            if (controller in names.split(",")) if controller else (_n == "0" and names == ""):
                return path or "/"
    except OSError:
        pass
    return "/"


def _v1_parent(controller: str) -> Path | None:
    """Where a run's cgroup goes in the v1 hierarchy `controller`; None where it is not mounted
    (or not writable)."""
    base = ROOT / controller / _own_path(controller).lstrip("/")
    if (base / "cgroup.procs").is_file() and (base / "tasks").is_file():
        return base if os.access(base, os.W_OK) else None
    return None


def v2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (None where it is not)."""
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split(" ", 1)[0] == "cgroup2":
                return Path(left.split(" ")[4].replace("\\040", " "))
    except (OSError, IndexError):
        pass
    return None


def _v2_parent() -> Path | None:
    """The cgroup v2 under which runs' cgroups go: the worker's own (its parent when the worker
    is in the leaf it moved itself into); None where v2 is not mounted or not writable."""
    mount = v2_mount()
    if mount is None:
        return None
    own = _own_path("").strip("/")
    if own.rsplit("/", 1)[-1] == LEAF:
        own = own.rsplit("/", 1)[0] if "/" in own else ""
    base = mount / own
    if not (base / "cgroup.procs").is_file() or not os.access(base, os.W_OK):
        return None
    return base


def _v2_offered(parent: Path) -> set[str]:
    try:
        return set((parent / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _delegated(base: Path) -> bool:
    """Whether this process may make and fill cgroups below `base` (root, or a cgroup v2 subtree
    delegated to its user: a systemd unit or scope with `Delegate=yes`)."""
    return all(
        os.access(f, os.W_OK)
        for f in (base, base / "cgroup.procs", base / "cgroup.subtree_control")
    )


DELEGATE = (
    "a systemd unit with Delegate=yes, or `systemd-run --scope -p Delegate=yes palimpsest worker "
    "--queue runs`"
)


def _why_not(need: str, v2: Path | None, offered: set[str]) -> str:
    """Why a run's cgroup gets no controller `need` here, in words an operator can act on."""
    v1 = f"no writable v1 hierarchy at {ROOT / need}"
    mount = v2_mount()
    if mount is None:
        return f"{v1} and no cgroup v2"
    if v2 is None:
        who = "root" if os.geteuid() == 0 else "the worker's user"
        return (
            f"{v1}, and the worker's cgroup v2 below {mount} is not writable by {who} (give it a "
            f"delegated cgroup: {DELEGATE})"
        )
    listed = " ".join(sorted(offered)) or "none"
    bound = f" (bound to the v1 hierarchy at {ROOT / need})" if (ROOT / need).is_dir() else ""
    return (
        f"{v1}, and cgroup v2 at {v2} does not offer it{bound}: its cgroup.controllers lists "
        f"{listed} (a delegated cgroup offers it: {DELEGATE})"
    )


def plan() -> dict[str, tuple[str, Path]] | str:
    """Where each part of a run's cgroup goes on this host, `{need: (version, parent)}` for the
    memory limit ("memory"), the process limit ("pids"), the CPU time ("cpuacct") and, where
    offered, the CPU share ("cpu"); or why a run gets no cgroup here. A controller the host does
    not offer is left out (`gaps` says why; each process's rlimits then hold that limit) where the
    run still gets a cgroup to count its CPU and kill it whole: the memory controller anywhere,
    the process one where the worker has a cgroup v2 (a cgroup v2 that does not offer them to the
    worker's cgroup). A worker that is not root gets cgroups on v2 only, in a subtree delegated
    to its user."""
    root = os.geteuid() == 0
    v2 = _v2_parent()
    if v2 is not None and not _delegated(v2):
        v2 = None
    if not root and v2 is None:
        at = f" and its cgroup v2 below {v2_mount()} is not delegated to it" if v2_mount() else ""
        return f"the worker is not root{at}: no cgroup per run ({DELEGATE} gives one)"
    offered = _v2_offered(v2) if v2 is not None else set()
    where: dict[str, tuple[str, Path]] = {}
    for need in ("memory", "pids"):
        v1 = _v1_parent(need) if root else None
        if v1 is not None:
            where[need] = ("v1", v1)
        elif need in offered:
            where[need] = ("v2", v2)
        elif need == "pids" and v2 is None:  # left out only where a v2 cgroup still kills all
            return f"no cgroup controller {need}: {_why_not(need, v2, offered)}"
    has_v2 = any(v == "v2" for v, _ in where.values()) or "pids" not in where
    acct = _v1_parent("cpuacct") if root else None
    if has_v2 or acct is None:  # cpu.stat's usage needs no controller
        if v2 is None:
            return f"no CPU accounting: no v1 hierarchy at {ROOT / 'cpuacct'} and no cgroup v2"
        where["cpuacct"] = ("v2", v2)
        has_v2 = True
    else:
        where["cpuacct"] = ("v1", acct)
    cpu = _v1_parent("cpu") if root else None
    if cpu is not None and (acct is None or cpu.resolve() != acct.resolve()):
        where["cpu"] = ("v1", cpu)
    elif cpu is None and "cpu" in offered and has_v2:
        where["cpu"] = ("v2", v2)
    return where


def gaps() -> dict[str, str]:
    """Why runs get no memory limit ("memory") or no process limit ("pids") by the kernel here
    although they get a cgroup (empty where they get both, or no cgroup at all)."""
    p = plan()
    if isinstance(p, str):
        return {}
    v2 = _v2_parent()
    offered = _v2_offered(v2) if v2 is not None else set()
    return {need: _why_not(need, v2, offered) for need in ("memory", "pids") if need not in p}


def memory_gap() -> str | None:
    """Why runs get no memory limit by the kernel here although they get a cgroup (None where
    they get one, or no cgroup at all)."""
    return gaps().get("memory")


def available() -> str | None:
    """None where runs get a cgroup each, their memory and process limits in it; else why not
    (the docs' weaker limits apply: each process's)."""
    p = plan()
    if isinstance(p, str):
        return p
    missing = gaps()
    return "; ".join(f"no cgroup controller {n}: {why}" for n, why in missing.items()) or None


WHAT = {"memory": "memory", "pids": "processes", "cpuacct": "CPU time", "cpu": "CPU share"}


def describe(host: bool = True) -> str:
    """Which kernel limits a run gets on this host, in a line: with `host`, where (the mount
    points) and why not, for the worker's log and the administrators; without, the limits alone,
    for everyone (`/status`)."""
    p = plan()
    if isinstance(p, str):
        return f"no cgroup per run ({p})" if host else "no cgroup per run"
    by: dict[str, list[str]] = {}
    for need, (v, _parent) in p.items():
        by.setdefault(v, []).append(WHAT[need])
    if host:
        at = {"v1": f"cgroup v1 at {ROOT}", "v2": f"cgroup v2 at {v2_mount()}"}
    else:
        at = {"v1": "cgroup v1", "v2": "cgroup v2"}
    said = "a cgroup per run: " + "; ".join(f"{', '.join(w)} ({at[v]})" for v, w in by.items())
    missing = gaps()
    if "memory" in missing:
        why = f" ({missing['memory']})" if host else ""
        said += f"; no memory limit per run{why}: each process's address space instead"
    if "pids" in missing:
        whose = "each run's own user" if os.geteuid() == 0 else "the worker's user"
        why = f" ({missing['pids']})" if host else ""
        said += f"; no process limit per run{why}: the processes of {whose} instead"
    return said


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


def leftovers(mine: bool = False) -> list[Path]:
    """Run cgroups still there in any hierarchy of the host (v1 and v2) whose maker is dead or,
    with `mine`, is this process: what a worker killed mid-run left, or a test that did not
    remove its own. Looked for where runs go: the maker's own cgroup of each hierarchy, its
    parent (v2) and the hierarchy's root."""
    found: set[Path] = set()
    mounts = [ROOT / c for c in (*CONTROLLERS, *OPTIONAL)]
    if v2_mount() is not None:
        mounts.append(v2_mount())
    for m in mounts:
        if not (m / "cgroup.procs").is_file():
            continue
        own = m / _own_path("" if m == v2_mount() else m.name).lstrip("/")
        for parent in {m, own, own.parent, own.parent.parent}:
            if parent != m and m not in parent.parents:
                continue
            for d in parent.glob(f"{PREFIX}*"):
                pid = d.name[len(PREFIX) :].split("-", 1)[0]
                if not pid.isdigit():
                    continue
                if mine and int(pid) == os.getpid():
                    found.add(d)
                    continue
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    found.add(d)
                except PermissionError:
                    pass
    return sorted(found)


def remove(dirs: list[Path]) -> list[Path]:
    """Kill every process left in each of `dirs` (run cgroups) and remove it; returns those that
    could not be removed."""
    for d in dirs:
        RunCgroup({"cpuacct": d}).close()
    return [d for d in dirs if d.exists()]


def _enable_v2(parent: Path, controllers: list[str]) -> None:
    """Enable `controllers` for the children of `parent`; where `parent` holds processes (and is
    not the root), move them into its leaf first."""
    control = parent / "cgroup.subtree_control"

    def empty() -> None:
        leaf = parent / LEAF
        leaf.mkdir(exist_ok=True)
        for _ in range(3):  # processes started meanwhile: moved on the next pass
            for pid in (parent / "cgroup.procs").read_text().split():
                try:
                    (leaf / "cgroup.procs").write_text(pid)
                except ProcessLookupError:
                    pass

    missing = [c for c in controllers if c not in control.read_text().split()]
    if missing and parent != v2_mount() and (parent / "cgroup.procs").read_text().strip():
        # emptied first, whatever the controller: `pids` is a threaded controller, which v2
        # enables beside the cgroup's processes, making it a thread root whose new children
        # are "domain invalid" (no process can join them: EOPNOTSUPP)
        empty()
    for c in missing:
        try:
            control.write_text(f"+{c}")
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            empty()
            control.write_text(f"+{c}")


class RunCgroup:
    """One run's cgroups (v1: memory, pids, cpuacct, and cpu where mounted; v2: one cgroup for
    whatever v1 lacks); `join` in the run's first process, `usage` and `close` in the worker."""

    def __init__(self, dirs: dict[str, Path], versions: dict[str, str] | None = None):
        self.dirs = dirs  # need ("memory", "pids", "cpuacct", "cpu") to its cgroup's folder
        self.versions = versions or dict.fromkeys(dirs, "v1")
        self.hits_before_kill: int | None = None  # forks refused before the run was killed

    @classmethod
    def create(cls, *, memory_mb: int, processes: int) -> RunCgroup | None:
        """The run's cgroups; None where the host has none (`available`); raises CgroupFailed
        where it has them but they cannot be made (the run then fails "infra", uncharged)."""
        where = plan()
        if isinstance(where, str):
            return None
        # the process that makes it in the name: a worker killed mid-run leaves its run's cgroups,
        # which the next run made beside them removes (`_sweep`)
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        dirs: dict[str, Path] = {}
        versions = {need: v for need, (v, _) in where.items()}
        try:
            v2 = [need for need, (v, _) in where.items() if v == "v2"]
            if v2:
                parent = where[v2[0]][1]
                _enable_v2(parent, [n for n in v2 if n in ("memory", "pids", "cpu")])
            made: dict[Path, Path] = {}
            for need, (_v, parent) in where.items():
                key = parent.resolve()
                if key not in made:
                    _sweep(parent)
                    d = parent / name
                    d.mkdir()
                    made[key] = d
                dirs[need] = made[key]
            mem = memory_mb * 1024 * 1024
            if "memory" not in dirs:  # no memory controller here (`memory_gap`)
                pass
            elif versions["memory"] == "v1":
                (dirs["memory"] / "memory.limit_in_bytes").write_text(str(mem))
                swap = dirs["memory"] / "memory.memsw.limit_in_bytes"
                if swap.exists():  # no swap beyond the limit either
                    try:
                        swap.write_text(str(mem))
                    except OSError:
                        pass
            else:
                (dirs["memory"] / "memory.max").write_text(str(mem))
                swap = dirs["memory"] / "memory.swap.max"
                if swap.exists():  # no swap at all (v2 counts it apart)
                    swap.write_text("0")
                group = dirs["memory"] / "memory.oom.group"
                if group.exists():  # an out-of-memory kill ends every process of the run at once
                    group.write_text("1")
            if "pids" in dirs:  # else no process controller here (`gaps`)
                (dirs["pids"] / "pids.max").write_text(str(processes))
        except OSError as e:
            cls(dirs, versions).close()
            raise CgroupFailed(f"cannot make the run's cgroup: {e}") from None
        return cls(dirs, versions)

    def join(self) -> None:
        """Move the calling process (the run's first, before it execs) into the cgroups."""
        pid = str(os.getpid())
        for d in dict.fromkeys(self.dirs.values()):
            with open(d / "cgroup.procs", "w") as f:
                f.write(pid)

    def _read(self, need: str, name: str) -> str:
        try:
            return (self.dirs[need] / name).read_text()
        except (OSError, KeyError):
            return ""

    def _field(self, need: str, name: str, key: str) -> int:
        """A counter of a flat-keyed file (`cpu.stat`, `memory.events`, v1's `oom_control`)."""
        for line in self._read(need, name).splitlines():
            k, _, v = line.partition(" ")
            if k == key and v.strip().isdigit():
                return int(v)
        return 0

    def v2(self, need: str) -> bool:
        return self.versions.get(need) == "v2"

    def cpu_seconds(self) -> float:
        if self.v2("cpuacct"):
            return self._field("cpuacct", "cpu.stat", "usage_usec") / 1e6
        v = self._read("cpuacct", "cpuacct.usage").strip()
        return int(v) / 1e9 if v.isdigit() else 0.0

    def oom_kills(self) -> int:
        if self.v2("memory"):
            return self._field("memory", "memory.events", "oom_kill")
        return self._field("memory", "memory.oom_control", "oom_kill")

    def process_limit_hits(self) -> int:
        """How many times a process of the run could not start (the process limit)."""
        return self._field("pids", "pids.events", "max")  # "max N" in v1 and v2 alike

    def usage(self) -> dict:
        """What the run used, by the kernel's counters: CPU seconds, peak memory (MB), and
        whether the memory or the process limit was hit."""
        if self.v2("memory"):
            peak = self._read("memory", "memory.peak").strip()  # Linux 5.19+
            hits = self._field("memory", "memory.events", "max")
        else:
            peak = self._read("memory", "memory.max_usage_in_bytes").strip()
            failcnt = self._read("memory", "memory.failcnt").strip()
            hits = int(failcnt) if failcnt.isdigit() else 0
        oom_kills = self.oom_kills()
        pids_max_hits = self.process_limit_hits()
        if self.hits_before_kill is not None:  # not the forks refused while it was killed
            pids_max_hits = min(pids_max_hits, self.hits_before_kill)
        return {
            "cpu": self.cpu_seconds(),
            "rss_mb": int(peak) / 1024 / 1024 if peak.isdigit() else 0.0,
            "memory_hit": oom_kills > 0 or hits > 0,
            "oom_kills": oom_kills,
            "processes_hit": pids_max_hits > 0,
        }

    def pids(self) -> list[int]:
        need = "pids" if "pids" in self.dirs else "cpuacct"  # v2's one cgroup without `pids`
        return [int(p) for p in self._read(need, "cgroup.procs").split() if p.isdigit()]

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process left in the run's cgroup until none is; no process may start
        meanwhile (a fork bomb would refill every freed slot). On v2, `cgroup.kill` (Linux 5.14+)
        kills the whole cgroup at once."""
        if self.hits_before_kill is None:
            self.hits_before_kill = self.process_limit_hits()
        try:
            (self.dirs["pids"] / "pids.max").write_text("0")
        except (OSError, KeyError):
            pass
        for d in {d for need, d in self.dirs.items() if self.v2(need)}:
            try:
                (d / "cgroup.kill").write_text("1")
            except OSError:
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
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
