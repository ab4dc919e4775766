"""Production wiring: the compose file names its services and migrates before they start (the
migrations themselves: tests/test_migrations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
    # a one-shot `db upgrade` once PostgreSQL is healthy; everything that uses the database waits
    # for it to finish successfully (the app and the workers refuse a database not at head)
    migrate = services["migrate"]
    assert migrate["command"] == ["palimpsest", "db", "upgrade"] and migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("web", "worker", "reconciler", "baselines-worker"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }, name
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert (
            services[name]["environment"]["DATABASE_URL"] == migrate["environment"]["DATABASE_URL"]
        )
    assert services["worker"]["command"] == [
        "palimpsest",
        "worker",
        "--queue",
        "boards",
        "--queue",
        "scoring",
        "--queue",
        "stats",
    ]
    assert (REPO / "docker" / "Dockerfile").read_text().count("gunicorn") >= 1
    # the GPU machine's worker runs the baseline runs, from its own image, with the GPU reserved
    gpu = services["baselines-worker"]
    assert gpu["command"] == ["palimpsest", "worker", "--queue", "baselines"] and gpu[
        "profiles"
    ] == ["gpu"]
    assert gpu["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert (REPO / gpu["build"]["dockerfile"]).is_file()
    from click.testing import CliRunner

    from cli.main import main

    for svc in (
        "worker",
        "baselines-worker",
    ):  # the commands the images run exist, with those queues
        r = CliRunner().invoke(main, [*services[svc]["command"][1:], "--help"])
        assert r.exit_code == 0 and "baselines" in r.output, r.output


def test_embedded_redis_config_persists_and_never_listens_on_tcp(tmp_path):
    from server.jobs.embedded import EmbeddedRedis

    conf = EmbeddedRedis(tmp_path).config_text()
    assert "port 0" in conf and "appendonly yes" in conf and "maxmemory-policy noeviction" in conf
    assert "6379" not in conf


def test_the_server_commands_load_only_when_one_runs():
    """`palimpsest --help` lists the server's commands from cli.main.SERVER_COMMANDS without loading
    the server (no Flask, RQ, SQLAlchemy, Redis); running one loads it; the table and the
    server's commands agree."""
    import subprocess
    import sys

    import click

    from cli.main import SERVER_COMMANDS
    from server.cli import register

    code = (
        "import sys\nfrom cli.main import main\n"
        "try:\n    main(['--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('server.cli', 'flask', 'rq', 'sqlmodel', 'sqlalchemy', 'redis')"
        " if m in sys.modules]\n"
        "print(heavy)\nsys.exit(1 if heavy else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "serve" in r.stdout and "Run the web app" in r.stdout
    group = click.Group()
    register(group)
    assert set(group.commands) == set(SERVER_COMMANDS)
    for name, help_text in SERVER_COMMANDS.items():
        assert group.commands[name].get_short_help_str(1000) == help_text, name
