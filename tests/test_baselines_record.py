"""Baseline runs recorded on the leaderboard through the participants' path: locally, through the
REST API with an organizer's token, and as jobs of the baselines queue run by a worker.

The runs are the model-free `lexical` systems on the demo tasks, so these tests need no model.
"""

from __future__ import annotations

import json

import pytest
from backbone import burst, get, make_team, phase, scores, set_phase, submit
from click.testing import CliRunner
from sqlalchemy import select

from baselines.run import run_baselines
from baselines.systems import Options
from server.actions.baselines import record_baseline
from server.domain.baselines import enqueue_baselines


def _run(backend, task_id="tric-ranking", system="lexical", out=None):
    (result,) = run_baselines(
        [task_id],
        [system],
        Options(progress=False),
        out or backend.settings.home / "out",
        backend.settings.home,
        log=lambda m: None,
    )
    return result


def _board(backend, task_id, phase_name="test"):
    from server.boards.leaderboard import build_board
    from tasks import get_task

    ph = phase(backend, task_id, phase_name)
    with backend.session() as s:
        return build_board(s, get_task(task_id), ph, include_closed=True)


def _baseline_rows(board):
    return [r for r in board.rows if r.row_type == "baseline"]


def test_a_recorded_baseline_is_scored_by_the_queue_like_any_upload(backend):
    set_phase(backend, "tric-ranking", "test", public_fraction=1.0, daily_limit=0, total_limit=0)
    result = _run(backend)
    rec = record_baseline(result, settings=backend.settings)
    assert [(r["phase"], r["duplicate"]) for r in rec] == [("test", False)]
    sid = rec[0]["submission_id"]
    sub = get(backend, sid)
    # queued, not scored: nothing but the worker writes a score, and no limit applies to baselines
    assert (sub.status, sub.is_baseline, sub.method_name) == ("queued", True, "lexical")
    assert scores(backend, sid) == []
    from server.jobs.queue import fetch_job

    assert fetch_job(backend.conn, sid).origin == "scoring"
    burst(backend)
    (row,) = scores(backend, sid)
    assert get(backend, sid).status == "scored"
    # the server's score of the stored file is the offline scorer's score of the run's file
    assert row.part == "all"
    assert row.primary_value == pytest.approx(result["scores"]["primary"]["value"], abs=1e-12)
    (line,) = _baseline_rows(_board(backend, "tric-ranking"))
    assert line.rank is None and line.team == "Baselines" and line.submission_id == sid
    with backend.session() as s:
        from server.models import Team

        assert (
            s.execute(select(Team.is_baseline).where(Team.name == "Baselines")).scalar_one() is True
        )


def test_recording_the_same_file_again_adds_nothing_and_a_rerun_replaces_its_row(
    embedded_backend, tmp_path
):
    b = embedded_backend
    set_phase(b, "trac", "test", public_fraction=1.0)
    first = _run(b, "trac")
    (a,) = record_baseline(first, settings=b.settings)
    (again,) = record_baseline(first, settings=b.settings)
    assert again == {"phase": "test", "submission_id": a["submission_id"], "duplicate": True}
    burst(b)
    # a re-run of the same method that wrote another file (another model version, say)
    rows = [json.loads(x) for x in open(first["file"], encoding="utf-8")]
    rows[0]["score"] = rows[0]["score"] + 0.5
    changed = tmp_path / "trac-lexical.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (c,) = record_baseline({**first, "file": str(changed)}, settings=b.settings)
    assert c["duplicate"] is False and c["submission_id"] != a["submission_id"]
    burst(b)
    (line,) = _baseline_rows(_board(b, "trac"))
    assert line.submission_id == c["submission_id"]
    # another method is a row of its own, and team rows are ranked without the baselines
    team, user = make_team(b)
    submit(b, team, user, "trac", "test", noise=0.0)
    burst(b)
    board = _board(b, "trac")
    assert [r.rank for r in board.rows if r.row_type == "team"] == [1]
    assert len(_baseline_rows(board)) == 1


def test_a_baseline_phase_can_be_named_and_a_missing_one_is_named_back(embedded_backend):
    from server.exceptions import NotFound

    b = embedded_backend
    result = _run(b, "tric-ranking")
    with pytest.raises(NotFound, match="no phase 'final'"):
        record_baseline(result, settings=b.settings, phases=["final"])
    (r,) = record_baseline(result, settings=b.settings, phases=["test"])
    assert r["phase"] == "test"


def test_the_baselines_queue_runs_the_baseline_and_scores_what_it_recorded(backend):
    set_phase(backend, "tric-ranking", "test", public_fraction=1.0)
    jobs = enqueue_baselines(["tric-ranking"], ["lexical"], Options(), backend.settings.home)
    (job,) = jobs
    assert job["job"].startswith("baseline-tric-ranking-lexical-") and job["status"] == "queued"
    # asking again while it waits gives the same job
    assert (
        enqueue_baselines(["tric-ranking"], ["lexical"], Options(), backend.settings.home) == jobs
    )
    from rq.job import Job
    from rq.serializers import JSONSerializer

    from server.jobs.queue import get_queue

    assert (
        Job.fetch(job["job"], connection=backend.conn, serializer=JSONSerializer).origin
        == "baselines"
    )
    assert get_queue("scoring", backend.conn).count == 0
    burst(backend, queues=("baselines",))  # the run job: it writes the file and records it
    ran = Job.fetch(job["job"], connection=backend.conn, serializer=JSONSerializer)
    assert ran.get_status() == "finished", ran.latest_result()
    (rec,) = ran.return_value()["recorded"]
    assert get(backend, rec["submission_id"]).status == "queued"
    burst(backend, queues=("scoring",))  # its scoring, by any worker of the scoring queue
    sub = get(backend, rec["submission_id"])
    assert (sub.status, sub.is_baseline, sub.method_name) == ("scored", True, "lexical")
    offline = _run(backend, "tric-ranking", out=backend.settings.home / "offline")
    (row,) = scores(backend, sub.id)
    assert row.primary_value == pytest.approx(offline["scores"]["primary"]["value"], abs=1e-12)
    assert len(_baseline_rows(_board(backend, "tric-ranking"))) == 1


def test_enqueue_without_a_reachable_queue_says_where_it_looked(tmp_path, monkeypatch, demo_home):
    from baselines.models import BaselineError

    home = tmp_path / "data"
    home.mkdir()
    (home / "tasks").symlink_to(demo_home / "tasks", target_is_directory=True)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(BaselineError, match="cannot reach the queue at redis://127.0.0.1:1/0"):
        enqueue_baselines(["trac"], ["lexical"], Options(), home)


def test_cli_run_record_json_lists_what_was_recorded(embedded_backend, tmp_path):
    from cli.main import main

    b = embedded_backend
    r = CliRunner().invoke(
        main,
        [
            "baselines",
            "run",
            "--task",
            "trac",
            "--system",
            "lexical",
            "--home",
            str(b.settings.home),
            "--out",
            str(tmp_path),
            "--record",
            "--json",
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    (out,) = json.loads(r.output)
    (rec,) = out["recorded"]
    assert rec["phase"] == "test" and get(b, rec["submission_id"]).is_baseline
    r = CliRunner().invoke(
        main,
        [
            "baselines",
            "run",
            "--task",
            "trac",
            "--system",
            "lexical",
            "--home",
            str(b.settings.home),
            "--out",
            str(tmp_path),
            "--record",
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    assert f"already recorded as submission {rec['submission_id']} in phase test" in r.output
    r = CliRunner().invoke(
        main, ["baselines", "run", "--enqueue", "--record", "--home", str(b.settings.home)]
    )
    assert r.exit_code != 0 and "--enqueue records by itself" in r.output


def test_api_records_a_baseline_only_for_an_organizer(app, client, web_home):
    from sqlmodel import Session

    from server.domain.accounts import create_token, create_user
    from server.domain.submissions import ensure_phases
    from server.models import Submission, Team, TeamMember

    engine = app.extensions["palimpsest.engine"]
    with Session(engine) as s:
        ensure_phases(s)
        org = create_user(s, email="org@example.org", password="correct horse", is_admin=True)
        s.commit()
        _, org_token = create_token(s, user=org)
        team = Team(name="alpha", invite_code="code-alpha")
        s.add(team)
        s.commit()
        u = create_user(s, email="alpha@example.org", password="correct horse")
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        s.commit()
        _, team_token = create_token(s, user=u)
        s.commit()
    result = run_baselines(
        ["trac"],
        ["lexical"],
        Options(progress=False),
        web_home / "out",
        web_home,
        log=lambda m: None,
    )[0]
    data = open(result["file"], "rb").read()

    def post(token, **fields):
        import io

        return client.post(
            "/api/v1/tasks/trac/submissions",
            headers={"Authorization": f"Bearer {token}"},
            data={"file": (io.BytesIO(data), "lexical.jsonl"), "phase": "test", **fields},
            content_type="multipart/form-data",
        )

    r = post(team_token, baseline="true")
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "not_organizer"
    r = post(org_token, baseline="true", method_name="lexical")  # an organizer needs no team
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert body["is_baseline"] is True and body["duplicate"] is False
    r = post(org_token, baseline="true", method_name="lexical")
    assert (
        r.status_code == 200
        and r.get_json()["id"] == body["id"]
        and r.get_json()["duplicate"] is True
    )
    r = post(org_token)  # without baseline=true an organizer without a team cannot submit
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "no_team"
    with Session(engine) as s:
        sub = s.get(Submission, body["id"])
        assert s.get(Team, sub.team_id).is_baseline and sub.user_id is not None
    # the team's own submissions never list it
    r = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {team_token}"})
    assert body["id"] not in [x["id"] for x in r.get_json()["items"]]


def test_organizer_page_queues_baseline_runs_and_the_queue_page_shows_what_they_recorded(
    embedded_backend,
):
    """The web path, on the embedded Redis: the dashboard's form, a worker's burst, the queue
    page."""
    from webkit import Browser, make_user

    from server import create_app

    b = embedded_backend
    app = create_app(
        {"home": b.settings.home, "env": "testing", "database_url": None, "redis_url": None}
    )
    make_user(app, "org@x.org", organizer=True)
    make_user(app, "team@x.org", team="alpha")
    org, team = Browser(app.test_client()), Browser(app.test_client())
    org.login("org@x.org")
    team.login("team@x.org")
    page = org.get("/organizer/").get_data(as_text=True)
    assert 'action="/organizer/tasks/trac/baselines"' in page and 'value="bi-encoder-mask"' in page
    assert team.post("/organizer/tasks/trac/baselines", {"system": "lexical"}).status_code in (
        302,
        403,
    )
    assert get_queue_count(b) == 0  # a team member queues nothing
    # an unknown system is refused as the API refuses it (422 unknown_system): nothing queued,
    # and the page says which systems the task has (it used to drop it silently)
    r = org.post(
        "/organizer/tasks/trac/baselines",
        {"system": ["lexical", "no-such-system"], "device": "cpu"},
        follow_redirects=True,
    )
    said = r.get_data(as_text=True)
    assert "Not queued" in said and "no-such-system" in said and get_queue_count(b) == 0
    r = org.post("/organizer/tasks/trac/baselines", {"system": ["lexical"], "device": "cpu"})
    assert r.status_code == 302 and get_queue_count(b) == 1
    burst(b, queues=("baselines", "scoring"))
    html = org.get("/organizer/queue").get_data(as_text=True)
    assert "baseline lexical on trac" in html and "finished" in html
    from server.models import AuditLog, Submission

    with b.session() as s:
        (sub,) = (
            s.execute(select(Submission).where(Submission.is_baseline.is_(True))).scalars().all()
        )
        assert sub.status == "scored" and sub.task_id == "trac"
        assert f'href="/submissions/{sub.id}"' in html
        (act,) = (
            s.execute(select(AuditLog).where(AuditLog.action == "baselines.enqueue"))
            .scalars()
            .all()
        )
        assert act.target == "task:trac"
    r = org.post("/organizer/tasks/trac/baselines", {"system": "diffalign"})  # not a system of trac
    assert r.status_code == 302 and get_queue_count(b) == 0


def get_queue_count(backend) -> int:
    from server.jobs.queue import BASELINES, get_queue

    return get_queue(BASELINES, backend.conn).count
