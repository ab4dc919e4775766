"""The pages' words and assets, without a browser: no inline script or style anywhere (the CSP
blocks them), the live status endpoint, the favicon, the default board, plain names for the
organizer's actions with who did them, how to take part, and no email on public pages."""

from __future__ import annotations

import re

import pytest
from sqlmodel import Session
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of

from server.models import AuditLog
from tests.conftest import REPO

TEMPLATES = REPO / "server" / "templates"


@pytest.fixture
def org(app):
    make_user(app, "org@x.org", organizer=True)
    b = Browser(app.test_client())
    b.login("org@x.org")
    return b


def test_no_template_holds_an_inline_script_style_or_handler():
    bad = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=", re.I)
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()[:80]}"
        for p in sorted(TEMPLATES.rglob("*.html"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert not found, found


def test_the_favicon_is_served_and_linked(client):
    r = client.get("/favicon.ico")
    assert r.status_code == 200 and r.mimetype.startswith("image/") and len(r.data) > 100
    assert client.get("/static/favicon.svg").status_code == 200
    page = client.get("/").get_data(as_text=True)
    assert 'rel="icon"' in page and "favicon.svg" in page


def test_live_status_endpoint_shows_only_what_the_visitor_may_see(app):
    make_user(app, "a@x.org", team="alpha")
    make_user(app, "b@x.org", team="beta")
    dev = make_phase(app, "tric-binary", "dev")
    mine = make_submission(app, team=team_of(app, "alpha"), phase=dev, status="queued")
    done = make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.5})
    theirs = make_submission(app, team=team_of(app, "beta"), phase=dev, status="running")
    anon = app.test_client().get(f"/submissions/status.json?ids={mine.id}")
    assert anon.status_code == 302  # signed-in only, like the pages it serves
    a = Browser(app.test_client())
    a.login("a@x.org")
    got = a.get(f"/submissions/status.json?ids={mine.id},{done.id},{theirs.id}").get_json()
    assert got == {"statuses": {str(mine.id): "queued", str(done.id): "scored"}, "final": False}
    assert a.get(f"/submissions/status.json?ids={done.id}").get_json()["final"] is True
    bad = a.get("/submissions/status.json?ids=1,x")
    assert bad.status_code == 400 and "'1,x'" in bad.get_json()["error"]
    many = ",".join(str(i) for i in range(1, 200))
    assert a.get(f"/submissions/status.json?ids={many}").status_code == 400
    # the pages carry what the script polls, and the script itself as a file
    for url in (f"/submissions/{mine.id}", "/submissions", "/team/"):
        page = a.get(url).get_data(as_text=True)
        assert f'data-submission="{mine.id}" data-status="queued"' in page, url
        assert "/static/status.js" in page and "<script>" not in page, url


def test_the_default_board_is_the_main_phase_not_the_cross_validated_one(app, client):
    make_user(app, "a@x.org", team="alpha")
    make_phase(app, "tric-binary", "dev")
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    cv = make_phase(app, "tric-binary", "cv")
    make_submission(app, team=team_of(app, "alpha"), phase=test, scores={"public": 0.6})
    assert 'href="/tasks/tric-binary/leaderboard"' in client.get("/").get_data(as_text=True)
    assert client.get("/tasks/tric-binary/leaderboard.json").get_json()["phase"] == "test"
    page = client.get("/tasks/tric-binary/leaderboard").get_data(as_text=True)
    assert "<strong>test</strong>" in page and "cross-validated board" not in page
    cvpage = client.get(f"/tasks/tric-binary/leaderboard?phase={cv.name}").get_data(as_text=True)
    assert "cross-validated board on the cv split" in cvpage


def test_the_home_page_says_how_to_take_part(client):
    page = client.get("/").get_data(as_text=True)
    assert "How to take part" in page and "/auth/register" in page and "primary run" in page


def test_organizer_actions_have_one_name_each_and_say_who(app, org):
    make_user(app, "a@x.org", team="alpha")
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    a = Browser(app.test_client())
    a.login("a@x.org")
    sub = make_submission(app, team=team_of(app, "alpha"), phase=test, scores={"public": 0.6})
    a.post(f"/submissions/{sub.id}/primary")  # a team's action, in the list too
    org.post(f"/organizer/phases/{test.id}/actions/hide-board")
    with Session(engine_of(app)) as s:  # what a command or a worker records: no account
        s.add(AuditLog(actor_id=None, action="phase.edit", target="tric-binary/test"))
        s.commit()
    page = org.get("/organizer/").get_data(as_text=True)
    buttons = re.findall(r"<button[^>]*>([^<]+)</button>", page)
    assert "Close the phase" in buttons and "Show the board" in buttons
    assert "Close" not in buttons and "Open" not in buttons
    recent = page.split("Recent actions", 1)[1]
    assert "None" not in recent
    assert "<strong>org@x.org</strong> leaderboard" in recent or "org@x.org" in recent
    assert "<strong>a@x.org</strong>" in recent and "<strong>the server</strong>" in recent
    audit = org.get("/organizer/audit").get_data(as_text=True)
    assert "None" not in audit and "a@x.org" in audit and "the server" in audit
    flashed = org.post(
        f"/organizer/phases/{test.id}/actions/show-board", follow_redirects=True
    ).get_data(as_text=True)
    assert "The board of tric-binary/test is shown." in flashed


def test_a_published_board_names_no_one(app, org, client):
    make_user(app, "a@x.org", team="alpha")
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    make_submission(
        app, team=team_of(app, "alpha"), phase=test, scores={"public": 0.6, "private": 0.4}
    )
    org.post(f"/organizer/phases/{test.id}/actions/publish", {"close": "yes"})
    page = client.get("/tasks/tric-binary/leaderboard?phase=test").get_data(as_text=True)
    assert "Final ranking, version 1" in page and "by the organizers" in page
    body = client.get("/tasks/tric-binary/leaderboard.json?phase=test").get_data(as_text=True)
    for public in (page, body):
        assert "org@x.org" not in public and "a@x.org" not in public
    confirm = org.get(f"/organizer/phases/{test.id}/publish?action=publish").get_data(as_text=True)
    assert 'class="confirm-line"' in confirm and "style=" not in confirm


def test_reference_rows_fold_their_sources_into_one_toggle(app, client):
    # the official SwissGov-RSD release carries the annotators' agreement: human reference rows
    make_phase(app, "swissgov-rsd", "test", public_fraction=0.5)
    page = client.get("/tasks/swissgov-rsd/leaderboard?phase=test").get_data(as_text=True)
    n = page.count("reference, not ranked</span>")
    assert n >= 1
    assert page.count('<details class="notes">') == 1
    fold = page.split('<details class="notes">', 1)[1].split("</details>", 1)[0]
    assert fold.count("<li>") == n and "not ranked: where each comes from" in fold
    table = page.split('<table class="board', 1)[1].split("</table>", 1)[0]
    assert '<small class="muted" title=' not in table  # no note under each row any more
