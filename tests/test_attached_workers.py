"""Attached run workers end to end (server/jobs/attached.py, `palimpsest worker --attach URL
--token T`): a worker process with no database, Redis or store settings, in a network namespace of
its own where only the site's HTTP port is reachable (a relay), claims a system of its token's
competition, runs it in the sandbox and posts its output back; the site scores it and gates it
as every run. It never takes another competition's run; killed mid-run it loses its lease, the
run completes on another worker and is charged once; a result for an attempt a token does not
hold is refused."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from blindkit import SLUG, SYSTEM, TASK, _competition, _facts, _h, _zip
from sqlmodel import Session, select
from webkit import engine_of

from server.jobs import sandbox
from server.models import AuditLog, CodeRun, Competition, Submission

# what the attached worker must never load: the database, Redis, the queue, the store's client
NEVER = ("sqlalchemy", "sqlmodel", "psycopg", "psycopg2", "redis", "rq", "boto3", "botocore")
NEVER_SERVER = ("server.db", "server.objectstore", "server.models", "server.settings")
RELAY_PORT = 21080  # inside the worker's own network namespace: nothing else listens there

# Runs inside `unshare --net`: loopback up, the database, Redis and the site unreachable (asserted),
# a relay from 127.0.0.1:RELAY_PORT to the site through a Unix socket (the one way out), then the
# worker's command line; last, the modules it loaded that it must not.
WRAP = r"""
import json, os, socket, subprocess, sys, threading
sock_path, token, probe = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
reached = []
for host, port in probe:
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect((host, port))
        reached.append([host, port])
    except OSError:
        pass
    s.close()
print("REACHED " + json.dumps(reached), flush=True)

def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def relay():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", %(port)d))
    srv.listen(16)
    ready.set()
    while True:
        c, _ = srv.accept()
        u = socket.socket(socket.AF_UNIX)
        u.connect(sock_path)
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()

ready = threading.Event()
threading.Thread(target=relay, daemon=True).start()
ready.wait()
sys.argv = ["palimpsest", "worker", "--attach", "http://127.0.0.1:%(port)d", "--token", token,
            "--burst"]
never, never_server = %(never)r, %(never_server)r
try:
    from cli.main import main
    main()
except SystemExit as e:
    code = e.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(never))
loaded += sorted(m for m in never_server if m in sys.modules)
print("LOADED " + json.dumps(loaded), flush=True)
sys.exit(code or 0)
""" % {"port": RELAY_PORT, "never": NEVER, "never_server": NEVER_SERVER}


@pytest.fixture(autouse=True)
def _bwrap():
    why = sandbox.available() or (None if os.geteuid() == 0 else "needs root (unshare --net)")
    if why:
        from conftest import service_missing

        service_missing(why)


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own (the bundle installs its task here)."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


def _serve(app, tmp_path):
    """The app on a local port (a thread), and a Unix socket relaying to it: (its port, the
    socket's path, a stop function)."""
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    path = str(tmp_path / "site.sock")
    lsn = socket.socket(socket.AF_UNIX)
    lsn.bind(path)
    lsn.listen(16)

    def pump(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept():
        while True:
            try:
                c, _ = lsn.accept()
            except OSError:
                return
            t = socket.create_connection(("127.0.0.1", srv.server_port))
            threading.Thread(target=pump, args=(c, t), daemon=True).start()
            threading.Thread(target=pump, args=(t, c), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()

    def stop():
        lsn.close()
        srv.shutdown()

    return srv.server_port, path, stop


def _bare_env() -> dict:
    """The worker's environment: no database, Redis, store or data directory settings."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE", "REDIS", "PALIMPSEST_", "AWS_", "PG"))
    }


def _token(app, tok, name="lab box") -> tuple[str, int, int]:
    """A run worker's token for the example competition (its organizer's): (secret, id, the
    competition's id)."""
    from server.actions import competitions as comp

    with Session(engine_of(app)) as s:
        cid = comp.find(s, SLUG).id
    c = app.test_client()
    r = c.post(
        "/api/v1/run-workers/tokens",
        json={"name": name, "competitions": [cid]},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 201, r.json
    return r.json["token"], r.json["id"], cid


def _submit(app, tok, code: bytes) -> int:
    r = app.test_client().post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(code), "system.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    return r.json["id"]


def _other_competitions_run(app, like: int) -> int:
    """A run of another competition, queued in the same pool."""
    from server.domain import run_queue

    with Session(engine_of(app)) as s:
        b = Competition(slug="other-comp", title="Other")
        s.add(b)
        s.flush()
        src = s.get(CodeRun, like)
        r = CodeRun(
            team_id=src.team_id,
            task_id=src.task_id,
            phase_id=src.phase_id,
            archive_sha256="other",
            competition_id=b.id,
            storage_key=src.storage_key,
            manifest=dict(src.manifest),
            fields=dict(src.fields),
        )
        s.add(r)
        s.flush()
        run_queue.join_queue(s, r)
        s.commit()
        return r.id


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_app(request):
    """The web app on SQLite and on PostgreSQL."""
    return request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")


@pytest.mark.slow
def test_an_attached_worker_in_its_own_network_runs_its_competitions_system(any_app, tmp_path):
    from server.jobs.scoring import score_submission

    app = any_app
    tok = _competition(app)
    secret, token_id, _cid = _token(app, tok)
    rid = _submit(app, tok, _zip(SYSTEM, tmp_path / "system.zip"))
    other = _other_competitions_run(app, rid)
    port, sock, stop = _serve(app, tmp_path)
    probe = [["127.0.0.1", port], ["127.0.0.1", 5432], ["127.0.0.1", 6379]]
    try:  # the host's own address too: only the relay leads out
        probe.append([socket.gethostbyname(socket.gethostname()), port])
    except OSError:
        pass
    try:
        p = subprocess.run(
            ["unshare", "--net", "--", sys.executable, "-c", WRAP, sock, secret, json.dumps(probe)],
            env=_bare_env(),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        stop()
    out = p.stdout
    assert p.returncode == 0, (out, p.stderr[-3000:])
    reached = json.loads(out.split("REACHED ", 1)[1].splitlines()[0])
    assert reached == [], reached  # neither the site directly, nor PostgreSQL, nor Redis
    loaded = json.loads(out.rsplit("LOADED ", 1)[1].splitlines()[0])
    assert loaded == [], loaded
    posted = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert [x["run"] for x in posted] == [rid] and posted[0]["stage"] == "ran", (out, p.stderr)
    with Session(engine_of(app)) as s:
        r = s.get(CodeRun, rid)
        assert (r.stage, r.attempts, r.failure_kind) == ("ran", 1, None)
        assert r.outcome["status"] == "ok" and r.outcome["attempt"] == 1 and r.cpu_seconds > 0
        assert s.get(CodeRun, other).stage == "queued"  # another competition's: never claimed
        subs = s.exec(select(Submission).where(Submission.id == r.submission_id)).all()
        assert len(subs) == 1
        actions = [
            (a.action, a.details.get("token"))
            for a in s.exec(select(AuditLog).where(AuditLog.target == f"run:{rid}")).all()
        ]
        assert ("run.claim", token_id) in actions and ("run.result", token_id) in actions
    # scored as every run; the organizer reviews it as every run
    assert score_submission(posted[0]["submission"])["status"] == "scored"
    c = app.test_client()
    shown = c.get(f"/api/v1/runs/{rid}", headers=_h(tok["ann"])).json
    assert shown["stage"] == "ran" and shown["submission_status"] == "scored"
    r = c.post(f"/api/v1/runs/{rid}/review", json={"decision": "release"}, headers=_h(tok["admin"]))
    assert r.status_code == 200 and r.json["reviewed"]


@pytest.mark.slow
def test_a_killed_attached_worker_loses_its_run_which_completes_elsewhere_once(app, tmp_path):
    from server.api import run_workers as api_links
    from server.domain import run_queue

    settings = app.extensions["palimpsest.settings"]
    settings.stale_after, settings.heartbeat_every = 3.0, 1
    tok = _competition(app)
    secret, token_id, _cid = _token(app, tok)
    slow = (
        (SYSTEM / "predict.py")
        .read_text()
        .replace(
            "def main(inputs: str, out: str) -> None:",
            "def main(inputs: str, out: str) -> None:\n    import time\n    time.sleep(4)",
        )
    )
    rid = _submit(app, tok, _zip(SYSTEM, tmp_path / "slow.zip", {"predict.py": slow}))
    other = _other_competitions_run(app, rid)
    port, _sock, stop = _serve(app, tmp_path)
    cmd = [
        sys.executable,
        "-c",
        "from cli.main import main; main()",
        "worker",
        "--attach",
        f"http://127.0.0.1:{port}",
    ]
    c = app.test_client()
    try:
        w = subprocess.Popen(
            [*cmd, "--token", secret, "--burst"],
            env=_bare_env(),
            cwd=tmp_path,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def run():
            with Session(engine_of(app)) as s:
                return s.get(CodeRun, rid)

        t0 = time.monotonic()
        while run().stage != "running" and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        assert run().stage == "running" and run().held_by == f"token:{token_id}"
        time.sleep(1.5)  # in the sandbox, its lease renewed
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(10)
        # a result for an attempt the token does not hold: another competition's run, refused
        with app.test_request_context():
            forged = api_links._links().dumps([other, 1, token_id, api_links.RESULT, ""])
        body = {"result": json.dumps({"kind": "ok"}), "output": (io.BytesIO(b"{}\n"), "o")}
        r = c.post(f"/api/v1/worker/results/{forged}", data=body, headers=_h(secret))
        assert r.status_code == 409 and r.json["error"]["code"] == "not_held", r.json
        # silent past its lease: the reconciler's rule puts the run back in its queue
        time.sleep(settings.stale_after + 0.5)
        with Session(engine_of(app)) as s:
            assert [x for x, _ in run_queue.expired(s)] == [rid]
        assert run_queue.take_back(engine_of(app), rid)
        assert (run().stage, run().attempts) == ("queued", 1)
        # the killed attempt's result, posted late: refused, nothing recorded
        with app.test_request_context():
            late = api_links._links().dumps([rid, 1, token_id, api_links.RESULT, ""])
        body = {"result": json.dumps({"kind": "ok"}), "output": (io.BytesIO(b"{}\n"), "o")}
        r = c.post(f"/api/v1/worker/results/{late}", data=body, headers=_h(secret))
        assert r.status_code == 409 and r.json["error"]["code"] == "not_held", r.json
        # another worker (the same token on another machine) completes it, fast this time
        settings.stale_after = 60.0
        p = subprocess.run(
            [*cmd, "--token", secret, "--burst"],
            env=_bare_env(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop()
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGKILL)
    assert p.returncode == 0, p.stderr[-3000:]
    r = run()
    assert (r.stage, r.attempts) == ("ran", 2), (r.stage, r.reason)
    with Session(engine_of(app)) as s:
        from server.models import Phase

        subs = s.exec(select(Submission).where(Submission.phase_id == r.phase_id)).all()
        assert [x.id for x in subs] == [r.submission_id]  # one submission: charged once
        assert s.get(CodeRun, other).stage == "queued"
        from server.domain.submissions import quota

        q = quota(s, phase=s.get(Phase, r.phase_id), team_id=r.team_id)
    # its two uploads (this run and the other competition's run of the same team and phase),
    # each counted once whatever the attempts
    assert q["total_used"] == 2, q
