"""The tutorial of the documentation (docs/tutorial.md), command by command: from an empty data
directory to a published ranking of the example bundle's competition, with the server's shell for
the set-up and the remote CLI (over real HTTP) for the organizer and the participant."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK = "sts-latin-2027", "sts-latin"


def _run(env: dict, *args: str, stdin: str | None = None) -> str:
    from cli.main import main

    r = CliRunner().invoke(main, list(args), env=env, input=stdin, catch_exceptions=False)
    assert r.exit_code == 0, (args, r.output)
    return r.stdout


@pytest.fixture
def tutorial(tmp_path, monkeypatch):
    from argon2 import PasswordHasher

    from server import auth
    from tasks import unregister_declared

    monkeypatch.setattr(auth, "_hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1))
    home = tmp_path / "tutorial"
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    yield home
    unregister_declared(TASK)


def test_the_tutorial_from_an_empty_server_to_a_published_ranking(tutorial, tmp_path):
    from werkzeug.serving import WSGIRequestHandler, make_server

    from server import create_app

    home = tutorial
    local = {"PALIMPSEST_HOME": str(home)}
    # 1. the server's shell: a site administrator, the competition from the bundle, tokens
    _run(local, "db", "upgrade")
    pw = "correct horse battery staple\n"
    _run(
        local,
        "users",
        "create",
        "--email",
        "admin@example.org",
        "--password-stdin",
        "--admin",
        stdin=pw,
    )
    _run(local, "users", "create", "--email", "ann@example.org", "--password-stdin", stdin=pw)
    made = json.loads(
        _run(
            local, "competitions", "create", str(EXAMPLE), "--owner", "admin@example.org", "--json"
        )
    )
    assert (made["id"], made["tasks"]) == (SLUG, [TASK])
    admin = _run(local, "tokens", "create", "--email", "admin@example.org").strip()
    ann = _run(local, "tokens", "create", "--email", "ann@example.org").strip()

    # 2. the server (here in a thread; `palimpsest serve` in the tutorial)
    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    app = create_app({"home": home, "env": "testing", "PALIMPSEST_ENQUEUE": False})
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}"
    org = {"PALIMPSEST_SERVER": url, "PALIMPSEST_TOKEN": admin, "XDG_CONFIG_HOME": "/nonexistent"}
    part = dict(org, PALIMPSEST_TOKEN=ann, PALIMPSEST_HOME=str(tmp_path / "ann"))
    try:
        # 3. the organizer opens it: visible, the development phase open now
        _run(org, "organizer", "competitions", "edit", SLUG, "--state", "visible")
        _run(
            org,
            "organizer",
            "phases",
            "edit",
            TASK,
            "development",
            "--opens",
            "none",
            "--closes",
            "none",
        )
        # 4. the participant registers; the organizer approves; a team; the data; a run
        out = _run(part, "register", SLUG, "--accept-terms", "--json")
        assert json.loads(out)["status"] == "pending"
        _run(org, "organizer", "approve", SLUG, "ann@example.org")
        _run(part, "teams", "create", "Lexica", "--competition", SLUG)
        _run(part, "download", TASK)
        assert (tmp_path / "ann" / "tasks" / TASK).is_dir()
        sub = json.loads(
            _run(
                part,
                "submit",
                TASK,
                str(EXAMPLE / "predictions-dev.jsonl"),
                "--phase",
                "development",
                "--primary",
                "--fact",
                "external_data=no",
                "--json",
            )
        )
        from server.jobs import score_submission

        assert score_submission(sub["id"])["status"] == "scored"  # what a worker does
        # 5. the organizer closes the phase and publishes its ranking
        _run(org, "organizer", "close", TASK, "development")
        _run(org, "organizer", "publish", TASK, "development", "--yes")
        board = json.loads(_run(part, "leaderboard", TASK, "--phase", "development", "--json"))
        assert board["published"] and [r["team"] for r in board["rows"]] == ["Lexica"]
    finally:
        srv.shutdown()
