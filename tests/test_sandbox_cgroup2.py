"""A run's limits and accounting on cgroup v2, for real: the v1 `pids` hierarchy unmounted for the
module's few seconds, so the host offers `pids` on its cgroup v2 mount (as current distributions,
which mount v2 only, do for every controller): the run's process limit is v2's `pids.max`, its CPU
time v2's `cpu.stat`, its kill v2's `cgroup.kill`; a busy loop stopped by the wall clock is charged
the CPU it used, as on v1 (tests/test_sandbox_limits.py).

It changes the machine's cgroups for everyone on it, so it runs alone: `.ci/run`'s stage "sandbox
on cgroup v2" sets PALIMPSEST_CGROUP2_STAGE=1; everywhere else it is skipped. The v1 hierarchy is
mounted again in a `finally`, whatever happens, and the module fails if it is not. The `memory`
controller is never touched (the machine's own processes live in its v1 hierarchy): here the run's
memory stays on v1, the layout systemd calls hybrid, and the memory limit on v2 is tested only
where v2 offers the controller (a host that mounts v2 alone), skipped saying why elsewhere. A
worker that is not root, in a v2 cgroup delegated to its user (what `Delegate=yes` gives), makes
its runs' cgroups there: its process limit and CPU time on v2 (and its memory where offered)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from blindkit import _inputs, _system

from server.jobs import cgroups, sandbox

V1_PIDS = Path("/sys/fs/cgroup/pids")

pytestmark = pytest.mark.skipif(
    os.environ.get("PALIMPSEST_CGROUP2_STAGE") != "1",
    reason="runs alone, in .ci/run's stage 'sandbox on cgroup v2' (it unmounts the v1 pids "
    "hierarchy for a few seconds)",
)


def _offered(mount: Path) -> set[str]:
    return set((mount / "cgroup.controllers").read_text().split())


def _mount_v1(control: Path | None = None) -> None:
    """Mount the v1 pids hierarchy again, `-pids` written to cgroup v2's `control` first:
    refused while a v2 cgroup still uses the controller (a run's, until it ends: on a machine
    shared with other work, runs that other processes start while the v1 hierarchy is away take
    pids on v2 too), and until the kernel has freed it; retried for up to 180 s."""
    deadline = time.monotonic() + 180
    while not os.path.ismount(V1_PIDS):
        if control is not None and "pids" in control.read_text().split():
            with contextlib.suppress(OSError):  # a run's cgroup not yet removed
                control.write_text("-pids")
        r = subprocess.run(
            ["mount", "-t", "cgroup", "-o", "pids", "cgroup", str(V1_PIDS)],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)


def _holders(mount: Path) -> list[str]:
    """The processes that keep `mount` busy (an open file, a working directory or a root in it:
    `umount` answers "target is busy" while one is), each with its command line."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = [os.readlink(f"/proc/{pid}/{n}") for n in ("cwd", "root")]
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if any(x == str(mount) or x.startswith(f"{mount}/") for x in links):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{pid} ({cmd.decode(errors='replace').strip()[:120]})")
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _copies() -> list[str]:
    """The processes of other mount namespaces that hold a copy of a v1 pids hierarchy's mount:
    the kernel keeps the hierarchy (and its controller) while a copy lives, unmounted or not."""
    mine = os.readlink("/proc/self/ns/mnt")
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == mine:
                continue
            text = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        if any(" - cgroup " in ln and "pids" in ln.rsplit(" ", 1)[-1] for ln in text.splitlines()):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            found.append(f"{pid} ({cmd.decode(errors='replace').strip()[:120]})")
    return found


def _children(hierarchy: Path) -> list[Path]:
    """The cgroups below the root of a v1 hierarchy: while one is left, unmounting the hierarchy
    does not free its controller (the kernel keeps the hierarchy for them)."""
    return sorted(p for p in hierarchy.rglob("*") if p.is_dir())


def _unmount_v1() -> str:
    """Unmount the v1 pids hierarchy once it holds no run: the cgroups of runs whose maker is dead
    removed (`cgroups._sweep`), live runs' awaited for 20 s; "target is busy" (a process with a
    file open in it, for an instant while a run starts or is read) retried for 10 s. Returns ""
    or why it could not, naming what holds it."""
    cgroups._sweep(V1_PIDS)
    deadline = time.monotonic() + 20
    while _children(V1_PIDS) and time.monotonic() < deadline:
        time.sleep(0.2)
        cgroups._sweep(V1_PIDS)
    left = _children(V1_PIDS)
    runs = [p for p in left if p.name.startswith(cgroups.PREFIX)]
    if runs:  # the suite's own: a run that did not remove its cgroup (tests/conftest.py)
        pytest.fail(f"run cgroups left in the v1 pids hierarchy: {', '.join(map(str, runs))}")
    if left:
        return f"cgroups left in it: {', '.join(map(str, left[:5]))}"
    deadline = time.monotonic() + 10
    while True:
        r = subprocess.run(["umount", str(V1_PIDS)], capture_output=True, text=True)
        if r.returncode == 0:
            break
        if time.monotonic() > deadline:
            held = ", ".join(_holders(V1_PIDS)) or "no process holds a file in it"
            return f"{r.stderr.strip()}; held by: {held}"
        time.sleep(0.2)
    # Unmounted, the hierarchy is destroyed and its controller goes to v2 unless the kernel keeps
    # it: a cgroup of it still dying when it was unmounted (it is then kept for good: mounted
    # again and unmounted once more, it goes), or a copy of its mount in another mount namespace
    # (kept while that lives: named)
    mount = cgroups.v2_mount()
    for _ in range(3):
        deadline = time.monotonic() + 15  # the kernel frees it later on a loaded machine
        while "pids" not in _offered(mount) and time.monotonic() < deadline:
            time.sleep(0.05)
        if "pids" in _offered(mount):
            return ""
        r = subprocess.run(
            ["mount", "-t", "cgroup", "-o", "pids", "cgroup", str(V1_PIDS)], capture_output=True
        )
        if r.returncode == 0:  # the kept hierarchy: unmounted once more, it goes
            subprocess.run(["umount", str(V1_PIDS)], capture_output=True, text=True)
    copies = ", ".join(_copies()) or "no other mount namespace holds a copy"
    return f"unmounted, the kernel keeps the hierarchy; its copies: {copies}"


@pytest.fixture(scope="module")
def v2():
    """The cgroup v2 mount, offering `pids` for the module's tests; the v1 hierarchy back after."""
    mount = cgroups.v2_mount()
    if os.geteuid() != 0 or mount is None:
        pytest.fail("this stage needs root and cgroup v2 mounted")
    if not os.path.ismount(V1_PIDS) and "pids" in _offered(mount):
        yield mount  # a host on cgroup v2 alone: nothing to change
        return
    control = mount / "cgroup.subtree_control"
    try:
        why = _unmount_v1()
        if why:  # a host whose own processes keep the hierarchy cannot hand pids to v2
            pytest.skip(
                f"the v1 pids hierarchy cannot be unmounted on this host ({why}), "
                "so cgroup v2 cannot offer pids here"
            )
        yield mount
    finally:
        _mount_v1(control)
        assert os.path.ismount(V1_PIDS) and (V1_PIDS / "cgroup.procs").is_file(), (
            "the v1 pids hierarchy could not be mounted again: "
            "mount -t cgroup -o pids cgroup /sys/fs/cgroup/pids"
        )


BUSY = """
import os, time
n = 0
while True:
    n += 1
    if n % 200000 == 0:
        with open('/output/used.tmp', 'w') as f:
            f.write(str(time.process_time()))
        os.replace('/output/used.tmp', '/output/used')
"""


def test_a_run_stopped_by_the_wall_clock_is_charged_its_cpu_on_cgroup_v2(v2, tmp_path):
    where = cgroups.plan()
    assert not isinstance(where, str), where
    versions = {k: v for k, (v, _p) in where.items()}
    assert versions["pids"] == versions["cpuacct"] == "v2", versions  # counted in the v2 cgroup
    # memory is never moved here (the machine's own processes live in its v1 hierarchy)
    assert versions["memory"] == ("v1" if (cgroups.ROOT / "memory").is_dir() else "v2")
    said = sandbox.describe()
    assert "processes, CPU time" in said and f"(cgroup v2 at {v2})" in said, said
    d = tmp_path / "sys"
    d.mkdir()
    d.chmod(0o755)
    out = sandbox.run(
        ["python3", "main.py"],
        code=_system(d, BUSY),
        inputs=_inputs(d),
        output=d / "out",
        limits=sandbox.Limits(wall_seconds=4, cpu_seconds=60),
    )
    assert out.status == "timeout" and out.cgroup, (out.status, out.reason, out.stderr[-500:])
    used = float((d / "out" / "used").read_text())  # what the loop saw of its own CPU time
    assert used > 0.2  # the machine's other work may leave it little
    assert out.cpu_seconds >= 0.9 * used, (out.cpu_seconds, used)
    assert list(v2.glob(f"{cgroups.PREFIX}*")) == []  # removed after the run


def test_the_process_limit_holds_on_cgroup_v2(v2):
    """pids.max of the run's v2 cgroup: a root process (which no rlimit holds) starts four
    children under a limit of five, no more; the forks refused are counted; cgroup.kill ends
    what is left."""
    cg = cgroups.RunCgroup.create(memory_mb=512, processes=5)
    assert cg is not None and cg.versions["pids"] == "v2"
    assert cg.dirs["pids"].parent == v2
    script = (
        "import os, time\nn = 0\nfor _ in range(20):\n    try:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n            os._exit(0)\n        n += 1\n"
        "    except OSError:\n        pass\nprint(n, flush=True)\ntime.sleep(30)\n"
    )
    try:
        p = subprocess.Popen(
            [sys.executable, "-c", script],  # no launcher's shell of its own: 5 processes
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=cg.join,
        )
        line = p.stdout.readline()
        assert line.strip(), p.stderr.read()[-2000:]  # it ended without a word: why
        started = int(line)
        assert started == 4, started
        assert cg.process_limit_hits() == 16
        assert len(cg.pids()) == 5
        t0 = time.monotonic()
        cg.kill_all()
        assert cg.pids() == [] and time.monotonic() - t0 < 2
        p.wait(5)
    finally:
        cg.close()
    assert not cg.dirs["pids"].exists()


MEMORY = """
import os, time
kids = []
for _ in range(4):  # four processes of 100 MB each: each under its address-space limit, not all
    pid = os.fork()
    if pid == 0:
        block = bytearray(100 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"""


def test_the_memory_limit_holds_on_cgroup_v2(v2, tmp_path):
    """memory.max of the run's v2 cgroup: four processes of 100 MB under a limit of 256 MB (each
    within its own address-space limit) are stopped by the kernel, the run ends `memory`. Only
    where cgroup v2 offers the memory controller: never by moving it off a v1 hierarchy."""
    offered = _offered(v2)
    v1 = cgroups.ROOT / "memory"
    if "memory" not in offered or os.path.ismount(v1):
        pytest.skip(
            f"cgroup v2 at {v2} does not offer the memory controller (its cgroup.controllers: "
            f"{' '.join(sorted(offered)) or 'none'}): this host binds it to the v1 hierarchy at "
            f"{v1}, where the machine's own processes live, so it is never unmounted nor moved "
            "here; the memory limit on v2 is tested on a host that mounts cgroup v2 alone"
        )
    where = cgroups.plan()
    assert not isinstance(where, str) and where["memory"][0] == "v2", where
    d = tmp_path / "sys"
    d.mkdir()
    d.chmod(0o755)
    out = sandbox.run(
        ["python3", "main.py"],
        code=_system(d, MEMORY),
        inputs=_inputs(d),
        output=d / "out",
        limits=sandbox.Limits(wall_seconds=30, memory_mb=256),
    )
    assert out.status == "memory" and out.cgroup, (out.status, out.reason, out.stderr[-500:])


CHILD = """
import json, os, sys, time
from server.jobs import cgroups  # read as root: the interpreter's own files may be root's alone

uid = int(sys.argv[1])
os.setgroups([])
os.setgid(uid)
os.setuid(uid)  # the worker's user from here on
where = cgroups.plan()
said = {"plan": where if isinstance(where, str) else {k: v for k, (v, _p) in where.items()},
        "describe": cgroups.describe(), "gap": cgroups.memory_gap()}
cg = cgroups.RunCgroup.create(memory_mb=256, processes=5)
said["dirs"] = {k: str(v) for k, v in cg.dirs.items()}


def child(body):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        cg.join()
        os.write(w, str(body()).encode() + b"\\n")
        time.sleep(30)
        os._exit(0)
    os.close(w)
    return pid, os.fdopen(r)


def busy():
    while time.process_time() < 0.5:
        pass
    return time.process_time()


def forks():
    n = 0
    for _ in range(20):
        try:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
        except OSError:
            pass
    return n


pid, out = child(busy)
said["used"] = float(out.readline())
os.kill(pid, 9)
os.waitpid(pid, 0)
said["cpu"] = cg.cpu_seconds()
pid, out = child(forks)
said["started"] = int(out.readline())
said["hits"] = cg.process_limit_hits()
cg.kill_all()
said["left"] = cg.pids()
os.waitpid(pid, 0)
cg.close()
said["removed"] = not any(os.path.exists(d) for d in said["dirs"].values())
print(json.dumps(said))
"""


def test_a_worker_not_root_gets_its_runs_cgroups_in_a_delegated_v2_subtree(v2):
    """A code worker that is not root, in a cgroup v2 delegated to its user (what a systemd unit
    with `Delegate=yes` and `User=` gives it: the cgroup and its `cgroup.procs` and
    `cgroup.subtree_control` its user's): it moves itself into a leaf of its own, its runs'
    cgroups go beside it with `pids.max` (a 5-process limit held) and their CPU counted from
    `cpu.stat`; where that cgroup offers no `memory` (here: bound to the v1 hierarchy), the line
    it logs says so and why."""
    import json
    import sys
    import uuid

    from tests.conftest import REPO

    nobody = 65534
    control = v2 / "cgroup.subtree_control"
    if "pids" not in control.read_text().split():
        control.write_text("+pids")  # taken back by the module's fixture
    delegated = v2 / f"palimpsest-delegated-{uuid.uuid4().hex[:8]}"
    delegated.mkdir()
    try:
        for f in (delegated, *(delegated / n for n in ("cgroup.procs", "cgroup.subtree_control"))):
            os.chown(f, nobody, nobody)
        threads = delegated / "cgroup.threads"
        if threads.exists():
            os.chown(threads, nobody, nobody)

        def enter():  # the worker's process, in the delegated cgroup (its user: CHILD's start)
            (delegated / "cgroup.procs").write_text(str(os.getpid()))

        r = subprocess.run(
            [sys.executable, "-c", CHILD, str(nobody)],
            preexec_fn=enter,
            cwd=REPO,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": "/tmp"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        said = json.loads(r.stdout)
        assert said["plan"]["pids"] == said["plan"]["cpuacct"] == "v2", said
        assert {str(Path(d).parent) for d in said["dirs"].values()} == {str(delegated)}, said
        assert (delegated / cgroups.LEAF).is_dir()  # the worker moved itself out of the way
        assert said["cpu"] >= 0.9 * said["used"] > 0, said
        assert said["started"] == 4 and said["hits"] == 16 and said["left"] == [], said
        assert said["removed"], said
        assert "processes, CPU time (cgroup v2 at" in said["describe"], said
        if "memory" in _offered(v2):
            assert said["plan"]["memory"] == "v2" and said["gap"] is None, said
        else:  # memory held per process: the worker's line says so, and why
            assert "memory" not in said["plan"], said
            assert "no memory limit per run" in said["describe"], said
            assert f"cgroup v2 at {delegated} does not offer it" in said["gap"], said
            assert "Delegate=yes" in said["gap"], said
    finally:
        for d in [p for p in delegated.iterdir() if p.is_dir()]:
            if (d / "cgroup.procs").is_file():
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)
        time.sleep(0.2)
        for d in [*(p for p in delegated.iterdir() if p.is_dir()), delegated]:
            with contextlib.suppress(OSError):
                d.rmdir()
