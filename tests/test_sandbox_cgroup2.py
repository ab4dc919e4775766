"""A run's limits and accounting on cgroup v2, for real: the v1 `pids` hierarchy unmounted for the
module's few seconds, so the host offers `pids` on its cgroup v2 mount (as current distributions,
which mount v2 only, do for every controller): the run's process limit is v2's `pids.max`, its CPU
time v2's `cpu.stat`, its kill v2's `cgroup.kill`; a busy loop stopped by the wall clock is charged
the CPU it used, as on v1 (tests/test_sandbox_limits.py).

It changes the machine's cgroups for everyone on it, so it runs alone: `.ci/run`'s stage "sandbox
on cgroup v2" sets PALIMPSEST_CGROUP2_STAGE=1; everywhere else it is skipped. The v1 hierarchy is
mounted again in a `finally`, whatever happens, and the module fails if it is not. The `memory`
controller is never touched (the machine's own processes live in its v1 hierarchy): here the run's
memory stays on v1, the layout systemd calls hybrid."""

from __future__ import annotations

import os
import subprocess
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


def _mount_v1() -> None:
    """Mount the v1 pids hierarchy again (refused while v2 still holds the controller: retried
    for up to 20 s)."""
    deadline = time.monotonic() + 20
    while not os.path.ismount(V1_PIDS):
        r = subprocess.run(
            ["mount", "-t", "cgroup", "-o", "pids", "cgroup", str(V1_PIDS)],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)


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
        subprocess.run(["umount", str(V1_PIDS)], check=True)
        deadline = time.monotonic() + 10
        while "pids" not in _offered(mount):  # the v1 hierarchy is gone once it is unmounted
            if time.monotonic() > deadline:
                pytest.fail("the v1 pids hierarchy still holds the controller (runs in it?)")
            time.sleep(0.05)
        yield mount
    finally:
        deadline = time.monotonic() + 10
        while "pids" in control.read_text().split() and time.monotonic() < deadline:
            try:
                control.write_text("-pids")
            except OSError:  # a run's cgroup not yet removed
                time.sleep(0.2)
        _mount_v1()
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
            ["python3", "-c", script], stdout=subprocess.PIPE, text=True, preexec_fn=cg.join
        )
        started = int(p.stdout.readline())
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
