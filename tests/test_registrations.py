"""Registration per competition: terms accepted (and asked again when they change), manual
approval, the allow-list of email domains, an organizer's decisions (a ban takes the person's runs
off the live boards, never off a published snapshot; reinstating brings them back), the
participants list and who may read it, through the API (checked against its OpenAPI description),
the CLI over real HTTP and the web pages."""

from __future__ import annotations

import json

import pytest
from apikit import (
    TASK,
    _check,
    _cli,
    _engine,
    _h,
    _one_json,
    _run_job,
    _setup,
    _submit,
    _terms,
    _tric_file,
)
from sqlmodel import Session, select
from webkit import Browser

from server.actions import competitions as comp
from server.actions import registrations as regs
from server.domain import people
from server.domain.accounts import create_token, create_user
from server.models import AuditLog, Competition, OutgoingMail, Registration, Submission, User


def _slug(app) -> str:
    with Session(_engine(app)) as s:
        return people.competition_of_task(s, TASK).slug


def _user(app, email, **kw):
    with Session(_engine(app), expire_on_commit=False) as s:
        u = create_user(s, email=email, password="correct horse", **kw)
        s.commit()
        _, token = create_token(s, user=u)
        s.commit()
        return u, token


def _download(client, token):
    return client.get(f"/api/v1/tasks/{TASK}/download", headers=_h(token))


def _spec(client):
    return client.get("/api/v1/openapi.json").json


# ----------------------------------------------------------------------------- terms


def test_terms_are_accepted_recorded_and_asked_again_when_they_change(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    spec = _spec(c)
    slug = _setup(app, data_public=False)
    _terms(c, tokens["org"], slug, "Do not share the gold.")
    alpha = tokens["alpha"]
    url = f"/api/v1/competitions/{slug}/registration"

    mine = _check(spec, c.get(url, headers=_h(alpha)), 200)
    assert (mine["registered"], mine["participating"], mine["code"]) == (
        False,
        False,
        "not_registered",
    )
    assert (mine["current_terms_version"], mine["terms_url"]) == (1, f"/competitions/{slug}/terms")
    r = _download(c, alpha)
    assert r.status_code == 403 and r.json["error"]["code"] == "not_registered"
    _check(spec, c.post(url), 401)
    err = _check(spec, c.post(url, json={}, headers=_h(alpha)), 422)["error"]
    assert err["message"].startswith("accept_terms: accept the terms")
    got = _check(spec, c.post(url, json={"accept_terms": True}, headers=_h(alpha)), 200)
    assert (got["status"], got["terms_version"], got["participating"]) == ("approved", 1, True)
    first_accepted = got["terms_accepted_at"]
    assert first_accepted
    assert _download(c, alpha).status_code == 200

    # the terms change: downloads and submissions are refused until they are accepted again
    _terms(c, tokens["org"], slug, "Do not share the gold. Cite the overview paper.")
    r = _download(c, alpha)
    assert r.status_code == 403 and r.json["error"]["code"] == "terms_changed"
    r = _submit(c, alpha, TASK, _tric_file(home), phase="test")
    assert r.status_code == 403 and r.json["error"]["code"] == "terms_changed"
    mine = _check(spec, c.get(url, headers=_h(alpha)), 200)
    assert (mine["terms_version"], mine["current_terms_version"], mine["code"]) == (
        1,
        2,
        "terms_changed",
    )
    got = _check(spec, c.post(url, json={"accept_terms": True}, headers=_h(alpha)), 200)
    assert got["terms_version"] == 2 and got["terms_accepted_at"] >= first_accepted
    assert _download(c, alpha).status_code == 200
    assert _submit(c, alpha, TASK, _tric_file(home), phase="test").status_code == 201
    with Session(_engine(app)) as s:
        acts = [
            (a.action, (a.details or {}).get("terms_version"))
            for a in s.exec(select(AuditLog).where(AuditLog.action.startswith("registration")))
        ]
    assert acts == [("registration_create", 1), ("registration_terms", [1, 2])]


# ----------------------------------------------------------------------------- approval


def test_manual_approval_the_allow_list_and_the_participants_list(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    spec = _spec(c)
    slug = _setup(app, data_public=False, approval="manual", allowed_domains=["example.org"])
    _, outsider = _user(app, "eve@elsewhere.net")
    url = f"/api/v1/competitions/{slug}/registration"
    err = _check(spec, c.post(url, json={}, headers=_h(outsider)), 403)["error"]
    assert err["code"] == "domain_not_allowed" and "example.org" in err["message"]

    beta = tokens["beta"]
    got = _check(spec, c.post(url, json={}, headers=_h(beta)), 200)
    assert (got["status"], got["participating"], got["code"]) == (
        "pending",
        False,
        "registration_pending",
    )
    r = _download(c, beta)
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_pending"
    r = _submit(c, beta, TASK, _tric_file(home), phase="test")
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_pending"

    plist = f"/api/v1/competitions/{slug}/participants"
    page = _check(spec, c.get(plist + "?status=pending", headers=_h(tokens["org"])), 200)
    assert [(p["email"], p["status"], p["team"]) for p in page["items"]] == [
        ("beta@example.org", "pending", "beta")
    ]
    assert (
        _check(spec, c.get(plist + "?status=banned", headers=_h(tokens["org"])), 200)["items"] == []
    )
    _check(spec, c.get(plist + "?status=nope", headers=_h(tokens["org"])), 422)
    # a participant, an organizer of another competition: refused; a competition that is not: 404
    r = c.get(plist, headers=_h(beta))
    assert _check(spec, r, 403)["error"]["code"] == "not_organizer"
    other, other_token = _user(app, "other-org@example.org")
    with Session(_engine(app)) as s:
        comp.create_competition(s=s, actor=None, via="cli", competition="other", title="O")
        people.grant(s, comp.find(s, "other").id, s.get(User, other.id), people.OWNER)
        s.commit()
    assert (
        _check(
            spec, c.get("/api/v1/competitions/other/participants", headers=_h(other_token)), 200
        )["items"]
        == []
    )
    _check(spec, c.get(plist, headers=_h(other_token)), 403)
    r = c.post(f"{plist}/beta@example.org/approve", json={}, headers=_h(other_token))
    _check(spec, r, 403)
    _check(spec, c.get("/api/v1/competitions/nope/participants", headers=_h(tokens["org"])), 404)
    # the draft "other" is not disclosed to a participant
    _check(spec, c.get("/api/v1/competitions/other/participants", headers=_h(beta)), 404)

    dec = f"{plist}/beta@example.org"
    err = _check(spec, c.post(dec + "/reject", json={}, headers=_h(tokens["org"])), 422)["error"]
    assert "reason" in err["message"]
    _check(spec, c.post(dec + "/explode", json={}, headers=_h(tokens["org"])), 422)
    _check(spec, c.post(f"{plist}/nobody@x.org/approve", json={}, headers=_h(tokens["org"])), 404)
    got = _check(spec, c.post(dec + "/approve", json={}, headers=_h(tokens["org"])), 200)
    assert (got["status"], got["team"]) == ("approved", "beta")
    assert _download(c, beta).status_code == 200
    assert _submit(c, beta, TASK, _tric_file(home), phase="test").status_code == 201
    # an approved one cannot be re-approved into something else by mistake: reinstate is refused
    r = c.post(dec + "/reinstate", json={}, headers=_h(tokens["org"]))
    assert _check(spec, r, 409)["error"]["code"] == "registration_state"


def test_participants_list_is_one_query_per_page_for_a_thousand(api_env):  # noqa: F811
    from sqlalchemy import event

    app, tokens, _ = api_env
    slug = _setup(app, approval="manual")
    with Session(_engine(app)) as s:
        cid = comp.find(s, slug).id
        users = [User(email=f"p{i}@example.org", password_hash="x") for i in range(1000)]
        s.add_all(users)
        s.flush()
        s.add_all(Registration(competition_id=cid, user_id=u.id, status="pending") for u in users)
        s.commit()
    eng = _engine(app)
    seen: list[str] = []

    def count(conn, cursor, statement, *a):
        seen.append(statement)

    event.listen(eng, "before_cursor_execute", count)
    try:
        with Session(eng) as s:
            got = regs.list_participants(s=s, actor=None, competition=slug, limit=500)
    finally:
        event.remove(eng, "before_cursor_execute", count)
    assert len(got.items) == 500 and got.next_after is not None
    assert len(seen) <= 3, seen  # the competition, then one joined query for the page
    c = app.test_client()
    first = c.get(f"/api/v1/competitions/{slug}/participants?limit=500", headers=_h(tokens["org"]))
    second = c.get(first.json["next"], headers=_h(tokens["org"]))
    emails = [p["email"] for p in first.json["items"] + second.json["items"]]
    assert len(emails) == len(set(emails)) == 1000


# ----------------------------------------------------------------------------- ban


def _predictions(home, split: str, flip_every: int) -> bytes:
    """Predictions for a split's gold, every `flip_every`-th label wrong."""
    gold = (home / f"tasks/{TASK}/gold/{split}/gold.jsonl").read_text().splitlines()
    rows = []
    for i, line in enumerate(gold):
        g = json.loads(line)
        label = (1 - g["label"]) if i % flip_every == 0 else g["label"]
        rows.append(json.dumps({"instanceID": g["instanceID"], "label": label}) + "\n")
    return "".join(rows).encode()


def _board(client, token, phase="test"):
    r = client.get(f"/api/v1/tasks/{TASK}/leaderboard?phase={phase}", headers=_h(token))
    assert r.status_code == 200, r.json
    return r


def _teams(board_json):
    return {row["team"]: row.get("note", "") for row in board_json["rows"]}


def test_a_ban_takes_runs_off_live_boards_not_off_a_published_snapshot(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    spec = _spec(c)
    slug = _setup(app, data_public=False)
    org, alpha, beta = tokens["org"], tokens["alpha"], tokens["beta"]
    for tok, flip in ((alpha, 3), (beta, 4)):
        for phase in ("dev", "test"):
            r = _submit(c, tok, TASK, _predictions(home, phase, flip), phase=phase)
            assert r.status_code == 201, r.json
            _run_job(r.json["id"])
    r = c.post(f"/api/v1/tasks/{TASK}/phases/dev/publish", json={"close": True}, headers=_h(org))
    assert r.status_code == 201, r.json
    snap = c.get(f"/api/v1/tasks/{TASK}/phases/dev/rankings/1", headers=_h(org))
    assert snap.status_code == 200 and "alpha" in _teams(snap.json)
    assert set(_teams(_board(c, beta).json)) == {"alpha", "beta"}

    dec = f"/api/v1/competitions/{slug}/participants/alpha@example.org"
    got = _check(
        spec, c.post(dec + "/ban", json={"reason": "shared the gold"}, headers=_h(org)), 200
    )
    assert (got["status"], got["reason"]) == ("banned", "shared the gold")
    r = _download(c, alpha)
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_banned"
    assert "shared the gold" in r.json["error"]["message"]
    r = _submit(c, alpha, TASK, _tric_file(home, 6), phase="test")
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_banned"
    # a banned person cannot register again by themselves
    r = c.post(f"/api/v1/competitions/{slug}/registration", json={}, headers=_h(alpha))
    assert _check(spec, r, 403)["error"]["code"] == "registration_banned"
    assert set(_teams(_board(c, beta).json)) == {"beta"}
    assert _teams(_board(c, org).json)["alpha"] == "banned"  # organizers see it, marked
    again = c.get(f"/api/v1/tasks/{TASK}/phases/dev/rankings/1", headers=_h(org))
    assert again.get_data() == snap.get_data()  # the published snapshot, byte for byte
    with Session(_engine(app)) as s:
        mail = s.exec(select(OutgoingMail).where(OutgoingMail.kind == "registration")).all()
        assert [(x.to_addr, "shared the gold" in x.body) for x in mail] == [
            ("alpha@example.org", True)
        ]
        assert s.exec(select(AuditLog).where(AuditLog.action == "registration_ban")).one()

    got = _check(spec, c.post(dec + "/reinstate", json={}, headers=_h(org)), 200)
    assert got["status"] == "approved"
    assert set(_teams(_board(c, beta).json)) == {"alpha", "beta"}
    assert _download(c, alpha).status_code == 200
    assert c.get(f"/api/v1/tasks/{TASK}/phases/dev/rankings/1", headers=_h(org)).get_data() == (
        snap.get_data()
    )
    with Session(_engine(app)) as s:
        assert s.exec(select(Submission).where(Submission.user_id.is_not(None))).first()


# ----------------------------------------------------------------------------- CLI


def test_cli_register_participants_approve_and_ban(served):  # noqa: F811
    url, tokens, home, app = served
    slug = _setup(app, approval="manual", data_public=False)
    c = app.test_client()
    _terms(c, tokens["org"], slug, "Be kind.")
    r = _cli(url, tokens["alpha"], "register", slug, ok=False)
    assert (
        r.exit_code == 1 and "version 1" in r.stderr and f"/competitions/{slug}/terms" in (r.stderr)
    )
    r = _cli(url, tokens["alpha"], "register", slug, "--json", ok=False)
    assert r.exit_code == 1 and _one_json(r)["error"]["code"] == "terms_not_accepted"
    got = _one_json(_cli(url, tokens["alpha"], "register", slug, "--accept-terms", "--json"))
    assert (got["status"], got["terms_version"]) == ("pending", 1)
    out = _cli(url, tokens["beta"], "register", slug, "--accept-terms").stdout
    assert f"registered for {slug}: pending" in out

    rows = _one_json(_cli(url, tokens["org"], "organizer", "participants", slug, "--json"))
    assert sorted((p["email"], p["status"]) for p in rows) == [
        ("alpha@example.org", "pending"),
        ("beta@example.org", "pending"),
    ]
    table = _cli(url, tokens["org"], "organizer", "participants", slug).stdout
    assert "alpha@example.org" in table and "pending" in table
    r = _cli(url, tokens["alpha"], "organizer", "participants", slug, ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("error: this needs an organizer")
    done = _one_json(
        _cli(
            url,
            tokens["org"],
            "organizer",
            "approve",
            slug,
            "alpha@example.org",
            "beta@example.org",
            "--json",
        )
    )
    assert [d["status"] for d in done] == ["approved", "approved"]
    r = _cli(url, tokens["org"], "organizer", "ban", slug, "beta@example.org", ok=False)
    assert r.exit_code == 2 and "--reason" in r.output  # click: the reason is required
    got = _one_json(
        _cli(
            url,
            tokens["org"],
            "organizer",
            "ban",
            slug,
            "beta@example.org",
            "--reason",
            "cheating",
            "--json",
        )
    )
    assert got["status"] == "banned"
    banned = _one_json(
        _cli(url, tokens["org"], "organizer", "participants", slug, "--status", "banned", "--json")
    )
    assert [p["email"] for p in banned] == ["beta@example.org"]
    out = _cli(url, tokens["org"], "organizer", "reinstate", slug, "beta@example.org").stdout
    assert out == "beta@example.org: approved\n"


# ----------------------------------------------------------------------------- web


@pytest.fixture(params=["app", pytest.param("pg_app", marks=pytest.mark.postgres)])
def web(request):
    from webkit import make_user

    app = request.getfixturevalue(request.param)
    make_user(app, "admin@x.org", organizer=True)
    make_user(app, "p@x.org", team="pteam")
    with Session(_engine(app)) as s:
        comp.create_competition(
            s=s, actor=None, via="cli", competition="c1", title="Reuse", state="visible"
        )
        comp.set_page(
            s=s,
            actor=None,
            via="cli",
            competition="c1",
            page="terms",
            title="Terms",
            body_markdown="Be kind.",
        )
    return app


def test_the_web_pages_register_list_decide_and_edit_settings(web):
    app = web
    anon = app.test_client().get("/competitions/c1").get_data(as_text=True)
    assert "to register for this competition" in anon and "/login" in anon

    p = Browser(app.test_client())
    p.login("p@x.org")
    page = p.get("/competitions/c1").get_data(as_text=True)
    assert "I accept the terms" in page and "Terms: version 1" in page
    assert "Participants</a>" not in page  # organizers' links only
    r = p.post("/competitions/c1/register", {}, csrf=False)
    assert r.status_code == 400  # no CSRF token
    r = p.post("/competitions/c1/register", {})
    assert r.status_code == 302
    assert "accept_terms" in p.get("/competitions/c1").get_data(as_text=True)  # flashed
    # the form carries the version it showed
    assert 'name="terms_version" value="1"' in page
    r = p.post("/competitions/c1/register", {"accept_terms": "1", "terms_version": "1"})
    assert r.status_code == 302
    page = p.get("/competitions/c1").get_data(as_text=True)
    assert "<strong>approved</strong>" in page and "I accept the terms" not in page
    assert p.get("/competitions/c1/participants").status_code == 403
    assert p.get("/competitions/c1/settings").status_code == 403
    assert p.post("/competitions/c1/settings", {"approval": "manual"}).status_code == 403

    admin = Browser(app.test_client())
    admin.login("admin@x.org")
    page = admin.get("/competitions/c1").get_data(as_text=True)
    assert "/competitions/c1/participants" in page and "/competitions/c1/settings" in page
    listing = admin.get("/competitions/c1/participants").get_data(as_text=True)
    assert "p@x.org" in listing and "approved" in listing and "pteam" in listing
    with Session(_engine(app)) as s:
        uid = s.exec(select(User).where(User.email == "p@x.org")).one().id
    r = admin.post(f"/competitions/c1/participants/{uid}", {"action": "suspend", "reason": ""})
    assert r.status_code == 302
    assert "say why" in admin.get("/competitions/c1/participants").get_data(as_text=True)
    r = admin.post(f"/competitions/c1/participants/{uid}", {"action": "suspend", "reason": "rude"})
    assert r.status_code == 302
    listing = admin.get("/competitions/c1/participants?status=suspended").get_data(as_text=True)
    assert "p@x.org" in listing and "rude" in listing
    page = p.get("/competitions/c1").get_data(as_text=True)
    assert "<strong>suspended</strong> (terms version 1 accepted): rude." in page
    assert "Register</button>" not in page

    form = admin.get("/competitions/c1/settings").get_data(as_text=True)
    assert '<option selected value="auto">' in form and 'name="csrf_token"' in form
    r = admin.post(
        "/competitions/c1/settings",
        {"approval": "manual", "allowed_domains": "not a domain", "team_size_cap": "3"},
    )
    assert r.status_code == 400 and "is not an email domain" in r.get_data(as_text=True)
    r = admin.post(
        "/competitions/c1/settings",
        {
            "approval": "manual",
            "allowed_domains": "x.org\nuni.example.edu\n",
            "data_public": "y",
            "team_size_cap": "3",
        },
    )
    assert r.status_code == 302
    with Session(_engine(app)) as s:
        c = s.exec(select(Competition).where(Competition.slug == "c1")).one()
        assert (c.approval, c.allowed_domains, c.data_public, c.team_size_cap) == (
            "manual",
            ["x.org", "uni.example.edu"],
            True,
            3,
        )
        assert (c.join_needs_captain, c.anonymous_board) == (False, False)

    # the fact sheet, in YAML: saved, shown again as YAML; a YAML or field problem is named
    sheet = (
        "- key: affiliation\n  label: Affiliation\n  required: true\n"
        "- key: approach\n  label: Approach\n  kind: choice\n  choices: [neural, rules]\n"
    )
    base = {"approval": "manual", "allowed_domains": "x.org", "team_size_cap": "3"}
    r = admin.post("/competitions/c1/settings", {**base, "fact_fields": sheet})
    assert r.status_code == 302, r.get_data(as_text=True)[:3000]
    with Session(_engine(app)) as s:
        c = s.exec(select(Competition).where(Competition.slug == "c1")).one()
        assert [(f["key"], f["kind"], f["required"]) for f in c.fact_fields] == [
            ("affiliation", "text", True),
            ("approach", "choice", False),
        ]
    shown = admin.get("/competitions/c1/settings").get_data(as_text=True)
    assert "key: approach" in shown and "- neural" in shown
    r = admin.post("/competitions/c1/settings", {**base, "fact_fields": "- key: [unclosed\n"})
    assert r.status_code == 400 and "line 2: not YAML" in r.get_data(as_text=True)
    bad = "- key: approach\n  label: A\n  kind: essay\n"
    r = admin.post("/competitions/c1/settings", {**base, "fact_fields": bad})
    assert r.status_code == 400 and "fact_fields.0.kind" in r.get_data(as_text=True)
