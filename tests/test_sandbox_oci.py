"""Blind runs given to an OCI runtime (`PALIMPSEST_SANDBOX=runc`, server.jobs.oci), for real: the
runtime's cgroup driver makes each run's cgroup (v1 on this host, v2 where the host mounts v2
alone: the same code), and the run gets the bubblewrap sandbox's limits. Six processes of 100 MB
under a memory limit of 256 MB (each within its own address-space limit) are stopped by the kernel,
the run ends `memory`; a fork bomb is held at its process limit; a busy loop stopped by the wall
clock is charged at least 90 % of the CPU it saw; the output is copied out under the same bounds;
the syscall filter, the read-only root and the missing network hold; nothing of a run (its cgroups,
its container) is left once it ends. Root and runc only (skipped, saying why, elsewhere); the
bundle's configuration is checked everywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from blindkit import _inputs, _system

from server.jobs import cgroups, oci, sandbox, seccomp

MiB = 1024 * 1024


def _left() -> list[str]:
    """Cgroups of this process's runs and containers still there."""
    mine = f"{cgroups.PREFIX}{os.getpid()}-"
    found = [str(p) for depth in range(1, 5) for p in cgroups.ROOT.glob("*/" * depth + f"{mine}*")]
    if oci.STATE.is_dir():
        found += [str(p) for p in oci.STATE.iterdir() if p.name.startswith(mine)]
    return found


@pytest.fixture
def runc():
    why = oci.available("runc")
    if why:
        pytest.skip(why)
    assert _left() == []
    yield
    assert _left() == [], "a run's cgroup or container outlived it"


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
        runtime="runc",
    )


def test_the_bundle_says_what_the_bubblewrap_sandbox_does(tmp_path):
    """The run's config.json: a read-only root, the code and inputs read-only, /output writable,
    its own network (no interface but loopback), PID, IPC, UTS, mount and cgroup namespaces and no
    user namespace of the host's, the run's user with no capability, the site's limits in
    `linux.resources` and as rlimits, the seccomp deny-list of the bubblewrap path."""
    limits = sandbox.Limits(memory_mb=256, processes=10, output_mb=4, tmp_mb=8)
    cfg = oci.config(
        ["python3", "main.py"],
        name="palimpsest-run-1-x",
        code=tmp_path / "code",
        inputs=tmp_path / "in",
        output=tmp_path / "out",
        limits=limits,
        read_only=sandbox.read_only_paths([])[0],
        uid=3_000_123,
        env=sandbox.ENV,
    )
    assert cfg["root"]["readonly"] is True
    mounts = {m["destination"]: m for m in cfg["mounts"]}
    assert "ro" in mounts["/system"]["options"] and "ro" in mounts["/input"]["options"]
    assert "ro" not in mounts["/output"]["options"]
    assert mounts["/output"]["source"] == str(tmp_path / "out")
    assert f"size={8 * MiB}" in mounts["/tmp"]["options"]
    assert not {"/", "/etc", "/var", "/home", "/root", "/run", "/sys"} & set(mounts)
    spaces = {n["type"] for n in cfg["linux"]["namespaces"]}
    assert spaces == {"pid", "network", "ipc", "uts", "mount", "cgroup"}
    proc = cfg["process"]
    assert proc["user"]["uid"] == proc["user"]["gid"] == 3_000_123
    assert proc["noNewPrivileges"] and not any(proc["capabilities"].values())
    res = cfg["linux"]["resources"]
    assert res["memory"] == {"limit": 256 * MiB, "swap": 256 * MiB}  # no swap beyond it
    assert res["pids"] == {"limit": 10}
    rl = {r["type"]: r["hard"] for r in proc["rlimits"]}
    assert rl["RLIMIT_AS"] == 256 * MiB and rl["RLIMIT_NPROC"] == 10
    assert rl["RLIMIT_FSIZE"] == 4 * MiB
    assert all(v for v in proc["env"] if v.split("=")[0] in sandbox.ENV)
    if seccomp.supported():
        rules = cfg["linux"]["seccomp"]["syscalls"]
        assert set(rules[0]["names"]) <= set(seccomp.DENIED) and "unshare" in rules[0]["names"]
        assert {"setns", "mount", "bpf", "io_uring_setup", "keyctl"} <= set(rules[0]["names"])
        masks = {r["args"][0]["value"] for r in rules if r["names"] == ["clone"]}
        assert sum(masks) == seccomp.NAMESPACE_FLAGS  # every namespace flag of clone refused
        assert {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38} in rules


def test_an_unknown_or_unable_runtime_is_refused_saying_why(tmp_path):
    with pytest.raises(sandbox.SandboxUnavailable, match="unknown sandbox 'gvisor'"):
        sandbox.run(
            ["true"], code=tmp_path, inputs=tmp_path, output=tmp_path / "o", runtime="gvisor"
        )
    why = oci.available("crun")
    if why is not None:  # not installed, not root, or too old to keep a container's cgroup
        with pytest.raises(sandbox.SandboxUnavailable, match="crun"):
            sandbox.run(
                ["true"], code=tmp_path, inputs=tmp_path, output=tmp_path / "o", runtime="crun"
            )


def test_the_worker_line_names_the_runtime_and_its_cgroups():
    class Site:
        sandbox = "runc"
        run_memory_mb, run_processes, run_cpu_seconds = 256, 10, 60
        run_wall_seconds, run_output_mb = 30.0, 4

    said = sandbox.describe(Site())
    if oci.available("runc"):
        assert said == f"blind runs cannot run here: {oci.available('runc')}"
        return
    assert said.startswith("blind runs: runc version") and "(OCI runtime)" in said, said
    assert "memory, processes, CPU time (cgroup v" in said and "at /sys/fs/cgroup" in said
    public = sandbox.describe(Site(), host=False)
    assert "/sys/fs/cgroup" not in public and "runc (OCI runtime)" in public, public


MEMORY = """
import os, time
kids = []
for _ in range(6):  # 600 MB: each process within its own address-space limit, not all of them
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


def test_the_memory_limit_is_the_runtimes_cgroup(runc, tmp_path):
    out = _run(tmp_path, MEMORY, memory_mb=256)
    assert out.status == "memory" and out.cgroup, (out.status, out.reason, out.stderr[-500:])
    assert out.wall_seconds < 25  # stopped while running, not by the clock
    assert out.peak_rss_mb <= 257, out.peak_rss_mb  # the kernel's count: never past the limit


BOMB = """
import os, time
n = 0
for _ in range(100):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError:
        pass
print(n, flush=True)
"""


def test_a_fork_bomb_is_held_at_the_process_limit(runc, tmp_path):
    out = _run(tmp_path, BOMB, processes=10, wall_seconds=3)
    assert out.status in ("timeout", "processes"), (out.status, out.reason, out.stderr[-500:])
    started = int(out.stdout.split()[0])
    assert started <= 10 - 2, started  # the run's first process and the system's own count


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


def test_a_run_stopped_by_the_wall_clock_is_charged_its_cpu(runc, tmp_path):
    out = _run(tmp_path, BUSY, wall_seconds=3, cpu_seconds=60)
    assert out.status == "timeout" and out.cgroup, (out.status, out.reason, out.stderr[-500:])
    used = float((tmp_path / "sys" / "out" / "used").read_text())
    assert used > 0.2  # the machine's other work may leave it little
    assert out.cpu_seconds >= 0.9 * used, (out.cpu_seconds, used)


CONFINED = """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
said = [f"unshare {libc.unshare(0x10000000)} {ctypes.get_errno()}"]  # a user namespace
try:
    socket.create_connection(("1.1.1.1", 80), timeout=1)
    said.append("network")
except OSError:
    said.append("no network")
for p in ("/x", "/system/x", "/input/x", "/etc/x"):
    try:
        open(p, "w")
        said.append(f"wrote {p}")
    except OSError:
        pass
said.append(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
said.append(str(os.getuid()))
print(" | ".join(said))
os.mkdir("/output/sub")
open("/output/sub/p.jsonl", "w").write("{}\\n")
os.symlink("/etc/passwd", "/output/link")
"""


def test_the_sandbox_holds_and_the_output_is_copied_out_with_its_bounds(runc, tmp_path):
    out = _run(tmp_path, CONFINED)
    said = out.stdout.strip().split(" | ")
    assert said[:3] == ["unshare -1 1", "no network", "0000000000000000"], out.stdout
    assert sandbox.RUN_UIDS[0] <= int(said[3]) < sandbox.RUN_UIDS[1]
    # a link is never copied out: the run's output refused, the file beside it copied
    assert out.status == "output" and "symbolic link" in out.reason, (out.status, out.reason)
    flood = (
        "for i in range(6):\n    with open(f'/output/f{i}', 'wb') as f:\n"
        "        f.write(b'x' * (1024 * 1024))\n"
    )
    out = _run(tmp_path, flood, name="flood", output_mb=4)
    assert out.status == "output" and out.output_bytes <= 4 * MiB, (out.status, out.output_bytes)
    out = _run(tmp_path, "open('/output/p.jsonl', 'w').write('{}\\n')\n", name="ok")
    assert out.ok and out.files == ["p.jsonl"] and out.cgroup, (out.status, out.reason)
    assert (tmp_path / "ok" / "out" / "p.jsonl").read_text() == "{}\n"
