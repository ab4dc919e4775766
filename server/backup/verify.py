"""`palimpsest backup verify OUT`: restore into a scratch site, check the revision, the counts and
every checksum, and rebuild each published ranking byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from server.backup.common import (
    BackupError,
    Report,
    backup_key,
    check_revision,
    check_signature,
    read_manifest,
)
from server.backup.restore import restore
from server.boards import leaderboard as lb
from server.domain import publication, snapshot_parts
from server.models import BoardRanking, GoldVersion, Phase, RankingVersion, TaskVersion
from server.settings import Settings
from tasks import get_task, register_declared
from tasks.bundle_models import BoardSpec
from tasks.declared import declared_tasks
from tasks.errors import TaskNotFound

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


def verify(
    settings: Settings,
    archive: Path,
    *,
    database_url: str | None = None,
    key: str | None = None,
    trust_unsigned: bool = False,
) -> Report:
    """Restore `archive` into a scratch database and directory and check it: the revision, the
    row counts, every checksum, every file the database names, and each published ranking
    rebuilt from the restored data byte for byte against its stored snapshot."""
    archive = Path(archive)
    t0 = time.monotonic()
    m = read_manifest(archive)
    key = backup_key(settings, key)
    check_signature(m, key, trust_unsigned=trust_unsigned)  # refused before any scratch is made
    check_revision(m)
    with scratch_site(settings, m, database_url) as scratch:
        rep = restore(scratch, archive, key=key, trust_unsigned=trust_unsigned)
        rep.timings = {"restore": time.monotonic() - t0}
        if not rep.checks.get("restored"):
            rep.problems = [p for p in rep.problems if not p.startswith("nothing restored")]
            rep.timings["total"] = time.monotonic() - t0
            return rep
        t1 = time.monotonic()
        eng = create_engine(scratch.sqlalchemy_url())
        try:
            checked, problems, kept, boards = check_rankings(eng, scratch, notes=True)
        finally:
            eng.dispose()
        rep.problems += problems
        rep.checks["published_rankings"] = checked
        if boards:
            rep.checks["published_board_rankings"] = boards
        if kept:
            rep.checks["not_rebuilt"] = kept
        rep.timings["rankings"] = time.monotonic() - t1
    rep.timings["total"] = time.monotonic() - t0
    return rep


def _stored_bytes(name: str, row) -> tuple[dict | None, list[str]]:
    """A published ranking's stored bytes checked (a `RankingVersion` or a `BoardRanking`): its
    JSON against its recorded sha256, its CSV and LaTeX against what its JSON renders. Returns
    its JSON read (None when its sha256 differs) and the problems, each under `name`."""
    if hashlib.sha256(row.body_json.encode("utf-8")).hexdigest() != row.sha256:
        return None, [f"{name}: its JSON does not have its recorded sha256"]
    body = json.loads(row.body_json)
    problems = []
    if lb.snapshot_csv(body) != row.body_csv:
        problems.append(f"{name}: its CSV is not the one its JSON renders")
    if lb.snapshot_latex(body) != row.body_latex:
        problems.append(f"{name}: its LaTeX is not the one its JSON renders")
    return body, problems


def board_spec_of(body: dict) -> BoardSpec:
    """The declaration a declared board's published snapshot was built from: its name, title and
    filter as the snapshot names them, its ranking value its first column, its other columns
    listed (what `lb.board_columns` makes of them is the snapshot's columns again). The board is
    rebuilt as it was published, whether the phase still declares it, or declares it otherwise.
    An overall board's: its `overall` as published (its boards as the phase declares them)."""
    if body.get("overall"):
        return BoardSpec.model_validate(
            {
                "name": body["board"],
                "title": body.get("title") or body["board"],
                "overall": body["overall"],
            }
        )
    cols = [c for c in body["columns"] if not c.get("stat")]
    return BoardSpec.model_validate(
        {
            "name": body["board"],
            "title": body.get("title") or body["board"],
            "ranking": {"subset": cols[0]["subset"], "metric": cols[0]["metric"]},
            "columns": [{"subset": c["subset"], "metric": c["metric"]} for c in cols[1:]],
            "filter": body.get("filter"),
        }
    )


def check_rankings(engine, settings: Settings, *, notes: bool = False):
    """Each published ranking against the data: every version's stored bytes (sha256, CSV and
    LaTeX rendered from its JSON), the default board's (`RankingVersion`) and each declared
    board's (`BoardRanking`); the newest version of each phase, every board of it, rebuilt from
    the scores, the uploads and the gold, byte for byte, unless the task or the phase's gold got a
    new version after it was published (the task's files and gold are now the newer version's:
    the ranking stands as published, and its bytes are checked). Returns (checked, problems), and
    with `notes` the rankings not rebuilt, each with why, and the number of declared boards'
    rankings checked."""
    problems = []
    kept = []
    checked = 0
    with Session(engine, expire_on_commit=False) as s:
        rvs = list(
            s.execute(
                select(RankingVersion).order_by(RankingVersion.phase_id, RankingVersion.version)
            ).scalars()
        )
        boards: dict[int, list[BoardRanking]] = {}
        for br in s.execute(select(BoardRanking).order_by(BoardRanking.id)).scalars():
            boards.setdefault(br.ranking_id, []).append(br)
        boards_checked = 0
        newest = {}
        for rv in rvs:
            checked += 1
            name = f"{rv.task_id}/{rv.phase_name} version {rv.version}"
            for br in boards.get(rv.id, []):
                boards_checked += 1
                problems += _stored_bytes(f"{name} board {br.board}", br)[1]
            body, found = _stored_bytes(name, rv)
            problems += found
            if body is None:
                continue
            newest[rv.phase_id] = rv
        _know_declared(settings.home)
        for phase_id, rv in sorted(newest.items()):
            name = f"{rv.task_id}/{rv.phase_name} version {rv.version}"
            phase = s.get(Phase, phase_id)
            try:
                task = get_task(rv.task_id)
            except Exception as e:  # noqa: BLE001 - a task this code no longer has
                problems.append(f"{name}: its task cannot be loaded ({e})")
                continue
            why = _changed_since(s, rv, phase)
            if why:
                kept.append(f"{name}: {why}; its stored bytes are checked, it is not rebuilt")
                continue
            meta = json.loads(rv.body_json).get("ranking", {})
            # every board of the version: the default one, then each declared one as published
            for label, row in [(name, rv)] + [
                (f"{name} board {br.board}", br) for br in boards.get(rv.id, [])
            ]:
                stored = json.loads(row.body_json)
                try:
                    spec = board_spec_of(stored) if row is not rv else None
                except (KeyError, IndexError, ValueError) as e:
                    problems.append(
                        f"{label}: its snapshot names no board it can be rebuilt as ({e})"
                    )
                    continue
                body = publication.snapshot_body(
                    s,
                    task,
                    phase,
                    settings,
                    meta,
                    board=spec,
                    compact=snapshot_parts.is_compact(stored),
                )
                again = publication.snapshot_json(body)
                s.rollback()
                if again != row.body_json:
                    problems.append(
                        f"{label}: rebuilt from the restored data it differs from the published "
                        f"snapshot ({_first_difference(stored, body)})"
                    )
    return (checked, problems, kept, boards_checked) if notes else (checked, problems)


def _know_declared(home) -> None:
    """The tasks organizers wrote, as the restored data directory declares them, known to this
    process: `backup verify` runs on an operator's machine whose own data directory may hold none
    of them (a site on an object store), and rebuilds each ranking under the task it names."""
    for t in declared_tasks(Path(home)):
        try:
            get_task(t.id)
        except TaskNotFound:
            register_declared(t)


def _changed_since(s, rv: RankingVersion, phase: Phase) -> str | None:
    """Why a published ranking cannot be rebuilt from the data as they stand: a task version or
    a gold version of its split made after it was published."""
    tv = s.execute(
        select(TaskVersion.version)
        .where(TaskVersion.task_id == rv.task_id, TaskVersion.created_at > rv.published_at)
        .order_by(TaskVersion.version.desc())
    ).first()
    if tv is not None:
        return f"published before task version {tv[0]} of {rv.task_id}"
    gv = s.execute(
        select(GoldVersion.version)
        .where(
            GoldVersion.task_id == rv.task_id,
            GoldVersion.split == phase.split,
            GoldVersion.created_at > rv.published_at,
        )
        .order_by(GoldVersion.version.desc())
    ).first()
    if gv is not None:
        return f"published before gold version {gv[0]} of {rv.task_id}/{phase.split}"
    return None


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
