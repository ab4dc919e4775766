"""Schema migrations with Alembic (`palimpsest db upgrade`); the scripts live in server/migrations."""

from __future__ import annotations

from pathlib import Path

from server.settings import Settings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(settings: Settings):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", settings.sqlalchemy_url().replace("%", "%%"))
    return cfg


INITIAL = "e168383d1033"  # the schema `create_all` builds from the models of that revision


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Bring the database to `revision` (default: the newest).

    A database that the app built itself with `create_all` has the tables but no Alembic record:
    it is stamped first — head when it already matches the models, else the initial revision —
    then upgraded.
    """
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine, inspect
    from sqlmodel import SQLModel

    from server import models  # noqa: F401  (registers the tables)

    cfg = alembic_config(settings)
    engine = create_engine(settings.sqlalchemy_url())
    try:
        names = set(inspect(engine).get_table_names())
        stamp = None
        if "alembic_version" not in names and {"submission", "phase", "user"} <= names:
            with engine.connect() as conn:
                diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
            stamp = "head" if not diff else INITIAL
    finally:
        engine.dispose()
    if stamp:
        command.stamp(cfg, stamp)
    command.upgrade(cfg, revision)


def revision(settings: Settings, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    from alembic import command

    command.revision(alembic_config(settings), message=message, autogenerate=True)
