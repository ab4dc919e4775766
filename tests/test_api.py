"""The REST API: token auth, JSON errors, submissions with quotas and idempotency, and the
OpenAPI description checked operation by operation against the running app."""

from __future__ import annotations

import io
import json
import zipfile

import jsonschema
import pytest
from apikit import _h, _resolve, _run_job, _submit, _tric_file
from openapi_spec_validator import validate as validate_spec


def test_auth_is_by_token_only(api_env):
    app, tokens, _ = api_env
    c = app.test_client()
    r = c.get("/api/v1/tasks")
    assert r.status_code == 401 and r.json["error"]["message"].startswith("authentication required")
    r = c.get("/api/v1/tasks", headers=_h("pal_not-a-token"))
    assert r.status_code == 401 and r.json["error"]["code"] == "invalid_token"
    assert c.get("/api/v1/me", headers=_h(tokens["alpha"])).json["team"]["name"] == "alpha"


def test_cookie_session_is_refused_on_the_api(api_env):
    app, tokens, _ = api_env
    c = app.test_client()
    with c.session_transaction() as sess:  # a logged-in browser session
        sess["uid"] = 1
    assert c.get("/api/v1/me").status_code == 401


def test_submit_score_and_see_only_the_public_part(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", method_name="m1")
    assert r.status_code == 201, r.json
    sid = r.json["id"]
    assert r.json["status"] == "queued" and r.json["duplicate"] is False
    assert _run_job(sid)["status"] == "scored"
    body = c.get(f"/api/v1/submissions/{sid}", headers=_h(tokens["alpha"])).json
    assert body["status"] == "scored"
    scores = body["scores"]
    assert scores["task"] == "tric-binary" and scores["part"] == "public"
    assert "parts" not in scores  # the private part stays hidden before publication
    assert 0.5 < scores["primary"]["value"] <= 1.0
    # another team and a team-less user learn nothing, not even that it exists
    for other in ("beta", "loner"):
        r = c.get(f"/api/v1/submissions/{sid}", headers=_h(tokens[other]))
        assert r.status_code == 404 and "error" in r.json
    assert c.get("/api/v1/submissions", headers=_h(tokens["beta"])).json["items"] == []
    mine = c.get("/api/v1/submissions", headers=_h(tokens["alpha"])).json["items"]
    assert [m["id"] for m in mine] == [sid]
    assert {"id", "task", "phase", "status", "created"} <= set(mine[0])


def test_retried_upload_counts_once(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    data = _tric_file(home)
    first = _submit(c, tokens["alpha"], "tric-binary", data, phase="test")
    again = _submit(c, tokens["alpha"], "tric-binary", data, phase="test")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json["id"] == first.json["id"] and again.json["duplicate"] is True
    # the other team's identical file is its own submission
    theirs = _submit(c, tokens["beta"], "tric-binary", data, phase="test")
    assert theirs.status_code == 201 and theirs.json["id"] != first.json["id"]


def test_invalid_file_lists_every_problem_and_costs_nothing(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    bad = b'{"instanceID": "nope", "label": 3}\nnot json\n'
    r = _submit(c, tokens["alpha"], "tric-binary", bad, phase="test")
    assert r.status_code == 201
    sid = r.json["id"]
    assert _run_job(sid)["failure_kind"] == "invalid"
    body = c.get(f"/api/v1/submissions/{sid}", headers=_h(tokens["alpha"])).json
    assert body["status"] == "failed" and body["failure_kind"] == "invalid"
    lines = {e["line"] for e in body["errors"]}
    assert {1, 2} <= lines
    assert any("label" in e["message"] for e in body["errors"])
    phases = c.get("/api/v1/tasks/tric-binary", headers=_h(tokens["alpha"])).json["phases"]
    test = next(p for p in phases if p["name"] == "test")
    assert test["quota"]["daily_used"] == 0


def test_limit_reached_says_when(api_env):
    from sqlmodel import Session, select

    from server.models import Phase

    app, tokens, home = api_env
    engine = app.extensions["palimpsest.engine"]
    with Session(engine) as s:
        p = s.exec(select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "test")).one()
        p.daily_limit = 1
        s.add(p)
        s.commit()
    c = app.test_client()
    assert (
        _submit(c, tokens["alpha"], "tric-binary", _tric_file(home, 3), phase="test").status_code
        == 201
    )
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home, 4), phase="test")
    assert r.status_code == 429
    err = r.json["error"]
    assert err["code"] == "limit_reached" and err["next_allowed_at"]
    assert "next is allowed" in err["message"]


def test_closed_phase_and_unknowns(api_env):
    from datetime import datetime, timedelta

    from sqlmodel import Session, select

    from server.models import Phase

    app, tokens, home = api_env
    with Session(app.extensions["palimpsest.engine"]) as s:
        p = s.exec(select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "test")).one()
        p.closes_at = datetime.utcnow() - timedelta(days=1)
        s.add(p)
        s.commit()
    c = app.test_client()
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test")
    # the same status as the web's submit page (server.statuses): a conflict with the phase's state
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_closed"
    assert (
        c.get("/api/v1/tasks/tric-binry", headers=_h(tokens["alpha"]))
        .json["error"]["message"]
        .find("did you mean 'tric-binary'")
        >= 0
    )
    r = _submit(c, tokens["loner"], "tric-binary", _tric_file(home), phase="dev")
    assert r.status_code == 403 and r.json["error"]["code"] == "no_team"


def test_download_has_public_files_only(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    r = c.get("/api/v1/tasks/tric-binary/download", headers=_h(tokens["beta"]))
    assert r.status_code == 200 and r.mimetype == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(r.data)).namelist()
    assert "task.json" in names and "public/test/inputs.jsonl" in names
    assert not any(n.startswith("gold/") or n.startswith("index/") for n in names)
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(r.data)).read("task.json"))
    assert "gold_sha256" not in manifest


# ----------------------------------------------------------------------------- OpenAPI


def test_openapi_is_valid_and_describes_every_api_route(api_env):
    app, tokens, _ = api_env
    spec = app.test_client().get("/api/v1/openapi.json").json
    validate_spec(spec)
    described = {(path, m.upper()) for path, ops in spec["paths"].items() for m in ops}
    routed = set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1/"):
            path = rule.rule[len("/api/v1") :]
            for conv in ("<int:", "<"):
                path = path.replace(conv, "{")
            path = path.replace(">", "}")
            for m in rule.methods - {"HEAD", "OPTIONS"}:
                routed.add((path, m))
    assert routed == described
    # the phase actions' names are declared, as the one table every surface dispatches by
    from server.actions.phases import PHASE_ACTIONS

    action = spec["paths"]["/tasks/{task_id}/phases/{phase_name}/{action}"]["post"]
    (param,) = [p for p in action["parameters"] if p["name"] == "action"]
    assert param["schema"]["enum"] == list(PHASE_ACTIONS)


def _example(spec, schema):
    """A request body from a declared schema: each property's first example, else a value of its
    type."""
    schema = _resolve(spec, schema)
    if "examples" in schema:
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if "anyOf" in schema:
        return _example(spec, schema["anyOf"][0])
    t = schema.get("type")
    if t == "object":
        return {
            k: _example(spec, v)
            for k, v in schema.get("properties", {}).items()
            if k in schema.get("required", []) or "examples" in v
        }
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "x", "integer": 1, "number": 0.5, "boolean": False, "array": []}.get(t)


def _example_request(spec, path, op, ids):
    url = path
    query = {}
    for prm in op.get("parameters", []):
        value = ids.get(prm["name"], prm.get("example"))
        if prm["in"] == "path":
            url = url.replace("{" + prm["name"] + "}", str(value))
        elif value is not None:
            query[prm["name"]] = value
    return "/api/v1" + url, query


def test_every_operation_answers_as_described(api_env):
    """Requests generated from the spec (bodies from the declared request models), with a
    participant's, no, another team's and an organizer's token; every answer's status must be
    declared and its body must match the declared schema."""
    app, tokens, home = api_env
    c = app.test_client()
    spec = c.get("/api/v1/openapi.json").json
    sid = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test").json["id"]
    _run_job(sid)
    checked = 0
    # team leave and phase close last: they change what the other operations see
    last = ("/team/leave", "/tasks/{task_id}/phases/{phase_name}/{action}")
    order = sorted(spec["paths"].items(), key=lambda kv: kv[0] in last)
    for path, ops in order:
        for method, op in ops.items():
            for token in (tokens["alpha"], None, tokens["beta"], tokens["org"]):
                ids = {
                    "submission_id": sid,
                    "task_id": "tric-binary",
                    "phase_name": "dev",
                    "action": "freeze",
                }
                url, query = _example_request(spec, path, op, ids)
                headers = _h(token) if token else {}
                content = op.get("requestBody", {}).get("content", {})
                if "multipart/form-data" in content:
                    r = c.post(
                        url,
                        headers=headers,
                        data={"file": (io.BytesIO(_tric_file(home, 7)), "p.jsonl"), "phase": "dev"},
                        content_type="multipart/form-data",
                    )
                elif "application/json" in content:
                    body = _example(spec, content["application/json"]["schema"])
                    r = c.open(url, method=method.upper(), headers=headers, json=body)
                else:
                    r = c.open(url, method=method.upper(), headers=headers, query_string=query)
                declared = op["responses"]
                assert str(r.status_code) in declared, (method, path, r.status_code, r.data[:300])
                body_schema = (
                    declared[str(r.status_code)].get("content", {}).get("application/json", {})
                )
                if body_schema.get("schema") and r.mimetype == "application/json":
                    jsonschema.validate(r.json, _resolve(spec, body_schema["schema"]))
                checked += 1
    assert checked >= 4 * 27


def test_a_published_snapshot_matches_its_declared_shape(api_env):
    """The leaderboard rows and the published snapshot, field by field (additional fields
    refused)."""

    app, tokens, home = api_env
    c = app.test_client()
    spec = c.get("/api/v1/openapi.json").json
    sid = _submit(
        c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", primary="true"
    ).json["id"]
    _run_job(sid)
    board = c.get(
        "/api/v1/tasks/tric-binary/leaderboard?phase=test", headers=_h(tokens["alpha"])
    ).json
    jsonschema.validate(board, _resolve(spec, spec["components"]["schemas"]["Leaderboard"]))
    assert board["rows"][0]["primary_run"] is True
    r = c.post(
        "/api/v1/tasks/tric-binary/phases/test/publish",
        headers=_h(tokens["org"]),
        json={"close": True},
    )
    assert r.status_code == 201, r.json
    snap = c.get(
        "/api/v1/tasks/tric-binary/phases/test/rankings/1", headers=_h(tokens["alpha"])
    ).json
    jsonschema.validate(snap, _resolve(spec, spec["components"]["schemas"]["Snapshot"]))
    # the board of a published phase is the snapshot, and is declared so
    board = c.get(
        "/api/v1/tasks/tric-binary/leaderboard?phase=test", headers=_h(tokens["beta"])
    ).json
    assert board["ranking"]["version"] == 1
    jsonschema.validate(board, _resolve(spec, spec["components"]["schemas"]["Board"]))
    bad = dict(snap, rows=[dict(snap["rows"][0], undeclared=1)])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, _resolve(spec, spec["components"]["schemas"]["Snapshot"]))
