"""Backup and restore of a whole site: one archive (`palimpsest backup OUT`), checked by restoring
it into a scratch database and directory (`palimpsest backup verify OUT`), and restored in one
command (`palimpsest restore OUT`).

The archive is an uncompressed tar (uploads are often compressed already, and a tar can be read
member by member without unpacking it):

    database/palimpsest.sqlite3   SQLite, copied through the online backup API, or
    database/palimpsest.pgdump    PostgreSQL, `pg_dump -Fc` of the snapshot the counts were taken in
    files/<path>                  every file of the data directory but the ones left out
    manifest.json                 last: version, Alembic revision, time, row counts per table,
                                  sha256 and size of every member, what was left out and why

Consistency while the site serves: the database is copied first, in one snapshot; the files
after it. Every file a row of that snapshot names was written before the row was committed
(an upload is stored before its submission; a task's files are swapped in whole before it is
used; a gold version's files are written before its row commits), and none of them is rewritten
in place afterwards (uploads are content-addressed, a task's import replaces its directory by a
rename, the previous gold is kept under gold-history before a new version is written). Files
written after the snapshot are in the archive too but no row names them. The one exception, a
campaign closing while the files are copied, is caught: the gold in the files is checked against
the gold versions of the copied database, and the backup is taken again when they disagree.

Nothing here deletes an archive: a backup writes `OUT.partial-<pid>` and renames it when complete;
verify and restore only read it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from server import migrate, objectstore
from server.boards import leaderboard as lb
from server.domain import publication
from server.models import GoldVersion, Phase, RankingVersion, Submission
from server.settings import SECRET_FILE, Settings
from server.storage import path_for
from tasks import get_task
from tasks.store import TaskStore, _tree_sha256

FORMAT = "palimpsest-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CHUNK = 1024 * 1024

# What of the data directory an archive leaves out, and why (the manifest lists them).
LEFT_OUT = {
    SECRET_FILE: "a secret (the key that signs sessions and names gold by keyed id): keep it in "
    "your secrets store and put it back, or set PALIMPSEST_SECRET_KEY, on the restored site",
    "palimpsest.db": "the SQLite database itself: the archive holds its copy from the online "
    "backup API under database/",
    "palimpsest.db-wal": "the SQLite database's write-ahead log (in the copy under database/)",
    "palimpsest.db-shm": "the SQLite database's shared memory (in the copy under database/)",
    "palimpsest.db-journal": "the SQLite database's journal (in the copy under database/)",
    "redis": "the embedded Redis (the queue): the restored site's reconciler enqueues again every "
    "run left unscored",
    "run": "process ids of the running site",
    "stats": "derived caches (units, bootstrap samples, board statistics), recomputed on demand "
    "from the uploads and the gold",
}
SECRET_SETTINGS = (
    "PALIMPSEST_SECRET_KEY",
    "DATABASE_URL (its password)",
    "REDIS_URL (its password)",
    "PALIMPSEST_SMTP_PASSWORD",
)


class BackupError(RuntimeError):
    """A backup, verification or restore that cannot go on; the message says what and where."""


class TargetNotEmpty(BackupError):
    pass


@dataclass
class Report:
    """What a verify or a restore found: `problems` empty means every check passed."""

    archive: str
    checks: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {
            "archive": self.archive,
            "ok": self.ok,
            "checks": self.checks,
            "problems": self.problems,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }


# ----------------------------------------------------------------------------- helpers


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version() -> str:
    try:
        return version("palimpsest")
    except Exception:  # noqa: BLE001 - a checkout without the package installed
        return "0+unknown"


def _sqlite_path(url: str) -> Path | None:
    u = make_url(url)
    if not u.drivername.startswith("sqlite"):
        return None
    return Path(u.database or "")


def _pg_args(url: str) -> tuple[list[str], dict]:
    """libpq options for pg_dump / pg_restore / psql, and the environment carrying the password
    (never on a command line others can read)."""
    u = make_url(url)
    args = []
    if u.host:
        args += ["-h", u.host]
    if u.port:
        args += ["-p", str(u.port)]
    if u.username:
        args += ["-U", u.username]
    env = dict(os.environ)
    if u.password is not None:
        env["PGPASSWORD"] = str(u.password)
    return args, env


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise BackupError(f"{name} is not installed (PostgreSQL's client programs are needed)")
    return exe


def _run(cmd: list[str], env: dict, what: str) -> None:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr or r.stdout).strip().splitlines()
        raise BackupError(f"{what} failed (exit {r.returncode}): {' / '.join(err[-3:])}")


def _sqlite_counts(path: Path) -> tuple[dict[str, int], tuple[str, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        counts = {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        revs = ()
        if "alembic_version" in names:
            revs = tuple(
                sorted(r[0] for r in con.execute("SELECT version_num FROM alembic_version"))
            )
        return counts, revs
    finally:
        con.close()


def _engine_counts(conn) -> tuple[dict[str, int], tuple[str, ...]]:
    names = sorted(inspect(conn).get_table_names())
    counts = {n: conn.execute(text(f'SELECT count(*) FROM "{n}"')).scalar_one() for n in names}
    revs = ()
    if "alembic_version" in names:
        revs = tuple(
            sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
        )
    return counts, revs


class _Hashing:
    """A read-only stream that hashes what is read through it."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.n = 0

    def read(self, size=-1):
        b = self.f.read(size)
        self.h.update(b)
        self.n += len(b)
        return b


def _add_file(tar: tarfile.TarFile, src: Path, arcname: str) -> dict:
    with open(src, "rb") as f:
        st = os.fstat(f.fileno())
        info = tarfile.TarInfo(arcname)
        info.size = st.st_size
        info.mtime = int(st.st_mtime)
        info.mode = 0o644
        hf = _Hashing(f)
        tar.addfile(info, hf)
    return {"sha256": hf.h.hexdigest(), "size": st.st_size}


def _add_stream(tar: tarfile.TarFile, stream, size: int, arcname: str) -> dict:
    info = tarfile.TarInfo(arcname)
    info.size = size
    info.mtime = int(time.time())
    info.mode = 0o644
    hf = _Hashing(stream)
    tar.addfile(info, hf)
    return {"sha256": hf.h.hexdigest(), "size": size}


def _data_files(home: Path, skip: set[Path]) -> list[tuple[Path, str]]:
    """(path, path relative to home) of every file an archive holds: all but LEFT_OUT, hidden
    names (staging directories and temporary files) and uploads/tmp; symlinked directories are
    followed (their files are the site's)."""
    out = []
    for root, dirs, files in os.walk(home, followlinks=True):
        rel_root = Path(root).relative_to(home)
        keep = []
        for d in sorted(dirs):
            rel = rel_root / d
            if d.startswith(".") or (rel_root == Path(".") and d in LEFT_OUT):
                continue
            if rel.as_posix() == "uploads/tmp" or (Path(root) / d).resolve() in skip:
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            rel = rel_root / name
            p = Path(root) / name
            if name.startswith(".") or (rel_root == Path(".") and name in LEFT_OUT):
                continue
            if p.resolve() in skip or ".partial-" in name:
                continue
            out.append((p, rel.as_posix()))
    return out


# ----------------------------------------------------------------------------- the gold check


def gold_problems(engine, home: Path) -> list[str]:
    """Where the gold files disagree with the gold versions in the database: the newest version
    of each split must be the gold in place (the task's manifest checksum) and every older one
    must be kept under gold-history with its checksum."""
    out = []
    with Session(engine) as s:
        rows = s.execute(
            select(GoldVersion).order_by(
                GoldVersion.task_id, GoldVersion.split, GoldVersion.version
            )
        ).scalars()
        newest: dict[tuple[str, str], object] = {}
        for v in rows:
            newest[(v.task_id, v.split)] = v
            store = TaskStore(v.task_id, home)
            kept = store.root / "gold-history" / v.split / f"v{v.version}"
            if kept.is_dir() and _tree_sha256(kept) != v.sha256:
                out.append(
                    f"gold version {v.version} of {v.task_id}/{v.split}: the files kept under "
                    f"{kept.relative_to(home)} do not have its checksum"
                )
        for (task_id, split), v in newest.items():
            store = TaskStore(task_id, home)
            if not store.exists():
                out.append(f"gold of {task_id}/{split}: the task's files are missing")
                continue
            if store.gold_checksum(split) != v.sha256:
                out.append(
                    f"gold of {task_id}/{split}: the files are not gold version {v.version} "
                    "(the database's newest)"
                )
            elif _tree_sha256(store.root / "gold" / split) != v.sha256:
                out.append(
                    f"gold of {task_id}/{split}: the files' bytes do not match gold version "
                    f"{v.version}"
                )
            for older in range(1, v.version):
                kept = store.root / "gold-history" / split / f"v{older}"
                if not kept.is_dir():
                    out.append(
                        f"gold version {older} of {task_id}/{split}: "
                        f"{kept.relative_to(home)} is missing"
                    )
    return out


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
    out.parent.mkdir(parents=True, exist_ok=True)
    last = None
    for _ in range(attempts):
        try:
            manifest = _backup_once(settings, out)
            manifest["archive"] = str(out)
            return manifest
        except _Inconsistent as e:  # a campaign closed while the files were copied: again
            last = e
    raise BackupError(f"the gold changed during each of {attempts} attempts: {last}")


class _Inconsistent(Exception):
    pass


def _backup_once(settings: Settings, out: Path) -> dict:
    url = settings.sqlalchemy_url()
    partial = out.with_name(f"{out.name}.partial-{os.getpid()}")
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="palimpsest-backup-", dir=out.parent))
    try:
        members: dict[str, dict] = {}
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            # 1. the database, in one snapshot
            db_info, counts, revs, db_copy = _dump_database(url, scratch)
            members[db_info["member"]] = _add_file(tar, db_copy, db_info["member"])
            db_done = time.monotonic()
            # 2. the files, after it
            skip = {partial.resolve(), out.resolve(), scratch.resolve()}
            sqlite = _sqlite_path(url)
            if sqlite is not None:
                skip |= {Path(str(sqlite) + x).resolve() for x in ("", "-wal", "-shm", "-journal")}
            store = objectstore.store_for(settings)
            stored = set()
            if store is not None:  # the store holds the truth; the data directory is its cache
                for key, size in store.keys(""):
                    parts = key.split("/")
                    if any(p.startswith(".") for p in parts) or len(parts) < 2:
                        continue
                    if parts[0] == "incoming":  # large uploads not completed: no row names them
                        continue
                    if parts[0] == "downloads":  # zips of public files, made again when asked for
                        continue
                    members["files/" + key] = _add_stream(
                        tar, store.open(key), size, "files/" + key
                    )
                    stored.add(key)
            for path, rel in _data_files(settings.home, skip):
                if rel in stored:
                    continue
                try:
                    members["files/" + rel] = _add_file(tar, path, "files/" + rel)
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
                "palimpsest_version": _version(),
                "alembic_revision": list(revs),
                "created_at": _now(),
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
            data = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        with open(partial, "rb") as f:
            os.fsync(f.fileno())
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
    sqlite = _sqlite_path(url)
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
        counts, revs = _sqlite_counts(dest)
        return {"kind": "sqlite", "member": "database/palimpsest.sqlite3"}, counts, revs, dest
    if not make_url(url).drivername.startswith("postgresql"):
        raise BackupError(f"no backup for the database {migrate.shown(url)} (SQLite or PostgreSQL)")
    dest = scratch / "palimpsest.pgdump"
    args, env = _pg_args(url)
    dbname = make_url(url).database
    eng = create_engine(url)
    try:
        with eng.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            with conn.begin():
                conn.execute(text("SET TRANSACTION READ ONLY"))
                snap = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
                counts, revs = _engine_counts(conn)
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
                _run(
                    [_tool("pg_dump"), "-Fc", f"--snapshot={snap}", "-f", str(dest), *args, dbname],
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


def read_manifest(archive: Path) -> dict:
    archive = Path(archive)
    if not archive.is_file():
        raise BackupError(f"{archive}: no such archive")
    try:
        with tarfile.open(archive, "r:") as tar:
            try:
                f = tar.extractfile(MANIFEST)
            except KeyError:
                raise BackupError(f"{archive}: no {MANIFEST} (not a complete archive)") from None
            m = json.loads(f.read())
    except (tarfile.TarError, OSError, ValueError) as e:
        raise BackupError(f"{archive}: not a readable archive ({e})") from None
    if m.get("format") != FORMAT:
        raise BackupError(f"{archive}: not a Palimpsest backup")
    if int(m.get("format_version", 0)) > FORMAT_VERSION:
        raise BackupError(
            f"{archive}: archive format {m['format_version']} is newer than this version of "
            f"Palimpsest reads ({FORMAT_VERSION}); restore it with a newer Palimpsest"
        )
    return m


def _check_revision(m: dict) -> None:
    unknown = [r for r in m.get("alembic_revision", []) if migrate._known(r) is None]
    if unknown:
        raise BackupError(
            f"the archive's database is at revision {', '.join(unknown)}, which this version of "
            f"Palimpsest does not know (its newest is {', '.join(migrate.heads())}): the archive "
            "is newer than the code; restore it with the version that made it"
        )


# ----------------------------------------------------------------------------- restore


def target_contents(settings: Settings) -> list[str]:
    """What makes a target non-empty: rows in the database (beyond the phases every site has),
    files in the data directory's areas."""
    found = []
    url = settings.sqlalchemy_url()
    sqlite = _sqlite_path(url)
    if sqlite is None or sqlite.exists():
        eng = create_engine(url)
        try:
            with eng.connect() as c:
                counts, _ = _engine_counts(c)
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
    _check_revision(m)
    url = settings.sqlalchemy_url()
    kind = "sqlite" if _sqlite_path(url) is not None else "postgresql"
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
            counts, revs = _engine_counts(c)
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
    sqlite = _sqlite_path(url)
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
            dest = _sqlite_path(url)
            dest.parent.mkdir(parents=True, exist_ok=True)
            for x in ("-wal", "-shm", "-journal"):
                Path(str(dest) + x).unlink(missing_ok=True)
            os.replace(dump, dest)
        else:
            args, env = _pg_args(url)
            _run(
                [
                    _tool("pg_restore"),
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


# ----------------------------------------------------------------------------- verify


@contextmanager
def scratch_site(settings: Settings, m: dict, database_url: str | None = None):
    """A scratch data directory and database for the archive's kind of database, removed after:
    SQLite in the directory; PostgreSQL a new database on the site's server (or
    `database_url`'s), dropped after."""
    tmp = Path(tempfile.mkdtemp(prefix="palimpsest-verify-"))
    created = None
    admin_url = None
    try:
        if m["database"]["kind"] == "sqlite":
            url = None
        else:
            base = database_url or settings.database_url or os.environ.get("DATABASE_URL")
            if not base or not make_url(base).drivername.startswith("postgresql"):
                raise BackupError(
                    "the archive holds a PostgreSQL database: verifying it needs a PostgreSQL "
                    "server to restore into (set DATABASE_URL or pass --database-url; a scratch "
                    "database is created there and dropped after)"
                )
            admin_url = base
            created = f"palimpsest_verify_{uuid.uuid4().hex[:12]}"
            eng = create_engine(admin_url, isolation_level="AUTOCOMMIT")
            try:
                with eng.connect() as c:
                    c.execute(text(f'CREATE DATABASE "{created}"'))
            finally:
                eng.dispose()
            url = make_url(admin_url).set(database=created).render_as_string(hide_password=False)
        scratch = Settings(
            home=tmp / "home",
            database_url=url,
            secret_key=settings.secret_key,
            bootstrap_samples=settings.bootstrap_samples,
            s3_bucket=None,  # the scratch site keeps its files in its own directory only
        )
        yield scratch
    finally:
        if created:
            eng = create_engine(admin_url, isolation_level="AUTOCOMMIT")
            try:
                with eng.connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)'))
            finally:
                eng.dispose()
        shutil.rmtree(tmp, ignore_errors=True)


def verify(settings: Settings, archive: Path, *, database_url: str | None = None) -> Report:
    """Restore `archive` into a scratch database and directory and check it: the revision, the
    row counts, every checksum, every file the database names, and each published ranking
    rebuilt from the restored data byte for byte against its stored snapshot."""
    archive = Path(archive)
    t0 = time.monotonic()
    m = read_manifest(archive)
    _check_revision(m)
    with scratch_site(settings, m, database_url) as scratch:
        rep = restore(scratch, archive)
        rep.timings = {"restore": time.monotonic() - t0}
        t1 = time.monotonic()
        eng = create_engine(scratch.sqlalchemy_url())
        try:
            checked, problems = check_rankings(eng, scratch)
        finally:
            eng.dispose()
        rep.problems += problems
        rep.checks["published_rankings"] = checked
        rep.timings["rankings"] = time.monotonic() - t1
    rep.timings["total"] = time.monotonic() - t0
    return rep


def check_rankings(engine, settings: Settings) -> tuple[int, list[str]]:
    """Each published ranking against the data: every version's stored bytes (sha256, CSV and
    LaTeX rendered from its JSON); the newest version of each phase rebuilt from the scores, the
    uploads and the gold, byte for byte."""
    problems = []
    checked = 0
    with Session(engine, expire_on_commit=False) as s:
        rvs = list(
            s.execute(
                select(RankingVersion).order_by(RankingVersion.phase_id, RankingVersion.version)
            ).scalars()
        )
        newest = {}
        for rv in rvs:
            checked += 1
            name = f"{rv.task_id}/{rv.phase_name} version {rv.version}"
            if hashlib.sha256(rv.body_json.encode("utf-8")).hexdigest() != rv.sha256:
                problems.append(f"{name}: its JSON does not have its recorded sha256")
                continue
            body = json.loads(rv.body_json)
            if lb.snapshot_csv(body) != rv.body_csv:
                problems.append(f"{name}: its CSV is not the one its JSON renders")
            if lb.snapshot_latex(body) != rv.body_latex:
                problems.append(f"{name}: its LaTeX is not the one its JSON renders")
            newest[rv.phase_id] = rv
        for phase_id, rv in sorted(newest.items()):
            name = f"{rv.task_id}/{rv.phase_name} version {rv.version}"
            phase = s.get(Phase, phase_id)
            try:
                task = get_task(rv.task_id)
            except Exception as e:  # noqa: BLE001 - a task this code no longer has
                problems.append(f"{name}: its task cannot be loaded ({e})")
                continue
            meta = json.loads(rv.body_json).get("ranking", {})
            body = publication.snapshot_body(s, task, phase, settings, meta)
            again = publication.snapshot_json(body)
            s.rollback()
            if again != rv.body_json:
                problems.append(
                    f"{name}: rebuilt from the restored data it differs from the published "
                    f"snapshot ({_first_difference(json.loads(rv.body_json), body)})"
                )
    return checked, problems


def _first_difference(a, b, path="") -> str:
    if type(a) is not type(b):
        return f"at {path or '/'}: {a!r:.60} vs {b!r:.60}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"at {path}/{k}: only in {'the snapshot' if k in a else 'the rebuild'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}/{k}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"at {path}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}/{i}")
    return f"at {path or '/'}: {a!r:.60} vs {b!r:.60}"
