"""Alembic owns the schema: the migrations build exactly the models on SQLite and PostgreSQL, from
an empty database and back down; `db upgrade` refuses to guess the revision of a database built
without them; the app, the worker and the commands refuse (or, on the embedded default, upgrade) a
database that is not at head, in one line saying what to run."""

from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner
from conftest import build_schema, fresh_pg_database


def _settings(url):
    from server.settings import Settings

    return Settings(database_url=url)


def _diff(url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine
    from sqlmodel import SQLModel

    from server import models  # noqa: F401  (registers the tables)

    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return compare_metadata(MigrationContext.configure(c), SQLModel.metadata)
    finally:
        eng.dispose()


def _tables(url) -> set[str]:
    from sqlalchemy import create_engine, inspect

    eng = create_engine(url)
    try:
        return set(inspect(eng).get_table_names())
    finally:
        eng.dispose()


@pytest.fixture
def empty_pg():
    """A new, empty PostgreSQL database of its own (the session's pg_database holds create_all's
    tables), dropped after."""
    with fresh_pg_database("palimpsest_mig_") as (_name, url):
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    return request.getfixturevalue("empty_pg")


def test_migrations_from_the_first_revision_build_exactly_the_models_and_go_down_again(empty_db):
    from alembic import command
    from sqlmodel import SQLModel

    from server.migrate import INITIAL, alembic_config, current, heads, script, upgrade

    settings = _settings(empty_db)
    cfg = alembic_config(settings)
    chain = [r.revision for r in script().walk_revisions()][::-1]  # the first revision first
    assert chain[0] == INITIAL and script().get_revision(INITIAL).down_revision is None
    assert _tables(empty_db) == set()
    for rev in chain:  # one revision at a time, as a database that lived through each would
        command.upgrade(cfg, rev)
        assert current(settings) == (rev,)
    assert current(settings) == heads()
    assert _diff(empty_db) == []
    assert _tables(empty_db) == set(SQLModel.metadata.tables) | {"alembic_version"}

    command.downgrade(cfg, "base")
    assert _tables(empty_db) <= {"alembic_version"} and current(settings) == ()
    upgrade(settings)  # what `palimpsest db upgrade` runs: every revision at once
    assert current(settings) == heads()
    assert _diff(empty_db) == []
    upgrade(settings)  # and again: nothing to do
    assert current(settings) == heads()


def test_db_upgrade_refuses_a_database_built_without_the_migrations_until_stamped(
    tmp_path, monkeypatch
):
    from alembic import command
    from sqlalchemy import create_engine, text

    from cli.main import main
    from server.migrate import INITIAL, SchemaError, alembic_config, heads, upgrade

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'palimpsest.db'}"
    # what an older Palimpsest's create_all left: the first revision's tables, no alembic_version
    command.upgrade(alembic_config(_settings(url)), INITIAL)
    eng = create_engine(url)
    with eng.begin() as c:
        c.execute(text("DROP TABLE alembic_version"))
    eng.dispose()

    with pytest.raises(SchemaError, match="no alembic_version.*palimpsest db stamp REVISION"):
        upgrade(_settings(url))
    for args in (
        ["db", "upgrade"],
        ["users", "create", "--email", "a@b.org", "--password-stdin"],
        ["serve", "--port", "1"],
        ["db", "current"],
    ):
        r = CliRunner().invoke(main, args, input="correct horse battery\n")
        assert r.exit_code == 1, (args, r.output)
        assert "palimpsest db stamp" in r.output and "Traceback" not in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output  # one line
    assert "alembic_version" not in _tables(url) and "redis" not in os.listdir(
        tmp_path
    )  # serve stopped first

    r = CliRunner().invoke(main, ["db", "stamp", "no-such-revision"])
    assert r.exit_code == 1 and "no-such-revision" in r.output
    r = CliRunner().invoke(main, ["db", "stamp", INITIAL])
    assert r.exit_code == 0 and INITIAL in r.output, r.output
    r = CliRunner().invoke(main, ["db", "current"])
    assert r.exit_code == 1 and "run `palimpsest db upgrade`" in r.output, r.output
    r = CliRunner().invoke(main, ["db", "upgrade"])
    assert r.exit_code == 0 and heads()[0] in r.output, r.output
    assert _diff(url) == []
    r = CliRunner().invoke(main, ["db", "current"])
    assert r.exit_code == 0 and r.output.strip() == f"{heads()[0]} (head)"


def test_the_app_and_the_worker_refuse_a_database_not_at_head(tmp_path, monkeypatch):
    from alembic import command

    from cli.main import main
    from server import create_app
    from server.jobs.worker import run
    from server.migrate import INITIAL, SchemaError, alembic_config
    from server.settings import Settings

    home = tmp_path / "h"
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: the check comes first
    settings = Settings.from_env()
    for why in (
        "has no tables yet: run `palimpsest db upgrade`",
        f"is at revision {INITIAL}, not at the newest",
    ):
        with pytest.raises(SchemaError, match="run `palimpsest db upgrade`") as e:
            create_app({"home": home, "env": "production", "secret_key": "x" * 40})
        assert why in str(e.value) and "\n" not in str(e.value)
        with pytest.raises(SchemaError, match=re.escape(why)):
            run(settings, ("scoring",), burst=True)
        r = CliRunner().invoke(main, ["worker", "--burst"])
        assert r.exit_code == 1 and why in r.output and "Traceback" not in r.output, r.output
        command.upgrade(alembic_config(settings), INITIAL)  # the second round: a database behind
    build_schema(home)  # the tests' database: create_all, stamped head
    assert create_app({"home": home, "env": "production", "secret_key": "x" * 40})


def test_local_commands_upgrade_the_embedded_default_and_only_check_a_database_url(
    tmp_path, monkeypatch
):
    from sqlmodel import SQLModel

    from cli.main import main
    from server.migrate import current, heads

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    r = CliRunner().invoke(
        main,
        ["users", "create", "--email", "o@x.org", "--password-stdin", "--organizer"],
        input="correct horse battery\n",
    )
    assert r.exit_code == 0, r.output
    url = f"sqlite:///{tmp_path / 'h' / 'palimpsest.db'}"
    assert current(_settings(url)) == heads() and _diff(url) == []
    assert _tables(url) == set(SQLModel.metadata.tables) | {"alembic_version"}

    other = f"sqlite:///{tmp_path / 'other.db'}"  # a DATABASE_URL is migrated by `db upgrade` alone
    monkeypatch.setenv("DATABASE_URL", other)
    for args in (
        ["phases", "list"],
        ["tokens", "create", "--email", "o@x.org"],
        ["reconcile", "--once"],
    ):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 1 and "has no tables yet: run `palimpsest db upgrade`" in r.output, (
            r.output
        )
    assert _tables(other) == set()
    r = CliRunner().invoke(main, ["db", "upgrade"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["phases", "list"])
    # the database answers; no task is imported in this data directory, so none has a phase
    assert r.exit_code == 0 and "tric-binary" not in r.output, r.output


def test_a_database_migrated_by_a_newer_version_is_refused_not_touched(tmp_path, monkeypatch):
    from sqlalchemy import create_engine, text

    from cli.main import main
    from server import create_app

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    eng = create_engine(f"sqlite:///{tmp_path / 'palimpsest.db'}")
    with eng.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = 'f00dfeed0000'"))
    eng.dispose()
    for args in (["db", "upgrade"], ["phases", "list"]):
        r = CliRunner().invoke(main, args)
        assert (
            r.exit_code == 1
            and "f00dfeed0000, which this version of Palimpsest does not know" in r.output
        ), r.output
        assert "Traceback" not in r.output
    with pytest.raises(RuntimeError, match="does not know"):
        create_app({"home": tmp_path, "env": "testing"})
