"""No 500 from input: every route and form of the app (walked from `app.url_map`), sent ids of 2^31
and 2^63 in its path, cursor and `before=`, and a NUL byte in every text field, answers a 4xx, on
SQLite + embedded Redis and on PostgreSQL + Redis; the few named cases say which field."""

from __future__ import annotations

import base64
import io
import re

import pytest
from conftest import _make_backend
from webkit import Browser, make_token, make_user

from server.domain import accounts
from server.domain.bounds import INT_MAX

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])
BIG = (2**31, 2**63)
NUL = "a\x00b"
# sent to every form: the fields the app's forms and API bodies have
FIELDS = (
    "email",
    "password",
    "new_password",
    "name",
    "code",
    "invite_code",
    "team",
    "method_name",
    "description",
    "url",
    "reason",
    "action",
    "phase",
    "split",
    "opens_at",
    "closes_at",
    "public_fraction",
    "daily_limit",
    "total_limit",
    "concurrent_limit",
    "primary",
    "show_publicly",
)
# actions that would end the walk's own session
SKIP = ("logout", "sessions_end", "end_sessions", "static")


@pytest.fixture(params=["embedded", SERVICES])
def app(request, tmp_path, demo_home, monkeypatch):
    from argon2 import PasswordHasher

    from server import create_app

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    return create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})


def _paths(rule, value_for_int) -> list[str]:
    """The rule's URL with its int arguments set to `value_for_int`, and its string arguments
    set to plausible values, then to a NUL-holding one."""
    plain = {
        "task_id": "tric-binary",
        "phase_name": "test",
        "phase": "test",
        "split": "dev",
        "fmt": "json",
        "version": "1",
        "token": "x",
    }
    args = {}
    for a in rule.arguments:
        conv = rule._converters.get(a)
        if conv is not None and type(conv).__name__ == "IntegerConverter":
            args[a] = str(value_for_int)
        else:
            args[a] = plain.get(a, "x")
    out = []
    for variant in ({}, *({a: NUL} for a in args if not args[a].isdigit())):
        path = rule.rule
        for a in rule.arguments:
            v = variant.get(a, args[a])
            path = path.replace(f"<{a}>", v)
            path = re.sub(rf"<[a-z]+:{a}>", v, path)
        out.append(path)
    return out


def _query(n: int) -> dict:
    return {
        "before": str(n),
        "version": str(n),
        "cursor": base64.urlsafe_b64encode(f"id:{n}".encode()).decode().rstrip("="),
        "phase": "test",
        "q": NUL,
    }


def test_every_route_answers_big_ids_and_nul_bytes_with_a_4xx(app):
    org = make_user(app, "org@example.org", organizer=True, team="org-team")
    token = make_token(app, org)
    web = Browser(app.test_client())
    web.login("org@example.org")
    api = app.test_client()
    h = {"Authorization": f"Bearer {token}"}
    seen, fives = 0, []
    for rule in app.url_map.iter_rules():
        if any(s in rule.endpoint for s in SKIP):
            continue
        is_api = rule.rule.startswith("/api/")
        for n in BIG:
            for path in _paths(rule, n):
                for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                    kw: dict = {"query_string": _query(n)}
                    if method != "GET":
                        if is_api:
                            kw["json"] = {f: NUL for f in FIELDS} | {"daily_limit": n}
                        else:
                            data = {f: NUL for f in FIELDS} | {"daily_limit": str(n)}
                            data["file"] = (io.BytesIO(b"{}\n"), "a\x00b.jsonl")
                            kw["data"] = data
                            kw["content_type"] = "multipart/form-data"
                    if is_api:
                        r = api.open(path, method=method, headers=h, **kw)
                    elif method == "GET":
                        r = web.get(path, **kw)
                    else:
                        kw["data"]["csrf_token"] = web.token()
                        r = web.c.open(path, method=method, **kw)
                    seen += 1
                    if r.status_code >= 500:
                        fives.append((method, path, r.status_code))
    assert seen > 100 and not fives, fives[:20]


def test_the_named_cases_say_which_field(app):
    user = make_user(app, "u@example.org", team="t")
    token = make_token(app, user)
    c = app.test_client()
    h = {"Authorization": f"Bearer {token}"}
    for n in BIG:
        r = c.get(f"/api/v1/submissions/{n}", headers=h)
        assert r.status_code == 404 and "submission_id" in r.get_json()["error"]["message"]
        r = c.get("/api/v1/submissions", query_string={"cursor": _query(n)["cursor"]}, headers=h)
        assert r.status_code == 422 and r.get_json()["error"]["code"] == "bad_cursor"
    web = Browser(app.test_client())
    web.login("u@example.org")
    r = web.get("/submissions", query_string={"before": str(2**63)})
    assert r.status_code == 400 and "before" in r.get_data(as_text=True)
    assert web.get(f"/submissions/{2**31}").status_code == 404
    # a NUL in the login, registration and team forms, and in an upload's fields
    anon = Browser(app.test_client())
    for url, data, field in (
        ("/auth/login", {"email": "a\x00@example.org", "password": "x"}, "email"),
        ("/auth/register", {"email": "b@example.org\x00"}, "email"),
        ("/teams/join", {"code": "abc\x00"}, "code"),
    ):
        r = anon.post(url, data)
        assert r.status_code == 400 and f"{field}: a control character" in r.get_data(
            as_text=True
        ), url
    r = c.post(
        "/api/v1/tasks/tric-binary/submissions",
        headers=h,
        data={"file": (io.BytesIO(b"{}\n"), "p.jsonl"), "phase": "dev", "method_name": NUL},
        content_type="multipart/form-data",
    )
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "method_name"
    r = c.get("/api/v1/tasks", query_string={"limit": str(INT_MAX + 1)}, headers=h)
    assert r.status_code == 400 and "limit" in r.get_json()["error"]["message"]


def test_an_organizer_form_refuses_a_limit_out_of_range(app):
    from webkit import make_phase

    p = make_phase(app, "tric-binary", "dev")
    make_user(app, "o@example.org", organizer=True)
    web = Browser(app.test_client())
    web.login("o@example.org")
    r = web.post(f"/organizer/phases/{p.id}", {"daily_limit": str(2**63), "public_fraction": "1"})
    assert r.status_code == 400 and f"a limit is at most {INT_MAX}" in r.get_data(as_text=True)
    api_token = make_token(app, make_user(app, "o2@example.org", organizer=True))
    r = app.test_client().patch(
        "/api/v1/tasks/tric-binary/phases/dev",
        json={"daily_limit": 2**63},
        headers={"Authorization": f"Bearer {api_token}"},
    )
    assert r.status_code == 400 and r.get_json()["error"]["field"] == "daily_limit"


# ----------------------------------------------------------------------------- smaller items


def test_urls_are_checked_alike_on_the_form_and_the_api(app):
    user = make_user(app, "url@example.org", team="urls")
    token = make_token(app, user)
    from webkit import make_phase

    make_phase(app, "tric-binary", "dev")
    api = app.test_client()
    web = Browser(app.test_client())
    web.login("url@example.org")
    for bad in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "ftp://x.org"):
        r = api.post(
            "/api/v1/tasks/tric-binary/submissions",
            headers={"Authorization": f"Bearer {token}"},
            data={"file": (io.BytesIO(b"{}\n"), "p.jsonl"), "phase": "dev", "url": bad},
            content_type="multipart/form-data",
        )
        assert (
            r.status_code == 422 and "must start with https://" in r.get_json()["error"]["message"]
        ), bad
        r = web.post(
            "/tasks/tric-binary/submit",
            {"file": (io.BytesIO(b"{}\n"), "p.jsonl"), "phase": "dev", "url": bad},
            content_type="multipart/form-data",
        )
        assert r.status_code in (200, 400) and "must start with https://" in r.get_data(
            as_text=True
        ), bad


def test_a_duplicated_key_is_a_problem_on_its_line(tmp_path, demo_home):
    from scorer import SubmissionInvalid, validate_file

    p = tmp_path / "p.jsonl"
    p.write_text(
        '{"instanceID": "x", "label": 1}\n{"instanceID": "a", "label": 1, "instanceID": "b"}\n'
    )
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("tric-binary", p, "dev", demo_home)
    got = [(x.line, x.message) for x in e.value.problems if "twice" in x.message]
    assert got and got[0][0] == 2 and "'instanceID' appears twice" in got[0][1]


def test_exports_strip_names_guard_formulas_and_write_counts_as_integers(app):
    from datetime import datetime

    from server.boards.leaderboard import Board, Column, Row, to_csv, to_dict

    cols = [
        Column(subset="all", metric="f1", greater_is_better=True, primary=True),
        Column(subset="all", metric="n", greater_is_better=True),
    ]
    row = Row(
        rank=1,
        row_type="team",
        team="t",
        team_id=1,
        submission_id=1,
        method_name="  =1+1 ",
        url="",
        submitted_at=datetime(2026, 1, 1),
        is_primary=True,
        values={"all/f1": 0.5, "all/n": 206.0},
    )
    board = Board(
        task_id="tric-binary",
        phase="dev",
        split="dev",
        part="all",
        published=False,
        frozen=False,
        columns=cols,
        rows=[row],
    )
    text = to_csv(board).decode()
    assert ",'=1+1," in text and ",206," in text and "206.0" not in text
    d = to_dict(board)["rows"][0]
    assert d["method_name"] == "=1+1" and d["metrics"]["all/n"] == 206
    assert isinstance(d["metrics"]["all/n"], int)


def test_the_api_docs_page_has_the_security_headers(app):
    r = app.test_client().get("/api/docs/")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
