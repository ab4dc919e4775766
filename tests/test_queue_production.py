"""Production wiring: Alembic migrations match the models; the compose file names its services."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _upgrade_and_compare(url: str):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine
    from sqlmodel import SQLModel

    from server.migrate import upgrade
    from server.settings import Settings

    upgrade(Settings(database_url=url), "head")
    eng = create_engine(url)
    with eng.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c), SQLModel.metadata)
    eng.dispose()
    return diff


def test_migrations_build_the_models_schema_on_sqlite(tmp_path):
    assert _upgrade_and_compare(f"sqlite:///{tmp_path / 'm.db'}") == []


@pytest.mark.postgres
def test_migrations_build_the_models_schema_on_postgres(request):
    import psycopg

    url = request.getfixturevalue("pg_database")
    admin_url = url.replace("postgresql+psycopg://", "postgresql://")
    name = url.rsplit("/", 1)[1] + "_mig"
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        assert _upgrade_and_compare(url.rsplit("/", 1)[0] + "/" + name) == []
    finally:
        with psycopg.connect(admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_compose_file_names_web_worker_redis_and_postgres_with_health_checks():
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse the compose file")
    spec = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = spec["services"]
    assert {"web", "worker", "redis", "postgres", "reconciler"} <= set(services)
    for name in ("web", "worker", "redis", "postgres"):
        assert "healthcheck" in services[name], name
    redis_cmd = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_cmd and "--maxmemory-policy noeviction" in redis_cmd
    assert "server:create_app()" in services["web"]["command"]
    assert services["worker"]["command"] == ["palimpsest", "worker", "--queue", "scoring"]
    assert (REPO / "docker" / "Dockerfile").read_text().count("gunicorn") >= 1
    # the GPU machine's worker runs the baseline runs, from its own image, with the GPU reserved
    gpu = services["baselines-worker"]
    assert gpu["command"] == ["palimpsest", "worker", "--queue", "baselines"] and gpu["profiles"] == ["gpu"]
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert (REPO / gpu["build"]["dockerfile"]).is_file()
    from click.testing import CliRunner

    from cli.main import main

    for svc in ("worker", "baselines-worker"):  # the commands the images run exist, with those queues
        r = CliRunner().invoke(main, [*services[svc]["command"][1:], "--help"])
        assert r.exit_code == 0 and "baselines" in r.output, r.output


def test_embedded_redis_config_persists_and_never_listens_on_tcp(tmp_path):
    from server.embedded import EmbeddedRedis

    conf = EmbeddedRedis(tmp_path).config_text()
    assert "port 0" in conf and "appendonly yes" in conf and "maxmemory-policy noeviction" in conf
    assert "6379" not in conf


def test_server_cli_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys, server.cli\n"
            "heavy = [m for m in ('flask', 'rq', 'sqlmodel', 'sqlalchemy', 'redis') if m in sys.modules]\n"
            "print(heavy)\nsys.exit(1 if heavy else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_db_upgrade_adopts_a_database_the_app_built(tmp_path):
    """`palimpsest db upgrade` on a database made by the app's create_all stamps, then upgrades."""
    from sqlalchemy import create_engine, inspect, text

    from server import create_app
    from server.migrate import upgrade
    from server.settings import Settings

    create_app({"home": tmp_path, "env": "testing"})
    settings = Settings.from_env(home=tmp_path, database_url=None)
    upgrade(settings)
    upgrade(settings)  # and again: nothing to do
    eng = create_engine(settings.sqlalchemy_url())
    try:
        assert "alembic_version" in inspect(eng).get_table_names()
        with eng.connect() as c:
            assert c.execute(text("select version_num from alembic_version")).scalar()
    finally:
        eng.dispose()
