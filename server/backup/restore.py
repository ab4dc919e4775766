"""`palimpsest restore OUT`: into an empty site (or, with --force, one moved aside), migrations run
forward, every checksum and reference checked."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from server import migrate, objectstore
from server.backup.common import (
    CHUNK,
    MANIFEST,
    BackupError,
    Report,
    TargetNotEmpty,
    backup_key,
    check_revision,
    check_signature,
    engine_counts,
    gold_problems,
    member_path,
    pg_args,
    read_manifest,
    refused,
    run_tool,
    sqlite_counts,
    sqlite_path,
    tool_path,
)
from server.exceptions import StoreUnreachable
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


def restore(
    settings: Settings,
    archive: Path,
    *,
    force: bool = False,
    key: str | None = None,
    trust_unsigned: bool = False,
) -> Report:
    """Restore `archive` into the site `settings` name (its database and data directory).

    Stage, check, then swap: the archive's signature, every member's name and checksum, the
    database (a checked SQLite copy, or the dump turned into SQL by pg_restore) and, on SQLite,
    the row counts, the revision and every file the database names are checked in a staging
    area before the live site is touched. Then the swap: a PostgreSQL database replaced in one
    transaction (which checks the row counts before it commits), the old files moved aside and
    the staged ones renamed in. Any failure before the swap leaves the site as it was (the report
    says so); refused when the target is not empty (unless `force`) or the archive is newer than
    the code; the database brought to the migrations' head after."""
    archive = Path(archive)
    rep = Report(str(archive))
    t0 = time.monotonic()
    m = read_manifest(archive)
    rep.checks["signature"] = check_signature(
        m, backup_key(settings, key), trust_unsigned=trust_unsigned
    )
    check_revision(m)
    url = settings.sqlalchemy_url()
    kind = "sqlite" if sqlite_path(url) is not None else "postgresql"
    if m["database"]["kind"] != kind:
        raise BackupError(
            f"the archive holds a {m['database']['kind']} database; this site's is {kind} "
            f"({migrate.shown(url)}): restore into a site of the same kind"
        )
    store = objectstore.store_for(settings)
    if store is not None:
        _check_bucket(store)
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
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stage = home / f".restore-stage-{stamp}-{os.getpid()}"
    stage.mkdir()
    sqlite = sqlite_path(url)
    if sqlite is not None:  # beside the live one: the same file system, for the rename
        sqlite.parent.mkdir(parents=True, exist_ok=True)
        staged_db = sqlite.parent / f".{sqlite.name}.restore-{os.getpid()}"
    else:
        staged_db = stage / Path(m["database"]["member"]).name
    try:
        # 1. stage: every member read once, named, typed and checked against the manifest
        skipped: list[str] = []
        with tarfile.open(archive, "r:") as tar:
            problems = _stage(tar, m, stage, staged_db, skipped)
        if skipped:  # an archive made before a store's derived caches were left out of it too
            rep.checks["skipped"] = len(skipped)
            rep.checks["skipped_why"] = sorted({w.split(": ", 1)[1] for w in skipped})
        rep.timings["files"] = time.monotonic() - t0
        t1 = time.monotonic()
        # 2. check the staged database
        if not problems:
            if kind == "sqlite":
                problems += _check_sqlite(staged_db, m, stage / "files")
            else:
                try:
                    sql = _pg_script(staged_db, stage, m, url)
                except BackupError as e:
                    problems.append(f"{m['database']['member']}: {e}")
        rep.timings["database"] = time.monotonic() - t1
        rep.checks["files"] = sum(1 for k in m["members"] if k.startswith("files/"))
        rep.checks["row_counts"] = sum(m.get("row_counts", {}).values())
        rep.checks["tables"] = len(m.get("row_counts", {}))
        if problems:
            rep.problems += problems
            rep.problems.append("nothing restored: the site's database and files are as they were")
            rep.checks["restored"] = False
            return rep
        # 3. the swap: the database in one step, then the files by renames
        t2 = time.monotonic()
        if kind == "postgresql":
            _pg_apply(sql, url)  # one transaction: on failure the database is as it was
        _swap_files(home, stage / "files", url, staged_db if kind == "sqlite" else None, busy)
        rep.checks["restored"] = True
        rep.timings["swap"] = time.monotonic() - t2
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if kind == "sqlite":
            for x in ("", "-wal", "-shm", "-journal"):
                Path(str(staged_db) + x).unlink(missing_ok=True)
    if store is not None:  # the site keeps its files in a store
        t3 = time.monotonic()
        try:
            rep.checks["stored"] = sum(
                objectstore.push_tree(settings, area) for area in objectstore.STORED_AREAS
            )
        except StoreUnreachable as e:
            rep.problems.append(
                f"the files were restored into the data directory but not into the store: "
                f"{e.message} (run `palimpsest store push` when it answers)"
            )
        rep.timings["store"] = time.monotonic() - t3
    if kind == "postgresql":  # (on SQLite these were checked on the staged copy)
        eng = create_engine(url)
        try:
            rep.problems += _reference_problems(eng, home)
        finally:
            eng.dispose()
    # forward to the code's revision
    t4 = time.monotonic()
    migrate.upgrade(settings)
    rep.timings["migrate"] = time.monotonic() - t4
    rep.checks["revision"] = list(migrate.current(settings))
    rep.timings["total"] = time.monotonic() - t0
    return rep


def _check_bucket(store) -> None:
    """A missing bucket is named, with how to create it, before anything is touched."""
    try:
        if store.bucket_exists():
            return
    except StoreUnreachable as e:
        raise BackupError(f"{e.message}; nothing restored") from None
    raise BackupError(
        f"the object store's bucket {store.bucket!r} does not exist at {store.endpoint}: create "
        f"it ({store.how_to_create()}), then restore again; nothing restored"
    )


def _stage(
    tar: tarfile.TarFile,
    m: dict,
    stage: Path | None,
    staged_db: Path | None,
    skipped: list[str] | None = None,
) -> list[str]:
    """Read every member once into the staging area: files under `stage/files`, the database
    copy to `staged_db` (`stage` None: only read and checked, as `backup` checks what it wrote).
    Refused, naming the member and why: a path outside the data directory, a name an archive
    never holds (the site's secret, its live database, the queue, a staging name), a member that
    is not a plain file, a name twice, a file that is also a folder, a member the manifest does
    not list. The problems listed: checksums and sizes that differ, members missing. A derived
    cache (`stats/`) is skipped, its name and why added to `skipped`."""
    problems = []
    listed = m["members"]
    db_member = m["database"]["member"]
    files_root = stage / "files" if stage is not None else None
    if files_root is not None:
        files_root.mkdir()
    seen: set[str] = set()
    file_paths: set[str] = set()
    dir_paths: set[str] = set()
    found_db = False
    for info in tar:
        name = info.name
        if name == MANIFEST:
            continue
        if name in seen:
            raise BackupError(f"{name}: twice in the archive (a hostile archive); nothing restored")
        seen.add(name)
        if not info.isfile():
            raise BackupError(
                f"{name}: not a plain file (a {_kind(info)}); an archive holds only files; "
                "nothing restored"
            )
        want = listed.get(name)
        if want is None:
            raise BackupError(f"{name}: in the archive but not in its manifest; nothing restored")
        dest: Path | None = None
        if name == db_member:
            dest = staged_db
            found_db = True
        elif name.startswith("files/"):
            rel, why = member_path(name)
            if rel is None:
                if refused(why):
                    raise BackupError(f"{why}; nothing restored")
                if skipped is not None:
                    skipped.append(why)
                continue
            parts = rel.split("/")
            prefixes = {"/".join(parts[:i]) for i in range(1, len(parts))}
            clash = (rel in dir_paths and rel) or next(
                (p for p in sorted(prefixes) if p in file_paths), None
            )
            if clash:
                raise BackupError(
                    f"files/{clash}: both a file and a folder in the archive; nothing restored"
                )
            file_paths.add(rel)
            dir_paths |= prefixes
            if files_root is not None:
                dest = files_root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
        else:
            raise BackupError(f"{name}: not a member an archive holds; nothing restored")
        h = hashlib.sha256()
        n = 0
        src = tar.extractfile(info)
        with open(dest, "wb") if dest is not None else contextlib.nullcontext() as f:
            while chunk := src.read(CHUNK):
                h.update(chunk)
                n += len(chunk)
                if f is not None:
                    f.write(chunk)
        if h.hexdigest() != want.get("sha256") or n != want.get("size", n):
            problems.append(
                f"{name}: its sha256 is {h.hexdigest()[:12]}..., the manifest says "
                f"{str(want.get('sha256'))[:12]}... (changed after the backup)"
            )
    for name in sorted(set(listed) - seen):
        problems.append(f"{name}: in the manifest but missing from the archive")
    if not found_db and not any(p.startswith(db_member) for p in problems):
        problems.append(f"{db_member}: the archive has no database")
    return problems


def check_archive(archive: Path, m: dict) -> list[str]:
    """What a restore of `archive` (its manifest `m`) would refuse or find wrong in its members,
    read once and checked as a restore stages them, nothing written: `backup` runs this on what
    it wrote before it answers that the archive is complete."""
    try:
        with tarfile.open(archive, "r:") as tar:
            return _stage(tar, m, None, None)
    except BackupError as e:
        return [str(e)]
    except (tarfile.TarError, OSError) as e:
        return [f"{archive}: not readable as written ({e})"]


def _kind(info: tarfile.TarInfo) -> str:
    if info.isdir():
        return "folder"
    if info.issym() or info.islnk():
        return "link"
    return "device or special file"


def _check_sqlite(db: Path, m: dict, files: Path) -> list[str]:
    """The staged SQLite copy: intact, the manifest's row counts and revision, every file it
    names present among the staged files."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            con.close()
        if ok != "ok":
            return [f"{m['database']['member']}: not an intact SQLite database ({ok})"]
        counts, revs = sqlite_counts(db)
    except sqlite3.DatabaseError as e:
        return [f"{m['database']['member']}: not a readable SQLite database ({e})"]
    out = _count_problems(counts, revs, m)
    if out:
        return out
    eng = create_engine(f"sqlite:///{db}")
    try:
        return _reference_problems(eng, files)
    finally:
        eng.dispose()


def _count_problems(counts: dict, revs, m: dict) -> list[str]:
    out = []
    for t, n in sorted(m.get("row_counts", {}).items()):
        if counts.get(t) != n:
            out.append(f"table {t}: {counts.get(t)} rows in the archive, {n} in the manifest")
    if list(revs) != list(m.get("alembic_revision", [])):
        out.append(
            f"revision {', '.join(revs)} in the archive, "
            f"{', '.join(m.get('alembic_revision', []))} in the manifest"
        )
    return out


def _pg_script(dump: Path, stage: Path, m: dict, url: str) -> Path:
    """The dump as one SQL script that replaces the live database's tables and checks the row
    counts and the revision before its transaction commits: pg_restore reads the whole dump
    here (a damaged one fails now, before anything is touched)."""
    args, env = pg_args(url)
    body = stage / "restore.sql"
    run_tool(
        [tool_path("pg_restore"), "--no-owner", "--no-privileges", "-f", str(body), str(dump)],
        env,
        "pg_restore (reading the dump)",
    )
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            tables = inspect(c).get_table_names()
            seqs = (
                c.execute(
                    text(
                        "SELECT c.relname FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = 'public' AND c.relkind = 'S'"
                    )
                )
                .scalars()
                .all()
            )
            types = (
                c.execute(
                    text(
                        "SELECT t.typname FROM pg_type t "
                        "JOIN pg_namespace n ON n.oid = t.typnamespace "
                        "WHERE n.nspname = 'public' AND t.typtype = 'e'"
                    )
                )
                .scalars()
                .all()
            )
    finally:
        eng.dispose()
    lines = ["\\set ON_ERROR_STOP on"]
    lines += [f'DROP TABLE IF EXISTS public."{t}" CASCADE;' for t in tables]
    lines += [f'DROP SEQUENCE IF EXISTS public."{q}" CASCADE;' for q in seqs]
    lines += [f'DROP TYPE IF EXISTS public."{t}" CASCADE;' for t in types]
    lines.append(f"\\i {_psql_quote(body)}")
    checks = []
    for t, n in sorted(m.get("row_counts", {}).items()):
        checks.append(
            f'  IF (SELECT count(*) FROM public."{t}") <> {int(n)} THEN RAISE EXCEPTION '
            f"'table {t}: % rows in the dump, {int(n)} in the manifest', "
            f'(SELECT count(*) FROM public."{t}"); END IF;'
        )
    revs = ",".join(sorted(str(r) for r in m.get("alembic_revision", [])))
    if "alembic_version" in m.get("row_counts", {}):
        checks.append(
            "  IF (SELECT coalesce(string_agg(version_num, ',' ORDER BY version_num), '') FROM "
            f"public.alembic_version) <> '{_sql_literal(revs)}' THEN RAISE EXCEPTION "
            f"'the dump''s revision is not the manifest''s ({_sql_literal(revs)})'; END IF;"
        )
    if checks:
        lines += ["DO $check$", "BEGIN", *checks, "END", "$check$;"]
    script = stage / "swap.sql"
    script.write_text("\n".join(lines) + "\n")
    return script


def _psql_quote(p: Path) -> str:
    return "'" + str(p).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_literal(s: str) -> str:
    return s.replace("'", "''")


def _pg_apply(script: Path, url: str) -> None:
    """The swap of a PostgreSQL database: the old tables dropped, the dump's created and filled
    and their counts checked, in one transaction (psql --single-transaction): any error rolls
    all of it back."""
    args, env = pg_args(url)
    try:
        run_tool(
            [
                tool_path("psql"),
                "--no-psqlrc",
                "--quiet",
                "--single-transaction",
                "-v",
                "ON_ERROR_STOP=1",
                *args,
                "-d",
                make_url(url).database,
                "-f",
                str(script),
            ],
            env,
            "restoring the database",
        )
    except BackupError as e:
        raise BackupError(
            f"{e}; rolled back: the site's database and files are as they were"
        ) from None


def _swap_files(home: Path, staged: Path, url: str, staged_db: Path | None, busy) -> Path | None:
    """The staged files renamed into the data directory, the staged SQLite copy into the
    database's place; what was there moved aside to `<home>/.before-restore-<time>/` (never
    deleted; folders that hold no file are removed). Undone when a rename fails."""
    aside = home / f".before-restore-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    done: list[tuple[Path, Path]] = []

    def move(a: Path, b: Path) -> None:
        b.parent.mkdir(parents=True, exist_ok=True)
        os.replace(a, b)
        done.append((a, b))

    try:
        for p in sorted(home.iterdir()):
            if p.name.startswith(".") or p.name in (SECRET_FILE, "redis", "run"):
                continue
            if busy or p.name in {q.name for q in staged.iterdir()}:
                if p.is_dir() and not p.is_symlink() and not any(x.is_file() for x in p.rglob("*")):
                    if not busy:
                        shutil.rmtree(p)  # an empty tree (a fresh site's): nothing to keep
                        continue
                move(p, aside / p.name)
        sqlite = sqlite_path(url)
        if staged_db is not None and sqlite is not None:
            for x in ("", "-wal", "-shm", "-journal"):
                q = Path(str(sqlite) + x)
                if q.exists():
                    move(q, aside / q.name)
        for p in sorted(staged.iterdir()):
            move(p, home / p.name)
        if staged_db is not None and sqlite is not None:
            move(staged_db, sqlite)
    except OSError as e:
        for a, b in reversed(done):
            os.replace(b, a)
        raise BackupError(
            f"moving the restored files into place failed ({e}); undone: the data directory is "
            "as it was"
        ) from None
    return aside if aside.exists() else None


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
