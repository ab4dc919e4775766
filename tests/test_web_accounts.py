"""Accounts, sessions, teams and API tokens through the web pages."""

from __future__ import annotations

from sqlmodel import Session, select
from webkit import PASSWORD, Browser, engine_of, make_token, make_user

from server.domain.accounts import hash_password, new_token, verify_password
from server.models import ApiToken, AuditLog, User


def test_password_hashing_is_argon2_and_verifies():
    h = hash_password("s3cret-pass")
    assert h.startswith("$argon2id$") and "s3cret-pass" not in h
    assert verify_password(h, "s3cret-pass")
    assert not verify_password(h, "wrong")
    assert not verify_password("not-a-hash", "x")


def test_new_hashes_use_owasps_minimum_and_earlier_hashes_still_verify():
    from argon2 import PasswordHasher

    # OWASP's minimum for argon2id: 19 MiB, two passes, one lane, in the hash's own header
    assert "$v=19$m=19456,t=2,p=1$" in hash_password("s3cret-pass")
    # a hash made with argon2-cffi's default parameters (those used before) still signs in
    earlier = PasswordHasher().hash("s3cret-pass")
    assert "$m=65536,t=3,p=4$" in earlier
    assert verify_password(earlier, "s3cret-pass")
    assert not verify_password(earlier, "wrong")


def test_new_token_is_random_and_stored_as_sha256():
    import hashlib

    a, ha = new_token()
    b, _ = new_token()
    assert a != b and len(a) > 40 and ha == hashlib.sha256(a.encode()).hexdigest()


def test_register_login_logout(app, browser):
    r = browser.post("/auth/register", {"email": "Ann@Example.org", "password": PASSWORD})
    # no session from registering: a taken email gets the same answer
    assert r.status_code == 302 and r.headers["Location"].endswith(
        "/auth/login?email=ann@example.org"
    )
    with Session(engine_of(app)) as s:
        u = s.exec(select(User).where(User.email == "ann@example.org")).one()
        assert u.password_hash.startswith("$argon2id$")
    browser.login("ann@example.org")
    assert b"ann@example.org" in browser.get("/team/").data
    browser.post("/auth/logout")
    assert browser.get("/team/").status_code == 302
    r = browser.post("/auth/login", {"email": "ann@example.org", "password": "nope-nope"})
    assert r.status_code == 401 and b"Wrong email or password" in r.data
    browser.login("ann@example.org")
    assert browser.get("/team/").status_code == 200


def test_register_refuses_bad_input(app, browser):
    assert (
        browser.post("/auth/register", {"email": "nope", "password": PASSWORD}).status_code == 400
    )
    assert (
        browser.post("/auth/register", {"email": "a@b.org", "password": "short"}).status_code == 400
    )
    make_user(app, "taken@b.org")
    r = browser.post("/auth/register", {"email": "taken@b.org", "password": PASSWORD})
    # the answer for a taken email is the one for a free email: it tells nobody who has an account
    assert r.status_code == 302 and r.headers["Location"].endswith("/auth/login?email=taken@b.org")
    page = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert "exists" not in page and "Registered taken@b.org: now sign in" in page
    # the sign-in form has the address filled in
    assert 'name="email" value="taken@b.org"' in page
    free = browser.post("/auth/register", {"email": "free@b.org", "password": PASSWORD})
    assert free.headers["Location"].endswith("/auth/login?email=free@b.org")
    assert "Registered free@b.org: now sign in" in browser.get(free.headers["Location"]).get_data(
        as_text=True
    )


def test_login_redirects_only_locally(app, browser):
    make_user(app, "a@b.org")
    tok = browser.token()
    r = browser.c.post(
        "/auth/login?next=//evil.example/x",
        data={"email": "a@b.org", "password": PASSWORD, "csrf_token": tok},
    )
    assert r.status_code == 302 and "evil" not in r.headers["Location"]
    browser.post("/auth/logout")
    tok = browser.token()
    r = browser.c.post(
        "/auth/login?next=/submissions",
        data={"email": "a@b.org", "password": PASSWORD, "csrf_token": tok},
    )
    assert r.headers["Location"] == "/submissions"


def test_team_create_join_leave(app, client):
    a, b = Browser(client), Browser(app.test_client())
    make_user(app, "a@x.org")
    make_user(app, "b@x.org")
    a.login("a@x.org")
    b.login("b@x.org")
    r = a.post("/team/create", {"name": "  The   Readers "})
    assert r.status_code == 302
    with Session(engine_of(app)) as s:
        ua = s.exec(select(User).where(User.email == "a@x.org")).one()
        from server.domain.people import team_of

        team = team_of(s, ua, None)
        assert team.name == "The Readers"
        code = team.invite_code
    assert code.encode() in a.get("/team/").data
    assert (
        b"No team has that invite code"
        in b.post("/team/join", {"invite_code": "wrong"}, follow_redirects=True).data
    )
    b.post("/team/join", {"invite_code": code})
    page = b.get("/team/").data
    assert b"The Readers" in page and b"a@x.org" in page
    # a name is unique
    c = Browser(app.test_client())
    make_user(app, "c@x.org")
    c.login("c@x.org")
    assert b"taken" in c.post("/team/create", {"name": "The Readers"}, follow_redirects=True).data
    # rotating the code invalidates the old one
    a.post("/team/invite/rotate")
    assert (
        b"No team has that invite code"
        in c.post("/team/join", {"invite_code": code}, follow_redirects=True).data
    )
    b.post("/team/leave")
    assert b"Create a team" in b.get("/team/").data
    with Session(engine_of(app)) as s:
        actions = [x.action for x in s.exec(select(AuditLog).order_by(AuditLog.id)).all()]
    assert actions == ["team.create", "team.join", "team.invite_rotate", "team.leave"]


def test_tokens_shown_once_stored_hashed_revocable(app, browser):
    make_user(app, "a@x.org")
    browser.login("a@x.org")
    page = browser.post("/auth/tokens", {"name": "laptop"}).get_data(as_text=True)
    import re

    plain = re.search(r'<pre class="token">([^<]+)</pre>', page).group(1)
    assert plain.startswith("pal_")
    assert plain not in browser.get("/auth/tokens").get_data(as_text=True)  # shown once
    with Session(engine_of(app)) as s:
        tok = s.exec(select(ApiToken)).one()
        assert plain not in (tok.token_sha256, tok.prefix) and len(tok.token_sha256) == 64
        tid = tok.id
    browser.post(f"/auth/tokens/{tid}/revoke")
    with Session(engine_of(app)) as s:
        assert s.get(ApiToken, tid).revoked_at is not None


def test_another_users_token_cannot_be_revoked(app, browser):
    u = make_user(app, "a@x.org")
    make_token(app, u)
    make_user(app, "b@x.org")
    browser.login("b@x.org")
    assert browser.post("/auth/tokens/1/revoke").status_code == 404


def test_current_user_token_on_api_only_and_no_cookie_there(app):
    from flask import Flask  # noqa: F401

    from server.web.auth import current_user

    u = make_user(app, "a@x.org")
    plain = make_token(app, u)
    with app.test_request_context("/api/v1/whatever", headers={"Authorization": f"Bearer {plain}"}):
        assert current_user().id == u.id
    with app.test_request_context(
        "/api/v1/whatever", headers={"Authorization": "Bearer pal_wrong"}
    ):
        assert current_user() is None
    with app.test_request_context("/team/", headers={"Authorization": f"Bearer {plain}"}):
        assert current_user() is None  # pages take the cookie, not a token
    # a signed-in browser's cookie does not authenticate on /api
    b = Browser(app.test_client())
    b.login("a@x.org")
    with b.c.session_transaction() as sess:
        assert sess["uid"] == u.id
    with app.test_request_context("/api/v1/me"):
        from flask import session

        session["uid"] = u.id
        assert current_user() is None


def test_password_change_invalidates_old_sessions(app, browser):
    u = make_user(app, "a@x.org")
    browser.login("a@x.org")
    assert browser.get("/team/").status_code == 200
    with Session(engine_of(app)) as s:
        row = s.get(User, u.id)
        row.password_hash = hash_password("another-password")
        s.add(row)
        s.commit()
    assert browser.get("/team/").status_code == 302
