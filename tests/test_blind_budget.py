"""A blind run's information budget: systems that encode the hidden inputs in their output's
problem counts, their exit status, their sleep time and their output's size, each run on two
different hidden inputs, leave byte for byte the same team view (the API's JSON, the run page's
text, the CLI's output) before review, before and after the result is shown; the bits a team
learns are computed from the set of distinct views seen. The copy out of /output is bounded by
the output limit (hard links and sparse files); a deep folder is the system's failure, charged;
a system is never run before its inputs' date. And the lower items: the CLI prints a run's log
without terminal escapes, team names are normalised before the reserved and unique checks, the
OpenAPI asks no token of the sign-up routes, --trust-unsigned reads format-1 archives only.

Against a served site (werkzeug on a port): the hold and the sleep-time encoder on SQLite and
PostgreSQL, the rest on SQLite."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from datetime import timedelta
from pathlib import Path

import click
import pytest
from blindkit import (
    SYSTEM,
    TASK,
    _competition,
    _facts,
    _h,
    _http,
    _inputs,
    _multipart,
    _phase,
    _submit,
    _system,
    _zip,
    app_tmp,
)
from click.testing import CliRunner
from sqlmodel import Session, select
from webkit import Browser, engine_of, update_phase

from server.domain import code_runs, lifecycle
from server.jobs import sandbox
from server.models import CodeRun, Score, utcnow


@pytest.fixture(autouse=True)
def _bwrap():
    why = sandbox.available()
    if why:
        from conftest import service_missing

        service_missing(why)


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


@pytest.fixture
def web_home(tmp_path, home):
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    return d


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def site(request):
    """The app on SQLite or PostgreSQL, served on a local port: (app, base URL)."""
    yield from _serve(request.getfixturevalue("app" if request.param == "sqlite" else "pg_app"))


@pytest.fixture
def served(app):
    """The app on SQLite, served on a local port: (app, base URL)."""
    yield from _serve(app)


def _serve(app):
    import threading

    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield app, f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


# each reads the first byte of the hidden first sentence and says it the way it is named for;
# VARIANT changes the archive (the same archive twice would be one run)
_READ = """import json, sys, time
rows = [json.loads(x) for x in open('/input/inputs.jsonl')]
b = rows[0]['sentence1'].encode()[0]
def valid(pad=''):
    with open('/output/predictions.jsonl', 'w') as f:
        for i, r in enumerate(rows):
            score = '0.%d' % (i % 10) + pad
            f.write('{"pair_id": %s, "score": %s}\\n' % (json.dumps(r['pair_id']), score))
# VARIANT
"""
ENCODERS = {
    # b duplicate lines and b % 5 unknown ids: counts of two kinds of problems
    "counts": _READ
    + """valid()
with open('/output/predictions.jsonl', 'a') as f:
    for i in range(b % 7 + 1):
        f.write(json.dumps({'pair_id': rows[i]['pair_id'], 'score': 0.5}) + '\\n')
    for i in range(b % 5):
        f.write(json.dumps({'pair_id': 'x%d' % i, 'score': 0.5}) + '\\n')
""",
    "exit": _READ + "sys.exit(b % 200 + 1)\n",
    "sleep": _READ + "time.sleep(0.1 + 1.2 * (b % 2))\nvalid()\n",
    "size": _READ + "valid('0' * (b % 40))\n",
}


def _hidden_inputs(app, first: str) -> None:
    """The hidden test inputs with the first sentence changed to `first` (ids kept)."""
    from tasks.store import TaskStore

    home = app.extensions["palimpsest.settings"].home
    p = TaskStore(TASK, home).public("test", "inputs.jsonl")
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    rows[0]["sentence1"] = first
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _main_text(html: str) -> str:
    main = html.split("<main", 1)[1].split("</main>", 1)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main))


def _view(app, base, token, web, rid) -> str:
    """The team's view of run `rid` on every surface, with its own number (fixed before it ran)
    written as RUN: the API's JSON, the run page's text, the CLI's output (JSON and text)."""
    from cli.main import main

    code, api = _http("GET", f"{base}/api/v1/runs/{rid}", token)
    assert code == 200, api
    page = web.get(f"/runs/{rid}")
    assert page.status_code == 200
    env = {"PALIMPSEST_SERVER": base, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nonexistent"}
    cli = [
        CliRunner().invoke(main, a, env=env).output
        for a in (["run", str(rid), "--json"], ["run", str(rid)])
    ]
    assert json.loads(api)["id"] == json.loads(cli[0])["id"] == rid
    texts = [api, _main_text(page.get_data(as_text=True)), *cli]
    return "\n".join(re.sub(rf'("id": ?|#|run |/runs/){rid}(?![0-9])', r"\1RUN", x) for x in texts)


def _at(app, rid, when) -> None:
    with Session(engine_of(app)) as s:
        r = s.get(CodeRun, rid)
        r.created_at = when
        r.shown_at = None  # computed from when it was submitted
        s.add(r)
        s.commit()


def test_encoders_yield_one_team_view_for_two_hidden_inputs(site):
    """Every encoder on SQLite; on PostgreSQL the sleep-time and output-size encoders alone (what
    could differ there is how times are stored and compared: `shown_at`, `created_at`, the release
    moment in SQL, and how an output's figures are kept; the views are built by the same code from
    the same rows, and the counts and exit status are JSON fields read back alike), for a few
    seconds of CPU."""
    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission

    app, base = site
    on_pg = engine_of(app).dialect.name == "postgresql"
    encoders = {k: ENCODERS[k] for k in ("sleep", "size")} if on_pg else ENCODERS
    tok = _competition(app)
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"blind": True, "compute_budget_seconds": None, "daily_limit": None,
              "total_limit": None, "concurrent_limit": None},
        headers=_h(tok["admin"]),
    )  # fmt: skip
    assert r.status_code == 200, r.json
    web = Browser(app.test_client())
    web.login("ann@x.org")
    fixed = utcnow().replace(microsecond=0) - timedelta(days=1)  # both runs submitted then
    runs: dict[str, list[int]] = {name: [] for name in encoders}
    for first in ("Amat verbum.", "Bibit aquam."):  # first bytes 65 and 66: odd and even
        _hidden_inputs(app, first)
        for name, script in encoders.items():
            code = _zip(
                SYSTEM,
                app_tmp(app) / f"{name}-{first[0]}.zip",
                {"predict.py": script.replace("# VARIANT", f"# {first[0]}")},
            )
            status, body = _submit(base, tok["ann"], code)
            assert status == 201, body
            rid = json.loads(body)["id"]
            got = run_system(rid)
            if got.get("submission"):
                score_submission(got["submission"])
            runs[name].append(rid)
    # the encoders work: the organizers read two different runs of each
    with Session(engine_of(app)) as s:
        told = {
            n: [code_runs.review_text(s, s.get(CodeRun, x)) for x in rids]
            for n, rids in runs.items()
        }
        outcome = {n: [s.get(CodeRun, x).outcome for x in rids] for n, rids in runs.items()}
    for name in encoders:
        assert told[name][0] != told[name][1], name
    if not on_pg:
        assert outcome["exit"][0]["exit_code"] != outcome["exit"][1]["exit_code"]
    assert outcome["size"][0]["output_bytes"] != outcome["size"][1]["output_bytes"]
    sleep = [o["wall_seconds"] for o in outcome["sleep"]]
    assert sleep[0] > sleep[1] + 0.8, sleep
    # the team: one view per encoder, before the result is shown and after (both runs of an
    # encoder given one submission time, fixed before they ran, so their views compare byte
    # for byte)
    pending = utcnow().replace(microsecond=0)
    seen = set()
    for stage, when in (("submitted", pending), ("shown", fixed)):
        for name, rids in runs.items():
            for rid in rids:
                _at(app, rid, when)
            views = [_view(app, base, tok["ann"], web, rid) for rid in rids]
            assert views[0] == views[1], (name, stage)
            seen.add(views[0])
            state = json.loads(views[0].split("\n", 1)[0].replace("RUN", "0"))["category"]
            want = {"counts": "invalid output", "exit": "failed: the system"}.get(
                name, "valid and scored"
            )
            assert state == ("submitted" if stage == "submitted" else want), (name, stage, state)
    # the mail notice: the same words for both runs, sent when the result is shown
    from server.domain import notices
    from server.models import OutgoingMail, Registration, Submission

    settings = app.extensions["palimpsest.settings"]
    for name in ("size",) if on_pg else ("counts", "size"):
        with Session(engine_of(app)) as s:
            for reg in s.exec(select(Registration)).all():
                reg.mail_runs = True
                s.add(reg)
            bodies = []
            for rid in runs[name]:
                run = s.get(CodeRun, rid)
                sub = s.get(Submission, run.submission_id)
                subject, body = notices.compose(s, settings, sub)
                text = subject + body
                bodies.append(re.sub(rf"(run |/runs/){rid}(?![0-9])", r"\1RUN", text))
                assert notices.queue_run_notice(s, settings, sub.id)
                row = s.exec(select(OutgoingMail).order_by(OutgoingMail.id.desc())).first()
                assert row.next_try_at == code_runs.shown_from(run, settings)
                sid = sub.id
            s.commit()
        assert bodies[0] == bodies[1], name
        assert f"/submissions/{sid}" not in bodies[0] and "problem" not in bodies[0]
    # the budget: the distinct views seen, at most the fixed states (scores beside them)
    bits = math.log2(len(seen))
    assert len(seen) == (2 if on_pg else 4) and bits <= math.log2(len(code_runs.STATES)) < 3, bits


def test_the_copy_out_puts_at_most_the_output_limit_on_disk(tmp_path):
    """49 hard links to one 3 MB file and 20 sparse 3 MB files (nothing in the tmpfs) under a
    4 MB output limit: the copy out refuses the links and counts the holes, so the worker's disk
    holds at most the limit; the declared file alone is copied when it is named."""
    script = """import os
with open('/output/big', 'wb') as f:
    f.write(os.urandom(3 << 20))
for i in range(49):
    os.link('/output/big', '/output/link%d' % i)
for i in range(20):
    with open('/output/sparse%d' % i, 'wb') as f:
        f.truncate(3 << 20)
open('/output/predictions.jsonl', 'w').write('{}\\n')
"""
    code, inputs = _system(tmp_path, script), _inputs(tmp_path)

    def disk(root: Path) -> int:
        return sum(
            os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(root) for f in fs
        )

    for only in ("", "predictions.jsonl"):
        out = tmp_path / f"out-{only or 'all'}"
        got = sandbox.run(
            ["python3", "main.py"],
            code=code,
            inputs=inputs,
            output=out,
            limits=sandbox.Limits(wall_seconds=30, output_mb=4, output_file=only),
        )
        assert disk(out) <= 4 << 20, (only, disk(out))
        if only:
            assert got.status == "ok", got.reason
            assert sorted(os.listdir(out)) == ["predictions.jsonl"]
        else:
            assert got.status == "output", got.reason
            assert "link" in got.reason or "limit" in got.reason


def test_a_deep_folder_is_the_systems_failure_and_charged(site, tmp_path):
    """A folder past PATH_MAX in /output: copying everything fails the run (charged, a fixed
    reason); a site's run copies the declared file alone and scores it, counted as a run (SQLite
    and PostgreSQL)."""
    deep = """import os
os.chdir('/output')
for i in range(40):
    os.mkdir('d' * 200)
    os.chdir('d' * 200)
open('x', 'w').write('x')
os.chdir('/')
open('/output/predictions.jsonl', 'w').write('{}\\n')
"""
    got = sandbox.run(
        ["python3", "main.py"],
        code=_system(tmp_path, deep),
        inputs=_inputs(tmp_path),
        output=tmp_path / "out",
        limits=sandbox.Limits(wall_seconds=30, output_mb=4),
    )
    assert got.status == "output" and "cannot be copied" in got.reason, got.reason
    assert "dddd" not in got.reason
    from server.jobs.run_jobs import run_system

    app, base = site
    tok = _competition(app)
    script = deep.replace(
        "open('/output/predictions.jsonl', 'w').write('{}\\n')",
        "import json\n"
        "with open('/output/predictions.jsonl', 'w') as f:\n"
        "    for line in open('/input/inputs.jsonl'):\n"
        "        pid = json.loads(line)['pair_id']\n"
        "        f.write(json.dumps({'pair_id': pid, 'score': 0.5}) + '\\n')\n",
    )
    assert "pair_id" in script
    code = _zip(SYSTEM, app_tmp(app) / "deep.zip", {"predict.py": script})
    status, body = _submit(base, tok["ann"], code)
    assert status == 201, body
    rid = json.loads(body)["id"]
    assert run_system(rid)["stage"] == "ran"
    with Session(engine_of(app)) as s:
        r = s.get(CodeRun, rid)
        assert r.failure_kind is None and r.cpu_seconds > 0  # counted, charged


def test_a_system_is_held_until_its_inputs_date(site):
    """A system for a phase whose inputs wait for their date is accepted and held, queued: its
    team is told until when (API, CLI); the job and the reconciler leave it alone, reading
    nothing, until the date; then it runs, shown no sooner than its wall limit and the delay
    after it starts. SQLite and PostgreSQL."""
    from cli.main import main
    from server.jobs.reconciler import _reconcile_code_runs
    from server.jobs.run_jobs import run_system

    app, base = site
    tok = _competition(app)
    when = (utcnow() + timedelta(days=30)).replace(second=0, microsecond=0)
    for name in ("systems", "evaluation"):
        update_phase(app, _phase(app, name).id, inputs_at=when)
    status, body = _submit(base, tok["ann"], _zip(SYSTEM, app_tmp(app) / "early.zip"))
    assert status == 201, body
    got = json.loads(body)
    rid = got["id"]
    assert got["stage"] == "queued" and got["held_until"].startswith(f"{when:%Y-%m-%dT%H:%M}")
    env = {"PALIMPSEST_SERVER": base, "PALIMPSEST_TOKEN": tok["ann"], "XDG_CONFIG_HOME": "/x"}
    said = CliRunner().invoke(main, ["run", str(rid)], env=env).output
    assert f"held until {when:%Y-%m-%dT%H:%M}" in said, said
    code, _ = _http("GET", f"{base}/api/v1/tasks/{TASK}/download?split=test", tok["ann"])
    assert code == 403  # the downloads' rule, the same date
    settings = app.extensions["palimpsest.settings"]
    engine = engine_of(app)
    assert run_system(rid).get("skipped")  # no claim takes a held run: it stays queued
    assert _reconcile_code_runs(settings, engine, None, utcnow() + timedelta(seconds=1)) == {
        "runs_requeued": 0,
        "runs_failed": 0,
        "runs_held": 1,
    }
    with Session(engine) as s:
        r = s.get(CodeRun, rid)
        assert (r.stage, r.attempts, r.log, r.started_at) == ("queued", 0, "", None)
        assert r.shown_at > when  # counted from the date
    # the date comes: it runs, and is shown no sooner than its limit and delay after it starts
    for name in ("systems", "evaluation"):
        update_phase(app, _phase(app, name).id, inputs_at=utcnow() - timedelta(seconds=1))
    with Session(engine) as s:  # as if submitted long ago, its moment past
        r = s.get(CodeRun, rid)
        r.shown_at = utcnow() - timedelta(days=1)
        s.add(r)
        s.commit()
    assert run_system(rid)["stage"] == "ran"
    with Session(engine) as s:
        r = s.get(CodeRun, rid)
        assert r.shown_at >= r.started_at + timedelta(seconds=settings.run_release_seconds)
    code, body = _http("GET", f"{base}/api/v1/runs/{rid}", tok["ann"])
    assert code == 200 and json.loads(body)["held_until"] is None


def test_the_lower_items(app, tmp_path):
    """The CLI prints a log without terminal escapes; team names are normalised before the
    reserved and unique checks; the OpenAPI asks no token of the sign-up routes; a format-2
    archive without its signature is refused even with --trust-unsigned."""
    from cli.participant.runs import print_run

    hostile = "a\x1b]0;owned\x07b\x1b]52;c;ZXZpbA==\x1b\\c\x1b[2J\x9b31md\r\ne\x00\tf"

    @click.command()
    def show():
        print_run({"id": 1, "task": "t", "phase": "p", "stage": "ran", "log": hostile})

    r = CliRunner().invoke(show)
    assert r.output.endswith("abcd\ne\tf\n"), repr(r.output)
    assert "\x1b" not in r.output and "\x9b" not in r.output and "\x07" not in r.output

    from webkit import make_token, make_user

    c = app.test_client()
    tok = make_token(app, make_user(app, "zoe@x.org"))
    for name, code in (
        ("B\u0430selines", "reserved_name"),  # a Cyrillic а
        ("\u13f4aselines", "reserved_name"),  # a Cherokee Ᏼ (Unicode's confusables table)
        ("Ba\ua731eIines", "reserved_name"),  # a small capital ꜱ, an I for the l
        ("Lex\u202eica", "bad_name"),  # a bidi override
        ("Lex\u200bica", "bad_name"),  # a zero width space
    ):
        got = c.post("/api/v1/team", json={"name": name}, headers=_h(tok))
        assert got.status_code == 422 and got.json["error"]["code"] == code, (name, got.json)
    got = c.post("/api/v1/team", json={"name": "Ｌｅｘｉｃａ"}, headers=_h(tok))
    assert got.status_code == 201 and got.json["name"] == "Lexica"  # NFKC
    other = make_token(app, make_user(app, "yan@x.org"))
    for look_alike in ("L\u0435xica", "\u13deexica", "Lex\u0456ca"):  # Cyrillic е, Cherokee Ꮮ, і
        got = c.post("/api/v1/team", json={"name": look_alike}, headers=_h(other))
        assert got.status_code == 409 and got.json["error"]["code"] == "name_taken", look_alike

    spec = c.get("/api/v1/openapi.json").json
    assert spec["paths"]["/signup"]["post"]["security"] == []
    assert spec["paths"]["/signup/finish"]["post"]["security"] == []
    assert spec["paths"]["/runs/{run_id}"]["get"]["security"] == [{"bearer": []}]

    from server.backup.common import BadSignature, check_signature

    assert check_signature({"format_version": 1}, "k", trust_unsigned=True) == "unsigned"
    with pytest.raises(BadSignature, match="format 2"):
        check_signature({"format_version": 2}, "k", trust_unsigned=True)


def _boards(app, base, token) -> dict:
    """A blind phase's board on every surface: the public page (HTML, JSON, CSV, with its ETag),
    the API as the team's token sees it, the CLI."""
    from cli.main import main

    c = app.test_client()
    out = {}
    for fmt in ("", ".json", ".csv"):
        r = c.get(f"/tasks/{TASK}/leaderboard{fmt}?phase=systems")
        assert r.status_code == 200
        out[fmt or ".html"] = (r.headers.get("ETag"), r.get_data(as_text=True))
    code, api = _http("GET", f"{base}/api/v1/tasks/{TASK}/leaderboard?phase=systems", token)
    assert code == 200, api
    out["api"] = api
    env = {"PALIMPSEST_SERVER": base, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nonexistent"}
    got = CliRunner().invoke(main, ["leaderboard", TASK, "--phase", "systems", "--json"], env=env)
    out["cli"] = got.output
    return out


def _rows(board: dict) -> list[int]:
    """The teams' rows each surface shows."""
    html, js, csv = (board[k][1] for k in (".html", ".json", ".csv"))
    return [
        len(re.findall(r'<tr class="team', html)),
        *(
            sum(r["row_type"] == "team" for r in json.loads(x)["rows"])
            for x in (js, board["api"], board["cli"])
        ),
        sum(",team," in line for line in csv.splitlines()[1:]),
    ]


def test_a_blind_runs_board_row_appears_at_its_shown_moment(served):
    """Two blind runs submitted together, one scored at once and one later: no surface of the
    board (public HTML, JSON and CSV with their ETags, the team's API, the CLI) changes when
    either is scored; both rows appear together at the moment fixed at submission."""
    from blindkit import _second_team

    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission

    app, base = served
    tok = _competition(app)
    tok["bob"] = _second_team(app, tok, "bob@x.org", "Verba")
    c = app.test_client()
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"blind": True, "compute_budget_seconds": None},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    rids = []
    for who in ("ann", "bob"):
        code = _zip(SYSTEM, app_tmp(app) / f"{who}.zip")
        body, ctype = _multipart({"phase": "systems", "show_publicly": "yes", **_facts()}, code)
        status, body = _http("POST", f"{base}/api/v1/tasks/{TASK}/runs", tok[who], body, ctype)
        assert status == 201, body
        rids.append(json.loads(body)["id"])
    moment = utcnow() + timedelta(hours=1)  # both shown then, as if submitted together
    with Session(engine_of(app)) as s:
        for rid in rids:
            run = s.get(CodeRun, rid)
            assert run.shown_at is not None and run.shown_at > run.created_at
            run.shown_at = moment
            s.add(run)
        s.commit()
    before = _boards(app, base, tok["ann"])
    assert _rows(before) == [0] * 5
    for rid in rids:  # the fast one, then the slow one
        got = run_system(rid)
        assert got["stage"] == "ran", got
        assert score_submission(got["submission"]).get("status", "scored") == "scored"
        assert _boards(app, base, tok["ann"]) == before  # byte for byte, ETags too
    assert _time_figure(app) == {}  # the figure of runs over time neither
    with Session(engine_of(app)) as s:  # the moment comes
        for rid in rids:
            run = s.get(CodeRun, rid)
            run.shown_at = utcnow() - timedelta(seconds=1)
            s.add(run)
        s.commit()
    after = _boards(app, base, tok["ann"])
    assert _rows(after) == [2] * 5
    assert after[".json"][0] != before[".json"][0]  # a new version, rendered again
    # no submission's id and no time a run ended, on any surface: each row names the team's run
    # (1: its first system) and when its system was submitted; the organizers' view as it was
    with Session(engine_of(app)) as s:
        ran = [s.get(CodeRun, rid) for rid in rids]
        sids = {r.submission_id for r in ran}
        made = {f"{r.created_at:%Y-%m-%dT%H:%M:%S}" for r in ran}
    for key in (".json", "api", "cli"):
        body = after[key] if key != ".json" else after[key][1]
        rows = [r for r in json.loads(body)["rows"] if r["row_type"] == "team"]
        assert [(r["submission_id"], r["run"]) for r in rows] == [(None, 1)] * 2, (key, rows)
        assert {r["submitted_at"][:19] for r in rows} <= made, (key, rows, made)
    lines = list(csv.DictReader(io.StringIO(after[".csv"][1])))
    assert [(x["submission_id"], x["run"]) for x in lines if x["row_type"] == "team"] == [
        ("", "1")
    ] * 2
    assert {x["submitted_at"][:19] for x in lines if x["row_type"] == "team"} <= made
    assert after[".html"][1].count("run 1</small>") == 2
    points = _time_figure(app)
    assert (
        len(points) == 2 and {f"{at:%Y-%m-%dT%H:%M:%S}" for ((at, _),) in points.values()} <= made
    )
    for sid in sids:
        assert f"/submissions/{sid}" not in after[".html"][1]
    code, org = _http("GET", f"{base}/api/v1/tasks/{TASK}/leaderboard?phase=systems", tok["admin"])
    org_rows = [r for r in json.loads(org)["rows"] if r["row_type"] == "team"]
    assert {r["submission_id"] for r in org_rows} == sids and "run" not in org_rows[0]
    # the scorer's notes depend on the output: none on a row before its run is reviewed and
    # released, then as any row's (the review renders the boards again)
    primary = json.loads(after[".json"][1])["primary"]
    with Session(engine_of(app)) as s:
        sid = s.get(CodeRun, rids[0]).submission_id
        for sc in s.exec(select(Score).where(Score.submission_id == sid)).all():
            res = json.loads(json.dumps(sc.result))
            res["metrics"][primary["subset"]][primary["metric"]] = None
            res["notes"] = [f"{primary['subset']}: undefined, its output wrote NOTE-OF-OUTPUT"]
            sc.result, sc.primary_value = res, None
            s.add(sc)
        lifecycle.bump_phase(s, _phase(app, "systems").id)  # as a rescoring would
        s.commit()
    noted = _boards(app, base, tok["ann"])
    assert noted[".json"][0] != after[".json"][0]
    assert not any(
        "NOTE-OF-OUTPUT" in (v[1] if isinstance(v, tuple) else v) for v in noted.values()
    )
    assert "NOTE-OF-OUTPUT" in org_view(app, base, tok["admin"])
    got = _http(
        "POST",
        f"{base}/api/v1/runs/{rids[0]}/review",
        tok["admin"],
        json.dumps({"decision": "release"}).encode(),
        "application/json",
    )
    assert got[0] == 200, got
    with Session(engine_of(app)) as s:
        assert "NOTE-OF-OUTPUT" in code_runs.review_text(s, s.get(CodeRun, rids[0]))
    released = _boards(app, base, tok["ann"])
    for key in (".html", ".json", ".csv", "api", "cli"):
        text = released[key][1] if isinstance(released[key], tuple) else released[key]
        assert ("NOTE-OF-OUTPUT" in text) == (key != ".csv"), key  # the CSV has no notes


def org_view(app, base, token) -> str:
    code, body = _http("GET", f"{base}/api/v1/tasks/{TASK}/leaderboard?phase=systems", token)
    assert code == 200, body
    return body


def _time_figure(app) -> dict:
    """The points of the board's figure of runs over time (`plots.history`), as its route reads
    them: team -> [(time, value)]."""
    from server.boards import leaderboard as lb
    from server.boards import plots
    from server.models import Phase
    from tasks import get_task

    with Session(engine_of(app)) as s:
        phase = s.get(Phase, _phase(app, "systems").id)
        board = lb.build_board(s, get_task(TASK), phase, audience="public")
        return plots.history(s, board, phase)
