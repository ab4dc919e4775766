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


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Bring the database to `revision` (default: the newest)."""
    from alembic import command

    command.upgrade(alembic_config(settings), revision)


def revision(settings: Settings, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    from alembic import command

    command.revision(alembic_config(settings), message=message, autogenerate=True)
