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
    it is stamped with the initial revision first, then upgraded.
    """
    from alembic import command
    from sqlalchemy import create_engine, inspect

    cfg = alembic_config(settings)
    engine = create_engine(settings.sqlalchemy_url())
    try:
        names = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    if "alembic_version" not in names and {"submission", "phase", "user"} <= names:
        command.stamp(cfg, INITIAL)
    command.upgrade(cfg, revision)


def revision(settings: Settings, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    from alembic import command

    command.revision(alembic_config(settings), message=message, autogenerate=True)
