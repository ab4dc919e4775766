"""Alembic owns the schema: `palimpsest db upgrade` creates and migrates the database; the scripts
live in server/migrations. Nothing outside the tests builds tables from the models.

The web app and the workers only check that the database is at the migrations' head
(`check_at_head`) and stop with one line saying what to run when it is not. The local commands
(`serve`, `users`, `tokens`, `phases`, `reconcile`, `baselines --record`) call `prepare`: on the
embedded default (SQLite in the data directory, no DATABASE_URL) they upgrade it themselves; on a
DATABASE_URL they check, as the app does, and leave migrating to `palimpsest db upgrade`.

Checking is light: the revisions recorded in alembic_version are read with one query and compared
with the heads the scripts declare (their `revision` and `down_revision` read as text, not
imported); Alembic itself loads only when a database is not at head or is migrated.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from server import models
from server.db import get_engine
from server.settings import Settings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
INITIAL = "e168383d1033"  # the first revision: the schema as it was before migrations were kept


class SchemaError(RuntimeError):
    """The database is not at the migrations' head; the message (one line) says what to run."""


@functools.cache
def alembic():
    """Alembic's command, config and script modules: the one place Alembic is imported, when a
    migration runs (checking the revision needs one query and never loads it; see the top)."""
    from alembic import command, config, script  # here: Alembic loads to migrate, not to check

    return SimpleNamespace(command=command, config=config, script=script)


def alembic_config(settings: Settings):
    cfg = alembic().config.Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", settings.sqlalchemy_url().replace("%", "%%"))
    return cfg


@functools.lru_cache(maxsize=1)
def script():
    return alembic().script.ScriptDirectory(str(MIGRATIONS))


def heads() -> tuple[str, ...]:
    """The newest revision(s) of the migration scripts."""
    return tuple(sorted(script().get_heads()))


_ASSIGNED = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.M)


@functools.lru_cache(maxsize=1)
def declared_heads() -> tuple[str, ...]:
    """`heads()` without loading Alembic or the scripts: each script's module-level `revision`
    and `down_revision` assignments read as literals; a head is a revision no script names as
    its down revision (tests/test_migrations.py checks it equals Alembic's)."""
    revisions, downs = set(), set()
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        values = {
            k: ast.literal_eval(v) for k, v in _ASSIGNED.findall(path.read_text(encoding="utf-8"))
        }
        if "revision" not in values:
            continue
        revisions.add(values["revision"])
        down = values.get("down_revision")
        downs.update([down] if isinstance(down, str) else (down or ()))
    return tuple(sorted(revisions - downs))


def _recorded(conn) -> tuple[str, ...]:
    """The revisions in the database's alembic_version table (empty: none, or no table), read
    as Alembic's MigrationContext reads them."""
    if not inspect(conn).has_table("alembic_version"):
        return ()
    rows = conn.execute(text("SELECT version_num FROM alembic_version"))
    return tuple(sorted(r[0] for r in rows))


def shown(url: str) -> str:
    """A database URL fit for a message: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def _state(engine) -> tuple[tuple[str, ...], bool]:
    """(the revisions recorded in alembic_version, whether any of the models' tables exist)."""
    with engine.connect() as conn:
        current = _recorded(conn)
        tables = (
            bool(set(inspect(conn).get_table_names()) & set(models.load_all()))
            if not current
            else True
        )
    return current, tables


def _unversioned(url: str) -> str:
    return (
        f"the database {shown(url)} has Palimpsest's tables but no alembic_version, so its "
        "revision is unknown (it was built without the migrations): record the revision its "
        f"schema is at with `palimpsest db stamp REVISION` (`{INITIAL}`, the first, for a "
        "database an older Palimpsest built; `head` if it already matches this version), then "
        "run `palimpsest db upgrade`"
    )


def status(engine) -> tuple[str, str | None]:
    """Where the database stands against the migrations, as (state, one line saying what to run):
    ("head", None), ("empty", ...), ("behind", ...), ("unversioned", ...) or ("unknown", ...)."""
    url = engine.url.render_as_string(hide_password=False)
    current, tables = _state(engine)
    if current and current == declared_heads():
        return "head", None
    want = heads()
    if current == want:
        return "head", None
    if not current:
        if tables:
            return "unversioned", _unversioned(url)
        return "empty", f"the database {shown(url)} has no tables yet: run `palimpsest db upgrade`"
    if any(known(r) is None for r in current):
        return "unknown", (
            f"the database {shown(url)} is at revision {', '.join(current)}, which this "
            f"version of Palimpsest does not know (its newest is {', '.join(want)}): a "
            "newer version migrated it; run that version"
        )
    return "behind", (
        f"the database {shown(url)} is at revision {', '.join(current)}, not at the "
        f"newest ({', '.join(want)}): run `palimpsest db upgrade`"
    )


def known(rev: str):
    try:
        return script().get_revision(rev)
    except Exception:  # noqa: BLE001 - alembic raises several kinds for an unknown id
        return None


def check_at_head(engine) -> None:
    """Raise SchemaError (one line, what to run) unless the database is at the migrations' head."""
    state, why = status(engine)
    if state != "head":
        raise SchemaError(why)


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Create or migrate the database to `revision` (default: the newest).

    A database with Palimpsest's tables but no alembic_version is refused: which revision its
    tables are at is for the operator to say (`palimpsest db stamp`), not for a guess. So is one
    at a revision these scripts do not know (a newer version migrated it).
    """
    engine = create_engine(settings.sqlalchemy_url())
    try:
        state, why = status(engine)
    finally:
        engine.dispose()
    if state in ("unversioned", "unknown"):
        raise SchemaError(why)
    if state == "head" and revision == "head":
        return  # nothing to migrate: Alembic would load every script to find so
    alembic().command.upgrade(alembic_config(settings), revision)


def stamp(settings: Settings, revision: str) -> None:
    """Record `revision` as the database's without running any migration."""
    alembic().command.stamp(alembic_config(settings), revision)


def current(settings: Settings) -> tuple[str, ...]:
    """The revision(s) recorded in the database (empty: none)."""
    engine = create_engine(settings.sqlalchemy_url())
    try:
        return _state(engine)[0]
    finally:
        engine.dispose()


def prepare(settings: Settings, engine=None):
    """The engine of a local command's database, at head: the embedded default is upgraded when it
    is new or behind; a DATABASE_URL is only checked. Raises SchemaError otherwise."""
    engine = engine or get_engine(settings.sqlalchemy_url())
    state, why = status(engine)
    if state in ("empty", "behind") and not settings.database_url:
        upgrade(settings)
        state, why = status(engine)
    if state != "head":
        raise SchemaError(why)
    return engine


def revision(settings: Settings, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    alembic().command.revision(alembic_config(settings), message=message, autogenerate=True)
