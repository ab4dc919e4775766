"""What every server command shares: the data directory option, the quick exit of a short
command, the settings, engine and session of the local database, the refusal a command prints,
the task and phase lookups, option types and the report of an action."""

from __future__ import annotations

import atexit
import functools
import gc
import json
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    pass

QUEUE_CHOICES = ("boards", "scoring", "stats", "baselines", "agreement", "runs")


def home_option(f):
    def set_home(ctx, param, value):
        if value is not None:
            os.environ["PALIMPSEST_HOME"] = str(value)
        return value

    return click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=set_home,
        is_eager=True,
        help="Data directory (default: $PALIMPSEST_HOME or ~/.local/share/palimpsest).",
    )(f)


def done_quickly(command):
    """A short command's end: once it has done its work and printed, the process ends without the
    interpreter's teardown of every module it loaded (0.3 s of CPU here, as much as the work of
    the command itself). Its database connections are closed, the exit handlers run and stdout
    and stderr flushed first. Only in a real `palimpsest` process with no other thread running:
    in click's CliRunner (tests) or under pytest's capture the command returns as usual."""

    @functools.wraps(command)
    def run_then_exit(*args, **kwargs):
        # the cyclic collector finds nothing to free while a short command loads its modules and
        # models (tens of thousands of objects, all kept), yet runs dozens of times: a tenth of
        # the command's CPU. Off for the command, on again if it returns (tests).
        collecting = gc.isenabled()
        gc.disable()
        try:
            result = command(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()
        if (
            sys.stdout is sys.__stdout__
            and sys.stderr is sys.__stderr__
            and threading.active_count() == 1
        ):
            db = sys.modules.get("server.db")
            for engine in list(getattr(db, "_engines", {}).values()):
                engine.dispose()
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return result

    return run_then_exit


def local_settings():
    """The settings of a local command (the environment, PALIMPSEST_HOME)."""
    from server.settings import get_settings

    return get_settings()


def local_engine(settings=None):
    """The database of a local command, at the migrations' head: the embedded default is upgraded
    (created when new); a DATABASE_URL that is behind is refused, saying to run `db upgrade`."""
    from server.migrate import SchemaError, prepare

    try:
        return prepare(settings or local_settings())
    except SchemaError as e:
        raise Refused(str(e)) from None


def local_session(settings):
    """A session on the local database (the operator's shell acts as an organizer there)."""
    from sqlmodel import Session

    from server.jobs.dispatch import KEY, Jobs

    # what an action queues goes to the local server's Redis after its commit; if that cannot be
    # reached, the command says so and the reconciler enqueues it later
    jobs = Jobs(settings, warn=lambda m: click.echo(m, err=True))
    return Session(local_engine(settings), expire_on_commit=False, info={KEY: jobs})


class Refused(click.ClickException):
    """A one-line refusal (exit 1); a command run with --json also prints it on stdout as
    {"error": {"message", "exit_status"}}, so that its stdout is always one JSON document."""

    def __init__(self, message: str):
        super().__init__(message)
        ctx = click.get_current_context(
            silent=True
        )  # raised inside the command: its options are known
        self.as_json = bool(ctx is not None and ctx.params.get("as_json"))

    def show(self, file=None) -> None:
        if self.as_json:
            click.echo(
                json.dumps(
                    {"error": {"message": self.format_message(), "exit_status": self.exit_code}}
                )
            )
        super().show(file)


def task_or_refuse(task_id: str):
    from tasks import get_task

    try:
        return get_task(task_id)
    except Exception as e:  # noqa: BLE001 — TaskNotFound says which tasks exist
        raise Refused(str(e)) from None


def phase_or_refuse(s, task, name: str):
    from server.actions import common
    from server.actions.phases import ensure_phases
    from server.exceptions import NotFound

    ensure_phases(s=s)
    try:
        return common.phase(s, task.id, name)
    except NotFound as e:  # names the phases the task has
        raise Refused(e.message) from None


def echo_model(result) -> None:
    """An action's declared result as one JSON document, as the API answers it."""
    click.echo(json.dumps(result.model_dump(mode="json", exclude_unset=True)))


class OptionalInt(click.ParamType):
    name = "N|none"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int):
            return value
        if str(value).lower() in ("none", "unlimited", "-"):
            return "none"
        try:
            n = int(value)
        except ValueError:
            self.fail(f"{value!r} is not a whole number or 'none'", param, ctx)
        if n < 0:
            self.fail("must be 0 or more", param, ctx)
        return n


class When(click.ParamType):
    name = "ISO-TIME|none"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, datetime):
            return value
        if str(value).lower() in ("none", "-"):
            return "none"
        try:
            t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time such as 2026-01-31T23:59Z", param, ctx)
        if t.tzinfo is not None:
            t = t.astimezone(timezone.utc).replace(tzinfo=None)
        return t


def report(rep, done: str, as_json: bool) -> None:
    """A verify's or a restore's report: every problem on its own line; exit 1 on any."""
    if as_json:
        click.echo(json.dumps(rep.as_dict(), indent=2))
    else:
        for p in rep.problems:
            click.echo(f"MISMATCH {p}", err=True)
        checks = ", ".join(f"{k}: {v}" for k, v in rep.checks.items())
        t = rep.timings.get("total", 0.0)
        click.echo(
            f"{rep.archive}: {done} ({checks}) in {t:.1f} s"
            if rep.ok
            else f"{rep.archive}: {len(rep.problems)} problem(s) ({checks})"
        )
    if not rep.ok:
        sys.exit(1)
