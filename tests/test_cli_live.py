"""The participant CLI against a live server started by the test (the embedded default):
login, download, validate, submit --wait, leaderboard, and each failure with its message."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import REPO, TROTR, need

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(args, env, stdin=None, check=False):
    r = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    if check and r.returncode != 0:
        raise AssertionError(
            f"palimpsest {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        )
    return r


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    need(TROTR)
    base = tmp_path_factory.mktemp("live")
    server_home = base / "server"
    env = {**os.environ, "PALIMPSEST_HOME": str(server_home), "PYTHONPATH": str(REPO)}
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    # the organizer's setup through the same commands in this process (each process of its own
    # imported the app again: ~3 s of CPU apiece); the server and the participant's commands below
    # run in processes of their own
    from click.testing import CliRunner

    from cli.main import main

    def organizer(args, stdin=None):
        r = CliRunner().invoke(main, args, env=env, input=stdin, catch_exceptions=False)
        assert r.exit_code == 0, (args, r.output)
        return r

    organizer(["tasks", "import", "tric-binary", "--from", str(TROTR)])
    organizer(
        ["users", "create", "--email", "team@example.org", "--password-stdin"],
        stdin="correct horse battery\n",
    )
    token = organizer(["tokens", "create", "--email", "team@example.org"]).stdout.strip()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/v1/openapi.json", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(
                    "serve exited: " + proc.stderr.read().decode()[-2000:]
                ) from None
            time.sleep(0.3)
    else:
        proc.kill()
        raise AssertionError("the server did not come up in 60 s")
    # the participant joins a team (what the web page does)
    from sqlmodel import Session, create_engine, select

    from server.models import Team, TeamMember, User

    eng = create_engine(f"sqlite:///{server_home / 'palimpsest.db'}")
    with Session(eng) as s:
        team = Team(name="Team <b>Bold</b>", invite_code="live-code")
        s.add(team)
        s.commit()
        u = s.exec(select(User).where(User.email == "team@example.org")).one()
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        s.commit()
    eng.dispose()
    participant = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "XDG_CONFIG_HOME": str(base / "config"),
        "PALIMPSEST_HOME": str(base / "participant"),
    }
    for k in ("PALIMPSEST_SERVER", "PALIMPSEST_TOKEN"):
        participant.pop(k, None)
    yield {"url": url, "token": token, "env": participant, "server_env": env, "base": base}
    os.killpg(proc.pid, 15)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


def _predictions(path: Path, inputs: Path, flip_every: int = 4) -> Path:
    rows = [json.loads(x) for x in inputs.read_text().splitlines()]
    # a prediction from the inputs alone: related when both contexts are long (a stand-in model)
    with path.open("w") as f:
        for i, r in enumerate(rows):
            label = int(len(r["context1"]) + len(r["context2"]) > 300)
            if i % flip_every == 0:
                label = 1 - label
            f.write(json.dumps({"instanceID": r["instanceID"], "label": label}) + "\n")
    return path


def test_full_loop(live):
    env = live["env"]
    r = _run(["login", "--server", live["url"], "--token", live["token"]], env, check=True)
    assert "logged in" in r.stdout and "Team <b>Bold</b>" in r.stdout
    cfg = Path(env["XDG_CONFIG_HOME"]) / "palimpsest" / "config.json"
    assert oct(cfg.stat().st_mode & 0o777) == "0o600"
    assert json.loads(cfg.read_text())["token"] == live["token"]

    tasks = json.loads(_run(["tasks", "--json"], env, check=True).stdout)
    tric = next(t for t in tasks if t["id"] == "tric-binary")
    assert {p["name"] for p in tric["phases"]} >= {"dev", "test"}

    _run(["download", "tric-binary", "--home", env["PALIMPSEST_HOME"]], env, check=True)
    inputs = (
        Path(env["PALIMPSEST_HOME"]) / "tasks" / "tric-binary" / "public" / "test" / "inputs.jsonl"
    )
    assert inputs.is_file()
    assert not (Path(env["PALIMPSEST_HOME"]) / "tasks" / "tric-binary" / "gold").exists()

    pred = _predictions(live["base"] / "pred.jsonl", inputs)
    assert (
        _run(["validate", "tric-binary", str(pred)], env).returncode == 0
    )  # offline, no server asked

    r = _run(
        [
            "submit",
            "tric-binary",
            str(pred),
            "--phase",
            "test",
            "--method-name",
            "length",
            "--wait",
            "--json",
        ],
        env,
        check=True,
    )
    out = json.loads(r.stdout)
    assert out["status"] == "scored"
    scores = out["scores"]
    assert scores["task"] == "tric-binary" and scores["split"] == "test"
    assert set(scores["metrics"]) == {"all", "oov", "iov"} and scores["primary"]["name"] == "f1"

    subs = json.loads(_run(["submissions", "--json"], env, check=True).stdout)
    assert subs[0]["id"] == out["id"]
    assert {"id", "task", "phase", "status", "created"} <= set(subs[0])
    assert "scored" in _run(["status", str(out["id"])], env, check=True).stdout

    board = json.loads(
        _run(["leaderboard", "tric-binary", "--phase", "test", "--json"], env, check=True).stdout
    )
    assert any(row.get("team") == "Team <b>Bold</b>" for row in board["rows"])
    ours = next(row for row in board["rows"] if row.get("team") == "Team <b>Bold</b>")
    table = _run(["leaderboard", "tric-binary", "--phase", "test"], env, check=True).stdout
    line = next(x for x in table.splitlines() if "Team <b>Bold</b>" in x)
    assert f"{ours['metrics']['all/f1']:.4f}" in line and " team " in f" {line} "


def test_baselines_recorded_on_a_server_with_an_organizer_token(live):
    """A GPU machine's run: the public inputs downloaded, the baseline written there, and recorded
    on the server through the REST API; the server scores it and shows it as a baseline row."""
    senv, env = live["server_env"], dict(live["env"], PALIMPSEST_HOME=str(live["base"] / "gpu-box"))
    _run(
        ["users", "create", "--email", "org@example.org", "--password-stdin", "--organizer"],
        senv,
        stdin="correct horse battery\n",
        check=True,
    )
    org = _run(["tokens", "create", "--email", "org@example.org"], senv, check=True).stdout.strip()
    _run(["login", "--server", live["url"], "--token", org], env, check=True)
    _run(["download", "tric-binary", "--home", env["PALIMPSEST_HOME"]], env, check=True)
    args = [
        "baselines",
        "run",
        "--task",
        "tric-binary",
        "--system",
        "lexical",
        "--quiet",
        "--json",
        "--out",
        str(live["base"] / "gpu-out"),
        "--server",
        live["url"],
    ]
    # a participant's token is refused, saying why
    r = _run([*args, "--token", live["token"]], env)
    assert r.returncode != 0 and "organizer" in r.stderr and "Traceback" not in r.stderr
    (run,) = json.loads(_run(args, env, check=True).stdout)  # the token `login` saved
    assert run["scores"] is None  # no test gold on this machine: only the server scores it
    (rec,) = run["recorded"]
    assert rec["phase"] == "test" and rec["duplicate"] is False
    (again,) = json.loads(_run(args, env, check=True).stdout)
    assert again["recorded"] == [dict(rec, duplicate=True)]
    deadline = time.time() + 60
    while time.time() < deadline:
        sub = json.loads(
            _run(["status", str(rec["submission_id"]), "--json"], env, check=True).stdout
        )
        if sub["status"] in ("scored", "failed"):
            break
        time.sleep(0.5)
    assert (
        sub["status"] == "scored" and sub["is_baseline"] is True and sub["method_name"] == "lexical"
    )
    board = json.loads(
        _run(["leaderboard", "tric-binary", "--phase", "test", "--json"], env, check=True).stdout
    )
    (row,) = [x for x in board["rows"] if x.get("row_type") == "baseline"]
    assert row["team"] == "Baselines" and row.get("rank") is None
    assert row["metrics"]["all/f1"] == pytest.approx(sub["scores"]["metrics"]["all"]["f1"])


def test_failures_have_one_line_messages(live):
    env = dict(live["env"], PALIMPSEST_SERVER=live["url"], PALIMPSEST_TOKEN=live["token"])
    senv = live["server_env"]
    inputs = (
        live["base"] / "participant" / "tasks" / "tric-binary" / "public" / "test" / "inputs.jsonl"
    )
    if not inputs.is_file():
        _run(["download", "tric-binary", "--home", env["PALIMPSEST_HOME"]], env, check=True)

    # server unreachable
    r = _run(["submissions"], dict(env, PALIMPSEST_SERVER=f"http://127.0.0.1:{_free_port()}"))
    assert (
        r.returncode != 0 and "cannot reach the server" in r.stderr and "Traceback" not in r.stderr
    )

    # wrong token
    r = _run(["submissions"], dict(env, PALIMPSEST_TOKEN="pal_wrong"))
    assert r.returncode != 0 and "token" in r.stderr.lower() and "Traceback" not in r.stderr

    # invalid file: offline validate lists the problems; a submitted one fails with them
    bad = live["base"] / "bad.jsonl"
    bad.write_text('{"instanceID": "nope", "label": 2}\n')
    r = _run(["validate", "tric-binary", str(bad)], env)
    assert r.returncode == 1 and "line 1" in r.stderr and "must be 0 or 1" in r.stderr
    r = _run(["submit", "tric-binary", str(bad), "--phase", "dev", "--wait"], env)
    assert r.returncode == 1 and "failed" in r.stdout and "line 1" in r.stdout

    # limit reached, with the time the next one is allowed
    _run(["phases", "set", "tric-binary", "dev", "--daily-limit", "1"], senv, check=True)
    dev_inputs = inputs.parent.parent / "dev" / "inputs.jsonl"
    ok = _predictions(live["base"] / "ok1.jsonl", dev_inputs, flip_every=3)
    _run(["submit", "tric-binary", str(ok), "--phase", "dev", "--wait"], env, check=True)
    again = _predictions(live["base"] / "ok2.jsonl", dev_inputs, flip_every=5)
    r = _run(["submit", "tric-binary", str(again), "--phase", "dev"], env)
    assert r.returncode != 0 and "next is allowed at" in r.stderr and "Traceback" not in r.stderr

    # phase closed
    past = (datetime.utcnow() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    _run(["phases", "set", "tric-binary", "test", "--closes", past], senv, check=True)
    r = _run(
        [
            "submit",
            "tric-binary",
            str(_predictions(live["base"] / "t.jsonl", inputs, flip_every=6)),
            "--phase",
            "test",
        ],
        env,
    )
    assert r.returncode != 0 and "closed" in r.stderr.lower() and "Traceback" not in r.stderr


def test_participant_commands_import_nothing_heavy(tmp_path):
    """`--help` and `validate` must start fast: no torch, sentence-transformers or scipy loaded."""
    code = (
        "import sys\nfrom cli.main import main\n"
        "try:\n    main(['validate', 'tric-binary', sys.argv[1]], standalone_mode=False)\n"
        "except BaseException:\n    pass\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'scipy', 'sklearn', 'flask',"
        " 'rq') if m in sys.modules))"
    )
    f = tmp_path / "p.jsonl"
    f.write_text('{"instanceID": "x", "label": 1}\n')
    r = subprocess.run(
        [sys.executable, "-c", code, str(f)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PALIMPSEST_HOME": str(tmp_path)},
    )
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr


def test_help_imports_no_numeric_library():
    code = (
        "import sys\nfrom cli.main import main\n"
        "try:\n    main(['--help'], standalone_mode=False)\nexcept BaseException:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'torch', 'flask', 'sqlalchemy', 'rq')"
        " if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr
