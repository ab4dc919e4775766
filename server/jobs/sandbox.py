"""Run a participant's system with bubblewrap: no network, a read-only root, no secrets, limits.

What a run sees: the runtime's files read-only (the system's `/usr`, `/bin`, `/lib*`, a few files of
`/etc`, the worker's Python prefix and any model folders the site names), the system's code at
`/system` and the split's inputs at `/input` (both read-only), one writable `/output`, a `/tmp` and
a `/dev/shm` of capped size, `/proc` of its own PID namespace and a minimal, read-only `/dev`; the
root itself is read-only. What it does not see: the network (a fresh network namespace has only a
loopback of its own), the server's data directory and its gold, other processes, the server's
environment (`--clearenv`: no secret, token or URL is passed in), the worker's cgroup path (a
cgroup namespace), any other file of the machine.

Limits, in layers. The kernel's, per run: a cgroup of its own where the worker is root and the host
has them (server.jobs.cgroups, on cgroup v1 or v2: memory, processes, CPU time, CPU share), a
syscall filter (server.jobs.seccomp: no new namespaces, so no nested user namespace, no mounts,
keyrings, bpf, io_uring and the like), every writable path a
filesystem of fixed size (`/tmp`, `/dev/shm`; `/output` a tmpfs of the output limit, mounted by the
run's first process in a mount namespace of its own, see `_mount_output`), a user of its own
(`RUN_UIDS`) with no capability left. Inside the sandbox: rlimits on CPU seconds, address space,
processes and file size, inherited by every process of the run. Around it: a watch (the wall
clock, the cgroup's CPU time and out-of-memory kills, the output's size: the whole run killed, the
process group and the cgroup), and the job's own timeout in the queue. A sandbox that fails before
the system starts (its cgroup, its mount, bwrap, setpriv) ends `infra`: the server's failure,
never charged to the team.

Namespaces are not a virtual machine: a kernel bug can still be an escape. Run code workers for
anonymous public participants on machines that hold nothing else (docs/blind-runs.md).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from server.jobs import cgroups, oci, seccomp
from server.jobs.cgroups import CgroupFailed, RunCgroup

MiB = 1024 * 1024
NOBODY = 65534
# as root, each run is a user of its own from this range (no account needed): the process limit
# counts that run's processes alone, and one run cannot signal or trace another's
RUN_UIDS = (3_000_000, 3_900_000)

# the few files of /etc a runtime reads (the loader's cache, alternatives' links, the time zone)
ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
)
ROOT_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# NVIDIA's device nodes: bound in on a GPU host when a run asks for the GPU, and nothing else
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")

UNSHARE = [
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    # a cgroup namespace rooted at the run's own cgroup: /proc/self/cgroup reads "/", not the
    # worker's cgroup path (a container's id on a shared host) and the run's cgroup name; "try"
    # because a kernel without cgroup namespaces loses nothing else by it
    "--unshare-cgroup-try",
]
SETPRIV = "setpriv"  # util-linux's: drops to the run's user, every capability with it

ENV = {
    "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


# The run's first process inside the sandbox: it says "+" on a pipe the system never holds (closed
# before the exec; the process is made undumpable, so the system cannot reopen it through /proc)
# once the wrapper has done its part (namespaces, mounts, the run's user), becomes the subreaper of
# everything the system starts, waits for all of it, and writes the CPU time and peak memory of
# the whole tree on the pipe. No "+" means the wrapper itself failed: the server's failure.
ACCOUNT = r"""
import ctypes, json, os, resource, sys
fd = int(sys.argv[1])
libc = ctypes.CDLL(None)
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: its /proc entries are root's
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
os.write(fd, b"+")
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as e:
        print(f"cannot start {sys.argv[2]!r}: {e.strerror}", file=sys.stderr)
        os._exit(127)
code = None
while True:
    try:
        p, status = os.wait()
    except ChildProcessError:
        break
    if p == pid:
        code = os.waitstatus_to_exitcode(status)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
os.write(fd, json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss}).encode())
sys.exit(code if code is None or code >= 0 else 128 - code)
"""


class SandboxUnavailable(RuntimeError):
    """This machine cannot run sandboxed systems (no bubblewrap, or no user namespaces)."""


@dataclass(frozen=True)
class Limits:
    """What one run may use; each is enforced by the kernel or by the supervisor of the run."""

    wall_seconds: float = 600.0
    cpu_seconds: int = 600
    memory_mb: int = 4096  # the run's cgroup, and the address space of each process
    processes: int = 64  # processes and threads of the run (its cgroup, and its own user)
    output_mb: int = 64  # all of /output together (a tmpfs of this size), and each file written
    tmp_mb: int = 256  # /tmp, and /dev/shm apart
    log_kb: int = 64  # stdout and stderr kept, each (the end of them)
    # the one file of /output copied out after the run ("": every regular file), at most
    # `output_mb` in all (`_copy_out`)
    output_file: str = ""


@dataclass
class Outcome:
    """How a run ended: `ok` or the limit or failure that stopped it, with what it used."""

    # ok | exit | timeout | cpu | memory | output | processes | signal, or infra: the sandbox
    # itself failed (bwrap, setpriv, the run's cgroup or its /output), the server's failure
    status: str
    exit_code: int | None
    wall_seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    output_bytes: int
    stdout: str = ""
    stderr: str = ""
    reason: str = ""
    files: list[str] = field(default_factory=list)
    cgroup: bool = False  # limits and accounting per run by the kernel (server.jobs.cgroups)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict:
        return asdict(self)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def available() -> str | None:
    """None where runs can be sandboxed here; else why not (for a refusal or a skipped test).
    Probed once per process."""
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    probe = subprocess.run(
        [bwrap_path(), *(UNSHARE if os.geteuid() == 0 else ["--unshare-all"])]
        + ["--ro-bind", "/", "/", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()[:300]}"
    return None


def _dirs_for(path: str, made: set[str]) -> list[str]:
    """`--dir` for each missing ancestor of `path`, world-readable (bwrap makes them 0700)."""
    args: list[str] = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        d = str(Path(*parts[:i]))
        if d not in made:
            made.add(d)
            args += ["--perms", "0755", "--dir", d]
    return args


def read_only_paths(extra_ro: list[Path]) -> tuple[list[str], dict[str, str]]:
    """What a run sees of the host, read-only at its place: the runtime's folders and the few
    files of /etc, the worker's Python (its prefix and the interpreter's), `extra_ro` (the models
    the site provides); and the root's links (`/bin` to `usr/bin` on a merged /usr). The OCI
    runtime's bundle (server.jobs.oci); bwrap's own arguments say the same (`_runtime_binds`)."""
    paths: list[str] = []
    links: dict[str, str] = {}
    for d in ROOT_DIRS:
        p = Path(d)
        if p.is_symlink():
            links[d] = os.readlink(p)
        elif p.is_dir():
            paths.append(d)
    paths += [f for f in ETC if os.path.exists(f)]
    for p in (sys.prefix, sys.base_prefix, *map(str, extra_ro)):
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q not in paths and not q.startswith(ROOT_DIRS) and os.path.exists(q):
                paths.append(q)
    return paths, links


def _runtime_binds(extra_ro: list[Path]) -> list[str]:
    args: list[str] = []
    for d in ROOT_DIRS:
        p = Path(d)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
    made: set[str] = {"/etc", "/tmp"}  # /tmp is the run's tmpfs, mounted before
    args += ["--perms", "0755", "--dir", "/etc"]
    for f in ETC:
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    # the worker's Python: its prefix (a virtual environment) and the interpreter it points to;
    # the models the site provides
    seen: set[str] = set()
    for p in (sys.prefix, sys.base_prefix, *map(str, extra_ro)):
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q in seen or q.startswith(ROOT_DIRS) or not os.path.exists(q):
                continue
            seen.add(q)
            args += [*_dirs_for(q, made), "--ro-bind", q, q]
    return args


def command_line(
    command: list[str],
    *,
    account_fd: int | None = None,
    code: Path,
    inputs: Path,
    output: Path,
    limits: Limits,
    models: list[Path] = (),
    gpu: bool = False,
    uid: int = NOBODY,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bwrap command that runs `command` (an argv) in the sandbox described above, as `uid`
    when the worker is root; with `seccomp_fd`, under the syscall filter it holds."""
    as_root = os.geteuid() == 0
    args = [
        bwrap_path() or "bwrap",
        # IPC, PID, network, UTS and cgroup namespaces; a user namespace too when not root (as
        # root the run drops to `nobody` below, which a user namespace would leave unmapped)
        *(UNSHARE if as_root else ["--unshare-all"]),
        # no user namespace inside that one (bubblewrap 0.8+; the syscall filter refuses it too)
        *(["--unshare-user", "--disable-userns"] if not as_root and _disable_userns() else []),
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
        "--die-with-parent",
        "--new-session",  # no terminal to inject keystrokes into
        "--clearenv",
        # /tmp first: a runtime that lives under /tmp (a virtual environment there) is bound on
        # top of it, not hidden by it
        "--perms",
        "1777",
        "--size",
        str(limits.tmp_mb * MiB),
        "--tmpfs",
        "/tmp",
        *_runtime_binds(list(models)),
        "--dev",
        "/dev",
        *(_gpu_devices() if gpu else []),
        # /dev/shm a tmpfs of its own size, /dev itself read-only (its device nodes still work)
        "--perms",
        "1777",
        "--size",
        str(limits.tmp_mb * MiB),
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--proc",
        "/proc",
        "--ro-bind",
        str(code),
        "/system",
        "--ro-bind",
        str(inputs),
        "/input",
        "--bind",
        str(output),
        "/output",
        # the root (a tmpfs bwrap makes, holding /etc and the mount points) read-only: as an
        # unprivileged worker it would be the run's own and writable without bound
        "--remount-ro",
        "/",
        "--chdir",
        "/system",
    ]
    for k, v in ENV.items():
        args += ["--setenv", k, v]
    threads = str(max(1, min(os.cpu_count() or 1, limits.processes // 4)))
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        args += ["--setenv", k, threads]
    if account_fd is not None:
        interp = os.path.join(sys.prefix, "bin", "python3")
        command = [interp, "-I", "-S", "-c", ACCOUNT, str(account_fd), *command]
    if as_root:
        # bwrap keeps two capabilities for setpriv alone, which drops them with every other
        # one and becomes `nobody`: the process limit then counts the runs' user, not root's
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        drop = [
            SETPRIV,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--no-new-privs",
        ]
        return [*args, "--", *drop, *command]
    return [*args, "--", *command]


@functools.cache
def _disable_userns() -> bool:
    """Whether this bubblewrap has `--disable-userns` (0.8.0 and later)."""
    try:
        r = subprocess.run([bwrap_path() or "bwrap", "--help"], capture_output=True, text=True)
    except OSError:
        return False
    return "--disable-userns" in r.stdout + r.stderr


def describe(settings=None, host: bool = True) -> str:
    """The limits blind runs get on this host, in a line: the worker's first log line and what
    `/status` shows its administrators of each code worker; without `host` (no mount point, path
    or reason of the host's), what `/status` shows everyone. With the site's `settings`, the most a
    run may take of each."""
    runtime = getattr(settings, "sandbox", "bwrap")
    why = oci.available(runtime) if runtime in oci.RUNTIMES else available()
    if why:
        return f"blind runs cannot run here: {why}" if host else "blind runs cannot run here"
    most = ""
    if settings is not None:
        most = (
            f"; at most {settings.run_memory_mb} MB of memory, {settings.run_processes} "
            f"processes, {settings.run_cpu_seconds} s of CPU, {settings.run_wall_seconds:g} s "
            f"of wall clock, {settings.run_output_mb} MB of output a run"
        )
    if runtime in oci.RUNTIMES:
        return f"blind runs: {oci.describe(runtime, host)}{most}"
    kernel = cgroups.describe(host)
    if kernel.startswith("no cgroup"):
        users = "a user per run" if os.geteuid() == 0 else "the worker's user"
        kernel += (
            f"; instead rlimits per process (memory, CPU time), the processes of {users}, "
            "and a run stopped by the wall clock is charged the CPU of its first process only"
        )
    filt = (
        "a syscall filter (no new namespaces, mounts, keyrings, bpf, io_uring)"
        if seccomp.supported()
        else f"no syscall filter (none for {os.uname().machine})"
    )
    return f"blind runs: bubblewrap; {kernel}; {filt}{most}"


def _gpu_devices() -> list[str]:
    args = []
    for dev in (*GPU_DEVICES, *(str(p) for p in sorted(Path("/dev").glob("nvidia[0-9]*")))):
        if os.path.exists(dev):
            args += ["--dev-bind", dev, dev]
    return args


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
MS_NOSUID, MS_NODEV, MS_REC, MS_SLAVE = 2, 4, 0x4000, 0x80000
MNT_DETACH = 2


def _mount_output(
    output: Path, size: int, uid: int, gid: int, sock: socket.socket, cgroupfs: bool = False
) -> None:
    """In the run's first process, before bwrap: a mount namespace of its own (mounts made here
    never reach the host), and on `output` a tmpfs of `size` bytes owned by the run's user, which
    bwrap binds at /output. The kernel then refuses every byte past the limit, for all files
    together; the worker holds the tmpfs by a descriptor sent on `sock` and copies what the run
    wrote out of it afterwards. Nothing is left mounted anywhere when the run ends (nor when the
    worker dies: the namespace goes with its last process, the tmpfs with its last descriptor).
    An unprivileged worker makes a user namespace first (its own uid mapped to itself), whose
    capabilities allow the mount and are gone at bwrap's exec. Without `cgroupfs` (bwrap needs
    none of it: the run joined its cgroups before) the host's cgroup hierarchies are detached from
    the namespace: a copy of a v1 hierarchy's mount, held as long as the run lives, would keep
    that hierarchy alive after the host unmounts it (its controller never free for cgroup v2)."""

    def check(rc: int, what: str) -> None:
        if rc != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")

    if os.geteuid() == 0:
        check(_libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
    else:
        check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare a user and mount namespace")
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    check(_libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "make / a slave")
    if not cgroupfs:  # refused where nothing is mounted there: nothing to detach
        _libc.umount2(os.fsencode(cgroups.ROOT), MNT_DETACH)
    opts = f"size={size},nr_inodes=65536,mode=0755,uid={uid},gid={gid}"
    where = os.fsencode(output)
    flags = MS_NOSUID | MS_NODEV
    check(
        _libc.mount(b"palimpsest-output", where, b"tmpfs", flags, opts.encode()), "mount the tmpfs"
    )
    fd = os.open(output, os.O_PATH | os.O_DIRECTORY)
    socket.send_fds(sock, [b"o"], [fd])
    os.close(fd)
    sock.close()


def _limit(
    limits: Limits,
    cgroup: RunCgroup | None = None,
    mount: tuple[Path, int, int, socket.socket] | None = None,
):
    def apply() -> None:
        os.setsid()
        if cgroup is not None:  # before bwrap starts: every process of the run is in it
            cgroup.join()
        if mount is not None:
            _mount_output(mount[0], limits.output_mb * MiB, *mount[1:])
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        mem = limits.memory_mb * MiB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        size = limits.output_mb * MiB
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))

    return apply


def _output_size(output: Path) -> tuple[int, list[str]]:
    total, names = 0, []
    for p in sorted(output.rglob("*")):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
            names.append(str(p.relative_to(output)))
    return total, names


def _classify(rc: int, stderr: str, timed_out: bool, cpu: float, limits: Limits) -> tuple[str, str]:
    if timed_out:
        return "timeout", f"stopped after the wall-clock limit of {limits.wall_seconds:g} s"
    if rc < 0 or rc > 128:
        sig = -rc if rc < 0 else rc - 128
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= limits.cpu_seconds - 1):
            return "cpu", f"stopped after the CPU-time limit of {limits.cpu_seconds} s"
        if sig == signal.SIGXFSZ:
            return "output", f"a file grew past the output limit of {limits.output_mb} MB"
    low = stderr.lower()
    if "memoryerror" in low or "cannot allocate memory" in low or "std::bad_alloc" in low:
        return "memory", f"ran out of its memory limit of {limits.memory_mb} MB"
    if "file too large" in low:
        return "output", f"a file grew past the output limit of {limits.output_mb} MB"
    if "resource temporarily unavailable" in low and ("fork" in low or "thread" in low):
        return "processes", f"hit the limit of {limits.processes} processes"
    if rc == 0:
        return "ok", ""
    if rc < 0 or rc > 128:
        sig = -rc if rc < 0 else rc - 128
        return "signal", f"killed by signal {signal.Signals(sig).name}"
    return "exit", f"exited with status {rc}"


def run(
    command: list[str],
    *,
    code: Path,
    inputs: Path,
    output: Path,
    limits: Limits = Limits(),
    models: list[Path] = (),
    gpu: bool = False,
    image: str | None = None,
    runtime: str = "bwrap",
) -> Outcome:
    """Run `command` in the sandbox (or, with `image`, in that container image under the host's
    engine) and say how it ended; never raises for what the run did. When the sandbox itself fails
    (its cgroup, its /output, bwrap or setpriv) the outcome is `infra`: not the team's doing.
    `runtime` (the site's `PALIMPSEST_SANDBOX`): "bwrap", or the OCI runtime ("runc", "crun")
    that runs it in the same sandbox, its cgroup made by the runtime (server.jobs.oci)."""
    engine = None
    if image is not None:
        engine = container_engine()
        if engine is None:
            raise SandboxUnavailable("no container engine (podman or docker) answers here")
    elif runtime in oci.RUNTIMES:
        why = oci.available(runtime) or (
            f"a run that asks for the GPU: the {runtime} sandbox binds no GPU devices"
            if gpu
            else None
        )
        if why:
            raise SandboxUnavailable(why)
    elif runtime != "bwrap":
        raise SandboxUnavailable(f"unknown sandbox {runtime!r} (bwrap, runc or crun)")
    else:
        why = available()
        if why:
            raise SandboxUnavailable(why)
    as_root = os.geteuid() == 0
    code, inputs, output = Path(code).resolve(), Path(inputs).resolve(), Path(output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    uid = NOBODY
    if as_root and engine is None:
        uid = RUN_UIDS[0] + int.from_bytes(os.urandom(4), "big") % (RUN_UIDS[1] - RUN_UIDS[0])
    if as_root:
        # the run's user writes /output and reads the code and inputs it is given
        os.chown(output, uid, uid)
    if engine is None and runtime in oci.RUNTIMES:
        return _run_oci(runtime, command, code, inputs, output, limits, models, uid)
    t0 = time.monotonic()
    try:
        cgroup = (
            RunCgroup.create(memory_mb=limits.memory_mb, processes=limits.processes)
            if engine is None
            else None
        )
    except CgroupFailed as e:
        return _wrapper_failed(str(e), t0)
    try:
        return _run(command, engine, image, code, inputs, output, limits, models, gpu, uid, cgroup)
    finally:
        if cgroup is not None:
            cgroup.close()


def _wrapper_failed(why: str, t0: float, stderr: str = "") -> Outcome:
    return Outcome(
        status="infra",
        exit_code=None,
        wall_seconds=round(time.monotonic() - t0, 3),
        cpu_seconds=0.0,
        peak_rss_mb=0.0,
        output_bytes=0,
        stderr=stderr,
        reason=f"the sandbox failed before the system started: {why}"[:500],
    )


def _run_oci(runtime, command, code, inputs, output, limits, models, uid) -> Outcome:
    """The run given to the OCI runtime `runtime`: the same first process (`ACCOUNT`, on the
    runtime's descriptor 3), the same /output tmpfs (mounted by the runtime's process, in a mount
    namespace of its own, before it starts), the same watch and outcome; its cgroup made by the
    runtime, read and killed by the worker (`oci.cgroup_of`), removed by the runtime's `delete`."""
    t0 = time.monotonic()
    name = oci.container_name()
    oci.sweep(runtime)
    threads = str(max(1, min(os.cpu_count() or 1, limits.processes // 4)))
    env = ENV | dict.fromkeys(
        ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), threads
    )
    interp = os.path.join(sys.prefix, "bin", "python3")
    argv = [interp, "-I", "-S", "-c", ACCOUNT, "3", *command]
    paths, links = read_only_paths(list(models))
    cfg = oci.config(
        argv,
        name=name,
        code=code,
        inputs=inputs,
        output=output,
        limits=limits,
        read_only=paths,
        uid=uid,
        env=env,
    )
    try:
        bundle = oci.bundle(Path(tempfile.mkdtemp(prefix="palimpsest-oci-")), cfg, links)
    except OSError as e:
        return _wrapper_failed(f"cannot write the run's bundle: {e}", t0)
    cgroup = oci.cgroup_of(name)
    acc_r, acc_w = os.pipe()
    here, there = socket.socketpair()

    def start() -> None:  # in the runtime's process, before its exec
        os.setsid()
        # the runtime makes the run's cgroups from this namespace: the hierarchies stay
        _mount_output(output, limits.output_mb * MiB, uid, uid, there, cgroupfs=True)
        if acc_w == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(acc_w, 3)  # the runtime passes 3 on (`--preserve-fds 1`), nothing else

    try:
        try:
            proc = subprocess.Popen(
                oci.run_argv(runtime, bundle, name),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=start,
                close_fds=False,  # the descriptors made inheritable in `start` alone (PEP 446)
                env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        except (OSError, subprocess.SubprocessError) as e:
            os.close(acc_r)
            return _wrapper_failed(f"{type(e).__name__}: {e}", t0)
        finally:
            os.close(acc_w)
            there.close()
        _msg, fds, _flags, _addr = socket.recv_fds(here, 1, 1)
        held = fds[0] if fds else None
        watched = Path(f"/proc/self/fd/{held}") if held is not None else output
        try:
            return _wait(proc, acc_r, None, cgroup, output, watched, limits, t0)
        finally:
            if held is not None:
                os.close(held)
    finally:
        here.close()
        cgroup.kill_all(timeout=5)
        oci.delete(runtime, name)  # the container and its cgroups
        cgroup.close()  # whatever the runtime left
        oci.remove_bundle(bundle.parent)


def _run(command, engine, image, code, inputs, output, limits, models, gpu, uid, cgroup):
    acc_r, acc_w = os.pipe()
    filt = seccomp.program_fd() if engine is None and seccomp.supported() else None
    if engine is not None:
        argv = image_command_line(
            engine, image, command, code=code, inputs=inputs, output=output, limits=limits, gpu=gpu
        )
    else:
        argv = command_line(
            command,
            account_fd=acc_w,
            code=code,
            inputs=inputs,
            output=output,
            limits=limits,
            models=models,
            gpu=gpu,
            uid=uid,
            seccomp_fd=filt,
        )
    # /output is a tmpfs of the output limit's size, mounted by the run's first process in a mount
    # namespace of its own and held here by a descriptor (`_mount_output`)
    here, there = socket.socketpair() if engine is None else (None, None)
    owner = (uid, uid) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    mount = (output, *owner, there) if there is not None else None
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # the engine enforces an image's limits; its client keeps the session only
            preexec_fn=_limit(limits, cgroup, mount) if engine is None else os.setsid,
            pass_fds=(acc_w,) if filt is None else (acc_w, filt),
            env={} if engine is None else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except (OSError, subprocess.SubprocessError) as e:  # bwrap missing, the cgroup or the mount
        os.close(acc_r)
        for sock in (here, there):
            if sock is not None:
                sock.close()
        return _wrapper_failed(f"{type(e).__name__}: {e}", t0)
    finally:
        os.close(acc_w)
        if filt is not None:
            os.close(filt)
    held = None  # the descriptor of the output's tmpfs
    if here is not None:
        there.close()
        _msg, fds, _flags, _addr = socket.recv_fds(here, 1, 1)
        here.close()
        held = fds[0] if fds else None
    watched = Path(f"/proc/self/fd/{held}") if held is not None else output
    try:
        return _wait(proc, acc_r, engine, cgroup, output, watched, limits, t0)
    finally:
        if held is not None:
            os.close(held)


def _wait(proc, acc_r, engine, cgroup, output, watched, limits, t0) -> Outcome:
    account = _Tail(os.fdopen(acc_r, "rb"), 4096)
    keep = limits.log_kb * 1024
    out, err = _Tail(proc.stdout, keep), _Tail(proc.stderr, keep)
    watch = _Watch(proc.pid, cgroup, watched, limits)
    try:
        # wait4: the rusage of this run alone (bwrap and every process its namespace reaped)
        _, wstatus, ru = os.wait4(proc.pid, 0)
    finally:
        watch.stop()
    timed_out = watch.hit == "timeout"
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    wall = time.monotonic() - t0
    account.join(timeout=5)
    said = bytes(account.buf)
    started = said.startswith(b"+")  # the wrapper did its part: the system ran
    try:
        used = json.loads(said[1:] if started else said)
    except ValueError:  # killed before it could say: what the supervisor saw
        used = {"cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss}
    _kill_group(proc.pid)  # nothing of the run outlives it
    kernel = None
    if cgroup is not None:  # the kernel's counters, out of the run's reach
        cgroup.kill_all()
        kernel = cgroup.usage()
        used = {"cpu": kernel["cpu"], "rss_kb": kernel["rss_mb"] * 1024}
    cpu = used["cpu"]
    full = watched != output and _full(watched)  # the output's tmpfs at its limit
    refused = ""
    if watched != output:  # what the run left in its tmpfs, copied out (at most the limit)
        refused = _copy_out(watched, output, limits.output_mb * MiB, limits.output_file)
    try:
        size, files = _output_size(output)
    except OSError:  # a path of the run's that cannot be read (an image's bind mount)
        size, files, refused = 0, [], refused or _UNCOPYABLE
    out.join()
    err.join()
    stderr = err.text()
    if engine is None and not started and watch.hit is None:
        # bwrap or setpriv failed before the system started (their own messages on stderr)
        last = stderr.strip().splitlines()[-1:] or [f"status {proc.returncode}"]
        return _wrapper_failed(last[0], t0, stderr)
    if engine is not None and proc.returncode == 125:  # the engine's own failure
        return _wrapper_failed(f"{Path(engine).name} failed: {stderr.strip()[-300:]}", t0, stderr)
    status, reason = _classify(proc.returncode, stderr, timed_out, cpu, limits)
    ended = status in ("exit", "signal", "timeout")
    if watch.hit == "cpu" or (status in ("exit", "signal") and cpu >= limits.cpu_seconds):
        status, reason = "cpu", f"stopped after the CPU-time limit of {limits.cpu_seconds} s"
    elif watch.hit == "memory":
        status, reason = "memory", f"ran out of its memory limit of {limits.memory_mb} MB"
    elif watch.hit == "output" or (full and ended):
        status, reason = "output", f"/output grew past its limit of {limits.output_mb} MB"
    elif kernel is not None and status in ("exit", "signal") and kernel["memory_hit"]:
        status, reason = "memory", f"ran out of its memory limit of {limits.memory_mb} MB"
    elif kernel is not None and ended and kernel["processes_hit"]:
        status, reason = "processes", f"hit the limit of {limits.processes} processes"
    if status == "ok" and (size > limits.output_mb * MiB or full):
        status, reason = "output", f"/output reached its limit of {limits.output_mb} MB"
    elif status == "ok" and refused:  # the system's doing: charged, never the server's failure
        status, reason = "output", refused
    return Outcome(
        status=status,
        exit_code=proc.returncode,
        wall_seconds=round(wall, 3),
        cpu_seconds=round(max(cpu, 0.0), 3),
        peak_rss_mb=round(used["rss_kb"] / 1024, 1),
        output_bytes=size,
        stdout=out.text(),
        stderr=stderr,
        reason=reason,
        files=files,
        # the kernel's limits, memory and processes included (a cgroup without: `cgroups.gaps`)
        cgroup=cgroup is not None and {"memory", "pids"} <= set(cgroup.dirs),
    )


def _full(fs: Path) -> bool:
    """Whether the output's tmpfs has no block left (a write past the limit was refused)."""
    try:
        return os.statvfs(fs).f_bavail == 0
    except OSError:
        return False


_UNCOPYABLE = "/output holds a path that cannot be copied out (a name or a folder too deep)"


def _copy_out(src: Path, dest: Path, cap: int, only: str = "") -> str:
    """Copy what the run left in its tmpfs `src` to `dest`: the file `only` names (or, without
    it, every regular file and folder), at most `cap` bytes in all, each file counted at its size
    (a sparse file's holes too). Links are refused (a hard link is counted once by the tmpfs but
    would be copied once per name), pipes and devices left behind, no link followed. Returns ""
    or why the output is refused (a fixed sentence, the run's failure): a link, more than `cap`,
    or a path that cannot be copied (a name past PATH_MAX)."""
    total = 0

    def one(rel: str) -> str:
        nonlocal total
        try:
            fd = os.open(os.path.join(src, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return ""
        except OSError as e:
            if e.errno == errno.ELOOP:
                return "/output holds a symbolic link: links are not copied out"
            return _UNCOPYABLE
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return ""
            if st.st_nlink > 1:
                return "/output holds a hard link: links are not copied out"
            total += st.st_size  # a sparse file at its size: what the copy would write
            if total > cap:
                return f"/output holds more than its limit of {cap // MiB} MB"
            with open(os.path.join(dest, rel), "xb") as g:
                left = st.st_size
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    g.write(chunk)
                    left -= len(chunk)
        return ""

    try:
        if only:
            return one(only) if os.path.dirname(only) == "" else _UNCOPYABLE
        for d, dirs, files in os.walk(src):
            rel = os.path.relpath(d, src)
            for name in dirs:
                if not os.path.islink(os.path.join(d, name)):
                    os.makedirs(os.path.join(dest, rel, name), exist_ok=True)
            for name in files:
                why = one(os.path.normpath(os.path.join(rel, name)))
                if why:
                    return why
    except OSError:  # a name past PATH_MAX, a folder too deep: the run's doing
        return _UNCOPYABLE
    return ""


class _Watch(threading.Thread):
    """Watches a run while it runs: the wall clock, (with a cgroup) the CPU time of the whole run
    and its out-of-memory kills, and the size of /output as a whole (its tmpfs full); the first
    limit crossed kills the run and is kept in `hit`."""

    def __init__(self, pid: int, cgroup: RunCgroup | None, output: Path, limits: Limits):
        super().__init__(daemon=True)
        self.pid, self.cgroup, self.output, self.limits = pid, cgroup, output, limits
        self.tmpfs = str(output).startswith("/proc/self/fd/")
        self.hit: str | None = None
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.start()

    def _kill(self, why: str) -> None:
        if self.hit is None:
            self.hit = why
        _kill_group(self.pid)
        if self.cgroup is not None:
            self.cgroup.kill_all(timeout=2)

    def run(self) -> None:
        cap = self.limits.output_mb * MiB
        while not self.done.wait(0.05):
            if time.monotonic() - self.t0 >= self.limits.wall_seconds:
                self._kill("timeout")
                return
            if self.cgroup is not None and self.cgroup.cpu_seconds() > self.limits.cpu_seconds:
                self._kill("cpu")
                return
            if self.cgroup is not None and self.cgroup.oom_kills():  # the run at its memory
                self._kill("memory")
                return
            # every tick: a fast writer fills ~100 MB in 0.2 s (with the output a tmpfs of its
            # own, the kernel refuses the bytes past the limit; this stops the run there)
            if _full(self.output) if self.tmpfs else _du(self.output) > cap:
                self._kill("output")
                return

    def stop(self) -> None:
        self.done.set()


def _du(root: Path) -> int:
    """Bytes of the regular files under `root` (links not followed)."""
    total = 0
    for d, _dirs, files in os.walk(root):
        for f in files:
            try:
                st = os.lstat(os.path.join(d, f))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


class _Tail(threading.Thread):
    """Reads a pipe to its end, keeping its last `keep` bytes (a run may print without end)."""

    def __init__(self, pipe, keep: int):
        super().__init__(daemon=True)
        self.pipe, self.keep, self.total, self.buf = pipe, keep, 0, bytearray()
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read1(65536), b""):
            self.total += len(chunk)
            self.buf += chunk
            if len(self.buf) > 2 * self.keep:
                del self.buf[: len(self.buf) - self.keep]
        self.pipe.close()

    def text(self) -> str:
        cut = bytes(self.buf[-self.keep :])
        body = cut.decode("utf-8", "replace")
        return (
            f"[... {self.total - len(cut)} earlier bytes cut]\n{body}"
            if self.total > len(cut)
            else body
        )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------------- container images
# A second runtime where the host has a container engine: the system's own image, named by digest,
# run with the network off, a read-only root, no capabilities and the same three folders and
# limits. The engine is then the sandbox (its own namespaces and cgroups).


@functools.cache
def container_engine() -> str | None:
    """`podman` or `docker` when one answers here (its engine running), else None."""
    for name in ("podman", "docker"):
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            r = subprocess.run(
                [exe, "info", "--format", "{{.ServerVersion}}"]
                if name == "docker"
                else [exe, "info", "--format", "{{.Version.Version}}"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip():
            return exe
    return None


def image_command_line(
    engine: str,
    image: str,
    command: list[str],
    *,
    code: Path,
    inputs: Path,
    output: Path,
    limits: Limits,
    gpu: bool = False,
) -> list[str]:
    """The engine's command that runs `command` in `image` as the bubblewrap sandbox would."""
    args = [
        engine,
        "run",
        "--rm",
        "--network=none",
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        f"--pids-limit={limits.processes}",
        f"--memory={limits.memory_mb}m",
        f"--ulimit=cpu={limits.cpu_seconds}",
        f"--ulimit=fsize={limits.output_mb * MiB}",
        f"--tmpfs=/tmp:rw,size={limits.tmp_mb}m",
        f"--volume={code}:/system:ro",
        f"--volume={inputs}:/input:ro",
        f"--volume={output}:/output:rw",
        "--workdir=/system",
        f"--user={NOBODY}:{NOBODY}",
        "--env=HOME=/tmp",
    ]
    if gpu:
        args.append("--gpus=all" if engine.endswith("docker") else "--device=nvidia.com/gpu=all")
    return [*args, image, *command]
