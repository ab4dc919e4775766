"""A blind run stays blind: hostile systems (the one that writes the hidden inputs as ids, the one
that encodes them in its exit status and its output's size, the one that prints them) leave every
view of their team (the API, the web pages, the participants' CLI) free of every input line before
review, and after a review that redacts or withholds the log; a released log is shown as it is. A
run reads only the areas the download rule releases; an archive with a control character in its
manifest or a member named like its folder is refused naming it; the compute budget is reserved
when a run is queued, so 20 parallel submissions never overshoot it by more than one run.

Against a served site (werkzeug on a port) on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from datetime import timedelta

import pytest
from blindkit import (
    EXAMPLE,
    SYSTEM,
    TASK,
    _competition,
    _facts,
    _h,
    _http,
    _phase,
    _second_team,
    _submit,
    _zip,
    app_tmp,
)
from browserkit import (
    driver,  # noqa: F401  (driver: Chromium, console read)
    live,  # noqa: F401  (live: the app served on a port)
)
from click.testing import CliRunner
from seaweed import seaweedfs  # noqa: F401 - the fixture
from sqlmodel import Session, select
from webkit import Browser, engine_of, update_phase

from server.jobs import sandbox
from server.models import CodeRun, Phase, utcnow

INPUTS = EXAMPLE / TASK / "test" / "inputs.jsonl"


@pytest.fixture(autouse=True)
def _bwrap():
    why = sandbox.available()
    if why:
        from conftest import service_missing

        service_missing(why)


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    from tasks import unregister_declared

    unregister_declared(TASK)  # before too: another module's test on this worker may declare it
    yield
    unregister_declared(TASK)


@pytest.fixture
def web_home(tmp_path, home):
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    return d


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def site(request):
    """The app on SQLite or PostgreSQL, served on a local port: (app, base URL)."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    app = request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield app, f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def _secrets() -> list[str]:
    """What must never reach the team: each hidden input's id and sentences."""
    out = []
    for line in INPUTS.read_text().splitlines():
        rec = json.loads(line)
        out += [rec["pair_id"], rec["sentence1"], rec["sentence2"]]
    return out


# the leak trio: each writes a third of the hidden inputs as ids, 70 characters at a time (its
# output's problems, line by line, quote them)
LEAK = """import json
raw = open('/input/inputs.jsonl').read()
third = -(-len(raw) // 3)
part = raw[PART * third:(PART + 1) * third]
with open('/output/predictions.jsonl', 'w') as f:
    for i in range(0, len(part), 70):
        f.write(json.dumps({'pair_id': part[i:i + 70], 'score': 0.5}) + '\\n')
"""
# the encoder: the first sentence's first bytes as its output's size and its exit status
ENCODER = """import json, sys
s = json.loads(open('/input/inputs.jsonl').readline())['sentence1'].encode()
open('/output/predictions.jsonl', 'wb').write(b'x' * (s[0] * 256 + s[1]))
sys.exit(s[2])
"""
# the log printer: the inputs on stdout, then a valid output
PRINTER = """import json, shutil
print(open('/input/inputs.jsonl').read())
with open('/output/predictions.jsonl', 'w') as f:
    for rec in map(json.loads, open('/input/inputs.jsonl')):
        f.write(json.dumps({'pair_id': rec['pair_id'], 'score': 0.5}) + '\\n')
"""


_WEB: dict[int, Browser] = {}


def _team_views(app, base, token, rid) -> str:
    """Everything the team reads of run `rid`: the API's run and submission, the web's run and
    submission pages, the CLI's `palimpsest run` (JSON and text)."""
    from cli.main import main

    texts = []
    code, run = _http("GET", f"{base}/api/v1/runs/{rid}", token)
    assert code == 200, run
    texts.append(run)
    with Session(engine_of(app)) as s:  # its output's number (a team may guess it)
        sid = s.get(CodeRun, rid).submission_id
    if sid is not None:
        code, sub = _http("GET", f"{base}/api/v1/submissions/{sid}", token)
        assert code == 200, sub
        texts.append(sub)
    web = _WEB.get(id(app))
    if web is None:  # signed in once (sign-ins are throttled)
        web = _WEB[id(app)] = Browser(app.test_client())
        web.login("ann@x.org")
    page = web.get(f"/runs/{rid}")
    assert page.status_code == 200
    texts.append(page.get_data(as_text=True))
    if sid is not None:
        page = web.get(f"/submissions/{sid}")  # a gated one: the run's page
        assert page.status_code in (200, 302)
        texts.append(page.get_data(as_text=True))
    env = {"PALIMPSEST_SERVER": base, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nonexistent"}
    for args in (["run", str(rid), "--json"], ["run", str(rid)]):
        r = CliRunner().invoke(main, args, env=env)
        texts.append(r.output)
    return "\n".join(texts)


def _free_of_inputs(text: str) -> None:
    for secret in _secrets():
        assert secret not in text, secret
    assert "LAT-test" not in text


def _shown_now(app, *rids) -> None:
    """Move runs' submission back a day: their results are past `shown_from` (their wall limit
    and the site's delay)."""
    with Session(engine_of(app)) as s:
        for rid in rids:
            r = s.get(CodeRun, rid)
            r.created_at = r.created_at - timedelta(days=1)
            r.shown_at = r.shown_at and r.shown_at - timedelta(days=1)
            s.add(r)
        s.commit()


def test_hostile_systems_learn_nothing_of_the_hidden_inputs_before_release(site):
    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission

    app, base = site
    tok = _competition(app)
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={
            "blind": True,
            "compute_budget_seconds": None,
            "daily_limit": None,
            "total_limit": None,
            "concurrent_limit": None,
        },
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    runs = {}
    systems = [(f"leak{k}", LEAK.replace("PART", str(k))) for k in range(3)]
    for name, script in systems + [("encoder", ENCODER), ("printer", PRINTER)]:
        # each system is its own archive: the script replaces predict.py
        code, body = _submit(
            base,
            tok["ann"],
            _zip(SYSTEM, app_tmp(app) / f"{name}-x.zip", {"predict.py": script}),
        )
        assert code == 201, body
        rid = json.loads(body)["id"]
        got = run_system(rid)
        if got.get("submission"):
            score_submission(got["submission"])
        runs[name] = rid
    from server.domain import code_runs
    from server.models import Submission

    with Session(engine_of(app)) as s:
        leaks = [s.get(CodeRun, runs[f"leak{k}"]) for k in range(3)]
        enc = s.get(CodeRun, runs["encoder"])
        printer = s.get(CodeRun, runs["printer"])
        assert all(x.stage == "ran" for x in leaks + [printer]), [x.reason for x in leaks]
        assert enc.stage == "failed" and enc.outcome["exit_code"] > 0
        assert all(s.get(Submission, x.submission_id).status == "failed" for x in leaks)
        # the organizers have it all: the whole inputs among the three outputs' problems (what
        # a release would give the team, shown on the review), the log
        assert "LAT-test" in printer.log
        told = "".join(code_runs.review_text(s, x) for x in leaks)
    assert "LAT-test-0000" in told and "LAT-test-0249" in told
    org = json.loads(_http("GET", f"{base}/api/v1/runs/{runs['encoder']}", tok["admin"])[1])
    assert org["resources"]["exit_code"] == enc.outcome["exit_code"]
    assert f"exit_code {enc.outcome['exit_code']}" in org["review_text"]
    # the team, before the result is shown: "submitted", nothing else
    for name, rid in runs.items():
        text = _team_views(app, base, tok["ann"], rid)
        _free_of_inputs(text)
        shown = json.loads(_http("GET", f"{base}/api/v1/runs/{rid}", tok["ann"])[1])
        assert shown["stage"] == "submitted" and shown["category"] == "submitted", name
        assert shown.get("resources", {}) == {} and shown.get("cpu_seconds") is None, name
        assert shown.get("log") is None and shown.get("started") is None, name
        assert shown.get("submission") is None and shown["attempts"] == 0, name
    # once shown: one word and (scored) the scores; never a line, an id, a count, a size, a time
    _shown_now(app, *runs.values())
    for rid in runs.values():
        _free_of_inputs(_team_views(app, base, tok["ann"], rid))
    enc_seen = json.loads(_http("GET", f"{base}/api/v1/runs/{runs['encoder']}", tok["ann"])[1])
    assert enc_seen["category"] == "failed: the system" and enc_seen.get("reason", "") == ""
    assert str(enc.outcome["exit_code"]) not in json.dumps(enc_seen)
    leak_seen = json.loads(_http("GET", f"{base}/api/v1/runs/{runs['leak0']}", tok["ann"])[1])
    assert leak_seen["category"] == "invalid output" and leak_seen.get("submission") is None
    sub = json.loads(
        _http("GET", f"{base}/api/v1/submissions/{leaks[0].submission_id}", tok["ann"])[1]
    )
    assert sub.get("size") is None and sub.get("sha256") is None
    assert sub.get("started") is None and sub.get("finished") is None
    assert [(e.get("line"), e.get("id"), e["message"]) for e in sub["errors"]] == [
        (None, None, "invalid output")
    ]

    # the review: nothing is released by default, on the API, the organizers' CLI and the web
    def review(rid, body, want=200):
        code, out = _http(
            "POST",
            f"{base}/api/v1/runs/{rid}/review",
            tok["admin"],
            json.dumps(body).encode(),
            "application/json",
        )
        assert code == want, out
        return json.loads(out)

    from cli.main import main

    env = {"PALIMPSEST_SERVER": base, "PALIMPSEST_TOKEN": tok["admin"]}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    for k in range(3):
        review(runs[f"leak{k}"], {}, 422)  # the default action: none
        r = CliRunner().invoke(main, ["organizer", "review", str(runs[f"leak{k}"])], env=env)
        assert r.exit_code == 2 and "--release" in r.output
    web = Browser(app.test_client())
    web.login("admin@x.org")
    page = web.get(f"/runs/{runs['leak0']}")
    form = page.get_data(as_text=True)
    assert "LAT-test-0000" in form  # the reviewer reads what a release would give, in one place
    assert 'value="release" required>' in form and "checked" not in form
    web.post(f"/runs/{runs['leak0']}/review", data={"note": "x"})  # no decision chosen
    with Session(engine_of(app)) as s:
        assert all(s.get(CodeRun, runs[f"leak{k}"]).release is None for k in range(3))
    for k in range(3):
        _free_of_inputs(_team_views(app, base, tok["ann"], runs[f"leak{k}"]))
    review(runs["leak0"], {"decision": "redact"}, 422)  # a redaction names what the team reads
    review(runs["leak0"], {"decision": "redact", "log": "the output, its ids removed"})
    review(runs["encoder"], {"decision": "withhold", "note": "it encoded the inputs"})
    for rid in (runs["leak0"], runs["encoder"]):
        _free_of_inputs(_team_views(app, base, tok["ann"], rid))
    seen = json.loads(_http("GET", f"{base}/api/v1/runs/{runs['leak0']}", tok["ann"])[1])
    assert seen["log"] == "the output, its ids removed" and seen["redacted"]
    seen = json.loads(_http("GET", f"{base}/api/v1/runs/{runs['encoder']}", tok["ann"])[1])
    assert seen.get("log") is None and seen["review_note"] == "it encoded the inputs"
    # the audit entry records what was released
    from server.models import AuditLog

    with Session(engine_of(app)) as s:
        rows = s.exec(select(AuditLog).where(AuditLog.action == "run.review")).all()
    redacted = next(a for a in rows if a.target == f"run:{runs['leak0']}")
    assert redacted.details["released"] == ["text"]
    assert redacted.details["released_chars"] == len("the output, its ids removed")
    # the test can fail: a release as it is gives the team what the review showed
    review(runs["printer"], {"decision": "release"})
    text = _team_views(app, base, tok["ann"], runs["printer"])
    assert "LAT-test-0000" in text
    r = CliRunner().invoke(
        main,
        ["organizer", "review", str(runs["printer"]), "--withhold", "--note", "sorry", "--json"],
        env=env,
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["release"] == "withhold"
    _free_of_inputs(_team_views(app, base, tok["ann"], runs["printer"]))


def test_a_run_reads_no_split_that_is_not_released(site, tmp_path):
    """A system on a non-blind phase lists /input and prints every file: the test split, whose
    phase opens next year, is not among them (its download answers 403); the dev split is. Every
    view of the team (the API, the web pages, the CLI) shows that log, and nothing of the test
    split."""
    from server.jobs.run_jobs import run_system

    app, base = site
    tok = _competition(app)
    c = app.test_client()
    systems, evaluation = _phase(app, "systems"), _phase(app, "evaluation")
    update_phase(app, systems.id, split="dev", blind=False)
    update_phase(app, evaluation.id, opens_at=utcnow() + timedelta(days=200), inputs_at=None)
    r = c.get(f"/api/v1/tasks/{TASK}/download?split=test", headers=_h(tok["ann"]))
    assert r.status_code == 403 and r.json["error"]["code"] == "not_released"
    lister = (
        "import os\n"
        "for d, _, fs in os.walk('/input'):\n"
        "    for f in fs:\n"
        "        p = os.path.join(d, f)\n"
        "        print(p)\n"
        "        print(open(p).read())\n"
        "raise SystemExit(3)\n"
    )
    code, body = _submit(
        base, tok["ann"], _zip(SYSTEM, tmp_path / "ls.zip", {"predict.py": lister})
    )
    assert code == 201, body
    rid = json.loads(body)["id"]
    assert run_system(rid)["stage"] == "failed"
    seen = json.loads(_http("GET", f"{base}/api/v1/runs/{rid}", tok["ann"])[1])
    log = seen["log"]  # an open phase: the team reads it at once
    assert "/input/inputs.jsonl" in log and "LAT-dev" in log
    assert "/test/" not in log and "LAT-test" not in log
    views = _team_views(app, base, tok["ann"], rid)
    assert "LAT-dev" in views  # the log is there (the test can fail)
    assert "/input/public/test" not in views
    _free_of_inputs(views)


def _zip_bytes(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()


def test_archives_are_checked_completely_at_upload(app):
    tok = _competition(app)
    c = app.test_client()
    predict = (SYSTEM / "predict.py").read_text()

    def post(members):
        return c.post(
            f"/api/v1/tasks/{TASK}/runs",
            data={
                "phase": "systems",
                "code": (io.BytesIO(_zip_bytes(members)), "s.zip"),
                **_facts(),
            },
            headers=_h(tok["ann"]),
            content_type="multipart/form-data",
        )

    good = "command: [python3, predict.py, /input/inputs.jsonl, /output/p.jsonl]\n"
    for manifest, where in (
        (good + 'output: "p\\0.jsonl"\n', "output"),
        (good.replace("p.jsonl]", 'p.jsonl, "a\\x01b"]') + "output: p.jsonl\n", "command"),
        ('command: ["python3\\n", predict.py]\n', "command"),
    ):
        r = post({"system.yaml": manifest, "predict.py": predict})
        assert r.status_code == 422, (manifest, r.json)
        assert r.json["error"]["code"] == "invalid_system"
        assert where in json.dumps(r.json["error"]["problems"]), r.json
    r = post({"system.yaml": good + "output: p.jsonl\n", "bad\x07name.py": "x"})
    assert r.status_code == 422
    assert [p["id"] for p in r.json["error"]["problems"]] == ["bad\x07name.py"]
    # a single top folder holding a file of its own name: unpacked, not a server error
    r = post(
        {
            "sys/system.yaml": good + "output: p.jsonl\n",
            "sys/predict.py": predict,
            "sys/sys": "a file named like its folder",
        }
    )
    assert r.status_code == 201, r.json
    with Session(engine_of(app)) as s:
        assert len(s.exec(select(CodeRun)).all()) == 1


def test_the_compute_budget_is_reserved_when_runs_are_queued(site, tmp_path):
    """20 parallel submissions against a budget of 5 CPU seconds: the runs queued reserve their
    CPU limit, so what they may use is at most the budget plus one run's limit; a run that ends
    settles its reservation to what it used, a server failure gives it back."""
    from concurrent.futures import ThreadPoolExecutor

    from server.domain import code_runs
    from server.domain.submissions import compute_used
    from server.jobs.run_jobs import run_system

    app, base = site
    tok = _competition(app)
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={
            "compute_budget_seconds": 5,
            "daily_limit": None,
            "total_limit": None,
            "concurrent_limit": None,
        },
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    zips = [_zip(SYSTEM, tmp_path / f"s{i}.zip", {"README": f"variant {i}"}) for i in range(20)]
    with ThreadPoolExecutor(20) as pool:
        got = list(pool.map(lambda z: _submit(base, tok["ann"], z), zips))
    codes = sorted(code for code, _ in got)
    assert set(codes) <= {201, 429}, got
    assert codes.count(201) >= 1
    phase = _phase(app, "systems")
    with Session(engine_of(app)) as s:
        rows = s.exec(select(CodeRun).where(CodeRun.phase_id == phase.id)).all()
        limit = max(r.reserved_cpu for r in rows)
        assert limit == 60  # the example's declared CPU limit
        team_id = rows[0].team_id
        # what the queued runs may use: within the budget plus one run's limit
        assert compute_used(s, team_id, phase.id) <= 5 + limit
        assert len(rows) == 1
    for code, body in got:
        if code == 429:
            assert json.loads(body)["error"]["code"] == "limit_reached"
    (run,) = rows
    assert run_system(run.id)["stage"] == "ran"
    with Session(engine_of(app)) as s:
        r = s.get(CodeRun, run.id)
        assert r.reserved_cpu == 0 and r.cpu_seconds > 0
        assert compute_used(s, team_id, phase.id) == pytest.approx(r.cpu_seconds)
    # a server failure gives its reservation back
    with Session(engine_of(app)) as s:
        s.get(Phase, phase.id).compute_budget_seconds = None
        s.commit()
    code, body = _submit(base, tok["ann"], _zip(SYSTEM, tmp_path / "x.zip", {"README": "x"}))
    assert code == 201, body
    rid = json.loads(body)["id"]
    with Session(engine_of(app)) as s:
        before = compute_used(s, team_id, phase.id)
    assert code_runs.fail_infra(engine_of(app), rid, "a test's server failure")
    with Session(engine_of(app)) as s:
        assert compute_used(s, team_id, phase.id) == pytest.approx(before - 60)
        # failed twice by the server: the same archive is not run again
        s.get(CodeRun, rid).attempts = code_runs.MAX_ATTEMPTS
        s.commit()
    code, body = _submit(base, tok["ann"], _zip(SYSTEM, tmp_path / "x2.zip", {"README": "x"}))
    assert code == 409 and "failed_twice" in body, body


@pytest.mark.parametrize("broken", ["bwrap", "setpriv"])
def test_a_run_whose_sandbox_fails_is_infra_and_not_charged(app, tmp_path, monkeypatch, broken):
    """The wrapper fails before the system starts (bwrap refusing its namespaces; setpriv unable
    to become the run's user): the run fails `infra` ("server failure" to its team), its
    reservation goes back to the budget, nothing is charged, and the same archive is welcome
    again (it runs and is charged once the wrapper works)."""
    import os

    from server.domain.submissions import compute_used
    from server.jobs.run_jobs import run_system

    if broken == "setpriv" and os.geteuid() != 0:
        pytest.skip("setpriv is used by a root worker only")
    tok = _competition(app)
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"compute_budget_seconds": 100, "daily_limit": None, "concurrent_limit": None},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    code = _zip(SYSTEM, tmp_path / "s.zip")

    def submit():
        r = c.post(
            f"/api/v1/tasks/{TASK}/runs",
            data={"phase": "systems", "code": (io.BytesIO(code), "s.zip"), **_facts()},
            headers=_h(tok["ann"]),
            content_type="multipart/form-data",
        )
        assert r.status_code == 201, r.json
        return r.json["id"]

    rid = submit()
    phase = _phase(app, "systems")
    with Session(engine_of(app)) as s:
        team_id = s.get(CodeRun, rid).team_id
        assert compute_used(s, team_id, phase.id) == 60  # the example's CPU limit, reserved
    sandbox.available()  # probed with the real bwrap (cached)
    real_bwrap, real_setpriv = sandbox.bwrap_path, sandbox.SETPRIV
    if broken == "bwrap":
        fake = tmp_path / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed' >&2\nexit 1\n")
        fake.chmod(0o755)
        monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    else:
        monkeypatch.setattr(sandbox, "SETPRIV", "/nonexistent/setpriv")
    got = run_system(rid)
    assert got["status"] == "infra", got
    with Session(engine_of(app)) as s:
        run = s.get(CodeRun, rid)
        assert (run.stage, run.failure_kind) == ("failed", "infra"), (run.stage, run.reason)
        assert run.reserved_cpu == 0 and not run.cpu_seconds
        assert compute_used(s, team_id, phase.id) == 0
    seen = c.get(f"/api/v1/runs/{rid}", headers=_h(tok["ann"])).json
    assert seen["category"] == "server failure", seen
    monkeypatch.setattr(sandbox, "bwrap_path", real_bwrap)  # the wrapper works again
    monkeypatch.setattr(sandbox, "SETPRIV", real_setpriv)
    again = submit()  # the same archive: a new run, not refused, not the failed one
    assert again != rid
    assert run_system(again)["stage"] == "ran"
    with Session(engine_of(app)) as s:
        assert compute_used(s, team_id, phase.id) == pytest.approx(
            s.get(CodeRun, again).cpu_seconds
        )


# a fork bomb: forks until refused, then every process tries again every 2 s, holding the limit to
# the end without 64 processes retrying on the machine's cores (a fork refused at the limit is
# refused after the process is copied: retrying at once, or every 50 ms, took 9.2 s of CPU from the
# other tests of a loaded 2-core machine, the sandbox capping processes and not CPU; 0.45 s now)
BOMB = """import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(2)
"""


@pytest.mark.slow
def test_a_fork_bomb_beside_another_teams_run_on_two_workers(site, request, tmp_path):
    """Two `palimpsest worker` processes on the runs queue of a served site: team Bombers' fork
    bomb holds its process limit on one while team Lexica's ordinary system runs on the other.
    The ordinary run ends while the bomb still runs, ran, and its output is scored; the bomb
    fails `processes` when its clock stops it, charged to Bombers (the CPU it used, counted by
    the kernel), and nothing of it is left."""
    import os
    import subprocess
    import sys
    import time

    import psutil
    import redis
    from backbone import kill_group, wait_for

    from server.domain.submissions import compute_used
    from server.jobs.embedded import EmbeddedRedis
    from server.jobs.queue import enqueue_code_run
    from server.models import Submission

    app, base = site
    settings = app.extensions["palimpsest.settings"]
    tok = _competition(app)
    bomber = _second_team(app, tok, "bo@x.org", "Bombers")
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"compute_budget_seconds": None, "daily_limit": None, "concurrent_limit": None},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    # bomb.py, not predict.py: another test's look for a dead worker's predict.py is not misled
    manifest = (
        (SYSTEM / "system.yaml")
        .read_text()
        .replace("wall_seconds: 120", "wall_seconds: 30")
        .replace("command: [python3, predict.py,", "command: [python3, bomb.py,")
    )
    assert "bomb.py" in manifest
    bomb_zip = _zip(SYSTEM, tmp_path / "bomb.zip", {"bomb.py": BOMB, "system.yaml": manifest})
    code, body = _submit(base, bomber, bomb_zip)
    assert code == 201, body
    bomb = json.loads(body)["id"]
    code, body = _submit(base, tok["ann"], _zip(SYSTEM, tmp_path / "ok.zip"))
    assert code == 201, body
    ordinary = json.loads(body)["id"]

    if settings.database_url:  # PostgreSQL: this machine's Redis
        url = request.getfixturevalue("redis_tcp_url")
    else:  # SQLite: the embedded Redis of the site's data directory
        embedded = EmbeddedRedis(settings.home)
        embedded.start()
        request.addfinalizer(embedded.stop)
        url = embedded.url
    conn = redis.Redis.from_url(url)
    env = dict(os.environ, PALIMPSEST_HOME=str(settings.home), REDIS_URL=url)
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    workers = []
    for i in range(2):
        log = open(tmp_path / f"worker-{i}.log", "wb")
        workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cli.main",
                    "worker",
                    "--queue",
                    "runs",
                    "--queue",
                    "scoring",
                ],
                env=env,
                start_new_session=True,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def run(rid):
        with Session(engine_of(app)) as s:
            return s.get(CodeRun, rid)

    def logs():
        return "\n".join((tmp_path / f"worker-{i}.log").read_text()[-2000:] for i in range(2))

    try:
        enqueue_code_run(conn, bomb, settings)
        assert wait_for(lambda: run(bomb).stage == "running", timeout=120), logs()
        time.sleep(2)  # the bomb at its process limit
        enqueue_code_run(conn, ordinary, settings)
        assert wait_for(lambda: run(ordinary).stage in ("ran", "failed"), timeout=120), logs()
        assert run(bomb).stage == "running"  # the two ran at the same time
        done = run(ordinary)
        assert done.stage == "ran", (done.reason, done.log[-1000:])

        def scored():
            with Session(engine_of(app)) as s:
                return s.get(Submission, done.submission_id).status == "scored"

        assert wait_for(scored, timeout=120), logs()
        assert wait_for(lambda: run(bomb).stage == "failed", timeout=120), logs()
    finally:
        for w in workers:
            kill_group(w)
    b = run(bomb)
    assert b.failure_kind == "code" and b.outcome["status"] == "processes", (b.reason, b.outcome)
    assert b.outcome["cgroup"] and b.cpu_seconds > 0.1  # 64 processes copied: 0.45 s measured
    with Session(engine_of(app)) as s:
        assert compute_used(s, b.team_id, b.phase_id) == pytest.approx(b.cpu_seconds)
        assert compute_used(s, done.team_id, done.phase_id) == pytest.approx(done.cpu_seconds)
    seen = json.loads(_http("GET", f"{base}/api/v1/runs/{bomb}", bomber)[1])
    # the team's view: the category out of the fixed set alone (which limit, the organizer's)
    assert seen["category"] == "failed: a limit"
    left = [
        p.pid
        for p in psutil.process_iter(["uids", "cmdline"])
        if p.info["uids"]
        and sandbox.RUN_UIDS[0] <= p.info["uids"].real < sandbox.RUN_UIDS[1]
        and "bomb.py" in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []


@pytest.fixture
def bundle_on_store(request, tmp_path, monkeypatch, seaweedfs):  # noqa: F811
    """The embedded site with the example bundle installed, its files in a fresh bucket of the
    session's SeaweedFS."""
    from conftest import _make_backend
    from storekit import _bucket

    from server.actions import bundles
    from server.domain import lifecycle

    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=EXAMPLE, via="test", settings=b.settings)
        p = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "systems")).one()
        lifecycle.edit_phase(s, p, {"opens_at": None, "closes_at": None}, actor=None)
    b.env = env
    return b


def test_a_runs_worker_on_an_empty_data_directory_runs_a_bundle_tasks_system(
    bundle_on_store, tmp_path
):
    """`palimpsest worker --queue runs` on a machine of its own (the database, Redis, the store
    and an empty data directory): it fetches the run's archive, the task's public files and its
    declaration, runs the system and its output is scored."""
    from backbone import burst, child_env, make_team, worker_process

    from server import objectstore
    from server.domain.system_archive import unpack
    from server.jobs.queue import enqueue_code_run
    from server.models import Submission
    from server.storage import path_for, store_upload

    b = bundle_on_store
    store = objectstore.store_for(b.settings)
    assert store.exists(f"tasks/{TASK}/declaration.json")
    team, user = make_team(b)
    archive = _zip(SYSTEM, tmp_path / "system.zip")
    key, sha, size = store_upload(b.settings.home, archive, "system.zip")
    objectstore.push_upload(b.settings, key)
    manifest = unpack(path_for(b.settings.home, key), tmp_path / "check")
    with b.session() as s:
        phase = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "systems")).one()
        run = CodeRun(
            team_id=team.id,
            user_id=user.id,
            task_id=TASK,
            phase_id=phase.id,
            archive_sha256=sha,
            storage_key=key,
            size=size,
            manifest=manifest.model_dump(),
            fields={"method_name": "overlap"},
        )
        s.add(run)
        s.commit()
        rid = run.id
    enqueue_code_run(b.conn, rid, b.settings)
    other = tmp_path / "worker-home"
    other.mkdir()
    env = child_env(b)
    env.update(b.env)
    env["PALIMPSEST_HOME"] = str(other)
    env["DATABASE_URL"] = b.settings.sqlalchemy_url()
    env["REDIS_URL"] = b.embedded.url
    env["PALIMPSEST_SECRET_KEY"] = b.settings.secret_key
    log = tmp_path / "w.log"
    worker_process(b, "--queue", "runs", "--burst", env=env, log=log).wait(180)
    with b.session() as s:
        r = s.get(CodeRun, rid)
    assert r.stage == "ran", (r.stage, r.reason, log.read_text()[-3000:])
    # what the worker holds: the task's declaration and public files, never its gold
    assert (other / "tasks" / TASK / "declaration.json").is_file()
    assert not list((other / "tasks" / TASK).glob("gold*"))
    assert "preload" not in log.read_text()  # nor tries to read any ahead
    burst(b, ("scoring",))
    with b.session() as s:
        assert s.get(Submission, r.submission_id).status == "scored"


def test_a_store_outage_during_a_run_is_the_servers_and_never_counts(
    bundle_on_store, tmp_path, monkeypatch
):
    """The object store away while a run fetches its inputs: each step is tried again with
    back-off, then the run goes back to queued with its attempt given back, as many times as the
    outage lasts (never `failed`, never toward `failed_twice`); once the store answers, the same
    run runs and the same archive is welcome again."""
    import socket

    from backbone import make_team

    from server import objectstore
    from server.domain import code_runs
    from server.domain.system_archive import unpack
    from server.jobs import run_jobs
    from server.storage import path_for, store_upload

    b = bundle_on_store
    team, user = make_team(b)
    archive = _zip(SYSTEM, tmp_path / "system.zip")
    key, sha, size = store_upload(b.settings.home, archive, "system.zip")
    objectstore.push_upload(b.settings, key)
    manifest = unpack(path_for(b.settings.home, key), tmp_path / "check")
    with b.session() as s:
        phase = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "systems")).one()
        run = CodeRun(
            team_id=team.id,
            user_id=user.id,
            task_id=TASK,
            phase_id=phase.id,
            archive_sha256=sha,
            storage_key=key,
            size=size,
            manifest=manifest.model_dump(),
            fields={"method_name": "overlap"},
        )
        s.add(run)
        s.commit()
        rid, phase_id = run.id, phase.id
    with socket.socket() as sock:  # a port nothing listens on: the store is away
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    endpoint = b.env["PALIMPSEST_S3_ENDPOINT"]
    monkeypatch.setenv("PALIMPSEST_S3_ENDPOINT", f"http://127.0.0.1:{closed}")
    monkeypatch.setattr(run_jobs, "STORE_WAITS", (0.05, 0.1))
    slept = []
    real_sleep = run_jobs.time.sleep
    monkeypatch.setattr(run_jobs.time, "sleep", lambda t: (slept.append(t), real_sleep(t)))
    for _ in range(code_runs.MAX_ATTEMPTS + 1):  # longer than the attempts a system has
        got = run_jobs.run_system(rid)
        assert got["status"] == "store_unreachable", got
        with b.session() as s:
            r = s.get(CodeRun, rid)
            assert (r.stage, r.attempts, r.failure_kind) == ("queued", 0, None), r
            assert code_runs.failed_twice(s, team.id, phase_id, sha) is None
    assert 0.05 in slept and 0.1 in slept  # backed off between the tries
    monkeypatch.setenv("PALIMPSEST_S3_ENDPOINT", endpoint)  # the store is back
    assert run_jobs.run_system(rid)["stage"] == "ran"
    with b.session() as s:
        assert s.get(CodeRun, rid).attempts == 1


@pytest.mark.browser
def test_the_gated_run_page_and_the_review_form_in_chromium(app, live, driver, tmp_path):  # noqa: F811
    """At 1366 and 390 px: the team's page of a blind run before review (its category, no log,
    no figures), the organizer's review form withholding it with a note, and the team's page after;
    the console stays clean and no page is wider than the window."""
    from browserkit import SHOTS, _body, _errors, _go, _sign_in, _width
    from selenium.webdriver.common.by import By

    from server.jobs.run_jobs import run_system

    tok = _competition(app)
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems", json={"blind": True}, headers=_h(tok["admin"])
    )
    assert r.status_code == 200, r.json
    code = _zip(SYSTEM, tmp_path / "p.zip", {"predict.py": PRINTER.replace("shutil", "os")})
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(code), "p.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    rid = r.json["id"]
    from server.jobs.scoring import score_submission

    got = run_system(rid)
    assert got["stage"] == "ran"
    score_submission(got["submission"])

    def fits():
        return driver.execute_script("return document.documentElement.scrollWidth") <= (
            driver.execute_script("return window.innerWidth")
        )

    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in ("wide", "phone"):
        _width(driver, width)
        _sign_in(driver, live, "ann@x.org")
        driver.get(f"{live}/runs/{rid}")
        body = _body(driver)
        assert "This phase is blind" in body
        assert ("submitted" if width == "wide" else "valid and scored") in body
        _free_of_inputs(body)
        assert fits() and _errors(driver) == []
        driver.save_screenshot(str(SHOTS / f"blind-gate-team-{width}.png"))
        _sign_in(driver, live, "admin@x.org")
        driver.get(f"{live}/runs/{rid}")
        text = driver.find_element(By.ID, "review-text").text
        assert "LAT-test" in text and "figures:" in text  # all a release gives, in one place
        radios = driver.find_elements(By.CSS_SELECTOR, "input[name=decision]")
        assert len(radios) == 3 and not any(r.is_selected() for r in radios)  # none by default
        radio = driver.find_element(By.CSS_SELECTOR, "input[name=decision][value=withhold]")
        driver.execute_script("arguments[0].scrollIntoView(); arguments[0].click()", radio)
        assert radio.is_selected()
        driver.find_element(By.NAME, "note").send_keys(f"withheld at {width}")
        assert fits()
        driver.save_screenshot(str(SHOTS / f"blind-gate-review-{width}.png"))
        _go(driver, driver.find_element(By.CSS_SELECTOR, "main form.form button[type=submit]"))
        assert _errors(driver) == []
        _shown_now(app, rid)  # past its wall limit and the delay: the result and the note show
        _sign_in(driver, live, "ann@x.org")
        driver.get(f"{live}/runs/{rid}")
        body = _body(driver)
        assert f"withheld at {width}" in body and "withheld what the run printed" in body
        assert "valid and scored" in body
        _free_of_inputs(body)
        assert fits() and _errors(driver) == []
        driver.save_screenshot(str(SHOTS / f"blind-gate-withheld-{width}.png"))
        # its row on the board, shown now: named by the team's run number, not the submission's
        driver.get(f"{live}/tasks/{TASK}/leaderboard?phase=systems")
        body = _body(driver)
        assert "run 1" in body and "Lexica" in body, body
        assert fits() and _errors(driver) == []
        driver.save_screenshot(str(SHOTS / f"blind-board-{width}.png"))
