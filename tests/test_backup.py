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
import tarfile
import threading
import uuid

import pytest
from backbone import burst, make_team, set_phase, submit
from backupkit import _cli, _rewrite
from conftest import _make_backend, build_schema, fresh_pg_database, own_tasks
from seaweed import seaweedfs  # noqa: F401  (the fixture)
from sqlalchemy import func, select
from sqlmodel import Session
from storekit import PHASE, TASK, _build, _served, _state

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


@pytest.fixture(params=["embedded", SERVICES])
def site(request, tmp_path, demo_home, monkeypatch):
    b = _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    # the campaign writes a new gold version: this site's own copy of the tasks, not the session's
    own_tasks(b.settings.home)
    for name in ("dev", "test"):
        set_phase(b, TASK, name, concurrent_limit=None, daily_limit=None)
    return b


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

    _rewrite(archive, missing, drop)  # the manifest changed, its signature not: refused
    r = _cli("backup", "verify", str(missing), "--json")
    assert r.exit_code == 1
    assert "does not match its signature" in json.loads(r.stdout)["error"]["message"]
    _rewrite(archive, missing, drop, key=secret)  # signed again by one who holds the key
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

        _rewrite(archive, hidden, hide, key=secret)
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

    _rewrite(archive, newer, bump, key=secret)
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


# ----------------------------------------------------------------------------- hostile archives


def _census(b) -> dict:
    """The live site as counted: every table's rows and every file of its data directory (but
    the queue's, the process ids' and the database's own) with its sha256."""
    import hashlib

    from sqlalchemy import create_engine

    from server.backup.common import engine_counts

    eng = create_engine(b.settings.sqlalchemy_url())
    try:
        with eng.connect() as c:
            counts, revs = engine_counts(c)
    finally:
        eng.dispose()
    files = {}
    home = b.settings.home
    for p in sorted(home.rglob("*")):
        rel = p.relative_to(home)
        if rel.parts[0] in ("redis", "run", "stats") or rel.name.startswith("palimpsest.db"):
            continue
        if p.is_file():
            files[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {"tables": len(counts), "rows": counts, "revision": revs, "files": files}


def _make_admin_dump(b, data: bytes, tmp_path) -> bytes:
    """The archive's database with every user made a site administrator."""
    import sqlite3
    import subprocess

    if b.kind == "embedded":
        db = tmp_path / "admin.sqlite3"
        db.write_bytes(data)
        con = sqlite3.connect(db)
        con.execute("UPDATE user SET is_admin = 1")
        con.commit()
        con.close()
        return db.read_bytes()
    from sqlalchemy.engine import make_url

    from server.backup.common import pg_args

    dump = tmp_path / "in.pgdump"
    dump.write_bytes(data)
    with fresh_pg_database("palimpsest_edit_") as (name, url):
        args, env = pg_args(url)
        db = make_url(url).database
        run = ["pg_restore", "--no-owner", *args, "-d", db, str(dump)]
        subprocess.run(run, env=env, check=True)
        edit = ["psql", *args, "-d", db, "-c", 'UPDATE "user" SET is_admin = true']
        subprocess.run(edit, env=env, check=True)
        out = tmp_path / "out.pgdump"
        subprocess.run(["pg_dump", "-Fc", *args, "-f", str(out), db], env=env, check=True)
        return out.read_bytes()


def test_hostile_archives_leave_the_site_as_it_was(site, tmp_path, monkeypatch):
    """`restore --force` of a damaged or hostile archive over the live site refuses, naming what,
    and leaves its tables, rows and files as they were; an archive edited to make a participant
    an administrator, its checksums recomputed, is refused by verify and restore (its manifest
    no longer matches its signature); one signed with another key is refused unless that key is
    given; the genuine archive restores over the site."""
    import hashlib

    b = site
    secret = b.settings.secret_key
    monkeypatch.setenv("PALIMPSEST_SECRET_KEY", secret)
    for i, noise in enumerate((0.1, 0.3)):
        team, user = make_team(b, f"team-{i}")
        submit(b, team, user, TASK, PHASE, noise=noise)
    burst(b)
    out = tmp_path / "backups"
    out.mkdir()
    r = _cli("backup", str(out), "--json")
    assert r.exit_code == 0, r.output
    archive = json.loads(r.stdout)["archive"]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    dbm = next(n for n in names if n.startswith("database/"))
    upload = next(n for n in names if n.startswith("files/uploads/"))
    before = _census(b)
    assert before["tables"] > 20 and before["rows"]["submission"] == 2

    def refused(path, *words, command="restore"):
        args = ["restore", str(path), "--force"] if command == "restore" else ["backup", "verify"]
        if command != "restore":
            args.append(str(path))
        r = _cli(*args, "--json")
        assert r.exit_code == 1, r.output
        doc = json.loads(r.stdout)
        said = doc["error"]["message"] if "error" in doc else " / ".join(doc["problems"])
        assert "Traceback" not in r.output
        for w in words:
            assert w in said, said
        assert _census(b) == before, f"{path.name} changed the live site"
        return said

    def flip_db(name, data, m):
        return bytes([data[0], data[1] ^ 0xFF, *data[2:]]) if name == dbm else data

    flipped = tmp_path / "flipped.tar"
    _rewrite(archive, flipped, flip_db)
    said = refused(flipped, dbm, "sha256", "nothing restored")
    assert "as they were" in said

    def damage_db(name, data, m):  # a damaged dump with its checksum made to match, and signed
        if name != dbm:
            return data
        # SQLite: the schema's own page (page 1, after the file's 100-byte header), which every
        # database uses; zeroes in the middle of the file may land on a free page, which damages
        # nothing. A PostgreSQL dump: the middle.
        at = 100 if data.startswith(b"SQLite format 3\0") else len(data) // 2
        data = data[:at] + bytes(1000) + data[at + 1000 :]
        m["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        return data

    damaged = tmp_path / "damaged.tar"
    _rewrite(archive, damaged, damage_db, key=secret)
    refused(damaged, "as they were")

    def miscount(name, data, m):  # PostgreSQL: caught inside the swap's transaction, rolled back
        m["row_counts"]["team"] += 1
        return data

    miscounted = tmp_path / "miscounted.tar"
    _rewrite(archive, miscounted, miscount, key=secret)
    refused(miscounted, "table team", "as they were")

    def clash(name, data, m):  # a file and a folder of the same name
        if name == upload:
            m["members"][upload + "/inner"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
            }
        return data

    clashing = tmp_path / "clash.tar"
    _rewrite(archive, clashing, clash, key=secret)
    with tarfile.open(archive) as tar:
        payload = tar.extractfile(upload).read()
    with tarfile.open(clashing, "a") as tar:
        info = tarfile.TarInfo(upload + "/inner")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    refused(clashing, upload, "both a file and a folder")

    for evil, words in (("files/../../escape", "outside the data directory"),):

        def add(name, data, m, evil=evil):
            m["members"][evil] = {"sha256": hashlib.sha256(b"x").hexdigest(), "size": 1}
            return data

        hostile = tmp_path / "escape.tar"
        _rewrite(archive, hostile, add, key=secret)
        with tarfile.open(hostile, "a") as tar:
            info = tarfile.TarInfo(evil)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        refused(hostile, words)
        assert not (tmp_path / "escape").exists()

    truncated = tmp_path / "truncated.tar"
    data = open(archive, "rb").read()
    truncated.write_bytes(data[: len(data) * 2 // 3])
    refused(truncated, "truncated.tar")

    def make_admin(name, data, m):
        if name != dbm:
            return data
        data = _make_admin_dump(b, data, tmp_path)
        m["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        return data

    admin = tmp_path / "admin.tar"
    _rewrite(archive, admin, make_admin)
    refused(admin, "does not match its signature")
    refused(admin, "does not match its signature", command="verify")

    # another site's archive: refused under this site's key, accepted with that site's key
    other = tmp_path / "other-key.tar"
    _rewrite(archive, other, lambda n, d, m: d, key="another site's key")
    refused(other, "signed with another key", command="verify")
    keyfile = tmp_path / "key"
    keyfile.write_text("another site's key\n")
    r = _cli("backup", "verify", str(other), "--key-file", str(keyfile), "--json")
    assert r.exit_code == 0, r.output
    unsigned = tmp_path / "unsigned.tar"  # the same archive, its signature removed
    _rewrite(archive, unsigned, lambda n, d, m: (m.pop("signature", None), d)[1])
    refused(unsigned, "not signed", command="verify")
    r = _cli("backup", "verify", str(unsigned), "--trust-unsigned", "--json")
    assert r.exit_code != 0 and "format 2" in r.output, r.output  # made signed: stripped
    old = tmp_path / "format-1.tar"  # an archive of before signatures: read when trusted
    _rewrite(
        archive, old, lambda n, d, m: (m.pop("signature", None), m.update(format_version=1), d)[2]
    )
    refused(old, "not signed", command="verify")
    r = _cli("backup", "verify", str(old), "--trust-unsigned", "--json")
    assert r.exit_code == 0, r.output

    # the genuine archive restores over the live site; its old files are kept aside
    team, user = make_team(b, "after-backup")
    r = _cli("restore", str(archive), "--force", "--json")
    assert r.exit_code == 0, r.output
    after = _census(b)
    assert after["rows"] == before["rows"]
    assert {k: v for k, v in after["files"].items() if not k.startswith(".before-restore-")} == (
        before["files"]
    )
    assert any(k.startswith(".before-restore-") for k in after["files"])


# ----------------------------------------------------------------------------- a missing bucket


def test_a_missing_bucket_is_named_with_how_to_create_it(
    embedded_backend,
    seaweedfs,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """`restore` into a site whose bucket does not exist is refused before anything is written,
    naming the bucket and how to create it; `competitions create` on such a site says the same,
    never a traceback."""
    from seaweed import s3_env

    b = embedded_backend
    monkeypatch.setenv("PALIMPSEST_SECRET_KEY", b.settings.secret_key)
    team, user = make_team(b, "team-0")
    submit(b, team, user, TASK, "dev", noise=0.2, enqueue=False)
    out = tmp_path / "backups"
    out.mkdir()
    r = _cli("backup", str(out), "--json")
    assert r.exit_code == 0, r.output
    archive = json.loads(r.stdout)["archive"]
    target = tmp_path / "target"
    env = {
        **s3_env(seaweedfs),
        "PALIMPSEST_S3_BUCKET": "no-such-bucket",
        "PALIMPSEST_HOME": str(target),
        "DATABASE_URL": "",
    }
    r = _cli("restore", archive, "--json", env=env)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    said = json.loads(r.stdout)["error"]["message"]
    assert "no-such-bucket" in said and "does not exist" in said and "create it" in said, said
    assert "nothing restored" in said and "weed shell -master=" in said
    assert not (target / "uploads").exists() and not (target / "palimpsest.db").exists()

    from bundlekit import _bundle

    r = _cli("competitions", "create", str(_bundle(tmp_path, "v1")), "--json", env=env)
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    said = json.loads(r.stdout)["error"]["message"]
    assert "no bucket 'no-such-bucket'" in said and "create it" in said, said
