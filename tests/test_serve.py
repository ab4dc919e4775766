"""`palimpsest serve --demo` on a fresh data directory: one command brings up everything, a killed
worker is replaced, SIGTERM stops it all; plus the organizer commands through click's CliRunner."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workers(pid):
    import psutil

    out = []
    for c in psutil.Process(pid).children():
        try:
            if c.status() != psutil.STATUS_ZOMBIE and "server.jobs.worker" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:
            pass
    return out


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


@pytest.mark.slow
def test_serve_demo_on_a_fresh_machine(tmp_path):
    import psutil

    from server.jobs.embedded import EmbeddedRedis

    home = tmp_path / "h"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(PALIMPSEST_HOME=str(home), PYTHONPATH=str(REPO))
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--demo", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if _get(f"http://127.0.0.1:{port}/")[0] == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError((tmp_path / "serve.log").read_text()[-3000:])
        redis = EmbeddedRedis(home)
        assert redis.alive() and str(redis.socket).endswith(".sock")

        def scored():
            _, body = _get(f"http://127.0.0.1:{port}/tasks/tric-binary/leaderboard.json?phase=dev")
            return len(json.loads(body).get("rows", [])) >= 3

        t0 = time.monotonic()
        while time.monotonic() - t0 < 90 and not scored():
            time.sleep(1)
        assert scored(), (tmp_path / "serve.log").read_text()[-3000:]
        workers = _workers(proc.pid)
        assert len(workers) == 1
        workers[0].kill()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            again = [c for c in _workers(proc.pid) if c.pid != workers[0].pid]
            if again:
                break
            time.sleep(0.2)
        assert again, "the supervisor did not start a new worker"
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(40) == 0
        gone, alive = psutil.wait_procs(children, timeout=20)
        assert not alive, [p.cmdline() for p in alive]
        assert not redis.alive()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in psutil.process_iter(
            ["cmdline"]
        ):  # only what this test started, by its data directory
            if str(home) in " ".join(p.info["cmdline"] or []):
                try:
                    p.kill()
                except psutil.Error:
                    pass


def test_users_tokens_and_phases_commands(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from sqlalchemy import select
    from sqlmodel import Session

    from cli.main import main
    from server.db import get_engine
    from server.models import ApiToken, AuditLog, Phase, User
    from server.settings import Settings

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    r = CliRunner().invoke(
        main,
        ["users", "create", "--email", "Org@Example.org", "--password-stdin", "--organizer"],
        input="correct horse battery\n",
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["tokens", "create", "--email", "org@example.org"])
    assert r.exit_code == 0, r.output
    token = r.output.strip()
    r = CliRunner().invoke(
        main,
        [
            "phases",
            "set",
            "tric-binary",
            "test",
            "--opens",
            "2030-01-01T00:00Z",
            "--closes",
            "2030-02-01T12:00+01:00",
            "--daily-limit",
            "3",
            "--total-limit",
            "none",
            "--concurrent-limit",
            "1",
            "--public-fraction",
            "0.3",
        ],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["phases", "set", "tric-binary", "test", "--closes", "2029-01-01"])
    assert r.exit_code != 0 and "close after it opens" in r.output
    eng = get_engine(Settings.from_env().sqlalchemy_url())
    with Session(eng) as s:
        u = s.execute(select(User)).scalar_one()
        assert u.is_admin and u.password_hash.startswith("$argon2")
        tok = s.execute(select(ApiToken)).scalar_one()
        import hashlib

        assert (
            tok.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
            and token not in tok.token_sha256
        )
        p = s.execute(
            select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "test")
        ).scalar_one()
        assert (p.daily_limit, p.total_limit, p.concurrent_limit, p.public_fraction) == (
            3,
            None,
            1,
            0.3,
        )
        assert p.closes_at.hour == 11 and p.opens_at.year == 2030
        edit = s.execute(select(AuditLog).where(AuditLog.action == "phase.edit")).scalar_one()
        assert edit.details["via"] == "cli" and edit.details["after"]["daily_limit"] == 3
    # `phases list TASK` takes the task as `organizer phases list TASK` does
    r = CliRunner().invoke(main, ["phases", "list", "tric-binary"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines and all(x.startswith("tric-binary ") for x in lines)
    assert any(" test " in x and "daily 3 " in x for x in lines), lines
    r = CliRunner().invoke(main, ["phases", "list", "tric-binary", "--json"])
    rows = json.loads(r.output)
    assert {p["task"] for p in rows} == {"tric-binary"}
    test = next(p for p in rows if p["name"] == "test")
    assert test["limits"] == {"daily": 3, "total": None, "concurrent": 1}
    assert test["state"] == "not open yet"
    r = CliRunner().invoke(main, ["phases", "list", "no-such-task"])
    assert r.exit_code != 0 and "no-such-task" in r.output and "Traceback" not in r.output
    every = CliRunner().invoke(main, ["phases", "list"]).output.splitlines()
    # no task is imported here: only the phase set above, none made by default for the others
    # (so no placeholder competition for a task never imported)
    assert every == lines
