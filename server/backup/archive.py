"""`palimpsest backup OUT`: the database first (SQLite's online backup API, or `pg_dump -Fc`),
then every file, into one archive with a manifest; reading an archive's manifest."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from server import migrate, objectstore
from server.backup.common import (
    FORMAT,
    FORMAT_VERSION,
    LEFT_OUT,
    MANIFEST,
    SECRET_SETTINGS,
    BackupError,
    add_file,
    add_stream,
    backup_key,
    code_version,
    data_files,
    engine_counts,
    gold_problems,
    member_path,
    now_text,
    pg_args,
    refused,
    run_tool,
    sign,
    sqlite_counts,
    sqlite_path,
    tool_path,
)
from server.settings import Settings

log = logging.getLogger(__name__)
# Of a store's keys, those an archive leaves out besides what it leaves out of the data directory:
# large uploads not completed (no row names them) and the zips of public files (made again when a
# download asks for them).
STORE_LEFT_OUT = ("incoming", "downloads")

# ----------------------------------------------------------------------------- backup


def default_name() -> str:
    return "palimpsest-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + ".tar"


def backup(settings: Settings, out: Path, *, attempts: int = 3) -> dict:
    """Write one archive of the site to `out` (a directory: a dated name inside it); returns the
    manifest with `archive` (the path) added. An existing archive is never overwritten."""
    out = Path(out)
    if out.is_dir():
        out = out / default_name()
    if out.exists():
        raise BackupError(f"{out} exists already: an archive is never overwritten")
    signing_key = backup_key(settings)  # refused before anything is written when there is none
    out.parent.mkdir(parents=True, exist_ok=True)
    last = None
    for _ in range(attempts):
        try:
            manifest = _backup_once(settings, out, signing_key)
            manifest["archive"] = str(out)
            return manifest
        except _Inconsistent as e:  # a campaign closed while the files were copied: again
            last = e
    raise BackupError(f"the gold changed during each of {attempts} attempts: {last}")


class _Inconsistent(Exception):
    pass


def _backup_once(settings: Settings, out: Path, signing_key: str) -> dict:
    url = settings.sqlalchemy_url()
    partial = out.with_name(f"{out.name}.partial-{os.getpid()}")
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="palimpsest-backup-", dir=out.parent))
    try:
        members: dict[str, dict] = {}
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            # 1. the database, in one snapshot
            db_info, counts, revs, db_copy = _dump_database(url, scratch)
            members[db_info["member"]] = add_file(tar, db_copy, db_info["member"])
            db_done = time.monotonic()
            # 2. the files, after it
            skip = {partial.resolve(), out.resolve(), scratch.resolve()}
            sqlite = sqlite_path(url)
            if sqlite is not None:
                skip |= {Path(str(sqlite) + x).resolve() for x in ("", "-wal", "-shm", "-journal")}
            store = objectstore.store_for(settings)
            stored = set()
            if store is not None:  # the store holds the truth; the data directory is its cache
                for key, size in store.keys(""):
                    parts = key.split("/")
                    if len(parts) < 2 or parts[0] in STORE_LEFT_OUT:
                        continue
                    rel, why = member_path("files/" + key)
                    if rel is None:
                        # left out of the data directory's files, so out of the store's too:
                        # the derived caches (`stats/`, made again), names an archive never holds
                        if refused(why):
                            log.warning("backup: the store's %s left out (%s)", key, why)
                        continue
                    members["files/" + key] = add_stream(tar, store.open(key), size, "files/" + key)
                    stored.add(key)
            for path, rel in data_files(settings.home, skip):
                if rel in stored:
                    continue
                try:
                    members["files/" + rel] = add_file(tar, path, "files/" + rel)
                except FileNotFoundError:  # removed since the walk (a staging file): not the site's
                    continue
            # 3. the gold in the files is the gold the database copy knows
            if db_info["kind"] == "sqlite":
                eng = create_engine(f"sqlite:///{db_copy}")
            else:
                eng = create_engine(url)
            try:
                # (with an object store, the files came from it: `backup verify` checks them)
                check = "goldversion" in counts and store is None
                bad = gold_problems(eng, settings.home) if check else []
            finally:
                eng.dispose()
            if bad:
                raise _Inconsistent("; ".join(bad))
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "palimpsest_version": code_version(),
                "alembic_revision": list(revs),
                "created_at": now_text(),
                "database": db_info,
                "row_counts": counts,
                "members": members,
                "left_out": {
                    "files": {k: v for k, v in LEFT_OUT.items() if (settings.home / k).exists()},
                    "settings": list(SECRET_SETTINGS),
                },
                "published_rankings": _published(url, db_info, db_copy),
                "seconds": {
                    "database": round(db_done - started, 3),
                    "files": round(time.monotonic() - db_done, 3),
                },
            }
            manifest = sign(manifest, signing_key)  # the checksums of every member, authenticated
            data = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        with open(partial, "rb") as f:
            os.fsync(f.fileno())
        # what was written, read back as a restore reads it: an archive that `backup verify` or
        # `restore` would refuse is no backup, and `backup` says so rather than exit 0
        from server.backup.restore import check_archive  # (restore reads archives through this)

        bad = check_archive(partial, manifest)
        if bad:
            raise BackupError(
                "the archive as written would not restore: "
                + "; ".join(bad[:5])
                + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else "")
                + "; no archive written"
            )
        os.link(partial, out)  # fails rather than overwrite an archive made meanwhile
        os.unlink(partial)
        return manifest
    except BaseException:
        if partial.exists():
            partial.unlink()
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _published(url, db_info, db_copy) -> list[dict]:
    """The published rankings the archive holds (task, phase, version, sha256)."""
    eng = (
        create_engine(f"sqlite:///{db_copy}") if db_info["kind"] == "sqlite" else create_engine(url)
    )
    try:
        with eng.connect() as c:
            if "rankingversion" not in inspect(c).get_table_names():
                return []
            rows = c.execute(
                text(
                    "SELECT task_id, phase_name, version, sha256 FROM rankingversion "
                    "ORDER BY task_id, phase_name, version"
                )
            ).all()
    finally:
        eng.dispose()
    return [{"task": r[0], "phase": r[1], "version": r[2], "sha256": r[3]} for r in rows]


def _dump_database(url: str, scratch: Path):
    """(database entry of the manifest, row counts, revisions, the dump file) from one snapshot."""
    sqlite = sqlite_path(url)
    if sqlite is not None:
        if not sqlite.is_file():
            raise BackupError(f"there is no database at {sqlite}")
        dest = scratch / "palimpsest.sqlite3"
        src = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True, timeout=30)
        dst = sqlite3.connect(dest)
        try:
            # the online backup API: a consistent copy while the site writes (pages=0: at once,
            # holding the read snapshot for the whole copy)
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        counts, revs = sqlite_counts(dest)
        return {"kind": "sqlite", "member": "database/palimpsest.sqlite3"}, counts, revs, dest
    if not make_url(url).drivername.startswith("postgresql"):
        raise BackupError(f"no backup for the database {migrate.shown(url)} (SQLite or PostgreSQL)")
    dest = scratch / "palimpsest.pgdump"
    args, env = pg_args(url)
    dbname = make_url(url).database
    eng = create_engine(url)
    try:
        with eng.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            with conn.begin():
                conn.execute(text("SET TRANSACTION READ ONLY"))
                snap = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
                counts, revs = engine_counts(conn)
                roles = sorted(
                    conn.execute(
                        text(
                            "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_class c "
                            "JOIN pg_namespace n ON n.oid = c.relnamespace "
                            "WHERE n.nspname = 'public'"
                        )
                    ).scalars()
                )
                # the dump sees exactly what the counts saw: the same exported snapshot
                run_tool(
                    [
                        tool_path("pg_dump"),
                        "-Fc",
                        f"--snapshot={snap}",
                        "-f",
                        str(dest),
                        *args,
                        dbname,
                    ],
                    env,
                    "pg_dump",
                )
    finally:
        eng.dispose()
    info = {
        "kind": "postgresql",
        "member": "database/palimpsest.pgdump",
        "owner_roles": roles,
        "note": "restored with --no-owner --no-privileges: the restoring role owns every table",
    }
    return info, counts, revs, dest


# ----------------------------------------------------------------------------- reading an archive
