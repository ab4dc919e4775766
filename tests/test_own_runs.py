"""A team manages its own runs on the web, the CLI and the API (one action each in
server.actions.submissions): it chooses the primary run, shows a run on the public board or keeps
it off, deletes a run (kept for the organizers, who restore it on their pages, CLI or API). A
deleted run leaves the boards at once, comes back when restored, and keeps counting against the
quota; published rankings never change. On SQLite and PostgreSQL, against a served app."""

from __future__ import annotations

import json

import apikit
from apikit import _tric_file, api, cli, upload
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_token, make_user

# the fixtures the tests below request, from the helper module that holds them
site = apikit.site


def public_rows(app) -> dict[str, int]:
    """The anonymous board of the test phase: team -> the run in its row."""
    board = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=test").get_json()
    return {r["team"]: r["submission_id"] for r in board["rows"] if r["row_type"] == "team"}


def used(app, team: str) -> int:
    from server.domain.submissions import quota
    from server.models import Phase, Team

    with Session(engine_of(app)) as s:
        t = s.exec(select(Team).where(Team.name == team)).one()
        p = s.exec(select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "test")).one()
        return quota(s, phase=p, team=t)["total_used"]


def test_a_team_manages_its_runs_on_every_surface(site, web_home):
    from server.jobs.scoring import score_submission

    app, url = site
    make_phase(app, "tric-binary", "test", public_fraction=1.0, total_limit=4)
    alpha = make_user(app, "alpha@x.org", team="alpha")
    make_user(app, "beta@x.org", team="beta")
    org = make_user(app, "org@x.org", organizer=True)
    tok = {u.email: make_token(app, u) for u in (alpha, org)}
    a_tok = tok["alpha@x.org"]

    ids = []
    for flip in (3, 4, 6):
        status, sub = upload(
            url, a_tok, _tric_file(web_home, flip), phase="test", method_name=f"m{flip}"
        )
        assert status == 201, sub
        assert score_submission(sub["id"])["status"] == "scored"
        ids.append(sub["id"])
    a, b, c = ids
    assert public_rows(app) == {"alpha": c}  # no primary: the latest scored run

    # the primary run: API, then CLI, then the web page
    status, got = api(url, a_tok, "POST", f"/submissions/{a}/primary")
    assert status == 200 and got["is_primary"] is True
    assert public_rows(app) == {"alpha": a}
    assert cli(url, a_tok, "primary", str(b))["is_primary"] is True
    web = Browser(app.test_client())
    web.login("alpha@x.org")
    r = web.post(f"/submissions/{a}/primary")
    assert r.status_code == 302
    assert public_rows(app) == {"alpha": a}

    # off the public board and back: web, CLI, API
    r = web.post(f"/submissions/{a}/public", {"show_publicly": "no"})
    assert r.status_code == 302 and public_rows(app) == {}
    assert cli(url, a_tok, "public", str(a))["show_publicly"] is True
    assert public_rows(app) == {"alpha": a}
    assert cli(url, a_tok, "private", str(a))["show_publicly"] is False
    assert public_rows(app) == {}
    status, got = api(url, a_tok, "POST", f"/submissions/{a}/public", {"show_publicly": True})
    assert status == 200 and got["show_publicly"] is True and public_rows(app) == {"alpha": a}

    # another team, an organizer, an unknown id: refused, nothing changed
    beta_web = Browser(app.test_client())
    beta_web.login("beta@x.org")
    assert beta_web.post(f"/submissions/{a}/delete", {"confirm": "y"}).status_code == 404
    status, got = api(url, tok["org@x.org"], "DELETE", f"/submissions/{a}")
    assert status == 403 and got["error"]["code"] == "not_your_team"
    status, _ = api(url, a_tok, "DELETE", "/submissions/999999")
    assert status == 404
    # the web asks to confirm
    assert web.post(f"/submissions/{a}/delete").status_code == 302
    assert public_rows(app) == {"alpha": a}

    # deleting: the web (the primary run), the CLI, the API; each leaves the board at once
    assert used(app, "alpha") == 3
    r = web.post(f"/submissions/{a}/delete", {"confirm": "y"})
    assert r.status_code == 302 and public_rows(app) == {"alpha": c}
    got = cli(url, a_tok, "delete", str(c))
    assert got["id"] == c and got["removed"] is True
    assert public_rows(app) == {"alpha": b}
    status, got = api(url, a_tok, "DELETE", f"/submissions/{b}")
    assert status == 200 and got["removed"] is True and public_rows(app) == {}
    # one rule for the team's list on every surface: still listed and readable, marked removed
    # (the API as the web's list); deleting again finds nothing
    status, got = api(url, a_tok, "GET", f"/submissions/{b}")
    assert status == 200 and got["removed"] is True
    assert api(url, a_tok, "DELETE", f"/submissions/{b}")[0] == 404
    listed = api(url, a_tok, "GET", "/submissions")[1]["items"]
    assert {x["id"]: x["removed"] for x in listed if x["id"] in {a, b, c}} == {
        a: True,
        b: True,
        c: True,
    }
    web_list = web.get("/submissions").get_data(as_text=True)
    assert all(f"/submissions/{x}" in web_list for x in (a, b, c))
    # the page says the team deleted it and that it still counts
    page = web.get(f"/submissions/{a}").get_data(as_text=True)
    assert "Your team deleted this submission" in page
    assert "counts against your team's quota" in page
    # the quota is not given back: 3 used of 4, one more upload, then refused
    assert used(app, "alpha") == 3
    status, d = upload(url, a_tok, _tric_file(web_home, 7), phase="test")
    assert status == 201
    status, refused = upload(url, a_tok, _tric_file(web_home, 8), phase="test")
    assert status == 429 and "all 4 submissions" in refused["error"]["message"], refused
    assert score_submission(d["id"])["status"] == "scored"
    assert public_rows(app) == {"alpha": d["id"]}

    # the organizers restore: their page, their CLI, the API; each run comes back
    orgweb = Browser(app.test_client())
    orgweb.login("org@x.org")
    r = orgweb.post(f"/organizer/submissions/{a}/hide", {"action": "restore"})
    assert r.status_code == 302
    assert public_rows(app) == {"alpha": a}  # the primary run again
    assert cli(url, tok["org@x.org"], "organizer", "restore", str(c))["id"] == c
    status, got = api(
        url, tok["org@x.org"], "POST", f"/submissions/{b}/visibility", {"action": "restore"}
    )
    assert status == 200
    from server.models import Submission

    with Session(engine_of(app)) as s:
        for sub in s.exec(select(Submission).where(Submission.id.in_(ids))):
            assert sub.removed_at is None and sub.removed_by_team is False
    # restored, it counts as before (an organizer's removal, by contrast, gives its slot back)
    assert used(app, "alpha") == 4

    # publication: the published ranking stays byte for byte whatever the team does afterwards
    status, got = api(
        url, tok["org@x.org"], "POST", "/tasks/tric-binary/phases/test/publish", {"close": True}
    )
    assert status == 201, got

    def published() -> bytes:
        status, body = api(
            url,
            tok["org@x.org"],
            "GET",
            "/tasks/tric-binary/phases/test/export?format=json",
            raw=True,
        )
        assert status == 200
        return body

    before = published()
    assert json.loads(before)["rows"][0]["submission_id"] == a
    assert api(url, a_tok, "DELETE", f"/submissions/{a}")[0] == 200
    assert (
        api(url, a_tok, "POST", f"/submissions/{d['id']}/public", {"show_publicly": False})[0]
        == 200
    )
    assert published() == before
    snap = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=test").get_data()
    assert json.loads(snap)["rows"][0]["submission_id"] == a  # the board shows the snapshot


def test_upload_flags_refuse_what_is_not_yes_or_no(site, web_home):
    app, url = site
    make_phase(app, "tric-binary", "test", public_fraction=1.0)
    u = make_user(app, "gamma@x.org", team="gamma")
    token = make_token(app, u)
    status, got = upload(url, token, _tric_file(web_home, 3), phase="test", show_publicly="maybe")
    assert status == 422 and "show_publicly" in json.dumps(got), got
    status, got = upload(url, token, _tric_file(web_home, 3), phase="test", primary="y")
    assert status == 201 and got["is_primary"] is True and got["show_publicly"] is True
