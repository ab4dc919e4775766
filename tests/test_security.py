"""Who may see what: every route tried as nobody, as another team and as the owner; gold files
and private scores unreachable before publication; CSRF, cookies, escaping, stored names."""

from __future__ import annotations

import io
import re

import pytest
from sqlmodel import Session
from webkit import Browser, engine_of, make_phase, make_submission, make_token, make_user, team_of

from server.models import Submission
from tasks import all_tasks
from tasks.store import TaskStore

PRIVATE = (
    "0.3456",
    "0.8765",
    "0.2468",
)  # private-part primary values: must never show before publication
EVIL = "<script>alert('x')</script>"


@pytest.fixture
def world(app):
    make_user(app, "owner@x.org", team=EVIL)
    make_user(app, "other@x.org", team="other")
    make_user(app, "loner@x.org")
    make_user(app, "org@x.org", organizer=True)
    owner, other = team_of(app, EVIL), team_of(app, "other")
    dev = make_phase(app, "tric-binary", "dev")
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    subs = {
        "owner_test": make_submission(
            app,
            team=owner,
            phase=test,
            scores={"public": 0.91, "private": 0.3456},
            method=EVIL,
            description=EVIL,
            url="javascript:alert(1)",
        ),
        "owner_hidden": make_submission(
            app, team=owner, phase=dev, scores={"all": 0.77}, hidden=True, hidden_reason=EVIL
        ),
        "owner_failed": make_submission(
            app,
            team=owner,
            phase=dev,
            status="failed",
            failure_kind="invalid",
            errors=[{"line": 3, "id": "SECRET-ERR", "message": "label 7 is not 0/1"}],
        ),
        "owner_private": make_submission(
            app,
            team=owner,
            phase=test,
            scores={"public": 0.55, "private": 0.2468},
            show_publicly=False,
            method="NOT-PUBLIC-METHOD",
        ),
        "other_test": make_submission(
            app, team=other, phase=test, scores={"public": 0.5, "private": 0.8765}
        ),
    }
    return {"dev": dev, "test": test, **subs}


def gold_needles(app) -> list[str]:
    """Lines of the gold files that appear in no public file: finding one in a response is a
    leak."""
    home = app.extensions["palimpsest.settings"].home
    needles = []
    for t in all_tasks():
        st = TaskStore(t.id, home)
        if not st.exists():
            continue
        public = b"".join(p.read_bytes() for p in st.public_files())
        for p in sorted((st.root / "gold").rglob("*")):
            if not p.is_file():
                continue
            lines = [ln for ln in p.read_bytes().splitlines() if len(ln) > 25 and ln not in public]
            needles += [ln.decode("utf-8", "replace") for ln in lines[:3]]
    assert needles
    return needles


def concrete_urls(app, world) -> list[str]:
    """Every GET route of the app with its parameters filled in every meaningful way."""
    values = {
        "task_id": [t.id for t in all_tasks()],
        "split": ["dev", "test", "gold", "train"],
        "submission_id": [s.id for k, s in world.items() if k not in ("dev", "test")] + [999],
        "phase_id": [world["dev"].id, world["test"].id],
        "token_id": [1],
        "fmt": ["csv", "json", "tex"],
        "filename": ["style.css", "../../tasks/tric-binary/gold/test/gold.jsonl"],
    }
    urls = set()
    for rule in app.url_map.iter_rules():
        if "GET" not in rule.methods:
            continue
        combos = [{}]
        for arg in rule.arguments:
            combos = [dict(c, **{arg: v}) for c in combos for v in values.get(arg, ["x"])]
        for c in combos:
            with app.test_request_context():
                from flask import url_for

                try:
                    u = url_for(rule.endpoint, **c)
                except Exception:  # noqa: BLE001
                    continue
            urls.add(u)
            if "leaderboard" in u or "/api" in u:
                for ph in ("dev", "test"):
                    urls.add(u + ("&" if "?" in u else "?") + f"phase={ph}")
    return sorted(urls)


def text_of(r) -> str:
    """A response's text; a zip's members' text (a download could leak what it packs)."""
    data = r.get_data()
    if data[:2] == b"PK":
        import zipfile

        z = zipfile.ZipFile(io.BytesIO(data))
        return "\n".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())
    return data.decode("utf-8", "replace")


def as_(app, email):
    b = Browser(app.test_client())
    if email:
        b.login(email)
    return b


def test_crawl_every_route_no_gold_no_private_scores(app, world):
    """Nobody, another team and the owner itself: no gold line, no private score, no other team's
    details anywhere, before publication."""
    needles = gold_needles(app)
    urls = concrete_urls(app, world)
    assert len(urls) > 40
    other_team_secrets = ["SECRET-ERR", "NOT-PUBLIC-METHOD"]
    for who in (None, "other@x.org", "loner@x.org", "owner@x.org"):
        b = as_(app, who)
        for u in urls:
            r = b.get(u)
            body = text_of(r)
            for n in PRIVATE:
                assert n not in body, (who, u, n)
            for n in needles:
                assert n not in body, (who, u, "gold line")
            if who != "owner@x.org":
                for n in other_team_secrets:
                    assert n not in body, (who, u, n)
            if r.mimetype == "text/html":  # JSON and CSV carry the raw name, served with nosniff
                assert EVIL not in body, (who, u, "unescaped")
    # with a token on the API, the same holds
    tok = make_token(app, _user(app, "other@x.org"))
    c = app.test_client()
    for u in urls:
        if u.startswith("/api"):
            body = text_of(c.get(u, headers={"Authorization": f"Bearer {tok}"}))
            for n in PRIVATE + tuple(other_team_secrets):
                assert n not in body, (u, n)


def _user(app, email):
    from sqlmodel import select

    from server.models import User

    with Session(engine_of(app)) as s:
        return s.exec(select(User).where(User.email == email)).one()


def test_submission_routes_check_who_asks(app, world):
    """Codabench #1824: each submission route as nobody, another team, a teamless user, the
    owner."""
    sid = world["owner_failed"].id
    urls = [f"/submissions/{sid}"]
    nobody, other, loner, owner, org = (
        as_(app, e) for e in (None, "other@x.org", "loner@x.org", "owner@x.org", "org@x.org")
    )
    for u in urls:
        assert nobody.get(u).status_code == 302
        assert other.get(u).status_code == 404
        assert loner.get(u).status_code == 404
        assert owner.get(u).status_code == 200 and b"SECRET-ERR" in owner.get(u).data
        assert org.get(u).status_code == 200
    # marking another team's run primary
    assert other.post(f"/submissions/{sid}/primary").status_code == 404
    assert nobody.post(f"/submissions/{sid}/primary").status_code == 302
    assert org.post(f"/submissions/{sid}/primary").status_code == 403
    # the owner's list has its runs; another's list does not
    assert b"NOT-PUBLIC-METHOD" in owner.get("/submissions").data
    assert b"NOT-PUBLIC-METHOD" not in other.get("/submissions").data
    assert b"NOT-PUBLIC-METHOD" not in other.get("/team/").data


def test_private_scores_hidden_from_the_team_until_publication(app, world):
    owner = as_(app, "owner@x.org")
    sid = world["owner_test"].id
    page = owner.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "0.9100" in page and "0.3456" not in page and "revealed when the final ranking" in page
    org = as_(app, "org@x.org")
    org.post(
        f"/organizer/phases/{world['test'].id}/actions/publish",
        {"close": "yes"},
    )
    assert "0.3456" in owner.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "0.8765" in app.test_client().get(
        "/tasks/tric-binary/leaderboard.json?phase=test"
    ).get_data(as_text=True)


def test_every_form_needs_csrf(app, world):
    """Every POST route outside /api refuses a request without the session's CSRF token."""
    owner = as_(app, "owner@x.org")
    org = as_(app, "org@x.org")
    posted = 0
    for rule in app.url_map.iter_rules():
        if "POST" not in rule.methods or rule.rule.startswith("/api"):
            continue
        args = {
            a: {
                "task_id": "tric-binary",
                "submission_id": world["owner_test"].id,
                "phase_id": world["test"].id,
                "token_id": 1,
                "user_id": 1,
                "campaign_id": 1,  # CSRF is refused before a campaign is looked for
                "item_id": 1,
                "run_id": 1,  # CSRF is refused before a run is looked for
            }.get(a, "x")
            for a in rule.arguments
        }
        with app.test_request_context():
            from flask import url_for

            u = url_for(rule.endpoint, **args)
        for b in (owner, org):
            r = b.post(u, {"action": "publish", "name": "x", "reason": "r"}, csrf=False)
            assert r.status_code == 400 and b"did not come from this site" in r.data, (
                u,
                r.status_code,
            )
            r = b.post(u, {"action": "publish", "csrf_token": "forged"}, csrf=False)
            assert r.status_code == 400, u
        posted += 1
    assert posted >= 15
    from server.models import Phase

    with Session(engine_of(app)) as s:
        assert s.get(Phase, world["test"].id).published_at is None


def test_session_cookie_flags(app, tmp_path, monkeypatch):
    make_user(app, "a@x.org")
    r = Browser(app.test_client()).post(
        "/auth/login", {"email": "a@x.org", "password": "correct horse battery"}
    )
    cookie = r.headers.get("Set-Cookie")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    from conftest import build_schema

    from server import create_app

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path / "p"))
    build_schema(tmp_path / "p")
    prod = create_app(
        {"home": tmp_path / "p", "env": "production", "secret_key": "x" * 40, "database_url": None}
    )
    assert prod.config["SESSION_COOKIE_SECURE"] and prod.config["SESSION_COOKIE_HTTPONLY"]
    assert prod.config["SESSION_COOKIE_SAMESITE"] == "Lax"
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        create_app({"home": tmp_path / "p", "env": "production", "database_url": None})


def test_security_headers(app, client):
    r = client.get("/")
    assert (
        r.headers["X-Frame-Options"] == "DENY"
        and "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    )
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_script_team_name_is_escaped_everywhere(app, world):
    owner = as_(app, "owner@x.org")
    org = as_(app, "org@x.org")
    sid = world["owner_test"].id
    pages = [
        (owner, "/team/"),
        (owner, f"/submissions/{sid}"),
        (owner, "/submissions"),
        (org, "/organizer/submissions"),
        (org, f"/organizer/phases/{world['test'].id}/ranking"),
        (org, "/organizer/queue"),
        (owner, "/tasks/tric-binary/leaderboard?phase=test"),
        (org, "/tasks/tric-binary/leaderboard?phase=dev"),
    ]
    for b, u in pages:
        body = b.get(u).get_data(as_text=True)
        assert EVIL not in body, u
        assert "<script>" not in body.replace('<script src="/static/sort.js"></script>', ""), u
    body = owner.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "&lt;script&gt;" in body and 'href="javascript:' not in body


def test_stored_filenames_never_come_from_the_client(app):
    import json

    from server.storage import path_for

    b = as_(app, "owner@x.org") if False else None
    make_user(app, "f@x.org", team="files")
    make_phase(app, "tric-binary", "dev")
    b = as_(app, "f@x.org")
    data = b'{"instanceID": "x", "label": 1}\n'
    r = b.post(
        "/tasks/tric-binary/submit",
        {
            "phase": "dev",
            "method_name": "m",
            "file": (io.BytesIO(data), "../../../etc/passwd;rm -rf.jsonl"),
        },
        content_type="multipart/form-data",
    )
    assert r.status_code == 302
    with Session(engine_of(app)) as s:
        sub = s.get(Submission, int(r.headers["Location"].rsplit("/", 1)[1]))
        assert re.fullmatch(r"[0-9a-f]{2}/[0-9a-f]{64}\.jsonl", sub.storage_key)
        home = app.extensions["palimpsest.settings"].home
        p = path_for(home, sub.storage_key)
        assert p.read_bytes() == data and ".." not in str(p.relative_to(home))
    assert json  # the client's name is kept for display only
    assert "etc/passwd" in b.get(f"/submissions/{sub.id}").get_data(as_text=True)


def test_no_route_serves_uploads_or_gold(app, world):
    # no route answers a GET under a name of the uploads or the gold (the large-upload routes of
    # the API take parts of a team's own file: POST only)
    rules = [r.rule for r in app.url_map.iter_rules() if "GET" in r.methods]
    assert not any("gold" in r or "upload" in r for r in rules)
    c = app.test_client()
    for u in [
        "/static/../tasks/tric-binary/gold/test/gold.jsonl",
        "/static/%2e%2e/palimpsest.db",
        "/tasks/tric-binary/data/../gold/test.zip",
        "/palimpsest.db",
        "/uploads/",
    ]:
        r = c.get(u)
        assert r.status_code in (404, 400, 308), u
