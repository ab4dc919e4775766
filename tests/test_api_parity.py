"""What the web does, the API does too: teams, the primary run, the organizer's phases, rescoring,
hiding, exports, the audit log and baseline entries; every list a page; one error table."""

from __future__ import annotations

import json

import pytest
from apikit import _h, _run_job, _submit, _tric_file


def _dev_file(home, flip_every: int = 5) -> bytes:
    """A tric-binary file of the dev split's ids (a test file is refused on a dev phase)."""
    gold = [
        json.loads(x)
        for x in (home / "tasks/tric-binary/gold/dev/gold.jsonl").read_text().splitlines()
    ]
    rows = [
        {
            "instanceID": g["instanceID"],
            "label": (1 - g["label"]) if i % flip_every == 0 else g["label"],
        }
        for i, g in enumerate(gold)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_team_create_join_show_rotate_leave(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    loner = _h(tokens["loner"])
    r = c.get("/api/v1/team", headers=loner)
    assert r.status_code == 404 and r.json["error"]["code"] == "no_team"
    # the same refusal, the same words as the web page's
    r = c.post("/api/v1/team", headers=_h(tokens["alpha"]), json={"name": "another"})
    assert (
        r.status_code == 409
        and r.json["error"]["message"] == "You are in a team already; leave it first."
    )
    r = c.post("/api/v1/team", headers=loner, json={"name": "alpha"})
    assert r.status_code == 409 and r.json["error"]["code"] == "name_taken"
    r = c.post("/api/v1/team", headers=loner, json={"name": "B a s e l i n e s"})
    assert r.status_code == 422 and r.json["error"]["code"] == "reserved_name"  # as on the page
    r = c.post("/api/v1/team", headers=loner, json={"name": ""})
    assert r.status_code == 422 and r.json["error"]["problems"]
    r = c.post("/api/v1/team", headers=loner, json={"name": "  Solo   act "})
    assert r.status_code == 201 and r.json["name"] == "Solo act"
    assert [m["email"] for m in r.json["members"]] == ["loner@example.org"]
    code = r.json["invite_code"]
    # beta leaves its team and joins the loner's by the code
    assert c.post("/api/v1/team/leave", headers=_h(tokens["beta"])).json["left_team"] > 0
    r = c.post("/api/v1/team/join", headers=_h(tokens["beta"]), json={"invite_code": "wrong"})
    assert r.status_code == 404 and r.json["error"]["code"] == "bad_invite_code"
    r = c.post("/api/v1/team/join", headers=_h(tokens["beta"]), json={"invite_code": code})
    assert r.status_code == 200 and len(r.json["members"]) == 2
    new = c.post("/api/v1/team/invite", headers=loner).json["invite_code"]
    assert new != code
    assert c.get("/api/v1/me", headers=_h(tokens["beta"])).json["team"]["name"] == "Solo act"
    r = c.post("/api/v1/team/leave", headers=_h(tokens["beta"]))
    assert r.status_code == 200
    r = c.post("/api/v1/team/leave", headers=_h(tokens["beta"]))
    assert r.status_code == 409 and r.json["error"]["code"] == "no_team"
    # the audit log has each step, with who did it
    log = c.get("/api/v1/audit?action=team.join", headers=_h(tokens["org"])).json["items"]
    assert log and log[0]["actor"] == "beta@example.org"


def test_primary_at_upload_and_later(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    a = _submit(
        c, tokens["alpha"], "tric-binary", _tric_file(home, 3), phase="test", primary="true"
    ).json
    assert a["is_primary"] is True
    b = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home, 4), phase="test").json
    assert b["is_primary"] is False
    r = c.post(f"/api/v1/submissions/{b['id']}/primary", headers=_h(tokens["alpha"]))
    assert r.status_code == 200 and r.json["is_primary"] is True
    assert (
        c.get(f"/api/v1/submissions/{a['id']}", headers=_h(tokens["alpha"])).json["is_primary"]
        is False
    )
    # another team cannot see it, let alone choose it; an organizer may look but not choose
    assert (
        c.post(f"/api/v1/submissions/{b['id']}/primary", headers=_h(tokens["beta"])).status_code
        == 404
    )
    r = c.post(f"/api/v1/submissions/{b['id']}/primary", headers=_h(tokens["org"]))
    assert r.status_code == 403 and r.json["error"]["code"] == "not_your_team"


def test_pages_follow_next_to_the_end(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    r = c.patch(
        "/api/v1/tasks/tric-binary/phases/dev",
        headers=_h(tokens["org"]),
        json={"concurrent_limit": None, "daily_limit": None},
    )
    assert r.status_code == 200, r.json
    ids = {
        _submit(c, tokens["alpha"], "tric-binary", _dev_file(home, k), phase="dev").json["id"]
        for k in (3, 4, 6, 7, 8)
    }
    seen, url, pages = [], "/api/v1/submissions?limit=2", 0
    while url:
        r = c.get(url, headers=_h(tokens["alpha"]))
        assert r.status_code == 200
        seen += [x["id"] for x in r.json["items"]]
        url = r.json["next"]
        if url:
            assert r.headers["Link"] == f'<{url}>; rel="next"'
            url = url.replace("http://localhost", "")
        pages += 1
    assert pages == 3 and seen == sorted(ids, reverse=True)
    r = c.get("/api/v1/submissions?cursor=garbage!", headers=_h(tokens["alpha"]))
    assert r.status_code == 422 and r.json["error"]["code"] == "bad_cursor"
    r = c.get("/api/v1/submissions?limit=0", headers=_h(tokens["alpha"]))
    assert r.status_code == 422 and r.json["error"]["code"] == "invalid_request"
    # an organizer lists every team's, with the team's name
    every = c.get("/api/v1/submissions?mine=0&limit=500", headers=_h(tokens["org"])).json["items"]
    assert {x["team"] for x in every} == {"alpha"}


def test_organizer_phase_lifecycle_over_the_api(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    org = _h(tokens["org"])
    assert (
        c.post(
            "/api/v1/tasks/tric-binary/phases",
            headers=_h(tokens["alpha"]),
            json={"name": "final", "split": "test"},
        ).status_code
        == 403
    )
    r = c.post(
        "/api/v1/tasks/tric-binary/phases",
        headers=org,
        json={
            "name": "final",
            "split": "test",
            "daily_limit": 2,
            "opens_at": "2026-01-10T01:00:00+01:00",
        },
    )
    assert r.status_code == 201, r.json
    assert r.json["limits"]["daily"] == 2 and r.json["opens_at"] == "2026-01-10T00:00:00Z"
    r = c.post(
        "/api/v1/tasks/tric-binary/phases", headers=org, json={"name": "final", "split": "test"}
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "exists"
    r = c.patch(
        "/api/v1/tasks/tric-binary/phases/final",
        headers=org,
        json={"closes_at": "2026-01-01T00:00:00Z"},
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "bad_window"
    r = c.patch(
        "/api/v1/tasks/tric-binary/phases/final", headers=org, json={"closes_at": "nextTfriday"}
    )
    assert r.status_code == 422 and "closes_at" in r.json["error"]["message"]
    r = c.patch(
        "/api/v1/tasks/tric-binary/phases/final",
        headers=org,
        json={"opens_at": None, "total_limit": None},
    )
    assert r.status_code == 200 and r.json["opens_at"] is None and r.json["limits"]["total"] is None
    assert r.json["limits"]["daily"] == 2  # untouched
    names = [
        p["name"] for p in c.get("/api/v1/tasks/tric-binary/phases", headers=org).json["items"]
    ]
    assert "final" in names
    # submit, score, rescore, hide, publish, export
    sid = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="final").json["id"]
    r = c.post(f"/api/v1/submissions/{sid}/rescore", headers=org)
    assert r.status_code == 409 and r.json["error"]["code"] == "not_final"
    _run_job(sid)
    r = c.post(f"/api/v1/submissions/{sid}/rescore", headers=org, json={"reason": "scorer fix"})
    assert r.status_code == 200 and r.json["queued"] == [sid]
    _run_job(sid)
    r = c.post("/api/v1/tasks/tric-binary/rescore", headers=org, json={"phase": "final"})
    assert r.json["queued"] == [sid]
    _run_job(sid)
    r = c.post(f"/api/v1/submissions/{sid}/visibility", headers=org, json={"action": "hide"})
    assert r.status_code == 409 and r.json["error"]["code"] == "reason_required"
    r = c.post(
        f"/api/v1/submissions/{sid}/visibility",
        headers=org,
        json={"action": "hide", "reason": "dup"},
    )
    assert r.status_code == 200 and r.json["hidden"] is True
    c.post(f"/api/v1/submissions/{sid}/visibility", headers=org, json={"action": "unhide"})
    r = c.post("/api/v1/tasks/tric-binary/phases/final/publish", headers=org, json={})
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_open"
    r = c.post("/api/v1/tasks/tric-binary/phases/final/publish", headers=org, json={"close": True})
    assert r.status_code == 201 and r.json["ranking"]["version"] == 1
    ex = c.get("/api/v1/tasks/tric-binary/phases/final/export?format=csv", headers=org)
    assert ex.status_code == 200 and ex.mimetype == "text/csv"
    assert ex.headers["Content-Disposition"].endswith('ranking-v1.csv"')
    snap = c.get("/api/v1/tasks/tric-binary/phases/final/rankings/1", headers=org).data
    assert (
        c.get("/api/v1/tasks/tric-binary/phases/final/export?format=json", headers=org).data == snap
    )
    assert (
        c.get("/api/v1/tasks/tric-binary/phases/final/export?format=pdf", headers=org).status_code
        == 422
    )
    # a closed phase refuses an upload with the same status on the API and the web page
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home, 9), phase="final")
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_closed"
    log = c.get("/api/v1/audit?limit=100", headers=org).json["items"]
    actions = {x["action"] for x in log}
    assert {
        "phase.create",
        "phase.edit",
        "submission.rescore",
        "submission.hide",
        "ranking.publish",
        "ranking.export",
    } <= actions
    assert all(
        x["actor"] in ("org@example.org", None) for x in log if x["action"].startswith("ranking")
    )


def test_the_error_table_is_one_for_web_and_api():
    from datetime import datetime

    from server.exceptions import (
        LifecycleRefused,
        LimitReached,
        PhaseClosed,
        SubmissionRefused,
        TeamRefused,
    )
    from server.statuses import describe

    assert describe(PhaseClosed("closed", datetime(2026, 1, 1)))[:2] == (409, "phase_closed")
    assert describe(LimitReached("x", None, "daily"))[0:2] == (429, "limit_reached")
    assert describe(SubmissionRefused("x"))[0] == 422
    assert describe(LifecycleRefused("x", "phase_open"))[:2] == (409, "phase_open")
    assert describe(TeamRefused("x", "bad_invite_code", 404))[:2] == (404, "bad_invite_code")
    with pytest.raises(LookupError):
        describe(ValueError("not a named failure"))


def test_baselines_over_the_api(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    org = _h(tokens["org"])
    r = c.post("/api/v1/tasks/tric-binary/baselines", headers=org, json={"systems": ["nonesuch"]})
    assert r.status_code == 422 and r.json["error"]["code"] == "unknown_system"
    # Redis is unreachable in this fixture: nothing is queued, and the answer says so
    from baselines.systems import SYSTEMS

    r = c.post(
        "/api/v1/tasks/tric-binary/baselines",
        headers=org,
        json={"systems": [SYSTEMS["tric-binary"][0]]},
    )
    assert r.status_code == 503 and r.json["error"]["code"] == "queue_unreachable"
    sub = _submit(
        c,
        tokens["org"],
        "tric-binary",
        _tric_file(home),
        phase="test",
        baseline="true",
        method_name="lexical",
    ).json
    listed = c.get("/api/v1/tasks/tric-binary/baselines", headers=org).json["items"]
    assert [x["id"] for x in listed] == [sub["id"]] and listed[0]["is_baseline"] is True
    r = c.get("/api/v1/baselines/runs", headers=org)
    assert r.status_code == 503 and r.json["error"]["code"] == "queue_unreachable"


@pytest.mark.redis
def test_baseline_runs_are_listed_from_the_queue(api_env, redis_tcp_url, monkeypatch):  # noqa: F811
    """On this machine's Redis: a queued run is listed as queued."""
    from baselines.systems import SYSTEMS

    app, tokens, home = api_env
    monkeypatch.setattr(app.extensions["palimpsest.settings"], "redis_url", redis_tcp_url)
    c = app.test_client()
    org = _h(tokens["org"])
    system = SYSTEMS["tric-binary"][0]
    r = c.post(
        "/api/v1/tasks/tric-binary/baselines",
        headers=org,
        json={"systems": [system], "device": "cpu"},
    )
    assert r.status_code == 202, r.json
    runs = c.get("/api/v1/baselines/runs?limit=1", headers=org).json
    assert [x["id"] for x in runs["items"]] == r.json["jobs"] and runs["items"][0][
        "status"
    ] == "queued"


def test_docs_page_is_served_offline(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    r = c.get("/api/docs/")
    assert r.status_code == 200 and b"swagger-ui-bundle.js" in r.data
    assert "script-src" not in r.headers["Content-Security-Policy"]  # no inline script needed
    js = c.get("/api/docs/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.data) > 500_000
    assert b"openapi.json" in c.get("/api/docs/init.js").data
    assert c.get("/api/docs").status_code in (301, 308)
