"""The tables load by subject, when first named (`server.models`), and whatever needs the whole
schema sees all 32 of them: `load_all()`, `schema()`'s create_all, drop_all and sorted_tables,
Alembic's environment (autogenerate finds nothing to change on a database at head), the
migrations' check of an unversioned database, and the web app. Each path runs in a process of
its own that has named no table yet (this one has loaded them all)."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from conftest import REPO
from helpers import fresh_python

from server.models import SUBJECTS

ALL = 33


def _fresh(code: str, home, **env) -> dict:
    """Run `code` in a new interpreter (no table loaded); it prints one JSON document."""
    return json.loads(fresh_python(code, home, **env).strip().splitlines()[-1])


# the package alone, as a module that builds the schema imports it (no table named)
TABLES = (
    "import json; from sqlmodel import SQLModel; import server.models\n"
    "n = lambda: len(SQLModel.metadata.tables); assert n() == 0\n"
)


def test_every_table_is_named_once_and_found_by_name():
    from sqlmodel import SQLModel

    from server import models

    files = sorted(p.stem for p in (REPO / "server" / "models").glob("*.py"))
    assert sorted(models.SUBJECTS) == [f for f in files if f not in ("__init__", "base")]
    declared = {}
    for subject in models.SUBJECTS:
        module = getattr(models, subject)
        declared.update(
            (k, v)
            for k, v in vars(module).items()
            if isinstance(v, type)
            and issubclass(v, models.TableModel)
            and v.__module__ == module.__name__
        )
        assert set(models.SUBJECTS[subject]) == {
            k for k, v in declared.items() if v.__module__ == module.__name__
        }, subject
    assert len(declared) == ALL == len(models.load_all()) == len(SQLModel.metadata.tables)
    for name, table in declared.items():
        assert getattr(models, name) is table
        assert name in dir(models)


def test_a_table_loads_its_subject_and_what_its_foreign_keys_name(tmp_path):
    got = _fresh(
        TABLES + "from server.models import User, ApiToken\na = n()\n"
        "from server.models import Score\n"
        "print(json.dumps([a, sorted(SQLModel.metadata.tables)]))",
        tmp_path,
    )
    assert got[0] == 3  # the accounts' tables
    # a score: the submissions' tables, and the phases, teams, competitions and accounts they name
    assert "score" in got[1] and "phase" in got[1] and "team" in got[1] and "competition" in got[1]
    assert "auditlog" not in got[1] and "assessmentcampaign" not in got[1]


@pytest.mark.parametrize("subject", sorted(SUBJECTS))
def test_each_subject_loads_the_tables_its_foreign_keys_name(subject, tmp_path):
    """A subject's module loaded alone: every foreign key of every table loaded resolves, and a
    flush can sort each table's writes (SQLAlchemy resolves every foreign key then), so a row of
    any of its tables can be written in a process that named nothing else."""
    got = _fresh(
        TABLES + f"from server.models import {subject}\n"
        "from sqlalchemy.orm import configure_mappers; configure_mappers()\n"
        "for t in list(SQLModel.metadata.tables.values()):\n"
        "    for fk in t.foreign_keys: fk.column\n"
        "from sqlalchemy import inspect\n"
        f"for name in server.models.SUBJECTS[{subject!r}]:\n"
        "    inspect(getattr(server.models, name))._sorted_tables\n"
        "print(n())",
        tmp_path,
    )
    assert len(SUBJECTS[subject]) <= got < ALL


def test_whole_schema_operations_see_every_table(tmp_path):
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    pre = TABLES + f"from sqlalchemy import create_engine; e = create_engine({url!r})\n"
    assert _fresh(
        pre + "print(json.dumps([len(server.models.schema().sorted_tables), n()]))", tmp_path
    ) == [
        ALL,
        ALL,
    ]
    assert _fresh(pre + "server.models.schema().create_all(e); print(n())", tmp_path) == ALL
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone() == (ALL,)
    con.close()
    assert _fresh(pre + "server.models.schema().drop_all(e); print(n())", tmp_path) == ALL
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone() == (0,)
    con.close()
    assert (
        _fresh(TABLES + "from server import models; models.load_all(); print(n())", tmp_path) == ALL
    )


def test_nothing_builds_the_schema_from_the_metadata_of_the_tables_loaded_so_far():
    """`SQLModel.metadata` holds the tables loaded so far: building, emptying or ordering the
    whole database from it would miss some. Every such use goes through `models.schema()`."""
    pattern = re.compile(r"SQLModel\.metadata\.(create_all|drop_all|sorted_tables)")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for top in ("server", "cli", "tests", "benchmarks")
        for path in sorted((REPO / top).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and path.name != "test_models_lazy.py"
    ]
    assert not found, "use server.models.schema() instead:\n" + "\n".join(found)


def test_alembics_environment_compares_every_table(tmp_path):
    """On a database at head, Alembic's check (autogenerate, through server/migrations/env.py)
    finds nothing to add or drop: it would list every table not loaded as one to drop."""
    home = tmp_path / "h"
    got = _fresh(
        TABLES + "from alembic import command\n"
        "from server.migrate import alembic_config, upgrade\n"
        "from server.settings import get_settings\n"
        "s = get_settings(); upgrade(s); command.check(alembic_config(s)); print(n())",
        home,
    )
    assert got == ALL


def test_the_check_of_an_unversioned_database_knows_every_table(tmp_path):
    """A database with one of the tables and no alembic_version is unversioned (not empty), even
    in a process that named no table."""
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE judgment (id INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    got = _fresh(
        TABLES + "from sqlalchemy import create_engine\nfrom server.migrate import status\n"
        f"print(json.dumps(status(create_engine({f'sqlite:///{db}'!r}))[0]))",
        tmp_path,
    )
    assert got == "unversioned"


def test_the_web_app_loads_every_table(tmp_path):
    home = tmp_path / "h"
    got = _fresh(
        TABLES + "from server.migrate import upgrade\nfrom server.settings import get_settings\n"
        "upgrade(get_settings())\nfrom server.app import build_app\n"
        "build_app({'TESTING': True}); print(n())",
        home,
    )
    assert got == ALL
