"""The server's commands on `palimpsest`: serve, worker, reconcile, users, tokens, phases, db.

cli/main.py loads this module only when one of these commands runs (`palimpsest --help` lists them
from its own table); each command imports only what it uses.
"""

from __future__ import annotations

import atexit
import functools
import gc
import inspect
import json
import logging
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

import server  # the package alone: `create_app` builds the app when `serve` runs it

if TYPE_CHECKING:
    from server.exceptions import BundleRefused

# Nothing of the server is imported here: each command imports what it uses when it runs, so a
# command that lists competitions or makes a token loads the models and the database, not the web
# app, the scorer or the statistics (benchmarks/bench_cli.py measures every command).

QUEUE_CHOICES = ("scoring", "baselines", "agreement", "runs")


def _home_option(f):
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


def _done_quickly(command):
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


def _settings():
    """The settings of a local command (the environment, PALIMPSEST_HOME)."""
    from server.settings import get_settings

    return get_settings()


def _engine(settings=None):
    """The database of a local command, at the migrations' head: the embedded default is upgraded
    (created when new); a DATABASE_URL that is behind is refused, saying to run `db upgrade`."""
    from server.migrate import SchemaError, prepare

    try:
        return prepare(settings or _settings())
    except SchemaError as e:
        raise Refused(str(e)) from None


def _session(settings):
    """A session on the local database (the operator's shell acts as an organizer there)."""
    from sqlmodel import Session

    return Session(_engine(settings), expire_on_commit=False)


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


def _task(task_id: str):
    from tasks import get_task

    try:
        return get_task(task_id)
    except Exception as e:  # noqa: BLE001 — TaskNotFound says which tasks exist
        raise Refused(str(e)) from None


def _phase(s, task, name: str):
    from sqlalchemy import select

    from server.domain.submissions import ensure_phases
    from server.models import Phase

    ensure_phases(s)
    p = s.execute(
        select(Phase).where(Phase.task_id == task.id, Phase.name == name)
    ).scalar_one_or_none()
    if p is None:
        names = s.execute(select(Phase.name).where(Phase.task_id == task.id)).scalars().all()
        raise Refused(
            f"task {task.id!r} has no phase {name!r} (phases: {', '.join(names) or 'none'})"
        )
    return p


class _OptionalInt(click.ParamType):
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


class _When(click.ParamType):
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


def _report(rep, done: str, as_json: bool) -> None:
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


def register(main: click.Group) -> None:
    """Add the server's commands to the `palimpsest` group."""

    @main.command("settings")
    @click.option("--markdown", is_flag=True, help="The table of docs/settings.md.")
    @click.option("--json", "as_json", is_flag=True, help="One JSON object: each setting's value.")
    @_home_option
    @_done_quickly
    def settings_(markdown, as_json):
        """Print every setting: its value here (secrets masked), or the docs' table."""
        from server.settings import settings_markdown

        if markdown:
            click.echo(settings_markdown(), nl=False)
            return
        values = _settings().model_dump(mode="json")
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
    @_home_option
    def serve(host, port, demo, workers):
        """Run the web app, an embedded Redis, workers and the reconciler on this machine."""
        from server.jobs.supervisor import Supervisor
        from server.migrate import SchemaError
        from server.settings import SettingsError

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        try:
            code = Supervisor(
                _settings(),
                host=host,
                port=port,
                app_factory=server.create_app,
                seed=_seed_demo if demo else None,
                workers=workers,
                echo=lambda m: click.echo(m, err=True),
            ).run()
        except (SchemaError, SettingsError) as e:
            raise Refused(str(e)) from None
        sys.exit(code)

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
        help="Queue(s) to work on (default: all, scoring first).",
    )
    @click.option("--burst", is_flag=True, help="Exit once the queues are empty.")
    @_home_option
    def worker(queues, burst):
        """Run a scoring worker (RQ, JSON-serialized jobs) against DATABASE_URL and REDIS_URL."""
        from server.jobs.worker import run
        from server.migrate import SchemaError

        logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker %(message)s")
        try:
            code = run(_settings(), tuple(queues) or QUEUE_CHOICES, burst=burst)
        except SchemaError as e:
            raise Refused(str(e)) from None
        sys.exit(code)

    @main.command("reconcile")
    @click.option("--once", is_flag=True, help="One pass, then print what it did.")
    @_home_option
    def reconcile_cmd(once):
        """Re-enqueue what the database says is pending but no live job holds (run one per site)."""
        from server.jobs.queue import connect
        from server.jobs.reconciler import reconcile, run_forever

        logging.basicConfig(level=logging.INFO, format="%(asctime)s reconciler %(message)s")
        settings = _settings()
        if once:
            click.echo(json.dumps(reconcile(settings, _engine(settings), connect(settings))))
            return
        run_forever(settings, _engine(settings))

    @main.group("users")
    def users():
        """Accounts: create one, print a password-reset link, sign one out everywhere."""

    @users.command("create")
    @click.option("--email", required=True)
    @click.option(
        "--password-stdin",
        is_flag=True,
        required=True,
        help="Read the password from standard input.",
    )
    @click.option(
        "--admin",
        "--organizer",
        "organizer",
        is_flag=True,
        help="Make the account a site administrator (creates competitions, acts in every one).",
    )
    @_home_option
    @_done_quickly
    def users_create(email, password_stdin, organizer):
        """Create an account; the password is read from standard input."""
        from server.actions.accounts import create_account

        password = sys.stdin.readline().rstrip("\r\n")
        with _session(_settings()) as s:
            try:
                u = create_account(
                    s=s, email=email, password=password, is_admin=organizer, actor=None, via="cli"
                )
            except ValueError as e:
                raise Refused(str(e)) from None
            click.echo(
                f"created {'site administrator' if organizer else 'user'} {u.email} (id {u.id})"
            )

    def _user_by_email(s, email):
        from sqlalchemy import select

        from server.jobs.emails import lookup_form
        from server.models import User

        u = s.execute(select(User).where(User.email == lookup_form(email))).scalar_one_or_none()
        if u is None:
            raise Refused(f"no user with email {email!r}")
        return u

    @users.command("reset-link")
    @click.argument("email")
    @click.option(
        "--base-url",
        default=None,
        help="The site's address (default: $PALIMPSEST_BASE_URL, else http://127.0.0.1:5000).",
    )
    @_home_option
    @_done_quickly
    def users_reset_link(email, base_url):
        """Print a single-use password-reset link for an account (for a server that sends no mail).

        It expires after PALIMPSEST_RESET_MINUTES; it is signed with PALIMPSEST_SECRET_KEY, which
        must be the server's."""
        from server.actions.accounts import reset_link_for

        settings = _settings()
        with _session(settings) as s:
            u = _user_by_email(s, email)
            link = reset_link_for(s=s, settings=settings, user=u, base_url=base_url, via="cli")
        click.echo(link)
        click.echo(
            f"valid {settings.reset_minutes} minutes, once; hand it to {u.email} in private",
            err=True,
        )

    @users.command("sign-out")
    @click.argument("email")
    @_home_option
    @_done_quickly
    def users_sign_out(email):
        """End every session of an account (its API tokens stay: revoke those apart)."""
        from server.actions.accounts import sign_out_everywhere

        with _session(_settings()) as s:
            u = _user_by_email(s, email)
            sign_out_everywhere(s=s, user=u, via="cli")
        click.echo(f"every session of {u.email} is signed out")

    @main.group("tokens")
    def tokens():
        """API tokens (shown once, stored as sha256)."""

    @tokens.command("create")
    @click.option("--email", required=True)
    @click.option("--name", default="cli", show_default=True, help="A label for the token.")
    @_home_option
    @_done_quickly
    def tokens_create(email, name):
        """Print a new API token for a user, once; only its sha256 is stored."""
        from sqlalchemy import select

        from server.actions.accounts import new_token
        from server.jobs.emails import lookup_form
        from server.models import User

        with _session(_settings()) as s:
            u = s.execute(select(User).where(User.email == lookup_form(email))).scalar_one_or_none()
            if u is None:
                raise Refused(f"no user with email {email!r}")
            _, plaintext = new_token(s=s, user=u, name=name)
        click.echo(plaintext)

    @main.group("competitions")
    def competitions():
        """Competitions: their state, tasks and pages."""

    @competitions.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @_home_option
    @_done_quickly
    def competitions_list(as_json):
        """List every competition, drafts included (the server's shell sees what a site
        administrator sees), newest first."""
        from server.actions import competitions as comp_actions

        with _session(_settings()) as s:
            rows = comp_actions.list_competitions(s=s, viewer=None, operator=True)
        if as_json:
            click.echo(json.dumps([c.model_dump(mode="json") for c in rows]))
            return
        for c in rows:
            click.echo(f"{c.id:<24} {c.state:<8} {c.title}  [{', '.join(c.tasks) or 'no task'}]")

    @competitions.command("create")
    @click.argument("source", metavar="BUNDLE|ID")
    @click.option("--title", default=None, help="The title of an empty competition (ID).")
    @click.option(
        "--task", "tasks", multiple=True, metavar="TASK", help="A task it takes (repeatable)."
    )
    @click.option(
        "--state",
        type=click.Choice(["draft", "visible", "archived"]),
        default="draft",
        show_default=True,
    )
    @click.option("--owner", "owner_email", default=None, help="The account made its owner.")
    @click.option(
        "--update",
        is_flag=True,
        help="Apply an edited bundle to its existing competition: a task whose metrics, primary, "
        "files or gold changed gets a new version (its runs rescored), its texts change in place.",
    )
    @click.option("--reason", default="", help="With --update: why (kept with each new version).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @_home_option
    def competitions_create(source, title, tasks, state, owner_email, update, reason, as_json):
        """Create a competition from a bundle (a directory or a .zip holding competition.yaml),
        or an empty one (ID --title T), as the server's shell (a site administrator). A bundle is
        checked in full first: every problem is printed and nothing is created. With --update,
        an edited bundle of an existing competition changes its tasks (docs/bundles.md)."""
        if update:
            return _update_from_bundle(Path(source), reason, as_json)
        from sqlalchemy import select

        from server.actions import bundles as bundle_actions
        from server.actions import competitions as comp_actions
        from server.exceptions import BundleRefused, LifecycleRefused, NotFound, UploadFieldsInvalid
        from server.jobs.emails import lookup_form
        from server.models import User

        settings = _settings()
        bundle = Path(source).exists() and title is None
        with _session(settings) as s:
            owner = None
            if owner_email:
                owner = s.execute(
                    select(User).where(User.email == lookup_form(owner_email))
                ).scalar_one_or_none()
                if owner is None:
                    raise Refused(f"no user with email {owner_email!r}")
            try:
                if bundle:
                    made = bundle_actions.create_from_bundle(
                        s=s, actor=None, source=Path(source), via="cli", settings=settings
                    )
                else:
                    if title is None:
                        raise Refused(
                            f"{source!r} is not a bundle (no such directory or file); an empty "
                            "competition needs --title"
                        )
                    made = comp_actions.create_competition(
                        s=s,
                        actor=None,
                        via="cli",
                        competition=source,
                        title=title,
                        state=state,
                        tasks=tasks,
                    )
                if owner is not None:
                    comp_actions.set_owner(s=s, competition=made.id, user=owner, via="cli")
            except BundleRefused as e:
                _bundle_problems(e, as_json)
            except (UploadFieldsInvalid, LifecycleRefused, NotFound) as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(made.model_dump(mode="json")))
            return
        click.echo(f"created {made.id} ({made.state}): {', '.join(made.tasks) or 'no task'}")

    def _update_from_bundle(source: Path, reason: str, as_json: bool):
        from server.actions import tasks as task_actions

        settings = _settings()
        with _session(settings) as s:
            try:
                got = task_actions.update_from_bundle(
                    s=s,
                    actor=None,
                    source=source,
                    via="cli",
                    settings=settings,
                    reason=reason,
                    enqueue=_local_enqueue(settings),
                )
            except task_actions.BundleRefused as e:
                _bundle_problems(e, as_json)
            except (task_actions.LifecycleRefused, task_actions.NotFound) as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(got.model_dump(mode="json")))
            return
        for t in got.tasks:
            click.echo(task_actions.tm.change_line(t.model_dump(mode="json")))
        for n in got.notes:
            click.echo(f"note: {n}")

    def _bundle_problems(e: BundleRefused, as_json: bool):
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "error": {
                            "code": "invalid_bundle",
                            "message": e.message,
                            "problems": e.problems,
                            "total": len(e.problems),
                        }
                    }
                )
            )
        else:
            click.echo(f"error: {e.message}", err=True)
            for p in e.problems:
                where = p["id"] + (f" (line {p['line']})" if p.get("line") else "")
                click.echo(f"  {where}: {p['message']}", err=True)
        sys.exit(1)

    @competitions.command("export")
    @click.argument("competition", metavar="ID")
    @click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
    @click.option(
        "--with-gold", is_flag=True, help="Include the hidden gold (a clone on another server)."
    )
    @_home_option
    def competitions_export(competition, output, with_gold):
        """Write a competition as a bundle zip that re-creates it: pages, terms, settings, fact
        sheet, tasks, their files and phases (the hidden gold with --with-gold)."""
        from server.actions import bundles as bundle_actions
        from server.exceptions import NotFound

        settings = _settings()
        with _session(settings) as s:
            try:
                bundle_actions.export_competition(
                    s=s,
                    actor=None,
                    competition=competition,
                    out=Path(output),
                    include_gold=with_gold,
                    settings=settings,
                )
            except NotFound as e:
                raise Refused(e.message) from None
        click.echo(f"wrote {output}", err=True)

    @competitions.command("clone")
    @click.argument("competition", metavar="ID")
    @click.argument("new_id", metavar="NEW_ID")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @_home_option
    def competitions_clone(competition, new_id, as_json):
        """A new draft competition NEW_ID made from ID (next year's edition): its pages, settings,
        tasks (their ids suffixed with NEW_ID), data and phases; no participant, run or role."""
        from server.actions import bundles as bundle_actions
        from server.exceptions import BundleRefused, NotFound

        settings = _settings()
        with _session(settings) as s:
            try:
                made = bundle_actions.clone_competition(
                    s=s,
                    actor=None,
                    competition=competition,
                    new_id=new_id,
                    via="cli",
                    settings=settings,
                )
            except BundleRefused as e:
                _bundle_problems(e, as_json)
            except NotFound as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(made.model_dump(mode="json")))
            return
        click.echo(f"created {made.id} ({made.state}): {', '.join(made.tasks)}")

    @main.group("phases")
    def phases():
        """Phases of a task: windows, limits and the public part of the test gold."""

    @phases.command("list")
    @click.argument("task_id", metavar="[TASK]", required=False)
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @_home_option
    @_done_quickly
    def phases_list(task_id, as_json):
        """List a task's phases (every task's without TASK) with their window and limits, as
        `palimpsest organizer phases list TASK` does over the API."""
        from sqlalchemy import select

        from server.domain.submissions import ensure_phases, phase_state
        from server.models import Phase

        q = select(Phase).order_by(Phase.task_id, Phase.name)
        if task_id is not None:
            q = q.where(Phase.task_id == _task(task_id).id)
        with _session(settings := _settings()) as s:
            ensure_phases(s, settings.home)
            rows = list(s.execute(q).scalars())
            if as_json:
                click.echo(
                    json.dumps(
                        [
                            {
                                "task": p.task_id,
                                "name": p.name,
                                "split": p.split,
                                "state": phase_state(p),
                                "opens_at": p.opens_at.isoformat() if p.opens_at else None,
                                "closes_at": p.closes_at.isoformat() if p.closes_at else None,
                                "limits": {
                                    "daily": p.daily_limit,
                                    "total": p.total_limit,
                                    "concurrent": p.concurrent_limit,
                                },
                                "public_fraction": p.public_fraction,
                            }
                            for p in rows
                        ]
                    )
                )
                return
            for p in rows:
                click.echo(
                    f"{p.task_id:<14} {p.name:<5} {phase_state(p):<7} "
                    f"opens {p.opens_at or '-'} closes {p.closes_at or '-'} "
                    f"daily {p.daily_limit} total {p.total_limit} concurrent {p.concurrent_limit} "
                    f"public {p.public_fraction}"
                )

    @phases.command("set")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option(
        "--opens", type=_When(), help="Opening time (ISO 8601, UTC if no offset) or 'none'."
    )
    @click.option(
        "--closes", type=_When(), help="Closing time (ISO 8601, UTC if no offset) or 'none'."
    )
    @click.option(
        "--daily-limit",
        type=_OptionalInt(),
        help="Scored submissions per team per UTC day, or 'none'.",
    )
    @click.option(
        "--total-limit",
        type=_OptionalInt(),
        help="Scored submissions per team in the phase, or 'none'.",
    )
    @click.option(
        "--concurrent-limit",
        type=_OptionalInt(),
        help="Submissions waiting or running at once, or 'none'.",
    )
    @click.option(
        "--public-fraction",
        type=click.FloatRange(0, 1, min_open=True),
        help="Share of the test gold scored publicly while the phase runs (1 = no private part).",
    )
    @_home_option
    @_done_quickly
    def phases_set(
        task_id,
        phase_name,
        opens,
        closes,
        daily_limit,
        total_limit,
        concurrent_limit,
        public_fraction,
    ):
        """Create or change a phase of a task."""
        from server.actions.phases import set_phase
        from server.domain.submissions import ensure_phases
        from server.exceptions import LifecycleRefused

        task = _task(task_id)
        changes = {}
        for field, value in (
            ("opens_at", opens),
            ("closes_at", closes),
            ("daily_limit", daily_limit),
            ("total_limit", total_limit),
            ("concurrent_limit", concurrent_limit),
            ("public_fraction", public_fraction),
        ):
            if value is not None:
                changes[field] = None if value == "none" else value
        with _session(settings := _settings()) as s:
            ensure_phases(s, settings.home)
            try:
                p = set_phase(
                    s=s,
                    task_id=task.id,
                    phase=phase_name,
                    changes=changes,
                    actor=None,
                    home=settings.home,
                    via="cli",
                )
            except LifecycleRefused as e:
                raise Refused(e.message) from None
            click.echo(
                f"{task.id} {phase_name}: opens {p.opens_at or '-'}, closes {p.closes_at or '-'}, "
                f"daily {p.limits.daily}, total {p.limits.total}, concurrent "
                f"{p.limits.concurrent}, public fraction {p.public_fraction}"
            )

    def _phase_command(name: str, help_text: str):
        @phases.command(name, help=help_text)
        @click.argument("task_id", metavar="TASK")
        @click.argument("phase_name", metavar="PHASE")
        @click.option(
            "--reason",
            default="",
            help="publish: why this correction (needed from version 2 on); refused elsewhere.",
        )
        @click.option(
            "--close",
            "close_first",
            is_flag=True,
            help="publish: close an open phase in the same step; refused elsewhere.",
        )
        @click.option(
            "--json", "as_json", is_flag=True, help="Print the phase's new state as JSON."
        )
        @_home_option
        @_done_quickly
        def command(task_id, phase_name, reason, close_first, as_json):
            from server.actions.phases import PHASE_ACTIONS
            from server.exceptions import LifecycleRefused

            task = _task(task_id)
            settings = _settings()
            # what the action declares it takes: an option it does not take is refused, never
            # ignored (`phases freeze T P --close`)
            takes = inspect.signature(PHASE_ACTIONS[name]).parameters
            given = {"reason": reason, "close_first": close_first}
            for key, flag in (("reason", "--reason"), ("close_first", "--close")):
                if given[key] and key not in takes:
                    raise Refused(f"phases {name} takes no {flag}")
            extra = {k: v for k, v in given.items() if k in takes}
            if "settings" in takes:
                extra["settings"] = settings
            with _session(settings) as s:
                p = _phase(s, task, phase_name)
                try:
                    result = PHASE_ACTIONS[name](
                        s=s, task_id=task.id, phase=p.name, actor=None, via="cli", **extra
                    )
                except LifecycleRefused as e:
                    raise Refused(e.message) from None
                out = {
                    "phase": {
                        "task": task.id,
                        "name": p.name,
                        "state": result.phase.state,
                        "closes_at": p.closes_at.isoformat() + "Z" if p.closes_at else None,
                    }
                }
                if result.ranking is not None:
                    out["ranking"] = {
                        "version": result.ranking.version,
                        "sha256": result.ranking.sha256,
                        "published_at": result.ranking.published_at.isoformat() + "Z",
                        "reason": result.ranking.reason,
                    }
            if as_json:
                click.echo(json.dumps(out))
            else:
                extra = (
                    f"; final ranking version {out['ranking']['version']}"
                    if "ranking" in out
                    else ""
                )
                click.echo(f"{task.id} {p.name}: {', '.join(out['phase']['state'])}{extra}")

        return command

    _phase_command("close", "Close a phase now: no further submissions are accepted.")
    _phase_command(
        "freeze", "Freeze a phase's leaderboard: later submissions are not shown to participants."
    )
    _phase_command("unfreeze", "Unfreeze a phase's leaderboard.")
    _phase_command(
        "publish",
        "Publish the final ranking of a closed phase (an immutable snapshot); again, "
        "with --reason, to publish a correction as a new version.",
    )

    @main.group("runs")
    def runs():
        """Organizer actions on submitted runs, at the server's own shell: rescore, hide, remove."""

    def _local_enqueue(settings):
        """Hand rescored runs to the queue; if Redis is down the rows say queued and the
        reconciler enqueues them."""

        def enqueue(ids: list[int]) -> None:
            from server.jobs.queue import connect, enqueue_submission

            try:
                conn = connect(settings)
                for sid in ids:
                    enqueue_submission(conn, sid, settings, replace=True)
            except Exception as e:  # noqa: BLE001 - the reconciler picks them up
                click.echo(
                    f"queued in the database; the reconciler will enqueue them ({e})", err=True
                )

        return enqueue

    @runs.command("rescore")
    @click.argument("submission_id", type=int, metavar="SUBMISSION")
    @click.option("--reason", default="", help="Why, for the audit log.")
    @click.option("--json", "as_json", is_flag=True, help="Print what was queued as JSON.")
    @_home_option
    @_done_quickly
    def runs_rescore(submission_id, reason, as_json):
        """Score a run again."""
        from scorer.errors import PalimpsestError
        from server.actions import submissions as actions

        settings = _settings()
        with _session(settings) as s:
            try:
                result = actions.rescore_submission(
                    s=s,
                    submission_id=submission_id,
                    actor=None,
                    settings=settings,
                    enqueue=_local_enqueue(settings),
                    reason=reason,
                )
            except PalimpsestError as e:  # refused, or no such run
                raise Refused(getattr(e, "message", None) or str(e)) from None
        if as_json:
            click.echo(result.model_dump_json())
        else:
            click.echo(f"submission {submission_id} queued for rescoring")

    def _visibility_command(name: str, help_text: str):
        @runs.command(name, help=help_text)
        @click.argument("submission_id", type=int, metavar="SUBMISSION")
        @click.option("--reason", default="", help="hide, remove: the reason the team is shown.")
        @click.option("--json", "as_json", is_flag=True, help="Print the run's new state as JSON.")
        @_home_option
        @_done_quickly
        def command(submission_id, reason, as_json):
            from scorer.errors import PalimpsestError
            from server.actions import submissions as actions

            settings = _settings()
            with _session(settings) as s:
                try:
                    sub = actions.set_visibility(
                        s=s, submission_id=submission_id, action=name, actor=None, reason=reason
                    )
                except PalimpsestError as e:  # refused, or no such run
                    raise Refused(getattr(e, "message", None) or str(e)) from None
                out = {
                    "id": sub.id,
                    "hidden": bool(sub.hidden),
                    "removed": sub.removed_at is not None,
                    "reason": sub.hidden_reason or "",
                }
            if as_json:
                click.echo(json.dumps(out))
            else:
                click.echo(f"submission {submission_id}: {name}")

        return command

    _visibility_command("hide", "Hide a run from the boards (the team sees the reason).")
    _visibility_command("unhide", "Show a hidden run again.")
    _visibility_command("remove", "Remove a run (kept, never deleted; the team sees the reason).")
    _visibility_command("restore", "Restore a removed run.")

    @main.group("rankings")
    def rankings():
        """Published final rankings (immutable snapshots, numbered versions)."""

    @rankings.command("show")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option(
        "--version",
        "version",
        type=int,
        default=None,
        help="A published version (default: the latest).",
    )
    @click.option(
        "--json", "as_json", is_flag=True, help="Print the snapshot exactly as published (JSON)."
    )
    @_home_option
    @_done_quickly
    def rankings_show(task_id, phase_name, version, as_json):
        """Print a published final ranking, or list its versions."""
        from server.domain import publication

        task = _task(task_id)
        with _session(_settings()) as s:
            p = _phase(s, task, phase_name)
            rv = publication.latest_ranking(s, p.id, version)
            versions = publication.ranking_versions(s, p.id)
        if rv is None:
            raise Refused(
                f"{task.id} {phase_name} has no published ranking"
                + (f" version {version}" if version else "")
            )
        if as_json:
            click.echo(rv.body_json)
            return
        body = json.loads(rv.body_json)
        meta = body["ranking"]
        click.echo(
            f"{task.id} {p.name}: final ranking version {rv.version} of {len(versions)}, published "
            f"{meta['published_at']}"
            f"{' by ' + meta['published_by'] if meta.get('published_by') else ''}"
            f"{' (' + meta['reason'] + ')' if meta.get('reason') else ''}; sha256 {rv.sha256[:16]}"
        )
        key = body["columns"][0]["key"]
        click.echo(f"{'rank':>4}  {'team':<24} {'method':<24} {key:>14} {'public':>8}")
        for r in body["rows"]:
            v = r["metrics"].get(key)
            pub = r.get("public_primary")
            click.echo(
                f"{'' if r['rank'] is None else r['rank']:>4}  {r['team'][:24]:<24} "
                f"{(r.get('method_name') or '')[:24]:<24} {'-' if v is None else f'{v:.4f}':>14} "
                f"{'-' if pub is None else f'{pub:.4f}':>8}"
            )

    @main.command("backup", context_settings={"ignore_unknown_options": False})
    @click.argument("args", nargs=-1, required=True, metavar="[verify] OUT")
    @click.option(
        "--database-url",
        default=None,
        help="verify: the PostgreSQL server to restore a PostgreSQL archive into (a scratch "
        "database, dropped after; default: DATABASE_URL).",
    )
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @_home_option
    def backup_(args, database_url, as_json):
        """Back up the site into one archive (`backup OUT`), or check one (`backup verify OUT`).

        The database first, then every file of the data directory, into the archive OUT (a
        directory: a dated archive inside it), while the site serves; `backup verify OUT`
        restores an archive into a scratch database and directory and checks every checksum,
        count and published ranking, exiting 1 on any mismatch."""
        from server import backup as bk  # the archive's machinery loads when the command runs

        if len(args) == 2 and args[0] == "verify":
            try:
                rep = bk.verify(_settings(), Path(args[1]), database_url=database_url)
            except bk.BackupError as e:
                raise Refused(str(e)) from None
            _report(rep, "verified", as_json)
            return
        if len(args) != 1:
            raise Refused("usage: palimpsest backup OUT, or palimpsest backup verify OUT")
        t = datetime.now(timezone.utc)
        try:
            m = bk.backup(_settings(), Path(args[0]))
        except bk.BackupError as e:
            raise Refused(str(e)) from None
        size = Path(m["archive"]).stat().st_size
        seconds = round((datetime.now(timezone.utc) - t).total_seconds(), 3)
        if as_json:
            summary = {k: m[k] for k in ("archive", "alembic_revision", "created_at", "row_counts")}
            summary.update(
                size=size,
                seconds=seconds,
                files=sum(1 for k in m["members"] if k.startswith("files/")),
                database=m["database"],
                left_out=m["left_out"],
                published_rankings=len(m["published_rankings"]),
            )
            click.echo(json.dumps(summary, indent=2))
            return
        click.echo(
            f"{m['archive']}: {size} bytes, {sum(m['row_counts'].values())} rows in "
            f"{len(m['row_counts'])} tables, "
            f"{sum(1 for k in m['members'] if k.startswith('files/'))} files, "
            f"{len(m['published_rankings'])} published ranking(s), in {seconds} s"
        )
        click.echo("left out: " + ", ".join([*m["left_out"]["files"], *m["left_out"]["settings"]]))

    @main.group("store")
    def store_group():
        """The object store (PALIMPSEST_S3_*): push the data directory's files into it."""

    @store_group.command("push")
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @_home_option
    def store_push(as_json):
        """Put every file of uploads/, tasks/ and baselines/ that the store lacks (or holds
        different) into it: after importing tasks into a site on a store."""
        # boto3 and the store load when the command runs
        from server import objectstore
        from server.exceptions import StoreUnreachable

        settings = _settings()
        if objectstore.store_for(settings) is None:
            raise Refused("no object store configured (set PALIMPSEST_S3_BUCKET and its settings)")
        try:
            put = {a: objectstore.push_tree(settings, a) for a in ("uploads", "tasks", "baselines")}
        except StoreUnreachable as e:
            raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps({"put": put}))
        else:
            click.echo(", ".join(f"{a}: {n} file(s) put" for a, n in put.items()))

    @main.command("restore")
    @click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
    @click.option(
        "--force",
        is_flag=True,
        help="Restore over a non-empty site (its files are moved aside under the data "
        "directory's .before-restore-<time>/, its database replaced).",
    )
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @_home_option
    def restore_(archive, force, as_json):
        """Restore the site from an archive of `palimpsest backup` (into an empty site).

        ARCHIVE goes into this site's database (DATABASE_URL, or SQLite in the data directory)
        and data directory, then the database is migrated forward. Refuses a
        non-empty target without --force and an archive newer than this version; exits 1 on any
        mismatch. The archive is only read."""
        from server import backup as bk  # the archive's machinery loads when the command runs

        try:
            rep = bk.restore(_settings(), archive, force=force)
        except bk.BackupError as e:
            raise Refused(str(e)) from None
        _report(rep, "restored", as_json)

    @main.group("db")
    def db():
        """Database schema (Alembic migrations)."""

    @db.command("upgrade")
    @click.argument("revision", default="head")
    @_home_option
    @_done_quickly
    def db_upgrade(revision):
        """Create or migrate the database (DATABASE_URL, or SQLite in the data directory) to a
        revision (default: the newest)."""
        from server.migrate import SchemaError, current, upgrade

        settings = _settings()
        try:
            upgrade(settings, revision)
        except SchemaError as e:
            raise Refused(str(e)) from None
        click.echo(f"database at {', '.join(current(settings)) or 'base (no tables)'}")

    @db.command("stamp")
    @click.argument("revision")
    @_home_option
    @_done_quickly
    def db_stamp(revision):
        """Record REVISION as the database's revision without migrating (for a database built
        without the migrations: give the revision its tables are at, then `db upgrade`)."""
        from server.migrate import current, stamp

        settings = _settings()
        try:
            stamp(settings, revision)
        except Exception as e:  # alembic's own errors: an unknown revision, an unreachable database
            raise Refused(f"{type(e).__name__}: {e}") from None
        click.echo(f"database stamped at {', '.join(current(settings))} (nothing migrated)")

    @db.command("current")
    @_home_option
    @_done_quickly
    def db_current():
        """Print the database's revision and whether it is the newest; exit 1 when it is not."""
        from server.db import get_engine
        from server.migrate import current, status

        settings = _settings()
        revs = current(settings)
        state, why = status(get_engine(settings.sqlalchemy_url()))
        click.echo(f"{', '.join(revs) or 'none'} ({'head' if state == 'head' else why})")
        if state != "head":
            sys.exit(1)
