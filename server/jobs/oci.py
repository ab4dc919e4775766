"""A second sandbox for blind runs: an OCI runtime (runc or crun) runs the system, and its cgroup
driver makes and fills the run's cgroup, on cgroup v1 or v2 alike (`PALIMPSEST_SANDBOX=runc` or
`crun`; the default, `bwrap`, is server.jobs.sandbox's bubblewrap).

What the run sees and may do is the bubblewrap sandbox's, written as an OCI bundle of its own (a
folder per run: `config.json` and an empty root): the runtime's files read-only (`/usr`, `/bin`,
`/lib*`, a few files of `/etc`, the worker's Python prefix, the site's models), `/system` and
`/input` read-only, one writable `/output` (the same tmpfs of the output limit, mounted by the
runtime's process in a mount namespace of its own and copied out with the same bounds), a `/tmp`
and a `/dev/shm` of capped size, `/proc` of its own PID namespace and a minimal `/dev`; a read-only
root, no network (a network namespace with a loopback alone), an IPC, UTS, mount and cgroup
namespace of its own, a user of its own per run with no capability and `no_new_privs`, the same
syscall filter (server.jobs.seccomp's deny-list, as the runtime's seccomp profile), the same
rlimits per process. The kernel's limits come from `linux.resources`: the run's memory (swap
none), its processes, and its CPU counted by the kernel; the runtime writes them to whichever
cgroup version the host mounts (`memory.limit_in_bytes` or `memory.max`, `pids.max`), and the
worker reads the counters of that cgroup (`RunCgroup`, as for its own cgroups), watches them while
the run runs and kills every process of it at a limit.

Why choose it: a host where cgroup v2 alone is mounted and the worker's cgroup cannot be given
the controllers (no delegation), or where an operator wants the kernel's limits set by the code
container engines use. It needs root (the runtime makes the cgroups), like the cgroups of the
bubblewrap path. Each run pays the runtime's start and its `delete` (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from server.jobs import cgroups, seccomp
from server.jobs.cgroups import RunCgroup

RUNTIMES = ("runc", "crun")
# the runtime's state of our runs, apart from any other container the host runs
STATE = Path("/run/palimpsest-oci")
PREFIX = cgroups.PREFIX  # a container's id, and its cgroup's name: the maker's pid in it
MiB = 1024 * 1024


def runtime_path(name: str) -> str | None:
    return shutil.which(name) if name in RUNTIMES else None


@functools.cache
def available(name: str) -> str | None:
    """None where runs can be given to the runtime `name` here; else why not. Probed once."""
    if name not in RUNTIMES:
        return f"unknown OCI runtime {name!r} (runc or crun)"
    exe = runtime_path(name)
    if exe is None:
        return f"the OCI runtime {name} is not installed (Debian: apt-get install {name})"
    if os.geteuid() != 0:
        return f"the OCI runtime {name} makes each run's cgroup as root: the worker is not root"
    try:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the OCI runtime {name} does not answer: {e}"
    if r.returncode != 0:
        return f"the OCI runtime {name} does not answer: {r.stderr.strip()[:300]}"
    # the run's cgroup is read after its last process ended, before `delete` removes it
    h = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, timeout=20)
    if "--keep" not in h.stdout + h.stderr:
        return (
            f"this {version(name)} cannot keep a container once it ends (`run --keep`), so a "
            "run's CPU time could not be read from its cgroup: use runc, or a newer release"
        )
    return None


@functools.cache
def version(name: str) -> str:
    try:
        r = subprocess.run(
            [runtime_path(name) or name, "--version"], capture_output=True, text=True
        )
    except OSError:
        return name
    first = r.stdout.strip().splitlines()[:1]
    return first[0] if first else name


def _cgroup2_only() -> bool:
    """Whether /sys/fs/cgroup itself is the cgroup v2 hierarchy (no v1 hierarchy for anyone)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if left.split(" ")[4] == str(cgroups.ROOT):
            return right.split(" ", 1)[0] == "cgroup2"
    return False


def _own(controller: str) -> str:
    return cgroups._own_path(controller).strip("/")


def _v2_parent() -> str:
    own = _own("")
    return own.rsplit("/", 1)[0] if "/" in own else ""


def cgroups_path(name: str) -> str:
    """The run's `cgroupsPath`: on v2, absolute (one hierarchy), beside the worker's own cgroup
    (which holds processes, so it can give its children no controller); on v1, relative: below
    the worker's own cgroup of each hierarchy (they differ: a container's memory cgroup)."""
    if _cgroup2_only():
        return "/" + "/".join(p for p in (_v2_parent(), name) if p)
    return name


def cgroup_of(name: str) -> RunCgroup:
    """The cgroups the runtime makes for a run named `name` (a relative `cgroupsPath`): on v1,
    in each hierarchy below the worker's own cgroup of that hierarchy; on v2, below the parent of
    the worker's own (runc's and crun's rule: the worker's cgroup holds processes). Read and
    killed by the worker as its own (`RunCgroup`); removed by the runtime's `delete`."""
    if _cgroup2_only():
        d = cgroups.ROOT / cgroups_path(name).lstrip("/")
        needs = ("memory", "pids", "cpuacct", "cpu")
        return RunCgroup(dict.fromkeys(needs, d), dict.fromkeys(needs, "v2"))
    dirs = {}
    for need in ("memory", "pids", "cpuacct", "cpu"):
        if (cgroups.ROOT / need / "cgroup.procs").is_file():
            dirs[need] = cgroups.ROOT / need / _own(need) / name
    return RunCgroup(dirs, dict.fromkeys(dirs, "v1"))


def describe(name: str, host: bool = True) -> str:
    """The limits runs get from the runtime `name` here, in a line (`sandbox.describe`): with
    `host`, its version and where its cgroups go."""
    if _cgroup2_only():
        at = f"cgroup v2 at {cgroups.ROOT}" if host else "cgroup v2"
    else:
        at = f"cgroup v1 at {cgroups.ROOT}" if host else "cgroup v1"
    who = version(name) if host else name
    filt = (
        "a syscall filter (no new namespaces, mounts, keyrings, bpf, io_uring)"
        if seccomp_profile() is not None
        else f"no syscall filter (none for {os.uname().machine})"
    )
    return (
        f"{who} (OCI runtime); a cgroup per run made by its cgroup driver: memory, processes, "
        f"CPU time ({at}); {filt}"
    )


def seccomp_profile() -> dict | None:
    """server.jobs.seccomp's deny-list as an OCI seccomp profile: the same calls refused with
    EPERM, `clone` with any namespace flag refused, `clone3` answered ENOSYS (the C library then
    falls back to `clone`); None where the filter has no numbers for this machine."""
    if not seccomp.supported():
        return None
    arch = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}.get(os.uname().machine)
    if arch is None:
        return None
    col = seccomp.ARCHES[os.uname().machine][0]
    names = sorted(n for n, nums in seccomp.DENIED.items() if nums[col] is not None)
    rules = [{"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
    flags = seccomp.NAMESPACE_FLAGS
    for bit in (1 << i for i in range(32)):
        if flags & bit:  # one rule a flag: refused where (flags & bit) == bit
            rules.append(
                {
                    "names": ["clone"],
                    "action": "SCMP_ACT_ERRNO",
                    "errnoRet": 1,
                    "args": [
                        {"index": 0, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}
                    ],
                }
            )
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
    return {"defaultAction": "SCMP_ACT_ALLOW", "architectures": [arch], "syscalls": rules}


def _bind(src: str, dest: str | None = None, *, rw: bool = False) -> dict:
    opts = ["rbind", "nosuid", "nodev"] + ([] if rw else ["ro"])
    return {"destination": dest or src, "type": "bind", "source": src, "options": opts}


def _tmpfs(dest: str, size: int, mode: str = "1777", *, exec_: bool = True, dev=False) -> dict:
    opts = ["nosuid", f"mode={mode}", f"size={size}"] + ([] if exec_ else ["noexec"])
    opts += [] if dev else ["nodev"]
    return {"destination": dest, "type": "tmpfs", "source": "tmpfs", "options": opts}


def config(
    argv: list[str],
    *,
    name: str,
    code: Path,
    inputs: Path,
    output: Path,
    limits,
    read_only: list[str],
    uid: int,
    env: dict[str, str],
) -> dict:
    """The bundle's `config.json`: `argv` run as the bubblewrap sandbox would run it, the host's
    paths `read_only` bound read-only at their place (the runtime's files, the worker's Python,
    the site's models: `sandbox.read_only_paths`)."""
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "nodev"]},
        _tmpfs("/dev", 1 * MiB, "755", exec_=False, dev=True),  # its nodes: the runtime's
        _tmpfs("/dev/shm", limits.tmp_mb * MiB, exec_=False),
        _tmpfs("/tmp", limits.tmp_mb * MiB),
        *(_bind(p) for p in read_only),
    ]
    mounts += [
        _bind(str(code), "/system"),
        _bind(str(inputs), "/input"),
        _bind(str(output), "/output", rw=True),
    ]
    mem = limits.memory_mb * MiB
    rlimits = [
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_CPU", limits.cpu_seconds, limits.cpu_seconds + 5),
        ("RLIMIT_AS", mem, mem),
        ("RLIMIT_FSIZE", limits.output_mb * MiB, limits.output_mb * MiB),
        ("RLIMIT_NPROC", limits.processes, limits.processes),
    ]
    linux: dict = {
        # below the worker's own cgroup (`cgroup_of`): the site's limits on the worker hold
        "cgroupsPath": cgroups_path(name),
        "resources": {
            "devices": [{"allow": False, "access": "rwm"}],
            "memory": {"limit": mem, "swap": mem},  # swap none: memory and swap together
            "pids": {"limit": limits.processes},
        },
        "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount", "cgroup")],
        "maskedPaths": [
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
        ],
        "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    }
    profile = seccomp_profile()
    if profile is not None:
        linux["seccomp"] = profile
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": uid, "additionalGids": []},
            "args": argv,
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": "/system",
            "capabilities": {k: [] for k in ("bounding", "effective", "permitted", "inheritable")}
            | {"ambient": []},
            "rlimits": [{"type": t, "soft": s, "hard": h} for t, s, h in rlimits],
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "system",
        "mounts": mounts,
        "linux": linux,
    }


def bundle(work: Path, cfg: dict, links: dict[str, str]) -> Path:
    """A bundle folder under `work` (made here, removed by `remove_bundle`): `config.json` and
    an empty root holding the `links` that stand for the host's (`/bin` to `usr/bin` on a merged
    /usr)."""
    b = work / f"bundle-{uuid.uuid4().hex[:12]}"
    root = b / "rootfs"
    root.mkdir(parents=True)
    b.chmod(0o711)
    root.chmod(0o755)
    for path, target in links.items():
        (root / path.lstrip("/")).symlink_to(target)
    (b / "config.json").write_text(json.dumps(cfg))
    return b


def remove_bundle(b: Path) -> None:
    shutil.rmtree(b, ignore_errors=True)


def run_argv(name: str, bundle_dir: Path, container: str) -> list[str]:
    """`<runtime> run`, the container kept once it ends (its cgroup read, then `delete`): the
    account's descriptor (3) passed in."""
    exe = runtime_path(name) or name
    return [
        exe,
        "--root",
        str(STATE),
        "run",
        "--keep",
        "--preserve-fds",
        "1",
        "--bundle",
        str(bundle_dir),
        container,
    ]


def delete(name: str, container: str) -> None:
    """Remove the run's container and its cgroups (every process of it killed first)."""
    exe = runtime_path(name) or name
    subprocess.run(
        [exe, "--root", str(STATE), "delete", "--force", container],
        capture_output=True,
        timeout=60,
    )


def sweep(name: str) -> None:
    """Delete the containers a dead worker left (a worker killed mid-run): their maker's pid is
    in their id."""
    try:
        ids = [p.name for p in STATE.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return
    for c in ids:
        pid = c[len(PREFIX) :].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            delete(name, c)
        except PermissionError:
            continue


def container_name() -> str:
    return f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
