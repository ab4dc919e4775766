"""Large uploads from the CLI straight into the object store (SeaweedFS) through presigned multipart
URLs: a dropped connection resumes with only the missing parts, the site's size limit is enforced
before any part is sent and again before scoring, the completed file becomes a submission as a
plain upload does, and a site without a store answers 409 `no_store` (the CLI then sends a plain
upload)."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from conftest import build_schema
from seaweed import seaweedfs  # noqa: F401 - the fixture
from sqlalchemy import select
from sqlmodel import Session
from storekit import _bucket

from server.domain import accounts

TASK = "tric-binary"
PART = 5 * 1024 * 1024


def _site(tmp_path, demo_home, monkeypatch, extra: dict):
    from argon2 import PasswordHasher
    from werkzeug.serving import WSGIRequestHandler, make_server

    from server import create_app
    from server.domain.accounts import create_token, create_user
    from server.domain.submissions import ensure_phases
    from server.models import Team, TeamMember

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    home = tmp_path / "data"
    home.mkdir()
    (home / "tasks").symlink_to(demo_home / "tasks", target_is_directory=True)
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    build_schema(home)
    app = create_app(
        {
            "home": home,
            "env": "testing",
            "database_url": None,
            "redis_url": "redis://127.0.0.1:1/0",
            "PALIMPSEST_ENQUEUE": False,
            **extra,
        }
    )
    with Session(app.extensions["palimpsest.engine"], expire_on_commit=False) as s:
        ensure_phases(s)
        team = Team(name="alpha", invite_code="code-alpha")
        s.add(team)
        s.commit()
        u = create_user(s, email="alpha@example.org", password="correct horse")
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        s.commit()
        _, token = create_token(s, user=u)
        s.commit()

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return app, f"http://127.0.0.1:{srv.server_port}", token, home, srv


@pytest.fixture
def big_site(tmp_path, demo_home, monkeypatch, seaweedfs):  # noqa: F811
    from server.actions import large_uploads

    env = _bucket(seaweedfs)
    extra = {
        "s3_bucket": env["PALIMPSEST_S3_BUCKET"],
        "s3_endpoint": env["PALIMPSEST_S3_ENDPOINT"],
        "s3_access_key": env["PALIMPSEST_S3_ACCESS_KEY"],
        "s3_secret_key": env["PALIMPSEST_S3_SECRET_KEY"],
    }
    # parts of S3's smallest size (5 MiB; SeaweedFS holds to it), so that an 11 MiB file travels in
    # three
    monkeypatch.setattr(large_uploads, "MIN_PART", PART)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app, url, token, home, srv = _site(tmp_path, demo_home, monkeypatch, extra)
    yield app, url, token, home
    srv.shutdown()


def _file(tmp_path, home, seed):
    from server.demo import predictions

    data, name = predictions(TASK, "dev", home, 0.2, seed=seed)
    lines = data.decode().splitlines()
    pad = " " * (11 * 1024 * 1024 // len(lines))  # JSON allows the blanks: a valid, large run
    p = tmp_path / f"run-{seed}-{name}"
    p.write_text("".join(line + pad + "\n" for line in lines))
    return p


def _cli(url, token, *args, cache):
    from cli.main import main

    return CliRunner().invoke(
        main,
        list(args),
        env={
            "PALIMPSEST_SERVER": url,
            "PALIMPSEST_TOKEN": token,
            "XDG_CONFIG_HOME": "/nonexistent",
            "XDG_CACHE_HOME": str(cache),
        },
        catch_exceptions=False,
    )


def test_a_large_upload_resumes_after_a_dropped_connection(big_site, tmp_path):
    from cli.client import Client, ClientError, _upload_state, file_sha256, upload_large
    from server import objectstore
    from server.models import Submission

    app, url, token, home = big_site
    f = _file(tmp_path, home, 7)
    size = f.stat().st_size
    assert 2 * PART < size < 3 * PART
    c = Client(url, token)
    with pytest.raises(ClientError, match="resume"):
        upload_large(c, TASK, f, {"phase": "dev"}, stop_after=1)
    assert _upload_state(file_sha256(f)).is_file()  # the ticket waits for the next try
    with Session(app.extensions["palimpsest.engine"]) as s:
        assert s.execute(select(Submission)).first() is None  # nothing before completion
    seen = []
    sub = upload_large(c, TASK, f, {"phase": "dev"}, progress=lambda sent, total: seen.append(sent))
    # only the missing parts went: the first report already counts the part sent before
    assert seen == [2 * PART, size]
    assert sub["status"] == "queued" and sub["sha256"] == file_sha256(f)
    assert not _upload_state(file_sha256(f)).exists()
    settings = app.extensions["palimpsest.settings"]
    store = objectstore.store_for(settings)
    with Session(app.extensions["palimpsest.engine"]) as s:
        row = s.get(Submission, sub["id"])
        assert row.size == size and row.phase_id
    assert store.exists(f"uploads/{row.storage_key}")
    assert [k for k, _ in store.keys("incoming/")] == []  # the incoming object is gone
    assert (home / "uploads" / row.storage_key).read_bytes() == f.read_bytes()

    # the CLI: the same path above --large-above, one JSON document
    g = _file(tmp_path, home, 8)
    r = _cli(url, token, "submit", TASK, str(g), "--phase", "dev", "--large-above", "0",
             "--json", cache=tmp_path / "cache")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "queued"


def test_the_size_limit_holds_before_any_part_and_a_site_without_a_store_says_so(
    big_site, tmp_path, demo_home, monkeypatch
):
    app, url, token, home = big_site
    f = _file(tmp_path, home, 9)
    app.extensions["palimpsest.settings"].max_upload_bytes = f.stat().st_size - 1
    r = app.test_client().post(
        f"/api/v1/tasks/{TASK}/uploads",
        headers={"Authorization": f"Bearer {token}"},
        json={"phase": "dev", "filename": f.name, "size": f.stat().st_size},
    )
    assert r.status_code == 413 and "over the limit" in r.json["error"]["message"]
    r = _cli(url, token, "submit", TASK, str(f), "--phase", "dev", "--large-above", "0",
             "--json", cache=tmp_path / "cache")  # fmt: skip
    assert r.exit_code == 1 and "over the limit" in r.stdout

    # a site on its data directory alone: 409 no_store, and the CLI sends a plain upload
    plain = tmp_path / "plain"
    plain.mkdir()
    app2, url2, token2, home2, srv = _site(plain, demo_home, monkeypatch, {"s3_bucket": None})
    try:
        r = app2.test_client().post(
            f"/api/v1/tasks/{TASK}/uploads",
            headers={"Authorization": f"Bearer {token2}"},
            json={"phase": "dev", "filename": f.name, "size": f.stat().st_size},
        )
        assert r.status_code == 409 and r.json["error"]["code"] == "no_store"
        r = _cli(url2, token2, "submit", TASK, str(f), "--phase", "dev", "--large-above", "0",
                 "--json", cache=tmp_path / "cache")  # fmt: skip
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["status"] == "queued"
    finally:
        srv.shutdown()


def test_parts_are_bounded_starts_follow_the_phase_and_stale_uploads_are_aborted(big_site):
    """A part PUT larger than announced (6 MiB into a 1-byte upload) is refused at completion and
    the upload aborted (its parts gone); an upload cannot start for a closed phase; one never
    completed is aborted by the cleanup step once its URLs expired."""
    import urllib.request
    from datetime import datetime

    from server import objectstore
    from server.actions import large_uploads
    from server.models import Phase

    app, url, token, home = big_site
    c = app.test_client()
    h = {"Authorization": f"Bearer {token}"}
    settings = app.extensions["palimpsest.settings"]
    store = objectstore.store_for(settings)

    def uploads() -> set[str]:
        r = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix="incoming/")
        return {u["UploadId"] for u in r.get("Uploads", [])}

    r = c.post(f"/api/v1/tasks/{TASK}/uploads", headers=h,
               json={"phase": "dev", "filename": "run.jsonl", "size": 1})  # fmt: skip
    assert r.status_code in (200, 201), r.json
    ticket, (part,) = r.json["upload"], r.json["parts"]
    put = urllib.request.Request(part["url"], data=b"x" * (6 * 1024 * 1024), method="PUT")
    with urllib.request.urlopen(put, timeout=60) as got:
        assert got.status == 200  # the store took it: the completion must not
    assert len(uploads()) == 1
    r = c.post("/api/v1/uploads/complete", headers=h, json={"upload": ticket, "phase": "dev"})
    assert r.status_code == 413, r.json
    assert (
        "part 1 of the upload holds 6291456 bytes, not the 1 announced"
        in r.json["error"]["message"]
    )
    assert uploads() == set()  # aborted: its parts freed

    # never completed: aborted by the cleanup once its URLs have expired
    r = c.post(f"/api/v1/tasks/{TASK}/uploads", headers=h,
               json={"phase": "dev", "filename": "run.jsonl", "size": 10})  # fmt: skip
    assert r.status_code in (200, 201) and len(uploads()) == 1
    assert large_uploads.abort_stale(settings) == 0  # still within its URLs' lifetime
    assert large_uploads.abort_stale(settings, older_than=0) == 1
    assert uploads() == set()

    # a closed phase takes no upload: refused before anything reaches the store
    with Session(app.extensions["palimpsest.engine"]) as s:
        q = select(Phase).where(Phase.task_id == TASK, Phase.name == "dev")
        p = s.execute(q).scalar_one()
        p.opens_at, p.closes_at = None, datetime(2000, 1, 1)
        s.add(p)
        s.commit()
    r = c.post(f"/api/v1/tasks/{TASK}/uploads", headers=h,
               json={"phase": "dev", "filename": "run.jsonl", "size": 10})  # fmt: skip
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_closed", r.json
    assert uploads() == set()
