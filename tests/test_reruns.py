"""Archived systems re-run on new data (the phase action `rerun`): a system archived in one phase
(the test split) is re-run on a second corpus (the dev split) through the same sandbox and budget,
its row on that phase's board beside a team's own system, marked as a re-run of its first run; a
team that did not consent is refused, whole, with nothing left behind; the re-run's team view on
a blind phase is `code_runs.team_view`'s and nothing more."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from blindkit import SLUG, SYSTEM, TASK, _competition, _h, _phase, _second_team, _zip
from click.testing import CliRunner
from sqlmodel import Session, func, select
from webkit import Browser, engine_of

from server.jobs import sandbox
from server.models import CodeRun, Competition, Submission, utcnow


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


def _upload(c, token, code: bytes, phase: str, consent: str | None) -> int:
    facts = {"fact.system_description": "word overlap"}
    if consent is not None:
        facts["fact.rerun_consent"] = consent
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": phase, "code": (io.BytesIO(code), "system.zip"), **facts},
        headers=_h(token),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    return r.json["id"]


def _runs(app) -> int:
    with Session(engine_of(app)) as s:
        return s.exec(select(func.count()).select_from(CodeRun)).one()


def test_an_archived_system_reruns_on_a_second_corpus_beside_a_new_one(app, tmp_path):
    from cli.main import main
    from server.boards.leaderboard import build_board
    from server.domain.submissions import compute_used
    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission
    from tasks import get_task

    tok = _competition(app)
    with Session(engine_of(app)) as s:  # the competition asks each system's team for consent
        comp = s.exec(select(Competition).where(Competition.slug == SLUG)).one()
        comp.fact_fields = [
            *comp.fact_fields,
            {"key": "rerun_consent", "label": "May we re-run it on new data?", "kind": "yes_no"},
        ]
        s.add(comp)
        s.commit()
    nova = _second_team(app, tok, "nova@x.org", "Nova")
    c = app.test_client()
    code = _zip(SYSTEM, tmp_path / "system.zip")
    old = _upload(c, tok["ann"], code, "systems", "yes")  # Lexica's, archived on the test split
    other = _zip(SYSTEM, tmp_path / "other.zip", {"README": "Nova's"})
    refused = _upload(c, nova, other, "systems", "no")
    assert run_system(old)["stage"] == "ran"  # Nova's waits: its consent is refused first
    # the second corpus: the dev split's phase, taking systems, blind, with a compute budget
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/development",
        json={"accepts": "code", "blind": True, "compute_budget_seconds": 600, "daily_limit": 2},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    new = _upload(c, nova, other, "development", None)  # a new system on the second corpus
    dev = _phase(app, "development")

    # a team that did not consent: refused, whole (the consenting run named beside it too)
    before = _runs(app)
    url = f"/api/v1/tasks/{TASK}/phases/development/rerun"
    r = c.post(url, json={"runs": f"{old},{refused}"}, headers=_h(tok["admin"]))
    assert r.status_code == 409 and r.json["error"]["code"] == "no_consent", r.json
    assert f"code run {refused}" in r.json["error"]["message"]
    r = CliRunner().invoke(main, ["phases", "rerun", TASK, "development", "--runs", str(refused)])
    assert r.exit_code == 1 and "did not consent" in r.output
    web = Browser(app.test_client())
    web.login("admin@x.org")
    form = f"/organizer/phases/{dev.id}/actions/rerun"
    page = web.post(form, {"runs": str(refused)}, follow_redirects=True).get_data(as_text=True)
    assert "Refused" in page and "did not consent" in page
    assert _runs(app) == before
    assert c.post(url, json={"runs": str(old)}, headers=_h(nova)).status_code == 403
    assert c.post(url, json={"runs": "x1"}, headers=_h(tok["admin"])).status_code == 422

    r = c.post(url, json={"runs": str(old)}, headers=_h(tok["admin"]))
    assert r.status_code == 200, r.json
    (got,) = r.json["reruns"]
    assert got["of"] == old and got["phase"] == "systems" and not got["duplicate"]
    again = c.post(url, json={"runs": str(old)}, headers=_h(tok["admin"])).json["reruns"]
    assert again[0]["run"] == got["run"] and again[0]["duplicate"]  # counted once
    page = web.post(form, {"runs": str(old)}, follow_redirects=True).get_data(as_text=True)
    assert "queued to run on" in page and _runs(app) == before + 1
    with Session(engine_of(app)) as s:
        lexica = s.get(CodeRun, old).team_id
        assert compute_used(s, lexica, dev.id) > 0  # the team's budget in the phase holds it
    done = set()  # each job runs the run the queues' round-robin gives it
    for _ in range(6):
        ran = run_system(got["run"])
        if ran.get("skipped"):
            break
        assert ran["stage"] == "ran", ran
        assert score_submission(ran["submission"])["status"] == "scored"
        done.add(ran["run"])
    assert {got["run"], new} <= done, done

    # the organizers' re-run is not the team's upload: its daily limit is whole
    more = _zip(SYSTEM, tmp_path / "more.zip", {"README": "Lexica's second"})
    _upload(c, tok["ann"], more, "development", None)
    third = _zip(SYSTEM, tmp_path / "third.zip", {"README": "Lexica's third"})
    _upload(c, tok["ann"], third, "development", None)

    # its team reads the re-run through the blind phase's gate, nothing more
    seen = c.get(f"/api/v1/runs/{got['run']}", headers=_h(tok["ann"])).json
    assert seen["category"] == "submitted" and seen["log"] is None and seen["log_hidden"]
    assert not (seen.get("scores") or seen.get("resources") or seen.get("cpu_seconds"))
    assert "LAT-dev" not in json.dumps(seen)
    org = c.get(f"/api/v1/runs/{got['run']}", headers=_h(tok["admin"])).json
    assert org["stage"] == "ran" and org["log"]

    with Session(engine_of(app)) as s:  # their moment come (a blind phase shows a run's row no
        for r in s.exec(select(CodeRun).where(CodeRun.phase_id == dev.id)).all():  # sooner)
            r.shown_at = utcnow() - timedelta(seconds=1)
            s.add(r)
        s.commit()
    # both rows on the second phase's board, the re-run marked as one, scored on the dev gold
    with Session(engine_of(app)) as s:
        board = build_board(s, get_task(TASK), dev, audience="organizer")
        rows = {r.team: r for r in board.rows}
        assert set(rows) == {"Lexica", "Nova"}
        assert rows["Lexica"].rerun_of == {"run": old, "task": TASK, "phase": "systems"}
        assert rows["Nova"].rerun_of is None and all(r.rank for r in board.rows)
        sub = s.get(Submission, rows["Lexica"].submission_id)
        assert sub.rerun_of == old and sub.phase_id == dev.id
        # the same system's predictions on the two corpora are two scorings, of two golds
        first = s.get(CodeRun, old).submission_id
        assert s.get(Submission, first).file_sha256 != sub.file_sha256
        data = board.model_dump(mode="json", by_alias=True)
        marked = [r for r in data["rows"] if r.get("rerun_of")]
        assert [r["team"] for r in marked] == ["Lexica"]
    page = web.get(f"/tasks/{TASK}/leaderboard?phase=development").get_data(as_text=True)
    assert f"re-run of system {old} from systems" in page
