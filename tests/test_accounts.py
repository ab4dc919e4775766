"""Accounts. Sign-in throttling per account and per address (Flask-Limiter, on
Redis where there is one), the same time for an unknown email as for a known one, registration and
reset answers that tell nobody who has an account, password change, password reset by a mailed
single-use expiring link (a real SMTP server: aiosmtpd) or an organizer's CLI link, and a session
epoch that ends every earlier session, a copied cookie too."""

from __future__ import annotations

import re
import statistics
import time

import mailkit
import pytest
from mailkit import LINK, _app, _free_port
from sqlmodel import Session, select
from webkit import PASSWORD, Browser, engine_of, make_user

from server.domain import accounts
from server.models import AuditLog, User

# the fixtures the tests below request, from the helper module that holds them
smtp = mailkit.smtp

FLASH = re.compile(r'<p class="flash[^"]*">(.*?)</p>', re.S)


@pytest.fixture
def mail_app(web_home, monkeypatch, smtp):
    return _app(
        web_home,
        monkeypatch,
        smtp_host="127.0.0.1",
        smtp_port=smtp.port,
        smtp_security="none",
        base_url="http://palimpsest.test",
        mail_from="org@palimpsest.test",
    )


def _login(client, email, password=PASSWORD, addr="203.0.113.7"):
    b = Browser(client)
    return client.post(
        "/auth/login",
        data={"email": email, "password": password, "csrf_token": b.token()},
        environ_base={"REMOTE_ADDR": addr},
    )


# ----------------------------------------------------------------------------- throttling


def test_a_login_flood_on_one_account_is_throttled_within_10_attempts(app):
    make_user(app, "victim@x.org")
    c = app.test_client()
    statuses = []
    for _ in range(200):
        statuses.append(_login(c, "victim@x.org", "wrong-password").status_code)
        if statuses[-1] == 429:
            break
    n = statuses.index(429) + 1
    print(f"login flood on one account: refused (429) at attempt {n}")
    assert n <= 10 and set(statuses[: n - 1]) == {401}
    r = _login(c, "victim@x.org")  # the right password, during the flood: not accepted
    assert r.status_code == 429 and "Retry-After" in r.headers
    assert "Too many attempts" in r.get_data(as_text=True)
    # from another address too: the limit is the account's
    assert _login(app.test_client(), "victim@x.org", addr="198.51.100.9").status_code == 429


def test_credential_stuffing_from_one_address_is_throttled_within_10_attempts(app):
    c = app.test_client()
    statuses = [_login(c, f"user{i}@x.org", "Password1").status_code for i in range(12)]
    assert 429 in statuses and statuses.index(429) + 1 <= 11
    print(f"stuffing from one address: refused at attempt {statuses.index(429) + 1}")
    make_user(app, "other@x.org")  # another address is not held back
    assert _login(app.test_client(), "other@x.org", addr="198.51.100.10").status_code == 302


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["tcp", "embedded"])
def test_throttle_counts_in_redis_shared_by_every_process(web_home, monkeypatch, request, kind):
    """Two apps (two gunicorn workers, say) share one count in Redis: the real one at
    127.0.0.1:6379, or the embedded one on its unix socket."""
    import redis

    if kind == "tcp":
        url = request.getfixturevalue("redis_tcp_url")
        a1 = _app(web_home, monkeypatch, redis_url=url)
        a2 = _app(web_home, monkeypatch, redis_url=url)
        conn = redis.Redis.from_url(url)
    else:
        from server.jobs.embedded import EmbeddedRedis

        emb = EmbeddedRedis(web_home)
        emb.start()
        request.addfinalizer(emb.stop)
        a1, a2 = _app(web_home, monkeypatch), _app(web_home, monkeypatch)
        conn = redis.Redis(unix_socket_path=str(emb.socket))
    assert a1.config["RATELIMIT_STORAGE_URI"].startswith("redis")
    make_user(a1, "shared@x.org")
    got = []
    for i in range(8):
        got.append(
            _login(
                (a1 if i % 2 else a2).test_client(), "shared@x.org", "nope-nope", addr=f"10.0.0.{i}"
            ).status_code
        )
    assert got[:5] == [401] * 5 and got[5] == 429, got
    keys = list(conn.scan_iter(count=1000))
    assert any(b"palimpsest" in k and b"login-account" in k for k in keys), keys


@pytest.mark.parametrize("hops", [0, 1])
def test_the_address_behind_a_proxy(web_home, monkeypatch, hops):
    """X-Forwarded-For counts only with PALIMPSEST_PROXY_HOPS: otherwise a flood could dodge the
    per-address limit by forging it."""
    app = _app(web_home, monkeypatch, proxy_hops=hops, login_limit_account="1000 per minute")
    c = app.test_client()
    tok = Browser(c).token()
    got = [
        c.post(
            "/auth/login",
            data={"email": f"u{i}@x.org", "password": "x" * 9, "csrf_token": tok},
            headers={"X-Forwarded-For": f"198.51.100.{i}"},
        ).status_code
        for i in range(12)
    ]
    if hops:
        assert 429 not in got, got  # twelve visitors behind one proxy
    else:
        assert got.index(429) == 10, got  # one address, whatever the header says


def test_throttling_goes_on_in_the_database_when_its_redis_is_away(web_home, monkeypatch):
    """A Redis that does not answer (a closed port here) costs no 500: the counts go on in the
    database (tests/test_throttle_live.py: shared by gunicorn's workers)."""
    app = _app(web_home, monkeypatch, redis_url=f"redis://127.0.0.1:{_free_port()}/0")
    assert app.config["RATELIMIT_STORAGE_URI"].startswith("redis://")
    make_user(app, "ann@x.org")
    c = app.test_client()
    got = [_login(c, "ann@x.org", "nope-nope").status_code for _ in range(7)]
    assert got == [401] * 5 + [429] * 2, got


# ----------------------------------------------------------------------------- enumeration


def test_an_unknown_email_fails_as_slowly_as_a_known_one(web_home, monkeypatch):
    from argon2 import PasswordHasher

    app = _app(
        web_home,
        monkeypatch,
        login_limit_account="1000 per minute",
        login_limit_address="1000 per minute",
    )
    # the production cost
    monkeypatch.setattr(accounts, "hasher", PasswordHasher(**accounts.HASH_PARAMETERS))
    make_user(app, "known@x.org")
    c = app.test_client()
    known, unknown = [], []
    _login(c, "nobody@x.org", "x" * 12)  # the dummy hash is made once, on first use
    for i in range(5):
        for email, out in (("known@x.org", known), (f"unknown{i}@x.org", unknown)):
            t = time.perf_counter()
            assert _login(c, email, "wrong-password").status_code == 401
            out.append(time.perf_counter() - t)
    k, u = statistics.median(known), statistics.median(unknown)
    print(
        f"failed sign-in, median of 5: known email {k * 1000:.0f} ms, unknown email {u * 1000:.0f} "
        "ms"
    )
    assert 0.5 < u / k < 2.0, (k, u)


def test_reset_answers_the_same_for_known_and_unknown_emails(mail_app, smtp):
    make_user(mail_app, "known@x.org")
    answers = []
    for email in ("known@x.org", "nobody@x.org"):
        b = Browser(mail_app.test_client())
        r = b.post("/auth/reset", {"email": email})
        page = b.get("/auth/login").get_data(as_text=True)
        answers.append(
            (r.status_code, r.headers["Location"], FLASH.findall(page.replace(email, "EMAIL")))
        )
    assert answers[0] == answers[1]
    msgs = smtp.wait(1)
    time.sleep(0.5)
    assert [m["to"] for m in smtp.messages] == [["known@x.org"]] and msgs[0]["subject"].startswith(
        "Reset"
    )


def test_registration_by_mail_answers_the_same_for_taken_and_free_emails(mail_app, smtp):
    make_user(mail_app, "taken@x.org")
    answers = []
    for email in ("taken@x.org", "free@x.org"):
        b = Browser(mail_app.test_client())
        r = b.post("/auth/register", {"email": email})
        page = b.get("/auth/login").get_data(as_text=True)
        answers.append(
            (r.status_code, r.headers["Location"], FLASH.findall(page.replace(email, "EMAIL")))
        )
    assert answers[0] == answers[1]
    smtp.wait(2)
    by_to = {m["to"][0]: m for m in smtp.messages}
    assert "has an account already" in by_to["taken@x.org"]["body"]
    assert "/auth/reset/" in by_to["taken@x.org"]["body"]
    # the free address's link finishes the registration: the password is chosen there
    link = LINK.search(by_to["free@x.org"]["body"]).group(1)
    assert (
        link.startswith("/auth/register/")
        and "http://palimpsest.test/auth/register/" in by_to["free@x.org"]["body"]
    )
    b = Browser(mail_app.test_client())
    assert b.get(link).status_code == 200
    r = b.post(link, {"password": "a new password", "again": "a new password"})
    # the first page: the competitions to choose from (not the team page, before any)
    assert r.status_code == 302 and r.headers["Location"].endswith("/")
    assert b.get("/team/").status_code == 200
    with Session(engine_of(mail_app)) as s:
        assert s.exec(select(User).where(User.email == "free@x.org")).one()
    # the link cannot make a second account
    assert (
        Browser(mail_app.test_client())
        .post(link, {"password": "x" * 10, "again": "x" * 10})
        .status_code
        == 302
    )
    assert Browser(mail_app.test_client()).get("/auth/register/forged.token").status_code == 400


# ----------------------------------------------------------------------------- reset and change


def _copy_session(src: Browser, app) -> Browser:
    """Another client carrying the same session cookie (a stolen or copied cookie)."""
    other = Browser(app.test_client())
    other.c.set_cookie("session", src.c.get_cookie("session").value)
    return other


def test_password_reset_by_mail_is_single_use_and_ends_old_sessions(mail_app, smtp):
    make_user(mail_app, "ann@x.org")
    old = Browser(mail_app.test_client())
    old.login("ann@x.org")
    assert old.get("/team/").status_code == 200
    Browser(mail_app.test_client()).post("/auth/reset", {"email": "ann@x.org"})
    smtp.wait(1)
    body = smtp.messages[0]["body"]
    assert "http://palimpsest.test/auth/reset/" in body and "once" in body
    link = smtp.link()
    b = Browser(mail_app.test_client())
    assert b.get(link).status_code == 200  # a GET (a mail scanner's) uses nothing
    assert b.get(link).status_code == 200
    assert b.post(link, {"password": "short", "again": "short"}).status_code == 400
    r = b.post(link, {"password": "brand new password", "again": "brand new password"})
    assert r.status_code == 302 and b.get("/team/").status_code == 200
    assert old.get("/team/").status_code == 302  # the session from before the reset has ended
    assert (
        b.post(link, {"password": "again a password", "again": "again a password"}).status_code
        == 400
    )
    assert _login(mail_app.test_client(), "ann@x.org").status_code == 401
    assert _login(mail_app.test_client(), "ann@x.org", "brand new password").status_code == 302
    with Session(engine_of(mail_app)) as s:
        assert s.exec(select(AuditLog).where(AuditLog.action == "user.password_reset")).first()


def test_a_reset_link_expires(mail_app, monkeypatch):
    from itsdangerous.timed import TimestampSigner

    from server.domain.accounts import reset_token

    u = make_user(mail_app, "ann@x.org")
    real = TimestampSigner.get_timestamp
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: real(self) - 61 * 60)
    token = reset_token(mail_app.config["SECRET_KEY"], u)
    monkeypatch.setattr(TimestampSigner, "get_timestamp", real)
    assert mail_app.test_client().get(f"/auth/reset/{token}").status_code == 400
    fresh = reset_token(mail_app.config["SECRET_KEY"], u)
    assert mail_app.test_client().get(f"/auth/reset/{fresh}").status_code == 200


def test_without_mail_the_organizer_prints_a_reset_link(app, web_home, monkeypatch):
    from click.testing import CliRunner

    from cli.main import main

    make_user(app, "ann@x.org")
    b = Browser(app.test_client())
    b.post("/auth/reset", {"email": "ann@x.org"})
    assert "ask a site administrator" in b.get("/auth/login").get_data(as_text=True)
    monkeypatch.setenv("PALIMPSEST_HOME", str(web_home))
    r = CliRunner().invoke(
        main, ["users", "reset-link", "ann@x.org", "--base-url", "https://p.example"]
    )
    assert r.exit_code == 0, r.output
    link = r.output.strip().splitlines()[0]
    assert link.startswith("https://p.example/auth/reset/")
    path = link[len("https://p.example") :]
    r = b.post(path, {"password": "from the organizer", "again": "from the organizer"})
    assert r.status_code == 302
    assert _login(app.test_client(), "ann@x.org", "from the organizer").status_code == 302
    r = CliRunner().invoke(main, ["users", "reset-link", "nobody@x.org"])
    assert r.exit_code != 0 and "no user" in r.output


def test_password_change_keeps_this_session_and_ends_the_others(app):
    make_user(app, "ann@x.org")
    b = Browser(app.test_client())
    b.login("ann@x.org")
    copy = _copy_session(b, app)
    assert copy.get("/team/").status_code == 200
    assert b.get("/auth/account").status_code == 200
    r = b.post(
        "/auth/password",
        {"current_password": "wrong one!", "new_password": "n" * 10, "again": "n" * 10},
    )
    assert r.status_code == 400
    r = b.post(
        "/auth/password",
        {"current_password": PASSWORD, "new_password": "n" * 10, "again": "n" * 10},
    )
    assert r.status_code == 302
    assert b.get("/team/").status_code == 200
    assert copy.get("/team/").status_code == 302
    assert _login(app.test_client(), "ann@x.org").status_code == 401
    assert _login(app.test_client(), "ann@x.org", "n" * 10).status_code == 302


# ----------------------------------------------------------------------------- the session epoch


def test_a_copied_cookie_stops_working_after_logout(app):
    make_user(app, "ann@x.org")
    b = Browser(app.test_client())
    b.login("ann@x.org")
    copy = _copy_session(b, app)
    assert copy.get("/team/").status_code == 200
    b.post("/auth/logout")
    assert copy.get("/team/").status_code == 302


@pytest.mark.parametrize("who", ["self", "organizer", "cli"])
def test_sign_out_everywhere(app, web_home, monkeypatch, who):
    u = make_user(app, "ann@x.org")
    make_user(app, "org@x.org", organizer=True)
    b = Browser(app.test_client())
    b.login("ann@x.org")
    other = Browser(app.test_client())
    other.login("ann@x.org")
    if who == "self":
        assert b.post("/auth/sessions/end").status_code == 302
    elif who == "organizer":
        org = Browser(app.test_client())
        org.login("org@x.org")
        assert "ann@x.org" in org.get("/auth/users").get_data(as_text=True)
        assert org.post(f"/auth/users/{u.id}/sign-out").status_code == 302
        assert org.get("/team/").status_code == 200
        assert Browser(app.test_client()).post(f"/auth/users/{u.id}/sign-out").status_code in (
            302,
            400,
        )
    else:
        from click.testing import CliRunner

        from cli.main import main

        monkeypatch.setenv("PALIMPSEST_HOME", str(web_home))
        r = CliRunner().invoke(main, ["users", "sign-out", "ann@x.org"])
        assert r.exit_code == 0, r.output
    assert b.get("/team/").status_code == 302 and other.get("/team/").status_code == 302
    b.login("ann@x.org")
    assert b.get("/team/").status_code == 200


def test_a_participant_cannot_sign_others_out(app):
    u = make_user(app, "ann@x.org")
    make_user(app, "bob@x.org")
    bob = Browser(app.test_client())
    bob.login("bob@x.org")
    assert bob.get("/auth/users").status_code == 403
    assert bob.post(f"/auth/users/{u.id}/sign-out").status_code == 403


def test_the_session_lifetime_is_a_setting(web_home, monkeypatch):
    from itsdangerous.timed import TimestampSigner

    app = _app(web_home, monkeypatch, session_hours=0.5)
    make_user(app, "ann@x.org")
    b = Browser(app.test_client())
    r = b.login("ann@x.org")
    cookie = r.headers["Set-Cookie"]
    assert app.permanent_session_lifetime.total_seconds() == 1800 and "Expires=" in cookie
    assert b.get("/team/").status_code == 200
    real = TimestampSigner.get_timestamp
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: real(self) + 31 * 60)
    assert b.get("/team/").status_code == 302  # the signed cookie is older than the lifetime


def test_reset_mails_to_one_address_are_limited(mail_app, smtp):
    make_user(mail_app, "ann@x.org")
    codes = []
    for i in range(5):
        b = Browser(mail_app.test_client())
        codes.append(
            b.post(
                "/auth/reset", {"email": "ann@x.org"}, environ_base={"REMOTE_ADDR": f"192.0.2.{i}"}
            ).status_code
        )
    assert codes == [302, 302, 302, 429, 429], codes
    smtp.wait(3)
    time.sleep(0.5)
    assert len(smtp.messages) == 3
