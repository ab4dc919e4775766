"""A run's limits are the run's own, enforced and counted by the kernel (a cgroup per run, where
the worker is root and the host has the v1 hierarchies): a busy loop stopped by the wall clock,
and one that stops every other process it can see, are charged the CPU they used; one team's fork
bomb does not fail another's run beside it; six processes of 700 MB under a limit of 1 GB, and 20
files of 60 MB under an output limit of 64 MB, are stopped at the limit while running."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from blindkit import _inputs, _system

from server.jobs import cgroups, sandbox

MiB = 1024 * 1024


@pytest.fixture(scope="module", autouse=True)
def _kernel_limits():
    from conftest import service_missing

    why = sandbox.available() or cgroups.available()
    if why:
        service_missing(why)


@pytest.fixture(autouse=True)
def _nothing_left():
    """Every run's cgroups are gone once it ends, however it ended (the v1 `pids` hierarchy with
    a cgroup left in it cannot be handed to cgroup v2: tests/test_sandbox_cgroup2.py)."""
    yield
    assert cgroups.leftovers(mine=True) == [], "a run's cgroup outlived it"


def _run(tmp_path: Path, script: str, name: str = "sys", **limits) -> sandbox.Outcome:
    d = tmp_path / name
    d.mkdir()
    d.chmod(0o755)
    return sandbox.run(
        ["python3", "main.py"],
        code=_system(d, script),
        inputs=_inputs(d),
        output=d / "out",
        limits=sandbox.Limits(**{"wall_seconds": 30, **limits}),
    )


# the system writes the CPU time it used so far, from inside, ten times a second
BUSY = """
import time
end = time.monotonic() + 60
n = 0
while True:
    n += 1
    if n % 200000 == 0:
        with open('/output/used.tmp', 'w') as f:
            f.write(str(time.process_time()))
        import os
        os.replace('/output/used.tmp', '/output/used')
"""

STOPPER = (
    """
import os, signal
me = os.getpid()
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != me:
        for sig in (signal.SIGSTOP,):
            try:
                os.kill(int(p), sig)
            except OSError:
                pass
"""
    + BUSY
)


# the tracer: ptrace-attaches to every other process it sees (each stopped while attached)
TRACER = (
    """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != me:
        libc.ptrace(16, int(p), 0, 0)  # PTRACE_ATTACH
"""
    + BUSY
)


@pytest.mark.parametrize("script", [BUSY, STOPPER, TRACER], ids=["busy", "stopper", "tracer"])
def test_a_run_stopped_by_the_wall_clock_is_charged_the_cpu_it_used(tmp_path, script):
    out = _run(tmp_path, script, wall_seconds=3, cpu_seconds=60)
    assert out.status == "timeout", (out.reason, out.stderr[-500:])
    used = float((tmp_path / "sys" / "out" / "used").read_text())
    assert used > 0.5
    assert out.cpu_seconds >= 0.9 * used, (out.cpu_seconds, used)


def test_a_fork_bomb_does_not_fail_another_run_beside_it(tmp_path):
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    ordinary = "open('/output/p.jsonl', 'w').write('{}\\n')\nprint('done')\n"
    got = {}

    def go(name, script, **kw):
        got[name] = _run(tmp_path, script, name=name, **kw)

    t = threading.Thread(target=go, args=("bomb", bomb), kwargs={"wall_seconds": 8})
    t.start()
    import time

    time.sleep(1.5)  # the bomb is at its limit now
    go("ordinary", ordinary, processes=64)
    t.join(60)
    assert got["ordinary"].ok, (got["ordinary"].reason, got["ordinary"].stderr[-500:])
    assert "done" in got["ordinary"].stdout
    assert got["bomb"].status in ("timeout", "processes")


def test_memory_is_counted_for_the_whole_run(tmp_path):
    hog = """
import os, time
for _ in range(5):
    if os.fork() == 0:
        break
x = b'x' * (700 * 1024 * 1024)
time.sleep(20)
"""
    out = _run(tmp_path, hog, memory_mb=1024, wall_seconds=25)
    assert out.status == "memory", (out.status, out.reason, out.stderr[-500:])
    assert out.wall_seconds < 20  # stopped while running, not by the clock


def test_the_output_is_capped_as_a_whole_while_running(tmp_path):
    flood = """
for i in range(20):
    with open(f'/output/f{i}', 'wb') as f:
        for _ in range(60):
            f.write(b'x' * (1024 * 1024))
"""
    out = _run(tmp_path, flood, output_mb=64, wall_seconds=60)
    assert out.status == "output", (out.status, out.reason)
    # the output is a tmpfs of 64 MB: not a byte past it lands, for all the files together
    assert out.output_bytes <= 64 * MiB, out.output_bytes
    assert sorted(out.files)[:2] == ["f0", "f1"]  # the second file was cut at the limit
    assert (tmp_path / "sys" / "out" / "f0").stat().st_size == 60 * MiB


def test_the_run_sees_neither_the_workers_cgroup_nor_its_own_name(tmp_path):
    """A cgroup namespace rooted at the run's cgroup (bwrap's --unshare-cgroup-try): the run's
    /proc/self/cgroup reads "/" in every hierarchy, not the worker's path on the host (a
    container's id) nor the run's cgroup name."""
    out = _run(tmp_path, "print(open('/proc/self/cgroup').read())\n")
    assert out.ok, out.stderr
    paths = [ln.split(":", 2)[2] for ln in out.stdout.split() if ln.count(":") >= 2]
    assert paths and set(paths) == {"/"}, out.stdout
    assert "palimpsest-run" not in out.stdout


@pytest.mark.parametrize("broken", ["cgroup refused", "cgroup unwritable"])
def test_a_cgroup_that_cannot_be_set_up_is_infra(tmp_path, monkeypatch, broken):
    """The run's cgroup refused by the kernel (an invalid process limit in the site's settings)
    or its first process unable to join it: the sandbox failed, not the system: `infra`."""
    limits = {}
    if broken == "cgroup refused":
        limits["processes"] = -5
    else:

        def join(self):
            with open(cgroups.ROOT / "pids" / "no-such-cgroup" / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

        monkeypatch.setattr(cgroups.RunCgroup, "join", join)
    out = _run(tmp_path, "open('/output/p.jsonl', 'w').write('{}')\n", **limits)
    assert out.status == "infra", (out.status, out.reason, out.stderr[-500:])
    assert "the sandbox failed before the system started" in out.reason
    assert not (tmp_path / "sys" / "out" / "p.jsonl").exists()


def test_the_cgroups_of_a_dead_workers_run_are_removed_by_the_next_run(tmp_path):
    """A worker killed mid-run cannot remove its run's cgroups; the next run made beside them
    does (their maker's pid is in their name and dead), and leaves a live maker's alone."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, alive = [], []
    for c in cgroups.CONTROLLERS:
        parent = cgroups.ROOT / c / cgroups._own_path(c).lstrip("/")
        for pid, into in ((dead.pid, stale), (os.getpid(), alive)):
            d = parent / f"{cgroups.PREFIX}{pid}-{os.urandom(6).hex()}"
            d.mkdir()
            into.append(d)
    try:
        out = _run(tmp_path, "print('ok')\n")
        assert out.ok, out.stderr
        assert [d for d in stale if d.exists()] == []
        assert all(d.exists() for d in alive)
    finally:
        for d in stale + alive:
            if d.exists():
                d.rmdir()


def test_the_cgroups_a_session_leaves_are_found_and_removed_with_their_processes():
    """What the tests' session sweeps at its end (tests/conftest.py): a run cgroup whose maker is
    dead, a process still in it, in every v1 hierarchy a run uses; killed and removed."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"{cgroups.PREFIX}{dead.pid}-{os.urandom(6).hex()}"
    dirs = []
    for c in cgroups.CONTROLLERS:
        d = cgroups.ROOT / c / cgroups._own_path(c).lstrip("/") / name
        d.mkdir()
        dirs.append(d)
    held = subprocess.Popen(
        ["sleep", "60"], preexec_fn=lambda: [(d / "cgroup.procs").write_text("0") for d in dirs]
    )
    try:
        assert set(dirs) <= set(cgroups.leftovers()), cgroups.leftovers()
        assert cgroups.remove(dirs) == []
        assert held.wait(5) == -9  # killed, not left to outlive its cgroup
        assert not any(d.exists() for d in dirs)
    finally:
        held.kill()
        for d in dirs:
            if d.exists():
                d.rmdir()


WORKER = """
import json, os, sys, time
from server.jobs import cgroups  # read as root: the interpreter's own files may be root's alone

os.setgroups([])
os.setgid(65534)
os.setuid(65534)  # the worker's user from here on
where = cgroups.plan()
said = {"plan": where if isinstance(where, str) else {k: v for k, (v, _p) in where.items()},
        "describe": cgroups.describe(), "gaps": cgroups.gaps()}
if sys.argv[1] == "run" and not isinstance(where, str):
    cg = cgroups.RunCgroup.create(memory_mb=256, processes=5)
    said["dirs"] = sorted({str(d) for d in cg.dirs.values()})
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the run: a busy loop, then a daemon of its own that outlives it
        cg.join()
        while time.process_time() < 0.5:
            pass
        mid = os.fork()
        if mid == 0:
            os.setsid()
            daemon = os.fork()
            if daemon == 0:  # holds none of the worker's pipes
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.close(w)
                time.sleep(60)
                os._exit(0)
            os.write(w, str(daemon).encode() + b" ")
            os._exit(0)
        os.waitpid(mid, 0)
        os.write(w, str(time.process_time()).encode() + b"\\n")
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        daemon, used = f.readline().split()
    os.waitpid(pid, 0)
    said["used"], said["cpu"] = float(used), cg.cpu_seconds()
    said["daemon"] = int(daemon)
    said["before"] = cg.pids()
    cg.close()
    said["after"] = cg.pids()
    time.sleep(0.1)
    try:  # gone, or a zombie its new parent has not reaped yet
        state = open(f"/proc/{daemon}/stat").read().rsplit(")", 1)[1].split()[0]
        said["daemon_alive"] = state not in ("Z", "X")
    except FileNotFoundError:
        said["daemon_alive"] = False
    said["removed"] = not any(os.path.exists(d) for d in said["dirs"])
print(json.dumps(said))
"""


def test_a_worker_not_root_gets_a_cgroup_per_run_where_v2_is_delegated_to_it():
    """A code worker that is not root, in a cgroup v2 of its own. Not delegated to its user: its
    runs get no cgroup, and the reason names `Delegate=yes`. Delegated (the cgroup, its
    `cgroup.procs` and `cgroup.subtree_control` its user's): each run gets a cgroup below it, its
    CPU counted from `cpu.stat` (a busy loop charged what it used) and every process it started
    killed by `cgroup.kill` (a daemon that left the run's session included); where the cgroup
    offers no `memory` or `pids` (here: v1 holds them), the worker's line says which limits are
    then per process and why, naming the cgroup and what it offers. Only a cgroup v2 is made
    (and removed): no controller is moved."""
    import json
    import sys
    import uuid

    from tests.conftest import REPO

    mount = cgroups.v2_mount()
    if os.geteuid() != 0 or mount is None:
        pytest.skip("needs root and a cgroup v2 mount to make a worker's cgroup in")
    d = mount / f"palimpsest-worker-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()

    def worker(what: str) -> dict:
        r = subprocess.run(
            [sys.executable, "-c", WORKER, what],
            preexec_fn=lambda: (d / "cgroup.procs").write_text(str(os.getpid())),
            cwd=REPO,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": "/tmp"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)

    try:
        said = worker("plan")
        assert isinstance(said["plan"], str), said
        assert said["plan"].startswith("the worker is not root"), said
        assert f"cgroup v2 below {mount} is not delegated" in said["plan"], said
        assert "Delegate=yes" in said["describe"], said
        for f in (d, d / "cgroup.procs", d / "cgroup.subtree_control"):
            os.chown(f, 65534, 65534)
        said = worker("run")
        assert said["plan"]["cpuacct"] == "v2", said
        assert {str(Path(x).parent) for x in said["dirs"]} <= {str(d), str(d / cgroups.LEAF)}
        assert said["cpu"] >= 0.9 * said["used"] > 0.4, said
        assert said["daemon"] in said["before"] and said["after"] == [], said
        assert not said["daemon_alive"] and said["removed"], said
        offered = sorted((d / "cgroup.controllers").read_text().split())
        for need in ("memory", "pids"):
            if need in offered:
                assert said["plan"][need] == "v2" and need not in said["gaps"], said
                continue
            assert need not in said["plan"], said
            why = said["gaps"][need]
            assert f"cgroup v2 at {d} does not offer it" in why, why
            assert f"its cgroup.controllers lists {' '.join(offered) or 'none'}" in why, why
            assert why in said["describe"], said
    finally:
        for _ in range(100):
            try:
                for sub in [x for x in d.iterdir() if x.is_dir()]:
                    sub.rmdir()
                d.rmdir()
                break
            except OSError:  # its last process not yet reaped
                time.sleep(0.05)
