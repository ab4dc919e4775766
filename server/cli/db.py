"""The database schema: upgrade, stamp, current (Alembic)."""

from __future__ import annotations

import sys

import click

from server.cli.common import Refused, done_quickly, home_option, local_settings


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.group("db")
    def db():
        """Database schema (Alembic migrations)."""

    @db.command("upgrade")
    @click.argument("revision", default="head")
    @home_option
    @done_quickly
    def db_upgrade(revision):
        """Create or migrate the database (DATABASE_URL, or SQLite in the data directory) to a
        revision (default: the newest)."""
        from server.migrate import SchemaError, current, upgrade

        settings = local_settings()
        try:
            upgrade(settings, revision)
        except SchemaError as e:
            raise Refused(str(e)) from None
        click.echo(f"database at {', '.join(current(settings)) or 'base (no tables)'}")

    @db.command("stamp")
    @click.argument("revision")
    @home_option
    @done_quickly
    def db_stamp(revision):
        """Record REVISION as the database's revision without migrating (for a database built
        without the migrations: give the revision its tables are at, then `db upgrade`)."""
        from server.migrate import current, stamp

        settings = local_settings()
        try:
            stamp(settings, revision)
        except Exception as e:  # alembic's own errors: an unknown revision, an unreachable database
            raise Refused(f"{type(e).__name__}: {e}") from None
        click.echo(f"database stamped at {', '.join(current(settings))} (nothing migrated)")

    @db.command("current")
    @home_option
    @done_quickly
    def db_current():
        """Print the database's revision and whether it is the newest; exit 1 when it is not."""
        from server.db import get_engine
        from server.migrate import current, status

        settings = local_settings()
        revs = current(settings)
        state, why = status(get_engine(settings.sqlalchemy_url()))
        click.echo(f"{', '.join(revs) or 'none'} ({'head' if state == 'head' else why})")
        if state != "head":
            sys.exit(1)
