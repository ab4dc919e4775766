"""`serve` owns its children. After `kill -9` of `serve` its Redis and worker die
with it (PR_SET_PDEATHSIG); what outlived it anyway (an unsupervised Redis of the same data
directory, a worker in its pid file) is stopped by the next `serve`, which starts and supervises
fresh ones and scores a new submission. A worker stops on SIGTERM also while its Redis is away
(an orphan ignores it otherwise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import register_everywhere
from livekit import _free_port, _login_flood

REPO = Path(__file__).resolve().parent.parent


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PALIMPSEST_HOME=str(home),
        PYTHONPATH=str(REPO),
        PALIMPSEST_RECONCILE_EVERY="1",
        PALIMPSEST_STALE_AFTER="5",
    )
    return env


def _serve(home: Path, port: int, log: Path, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), *extra],
        env=_env(home),
        cwd=REPO,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_up(port: int, proc, log: Path, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(log.read_text()[-3000:])


def _children(pid: int, recursive: bool = True):
    """The live descendants of `pid` (a worker's work horse too, unless `recursive` is False)."""
    import psutil

    out = []
    for c in psutil.Process(pid).children(recursive=recursive):
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.Error:
            pass
    return out


def _kind(p) -> str:
    """What a child is; "gone" for one that died (or became a zombie) since it was listed."""
    import psutil

    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return "gone"
    return (
        "worker" if "server.jobs.worker" in cmd else "redis" if "redis-server" in cmd else "other"
    )


def _cleanup(home: Path):
    import psutil

    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            if str(home) in " ".join(p.info["cmdline"] or []) or (p.info["environ"] or {}).get(
                "PALIMPSEST_HOME"
            ) == str(home):
                p.kill()
        except psutil.Error:
            pass


def _submit_and_wait_scored(home: Path, port: int, timeout: float = 90) -> dict:
    """A new team's submission through the API, scored by the worker of the running serve."""
    from sqlmodel import Session

    from server.db import get_engine
    from server.demo import predictions
    from server.domain.accounts import create_token, create_user, new_invite_code
    from server.models import Team, TeamMember

    with Session(get_engine(f"sqlite:///{home / 'palimpsest.db'}"), expire_on_commit=False) as s:
        team = Team(name="After the crash", invite_code=new_invite_code())
        s.add(team)
        s.flush()
        u = create_user(s, email="crash@x.org", password="correct horse battery")
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        register_everywhere(s, u)
        _, token = create_token(s, user=u)
        s.commit()
    data, name = predictions("tric-binary", "dev", home, noise=0.2, seed=7)
    boundary = "----palimpsest"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="phase"\r\n\r\ndev\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="method_name"\r\n\r\nafter\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/tasks/tric-binary/submissions",
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        sid = json.loads(r.read())["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/submissions/{sid}",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            sub = json.loads(r.read())
        if sub["status"] in ("scored", "failed"):
            return sub
        time.sleep(0.5)
    raise AssertionError(f"submission {sid} still {sub['status']} after {timeout} s")


@pytest.mark.slow
def test_kill_9_serve_then_the_next_serve_owns_fresh_children_and_scores(tmp_path, demo_home):
    import psutil

    from server.jobs.embedded import EmbeddedRedis

    home = tmp_path / "h"
    log = tmp_path / "serve.log"
    port = _free_port()
    # the demo's tasks imported already, without `--demo`'s runs: its hundred-odd scoring jobs
    # queued ahead of the new submission cost a minute of CPU and prove nothing about supervision
    # (a work horse killed with its worker: test_a_work_horse_dies_with_its_worker)
    home.mkdir()
    (home / "tasks").symlink_to(demo_home / "tasks", target_is_directory=True)
    first = _serve(home, port, log)
    try:
        _wait_up(port, first, log)
        kids = _children(first.pid)
        direct = _children(first.pid, recursive=False)
        assert sorted(_kind(k) for k in direct if _kind(k) != "other") == ["redis", "worker"], [
            k.cmdline() for k in direct
        ]
        recorded = json.loads((home / "run" / "children.json").read_text())
        assert (
            recorded["serve"] == first.pid and len(recorded["workers"]) == 1 and recorded["redis"]
        )
        # kill -9: nothing is told; the kernel signals the children (PR_SET_PDEATHSIG)
        t0 = time.monotonic()
        first.kill()
        first.wait()
        gone, alive = psutil.wait_procs(kids, timeout=30)
        print(f"kill -9 serve: its {len(gone)} children gone in {time.monotonic() - t0:.1f} s")
        assert not alive, [p.cmdline() for p in alive]
        assert not EmbeddedRedis(home).alive()

        # leftovers that did outlive a serve (a Redis started outside any supervision, a worker
        # still finishing a job): the next serve stops them
        stray_redis = EmbeddedRedis(home)
        stray_redis.start()
        stray_redis_pid = stray_redis.proc.pid
        stray_worker = subprocess.Popen(
            [sys.executable, "-m", "server.jobs.worker"],
            env={**_env(home), "REDIS_URL": stray_redis.url},
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        (home / "run" / "children.json").write_text(
            json.dumps(
                {"serve": first.pid, "workers": [stray_worker.pid], "redis": stray_redis_pid}
            )
        )
        time.sleep(3)
        assert stray_worker.poll() is None

        second = _serve(home, port, log)
        _wait_up(port, second, log)
        assert stray_worker.wait(30) is not None
        stray_redis.proc.wait(30)
        text = log.read_text()
        assert "was still running" in text, text[-2000:]
        kids2 = _children(second.pid, recursive=False)
        kinds = sorted(_kind(k) for k in kids2 if _kind(k) != "other")
        assert kinds == ["redis", "worker"], [k.cmdline() for k in kids2]
        redis2 = next(k for k in kids2 if _kind(k) == "redis")
        assert redis2.pid != stray_redis_pid and EmbeddedRedis(home).pid() == redis2.pid
        assert "using the embedded Redis already running" not in text

        # a second serve on the same data directory is refused while this one runs
        third = subprocess.run(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(_free_port())],
            env=_env(home),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert third.returncode == 1 and "another palimpsest serve" in third.stderr

        sub = _submit_and_wait_scored(home, port)
        assert sub["status"] == "scored", sub
        # sign-in throttling counts in this serve's own Redis (its unix socket)
        statuses = _login_flood(port, "crash@x.org", 12)
        print(f"login flood through serve: {statuses}")
        assert (
            429 in statuses
            and statuses.index(429) < 10
            and set(statuses[: statuses.index(429)]) == {401}
        )
        import redis as redis_lib

        keys = list(
            redis_lib.Redis(unix_socket_path=str(EmbeddedRedis(home).socket)).scan_iter(count=1000)
        )
        assert any(b"login-account" in k for k in keys), keys

        # and this serve's own Redis, when it dies, is started again under supervision
        redis2.kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = [k for k in _children(second.pid) if _kind(k) == "redis"]
            if r and r[0].pid != redis2.pid:
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the supervisor did not restart its Redis")

        kids2 = _children(second.pid)
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
        _, alive = psutil.wait_procs(kids2, timeout=20)
        assert not alive, [p.cmdline() for p in alive]
        assert not (home / "run" / "children.json").exists()
    finally:
        for p in (first, locals().get("second")):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        _cleanup(home)


@pytest.mark.slow
def test_a_worker_stops_on_sigterm_while_its_redis_is_away(tmp_path):
    from conftest import build_schema

    from server.jobs.embedded import EmbeddedRedis

    home = tmp_path / "h"
    home.mkdir()
    build_schema(home)  # a worker refuses a database not at the migrations' head
    redis = EmbeddedRedis(home)
    redis.start()
    w = subprocess.Popen(
        [sys.executable, "-m", "server.jobs.worker"],
        env={**_env(home), "REDIS_URL": redis.url},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # the worker is up once it has registered itself in its Redis
        import redis as redis_py
        from rq import Worker

        conn = redis_py.Redis.from_url(redis.url)
        deadline = time.monotonic() + 60
        while not Worker.all(connection=conn):
            assert w.poll() is None and time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        redis.proc.kill()
        redis.proc.wait()
        # not a condition to poll for: the worker notices the lost Redis only when it next asks it
        time.sleep(4)
        t0 = time.monotonic()
        w.send_signal(signal.SIGTERM)
        assert w.wait(15) == 0
        print(f"worker without its Redis: stopped {time.monotonic() - t0:.1f} s after SIGTERM")
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def test_die_with_parent_on_linux(tmp_path):
    """A child that asked for PR_SET_PDEATHSIG dies when its parent is killed with SIGKILL."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import os, subprocess, sys, time; from server.jobs.procs import preexec_die_with_parent; "
        "p = subprocess.Popen(['sleep', '300'], preexec_fn=preexec_die_with_parent()); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(300)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = int(pidfile.read_text())
        from server.jobs.procs import pid_alive

        assert pid_alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()


def _busy_worker(home: Path, job_timeout: int):
    """A worker (as serve starts one) running a job that sleeps 60 s under `job_timeout`; returns
    the worker, its horse (psutil) and the Redis."""
    import psutil
    import redis as redis_lib
    from conftest import build_schema
    from rq import Queue
    from rq.serializers import JSONSerializer

    from server.jobs.embedded import EmbeddedRedis

    home.mkdir(parents=True, exist_ok=True)
    build_schema(home)  # a worker refuses a database not at the migrations' head
    emb = EmbeddedRedis(home)
    emb.start()
    w = subprocess.Popen(
        [sys.executable, "-m", "server.jobs.worker", "--queue", "scoring"],
        env={**_env(home), "REDIS_URL": emb.url},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    q = Queue(
        "scoring",
        connection=redis_lib.Redis(unix_socket_path=str(emb.socket)),
        serializer=JSONSerializer,
    )
    q.enqueue("time.sleep", 60, job_timeout=job_timeout)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        horses = [c for c in psutil.Process(w.pid).children() if c.status() != psutil.STATUS_ZOMBIE]
        if horses:
            return w, horses[0], emb
        time.sleep(0.1)
    w.kill()
    emb.stop()
    raise AssertionError("the worker never started the job")


@pytest.mark.slow
def test_a_busy_worker_stops_on_sigterm_within_the_job_timeout(tmp_path):
    w, horse, emb = _busy_worker(tmp_path / "h", job_timeout=4)
    try:
        t0 = time.monotonic()
        w.send_signal(signal.SIGTERM)  # warm: the job may finish, but no longer than its timeout
        assert w.wait(4 + 15) == 0
        print(
            f"busy worker: stopped {time.monotonic() - t0:.1f} s after SIGTERM (job timeout 4 s, "
            "job 60 s)"
        )
        assert not horse.is_running() or horse.status() == "zombie"
    finally:
        if w.poll() is None:
            w.kill()
        emb.stop()


@pytest.mark.slow
def test_a_work_horse_dies_with_its_worker(tmp_path):
    import psutil

    w, horse, emb = _busy_worker(tmp_path / "h", job_timeout=120)
    try:
        w.kill()
        w.wait()
        gone, alive = psutil.wait_procs([horse], timeout=10)
        assert not alive, "the work horse outlived its worker"
    finally:
        for p in (horse,):
            try:
                p.kill()
            except psutil.Error:
                pass
        emb.stop()


def test_a_worker_started_inside_its_data_directory_finds_the_package(tmp_path):
    """`serve` run from inside its data directory: the worker it starts loads the `tasks`
    package, not the data directory's `tasks/` folder (it would exit at once, restarted forever)."""
    from server.jobs.supervisor import WORKER_ARGV

    (tmp_path / "tasks" / "some-task").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as an installed site runs
    r = subprocess.run(
        [*WORKER_ARGV, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "--queue" in r.stdout, r.stderr[-2000:]
