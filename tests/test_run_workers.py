"""Attached run workers' tokens and the worker's side of the pull API (server/actions/
run_workers.py): an organizer's token for their competition alone (a set or the site is an
administrator's), a worker holding it claims only that competition's runs, is refused the
heartbeat of a run it does not hold, is named in the audit log of each run it claimed, and a
revoked token claims nothing more while its runs go back to their queues at once."""

from __future__ import annotations

import json
import zipfile

import pytest
import redis
from sqlmodel import Session, select
from webkit import engine_of, make_phase, make_token, make_user, team_of

from server.domain import run_queue
from server.models import AuditLog, CodeRun, Competition, CompetitionRole


def _h(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_app(request):
    """The web app on SQLite and on PostgreSQL."""
    return request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")


def test_a_token_claims_its_competitions_runs_alone_and_is_revoked_with_its_runs(
    any_app, redis_tcp_url, tmp_path, monkeypatch
):
    from server.api import run_workers as api_links
    from server.storage import store_upload

    app = any_app
    archive = tmp_path / "system.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("system.yaml", "command: [python3, predict.py]\n")
    key, _sha, _size = store_upload(
        app.extensions["palimpsest.settings"].home, archive.read_bytes(), "s.zip"
    )
    root = make_user(app, "root@x.org", organizer=True)
    org = make_user(app, "org@x.org")
    make_user(app, "ann@x.org", team="Readers")
    pid = make_phase(app, "tric-binary", "test").id
    team_id = team_of(app, "Readers").id
    with Session(engine_of(app)) as s:
        a, b = Competition(slug="comp-a", title="A"), Competition(slug="comp-b", title="B")
        s.add_all([a, b])
        s.flush()
        s.add(CompetitionRole(competition_id=a.id, user_id=org.id, role="organizer"))
        runs = {}
        for c in (a, b):
            r = CodeRun(
                team_id=team_id,
                task_id="tric-binary",
                phase_id=pid,
                archive_sha256=c.slug,
                competition_id=c.id,
                storage_key=key,
                manifest={"command": ["python3", "predict.py"]},
            )
            s.add(r)
            s.flush()
            run_queue.join_queue(s, r)
            runs[c.slug] = r.id
        s.commit()
        A, B = a.id, b.id
    c = app.test_client()
    org_h, root_h = _h(make_token(app, org)), _h(make_token(app, root))
    url = "/api/v1/run-workers/tokens"
    # an organizer: a token for their competition, never for another, a set or the site
    # (B is a draft they have no role in: it does not exist for them)
    assert c.post(url, json={"competitions": [B]}, headers=org_h).status_code in (403, 404)
    assert c.post(url, json={"competitions": [A, B]}, headers=org_h).status_code == 403
    assert c.post(url, json={"competitions": []}, headers=org_h).status_code == 403
    assert (
        c.post(url, json={"competitions": [A], "pools": ["a b"]}, headers=org_h).status_code == 422
    )
    r = c.post(url, json={"name": "lab box", "competitions": [A]}, headers=org_h)
    assert r.status_code == 201, r.json
    tok, tok_id = r.json["token"], r.json["id"]
    assert tok.startswith("plw_") and r.json["competitions"] == [A]
    listed = c.get(url, headers=org_h).json["tokens"]
    assert [t["id"] for t in listed] == [tok_id] and "token" not in listed[0]
    # the worker's side takes a run worker's token, never a person's
    assert c.post("/api/v1/worker/claim", headers=org_h).status_code == 401
    assert c.post("/api/v1/worker/claim").status_code == 401
    w = _h(tok)
    app.extensions["palimpsest.redis"] = redis.Redis.from_url(redis_tcp_url)

    def cpu_workers():
        return c.get("/status.json").json["pools"]["cpu"]["workers"]

    before = cpu_workers()
    got = c.post("/api/v1/worker/claim", headers=w).json
    assert cpu_workers() == before + 1  # the attached worker, heard from: live in its pools
    assert (got["run"], got["attempt"], got["command"]) == (
        runs["comp-a"],
        1,
        ["python3", "predict.py"],
    )
    assert c.post("/api/v1/worker/claim", headers=w).json == {}  # B's run waits: never its own
    # its files: links naming one file each, fetched with the token; the archive as stored, the
    # split's inputs, never its split's gold (a released training area may carry its own)
    files = {f["path"]: f["url"] for f in got["files"]}
    assert "code.zip" in files and "input/inputs.jsonl" in files, sorted(files)
    assert not any("gold" in p for p in files if "/test/" in p or "/" not in p[6:]), sorted(files)
    assert c.get(files["code.zip"], headers=w).get_data() == archive.read_bytes()
    body = c.get(files["input/inputs.jsonl"], headers=w).get_data()
    assert body.startswith(b"{") and b"\n" in body  # JSON Lines
    assert c.get(files["code.zip"]).status_code == 401  # the link alone is not enough
    assert c.get(files["code.zip"] + "x", headers=w).status_code == 403  # one object, as signed
    monkeypatch.setattr(api_links, "LINK_SECONDS", 0)
    import time

    time.sleep(1.1)
    assert c.get(files["code.zip"], headers=w).status_code == 403  # expired
    monkeypatch.setattr(api_links, "LINK_SECONDS", 300)
    # a heartbeat for a run it holds renews its lease; another's run is refused
    beat = f"/api/v1/worker/runs/{runs['comp-a']}/heartbeat"
    assert c.post(beat, headers=w).status_code == 200
    r = c.post(f"/api/v1/worker/runs/{runs['comp-b']}/heartbeat", headers=w)
    assert r.status_code == 409 and r.json["error"]["code"] == "not_held"
    with Session(engine_of(app)) as s:
        rows = s.exec(
            select(AuditLog).where(
                AuditLog.action == "run.claim", AuditLog.target == f"run:{runs['comp-a']}"
            )
        ).all()
        assert [row.details["token"] for row in rows] == [tok_id]
    # revoked: its run goes back to the queue at once, its attempt kept; the token is dead
    r = c.delete(f"{url}/{tok_id}", headers=org_h)
    assert r.status_code == 200 and r.json["released"] == [runs["comp-a"]] and r.json["revoked"]
    with Session(engine_of(app)) as s:
        run = s.get(CodeRun, runs["comp-a"])
        assert (run.stage, run.attempts, run.held_by) == ("queued", 1, "")
    assert c.post("/api/v1/worker/claim", headers=w).status_code == 401
    assert c.post(beat, headers=w).status_code == 401
    assert c.get(files["code.zip"], headers=w).status_code == 401
    # the site's token (an administrator's) serves every competition, round-robin
    r = c.post(url, json={"name": "site"}, headers=root_h)
    assert r.status_code == 201
    site = _h(r.json["token"])
    first = c.post("/api/v1/worker/claim", headers=site).json
    second = c.post("/api/v1/worker/claim", headers=site).json
    assert first["run"] == runs["comp-b"]  # B was never served: its turn comes first
    assert (second["run"], second["attempt"]) == (runs["comp-a"], 2)
    # a link given to the revoked token is not the site's token's to use
    assert c.get(files["code.zip"], headers=site).status_code == 403
    assert c.delete(f"{url}/{r.json['id']}", headers=org_h).status_code == 404  # not the org's
    # its result, to the link its claim gave: the token's alone, checked, taken once
    res = second["result_url"]
    failed = {"kind": "code", "status": "exit", "reason": "exit 1", "exit_code": 1,
              "cpu_seconds": 0.5, "wall_seconds": 0.7, "log": "--- stderr ---\nboom\n"}  # fmt: skip
    assert c.post(res, data={"result": json.dumps(failed)}, headers=org_h).status_code == 401
    assert c.post(res + "x", data={"result": json.dumps(failed)}, headers=site).status_code == 403
    # a file's link is no result's link, and a result's link fetches no file
    as_result = first["files"][0]["url"].replace("/worker/files/", "/worker/results/")
    body = {"result": json.dumps(failed)}
    assert c.post(as_result, data=body, headers=site).status_code == 403
    assert c.get(res.replace("/worker/results/", "/worker/files/"), headers=site).status_code == 403
    r = c.post(res, data={"result": '{"kind": "maybe"}'}, headers=site)
    assert r.status_code == 422 and "kind" in r.json["error"]["message"], r.json
    r = c.post(res, data={"result": '{"kind": "ok"}'}, headers=site)  # no output file
    assert r.status_code == 422 and "output" in json.dumps(r.json), r.json
    r = c.post(res, data={"result": json.dumps(failed)}, headers=site)
    assert r.status_code == 200 and r.json["stage"] == "failed", r.json
    with Session(engine_of(app)) as s:
        run = s.get(CodeRun, runs["comp-a"])
        assert (run.stage, run.failure_kind, run.cpu_seconds) == ("failed", "code", 0.5)
        assert run.outcome["attempt"] == 2 and "boom" in run.log
    r = c.post(res, data={"result": json.dumps(failed)}, headers=site)  # taken once
    assert r.status_code == 409 and r.json["error"]["code"] == "not_held"
    app.extensions.pop("palimpsest.redis", None)
