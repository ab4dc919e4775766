"""Signing up over the API (`POST /api/v1/signup`, `/signup/finish`), with the web's checks: the
address confirmed by a token mailed through a real SMTP server (aiosmtpd), the same answer for a
taken and a free address, the web's throttling on the same counters, a competition's allowed
domains, no sign-up where no mail can confirm it; the attacker's tries (a forged token, a reused
one, a flood) and the crowd's (20 parallel finishes of one token on PostgreSQL make one account).
The whole path with the CLI is in tests/test_participant_path.py."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import mailkit
import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_user

from server.models import Competition, User

BODY = "we sent a message to"

# the fixture the tests request: a real SMTP server (aiosmtpd) on a local port
smtp = mailkit.smtp


def _with_mail(app, port: int):
    settings = app.extensions["palimpsest.settings"]
    app.extensions["palimpsest.settings"] = settings.model_copy(
        update={
            "smtp_host": "127.0.0.1",
            "smtp_port": port,
            "smtp_security": "none",
            "base_url": "http://palimpsest.test",
        }
    )
    return app


@pytest.fixture
def mail_app(app, smtp):
    return _with_mail(app, smtp.port)


def _token(body: str) -> str:
    return body.split("--finish ", 1)[1].split()[0]


def test_a_sign_up_answers_the_same_for_taken_and_free_and_its_token_makes_one_account(
    mail_app, smtp
):
    make_user(mail_app, "taken@x.org")
    c = mail_app.test_client()
    answers = []
    for email in ("taken@x.org", "free@x.org"):
        r = c.post("/api/v1/signup", json={"email": email})
        assert r.status_code == 202, r.json
        answers.append(json.dumps(r.json).replace(email, "EMAIL"))
    assert answers[0] == answers[1]  # nothing tells which addresses have an account
    smtp.wait(2)
    by_to = {m["to"][0]: m["body"] for m in smtp.messages}
    assert (
        "has an account already" in by_to["taken@x.org"] and "--finish" not in by_to["taken@x.org"]
    )
    token = _token(by_to["free@x.org"])
    for bad, status in (
        ({"token": token + "x", "password": "a long passphrase"}, 422),  # forged
        ({"token": token, "password": "short"}, 422),
        ({"token": token}, 422),
    ):
        r = c.post("/api/v1/signup/finish", json=bad)
        assert r.status_code == status, (bad, r.json)
    r = c.post("/api/v1/signup/finish", json={"token": token, "password": "a long passphrase"})
    assert r.status_code == 201, r.json
    assert r.json["email"] == "free@x.org" and r.json["token"].startswith("pal_")
    me = c.get("/api/v1/me", headers={"Authorization": f"Bearer {r.json['token']}"})
    assert me.status_code == 200 and me.json["email"] == "free@x.org"
    r = c.post("/api/v1/signup/finish", json={"token": token, "password": "another passphrase"})
    assert r.status_code == 409 and r.json["error"]["code"] == "email_taken"
    # the web's mailed link with the same token: the account is made already
    b = Browser(mail_app.test_client())
    assert b.get(f"/auth/register/{token}").status_code == 302


def test_a_sign_up_is_throttled_as_the_webs_registration_on_the_same_counters(mail_app, smtp):
    b = Browser(mail_app.test_client())
    assert b.post("/auth/register", {"email": "flood@x.org"}).status_code == 302
    c = mail_app.test_client()
    got = [c.post("/api/v1/signup", json={"email": "flood@x.org"}).status_code for _ in range(3)]
    assert got == [202, 202, 429]  # 3 mails per address an hour, the web's one counted
    assert c.post("/api/v1/signup", json={"email": "other@x.org"}).status_code == 202


def test_a_competitions_allowed_domains_are_checked_and_the_first_page_leads_to_it(mail_app, smtp):
    with Session(engine_of(mail_app)) as s:
        s.add(
            Competition(slug="uni-only", title="Uni", state="visible", allowed_domains=["uni.edu"])
        )
        s.commit()
    c = mail_app.test_client()
    r = c.post("/api/v1/signup", json={"email": "a@gmail.com", "competition": "uni-only"})
    assert r.status_code == 403 and r.json["error"]["code"] == "domain_not_allowed"
    r = c.post("/api/v1/signup", json={"email": "a@x.org", "competition": "nowhere"})
    assert r.status_code == 404
    assert smtp.messages == []
    r = c.post("/api/v1/signup", json={"email": "b@cs.uni.edu", "competition": "uni-only"})
    assert r.status_code == 202, r.json
    token = _token(smtp.wait(1)[0]["body"])
    # the web's form from the competition's page: the same check, and its link lands there
    b = Browser(mail_app.test_client())
    page = b.get("/competitions/uni-only").get_data(as_text=True)
    assert "/auth/register?competition=uni-only" in page
    r = b.post("/auth/register?competition=uni-only", {"email": "c@gmail.com"})
    assert r.status_code == 403 and "uni.edu" in r.get_data(as_text=True)
    r = b.post(
        f"/auth/register/{token}", {"password": "a long passphrase", "again": "a long passphrase"}
    )
    assert r.status_code == 302 and r.headers["Location"].endswith("/competitions/uni-only")


def test_no_sign_up_where_no_mail_can_confirm_the_address(app):
    r = app.test_client().post("/api/v1/signup", json={"email": "a@x.org"})
    assert r.status_code == 409 and r.json["error"]["code"] == "no_mail"
    with Session(engine_of(app)) as s:
        assert s.exec(select(User)).all() == []


@pytest.mark.postgres
def test_twenty_parallel_finishes_of_one_token_make_one_account(pg_app, smtp):
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    app = _with_mail(pg_app, smtp.port)
    c = app.test_client()
    assert c.post("/api/v1/signup", json={"email": "crowd@x.org"}).status_code == 202
    token = _token(smtp.wait(1)[0]["body"])
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/api/v1/signup/finish"

    def finish(i: int) -> int:
        data = json.dumps({"token": token, "password": f"passphrase number {i}"}).encode()
        req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    try:
        with ThreadPoolExecutor(20) as pool:
            got = sorted(pool.map(finish, range(20)))
    finally:
        srv.shutdown()
    assert got.count(201) == 1 and set(got) <= {201, 409, 429}, got
    with Session(engine_of(app)) as s:
        assert len(s.exec(select(User).where(User.email == "crowd@x.org")).all()) == 1
