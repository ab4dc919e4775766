"""The sandbox of blind runs (server/jobs/sandbox.py) and the reading of a system's archive: a real
bubblewrap, real processes, real sockets. Each hostile system is stopped or refused, its outcome
says which, and nothing of it outlives the run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import psutil
import pytest
from blindkit import _inputs, _system

from server.domain.system_archive import SystemInvalid, unpack
from server.jobs import sandbox

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "system-sts-latin"
DEV = REPO / "examples" / "bundle-sts-latin" / "sts-latin" / "dev"


@pytest.fixture(scope="module", autouse=True)
def _bwrap():
    why = sandbox.available()
    if why:
        from conftest import service_missing

        service_missing(why)


def _run(tmp_path: Path, script: str, **limits) -> sandbox.Outcome:
    code = _system(tmp_path, script)
    return sandbox.run(
        ["python3", "main.py"],
        code=code,
        inputs=_inputs(tmp_path),
        output=tmp_path / "out",
        limits=sandbox.Limits(**{"wall_seconds": 30, **limits}),
    )


def test_the_example_system_writes_what_it_writes_outside(tmp_path):
    code = tmp_path / "code"
    manifest = unpack(EXAMPLE, code)
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "inputs.jsonl").write_bytes((DEV / "inputs.jsonl").read_bytes())
    inputs.chmod(0o755)
    (inputs / "inputs.jsonl").chmod(0o644)
    out = sandbox.run(
        manifest.command,
        code=code,
        inputs=inputs,
        output=tmp_path / "out",
        limits=sandbox.Limits(wall_seconds=60),
    )
    assert out.ok, (out.reason, out.stderr)
    assert out.files == ["predictions.jsonl"]
    direct = tmp_path / "direct.jsonl"
    subprocess.run(
        [sys.executable, str(EXAMPLE / "predict.py"), str(DEV / "inputs.jsonl"), str(direct)],
        check=True,
    )
    assert (tmp_path / "out" / "predictions.jsonl").read_bytes() == direct.read_bytes()
    assert out.cpu_seconds > 0 and out.peak_rss_mb > 0


def test_no_network(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []
    done = threading.Event()

    def watch():
        end = time.monotonic() + 30
        while time.monotonic() < end and not done.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                pass

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    out = _run(
        tmp_path,
        f"""
import socket
for host in ("127.0.0.1", "10.0.0.1", "pypi.org"):
    try:
        socket.create_connection((host, {port}), timeout=2)
        print("REACHED", host)
    except OSError as e:
        print("refused", host, type(e).__name__)
""",
    )
    done.set()
    t.join()
    assert out.ok, out.stderr
    assert "REACHED" not in out.stdout
    assert out.stdout.count("refused") == 3
    assert accepted == []


def test_reads_nothing_of_the_server(tmp_path, monkeypatch):
    secret_dir = tmp_path / "server-home"
    (secret_dir / "gold").mkdir(parents=True)
    gold = secret_dir / "gold" / "gold.jsonl"
    gold.write_text("HIDDEN-GOLD")
    gold.chmod(0o644)
    monkeypatch.setenv("PALIMPSEST_SECRET_KEY", "s3cret-value")
    out = _run(
        tmp_path,
        f"""
import os
print("env", sorted(os.environ))
print("secret" if "s3cret-value" in repr(dict(os.environ)) else "no secret")
for p in [{str(gold)!r}, {str(REPO)!r}, "/etc/passwd", "/etc/shadow", "/root", "/home",
          "/proc/1/environ", "/var/lib/postgresql"]:
    try:
        with open(p) as f:
            print("OPENED", p, f.read(20))
    except OSError as e:
        print("no", p, type(e).__name__)
print("pids", sorted(int(x) for x in os.listdir("/proc") if x.isdigit()))
""",
    )
    assert out.ok, out.stderr
    assert "HIDDEN-GOLD" not in out.stdout and "no secret" in out.stdout
    assert "PALIMPSEST" not in out.stdout
    # /proc/1 is the namespace's own init (bwrap), never the host's; its environ is not readable
    assert "OPENED" not in out.stdout, out.stdout
    pids = json.loads(out.stdout.split("pids ", 1)[1].strip().replace("(", "[").replace(")", "]"))
    assert max(pids) < 10  # a PID namespace of its own


def test_writes_only_its_output(tmp_path):
    out = _run(
        tmp_path,
        """
for p in ["/system/x", "/input/x", "/x", "/usr/x", "/etc/x"]:
    try:
        open(p, "w").write("x")
        print("WROTE", p)
    except OSError as e:
        print("no", p, type(e).__name__)
open("/tmp/scratch", "w").write("ok")
open("/output/predictions.jsonl", "w").write("ok")
""",
    )
    assert out.ok, out.stderr
    assert "WROTE" not in out.stdout
    assert out.files == ["predictions.jsonl"]
    assert not (tmp_path / "sys" / "x").exists() and not (tmp_path / "inputs" / "x").exists()


# writes 100 MB (or until refused) to each path, reporting how much landed and why it stopped;
# /output gets two files of 10 MB each (each under the limit of a file, not both together)
FILLER = """
import os
for d, name, mb in [("/", "fill", 100), ("/etc", "fill", 100), ("/dev", "fill", 100),
                    ("/dev/shm", "fill", 100), ("/tmp", "fill", 100), ("/system", "fill", 100),
                    ("/input", "fill", 100), ("/output", "a", 10), ("/output", "b", 10)]:
    n = 0
    try:
        with open(os.path.join(d, name), "wb") as f:
            for _ in range(mb):
                f.write(b"x" * (1 << 20))
                f.flush()
                n += 1
        why = "-"
    except OSError as e:
        why = e.strerror
    print(f"{d}/{name}\t{n}\t{why}", flush=True)
"""


def test_every_writable_path_is_capped_as_a_whole(tmp_path):
    """/, /etc and /dev read-only; /tmp and /dev/shm tmpfs of the tmp size; /output at most its
    limit for all its files together (as root a tmpfs of that size: the kernel refuses the bytes
    past it, not the poll); nothing else writable. 100 MB tried against limits of 8 and 16 MB."""
    out = _run(tmp_path, FILLER, tmp_mb=8, output_mb=16, wall_seconds=60)
    got = {
        d: (int(n), why) for d, n, why in (ln.split("\t") for ln in out.stdout.splitlines() if ln)
    }
    for d in ("//fill", "/etc/fill", "/dev/fill", "/system/fill", "/input/fill"):
        assert got[d][0] == 0 and got[d][1] in ("Read-only file system", "Permission denied"), (
            d,
            got,
        )
    for d in ("/tmp/fill", "/dev/shm/fill"):
        assert got[d] == (8, "No space left on device"), (d, got)
    if os.geteuid() == 0:  # the output's own tmpfs: the whole of it refused past 16 MB
        assert got["/output/a"] == (10, "-"), got
        assert got["/output/b"] == (6, "No space left on device"), got
        assert out.status == "output", (out.status, out.reason)
        assert sorted(out.files) == ["a", "b"] and out.output_bytes <= 16 * 1024 * 1024
    else:  # an unprivileged worker: the poll stops it (docs/blind-runs.md)
        assert out.status == "output", (out.status, out.reason)


# run as an unprivileged user: the sandbox (server.jobs.sandbox) on FILLER, its outcome as JSON
AS_WORKER = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from server.jobs import sandbox
why = sandbox.available()
if why:
    print(json.dumps({"unavailable": why}))
    sys.exit(0)
work = Path(sys.argv[2])
(work / "code").mkdir()
(work / "code" / "main.py").write_text(sys.argv[3])
(work / "in").mkdir()
(work / "in" / "inputs.jsonl").write_text("{}")
limits = sandbox.Limits(wall_seconds=60, tmp_mb=8, output_mb=16)
out = sandbox.run(["python3", "main.py"], code=work / "code", inputs=work / "in",
                  output=work / "out", limits=limits)
print(json.dumps(out.as_dict()))
"""


def test_an_unprivileged_worker_caps_every_writable_path_too(tmp_path):
    """The same limits for a worker that is not root (run here as `nobody` with the system's
    Python): the output's tmpfs is mounted in a user namespace of the run's first process, so
    /output is refused past its limit by the filesystem for all files together; /tmp and /dev/shm
    likewise, the root read-only."""
    import shutil
    import tempfile

    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or python is None or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become nobody), setpriv and a system python3")
    work = Path(tempfile.mkdtemp(prefix="sandbox-nobody-", dir="/tmp"))
    try:
        work.chmod(0o777)
        r = subprocess.run(
            ["setpriv", f"--reuid={sandbox.NOBODY}", f"--regid={sandbox.NOBODY}"]
            + ["--clear-groups", python, "-c", AS_WORKER, str(REPO), str(work), FILLER],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "HOME": str(work)},
        )
        if r.returncode != 0 and "No module named" in r.stderr:
            pytest.skip(f"the repository is not readable by nobody here: {r.stderr[-300:]}")
        assert r.returncode == 0, r.stderr[-2000:]
        got = json.loads(r.stdout.strip().splitlines()[-1])
        if "unavailable" in got:
            pytest.skip(f"no unprivileged sandbox here: {got['unavailable']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [ln.split("\t") for ln in got["stdout"].splitlines() if ln]
    seen = {d: (int(n), why) for d, n, why in lines}
    assert seen["//fill"] == (0, "Read-only file system"), seen
    assert seen["/dev/fill"] == (0, "Read-only file system"), seen
    assert seen["/tmp/fill"] == seen["/dev/shm/fill"] == (8, "No space left on device"), seen
    assert seen["/output/a"] == (10, "-"), seen
    assert seen["/output/b"] == (6, "No space left on device"), seen
    assert got["status"] == "output" and got["output_bytes"] <= 16 * 1024 * 1024, got


def _fake_bwrap(tmp_path: Path) -> str:
    """A `bwrap` that fails as bwrap does when it cannot set up the namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize("broken", ["missing bwrap", "failing bwrap", "failing setpriv"])
def test_the_wrappers_own_failure_is_infra(tmp_path, monkeypatch, broken):
    """The sandbox failing before the system starts (bwrap missing or failing, setpriv failing):
    `infra`, the server's failure, whatever status the wrapper exits with; never the team's
    `exit`. The same system runs (and is charged) once the wrapper works."""
    sandbox.available()  # probed with the real bwrap (cached)
    if broken == "missing bwrap":
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(tmp_path / "no-such-bwrap"))
    elif broken == "failing bwrap":
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: _fake_bwrap(tmp_path))
    else:
        if os.geteuid() != 0:
            pytest.skip("setpriv is used by a root worker only")
        monkeypatch.setattr(sandbox, "SETPRIV", "/nonexistent/setpriv")
    script = "open('/output/p.jsonl', 'w').write('{}')\n"
    (tmp_path / "a").mkdir()
    out = _run(tmp_path / "a", script)
    assert out.status == "infra", (out.status, out.reason, out.stderr[-500:])
    assert out.reason.startswith("the sandbox failed before the system started")
    assert out.cpu_seconds == 0 and out.files == []
    monkeypatch.undo()  # (this test's own monkeypatch: nothing else's)
    (tmp_path / "b").mkdir()
    out = _run(tmp_path / "b", script)
    assert out.ok and out.files == ["p.jsonl"], (out.status, out.reason, out.stderr[-500:])


def test_a_system_cannot_fake_the_wrappers_word(tmp_path):
    """The first process's pipe ("+" once the wrapper is done, then what the run used) is not the
    system's to read or write: it is closed before the system starts, and the process is not
    dumpable, so /proc/<its pid>/fd cannot reopen it."""
    out = _run(
        tmp_path,
        """
import os
for pid in os.listdir('/proc'):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        for fd in os.listdir(f'/proc/{pid}/fd'):
            print('SEEN', pid, fd, os.readlink(f'/proc/{pid}/fd/{fd}'))
    except OSError as e:
        print('refused', pid, e.strerror)
""",
    )
    assert out.ok, (out.status, out.stderr[-500:])
    assert "pipe:" not in out.stdout, out.stdout


def test_a_fork_bomb_is_bounded(tmp_path):
    t0 = time.monotonic()
    out = _run(
        tmp_path,
        """
import os, time
print("uid", os.getuid(), flush=True)
n = 0
while True:
    try:
        os.fork()
        n += 1
    except OSError as e:
        print("fork refused", e)
        break
time.sleep(60)
""",
        processes=32,
        wall_seconds=8,
    )
    assert time.monotonic() - t0 < 30
    # stopped by the clock; named after the process limit where the kernel counted the refusals
    assert out.status == ("processes" if out.cgroup else "timeout"), (out.status, out.reason)
    assert "fork refused" in out.stdout
    time.sleep(0.5)
    uid = int(out.stdout.split("uid ", 1)[1].split()[0])  # the run's own user (as root)
    left = [
        p
        for p in psutil.process_iter(["uids", "cmdline"])
        if p.info["uids"]
        and p.info["uids"].real == uid
        and "main.py" in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []  # the namespace's processes died with it


def test_memory_exhaustion_is_stopped(tmp_path):
    out = _run(tmp_path, "x = bytearray(2 * 1024**3)\nprint('GOT IT')", memory_mb=512)
    assert out.status == "memory", (out.status, out.stderr)
    assert "GOT IT" not in out.stdout
    assert "memory limit of 512 MB" in out.reason


def test_wall_clock_and_cpu_limits(tmp_path):
    t0 = time.monotonic()
    out = _run(tmp_path, "import time\ntime.sleep(60)", wall_seconds=2)
    assert out.status == "timeout" and time.monotonic() - t0 < 15
    (tmp_path / "cpu").mkdir()
    out = _run(tmp_path / "cpu", "while True: pass", cpu_seconds=2)
    assert out.status == "cpu", (out.status, out.reason)
    assert out.cpu_seconds >= 1.5


def test_output_and_log_are_capped(tmp_path):
    out = _run(
        tmp_path,
        """
import sys
sys.stdout.write("x" * (5 * 1024 * 1024))
sys.stdout.flush()
with open("/output/big", "wb") as f:
    f.write(b"y" * (3 * 1024 * 1024))
""",
        output_mb=1,
        log_kb=4,
    )
    assert out.status == "output", (out.status, out.reason, out.stderr[-300:])
    assert len(out.stdout) < 6 * 1024 and "earlier bytes cut" in out.stdout
    assert (tmp_path / "out" / "big").stat().st_size <= 1024 * 1024


def test_the_sandbox_benchmark_runs(tmp_path):
    """`benchmarks/bench_sandbox.py` runs (it once failed on an import left behind by a move):
    one run each way, its JSON has both programs' medians (how long they took is not tested)."""
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_sandbox.py"), "--n", "1", "--json", out],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())
    assert set(got["overhead"]) == {"example system", "empty program"}
    for row in got["overhead"].values():
        assert row["runs"] == 1 and row["direct_median_s"] > 0 and row["sandbox_median_s"] > 0


# ----------------------------------------------------------------------------- the archive


def _zip(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
        for n, target in (links or {}).items():
            info = zipfile.ZipInfo(n)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
    return path


@pytest.mark.parametrize(
    ("members", "links", "expected"),
    [
        ({"main.py": b""}, {}, "missing"),
        ({"system.yaml": b"command: python3\n"}, {}, "command"),
        ({"system.yaml": b"command: [python3]\nnetwork: true\n"}, {}, "network"),
        ({"system.yaml": b"command: [python3]\noutput: ../x\n"}, {}, "output"),
        ({"system.yaml": b"a: &a [1]\nb: [*a, *a]\n"}, {}, "anchors and aliases"),
        ({"system.yaml": b"command: " + b"[" * 50 + b"]" * 50 + b"\n"}, {}, "nested deeper"),
        ({"system.yaml": b"command: [python3]\n", "../evil.py": b""}, {}, "outside the archive"),
        ({"system.yaml": b"command: [python3]\n"}, {"gold": "/etc/passwd"}, "symbolic link"),
        ({"system.yaml": b"command: [python3\n"}, {}, "line 2: not valid YAML"),
    ],
)
def test_archives_refused_with_a_named_problem(tmp_path, members, links, expected):
    src = _zip(tmp_path / "sys.zip", members, links)
    with pytest.raises(SystemInvalid) as e:
        unpack(src, tmp_path / "code")
    assert expected in str(e.value)


def test_an_archive_of_the_example_unpacks_to_its_manifest(tmp_path):
    src = _zip(
        tmp_path / "sys.zip",
        {f"system-sts-latin/{p.name}": p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()},
    )
    m = unpack(src, tmp_path / "code")
    assert m.command[0] == "python3" and m.output == "predictions.jsonl"
    assert (tmp_path / "code" / "predict.py").is_file()
    assert os.stat(tmp_path / "code" / "predict.py").st_mode & 0o444 == 0o444


def test_a_container_image_is_named_by_its_digest(tmp_path):
    from server.domain.system_archive import read_manifest

    d = tmp_path / "s"
    d.mkdir()
    for text, ok in (
        ("command: [python3, p.py]\nruntime: image\n", False),
        ("command: [python3, p.py]\nruntime: image\nimage: python:3.12\n", False),
        ("command: [python3, p.py]\nimage: python@sha256:" + "a" * 64 + "\n", False),
        ("command: [python3, p.py]\nruntime: image\nimage: python@sha256:" + "a" * 64 + "\n", True),
    ):
        (d / "system.yaml").write_text(text)
        if ok:
            assert read_manifest(d).image.endswith("a" * 64)
        else:
            with pytest.raises(SystemInvalid) as e:
                read_manifest(d)
            assert "image" in str(e.value)


def test_a_system_in_a_container_image_runs_without_network(tmp_path):
    """The second runtime, where the host has a container engine; skipped, saying why, where not
    (no podman or docker engine runs on this machine kind)."""
    engine = sandbox.container_engine()
    if engine is None:
        pytest.skip("no container engine (podman or docker) answers here")
    image = os.environ.get("PALIMPSEST_TEST_IMAGE")
    if not image:
        pytest.skip(
            "set PALIMPSEST_TEST_IMAGE to a local python image by digest (nothing is pulled)"
        )
    code = _system(
        tmp_path,
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
        "    print('REACHED')\nexcept OSError:\n    print('no network')\n"
        "open('/output/predictions.jsonl', 'w').write('ok')\n",
    )
    out = sandbox.run(
        ["python3", "main.py"],
        code=code,
        inputs=_inputs(tmp_path),
        output=tmp_path / "out",
        limits=sandbox.Limits(wall_seconds=120),
        image=image,
    )
    assert out.ok, out.stderr
    assert "no network" in out.stdout and out.files == ["predictions.jsonl"]


def test_a_runtime_folder_under_tmp_stays_visible(tmp_path):
    """A model folder (or a virtual environment) that lives under /tmp is bound on top of the run's
    own /tmp, not hidden by it."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "weights.txt").write_text("w")
    for p in (tmp_path, models):
        p.chmod(0o755)
    (models / "weights.txt").chmod(0o644)
    code = _system(tmp_path, f"print(open({str(models / 'weights.txt')!r}).read())\n")
    out = sandbox.run(
        ["python3", "main.py"],
        code=code,
        inputs=_inputs(tmp_path),
        output=tmp_path / "out",
        limits=sandbox.Limits(wall_seconds=30),
        models=[models],
    )
    assert out.ok, out.stderr
    assert out.stdout.strip() == "w"


def test_the_syscall_filter_refuses_new_namespaces_and_the_kernels_rarer_calls(tmp_path):
    """The run's seccomp filter: no nested user namespace (nor any other, by unshare or clone),
    no io_uring, keyrings or bpf, each refused with EPERM; threads and processes work as before;
    every process of the run is under the filter (/proc's `Seccomp: 2`)."""
    from server.jobs import seccomp

    if not seccomp.supported():
        pytest.skip(f"no syscall filter for {os.uname().machine}")
    col = 0 if os.uname().machine == "x86_64" else 1
    nr = {k: v[col] for k, v in seccomp.DENIED.items()}
    script = f"""
import ctypes, json, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
got = {{}}
def call(name, *args):
    r = libc.syscall(*args)
    got[name] = 0 if r >= 0 else ctypes.get_errno()
call("unshare user", {nr["unshare"]}, 0x10000000)
call("unshare net", {nr["unshare"]}, 0x40000000)
call("clone user", {seccomp.CLONE[col]}, 0x10000000 | 17, 0, 0, 0, 0)
call("io_uring", {nr["io_uring_setup"]}, 8, None)
call("keyctl", {nr["keyctl"]}, 0, 0, 0, 0, 0)
call("bpf", {nr["bpf"]}, 0, None, 0)
t = threading.Thread(target=lambda: None)
t.start()
t.join()
got["child"] = subprocess.run(["grep", "Seccomp:", "/proc/self/status"],
                              capture_output=True, text=True).stdout.split()
print(json.dumps(got))
"""
    out = _run(tmp_path, script)
    assert out.ok, (out.status, out.reason, out.stderr[-1000:])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    child = got.pop("child")
    assert got == dict.fromkeys(
        ["unshare user", "unshare net", "clone user", "io_uring", "keyctl", "bpf"], 1
    ), got
    assert child == ["Seccomp:", "2"], child
