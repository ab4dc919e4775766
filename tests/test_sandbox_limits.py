"""A run's limits are the run's own, enforced and counted by the kernel (a cgroup per run, where
the worker is root and the host has the v1 hierarchies): a busy loop stopped by the wall clock,
and one that stops every other process it can see, are charged the CPU they used; one team's fork
bomb does not fail another's run beside it; six processes of 700 MB under a limit of 1 GB, and 20
files of 60 MB under an output limit of 64 MB, are stopped at the limit while running."""

from __future__ import annotations

import os
import threading
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
