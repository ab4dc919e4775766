"""A banned person can do nothing in that competition's team (approve a join, hand out an invite
code, stay its captain, submit), and email addresses have one form, checked in one function
(`server.domain.emails`), for accounts, sign-in, invitations and a competition's allow-list of
domains."""

from __future__ import annotations

import pytest
from apikit import _submit, _tric_file
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_token, make_user

from server.domain import people
from server.domain.accounts import EmailTaken, create_user
from server.domain.emails import BadEmail, normalize_domain, normalize_email
from server.models import Competition, Registration, Team, TeamMember, User


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _setup(app):
    """tric-binary's competition with captain approval; a team of pcap (captain) and mem."""
    admin = make_user(app, "admin@x.org", organizer=True)
    u = {n: make_user(app, f"{n}@x.org") for n in ("pcap", "mem", "newbie", "late")}
    with Session(engine_of(app), expire_on_commit=False) as s:
        c = people.ensure_competition(s, "tric-binary")
        c.join_needs_captain = True
        s.add(c)
        s.flush()
        t = Team(name="Kestrels", invite_code="kestrel-code", competition_id=c.id)
        s.add(t)
        s.flush()
        s.add(TeamMember(competition_id=c.id, team_id=t.id, user_id=u["pcap"].id, role="captain"))
        s.add(TeamMember(competition_id=c.id, team_id=t.id, user_id=u["mem"].id))
        for x in u.values():
            s.add(Registration(competition_id=c.id, user_id=x.id, status="approved"))
        s.commit()
        slug = c.slug
    tokens = {n: make_token(app, x) for n, x in u.items()}
    tokens["admin"] = make_token(app, admin)
    return slug, u, tokens


def _ban(client, admin_token, slug, email, action="ban"):
    r = client.post(
        f"/api/v1/competitions/{slug}/participants/{email}",
        json={"action": action, "reason": "plagiarism"},
        headers=_h(admin_token),
    )
    return r


def test_a_banned_captain_approves_nobody_hands_out_no_code_and_captains_no_more(app):
    slug, u, tok = _setup(app)
    c = app.test_client()
    # newbie asks to join; then the captain is banned
    r = c.post(
        "/api/v1/team/join",
        json={"invite_code": "kestrel-code", "competition": slug},
        headers=_h(tok["newbie"]),
    )
    assert r.status_code == 200, r.json
    with Session(engine_of(app)) as s:
        reg = people.registration(
            s, s.get(User, u["pcap"].id), s.exec(select(Competition)).first().id
        )
        reg.status, reg.reason = "banned", "plagiarism"
        s.add(reg)
        s.commit()
    r = c.post(
        f"/api/v1/team/members/{u['newbie'].id}?competition={slug}&approve=1",
        headers=_h(tok["pcap"]),
    )
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_banned", r.json
    r = c.post(f"/api/v1/team/invite?competition={slug}", headers=_h(tok["pcap"]))
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_banned", r.json
    with Session(engine_of(app)) as s:
        t = s.exec(select(Team).where(Team.name == "Kestrels")).one()
        assert t.invite_code == "kestrel-code"  # unchanged
        pending = s.exec(select(TeamMember).where(TeamMember.user_id == u["newbie"].id)).one()
        assert pending.status == "pending"  # nothing left behind
    # the newcomer cannot submit for the team: they wait
    r = _submit(
        c, tok["newbie"], "tric-binary", _tric_file(app.extensions["palimpsest.settings"].home)
    )
    assert r.status_code == 403, r.json
    # nor can the banned captain
    r = _submit(
        c, tok["pcap"], "tric-binary", _tric_file(app.extensions["palimpsest.settings"].home)
    )
    assert r.status_code == 403 and r.json["error"]["code"] == "registration_banned", r.json


def test_a_ban_by_the_organizers_passes_the_captaincy_on_and_a_banned_joiner_is_not_approved(app):
    slug, u, tok = _setup(app)
    c = app.test_client()
    for who in ("newbie", "late"):
        r = c.post(
            "/api/v1/team/join",
            json={"invite_code": "kestrel-code", "competition": slug},
            headers=_h(tok[who]),
        )
        assert r.status_code == 200, r.json
    # the organizers ban the captain (through the action all surfaces use)
    from server.actions import registrations

    with Session(engine_of(app), expire_on_commit=False) as s:
        registrations.decide(
            s=s,
            actor=s.get(User, 1),
            competition=slug,
            user="pcap@x.org",
            action="ban",
            reason="plagiarism",
            via="test",
        )
        registrations.decide(
            s=s,
            actor=s.get(User, 1),
            competition=slug,
            user="late@x.org",
            action="ban",
            reason="a second account",
            via="test",
        )
    with Session(engine_of(app)) as s:
        roles = {
            m.user_id: m.role
            for m in s.exec(select(TeamMember).where(TeamMember.status == "active")).all()
        }
    assert roles[u["pcap"].id] == "member" and roles[u["mem"].id] == "captain", roles
    # the new captain approves newbie, but not the banned late
    r = c.post(
        f"/api/v1/team/members/{u['newbie'].id}?competition={slug}&approve=1",
        headers=_h(tok["mem"]),
    )
    assert r.status_code == 200, r.json
    r = c.post(
        f"/api/v1/team/members/{u['late'].id}?competition={slug}&approve=1",
        headers=_h(tok["mem"]),
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "member_not_participating", r.json


@pytest.mark.parametrize(
    "raw,one",
    [
        ("pban@x.org.", "pban@x.org"),
        ("  PBan@X.Org ", "pban@x.org"),
        ("a.b+c@sub.x-y.org", "a.b+c@sub.x-y.org"),
    ],
)
def test_one_form_of_an_address(raw, one):
    assert normalize_email(raw) == one


@pytest.mark.parametrize(
    "raw",
    [
        "u14@.b.org",
        "u@b..org",
        "u@org",
        "u@-b.org",
        "@x.org",
        "u@",
        ".u@x.org",
        "u..v@x.org",
        "u@x.org..",
        "u v@x.org",
        "u@x.\norg",
        "a@b@c.org",
        "",
    ],
)
def test_what_is_not_an_address(raw):
    with pytest.raises(BadEmail):
        normalize_email(raw)


def test_accounts_sign_in_invitations_and_the_allow_list_use_the_one_form(app):
    make_user(app, "pban@x.org")
    with Session(engine_of(app)) as s:
        with pytest.raises(EmailTaken):  # the trailing dot is the same address
            create_user(s, email="PBAN@x.org.", password="correct horse 2")
        with pytest.raises(ValueError, match="empty label|domain"):
            create_user(s, email="u14@.b.org", password="correct horse 2")
    # the registration form: the same address answers as taken does (no new account)
    b = Browser(app.test_client())
    b.post("/auth/register", data={"email": "pban@x.org.", "password": "correct horse 3"})
    b.post("/auth/register", data={"email": "u14@.b.org", "password": "correct horse 3"})
    with Session(engine_of(app)) as s:
        emails = sorted(x.email for x in s.exec(select(User)).all())
    assert emails == ["pban@x.org"], emails
    # sign-in with the trailing dot and capitals reaches the account
    b = Browser(app.test_client())
    r = b.post("/auth/login", data={"email": "PBan@x.org.", "password": "correct horse battery"})
    assert r.status_code in (302, 303), r.status_code
    # the allow-list: an address with an empty label is at no allowed domain
    with Session(engine_of(app)) as s:
        c = Competition(slug="b-only", title="B", state="visible", allowed_domains=["b.org"])
        assert people.domain_allowed(c, "u@b.org") and people.domain_allowed(c, "u@lab.B.org.")
        assert not people.domain_allowed(c, "u14@.b.org")
        assert not people.domain_allowed(c, "u@xb.org")
    assert normalize_domain("@B.Org.") == "b.org"
    with pytest.raises(BadEmail):
        normalize_domain(".b.org")
    # invitations: the address in its one form; an empty label is refused with 422
    admin = make_user(app, "boss@x.org", organizer=True)
    t = make_token(app, admin)
    c = app.test_client()
    r = c.post(
        "/api/v1/competitions",
        json={"id": "inv", "title": "Inv", "state": "visible"},
        headers=_h(t),
    )
    assert r.status_code == 201, r.json
    r = c.post(
        "/api/v1/competitions/inv/roles",
        json={"email": "Helper@X.org.", "role": "assessor"},
        headers=_h(t),
    )
    assert r.status_code == 201 and r.json["email"] == "helper@x.org", r.json
    r = c.post(
        "/api/v1/competitions/inv/roles",
        json={"email": "u14@.b.org", "role": "assessor"},
        headers=_h(t),
    )
    assert r.status_code == 422 and "email" in str(r.json), r.json
    with Session(engine_of(app)) as s:
        assert not s.exec(select(Registration)).all()
