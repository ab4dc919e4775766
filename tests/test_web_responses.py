"""The reserved baselines team name, one charset per Content-Type, and a 413 that
names the limit that was hit."""

from __future__ import annotations

import io

import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_token, make_user, team_of

from server.domain.baselines import reads_as_baselines
from server.models import Team

RESERVED = [
    "Baselines",
    "baselines",
    "BASELINES",
    "  Base lines ",
    "B-a-s-e-l-i-n-e-s",
    "Baselines!",
    "baseline",
    "Baselines (2)",
    "baselines_3",
    "\uff22\uff41\uff53\uff45\uff4c\uff49\uff4e\uff45\uff53",
    "Ba\u0301selines",
    "b.a.s.e.l.i.n.e.s.",
    "B\u0430selines",  # a Cyrillic a
    "\u0392\u0430\u0455\u0435lin\u0435s",  # Greek Beta, Cyrillic a, dze, ie
    "Base1ines",
]
FREE = ["Baseline Busters", "Not the Baselines", "Readers", "Basil Lines", "baselines are boring"]


@pytest.mark.parametrize("name", RESERVED)
def test_names_reading_as_baselines_are_reserved(name):
    assert reads_as_baselines(name)


@pytest.mark.parametrize("name", FREE)
def test_other_names_are_free(name):
    assert not reads_as_baselines(name)


def test_a_participant_cannot_name_a_team_baselines(app, browser):
    make_user(app, "a@x.org")
    browser.login("a@x.org")
    for name in ("Baselines", "baselines.", "B A S E L I N E S"):
        page = browser.post("/team/create", {"name": name}, follow_redirects=True).get_data(
            as_text=True
        )
        assert "reserved" in page
    with Session(engine_of(app)) as s:
        assert s.exec(select(Team)).all() == []
    browser.post("/team/create", {"name": "Baseline Busters"})
    assert team_of(app, "Baseline Busters").name == "Baseline Busters"


def _one_charset(resp):
    ct = resp.headers.get("Content-Type", "")
    assert ct.lower().count("charset") <= 1, ct
    return ct


def test_one_charset_in_every_content_type(app):
    from tasks import get_task

    make_user(app, "org@x.org", organizer=True)
    u = make_user(app, "a@x.org", team="Readers")
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=team_of(app, "Readers"), phase=dev, scores={"all": 0.5})
    assert get_task("tric-binary")
    anon = app.test_client()
    seen = set()
    for url in (
        "/",
        "/tasks/tric-binary",
        "/tasks/tric-binary/leaderboard?phase=dev",
        "/tasks/tric-binary/leaderboard.json?phase=dev",
        "/tasks/tric-binary/leaderboard.csv?phase=dev",
        "/auth/login",
        "/no-such-page",
    ):
        for enc in ("", "gzip"):
            seen.add(_one_charset(anon.get(url, headers={"Accept-Encoding": enc})))
    org = Browser(app.test_client())
    org.login("org@x.org")
    for fmt in ("csv", "json", "tex"):
        r = org.get(f"/organizer/phases/{dev.id}/export.{fmt}")
        assert r.status_code == 200, (fmt, r.status_code)
        seen.add(_one_charset(r))
    api = app.test_client()
    tok = make_token(app, u)
    seen.add(_one_charset(api.get("/api/v1/me", headers={"Authorization": f"Bearer {tok}"})))
    assert "text/csv; charset=utf-8" in seen and "text/html; charset=utf-8" in seen


def _form(description: str):
    return {
        "phase": "dev",
        "method_name": "m",
        "description": description,
        "url": "",
        "show_publicly": "on",
        "file": (io.BytesIO(b'{"instanceID": "x", "label": 1}\n'), "p.jsonl"),
    }


def test_a_413_names_the_limit_that_was_hit(app):
    make_user(app, "a@x.org", team="Readers")
    make_phase(app, "tric-binary", "dev")
    b = Browser(app.test_client())
    b.login("a@x.org")
    big = "x" * (2 * 1024 * 1024)
    r = b.post("/tasks/tric-binary/submit", _form(big), content_type="multipart/form-data")
    page = r.get_data(as_text=True)
    assert r.status_code == 413
    assert "description" in page and "500000 bytes" in page and "134217728" not in page, page[-800:]
    # the API says the same
    tok = make_token(app, make_user(app, "b@x.org", team="Writers"))
    r = app.test_client().post(
        "/api/v1/tasks/tric-binary/submissions",
        data=_form(big),
        headers={"Authorization": f"Bearer {tok}"},
        content_type="multipart/form-data",
    )
    msg = r.get_json()["error"]["message"]
    assert (
        r.status_code == 413
        and "description" in msg
        and "500000 bytes" in msg
        and "134217728" not in msg
    )
    # a whole request over the upload limit names the upload limit
    app.config["MAX_CONTENT_LENGTH"] = 100_000
    r = b.post(
        "/tasks/tric-binary/submit",
        {**_form("d"), "file": (io.BytesIO(b"x" * 200_000), "p.jsonl")},
        content_type="multipart/form-data",
    )
    page = r.get_data(as_text=True)
    assert (
        r.status_code == 413
        and "100000 bytes" in page
        and "whole request" in page
        and "500000" not in page
    )
