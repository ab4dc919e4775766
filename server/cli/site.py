"""The site's own processes: settings, serve, worker, reconcile."""

from __future__ import annotations

import json
import logging
import os
import sys

import click

import server
from server.cli.common import (
    QUEUE_CHOICES,
    Refused,
    done_quickly,
    home_option,
    local_engine,
    local_settings,
)


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.command("settings")
    @click.option("--markdown", is_flag=True, help="The table of docs/settings.md.")
    @click.option("--json", "as_json", is_flag=True, help="One JSON object: each setting's value.")
    @home_option
    @done_quickly
    def settings_(markdown, as_json):
        """Print every setting: its value here (secrets masked), or the docs' table."""
        from server.settings import settings_markdown

        if markdown:
            click.echo(settings_markdown(), nl=False)
            return
        values = local_settings().model_dump(mode="json")
        for secret in ("secret_key", "smtp_password", "s3_secret_key"):
            if values.get(secret):
                values[secret] = "***"
        if as_json:
            click.echo(json.dumps(values, indent=2))
            return
        for name, value in values.items():
            click.echo(f"{name:<24} {value}")

    @main.command("serve")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
    @click.option(
        "--demo", is_flag=True, help="Seed synthetic demo tasks, teams, submissions and baselines."
    )
    @click.option(
        "--workers",
        default=1,
        show_default=True,
        type=click.IntRange(1, 32),
        help="Worker processes to run.",
    )
    @home_option
    def serve(host, port, demo, workers):
        """Run the web app, an embedded Redis, workers and the reconciler on this machine."""
        from server.jobs.supervisor import Supervisor
        from server.migrate import SchemaError
        from server.settings import SettingsError

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        try:
            code = Supervisor(
                local_settings(),
                host=host,
                port=port,
                app_factory=server.create_app,
                seed=_seed_demo if demo else None,
                workers=workers,
                echo=lambda m: click.echo(m, err=True),
            ).run()
        except (SchemaError, SettingsError) as e:
            raise Refused(str(e)) from None
        # everything is stopped (workers, Redis, the web server, the run directory's lock): the
        # interpreter's teardown of the heap the demo's models and statistics built took seconds
        # after "stopped" was said, so the process ends here, its output flushed
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def _seed_demo(settings, engine) -> str:
        """The demo's data, once the site serves; the line `serve --demo` prints."""
        # the demo's importers load only for `serve --demo`
        from server.demo import ORGANIZER_EMAIL, ORGANIZER_PASSWORD, seed_demo

        r = seed_demo(settings, engine)
        return (
            f"demo data: {r['submissions']} submissions queued; imported synthetic tasks "
            f"{', '.join(r['imported']) or '(none: already imported)'}; organizer login "
            f"{ORGANIZER_EMAIL} / {ORGANIZER_PASSWORD}"
        )

    @main.command("worker")
    @click.option(
        "--queue",
        "queues",
        multiple=True,
        type=click.Choice(QUEUE_CHOICES),
        help="Queue(s) to work on (default: all, the boards' renders first, then scoring).",
    )
    @click.option("--burst", is_flag=True, help="Exit once the queues are empty.")
    @click.option(
        "--attach",
        metavar="URL",
        help="Attach this machine to the site at URL: claim the code runs of the token's "
        "competitions over HTTPS and run them here (no database, Redis or store needed).",
    )
    @click.option(
        "--token",
        envvar="PALIMPSEST_WORKER_TOKEN",
        help="With --attach: the run worker's token (plw_...; or PALIMPSEST_WORKER_TOKEN).",
    )
    @click.option(
        "--models",
        envvar="PALIMPSEST_RUN_MODELS",
        default="",
        help="With --attach: folders of models the runs may read (':'-separated).",
    )
    @home_option
    def worker(queues, burst, attach, token, models):
        """Run a scoring worker (RQ, JSON-serialized jobs) against DATABASE_URL and REDIS_URL, or
        with --attach a run worker that holds a token alone."""
        if attach:
            if not token:
                raise Refused("--attach needs --token (a run worker's token, plw_...)")
            # the attached worker loads the sandbox and HTTP alone: no database, Redis or store
            from server.jobs.attached import serve

            logging.basicConfig(level=logging.WARNING, format="%(asctime)s attached %(message)s")
            paths = [p for p in models.split(":") if p]
            sys.exit(serve(attach, token, once=burst, models=paths))
        from server.jobs.worker import run
        from server.migrate import SchemaError

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker %(message)s")
        try:
            code = run(local_settings(), tuple(queues) or QUEUE_CHOICES, burst=burst)
        except SchemaError as e:
            raise Refused(str(e)) from None
        sys.exit(code)

    @main.command("reconcile")
    @click.option("--once", is_flag=True, help="One pass, then print what it did.")
    @home_option
    def reconcile_cmd(once):
        """Re-enqueue what the database says is pending but no live job holds (run one per site)."""
        from server.jobs.queue import connect
        from server.jobs.reconciler import reconcile, run_forever

        logging.basicConfig(level=logging.INFO, format="%(asctime)s reconciler %(message)s")
        settings = local_settings()
        if once:
            stats = reconcile(settings, local_engine(settings), connect(settings))
            click.echo(json.dumps(stats))
            if stats.get("errors"):  # a step failed: the exit says so
                sys.exit(1)
            return
        run_forever(settings, local_engine(settings))
