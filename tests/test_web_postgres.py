"""The key web paths again on PostgreSQL (a fresh database per session, dropped after)."""

from __future__ import annotations

import io

import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of, update_phase

from server.models import Submission, utcnow

pytestmark = pytest.mark.postgres


def test_leaderboard_parts_publication_and_cache_on_postgres(pg_app):
    app = pg_app
    assert engine_of(app).dialect.name == "postgresql"
    make_user(app, "a@x.org", team="alpha")
    make_user(app, "b@x.org", team="beta")
    make_user(app, "c@x.org", team="Baselines", baseline=True)
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    a, b, base = team_of(app, "alpha"), team_of(app, "beta"), team_of(app, "Baselines")
    make_submission(app, team=a, phase=test, scores={"public": 0.9, "private": 0.3456})
    make_submission(app, team=b, phase=test, scores={"public": 0.9, "private": 0.8765})
    make_submission(app, team=base, phase=test, scores={"public": 0.4, "private": 0.4})
    c = app.test_client()
    data = c.get("/tasks/tric-binary/leaderboard.json?phase=test").get_json()
    assert [(r["team"], r["rank"], r["row_type"]) for r in data["rows"]] == [
        ("alpha", 1, "team"),
        ("beta", 1, "team"),
        ("Baselines", None, "baseline"),
    ]
    assert "0.3456" not in c.get("/tasks/tric-binary/leaderboard.csv?phase=test").get_data(
        as_text=True
    )
    renders = app.extensions["palimpsest.lbcache"].renders
    c.get("/tasks/tric-binary/leaderboard.json?phase=test")
    assert app.extensions["palimpsest.lbcache"].renders == renders
    from server.actions import submissions as sub_actions

    with Session(engine_of(app), expire_on_commit=False) as s:  # the action every surface calls
        sub = s.exec(select(Submission).where(Submission.team_id == a.id)).one()
        sub_actions.set_visibility(
            s=s, submission_id=sub.id, action="hide", actor=None, reason="a duplicate"
        )
    assert [
        r["team"]
        for r in c.get("/tasks/tric-binary/leaderboard.json?phase=test").get_json()["rows"]
    ] == ["beta", "Baselines"]
    update_phase(app, test.id, published_at=utcnow())
    data = c.get("/tasks/tric-binary/leaderboard.json?phase=test").get_json()
    assert data["published"] and data["rows"][0]["metrics"]["all/f1"] == 0.8765


def test_web_submit_limits_and_access_on_postgres(pg_app):
    app = pg_app
    make_user(app, "a@x.org", team="alpha")
    make_user(app, "b@x.org", team="beta")
    make_phase(app, "tric-binary", "dev", daily_limit=2, concurrent_limit=10)
    owner, other = Browser(app.test_client()), Browser(app.test_client())
    owner.login("a@x.org")
    other.login("b@x.org")
    codes = []
    for i in range(3):  # three different files (an identical one is counted once)
        r = owner.post(
            "/tasks/tric-binary/submit",
            {
                "phase": "dev",
                "method_name": "m",
                "file": (io.BytesIO(b'{"instanceID": "x%d", "label": 1}\n' % i), "p.jsonl"),
            },
            content_type="multipart/form-data",
        )
        codes.append(r.status_code)
    assert codes == [302, 302, 429]
    with Session(engine_of(app)) as s:
        sid = s.exec(select(Submission.id)).first()
    assert owner.get(f"/submissions/{sid}").status_code == 200
    assert other.get(f"/submissions/{sid}").status_code == 404
    assert app.test_client().get(f"/submissions/{sid}").status_code == 302


def test_team_and_organizer_actions_on_postgres(pg_app):
    app = pg_app
    make_user(app, "o@x.org", organizer=True)
    make_user(app, "a@x.org", team="alpha")
    dev = make_phase(app, "tric-binary", "dev")
    sub = make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.5})
    org = Browser(app.test_client())
    org.login("o@x.org")
    org.post(
        f"/organizer/submissions/{sub.id}/hide",
        {"action": "hide", "reason": "why", "confirm": "yes"},
    )
    assert (
        app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
        == []
    )
    assert org.get("/organizer/audit").status_code == 200
    assert org.get(f"/organizer/phases/{dev.id}/export.tex").status_code == 200


def test_an_uploads_team_is_locked_by_the_read_that_finds_it_on_postgres(pg_app):
    """The intake's team read takes the team's row lock (`FOR UPDATE OF team`), held until its
    transaction ends, and the lock the runs are counted under is then no statement of its own:
    another transaction cannot lock the row meanwhile, and `lock_row` sends nothing."""
    import psycopg
    from sqlalchemy import event

    from server.db import lock_row
    from server.domain import people
    from server.models import Team

    app = pg_app
    user = make_user(app, "lock@x.org", team="lockers")
    tid = team_of(app, "lockers").id
    eng = engine_of(app)
    url = eng.url.set(drivername="postgresql").render_as_string(hide_password=False)
    sent = []

    def count(conn, cursor, statement, *a):
        sent.append(statement)

    with Session(eng) as s:
        team = people.team_of(s, user, None, lock=True)
        assert team is not None and team.id == tid
        with psycopg.connect(url, autocommit=True) as other:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT id FROM team WHERE id = %s FOR UPDATE NOWAIT", (tid,))
        event.listen(eng, "before_cursor_execute", count)
        try:
            lock_row(s, Team, tid)
        finally:
            event.remove(eng, "before_cursor_execute", count)
        assert sent == []
        s.rollback()
    with Session(eng) as s:  # a new transaction: the lock asked for again
        event.listen(eng, "before_cursor_execute", count)
        try:
            lock_row(s, Team, tid)
        finally:
            event.remove(eng, "before_cursor_execute", count)
        assert len(sent) == 1 and "FOR UPDATE" in sent[0], sent
        s.rollback()
