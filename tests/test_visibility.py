"""One rule decides who sees which score (server.domain.visibility): its table, and every surface
that
shows a run's score held to it, on SQLite + embedded Redis and PostgreSQL + Redis. The case that
once differed between surfaces: a published phase reopened, a run made after publication."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from backbone import burst, make_team, phase, set_phase, submit
from conftest import _make_backend
from sqlalchemy import select
from webkit import Browser, make_token, make_user

from server.domain import lifecycle, publication
from server.domain.visibility import ORGANIZER, TEAM, Viewer, may_see, shown_part
from server.models import Phase, Score, TeamMember, User
from tasks import get_task

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])
T0 = datetime(2026, 1, 1)
PUBLISHED = Phase(task_id="t", name="test", split="test", published_at=T0)
RUNNING = Phase(task_id="t", name="test", split="test")
BEFORE, AFTER = T0 - timedelta(hours=1), T0 + timedelta(hours=1)
ORG, TEAM_MEMBER, ANYONE = Viewer(ORGANIZER), Viewer(TEAM, 7), Viewer()

# (viewer, phase, run made at, part) -> may see
TABLE = [
    (viewer, ph, made, part, expected)
    for viewer in (ORG, TEAM_MEMBER, ANYONE)
    for ph, made, part, expected in (
        (RUNNING, BEFORE, "public", True),
        (RUNNING, BEFORE, "all", True),
        (RUNNING, BEFORE, "private", None),  # None: organizers only
        (PUBLISHED, BEFORE, "private", True),
        (PUBLISHED, AFTER, "private", None),
        (PUBLISHED, AFTER, "public", True),
    )
]


@pytest.mark.parametrize("viewer,ph,made,part,expected", TABLE)
def test_the_table(viewer, ph, made, part, expected):
    want = viewer.is_organizer if expected is None else expected
    assert may_see(viewer, ph, made, part) is want


def test_the_headline_part():
    parts = ("public", "private")
    assert shown_part(TEAM_MEMBER, RUNNING, BEFORE, parts) == "public"
    assert shown_part(ORG, RUNNING, BEFORE, parts) == "public"  # the preview is the board's
    assert shown_part(TEAM_MEMBER, PUBLISHED, BEFORE, parts) == "private"
    assert shown_part(TEAM_MEMBER, PUBLISHED, AFTER, parts) == "public"
    assert shown_part(ANYONE, PUBLISHED, AFTER, parts) == "public"
    assert shown_part(ORG, PUBLISHED, AFTER, parts) == "private"
    assert shown_part(TEAM_MEMBER, PUBLISHED, AFTER, ("all",)) == "all"
    assert shown_part(TEAM_MEMBER, RUNNING, BEFORE, ()) is None


@pytest.fixture(params=["embedded", SERVICES])
def b(request, tmp_path, demo_home, monkeypatch):
    backend = _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    set_phase(backend, "tric-binary", "test", concurrent_limit=None, daily_limit=None)
    return backend


def _member(app, team_id: int, email: str) -> User:
    from sqlmodel import Session

    from server.domain.accounts import create_user

    with Session(app.extensions["palimpsest.engine"], expire_on_commit=False) as s:
        u = create_user(s, email=email, password="correct horse battery")
        s.add(TeamMember(team_id=team_id, user_id=u.id))
        s.commit()
        return u


def _private_value(b, sid: int) -> float:
    with b.session() as s:
        return s.execute(
            select(Score.primary_value).where(Score.submission_id == sid, Score.part == "private")
        ).scalar_one()


def test_a_run_made_after_publication_shows_no_private_score_anywhere(b):
    """Runs: `before` (made before publication), `after` (made in the reopened phase). Every
    surface a team member reads shows `before`'s private score and never `after`'s."""
    from server import create_app
    from server.domain.accounts import create_token

    team, user = make_team(b)
    before = submit(b, team, user, "tric-binary", "test", noise=0.3).id
    burst(b)
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        publication.publish(
            s, p, task=get_task("tric-binary"), actor=None, settings=b.settings, close_first=True
        )
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        lifecycle.edit_phase(s, p, {"closes_at": None}, actor=None)
    after = submit(b, team, user, "tric-binary", "test", noise=0.0).id
    burst(b)
    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    member = _member(app, team.id, "member@example.org")
    with b.session() as s:
        _, token = create_token(s, user=s.get(User, member.id))
        s.commit()
    web = Browser(app.test_client())
    web.login("member@example.org", "correct horse battery")
    api = app.test_client()
    h = {"Authorization": f"Bearer {token}"}

    org = make_user(app, "org@example.org", organizer=True)
    org_token = make_token(app, org)
    org_web = Browser(app.test_client())
    org_web.login("org@example.org")
    clients = {"team": (web, h), "organizer": (org_web, {"Authorization": f"Bearer {org_token}"})}

    def api_part(got) -> bool:
        return bool(got) and (got["part"] == "private" or "private" in got.get("parts", {}))

    def web_list(viewer, sid):
        if viewer == "organizer":
            return None  # "My submissions" lists the viewer's own team's runs
        page = clients[viewer][0].get("/submissions").get_data(as_text=True)
        return "private part" in page.split(f'/submissions/{sid}">', 1)[1].split("</tr>", 1)[0]

    def web_page(viewer, sid):
        page = clients[viewer][0].get(f"/submissions/{sid}").get_data(as_text=True)
        return "private part of" in page

    def api_one(viewer, sid):
        got = api.get(f"/api/v1/submissions/{sid}", headers=clients[viewer][1]).get_json()
        return api_part(got["scores"])

    def api_list(viewer, sid):
        q = {"mine": "0"} if viewer == "organizer" else {}
        items = api.get("/api/v1/submissions", query_string=q, headers=clients[viewer][1])
        (it,) = [x for x in items.get_json()["items"] if x["id"] == sid]
        return api_part(it["scores"])

    # the table, as the docs state it: (viewer, run) -> whether its private part is shown
    table = {
        ("team", before): True,
        ("team", after): False,
        ("organizer", before): True,
        ("organizer", after): True,
    }
    runs = {before: BEFORE, after: AFTER}
    for (viewer, sid), want in table.items():
        v = ORG if viewer == "organizer" else TEAM_MEMBER
        assert may_see(v, PUBLISHED, runs[sid], "private") is want  # the function's own answer
        for surface in (web_list, web_page, api_one, api_list):
            got = surface(viewer, sid)
            assert got is None or got is want, (surface.__name__, viewer, sid)
    # the boards a participant reads: the published snapshot, and the live board in the API
    priv = f"{_private_value(b, after):.4f}"
    for url in (
        "/tasks/tric-binary/leaderboard.json?phase=test",
        "/tasks/tric-binary/leaderboard.csv?phase=test",
        "/api/v1/tasks/tric-binary/leaderboard?phase=test",
    ):
        body = api.get(url, headers=h).get_data(as_text=True)
        assert f'"submission_id":{after}' not in body.replace(" ", "") or priv not in body, url
    # the live board built for the team (not the snapshot) never ranks `after` on its private part
    from server.boards import leaderboard as lb

    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        board = lb.build_board(s, get_task("tric-binary"), p, audience=f"team:{team.id}")
        assert all(r.submission_id != after for r in board.rows)
        preview = lb.build_board(
            s, get_task("tric-binary"), p, audience="organizer", show_private=True
        )
        assert any(r.submission_id == after for r in preview.rows)  # organizers see it
    assert json.dumps(board.rows, default=str).count(priv) == 0 or priv == "1.0000"
