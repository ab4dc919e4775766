"""Roles in a competition and invitations to them: an owner invites by email (the link queued by
mail when the server sends mail, a real SMTP server here; when it does not, the link handed back,
even for an address that has an account: nothing proves its holder), the invited account accepts
the signed link (with mail, another account is refused; without, whoever holds the link accepts
it; an expired, cancelled or used link is refused, saying why), organizers read the
roles, owners revoke them but never the last owner's, and an invited organizer runs their own
competition and no other. On the API (against its OpenAPI description), the web pages and the
CLI."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from apikit import _bearer, _check
from click.testing import CliRunner
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from mailkit import _app, smtp  # noqa: F401  (smtp: the aiosmtpd fixture)
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_token, make_user

from server.actions import competitions as comp
from server.actions import roles
from server.domain import people
from server.models import (
    AuditLog,
    CompetitionInvite,
    CompetitionRole,
    OutgoingMail,
    Phase,
    User,
)

TOKEN = re.compile(r"/invites/([A-Za-z0-9._-]+)")


def _world(app):
    """Competition A (tric-binary, owned by owner@x.org) and B (swissgov-rsd), made by a site
    administrator; tokens of the administrator, A's owner, and a bystander."""
    admin = make_user(app, "admin@x.org", organizer=True)
    owner = make_user(app, "owner@x.org")
    with Session(engine_of(app), expire_on_commit=False) as s:
        for slug, task in (("comp-a", "tric-binary"), ("comp-b", "swissgov-rsd")):
            comp.create_competition(
                s=s,
                actor=s.get(User, admin.id),
                via="cli",
                competition=slug,
                title=slug.upper(),
                state="visible",
                tasks=[task],
            )
        a = comp.find(s, "comp-a")
        people.grant(s, a.id, s.get(User, owner.id), people.OWNER)
        s.commit()
    make_phase(app, "tric-binary", "dev")
    make_phase(app, "swissgov-rsd", "dev")
    return {"admin": make_token(app, admin), "owner": make_token(app, owner)}


def _spec(c):
    return c.get("/api/v1/openapi.json").json


def _role(app, slug: str, email: str) -> str | None:
    with Session(engine_of(app)) as s:
        u = s.exec(select(User).where(User.email == email)).first()
        return people.role_of(s, u, comp.find(s, slug).id)


# ----------------------------------------------------------------------------- mail configured


@pytest.fixture
def mail_app(web_home, monkeypatch, smtp):  # noqa: F811
    return _app(
        web_home,
        monkeypatch,
        smtp_host="127.0.0.1",
        smtp_port=smtp.port,
        smtp_security="none",
        base_url="http://palimpsest.test",
        mail_from="org@palimpsest.test",
    )


def test_an_invitation_is_queued_by_mail_and_its_link_grants_the_role(mail_app):
    app = mail_app
    tokens = _world(app)
    c = app.test_client()
    spec = _spec(c)
    body = {"email": "New.Org@X.org", "role": "organizer"}
    got = _check(
        spec,
        c.post("/api/v1/competitions/comp-a/roles", json=body, headers=_bearer(tokens["owner"])),
        201,
    )
    assert (got["status"], got["email"], got["role"]) == ("mailed", "new.org@x.org", "organizer")
    with Session(engine_of(app)) as s:
        mail = s.exec(select(OutgoingMail)).one()
        assert (mail.to_addr, mail.dedup_key, mail.kind) == (
            "new.org@x.org",
            f"invite:{got['id']}",
            "invite",
        )
        assert mail.competition_id == comp.find(s, "comp-a").id
    # the link goes to the address alone: the answer to the inviter does not hold it
    assert got.get("link") is None and "http://palimpsest.test/invites/" in mail.body
    token = TOKEN.search(mail.body).group(1)
    assert _role(app, "comp-a", "new.org@x.org") is None  # nothing yet: no account, not accepted

    # with mail the address is proved: another account holding the link is refused
    wrong = _bearer(make_token(app, make_user(app, "wrong@x.org")))
    r = c.post("/api/v1/invites/accept", json={"token": token}, headers=wrong)
    err = _check(spec, r, 403)["error"]
    # the address is not disclosed to the wrong account: its first letter and domain only
    assert err["code"] == "wrong_account" and "n…@x.org" in err["message"]
    assert "new.org@x.org" not in err["message"]
    assert _role(app, "comp-a", "wrong@x.org") is None
    w = Browser(app.test_client())
    w.login("wrong@x.org")
    page = w.get(f"/invites/{token}").get_data(as_text=True)
    assert "sign in (or register) with n…@x.org" in page and ">Accept<" not in page
    assert w.post(f"/invites/{token}").status_code == 403

    # the invited person registers with that address, opens the link, sees what it offers
    make_user(app, "new.org@x.org")
    b = Browser(app.test_client())
    assert b.get(f"/invites/{token}").status_code == 302  # sign in first
    b.login("new.org@x.org")
    page = b.get(f"/invites/{token}").get_data(as_text=True)
    assert "<strong>organizer</strong>" in page and "COMP-A" in page and ">Accept<" in page
    r = b.post(f"/invites/{token}")
    assert r.status_code == 302 and r.headers["Location"].endswith("/competitions/comp-a")
    assert _role(app, "comp-a", "new.org@x.org") == "organizer"
    r = b.post(f"/invites/{token}")  # once
    assert r.status_code == 409 and "accepted already" in r.get_data(as_text=True)
    with Session(engine_of(app)) as s:
        rows = [
            (a.action, a.target, a.competition_id is not None)
            for a in s.exec(select(AuditLog).order_by(AuditLog.id))
            if a.action.startswith("competition_role")
        ]
    assert rows == [
        ("competition_role_invite", "comp-a/new.org@x.org", True),
        ("competition_role_accept", "comp-a/new.org@x.org", True),
    ]


# ----------------------------------------------------------------------------- mail off


def test_without_mail_a_squatted_address_gets_nothing_and_the_link_grants_its_holder(app):
    """On a site without mail anyone registers any address: a squatter who took an organizer's
    address before them gets nothing from an invitation to it; the link, handed over by the
    owner, carries the role to whoever accepts it signed in."""
    tokens = _world(app)
    squatter = make_user(app, "has@x.org")  # registered first, by someone else
    c = app.test_client()
    spec = _spec(c)
    h = _bearer(tokens["owner"])
    got = _check(
        spec,
        c.post(
            "/api/v1/competitions/comp-a/roles",
            json={"email": "has@x.org", "role": "assessor"},
            headers=h,
        ),
        201,
    )
    assert got["status"] == "link" and "/invites/" in got["link"]
    assert "nothing proves who holds has@x.org" in got["message"]
    assert _role(app, "comp-a", "has@x.org") is None
    with Session(engine_of(app)) as s:
        inv = s.get(CompetitionInvite, got["id"])
        assert inv.accepted_at is None
    # the organizer hands the link to the real person, who signs in with an address of their own
    make_user(app, "real.assessor@y.org")
    link_token = TOKEN.search(got["link"]).group(1)
    b = Browser(app.test_client())
    b.login("real.assessor@y.org")
    page = b.get(f"/invites/{link_token}").get_data(as_text=True)
    assert ">Accept<" in page
    r = b.post(f"/invites/{link_token}")
    assert r.status_code == 302 and r.headers["Location"].endswith("/competitions/comp-a")
    assert _role(app, "comp-a", "real.assessor@y.org") == "assessor"
    assert _role(app, "comp-a", "has@x.org") is None
    # the squatter, holding no link, still has nothing; the link worked once
    r = c.post(
        "/api/v1/invites/accept",
        json={"token": link_token},
        headers=_bearer(make_token(app, squatter)),
    )
    assert _check(spec, r, 409)["error"]["code"] == "invite_used"
    assert _role(app, "comp-a", "has@x.org") is None

    got = _check(
        spec,
        c.post(
            "/api/v1/competitions/comp-a/roles",
            json={"email": "later@x.org", "role": "organizer"},
            headers=h,
        ),
        201,
    )
    assert got["status"] == "link" and "/invites/" in got["link"]
    token = TOKEN.search(got["link"]).group(1)
    with Session(engine_of(app)) as s:
        assert s.exec(select(OutgoingMail)).all() == []  # no mail is queued without mail
    listed = _check(spec, c.get("/api/v1/competitions/comp-a/roles", headers=h), 200)
    assert [(p["email"], p["role"]) for p in listed["people"]] == [
        ("admin@x.org", "owner"),
        ("owner@x.org", "owner"),
        ("real.assessor@y.org", "assessor"),
    ]
    assert [(i["email"], i["role"]) for i in listed["invites"]] == [("later@x.org", "organizer")]
    assert listed["may_change"] is True

    later = make_user(app, "later@x.org")
    r = c.post(
        "/api/v1/invites/accept", json={"token": token}, headers=_bearer(make_token(app, later))
    )
    assert _check(spec, r, 200) == {
        "competition": "comp-a",
        "title": "COMP-A",
        "role": "organizer",
        "email": "later@x.org",
    }
    assert _role(app, "comp-a", "later@x.org") == "organizer"

    # bad input is a 422 naming the field, never a 500
    r = c.post(
        "/api/v1/competitions/comp-a/roles", json={"email": "nope", "role": "organizer"}, headers=h
    )
    assert "email" in _check(spec, r, 422)["error"]["message"]
    r = c.post(
        "/api/v1/competitions/comp-a/roles", json={"email": "a@x.org", "role": "king"}, headers=h
    )
    assert _check(spec, r, 422)["error"]["problems"][0]["id"] == "role"
    r = c.post(
        "/api/v1/competitions/nope/roles", json={"email": "a@x.org", "role": "owner"}, headers=h
    )
    _check(spec, r, 404)


def test_a_link_is_refused_expired_cancelled_used_or_forged(app):
    tokens = _world(app)
    c = app.test_client()
    spec = _spec(c)
    h = _bearer(tokens["owner"])

    def invite(email):
        got = c.post(
            "/api/v1/competitions/comp-a/roles",
            json={"email": email, "role": "organizer"},
            headers=h,
        ).json
        return got["id"], TOKEN.search(got["link"]).group(1)

    # expired: the same link signed 15 days ago
    inv_id, _ = invite("late@x.org")
    secret = app.extensions["palimpsest.settings"].secret_key

    class Past(TimestampSigner):
        def get_timestamp(self):
            return int(time.time()) - 15 * 24 * 3600

    old = URLSafeTimedSerializer(secret, salt=f"palimpsest.{roles.PURPOSE}", signer=Past)
    late = _bearer(make_token(app, make_user(app, "late@x.org")))
    r = c.post("/api/v1/invites/accept", json={"token": old.dumps({"i": inv_id})}, headers=late)
    assert _check(spec, r, 409)["error"]["code"] == "invite_expired"

    # cancelled by an owner (the CLI's revoke by email), then refused
    _, token = invite("gone@x.org")
    r = c.delete("/api/v1/competitions/comp-a/roles/gone@x.org", headers=h)
    assert _check(spec, r, 200) == {
        "competition": "comp-a",
        "email": "gone@x.org",
        "role": None,
        "invites_cancelled": 1,
    }
    gone = _bearer(make_token(app, make_user(app, "gone@x.org")))
    r = c.post("/api/v1/invites/accept", json={"token": token}, headers=gone)
    assert _check(spec, r, 409)["error"]["code"] == "invite_revoked"

    # used
    _, token = invite("once@x.org")
    once = _bearer(make_token(app, make_user(app, "once@x.org")))
    _check(spec, c.post("/api/v1/invites/accept", json={"token": token}, headers=once), 200)
    r = c.post("/api/v1/invites/accept", json={"token": token}, headers=once)
    assert _check(spec, r, 409)["error"]["code"] == "invite_used"

    # forged or garbled; a token of another purpose (a reset link's) is no invitation
    for bad in (
        token[:-3] + "abc",
        "x",
        URLSafeTimedSerializer(secret, salt="palimpsest.reset").dumps({"i": 1}),
    ):
        r = c.post("/api/v1/invites/accept", json={"token": bad}, headers=once)
        assert _check(spec, r, 404)["error"]["code"] == "unknown_invite"
    b = Browser(app.test_client())
    b.login("once@x.org")
    assert b.get("/invites/garbage").status_code == 404
    _check(spec, c.post("/api/v1/invites/accept", json={}, headers=once), 422)


def test_the_last_owner_cannot_be_removed_and_only_owners_revoke(app):
    tokens = _world(app)
    c = app.test_client()
    spec = _spec(c)
    with Session(engine_of(app)) as s:  # A's owners: the administrator who made it, and owner@
        a = comp.find(s, "comp-a")
        admin = s.exec(select(User).where(User.email == "admin@x.org")).one()
        owner = s.exec(select(User).where(User.email == "owner@x.org")).one()
    h = _bearer(tokens["owner"])
    # an organizer reads the roles but may not change them
    org = make_user(app, "org@x.org")
    with Session(engine_of(app)) as s:
        people.grant(s, a.id, s.get(User, org.id), people.ORGANIZER)
        s.commit()
    oh = _bearer(make_token(app, org))
    assert (
        _check(spec, c.get("/api/v1/competitions/comp-a/roles", headers=oh), 200)["may_change"]
        is False
    )
    r = c.delete(f"/api/v1/competitions/comp-a/roles/{owner.id}", headers=oh)
    assert _check(spec, r, 403)["error"]["code"] == "not_owner"
    r = c.post(
        "/api/v1/competitions/comp-a/roles", json={"email": "z@x.org", "role": "owner"}, headers=oh
    )
    assert _check(spec, r, 403)["error"]["code"] == "not_owner"

    r = c.delete(f"/api/v1/competitions/comp-a/roles/{admin.id}", headers=h)
    assert _check(spec, r, 200)["role"] == "owner"
    r = c.delete(f"/api/v1/competitions/comp-a/roles/{owner.id}", headers=h)
    err = _check(spec, r, 409)["error"]
    assert err["code"] == "last_owner" and "make someone else an owner first" in err["message"]
    # nor by demoting them through an invitation
    r = c.post(
        "/api/v1/competitions/comp-a/roles",
        json={"email": "owner@x.org", "role": "assessor"},
        headers=h,
    )
    assert _check(spec, r, 409)["error"]["code"] == "last_owner"
    assert _role(app, "comp-a", "owner@x.org") == "owner"
    r = c.delete("/api/v1/competitions/comp-a/roles/nobody@x.org", headers=h)
    assert _check(spec, r, 404)["error"]["code"] == "no_role"
    r = c.delete("/api/v1/competitions/comp-a/roles/999999", headers=h)
    _check(spec, r, 404)
    # with a second owner, the first may go (themselves too)
    with Session(engine_of(app)) as s:
        people.grant(s, a.id, s.get(User, org.id), people.OWNER)
        s.commit()
    r = c.delete(f"/api/v1/competitions/comp-a/roles/{owner.id}", headers=h)
    assert _check(spec, r, 200)["role"] == "owner"
    with Session(engine_of(app)) as s:
        held = s.exec(select(CompetitionRole).where(CompetitionRole.competition_id == a.id)).all()
        assert [(r.user_id, r.role) for r in held] == [(org.id, "owner")]


def test_an_invited_organizer_runs_their_competition_and_no_other(app):
    tokens = _world(app)
    c = app.test_client()
    spec = _spec(c)
    got = c.post(
        "/api/v1/competitions/comp-a/roles",
        json={"email": "inv@x.org", "role": "organizer"},
        headers=_bearer(tokens["owner"]),
    ).json
    inv = make_user(app, "inv@x.org")
    h = _bearer(make_token(app, inv))
    token = TOKEN.search(got["link"]).group(1)
    _check(spec, c.post("/api/v1/invites/accept", json={"token": token}, headers=h), 200)

    page = {"title": "Overview", "body_markdown": "hello"}
    _check(spec, c.put("/api/v1/competitions/comp-a/pages/overview", json=page, headers=h), 200)
    _check(spec, c.put("/api/v1/competitions/comp-b/pages/overview", json=page, headers=h), 403)
    r = c.patch("/api/v1/tasks/tric-binary/phases/dev", json={"daily_limit": 7}, headers=h)
    assert _check(spec, r, 200)["limits"]["daily"] == 7
    r = c.patch("/api/v1/tasks/swissgov-rsd/phases/dev", json={"daily_limit": 7}, headers=h)
    _check(spec, r, 403)
    # the web pages: A's page form and phase form, not B's; the people page reads, not invites
    b = Browser(app.test_client())
    b.login("inv@x.org")
    assert b.get("/competitions/comp-a/edit-page").status_code == 200
    assert b.get("/competitions/comp-b/edit-page").status_code == 403
    with Session(engine_of(app)) as s:
        pa = s.exec(select(Phase).where(Phase.task_id == "tric-binary")).first()
        pb = s.exec(select(Phase).where(Phase.task_id == "swissgov-rsd")).first()
    assert b.get(f"/organizer/phases/{pa.id}").status_code == 200
    assert b.get(f"/organizer/phases/{pb.id}").status_code == 403
    people_page = b.get("/competitions/comp-a/people").get_data(as_text=True)
    assert "inv@x.org" in people_page and "Only the owners" in people_page
    assert b.get("/competitions/comp-b/people").status_code == 403
    r = b.post("/competitions/comp-a/people", {"email": "x@x.org", "role": "owner"})
    assert r.status_code == 403 and "needs an owner of &#39;comp-a&#39;" in r.get_data(as_text=True)


def test_the_people_page_invites_lists_and_revokes(app):
    _world(app)
    make_user(app, "has@x.org")
    b = Browser(app.test_client())
    b.login("owner@x.org")
    shown = b.get("/competitions/comp-a").get_data(as_text=True)
    assert 'href="/competitions/comp-a/people"' in shown
    page = b.get("/competitions/comp-a/people").get_data(as_text=True)
    assert "owner@x.org" in page and ">Invite<" in page and 'name="csrf_token"' in page
    r = b.post("/competitions/comp-a/people", {"email": "nope", "role": "organizer"})
    assert r.status_code == 400 and "is not an email address" in r.get_data(as_text=True)
    r = b.post("/competitions/comp-a/people", {"email": "x@x.org", "role": "king"})
    assert r.status_code == 400 and "Not a valid choice" in r.get_data(as_text=True)
    r = b.post("/competitions/comp-a/people", {"email": "new@x.org", "role": "assessor"})
    text = r.get_data(as_text=True)
    assert r.status_code == 200 and "/invites/" in text and "new@x.org" in text  # the link, once
    # an account with the address gets nothing on a site without mail: the link, shown once
    r = b.post("/competitions/comp-a/people", {"email": "has@x.org", "role": "organizer"})
    text = r.get_data(as_text=True)
    assert r.status_code == 200 and "/invites/" in text and "nothing proves who holds" in text
    assert _role(app, "comp-a", "has@x.org") is None
    with Session(engine_of(app)) as s:
        people.grant(
            s,
            comp.find(s, "comp-a").id,
            s.exec(select(User).where(User.email == "has@x.org")).one(),
            people.ORGANIZER,
        )
        s.commit()
    page = b.get("/competitions/comp-a/people").get_data(as_text=True)
    assert "has@x.org" in page and "new@x.org" in page
    r = b.post("/competitions/comp-a/people/revoke", {"who": "new@x.org"})
    assert r.status_code == 302
    with Session(engine_of(app)) as s:
        inv = s.exec(select(CompetitionInvite).where(CompetitionInvite.email == "new@x.org")).one()
        assert inv.revoked_at is not None
        has = s.exec(select(User).where(User.email == "has@x.org")).one()
    b.post("/competitions/comp-a/people/revoke", {"who": str(has.id)})
    assert _role(app, "comp-a", "has@x.org") is None
    b.post("/competitions/comp-a/people/revoke", {"who": "owner@x.org"})  # the last? no: admin too
    # a participant sees no link to it and is refused
    make_user(app, "p@x.org")
    p = Browser(app.test_client())
    p.login("p@x.org")
    assert "/people" not in p.get("/competitions/comp-a").get_data(as_text=True)
    assert p.get("/competitions/comp-a/people").status_code == 403
    assert (
        p.post("/competitions/comp-a/people", {"email": "me@x.org", "role": "owner"}).status_code
        == 403
    )


# ----------------------------------------------------------------------------- the CLI


@pytest.fixture()
def served(app):
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    tokens = _world(app)
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}", tokens, app
    srv.shutdown()


def _cli(url, token, *args):
    from cli.main import main

    return CliRunner().invoke(
        main,
        list(args),
        env={
            "PALIMPSEST_SERVER": url,
            "PALIMPSEST_TOKEN": token,
            "XDG_CONFIG_HOME": "/nonexistent",
        },
        catch_exceptions=False,
    )


def test_the_cli_invites_lists_and_revokes_with_one_json_document(served):
    url, tokens, app = served
    owner = tokens["owner"]
    r = _cli(
        url, owner, "organizer", "invite", "comp-a", "cli@x.org", "--role", "assessor", "--json"
    )
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["status"], got["role"]) == ("link", "assessor")
    r = _cli(url, owner, "organizer", "invite", "comp-a", "cli2@x.org")
    assert r.exit_code == 0 and "/invites/" in r.stdout
    # an address with an account: the link too, no role (this server sends no mail)
    make_user(app, "squat@x.org")
    r = _cli(url, owner, "organizer", "invite", "comp-a", "squat@x.org", "--json")
    got = json.loads(r.stdout)
    assert (got["status"], "/invites/" in got["link"]) == ("link", True)
    assert _role(app, "comp-a", "squat@x.org") is None
    r = _cli(url, owner, "organizer", "roles", "comp-a", "--json")
    listed = json.loads(r.stdout)
    assert [i["email"] for i in listed["invites"]] == ["cli@x.org", "cli2@x.org", "squat@x.org"]
    assert "owner@x.org" in _cli(url, owner, "organizer", "roles", "comp-a").stdout
    r = _cli(url, owner, "organizer", "revoke", "comp-a", "cli@x.org", "--json")
    assert json.loads(r.stdout)["invites_cancelled"] == 1
    r = _cli(url, owner, "organizer", "revoke", "comp-a", "owner@x.org")
    assert r.exit_code == 0 and "no longer owner of comp-a" in r.stdout  # the admin still owns it
    r = _cli(url, tokens["admin"], "organizer", "revoke", "comp-a", "admin@x.org", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["code"] == "last_owner"
    r = _cli(url, tokens["admin"], "organizer", "invite", "comp-a", "bad", "--json")
    assert r.exit_code == 1 and "email" in json.loads(r.stdout)["error"]["message"]
    r = _cli(url, tokens["admin"], "organizer", "invite", "comp-a", "bad")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "email" in r.stderr
