"""The object store, tested against a real one (SeaweedFS, started once per session): uploads are
put into it before their row commits, a worker with a second, empty data directory fetches the
run and its task's files from it and scores the run, a store that does not answer refuses uploads
with 503 and leaves nothing behind, hidden gold is never handed out by URL, and the backup drill
goes from the data directory to the store and back, on SQLite and on PostgreSQL, with every
published output byte for byte."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
import socket
import time

import pytest
from backbone import burst, child_env, make_team, set_phase, submit, worker_process
from click.testing import CliRunner
from conftest import _make_backend, build_schema, fresh_pg_database, own_tasks
from seaweed import s3_env, seaweedfs  # noqa: F401 - the fixture
from sqlalchemy import select
from sqlmodel import Session
from storekit import _bucket, _load, big_home, big_predictions  # noqa: F401 - the fixtures

from server.domain import accounts

TASK = "tric-binary"


def _own_tasks(b, demo_home):
    own_tasks(b.settings.home)


@pytest.fixture
def stored(request, tmp_path, demo_home, monkeypatch, seaweedfs):  # noqa: F811
    """The embedded site with its files in a fresh bucket of the session's SeaweedFS."""
    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    b = _make_backend("embedded", request, tmp_path, demo_home, monkeypatch)
    _own_tasks(b, demo_home)
    for name in ("dev", "test"):
        set_phase(b, TASK, name, concurrent_limit=None, daily_limit=None)
    r = _cli("store", "push", "--json", env={"PALIMPSEST_HOME": str(b.settings.home)})
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["put"]["tasks"] > 0
    r = _cli("store", "push", "--json", env={"PALIMPSEST_HOME": str(b.settings.home)})
    assert json.loads(r.stdout)["put"]["tasks"] == 0  # nothing put twice
    b.env = env
    return b


def _machine_env(b, home) -> dict:
    """Another machine's environment: the site's database, Redis and store, `home` its own."""
    env = child_env(b)
    env.update(b.env)
    env["PALIMPSEST_HOME"] = str(home)
    env["DATABASE_URL"] = b.settings.sqlalchemy_url()
    env["REDIS_URL"] = b.embedded.url
    env["PALIMPSEST_SECRET_KEY"] = b.settings.secret_key
    return env


def test_a_worker_with_an_empty_data_directory_scores_runs_from_the_store(stored, tmp_path):
    from server import objectstore
    from server.models import Submission

    b = stored
    store = objectstore.store_for(b.settings)
    team, user = make_team(b)
    sub = submit(b, team, user, TASK, "dev", noise=0.1)
    assert store.exists(f"uploads/{sub.storage_key}")
    # the worker's machine: the database, Redis and the store, and a data directory of its own
    other = tmp_path / "worker-home"
    other.mkdir()
    env = _machine_env(b, other)
    proc = worker_process(b, "--queue", "scoring", "--burst", env=env, log=tmp_path / "w.log")
    proc.wait(120)
    with Session(b.engine) as s:
        got = s.get(Submission, sub.id)
    assert got.status == "scored", (tmp_path / "w.log").read_text()[-3000:]
    assert (other / "uploads" / sub.storage_key).is_file()
    assert (other / "tasks" / TASK / "task.json").read_bytes() == (
        b.settings.home / "tasks" / TASK / "task.json"
    ).read_bytes()
    # the board's statistics job on a worker that never scored the task: its files from the store
    from server.boards import stats
    from server.settings import Settings

    third = tmp_path / "stats-home"
    with Session(b.engine) as s:
        phase_id = s.get(Submission, sub.id).phase_id
    done = stats.compute_board_stats(
        phase_id,
        settings=Settings(
            home=third,
            database_url=b.settings.sqlalchemy_url(),
            **{k: getattr(b.settings, k) for k in Settings.model_fields if k.startswith("s3_")},
        ),
    )
    assert done["phase"] == phase_id and (third / "tasks" / TASK / "task.json").is_file()
    # hidden gold never leaves through a URL; public files may
    with pytest.raises(PermissionError):
        store.presigned_get(f"tasks/{TASK}/gold/test/gold.jsonl")
    public = next(k for k, _ in store.keys(f"tasks/{TASK}/public/"))
    import urllib.request

    url = store.presigned_get(public, expires=60)
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == (b.settings.home / public).read_bytes()


def test_publication_and_a_campaigns_new_gold_version_on_the_store(stored, tmp_path):
    """The drill's site built on the store: runs scored, a phase closed and published, an
    assessment campaign closed into gold version 2 (put into the store before its row commits),
    the runs rescored and a second version published; a worker's empty data directory then gets
    from the store exactly the gold the database names, with the first version kept."""
    from storekit import _build

    from server import backup, objectstore
    from server.models import GoldVersion, RankingVersion
    from server.settings import Settings

    b = stored
    _build(b)
    store = objectstore.store_for(b.settings)
    keys = {k for k, _ in store.keys(f"tasks/{TASK}/")}
    assert any(k.startswith(f"tasks/{TASK}/gold-history/test/v1/") for k in keys), keys
    with Session(b.engine) as s:
        assert [g.version for g in s.exec(select(GoldVersion)).scalars()] == [1, 2]
        assert len(s.exec(select(RankingVersion)).scalars().all()) == 2
    other = tmp_path / "fresh-worker"
    settings = Settings(
        home=other,
        **{k: getattr(b.settings, k) for k in Settings.model_fields if k.startswith("s3_")},
    )
    assert objectstore.ensure_task(settings, TASK)
    assert backup.gold_problems(b.engine, other) == []
    assert (other / "tasks" / TASK / "gold" / "test").is_dir()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_store_refuses_uploads_with_503_and_leaves_nothing(
    tmp_path, demo_home, monkeypatch
):
    from argon2 import PasswordHasher

    from server import create_app
    from server.domain.accounts import create_token, create_user
    from server.domain.submissions import ensure_phases
    from server.models import Submission, Team, TeamMember

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
            "s3_bucket": "nowhere",
            "s3_endpoint": f"http://127.0.0.1:{_closed_port()}",
            "s3_access_key": "k",
            "s3_secret_key": "s",
            "PALIMPSEST_ENQUEUE": False,
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
    from server.demo import predictions

    data, name = predictions(TASK, "dev", home, 0.1, seed=1)
    r = app.test_client().post(
        f"/api/v1/tasks/{TASK}/submissions",
        headers={"Authorization": f"Bearer {token}"},
        data={"file": (io.BytesIO(data), name), "phase": "dev"},
        content_type="multipart/form-data",
    )
    assert r.status_code == 503, r.json
    err = r.json["error"]
    assert err["code"] == "store_unreachable" and "object store" in err["message"]
    assert "nothing was recorded" in err["message"]
    with Session(app.extensions["palimpsest.engine"]) as s:
        assert s.execute(select(Submission)).first() is None
    left = [p for p in (home / "uploads").rglob("*") if p.is_file()]
    assert left == []


def _cli(*args, env):
    from cli.main import main

    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


@pytest.mark.parametrize("kind", ["embedded", SERVICES])
def test_the_drill_from_the_data_directory_to_the_store_and_back(
    kind,
    request,
    tmp_path,
    demo_home,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """On SQLite and on PostgreSQL: a site on its data directory is backed up and restored into a
    fresh database and a site on the store; that site, its data directory's cache removed, is
    backed up from the store, verified, and restored into a fresh database and a site on its data
    directory alone; every run, judgment, gold version and published output is there."""
    from storekit import _build, _served, _state

    from server import objectstore
    from server.settings import Settings

    b = _make_backend(kind, request, tmp_path, demo_home, monkeypatch)
    _own_tasks(b, demo_home)
    for name in ("dev", "test"):
        set_phase(b, TASK, name, concurrent_limit=None, daily_limit=None)
    _build(b)
    before = _state(b.engine)
    secret = b.settings.secret_key
    r = _cli("backup", str(tmp_path / "local.tar"), "--json", env={"PALIMPSEST_SECRET_KEY": secret})
    assert r.exit_code == 0, r.output

    with contextlib.ExitStack() as dbs:

        def fresh_database(prefix, migrated) -> str | None:
            """A new, empty database of the drill's kind: None (SQLite in the data directory) or
            the URL of a new PostgreSQL database, dropped after the test."""
            if kind == "embedded":
                return None
            _name, url = dbs.enter_context(fresh_pg_database(prefix))
            if migrated:  # as `palimpsest db upgrade` leaves it: tables without rows
                build_schema(url)
            return url

        # into a site that keeps its files in the store
        s3 = _bucket(seaweedfs)
        on_store = tmp_path / "on-store"
        url1 = fresh_database("palimpsest_on_store_", migrated=True)
        env = {
            "PALIMPSEST_HOME": str(on_store),
            "DATABASE_URL": url1 or "",
            "PALIMPSEST_SECRET_KEY": secret,
        }
        r = _cli("restore", str(tmp_path / "local.tar"), "--json", env={**env, **s3})
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["checks"]["stored"] > 0
        site = Settings(
            home=on_store,
            database_url=url1,
            s3_bucket=s3["PALIMPSEST_S3_BUCKET"],
            s3_endpoint=s3["PALIMPSEST_S3_ENDPOINT"],
            s3_access_key=s3["PALIMPSEST_S3_ACCESS_KEY"],
            s3_secret_key=s3["PALIMPSEST_S3_SECRET_KEY"],
        )
        store = objectstore.store_for(site)
        keys = {k for k, _ in store.keys("")}
        assert any(k.startswith(f"tasks/{TASK}/gold-history/") for k in keys)
        assert all(f"uploads/{run[3]}" in keys for run in before["runs"])
        # the published pairwise matrices too: a web on an empty data directory serves them
        frozen = {n[len("files/") :] for n in _names(tmp_path / "local.tar")}
        frozen = {k for k in frozen if k.startswith("rankings/pairwise/")}
        assert frozen and frozen <= keys, (frozen, keys)
        # statistics computed on the store site: its derived caches in the store (stats/)
        from sqlalchemy import create_engine

        from server.boards import stats
        from server.models import Phase

        eng1 = create_engine(site.sqlalchemy_url())
        with Session(eng1) as s:
            dev = s.execute(
                select(Phase.id).where(Phase.task_id == TASK, Phase.name == "dev")
            ).scalar_one()
        eng1.dispose()
        site_env = {**env, **s3}
        with monkeypatch.context() as mp:
            for k, v in site_env.items():
                mp.setenv(k, v)
            stats.compute_board_stats(dev, settings=site)
        cached = [k for k, _ in store.keys("stats/")]
        assert any(k.startswith("stats/boards/") for k in cached), cached
        # the store is the truth: the data directory's cache of it may go
        shutil.rmtree(on_store / "uploads")
        shutil.rmtree(on_store / "tasks")
        shutil.rmtree(on_store / "rankings")
        shutil.rmtree(on_store / "stats", ignore_errors=True)
        r = _cli("backup", str(tmp_path / "store.tar"), "--json", env=site_env)
        assert r.exit_code == 0, r.output
        names = _names(tmp_path / "store.tar")
        # what the archive leaves out of the data directory it leaves out of the store too
        assert not [n for n in names if n.startswith("files/stats/")]
        assert frozen <= {n[len("files/") :] for n in names}
        r = _cli("backup", "verify", str(tmp_path / "store.tar"), "--json", env=site_env)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["checks"]["published_rankings"] == 2
        if kind == "embedded":
            _old_archives(tmp_path, tmp_path / "store.tar", cached[0], secret, site_env)

        # and back into a site on the data directory alone
        back = tmp_path / "back"
        url2 = fresh_database("palimpsest_back_", migrated=False)
        env2 = {
            "PALIMPSEST_HOME": str(back),
            "DATABASE_URL": url2 or "",
            "PALIMPSEST_SECRET_KEY": secret,
        }
        r = _cli("restore", str(tmp_path / "store.tar"), "--json", env=env2)
        assert r.exit_code == 0, r.output
        eng = create_engine(Settings(home=back, database_url=url2).sqlalchemy_url())
        try:
            after = _state(eng)
        finally:
            eng.dispose()
        for key in ("rankings", "judgments", "decisions", "campaigns", "gold", "runs"):
            assert after[key] == before[key], key
        for *_rest, key in after["runs"]:  # each run's upload is in the data directory
            assert (back / "uploads" / key).is_file(), key
        for key in frozen:  # and each published matrix
            assert (back / key).is_file(), key
        if kind == "embedded":
            monkeypatch.delenv("DATABASE_URL", raising=False)
        served = _served(back, url2, secret)
        source = _served(b.settings.home, b.settings.database_url, secret)
        assert served == source and all(st == 200 for st, _ in served.values())


def _names(archive) -> list[str]:
    import tarfile

    with tarfile.open(archive) as tar:
        return tar.getnames()


def _old_archives(tmp_path, archive, cached_key, secret, env):
    """An archive that holds the store's derived caches (as `backup` wrote them before it left
    them out of a store's archive too) verifies, its caches skipped and said so; one that holds
    the site's secret key is refused naming it, not as a path outside the data directory."""
    from backupkit import _with_member

    old = tmp_path / "old.tar"
    _with_member(archive, old, f"files/{cached_key}", b'{"cache": true}', secret)
    r = _cli("backup", "verify", str(old), "--json", env=env)
    assert r.exit_code == 0, r.output
    checks = json.loads(r.stdout)["checks"]
    assert checks["skipped"] == 1 and "derived caches" in checks["skipped_why"][0], checks
    evil = tmp_path / "evil.tar"
    _with_member(archive, evil, "files/secret_key", b"not the site's key", secret)
    r = _cli("backup", "verify", str(evil), "--json", env=env)
    assert r.exit_code == 1
    msg = json.loads(r.stdout)["error"]["message"]
    assert "secret key" in msg and "outside" not in msg, msg


@pytest.mark.slow
def test_a_worker_killed_mid_job_on_the_store_leaves_nothing_lost(
    request,
    tmp_path,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """The kill -9 of tests/test_reconciler.py with the files in the store and each worker on a
    data directory of its own, empty at its start: the second worker fetches what it needs and
    every run ends scored."""
    import time

    from backbone import all_final, get, kill_group, statuses, wait_for

    from server.jobs.reconciler import start_thread

    home = request.getfixturevalue("big_home")  # noqa: F811
    predictions = request.getfixturevalue("big_predictions")
    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    b = _make_backend("embedded", request, tmp_path, home, monkeypatch)
    r = _cli("store", "push", "--json", env={"PALIMPSEST_HOME": str(b.settings.home)})
    assert r.exit_code == 0, r.output
    team, user = make_team(b)
    ids = _load(b, team, user, predictions)

    def worker(name):
        other = tmp_path / name
        other.mkdir()
        wenv = child_env(b)
        wenv.update(env)
        wenv.update(
            PALIMPSEST_HOME=str(other),
            DATABASE_URL=b.settings.sqlalchemy_url(),
            REDIS_URL=b.embedded.url,
            PALIMPSEST_SECRET_KEY=b.settings.secret_key,
        )
        return worker_process(b, env=wenv, log=tmp_path / f"{name}.log")

    w = worker("w1")
    try:
        assert wait_for(lambda: get(b, ids[0]).status == "running", 90, every=0.05), (
            tmp_path / "w1.log"
        ).read_text()[-3000:]
        time.sleep(0.3)
    finally:
        kill_group(w)
    assert get(b, ids[0]).status == "running"
    w2 = worker("w2")
    t, stop = start_thread(b.settings, b.engine)
    try:
        assert wait_for(lambda: all_final(b, ids), 90), (
            statuses(b, ids),
            (tmp_path / "w2.log").read_text()[-3000:],
        )
    finally:
        kill_group(w2)
        stop.set()
        t.join(10)
    assert statuses(b, ids) == ["scored"] * len(ids)
    assert get(b, ids[0]).attempts == 2
    assert (tmp_path / "w2" / "tasks" / "swissgov-rsd" / "task.json").is_file()


def _token_user(app, email="reader@example.org"):
    from argon2 import PasswordHasher

    from server.domain import accounts
    from server.domain.accounts import create_token, create_user

    # a cheap hash for this one account; the module's own hasher is back for the next test
    real, accounts.hasher = (
        accounts.hasher,
        PasswordHasher(time_cost=1, memory_cost=64, parallelism=1),
    )
    try:
        with Session(app.extensions["palimpsest.engine"], expire_on_commit=False) as s:
            u = create_user(s, email=email, password="correct horse")
            s.commit()
            _, token = create_token(s, user=u)
            s.commit()
    finally:
        accounts.hasher = real
    return token


def _fetch(url) -> tuple[int, dict, bytes]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


def _members(data: bytes) -> dict[str, bytes]:
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def test_released_public_downloads_redirect_to_a_presigned_get_and_gold_never_does(
    stored, tmp_path, monkeypatch
):
    """On a site with a store, a released download (the web's zip of one area, the API's zip of
    every released one, so the CLI's `download`) is a 302 to a short-lived presigned GET of a zip
    in the store, with the same files the web app would have sent; a download that would expose
    hidden gold is refused before any zip is made, and gold never gets a URL. Without a store
    the same requests answer 200 with the zip, as before."""
    import threading
    from urllib.parse import urlsplit

    from werkzeug.serving import WSGIRequestHandler, make_server

    from server import create_app, objectstore
    from server.web import downloads

    b = stored
    home = b.settings.home
    public = home / "tasks" / TASK / "public"
    monkeypatch.setenv("PALIMPSEST_S3_URL_SECONDS", "60")
    app = create_app({"home": home, "env": "testing", "PALIMPSEST_ENQUEUE": False})
    token = _token_user(app)
    auth = {"Authorization": f"Bearer {token}"}
    store = objectstore.store_for(app.extensions["palimpsest.settings"])
    c = app.test_client()

    # the web's zip of one area
    r = c.get(f"/tasks/{TASK}/data/dev.zip")
    assert r.status_code == 302, r.data[:300]
    assert r.headers["Cache-Control"] == "no-store"
    url = r.headers["Location"]
    parts = urlsplit(url)
    assert parts.path.startswith(f"/{store.bucket}/downloads/{TASK}/") and "X-Amz-Expires=60" in (
        parts.query
    )
    status, headers, data = _fetch(url)
    assert status == 200 and f'filename="{TASK}-dev.zip"' in headers["Content-Disposition"]
    files = {
        f"{TASK}-dev/{p.relative_to(public / 'dev').as_posix()}": p.read_bytes()
        for p in (public / "dev").rglob("*")
        if p.is_file()
    }
    assert _members(data) == files and files
    # asked again: the same object, not put twice
    again = c.get(f"/tasks/{TASK}/data/dev.zip").headers["Location"]
    assert urlsplit(again).path == parts.path
    assert len(list(store.keys(f"downloads/{TASK}/"))) == 1

    # the API's zip of every released area, through the CLI (requests follows the redirect)
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=auth)
    assert r.status_code == 302
    _, _, api_zip = _fetch(r.headers["Location"])

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        got = tmp_path / "downloaded"
        r = _cli(
            "download",
            TASK,
            "--home",
            str(got),
            env={
                "PALIMPSEST_SERVER": f"http://127.0.0.1:{srv.server_port}",
                "PALIMPSEST_TOKEN": token,
            },
        )
    finally:
        srv.shutdown()
    assert r.exit_code == 0, r.output
    for name, body in _members(api_zip).items():
        if name != "task.json":
            assert (got / "tasks" / TASK / name).read_bytes() == body, name
            assert (public.parent / name).read_bytes() == body

    # the same requests on the data directory alone: the zip itself, the same files
    local = create_app(
        {"home": home, "env": "testing", "s3_bucket": None, "PALIMPSEST_ENQUEUE": False}
    )
    lc = local.test_client()
    r = lc.get(f"/tasks/{TASK}/data/dev.zip")
    assert r.status_code == 200 and r.mimetype == "application/zip"
    assert _members(r.data) == files
    r = lc.get(f"/api/v1/tasks/{TASK}/download", headers=auth)
    assert r.status_code == 200 and _members(r.data) == _members(api_zip)

    # a store participants reach by another name: the URL is signed for that one
    public_endpoint = store.endpoint.replace("127.0.0.1", "localhost")
    monkeypatch.setenv("PALIMPSEST_S3_PUBLIC_ENDPOINT", public_endpoint)
    outside = create_app({"home": home, "env": "testing", "PALIMPSEST_ENQUEUE": False})
    r = outside.test_client().get(f"/tasks/{TASK}/data/dev.zip")
    assert r.status_code == 302 and r.headers["Location"].startswith(public_endpoint + "/")
    assert _members(_fetch(r.headers["Location"])[2]) == files
    monkeypatch.delenv("PALIMPSEST_S3_PUBLIC_ENDPOINT")

    # the release rule comes first: an area not released yet gets no URL
    from datetime import datetime, timedelta

    later = datetime.now() + timedelta(days=3)
    set_phase(b, TASK, "test", inputs_at=later, opens_at=later)
    r = c.get(f"/tasks/{TASK}/data/test.zip")
    assert r.status_code == 403 and "Location" not in r.headers
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=auth, query_string={"split": "test"})
    assert r.status_code == 403 and r.json["error"]["code"] == "not_released"
    set_phase(b, TASK, "test", inputs_at=None, opens_at=None)

    # gold never gets a URL: not signed, not zipped, not served when an area would expose it
    for key in (
        f"tasks/{TASK}/gold/test/gold.jsonl",
        f"tasks/{TASK}/gold-history/test/v1/gold.jsonl",
        f"tasks/{TASK}/task.json",
        f"uploads/{'0' * 2}/{'0' * 64}.csv",
        f"downloads/{TASK}/{'0' * 64}/../../tasks/{TASK}/gold/test/gold.jsonl",
    ):
        with pytest.raises(PermissionError):
            store.presigned_get(key)
    gold = home / "tasks" / TASK / "gold" / "test" / "gold.jsonl"
    with app.app_context(), pytest.raises(PermissionError):
        downloads.stored_zip_url(
            app.extensions["palimpsest.settings"], TASK, "x.zip", [("gold.jsonl", gold)]
        )
    shutil.copy(gold, public / "test" / "gold.jsonl")  # an organizer's mistake
    import os

    manifest = home / "tasks" / TASK / "task.json"  # the exposure is cached until an import
    st = manifest.stat()
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    r = c.get(f"/tasks/{TASK}/data/test.zip")
    assert r.status_code == 409 and "Location" not in r.headers and b"hidden test" in r.data
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=auth)
    assert r.status_code == 409 and r.json["error"]["code"] == "exposes_hidden_gold"
    assert len(list(store.keys(f"downloads/{TASK}/"))) == 2  # the dev zip and the API's


def test_a_task_import_puts_its_files_into_the_store(tmp_path, monkeypatch, seaweedfs):  # noqa: F811
    """`palimpsest tasks import` on a site with a store puts the task's files into it (no
    `store push`): a worker's empty data directory gets the task from the store alone and scores
    a file there as the importing machine does. A store that does not answer leaves the import
    standing in the data directory and says to push later."""
    from scorer import score_validated, validate_file
    from server import objectstore
    from server.demo import predictions
    from server.settings import Settings
    from tasks import get_task
    from tasks.base import resolve

    s3 = _bucket(seaweedfs)
    for k in s3:
        monkeypatch.delenv(k, raising=False)
    release = resolve(get_task(TASK).demo.release)(tmp_path / "release", 40)
    home = tmp_path / "site"
    r = _cli(
        "tasks",
        "import",
        TASK,
        "--from",
        str(release["source"]),
        "--fold",
        "1",
        env={**s3, "PALIMPSEST_HOME": str(home)},
    )
    assert r.exit_code == 0, r.output
    assert f"file(s) of {TASK} into the object store {s3['PALIMPSEST_S3_BUCKET']}" in r.output

    def site(h):
        return Settings(
            home=h,
            s3_bucket=s3["PALIMPSEST_S3_BUCKET"],
            s3_endpoint=s3["PALIMPSEST_S3_ENDPOINT"],
            s3_access_key=s3["PALIMPSEST_S3_ACCESS_KEY"],
            s3_secret_key=s3["PALIMPSEST_S3_SECRET_KEY"],
        )

    store = objectstore.store_for(site(home))
    local = {
        p.relative_to(home).as_posix(): p.stat().st_size
        for p in (home / "tasks" / TASK).rglob("*")
        if p.is_file() and not any(x.startswith(".") for x in p.relative_to(home).parts)
    }
    assert dict(store.keys(f"tasks/{TASK}/")) == local
    assert any(k.startswith(f"tasks/{TASK}/gold/") for k in local)

    # a worker's machine: an empty data directory and the store
    worker = tmp_path / "worker"
    assert objectstore.ensure_task(site(worker), TASK)
    data, name = predictions(TASK, "dev", home, 0.2, seed=4)
    f = tmp_path / name
    f.write_bytes(data)
    scores = [
        score_validated(validate_file(TASK, f, "dev", h, site(h).limits()), h)
        for h in (home, worker)
    ]
    assert scores[0] == scores[1] and scores[0]

    # the store down: the import stands, the message says what to run later
    down = {**s3, "PALIMPSEST_S3_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    other = tmp_path / "site-2"
    r = _cli(
        "tasks",
        "import",
        TASK,
        "--from",
        str(release["source"]),
        env={**down, "PALIMPSEST_HOME": str(other)},
    )
    assert r.exit_code != 0
    assert "not into the object store" in r.output and "palimpsest store push" in r.output
    assert (other / "tasks" / TASK / "task.json").is_file()


def test_a_web_and_two_workers_on_their_own_data_directories_share_the_statistics(stored, tmp_path):
    """The layout beyond one machine: the web on its data directory, a scoring worker and a
    statistics worker each on an empty one of their own, sharing only the database, Redis and the
    store. The board's statistics the statistics worker computes reach the web's pages (board,
    JSON, CSV and the significance page), and the statistics worker reads the units the scoring
    worker kept from the store rather than re-parsing the uploads."""
    from server import create_app
    from server.boards import stats
    from server.models import Submission

    b = stored
    subs = []
    for noise in (0.05, 0.2, 0.45):
        team, user = make_team(b)
        subs.append(submit(b, team, user, TASK, "dev", noise=noise))
    homes = {}

    def work(name, queue):
        home = homes[name] = tmp_path / f"{name}-home"
        home.mkdir(exist_ok=True)
        env = _machine_env(b, home)
        log = tmp_path / f"{name}.log"
        proc = worker_process(b, "--queue", queue, "--burst", env=env, log=log)
        assert proc.wait(180) == 0, log.read_text()[-3000:]

    for name, queue in (("scorer", "scoring"), ("statistician", "stats")):
        work(name, queue)
    with Session(b.engine) as s:
        assert {s.get(Submission, x.id).status for x in subs} == {"scored"}
        phase_id = s.get(Submission, subs[0].id).phase_id
    # each machine wrote only into its own directory and the store
    web_stats = stats.stats_dir(b.settings.home)
    assert not (web_stats / "boards").exists()
    assert any((stats.stats_dir(homes["scorer"]) / "units").iterdir())
    assert not (stats.stats_dir(homes["scorer"]) / "boards").exists()
    assert len(list((stats.stats_dir(homes["statistician"]) / "boards").iterdir())) == 1
    store = objectstore_for(b)
    assert any(k.startswith(f"stats/boards/{phase_id}-") for k, _ in store.keys("stats/boards/"))
    with pytest.raises(PermissionError):  # a statistics file is never handed out by URL
        store.presigned_get(next(k for k, _ in store.keys("stats/boards/")))
    # the statistician fetched the scorer's per-unit arrays instead of re-parsing the uploads
    assert not (homes["statistician"] / "uploads").exists()

    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    c = app.test_client()
    data = c.get(f"/tasks/{TASK}/leaderboard.json?phase=dev").get_json()
    assert data["statistics"]["status"] == "ready", data["statistics"]
    assert len(data["rows"]) == 3
    for r in data["rows"]:
        lo, hi = r["ci"]
        assert lo <= r["metrics"]["all/f1"] <= hi and r["rank_range"] and r["cluster"]
    assert (web_stats / "boards").is_dir()  # kept here: the store is asked once per version
    html = c.get(f"/tasks/{TASK}/leaderboard?phase=dev").get_data(as_text=True)
    assert "being computed" not in html and "95 % paired bootstrap" in html
    csv = c.get(f"/tasks/{TASK}/leaderboard.csv?phase=dev").get_data(as_text=True)
    assert csv.splitlines()[0].endswith("ci_lo,ci_hi,rank_best,rank_worst,cluster")
    assert all(line.split(",")[-1].isdigit() for line in csv.splitlines()[1:])
    sig = c.get(f"/tasks/{TASK}/leaderboard/significance?phase=dev").get_data(as_text=True)
    assert "Holm-corrected" in sig and "being computed" not in sig

    # the full pairwise matrix: the web's request asks for it, the statistics worker writes it
    # into its own directory and the store, and the web serves the store's copy
    asking = create_app({"env": "testing"}).test_client()
    csv_url = f"/tasks/{TASK}/leaderboard/significance.csv?phase=dev"
    assert asking.get(csv_url).status_code == 202
    work("statistician", "stats")
    assert not list((web_stats / "pairwise").glob("*.csv.gz"))
    got = c.get(csv_url)
    assert got.status_code == 200 and got.data.startswith(b"a,team_a,b,team_b,p,p_holm\n")
    made = list((stats.stats_dir(homes["statistician"]) / "pairwise").glob("*.csv.gz"))
    assert len(made) == 1 and gzip.decompress(made[0].read_bytes()) == got.data
    assert len(got.data.splitlines()) == 1 + 3  # three ranked rows: three pairs
    assert list((web_stats / "pairwise").glob("*.csv.gz"))  # kept here once fetched


def objectstore_for(b):
    from server import objectstore

    return objectstore.store_for(b.settings)


def test_a_web_on_a_data_directory_of_its_own_knows_the_builtin_tasks(stored, tmp_path):
    """A built-in task imported on another machine (its files pushed to the store; no row says
    so): a web process on an empty data directory of its own takes uploads for it, fetches it
    again when the store's copy is newer than its own, and keeps a copy newer than the store's
    (imported there, not pushed yet)."""
    import os

    from server import create_app, objectstore
    from server.demo import predictions
    from server.domain.accounts import create_token

    b = stored
    store = objectstore.store_for(b.settings)
    key = f"tasks/{TASK}/task.json"
    other = tmp_path / "web-b"
    other.mkdir()
    app = create_app(
        {
            "env": "testing",
            "home": other,
            "database_url": b.settings.sqlalchemy_url(),
            "PALIMPSEST_ENQUEUE": False,
        }
    )
    team, user = make_team(b)
    with Session(b.engine) as s:
        _, token = create_token(s, user=s.merge(user))
        s.commit()
    data, name = predictions(TASK, "dev", b.settings.home, 0.1, seed=7)
    c = app.test_client()
    rv = c.post(
        f"/api/v1/tasks/{TASK}/submissions",
        headers={"Authorization": f"Bearer {token}"},
        data={"phase": "dev", "file": (io.BytesIO(data), name)},
    )
    assert rv.status_code == 201, rv.get_json()
    mine = other / "tasks" / TASK / "task.json"
    assert mine.read_bytes() == store.open(key).read()

    def notes():
        sync = app.extensions["palimpsest.task_sync"]
        sync.next_look = sync.next_builtin = 0  # (the next request looks)
        got = c.get(f"/api/v1/tasks/{TASK}", headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 200, got.get_json()
        return json.loads(mine.read_bytes()).get("notes")

    # imported again elsewhere: the store's copy is newer than this directory's
    manifest = json.loads(mine.read_bytes())
    time.sleep(1.1)  # (the store's times are to the second)
    again = tmp_path / "task.json"
    again.write_text(json.dumps({**manifest, "notes": ["imported again elsewhere"]}))
    store.put_file(key, again)
    assert notes() == ["imported again elsewhere"]
    # a copy of this directory's own, newer than the store's: kept
    mine.write_text(json.dumps({**manifest, "notes": ["imported here"]}))
    later = time.time() + 120
    os.utime(mine, (later, later))
    app.extensions["palimpsest.task_sync"].builtin_seen.clear()
    assert notes() == ["imported here"]


@pytest.mark.parametrize("kind", ["embedded", SERVICES])
def test_retention_empties_the_store_and_the_worker_machines_too(
    kind,
    request,
    tmp_path,
    demo_home,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """On a site with a store, an invalid upload is gone from every place once its retention period
    ends: the worker (a data directory of its own) forgets its copy as soon as it finds the file
    invalid, and the reconciler's pass deletes it from the store and the web's directory. The zips
    of public files a task update replaced go after a grace; the newest stays. On SQLite and on
    PostgreSQL (the reconciler's pass is production's)."""
    from datetime import timedelta

    from sqlalchemy import update

    from server import objectstore
    from server.jobs.reconciler import reconcile
    from server.models import Submission, utcnow

    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    b = _make_backend(kind, request, tmp_path, demo_home, monkeypatch)
    _own_tasks(b, demo_home)
    r = _cli("store", "push", "--json", env={"PALIMPSEST_HOME": str(b.settings.home)})
    assert r.exit_code == 0, r.output
    store = objectstore.store_for(b.settings)
    team, user = make_team(b)
    bad = submit(b, team, user, TASK, "dev", data=b'{"nope": 1}\n')
    good = submit(b, team, user, TASK, "dev", noise=0.1)
    key = f"uploads/{bad.storage_key}"
    assert store.exists(key) and (b.settings.home / key).is_file()

    other = tmp_path / "worker-home"  # the worker's machine
    other.mkdir()
    wenv = child_env(b)
    wenv.update(env)
    wenv.update(
        PALIMPSEST_HOME=str(other),
        DATABASE_URL=b.settings.sqlalchemy_url(),
        REDIS_URL=b.embedded.url if b.embedded else b.settings.redis_url,
        PALIMPSEST_SECRET_KEY=b.settings.secret_key,
    )
    proc = worker_process(b, "--queue", "scoring", "--burst", env=wenv, log=tmp_path / "w.log")
    proc.wait(120)
    with Session(b.engine) as s:
        got = {i: s.get(Submission, i) for i in (bad.id, good.id)}
        assert got[bad.id].failure_kind == "invalid", (tmp_path / "w.log").read_text()[-3000:]
        assert got[good.id].status == "scored", (tmp_path / "w.log").read_text()[-3000:]
    assert not (other / key).exists()  # the worker kept no copy of the invalid file
    assert (other / f"uploads/{good.storage_key}").is_file()  # a valid one it may keep

    stats = reconcile(b.settings, b.engine, b.conn)
    assert stats["purged"] == 0 and store.exists(key)  # not old enough yet
    with b.session() as s:
        s.execute(
            update(Submission)
            .where(Submission.id == bad.id)
            .values(finished_at=utcnow() - timedelta(days=b.settings.invalid_retention_days + 1))
        )
        s.commit()
    stats = reconcile(b.settings, b.engine, b.conn)
    assert stats["purged"] == 1 and "errors" not in stats, stats
    assert not store.exists(key) and not (b.settings.home / key).exists()
    assert store.exists(f"uploads/{good.storage_key}")

    # download zips: one replaced by a newer one of the same name, another name alone
    zips = [f"downloads/{TASK}/{c * 64}/{TASK}-dev.zip" for c in "ab"]
    lone = f"downloads/{TASK}/{'c' * 64}/{TASK}-test.zip"
    f = tmp_path / "z.zip"
    f.write_bytes(b"PK")
    for k in (zips[0], lone, zips[1]):
        store.put_file(k, f)
        time.sleep(1.1)  # the store's clock counts seconds
    assert stats.get("stale_downloads") == 0  # within the grace then
    assert objectstore.purge_stale_downloads(b.settings) == 0  # replaced too recently
    assert objectstore.purge_stale_downloads(b.settings, grace=timedelta(0)) == 1
    assert [store.exists(k) for k in (*zips, lone)] == [False, True, True]


def test_a_web_on_a_data_directory_of_its_own_knows_every_bundle_task(
    request,
    tmp_path,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """A second web process on an empty data directory of its own, sharing only the database,
    Redis and the store with the one that installed a bundle's task: its pages and its API know
    the task at first use (its files fetched from the store, as a job's are), and a change of the
    task's texts made through the first is seen by the second within its next look."""
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request
    from pathlib import Path

    from livekit import _free_port

    from server.actions import bundles
    from server.actions import tasks as task_actions

    repo = Path(__file__).resolve().parent.parent
    example = repo / "examples" / "bundle-sts-latin"
    task = "sts-latin"
    from tasks import unregister_declared

    # the task this process declares here is forgotten after the test (the registry is the
    # process's: the next test of this worker would find the task declared)
    request.addfinalizer(lambda: unregister_declared(task))
    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    from server.models import Competition

    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=example, via="test", settings=b.settings)
        s.execute(select(Competition)).scalars().one().state = "visible"  # (not a draft)
        s.commit()
    other = tmp_path / "web-b"
    other.mkdir()
    wenv = child_env(b)
    wenv.update(env)
    wenv.update(
        PALIMPSEST_HOME=str(other),
        DATABASE_URL=b.settings.sqlalchemy_url(),
        REDIS_URL=b.embedded.url,
        PALIMPSEST_SECRET_KEY=b.settings.secret_key,
    )
    port = _free_port()
    code = (
        "from werkzeug.serving import run_simple\nfrom server import create_app\n"
        f"run_simple('127.0.0.1', {port}, create_app(), threaded=True)\n"
    )
    log = tmp_path / "web-b.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=wenv,
        cwd=repo,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    from livekit import _people

    ((_uid, token),) = _people(b.engine, 1, "reader")

    def get(path) -> tuple[int, bytes]:
        req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    try:
        deadline = time.monotonic() + 300  # (the app's imports: seconds, minutes on a busy box)
        while True:
            try:
                get("/api/v1/openapi.json")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
        status, body = get(f"/api/v1/tasks/{task}")
        assert status == 200 and body.startswith(b"{"), (status, body[:500])
        title = json.loads(body)["title"]
        status, page = get(f"/tasks/{task}")
        assert status == 200 and title.encode() in page, page[:300]
        assert (other / "tasks" / task / "declaration.json").is_file()
        # a change made through the first process: the second sees it at its next look
        with b.session() as s:
            task_actions.edit_texts(
                s=s,
                actor=None,
                task=task,
                texts={"title": "Latin similarity, retitled"},
                via="test",
                settings=b.settings,
            )
            s.commit()
        deadline = time.monotonic() + 15
        while json.loads(get(f"/api/v1/tasks/{task}")[1])["title"] != "Latin similarity, retitled":
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(20)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_the_upload_copies_in_redis_stop_at_their_hourly_budget(stored, monkeypatch):
    """However deep the queue, the copies put in Redis in one hour add up to at most the budget:
    past it, a run's file is left to the store (and its run is scored from there)."""
    from server.jobs import queue
    from server.jobs.dispatch import jobs
    from server.models import Submission

    b = stored
    team, user = make_team(b)
    runs = [submit(b, team, user, TASK, "dev", noise=n, enqueue=False) for n in (0.1, 0.2, 0.3)]
    size = max(r.size for r in runs)
    monkeypatch.setattr(queue, "UPLOAD_COPY_BUDGET", 2 * size)  # room for two files
    for r in runs:
        with b.session() as s:
            jobs(s).score(s, r.id, upload=r.storage_key)
    kept = [b.conn.get(queue.UPLOAD_COPY + r.storage_key) is not None for r in runs]
    assert kept == [True, True, False], kept
    spent = [int(b.conn.get(k)) for k in b.conn.keys(queue.UPLOAD_COPY_SPENT + "*")]
    assert (
        spent == [runs[0].size + runs[1].size]
        and 0
        < b.conn.ttl(b.conn.keys(queue.UPLOAD_COPY_SPENT + "*")[0])
        <= 2 * queue.UPLOAD_COPY_SECONDS
    )
    burst(b, ("scoring",))
    with Session(b.engine) as s:
        assert {s.get(Submission, r.id).status for r in runs} == {"scored"}


def test_a_small_uploads_copy_in_redis_scores_as_the_store_and_a_wrong_copy_is_not_used(
    stored, tmp_path
):
    """The intake puts a small file's bytes in Redis beside its job; a worker on an empty data
    directory takes them there (one round trip, deleted as read) instead of from the store, and
    its run scores as the same bytes scored from a data directory that holds the file. A copy
    whose bytes are not the ones its key's sha256 names is not used: the store's file is."""
    from server import objectstore
    from server.jobs import scoring
    from server.jobs.dispatch import jobs
    from server.jobs.queue import UPLOAD_COPY, UPLOAD_COPY_BYTES, _small_upload
    from server.models import Score, Submission
    from server.settings import Settings
    from server.storage import path_for

    b = stored
    team, user = make_team(b)
    fast = submit(b, team, user, TASK, "dev", noise=0.2, enqueue=False)
    with b.session() as s:  # as the intake queues it: with its storage key
        jobs(s).score(s, fast.id, upload=fast.storage_key)
    key = fast.storage_key
    local = path_for(b.settings.home, key).read_bytes()
    assert b.conn.get(UPLOAD_COPY + key) == local
    assert b.conn.ttl(UPLOAD_COPY + key) > 0  # it expires

    # the worker's machine: the database, Redis and the store, and a data directory of its own
    other = tmp_path / "worker-home"
    other.mkdir()
    env = _machine_env(b, other)
    proc = worker_process(b, "--queue", "scoring", "--burst", env=env, log=tmp_path / "w.log")
    proc.wait(120)
    assert b.conn.get(UPLOAD_COPY + key) is None  # taken
    assert (other / "uploads" / key).read_bytes() == local

    # the same bytes as another run, scored where the file is at hand (the web's directory)
    same = submit(b, team, user, TASK, "dev", data=local, enqueue=True)
    burst(b, ("scoring",))

    def scores_of(sid):
        with Session(b.engine) as s:
            assert s.get(Submission, sid).status == "scored", (tmp_path / "w.log").read_text()
            rows = s.execute(select(Score).where(Score.submission_id == sid)).scalars().all()
            return sorted(
                (r.part, json.dumps(r.result, sort_keys=True), r.gold_sha256) for r in rows
            )

    assert scores_of(fast.id) == scores_of(same.id) != []

    # a copy that is not the file's bytes (tampered with, or another file's) is not used
    other_run = submit(b, team, user, TASK, "dev", noise=0.4, enqueue=False)
    key2 = other_run.storage_key
    b.conn.set(UPLOAD_COPY + key2, local)  # bytes of another file under this key
    on_worker = Settings(
        home=tmp_path / "third-home",
        database_url=b.settings.sqlalchemy_url(),
        redis_url=b.embedded.url,
        **{k: getattr(b.settings, k) for k in Settings.model_fields if k.startswith("s3_")},
    )
    got = scoring.fetch_upload(on_worker, key2)
    assert got.read_bytes() == path_for(b.settings.home, key2).read_bytes() != local
    assert b.conn.get(UPLOAD_COPY + key2) is None  # dropped, not left for another try

    # only on a site with a store, only a small file
    assert _small_upload(b.settings, key2) is not None
    assert _small_upload(b.settings.model_copy(update={"s3_bucket": None}), key2) is None
    big = "ab/" + "ab" * 32 + ".jsonl"
    path_for(b.settings.home, big).parent.mkdir(parents=True, exist_ok=True)
    path_for(b.settings.home, big).write_bytes(b"x" * (UPLOAD_COPY_BYTES + 1))
    assert _small_upload(b.settings, big) is None
    assert objectstore.store_for(on_worker) is not None


def test_small_objects_go_by_signed_requests_of_their_own_and_a_refusal_is_boto3s(
    seaweedfs,  # noqa: F811
):
    """The store's small objects are read and written by requests signed here (SigV4, checked by
    the store), the same bytes boto3 reads and writes, whatever the key's characters; an object
    that is not there is FileNotFoundError, and a request the store refuses (a wrong secret) goes
    to boto3, which says what is wrong as before."""
    from server.exceptions import StoreUnreachable
    from server.objectstore import ObjectStore

    env = _bucket(seaweedfs)
    args = (env["PALIMPSEST_S3_BUCKET"], env["PALIMPSEST_S3_ENDPOINT"], "us-east-1")
    store = ObjectStore(*args, env["PALIMPSEST_S3_ACCESS_KEY"], env["PALIMPSEST_S3_SECRET_KEY"])
    assert store.direct is not None
    for key in ("a/b.json", "tasks/x y/ü+%=&;.json", "uploads/ab/abc~_-.jsonl"):
        body = f"bytes of {key}".encode()
        store.put_bytes(key, body)
        got = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
        assert got == body == store.direct.get(key) == store.get_bytes(key)
        assert store.size(key) == len(body) == store.direct.head(key)
        store.client.put_object(Bucket=store.bucket, Key=key, Body=body + b"!")  # boto3's PUT
        assert store.direct.get(key) == body + b"!"
    assert store.size("missing") is None and store.direct.get("missing") is None
    with pytest.raises(FileNotFoundError):
        store.get_bytes("missing")
    wrong = ObjectStore(*args, env["PALIMPSEST_S3_ACCESS_KEY"], "not the secret")
    assert wrong.direct.get("a/b.json") is None and not wrong.direct.put("a/b.json", b"x")
    with pytest.raises(StoreUnreachable):
        wrong.get_bytes("a/b.json")
    with pytest.raises(StoreUnreachable):
        wrong.put_bytes("a/b.json", b"x")
    assert store.get_bytes("a/b.json") == b"bytes of a/b.json!"  # nothing written


def test_keys_of_any_characters_are_signed_by_botocore_and_never_fall_back(
    seaweedfs,  # noqa: F811
):
    """Keys with spaces, non-ASCII letters, `+` and `=` are signed right by botocore's signer on
    the direct path: the store takes the PUT and answers the GET and the HEAD, and boto3's client
    sends nothing meanwhile (its every request is seen by its `before-send` event)."""
    from server.objectstore import ObjectStore

    env = _bucket(seaweedfs)
    store = ObjectStore(
        env["PALIMPSEST_S3_BUCKET"],
        env["PALIMPSEST_S3_ENDPOINT"],
        "us-east-1",
        env["PALIMPSEST_S3_ACCESS_KEY"],
        env["PALIMPSEST_S3_SECRET_KEY"],
    )
    sent = []
    store.client.meta.events.register("before-send.s3", lambda request, **_: sent.append(request))
    keys = ("tasks/a b/ünï cödé+1=2 .json", "uploads/é/x+y=z==", "a  b/+/=/ü ")
    for key in keys:
        body = f"bytes of {key}".encode()
        store.put_bytes(key, body)
        assert store.get_bytes(key) == body
        assert store.size(key) == len(body)
    assert sent == []  # not one request went through boto3
    store.client.head_object(Bucket=store.bucket, Key=keys[0])  # the event does see boto3's
    assert len(sent) == 1
    for key in keys:  # and boto3 reads the same bytes under the same keys
        got = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
        assert got == f"bytes of {key}".encode()


@pytest.mark.postgres
def test_twenty_parallel_uploads_on_postgresql_each_in_the_store_before_its_row(
    request,
    tmp_path,
    demo_home,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """The crowd on a site with a store, on PostgreSQL: 20 teams upload at once (a barrier), each
    file put into the store by the process's push threads (four, so most pushes wait for one)
    while its intake does its database work. Every upload is taken once, and every row's file is
    in the store byte for byte. (That a push that fails stops its commit is
    tests/test_upload_intake.py's.)"""
    import threading

    from seaweed import s3_client

    from server.actions import submissions as sub_actions
    from server.api_models import UploadFields
    from server.demo import predictions
    from server.models import Submission

    env = _bucket(seaweedfs)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    b = _make_backend("services", request, tmp_path, demo_home, monkeypatch)
    _own_tasks(b, demo_home)
    set_phase(b, TASK, "dev", concurrent_limit=None, daily_limit=None)
    assert b.settings.s3_bucket == env["PALIMPSEST_S3_BUCKET"]
    s3 = s3_client(env)
    n = 20
    people = [make_team(b) for _ in range(n)]
    files = [predictions(TASK, "dev", b.settings.home, 0.3, 100 + i)[0] for i in range(n)]
    barrier = threading.Barrier(n)
    made, errors = {}, []

    def one(i):
        team, user = people[i]
        barrier.wait()
        try:
            with b.session() as s:
                sub, duplicate = sub_actions.submit(
                    s=s,
                    user=s.merge(user),
                    task_id=TASK,
                    fields=UploadFields(phase="dev", method_name=f"m{i}"),
                    stream=io.BytesIO(files[i]),
                    filename="pred.jsonl",
                    settings=b.settings,
                )
                made[i] = (sub.id, duplicate)
        except Exception as e:  # noqa: BLE001 - every failure is reported below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(made) == list(range(n)) and not any(d for _, d in made.values())
    with Session(b.engine) as s:
        rows = {s.get(Submission, sid).storage_key for sid, _ in made.values()}
    assert len(rows) == n
    stored = {
        s3.get_object(Bucket=env["PALIMPSEST_S3_BUCKET"], Key=f"uploads/{key}")["Body"].read()
        for key in rows
    }
    assert stored == set(files)
