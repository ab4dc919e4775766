"""`palimpsest restore OUT`: into an empty site (or, with --force, one moved aside), migrations run
forward, every checksum and reference checked."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from server import migrate, objectstore
from server.backup.archive import check_revision, read_manifest
from server.backup.common import (
    CHUNK,
    BackupError,
    Report,
    TargetNotEmpty,
    engine_counts,
    gold_problems,
    pg_args,
    run_tool,
    sqlite_path,
    tool_path,
)
from server.models import Submission
from server.settings import SECRET_FILE, Settings
from server.storage import path_for

# ----------------------------------------------------------------------------- restore


def target_contents(settings: Settings) -> list[str]:
    """What makes a target non-empty: rows in the database (beyond the phases every site has),
    files in the data directory's areas."""
    found = []
    url = settings.sqlalchemy_url()
    sqlite = sqlite_path(url)
    if sqlite is None or sqlite.exists():
        eng = create_engine(url)
        try:
            with eng.connect() as c:
                counts, _ = engine_counts(c)
        except Exception as e:  # noqa: BLE001 - an unreachable database is a refusal too
            raise BackupError(f"the database {migrate.shown(url)} is not reachable: {e}") from None
        finally:
            eng.dispose()
        full = {t: n for t, n in counts.items() if n and t not in ("alembic_version", "phase")}
        if full:
            found.append(
                f"the database {migrate.shown(url)} holds rows ("
                + ", ".join(f"{t}: {n}" for t, n in sorted(full.items())[:6])
                + (", ..." if len(full) > 6 else "")
                + ")"
            )
    home = settings.home
    for area in ("uploads", "tasks", "baselines"):
        p = home / area
        if p.exists() and any(x.is_file() for x in p.rglob("*")):
            found.append(f"{p} holds files")
    store = objectstore.store_for(settings)
    if store is not None:
        for area in ("uploads/", "tasks/", "baselines/"):
            if next(iter(store.keys(area)), None) is not None:
                found.append(f"the object store {store!r} holds {area}")
    return found


def restore(settings: Settings, archive: Path, *, force: bool = False) -> Report:
    """Restore `archive` into the site `settings` name (its database and data directory):
    refused when the target is not empty (unless `force`) or the archive is newer than the code;
    the database brought to the migrations' head after. The report lists every mismatch."""
    archive = Path(archive)
    rep = Report(str(archive))
    t0 = time.monotonic()
    m = read_manifest(archive)
    check_revision(m)
    url = settings.sqlalchemy_url()
    kind = "sqlite" if sqlite_path(url) is not None else "postgresql"
    if m["database"]["kind"] != kind:
        raise BackupError(
            f"the archive holds a {m['database']['kind']} database; this site's is {kind} "
            f"({migrate.shown(url)}): restore into a site of the same kind"
        )
    busy = target_contents(settings)
    if busy and not force:
        raise TargetNotEmpty(
            "the target is not empty: "
            + "; ".join(busy)
            + " (restore into an empty database and data directory, or pass --force to replace "
            "them: the data directory's old files are moved aside, never deleted)"
        )
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    if busy:
        _move_aside(home, url)
    elif kind == "postgresql":
        _drop_tables(url)  # an empty schema (tables without rows) would collide with the dump's
    with tarfile.open(archive, "r:") as tar:
        # the files first, checked against the manifest as they are written
        rep.problems += _extract_files(tar, m, home)
        rep.timings["files"] = time.monotonic() - t0
        t1 = time.monotonic()
        rep.problems += _restore_database(tar, m, url, home)
        rep.timings["database"] = time.monotonic() - t1
    if objectstore.store_for(settings) is not None:  # the site keeps its files in a store
        t3 = time.monotonic()
        rep.checks["stored"] = sum(
            objectstore.push_tree(settings, area) for area in ("uploads", "tasks", "baselines")
        )
        rep.timings["store"] = time.monotonic() - t3
    # the counts as archived, before any migration
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            counts, revs = engine_counts(c)
    finally:
        eng.dispose()
    want = m.get("row_counts", {})
    for t, n in sorted(want.items()):
        if counts.get(t) != n:
            rep.problems.append(f"table {t}: {counts.get(t)} rows restored, {n} in the manifest")
    if list(revs) != list(m.get("alembic_revision", [])):
        rep.problems.append(
            f"revision {', '.join(revs)} restored, {', '.join(m.get('alembic_revision', []))} "
            "in the manifest"
        )
    rep.checks["row_counts"] = sum(want.values())
    rep.checks["tables"] = len(want)
    rep.checks["files"] = sum(1 for k in m["members"] if k.startswith("files/"))
    # forward to the code's revision
    t2 = time.monotonic()
    migrate.upgrade(settings)
    rep.timings["migrate"] = time.monotonic() - t2
    rep.checks["revision"] = list(migrate.current(settings))
    eng = create_engine(url)
    try:
        rep.problems += _reference_problems(eng, home)
    finally:
        eng.dispose()
    rep.timings["total"] = time.monotonic() - t0
    return rep


def _move_aside(home: Path, url: str) -> Path:
    """--force: the target's files go to `<home>/.before-restore-<time>/` (never deleted); its
    SQLite database too; a PostgreSQL database's tables are dropped."""
    aside = home / f".before-restore-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    aside.mkdir()
    for p in list(home.iterdir()):
        if p.name.startswith(".") or p.name in (SECRET_FILE, "redis", "run"):
            continue
        os.replace(p, aside / p.name)
    sqlite = sqlite_path(url)
    if sqlite is not None:
        for x in ("", "-wal", "-shm", "-journal"):
            q = Path(str(sqlite) + x)
            if q.exists():
                os.replace(q, aside / q.name)
    else:
        _drop_tables(url)
    return aside


def _drop_tables(url: str) -> None:
    """Drop every table of a PostgreSQL target (one refused as non-empty only holds what a fresh
    `db upgrade` or `serve` writes, or --force was given), so that pg_restore starts clean."""
    eng = create_engine(url)
    try:
        with eng.begin() as c:
            for t in inspect(c).get_table_names():
                c.execute(text(f'DROP TABLE IF EXISTS "{t}" CASCADE'))
    finally:
        eng.dispose()


def _safe_rel(name: str) -> str | None:
    rel = name[len("files/") :]
    p = Path(rel)
    if not rel or p.is_absolute() or ".." in p.parts:
        return None
    return rel


def _extract_files(tar: tarfile.TarFile, m: dict, home: Path) -> list[str]:
    problems = []
    listed = {k: v for k, v in m["members"].items() if k.startswith("files/")}
    seen = set()
    for info in tar:
        if not info.name.startswith("files/"):
            continue
        rel = _safe_rel(info.name)
        if rel is None or not info.isfile():
            problems.append(f"{info.name}: not a plain file inside the data directory (skipped)")
            continue
        want = listed.get(info.name)
        if want is None:
            problems.append(f"{info.name}: in the archive but not in its manifest (skipped)")
            continue
        seen.add(info.name)
        dest = home / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".restore-")
        h = hashlib.sha256()
        src = tar.extractfile(info)
        with os.fdopen(fd, "wb") as f:
            while chunk := src.read(CHUNK):
                h.update(chunk)
                f.write(chunk)
        os.replace(tmp, dest)
        if h.hexdigest() != want["sha256"]:
            problems.append(
                f"{info.name}: its sha256 is {h.hexdigest()[:12]}..., the manifest says "
                f"{want['sha256'][:12]}... (the file was changed after the backup)"
            )
    for name in sorted(set(listed) - seen):
        problems.append(f"{name}: in the manifest but missing from the archive")
    return problems


def _restore_database(tar: tarfile.TarFile, m: dict, url: str, home: Path) -> list[str]:
    db = m["database"]
    try:
        info = tar.getmember(db["member"])
    except KeyError:
        raise BackupError(f"the archive has no {db['member']} (the database)") from None
    want = m["members"][db["member"]]["sha256"]
    scratch = Path(tempfile.mkdtemp(prefix=".restore-db-", dir=home))
    try:
        dump = scratch / Path(db["member"]).name
        h = hashlib.sha256()
        with tar.extractfile(info) as src, open(dump, "wb") as f:
            while chunk := src.read(CHUNK):
                h.update(chunk)
                f.write(chunk)
        if h.hexdigest() != want:
            raise BackupError(
                f"{db['member']}: its sha256 does not match the manifest (the database copy was "
                "changed after the backup); nothing restored into the database"
            )
        if db["kind"] == "sqlite":
            dest = sqlite_path(url)
            dest.parent.mkdir(parents=True, exist_ok=True)
            for x in ("-wal", "-shm", "-journal"):
                Path(str(dest) + x).unlink(missing_ok=True)
            os.replace(dump, dest)
        else:
            args, env = pg_args(url)
            run_tool(
                [
                    tool_path("pg_restore"),
                    "--no-owner",
                    "--no-privileges",
                    "--exit-on-error",
                    "--single-transaction",
                    *args,
                    "-d",
                    make_url(url).database,
                    str(dump),
                ],
                env,
                "pg_restore",
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return []


def _reference_problems(engine, home: Path) -> list[str]:
    """Files the restored database names but the data directory lacks: every run's upload, the
    gold versions' files."""
    out = []
    with Session(engine) as s:
        for sid, key in s.execute(
            select(Submission.id, Submission.storage_key).order_by(Submission.id)
        ):
            if key and not path_for(home, key).is_file():
                out.append(f"run {sid}: its upload uploads/{key} is missing")
    return out + gold_problems(engine, home)
