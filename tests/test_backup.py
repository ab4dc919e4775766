"""Backup and restore, tested as a drill: a site with competitions, teams, runs, an assessment
campaign whose close wrote a new gold version, and two published versions of a final ranking is
backed up while runs keep arriving, restored into a fresh database and data directory, and every
published output, run, judgment and gold version is there byte for byte; what was written after
the backup is not. `backup verify` passes on the archive and fails, saying what, on a tampered one;
`restore` refuses a non-empty target and an archive newer than the code. On the embedded default
(SQLite) and on PostgreSQL."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import threading
import uuid

import pytest
from backbone import make_team, set_phase, submit
from click.testing import CliRunner
from conftest import _make_backend, build_schema, fresh_pg_database
from sqlalchemy import func, select
from sqlmodel import Session
from storekit import PHASE, TASK, _build, _served, _state

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


def _cli(*args, env=None):
    from cli.main import main

    return CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False)


@pytest.fixture(params=["embedded", SERVICES])
def site(request, tmp_path, demo_home, monkeypatch):
    b = _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    # the campaign writes a new gold version: this site's own copy of the tasks, not the session's
    tasks = b.settings.home / "tasks"
    tasks.unlink()
    shutil.copytree(demo_home / "tasks", tasks)
    for name in ("dev", "test"):
        set_phase(b, TASK, name, concurrent_limit=None, daily_limit=None)
    return b


def _rewrite(src, dst, change):
    """A copy of an archive with `change(name, data, manifest) -> data or None (dropped)`."""
    with tarfile.open(src) as tin:
        m = json.loads(tin.extractfile("manifest.json").read())
        members = [(i, tin.extractfile(i).read()) for i in tin.getmembers() if i.isfile()]
    with tarfile.open(dst, "w") as tout:
        for info, data in members:
            if info.name == "manifest.json":
                continue
            data = change(info.name, data, m)
            if data is None:
                continue
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
        data = json.dumps(m).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tout.addfile(info, io.BytesIO(data))


def test_restore_drill(site, tmp_path, monkeypatch, request):
    from server.models import Submission, Team

    b = site
    built = _build(b)
    secret = b.settings.secret_key
    monkeypatch.setenv("PALIMPSEST_SECRET_KEY", secret)

    before = _state(b.engine)
    # runs keep arriving while the backup is taken
    stop = threading.Event()
    during = []

    def uploads():
        team, user = make_team(b, "late-team")
        k = 0
        while not stop.is_set() and k < 40:
            during.append(submit(b, team, user, TASK, "dev", noise=0.1 + k / 100, enqueue=False).id)
            k += 1

    t = threading.Thread(target=uploads)
    t.start()
    try:
        archive = tmp_path / "backups"
        archive.mkdir()
        r = _cli("backup", str(archive), "--json")
    finally:
        stop.set()
        t.join(60)
    assert r.exit_code == 0, r.output
    made = json.loads(r.stdout)
    archive = made["archive"]
    assert made["row_counts"]["rankingversion"] == 2 and made["row_counts"]["goldversion"] == 2
    assert "secret_key" in made["left_out"]["files"] and made["published_rankings"] == 2
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert not any(n.endswith("secret_key") for n in names)
    assert sum(n.startswith("files/tasks/tric-binary/gold-history/") for n in names) >= 1
    assert len(during) >= 1  # uploads went on during the backup
    before["runs_after_backup"] = _state(b.engine)["runs"]

    # a marker written after the backup; its noise lies outside the 0.10-0.49 of the uploads above,
    # since files are stored by their content's hash and one of those could have made the same file
    make_team(b, "marker-after-backup")
    marker_run = submit(b, *make_team(b, "marker-2"), TASK, "dev", noise=0.9, enqueue=False)
    marker_file = b.settings.home / "uploads" / marker_run.storage_key

    # restore into a fresh database and data directory
    target = tmp_path / "restored"
    env = {"PALIMPSEST_HOME": str(target), "PALIMPSEST_SECRET_KEY": secret}
    if b.kind == "embedded":
        env["DATABASE_URL"] = ""
        target_url = None
        restored = _restore_and_check(b, archive, target, env, target_url, before, marker_run)
    else:
        with fresh_pg_database("palimpsest_restore_") as (_name, target_url):
            env["DATABASE_URL"] = target_url
            build_schema(target_url)  # migrated but empty, as `palimpsest db upgrade` leaves it
            restored = _restore_and_check(b, archive, target, env, target_url, before, marker_run)
    assert marker_file.is_file() and not (target / "uploads" / marker_run.storage_key).exists()
    assert restored["rankings"] == before["rankings"]

    # verify passes on the archive, and fails, saying what, on tampered ones
    r = _cli("backup", "verify", archive, "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert v["ok"] and v["checks"]["published_rankings"] == 2 and not v["problems"]

    gold = next(n for n in names if n.startswith(f"files/tasks/{TASK}/gold/{PHASE}/"))
    bad = tmp_path / "tampered-gold.tar"

    def flip(name, data, m):
        if name == gold:
            return bytes([data[0] ^ 1]) + data[1:]
        return data

    _rewrite(archive, bad, flip)
    r = _cli("backup", "verify", str(bad), "--json")
    assert r.exit_code == 1
    problems = json.loads(r.stdout)["problems"]
    assert any(gold in p and "sha256" in p for p in problems), problems

    with Session(b.engine) as s:
        victim = s.get(Submission, built["runs"][0])
    upload = f"files/uploads/{victim.storage_key}"
    missing = tmp_path / "missing-upload.tar"

    def drop(name, data, m):
        if name == upload:
            m["members"].pop(name)
            return None
        return data

    _rewrite(archive, missing, drop)
    r = _cli("backup", "verify", str(missing), "--json")
    assert r.exit_code == 1
    problems = json.loads(r.stdout)["problems"]
    assert any(f"run {victim.id}: its upload" in p for p in problems), problems

    if b.kind == "embedded":
        # a database changed with its checksum recomputed: only the rebuilt ranking can tell
        hidden = tmp_path / "hidden-run.tar"

        def hide(name, data, m):
            if name != "database/palimpsest.sqlite3":
                return data
            import hashlib
            import sqlite3

            db = tmp_path / "tampered.sqlite3"
            db.write_bytes(data)
            con = sqlite3.connect(db)
            con.execute("UPDATE submission SET hidden = 1 WHERE id = ?", (built["runs"][0],))
            con.commit()
            con.close()
            data = db.read_bytes()
            m["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            return data

        _rewrite(archive, hidden, hide)
        r = _cli("backup", "verify", str(hidden), "--json")
        assert r.exit_code == 1
        problems = json.loads(r.stdout)["problems"]
        assert any(
            f"{TASK}/{PHASE} version 2: rebuilt from the restored data it differs" in p
            for p in problems
        ), problems

    # an archive newer than the code is refused; so is a missing manifest's archive
    newer = tmp_path / "newer.tar"

    def bump(name, data, m):
        m["alembic_revision"] = ["ffffffffffff"]
        return data

    _rewrite(archive, newer, bump)
    r = _cli("restore", str(newer), "--json", env={**env, "PALIMPSEST_HOME": str(tmp_path / "n")})
    assert r.exit_code == 1 and "newer than the code" in json.loads(r.stdout)["error"]["message"]
    with Session(b.engine) as s:  # the source site is untouched by all of it
        assert (
            s.execute(select(func.count(Team.id))).scalar_one() == len(before["teams"]) + 3
        )  # late, marker, marker-2


def _restore_and_check(b, archive, target, env, target_url, before, marker_run) -> dict:
    from sqlalchemy import create_engine

    from server.settings import Settings

    r = _cli("restore", archive, "--json", env=env)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["problems"] == []
    url = Settings(home=target, database_url=target_url).sqlalchemy_url()
    eng = create_engine(url)
    try:
        after = _state(eng)
    finally:
        eng.dispose()
    # every run, judgment, gold version and published output present, byte for byte
    for key in ("rankings", "judgments", "decisions", "campaigns", "gold"):
        assert after[key] == before[key], key
    # the runs committed before the backup began are there, and none that was not committed
    assert set(before["runs"]) <= set(after["runs"]) <= set(before["runs_after_backup"])
    ids_after = {r[0] for r in after["runs"]}
    for rid, *_rest, key in after["runs"]:  # ...and each with its upload
        assert (target / "uploads" / key).is_file(), rid
    assert marker_run.id not in ids_after
    assert (
        "marker-after-backup" not in after["teams"]
        and "marker-after-backup" in _state(b.engine)["teams"]
    )
    served = _served(target, target_url, env["PALIMPSEST_SECRET_KEY"])
    source = _served(b.settings.home, b.settings.database_url, env["PALIMPSEST_SECRET_KEY"])
    for k, (status, body) in served.items():
        assert status == 200 and body == source[k][1], k
    # a second restore into the now non-empty target is refused without --force
    r = _cli("restore", archive, "--json", env=env)
    assert r.exit_code == 1 and "not empty" in json.loads(r.stdout)["error"]["message"]
    assert uuid  # (names for scratch databases come from the module under test)
    return after
