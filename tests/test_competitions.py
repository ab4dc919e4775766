"""Competitions: the tables and the migration that makes one per existing task, Markdown pages
rendered and sanitized, the actions' permissions (site administrators create; a draft is hidden
from everyone else), and the surfaces (API against its OpenAPI schema, web pages, local CLI)."""

from __future__ import annotations

import json
import re

import pytest
from apikit import _bearer, _check
from backbone import make_team
from conftest import fresh_pg_database
from sqlalchemy import create_engine, func, text
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_token, make_user

from server.actions import competitions as comp
from server.domain.sanitize import (
    MAX_BRACKETS,
    MAX_INDENT,
    MAX_MARKDOWN,
    MAX_QUOTE_DEPTH,
    nesting_problem,
    render_markdown,
)
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.models import AuditLog, Competition, CompetitionPage, CompetitionTask, User

HOSTILE = """\
# Title

<script>alert('x')</script>
<img src="x" onerror="alert(1)">
<p onclick="steal()" style="color:red">styled</p>
[js](javascript:alert(1)) [js2](JaVaScRiPt:alert(2)) [ent](java&#115;cript:alert(3))
[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
<a href="vbscript:msgbox(1)" onmouseover="x()">vb</a>
<iframe src="https://evil.example/"></iframe><svg onload="alert(1)"></svg>
<object data="x.swf"></object><form action="/x"><input name="a"></form>
<style>body { display: none }</style>
[ok](https://example.org/terms) [rel](/competitions/x/data) [plain](http://example.org)
"""


# ----------------------------------------------------------------------------- Markdown


def test_hostile_markdown_is_sanitized():
    html = render_markdown(HOSTILE)
    low = html.lower()
    for bad in ("<script", "<img", "<iframe", "<svg", "<object", "<form", "<input", "<style"):
        assert bad not in low, (bad, html)
    assert not re.search(r"\son\w+\s*=", low), html  # no event handler attribute
    assert "style=" not in low and "display: none" not in low, html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs == ["https://example.org/terms", "/competitions/x/data", "http://example.org"]
    for scheme in ("javascript:", "vbscript:", "data:"):
        assert scheme not in low, (scheme, html)
    assert "<h1>Title</h1>" in html and "<p>styled</p>" in html


def test_markdown_renders_tables_lists_and_code():
    html = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n- one\n- two\n\n```\n<b>x</b>\n```")
    assert "<table>" in html and "<td>1</td>" in html
    assert "<li>one</li>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html  # code is shown, not interpreted


def test_markdown_too_costly_to_render_is_refused_naming_the_line_and_shown_as_text():
    deep = "".join("  " * i + "- x\n" for i in range(40))  # the 34th line is indented 66
    assert nesting_problem(deep) == (
        f"line 34: indented more than {MAX_INDENT} columns (a list nested too deep)"
    )
    assert render_markdown(deep).startswith("<pre>- x")  # escaped text, not rendered
    quotes = "> > x\n" + ">" * (MAX_QUOTE_DEPTH + 1) + " y\n"
    assert nesting_problem(quotes) == f"line 2: quotes nested more than {MAX_QUOTE_DEPTH} deep"
    assert "more than 500 '['" in nesting_problem("[x](" * (MAX_BRACKETS + 1))
    fine = "".join("  " * i + "- x\n" for i in range(32))
    assert nesting_problem(fine) is None and render_markdown(fine).count("<ul>") == 16
    assert render_markdown("<" + "<script>" * 3) == "<p>&lt;</p>"


# ----------------------------------------------------------------------------- migration


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
    else:
        with fresh_pg_database("palimpsest_comp_") as (_name, url):
            yield url


def test_the_migration_makes_one_visible_competition_per_task_with_phases(empty_url):
    from alembic import command

    from server.migrate import alembic_config
    from server.settings import Settings

    cfg = alembic_config(Settings(database_url=empty_url))
    command.upgrade(cfg, "a4e2b6c8d0f1")  # a database from before competitions
    eng = create_engine(empty_url)
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO team (name, invite_code, is_baseline, created_at) "
                "VALUES ('t1', 'code1', false, '2026-01-01')"
            )
        )
        team_id = c.execute(text("SELECT id FROM team")).scalar_one()
        for task, name in (
            ("tric-binary", "dev"),
            ("tric-binary", "test"),
            ("swissgov-rsd", "dev"),
        ):
            c.execute(
                text(
                    "INSERT INTO phase (task_id, name, split, public_fraction, frozen, "
                    "leaderboard_open, revision) VALUES (:t, :n, :n, 1.0, false, true, 0)"
                ),
                {"t": task, "n": name},
            )
        phase_id = c.execute(text("SELECT min(id) FROM phase")).scalar_one()
        c.execute(
            text(
                "INSERT INTO submission (team_id, task_id, phase_id, status, created_at, attempts,"
                " file_sha256, file_name, storage_key, size, method_name, description, url,"
                " show_publicly, is_primary, is_baseline, hidden, hidden_reason, stale) VALUES"
                " (:team, 'tric-binary', :phase, 'scored', '2026-01-02', 1, 'ab', 'p.jsonl', 'k',"
                " 3, 'm', '', '', true, true, false, false, '', false)"
            ),
            {"team": team_id, "phase": phase_id},
        )
    command.upgrade(cfg, "head")
    with Session(eng) as s:
        comps = {c.slug: c for c in s.exec(select(Competition))}
        assert set(comps) == {"tric-binary", "swissgov-rsd"}
        assert {c.state for c in comps.values()} == {"visible"}
        links = {(ct.competition_id, ct.task_id) for ct in s.exec(select(CompetitionTask))}
        assert links == {(comps[t].id, t) for t in comps}
        listed = comp.list_competitions(s=s, viewer=None)
        assert sorted(c.id for c in listed) == ["swissgov-rsd", "tric-binary"]
        assert comp.get_competition(s=s, viewer=None, competition="tric-binary").tasks == [
            "tric-binary"
        ]
    with eng.connect() as c:  # nothing of the phases, teams and submissions changed
        assert c.execute(text("SELECT count(*) FROM phase")).scalar_one() == 3
        assert c.execute(text("SELECT team_id, phase_id, status FROM submission")).one() == (
            team_id,
            phase_id,
            "scored",
        )
    command.downgrade(cfg, "a4e2b6c8d0f1")
    with eng.connect() as c:
        assert c.execute(text("SELECT count(*) FROM submission")).scalar_one() == 1
    eng.dispose()


def test_the_people_migration_keeps_every_team_member_and_makes_them_registered(empty_url):
    """Upgrading from competitions without people: each team member keeps their team in every
    competition and is registered (approved) in each; the organizer flag becomes the site
    administrator's; submissions, teams and phases are untouched; and down again."""
    from alembic import command

    from server.domain import people
    from server.migrate import alembic_config
    from server.models import Registration, Team, User
    from server.settings import Settings

    cfg = alembic_config(Settings(database_url=empty_url))
    command.upgrade(cfg, "c5d7e9f1a3b5")  # competitions, no people yet
    eng = create_engine(empty_url)
    with eng.begin() as c:
        for name in ("t1", "t2"):
            c.execute(
                text(
                    "INSERT INTO team (name, invite_code, is_baseline, created_at) "
                    "VALUES (:n, :n, false, '2026-01-01')"
                ),
                {"n": name},
            )
        t1, t2 = c.execute(text("SELECT id FROM team ORDER BY id")).scalars().all()
        for email, team, org in (
            ("a@x.org", t1, False),
            ("b@x.org", t1, False),
            ("c@x.org", t2, False),
            ("o@x.org", None, True),
        ):
            c.execute(
                text(
                    'INSERT INTO "user" (email, password_hash, is_organizer, team_id, created_at,'
                    " session_epoch) VALUES (:e, 'x', :o, :t, '2026-01-01', 0)"
                ),
                {"e": email, "o": org, "t": team},
            )
        for task in ("tric-binary", "swissgov-rsd"):
            c.execute(
                text(
                    "INSERT INTO competition (slug, title, state, created_at) "
                    "VALUES (:t, :t, 'visible', '2026-01-01')"
                ),
                {"t": task},
            )
            cid = c.execute(
                text("SELECT id FROM competition WHERE slug = :t"), {"t": task}
            ).scalar_one()
            c.execute(
                text(
                    "INSERT INTO competitiontask (competition_id, task_id, position) "
                    "VALUES (:c, :t, 0)"
                ),
                {"c": cid, "t": task},
            )
            c.execute(
                text(
                    "INSERT INTO phase (task_id, name, split, public_fraction, frozen, "
                    "leaderboard_open, revision) VALUES (:t, 'test', 'test', 1.0, false, true, 0)"
                ),
                {"t": task},
            )
        phase_id = c.execute(text("SELECT min(id) FROM phase")).scalar_one()
        c.execute(
            text(
                "INSERT INTO submission (team_id, task_id, phase_id, status, created_at, attempts,"
                " file_sha256, file_name, storage_key, size, method_name, description, url,"
                " show_publicly, is_primary, is_baseline, hidden, hidden_reason, stale) VALUES"
                " (:team, 'tric-binary', :phase, 'scored', '2026-01-02', 1, 'ab', 'p.jsonl', 'k',"
                " 3, 'm', '', '', true, true, false, false, '', false)"
            ),
            {"team": t1, "phase": phase_id},
        )
    command.upgrade(cfg, "head")
    with Session(eng) as s:
        users = {u.email: u for u in s.exec(select(User))}
        assert [e for e, u in users.items() if u.is_admin] == ["o@x.org"]
        comps = {c.slug: c for c in s.exec(select(Competition))}
        assert all(c.placeholder and c.data_public for c in comps.values())
        for c in comps.values():
            assert people.team_of(s, users["a@x.org"], c.id).name == "t1"
            assert people.team_of(s, users["b@x.org"], c.id).name == "t1"
            assert people.team_of(s, users["c@x.org"], c.id).name == "t2"
            assert people.team_of(s, users["o@x.org"], c.id) is None
            for email in ("a@x.org", "b@x.org", "c@x.org"):
                assert people.participation(s, users[email], c).ok
        assert s.exec(select(func.count()).select_from(Registration)).one() == 6
        t1_members = people.team_members(s, s.get(Team, t1))
        assert [u.email for u in t1_members] == ["a@x.org", "b@x.org"]
    with eng.connect() as c:
        assert c.execute(text("SELECT team_id, phase_id, status FROM submission")).one() == (
            t1,
            phase_id,
            "scored",
        )
        assert c.execute(text("SELECT count(*) FROM team")).scalar_one() == 2
        assert c.execute(text("SELECT count(*) FROM phase")).scalar_one() == 2
    command.downgrade(cfg, "c5d7e9f1a3b5")
    with eng.connect() as c:
        rows = c.execute(text('SELECT email, team_id, is_organizer FROM "user" ORDER BY email'))
        assert [tuple(r) for r in rows] == [
            ("a@x.org", t1, False),
            ("b@x.org", t1, False),
            ("c@x.org", t2, False),
            ("o@x.org", None, True),
        ]
    eng.dispose()


# ----------------------------------------------------------------------------- actions


def _admin_and_participant(backend):
    _, admin = make_team(backend, organizer=True)
    _, participant = make_team(backend)
    return admin, participant


def test_administrators_create_and_everyone_else_is_refused(backend):
    admin, participant = _admin_and_participant(backend)
    with backend.session() as s:
        link = s.exec(
            select(CompetitionTask).where(CompetitionTask.task_id == "tric-binary")
        ).first()
        placeholder = s.get(Competition, link.competition_id).slug if link else None
        with pytest.raises(Forbidden):
            comp.create_competition(
                s=s, actor=participant, via="web", competition="reuse", title="Reuse"
            )
        out = comp.create_competition(
            s=s, actor=admin, via="web", competition="reuse", title="Reuse", tasks=["tric-binary"]
        )
        assert (out.id, out.state, out.tasks, out.pages) == ("reuse", "draft", ["tric-binary"], [])
        with pytest.raises(LifecycleRefused, match="exists already"):
            comp.create_competition(s=s, actor=admin, via="web", competition="reuse", title="R")
        with pytest.raises(LifecycleRefused, match="'tric-binary' is in competition 'reuse'"):
            comp.create_competition(
                s=s, actor=admin, via="api", competition="other", title="O", tasks=["tric-binary"]
            )
        with pytest.raises(NotFound, match="no-such-task"):
            comp.create_competition(
                s=s, actor=admin, via="api", competition="o2", title="O", tasks=["no-such-task"]
            )
        with pytest.raises(UploadFieldsInvalid, match="id: 'Bad Id!'"):
            comp.create_competition(s=s, actor=admin, via="api", competition="Bad Id!", title="B")
        with pytest.raises(UploadFieldsInvalid, match="state"):
            comp.create_competition(
                s=s, actor=admin, via="api", competition="o3", title="B", state="public"
            )
        # a draft is not disclosed to someone with no role in it: the answer of a missing one
        with pytest.raises(NotFound, match="no competition 'reuse'"):
            comp.edit_competition(
                s=s, actor=participant, via="web", competition="reuse", state="visible"
            )
        with pytest.raises(NotFound, match="no competition 'reuse'"):
            comp.set_page(
                s=s,
                actor=participant,
                via="web",
                competition="reuse",
                page="overview",
                title="O",
                body_markdown="x",
            )
        audits = [
            (a.action, a.target, a.actor_id)
            for a in s.exec(select(AuditLog)).all()
            if a.action.startswith("competition")
        ]
        # the task was in the placeholder its phases made (backend's fixture): taken over from it
        taken_over = [("competition_take_over", "tric-binary", admin.id)] if placeholder else []
        assert audits == [*taken_over, ("competition_create", "reuse", admin.id)]
        if placeholder:
            assert s.exec(
                select(Competition).where(Competition.slug == placeholder)
            ).one().state == ("archived")
            # an emptied placeholder is not listed, to anyone
            listed = [c.id for c in comp.list_competitions(s=s, viewer=admin)]
            assert placeholder not in listed and "reuse" in listed


def _ids(items) -> list[str]:
    """The ids of the listed competitions the tests made (not the tasks' placeholders)."""
    return [c.id for c in items if c.id.endswith("-one")]


def test_a_draft_is_seen_by_administrators_only(backend):
    admin, participant = _admin_and_participant(backend)
    with backend.session() as s:
        comp.create_competition(s=s, actor=admin, via="web", competition="draft-one", title="D")
        comp.create_competition(
            s=s, actor=None, via="cli", competition="open-one", title="O", state="visible"
        )
        for viewer in (None, participant):
            assert _ids(comp.list_competitions(s=s, viewer=viewer)) == ["open-one"]
            with pytest.raises(NotFound, match="no competition 'draft-one'"):
                comp.get_competition(s=s, viewer=viewer, competition="draft-one")
            with pytest.raises(NotFound):
                comp.get_page(s=s, viewer=viewer, competition="draft-one", page="overview")
        assert _ids(comp.list_competitions(s=s, viewer=admin)) == [
            "open-one",
            "draft-one",
        ]
        assert comp.get_competition(s=s, viewer=admin, competition="draft-one").state == "draft"
        assert _ids(comp.list_competitions(s=s, viewer=None, operator=True)) == [
            "open-one",
            "draft-one",
        ]
        out = comp.edit_competition(
            s=s, actor=admin, via="api", competition="draft-one", state="visible", title="Dee"
        )
        assert (out.state, out.title) == ("visible", "Dee")
        assert comp.get_competition(s=s, viewer=participant, competition="draft-one").title == "Dee"
        comp.edit_competition(
            s=s, actor=admin, via="api", competition="draft-one", state="archived"
        )
        assert {c.id: c.state for c in comp.list_competitions(s=s, viewer=None) if _ids([c])} == {
            "open-one": "visible",
            "draft-one": "archived",
        }
        edits = s.exec(select(AuditLog).where(AuditLog.action == "competition_edit")).all()
        assert [e.details["state"] for e in edits] == [
            ["draft", "visible"],
            ["visible", "archived"],
        ]


def test_pages_are_created_edited_ordered_and_sanitized(backend):
    admin, participant = _admin_and_participant(backend)
    with backend.session() as s:
        comp.create_competition(
            s=s, actor=admin, via="web", competition="c", title="C", state="visible"
        )
        for slug in ("overview", "terms", "timeline"):
            comp.set_page(
                s=s,
                actor=admin,
                via="web",
                competition="c",
                page=slug,
                title=slug.title(),
                body_markdown=f"# {slug}",
            )
        comp.set_page(
            s=s,
            actor=admin,
            via="web",
            competition="c",
            page="terms",
            title="Terms of use",
            body_markdown=HOSTILE,
        )
        comp.set_page(
            s=s,
            actor=admin,
            via="web",
            competition="c",
            page="faq",
            title="FAQ",
            body_markdown="ask",
            position=1,
        )
        got = comp.get_competition(s=s, viewer=participant, competition="c")
        assert [(p.slug, p.position) for p in got.pages] == [
            ("overview", 0),
            ("terms", 1),
            ("faq", 1),
            ("timeline", 2),
        ]
        terms = comp.get_page(s=s, viewer=None, competition="c", page="terms")
        assert terms.title == "Terms of use" and terms.body_markdown == HOSTILE
        assert "<script" not in terms.html and "javascript:" not in terms.html.lower()
        assert len(s.exec(select(CompetitionPage)).all()) == 4
        with pytest.raises(NotFound, match=r"has no page 'nope' \(it has: overview, terms, faq"):
            comp.get_page(s=s, viewer=None, competition="c", page="nope")
        with pytest.raises(UploadFieldsInvalid, match="reserved"):
            comp.set_page(
                s=s,
                actor=admin,
                via="web",
                competition="c",
                page="edit-page",
                title="x",
                body_markdown="",
            )
        with pytest.raises(UploadFieldsInvalid, match="body_markdown"):
            comp.set_page(
                s=s,
                actor=admin,
                via="web",
                competition="c",
                page="big",
                title="x",
                body_markdown="x" * (MAX_MARKDOWN + 1),
            )
        with pytest.raises(UploadFieldsInvalid, match="body_markdown: line 34: indented more"):
            comp.set_page(
                s=s,
                actor=admin,
                via="web",
                competition="c",
                page="deep",
                title="x",
                body_markdown="".join("  " * i + "- x\n" for i in range(40)),
            )
        actions = [
            a.action
            for a in s.exec(select(AuditLog).order_by(AuditLog.id))
            if a.action.startswith("competition_page")
        ]
        assert actions == ["competition_page_create"] * 3 + ["competition_page_edit"] + [
            "competition_page_create"
        ]


# ----------------------------------------------------------------------------- surfaces


@pytest.fixture(params=["app", pytest.param("pg_app", marks=pytest.mark.postgres)])
def web(request):
    """The web app on SQLite and on PostgreSQL, with an administrator and a participant."""
    app = request.getfixturevalue(request.param)
    admin = make_user(app, "admin@x.org", organizer=True)
    participant = make_user(app, "p@x.org", team="pteam")
    return app, {"admin": make_token(app, admin), "participant": make_token(app, participant)}


def test_the_api_answers_as_described_and_checks_who_asks(web):
    app, tokens = web
    c = app.test_client()
    spec = c.get("/api/v1/openapi.json").json
    assert {"/competitions", "/competitions/{competition_id}"} <= set(spec["paths"])
    assert spec["paths"]["/competitions"]["get"]["security"] == []  # anonymous visitors may read
    body = {"id": "reuse-2027", "title": "Reuse 2027", "tasks": ["tric-binary"]}
    _check(spec, c.post("/api/v1/competitions", json=body), 401)
    r = c.post("/api/v1/competitions", json=body, headers=_bearer(tokens["participant"]))
    assert _check(spec, r, 403)["error"]["code"] == "not_admin"
    made = _check(
        spec, c.post("/api/v1/competitions", json=body, headers=_bearer(tokens["admin"])), 201
    )
    assert (made["id"], made["state"], made["tasks"]) == ("reuse-2027", "draft", ["tric-binary"])
    r = c.post("/api/v1/competitions", json=body, headers=_bearer(tokens["admin"]))
    assert _check(spec, r, 409)["error"]["code"] == "exists"
    r = c.post(
        "/api/v1/competitions", json={"id": "Bad!", "title": ""}, headers=_bearer(tokens["admin"])
    )
    err = _check(spec, r, 422)["error"]
    assert {p["id"] for p in err["problems"]} == {"id", "title"}

    # a draft: 404 to visitors and participants, listed for the administrator only
    for token in (None, tokens["participant"]):
        assert (
            _check(spec, c.get("/api/v1/competitions", headers=_bearer(token)), 200)["items"] == []
        )
        r = c.get("/api/v1/competitions/reuse-2027", headers=_bearer(token))
        assert _check(spec, r, 404)["error"]["code"] == "unknown_competition"
    listed = _check(spec, c.get("/api/v1/competitions", headers=_bearer(tokens["admin"])), 200)
    assert [i["id"] for i in listed["items"]] == ["reuse-2027"]
    r = c.get("/api/v1/competitions", headers=_bearer("not-a-token"))
    _check(spec, r, 401)

    page = {"title": "Terms", "body_markdown": HOSTILE}
    r = c.put("/api/v1/competitions/reuse-2027/pages/terms", json=page)
    _check(spec, r, 401)
    r = c.put(
        "/api/v1/competitions/reuse-2027/pages/terms",
        json=page,
        headers=_bearer(tokens["participant"]),
    )
    _check(spec, r, 404)  # a draft is not disclosed to someone with no role in it
    got = _check(
        spec,
        c.put(
            "/api/v1/competitions/reuse-2027/pages/terms",
            json=page,
            headers=_bearer(tokens["admin"]),
        ),
        200,
    )
    assert got["body_markdown"] == HOSTILE and "<script" not in got["html"]
    r = c.patch(
        "/api/v1/competitions/reuse-2027",
        json={"state": "visible"},
        headers=_bearer(tokens["participant"]),
    )
    _check(spec, r, 404)
    r = c.patch(
        "/api/v1/competitions/reuse-2027",
        json={"state": "visible"},
        headers=_bearer(tokens["admin"]),
    )
    assert _check(spec, r, 200)["state"] == "visible"
    shown = _check(spec, c.get("/api/v1/competitions/reuse-2027"), 200)
    assert [p["slug"] for p in shown["pages"]] == ["terms"]
    assert [i["id"] for i in _check(spec, c.get("/api/v1/competitions"), 200)["items"]] == [
        "reuse-2027"
    ]
    r = c.patch("/api/v1/competitions/nope", json={}, headers=_bearer(tokens["admin"]))
    _check(spec, r, 404)


def test_the_web_pages_show_sanitized_markdown_and_the_form_edits_them(web):
    app, _ = web
    with Session(engine_of(app)) as s:
        comp.create_competition(
            s=s, actor=None, via="cli", competition="c1", title="Reuse", state="visible"
        )
        comp.set_page(
            s=s,
            actor=None,
            via="cli",
            competition="c1",
            page="overview",
            title="Overview",
            body_markdown="Welcome to **Reuse**.",
        )
        comp.create_competition(s=s, actor=None, via="cli", competition="secret", title="Secret")
    anon = app.test_client()
    home = anon.get("/").get_data(as_text=True)
    assert 'href="/competitions/c1"' in home and "Secret" not in home
    page = anon.get("/competitions/c1").get_data(as_text=True)
    assert "<strong>Reuse</strong>" in page and "edit this page" not in page
    assert anon.get("/competitions/secret").status_code == 404
    assert anon.get("/competitions/c1/nope").status_code == 404
    assert anon.get("/competitions/c1/edit-page").status_code == 302  # to the sign-in page

    participant = Browser(app.test_client())
    participant.login("p@x.org")
    assert participant.get("/competitions/secret").status_code == 404
    assert participant.get("/competitions/c1/edit-page").status_code == 403
    r = participant.post("/competitions/c1/edit-page", {"page": "x", "title": "x"})
    assert r.status_code == 403

    admin = Browser(app.test_client())
    admin.login("admin@x.org")
    assert admin.get("/competitions/secret").status_code == 200
    form = admin.get("/competitions/c1/edit-page?page=overview").get_data(as_text=True)
    assert "Welcome to **Reuse**." in form and 'name="csrf_token"' in form
    r = admin.post("/competitions/c1/edit-page", {"page": "terms", "title": "T"}, csrf=False)
    assert r.status_code == 400  # no CSRF token
    r = admin.post(
        "/competitions/c1/edit-page",
        {"page": "terms", "title": "Terms", "body_markdown": HOSTILE},
    )
    assert r.status_code == 302 and r.headers["Location"].endswith("/competitions/c1/terms")
    shown = anon.get("/competitions/c1/terms").get_data(as_text=True)
    article = shown.split('<article class="markdown">', 1)[1].split("</article>", 1)[0]
    assert "<script" not in article and "onerror" not in article and "javascript:" not in article
    assert 'href="https://example.org/terms"' in article
    r = admin.post("/competitions/c1/edit-page", {"page": "Bad Id", "title": ""})
    text_ = r.get_data(as_text=True)
    assert r.status_code == 400 and "give the page a title" in text_
    r = admin.post("/competitions/c1/edit-page", {"page": "Bad Id", "title": "T"})
    assert r.status_code == 400 and "lowercase letters" in r.get_data(as_text=True)

    # title and state: the administrator's form; a participant is refused
    # organizers only, before anything is looked up: a draft is not disclosed by the answer (the
    # one organizer check: 404 as for a competition that does not exist, 403 for a visible one)
    assert participant.post("/competitions/secret/edit", {"title": "x"}).status_code == 404
    assert participant.post("/competitions/nothing/edit", {"title": "x"}).status_code == 404
    assert participant.post("/competitions/c1/edit", {"title": "x"}).status_code == 403
    form = admin.get("/competitions/secret/edit").get_data(as_text=True)
    assert 'value="Secret"' in form and '<option selected value="draft">' in form
    r = admin.post("/competitions/secret/edit", {"title": "Secret", "state": "public"})
    assert r.status_code == 400 and "Not a valid choice" in r.get_data(as_text=True)
    r = admin.post("/competitions/secret/edit", {"title": "No secret", "state": "visible"})
    assert r.status_code == 302
    assert anon.get("/competitions/secret").status_code == 200
    assert "No secret" in anon.get("/").get_data(as_text=True)


def test_competitions_list_json_prints_one_document(tmp_path, monkeypatch):
    import subprocess
    import sys

    from conftest import REPO

    env = {
        "PATH": "/usr/bin:/bin",
        "PALIMPSEST_HOME": str(tmp_path / "h"),
        "PYTHONPATH": str(REPO),
    }
    run = [sys.executable, "-m", "cli.main", "competitions", "list", "--json"]
    r = subprocess.run(run, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
    from server.db import get_engine
    from server.settings import Settings

    engine = get_engine(Settings(home=tmp_path / "h").sqlalchemy_url())
    with Session(engine) as s:
        comp.create_competition(s=s, actor=None, via="cli", competition="a", title="A")
        comp.create_competition(
            s=s, actor=None, via="cli", competition="b", title="B", state="visible"
        )
    engine.dispose()
    r = subprocess.run(run, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)  # one JSON document, nothing else on stdout
    assert [(c["id"], c["state"]) for c in got] == [("b", "visible"), ("a", "draft")]
    plain = subprocess.run(run[:-1], env=env, cwd=REPO, capture_output=True, text=True)
    assert plain.returncode == 0 and plain.stdout.splitlines()[0].split()[:2] == ["b", "visible"]


def test_the_demo_makes_a_visible_competition_with_overview_and_terms(embedded_backend):
    from server.demo import DEMO_COMPETITION, seed_demo_competition

    b = embedded_backend
    with b.session() as s:
        assert seed_demo_competition(s, b.settings.home)
        assert not seed_demo_competition(s, b.settings.home)  # once
        got = comp.get_competition(s=s, viewer=None, competition=DEMO_COMPETITION)
        assert got.state == "visible" and got.tasks
        assert [p.slug for p in got.pages] == ["overview", "terms"]
        assert "<strong>synthetic data</strong>" in got.pages[0].html


def test_an_administrator_creates_a_competition_on_the_web_and_becomes_its_owner(web):
    app, _tokens = web
    from server.domain import people

    participant = Browser(app.test_client())
    participant.login("p@x.org")
    assert participant.get("/competitions/new").status_code == 403
    assert participant.post(
        "/competitions/new", {"competition": "x", "title": "X"}
    ).status_code == (403)
    admin = Browser(app.test_client())
    admin.login("admin@x.org")
    page = admin.get("/competitions/new").get_data(as_text=True)
    assert 'name="competition"' in page and 'value="tric-binary"' in page
    r = admin.post("/competitions/new", {"competition": "new", "title": "N"})
    assert r.status_code == 400 and "reserved" in r.get_data(as_text=True)
    r = admin.post(
        "/competitions/new",
        {"competition": "reuse-2028", "title": "Reuse 2028", "tasks": "tric-binary"},
    )
    assert r.status_code == 302 and r.headers["Location"].endswith("/competitions/reuse-2028")
    with Session(engine_of(app)) as s:
        c = comp.find(s, "reuse-2028")
        assert c.state == "draft"
        admin_user = s.exec(select(User).where(User.email == "admin@x.org")).one()
        assert people.role_of(s, admin_user, c.id) == "owner"
        assert people.task_ids(s, c.id) == ["tric-binary"]
    # the draft's task is its people's: a participant is told there is no such task
    assert participant.get("/tasks/tric-binary").status_code == 404
    assert admin.get("/tasks/tric-binary").status_code == 200
    # a task in a competition of its own making is offered no more
    page = admin.get("/competitions/new").get_data(as_text=True)
    assert 'value="tric-binary"' not in page


def test_the_servers_shell_creates_a_competition_with_an_owner(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cli.main import main
    from server.db import get_engine
    from server.domain.accounts import create_user
    from server.settings import Settings

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    engine = get_engine(Settings(home=tmp_path / "h").sqlalchemy_url())
    with Session(engine) as s:
        create_user(s, email="own@x.org", password="correct horse battery")
        s.commit()
    args = ["competitions", "create", "c1", "--title", "C one", "--owner", "own@x.org", "--json"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["id"], got["state"], got["tasks"]) == ("c1", "draft", [])
    r = CliRunner().invoke(main, ["competitions", "create", "c1", "--title", "again"])
    assert r.exit_code == 1 and "exists already" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(
        main, ["competitions", "create", "c2", "--title", "T", "--owner", "no@x"]
    )
    assert r.exit_code == 1 and "no user with email" in r.output
    from server.domain import people

    with Session(engine) as s:
        own = s.exec(select(User).where(User.email == "own@x.org")).one()
        assert people.role_of(s, own, comp.find(s, "c1").id) == "owner"
    engine.dispose()
