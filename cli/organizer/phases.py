"""`palimpsest organizer phases list|create|edit` and the phase actions, a command each by the name
the server declares it (`close|freeze|unfreeze|show-board|hide-board|publish`)."""

from __future__ import annotations

import sys

import click

from cli.common import JSON, call, cell, emit
from server.actions.phase_help import PHASE_ACTION_HELP, rerun_line


def _phase_line(p: dict) -> str:
    lim = p.get("limits") or {}
    return (
        f"{p['name']:<8} {p['split']:<5} {', '.join(p.get('state') or []):<22} "
        f"opens {p.get('opens_at') or '-'}  closes {p.get('closes_at') or '-'}  "
        f"daily {cell(lim.get('daily'))} total {cell(lim.get('total'))} "
        f"concurrent {cell(lim.get('concurrent'))} public {p.get('public_fraction')}"
    )


def _when(v: str | None):
    """An option's time: 'none' clears it; otherwise sent as typed (the server says what is
    wrong)."""
    if v is None:
        return ...
    return None if v.lower() == "none" else v


def _limit(v: str | None):
    if v is None:
        return ...
    if v.lower() == "none":
        return None
    try:
        return int(v)
    except ValueError:
        raise click.BadParameter(f"{v!r} is not a whole number or 'none'") from None


def _phase_fields(
    opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction
) -> dict:
    fields = {
        "opens_at": _when(opens),
        "closes_at": _when(closes),
        "daily_limit": _limit(daily_limit),
        "total_limit": _limit(total_limit),
        "concurrent_limit": _limit(concurrent_limit),
        "public_fraction": public_fraction if public_fraction is not None else ...,
    }
    return {k: v for k, v in fields.items() if v is not ...}


def _phase_options(fn):
    for opt in reversed(
        [
            click.option(
                "--opens", help="Opening time (ISO 8601; UTC without an offset) or 'none'."
            ),
            click.option(
                "--closes", help="Closing time (ISO 8601; UTC without an offset) or 'none'."
            ),
            click.option(
                "--daily-limit", help="Scored submissions per team per UTC day, or 'none'."
            ),
            click.option(
                "--total-limit", help="Scored submissions per team in the phase, or 'none'."
            ),
            click.option(
                "--concurrent-limit", help="Submissions waiting or running at once, or 'none'."
            ),
            click.option(
                "--public-fraction", type=float, help="Share of the test gold scored publicly."
            ),
        ]
    ):
        fn = opt(fn)
    return fn


@click.group("phases")
def phases():
    """A task's phases: list, create, edit."""


@phases.command("list")
@click.argument("task_id", metavar="TASK")
@JSON
def phases_list(task_id, as_json):
    """List a task's phases with their state."""
    items = call(as_json, lambda c: c.get_all(f"/tasks/{task_id}/phases"))
    emit(as_json, items, lambda rows: [click.echo(_phase_line(p)) for p in rows] or None)


@phases.command("create")
@click.argument("task_id", metavar="TASK")
@click.argument("name")
@click.option("--split", required=True, help="The task's split the phase scores on (dev, test).")
@_phase_options
@JSON
def phase_create(
    task_id,
    name,
    split,
    opens,
    closes,
    daily_limit,
    total_limit,
    concurrent_limit,
    public_fraction,
    as_json,
):
    """Create a phase of a task."""
    body = {
        "name": name,
        "split": split,
        **_phase_fields(opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction),
    }
    p = call(as_json, lambda c: c.send_json("POST", f"/tasks/{task_id}/phases", body))
    emit(as_json, p, lambda p: click.echo(_phase_line(p)))


@phases.command("edit")
@click.argument("task_id", metavar="TASK")
@click.argument("phase_name", metavar="PHASE")
@_phase_options
@JSON
def phase_edit(
    task_id,
    phase_name,
    opens,
    closes,
    daily_limit,
    total_limit,
    concurrent_limit,
    public_fraction,
    as_json,
):
    """Change a phase's window, limits or public fraction (only what is given changes)."""
    body = _phase_fields(opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction)
    if not body:
        raise click.UsageError(
            "nothing to change: give --opens, --closes, a limit or --public-fraction"
        )
    p = call(as_json, lambda c: c.send_json("PATCH", f"/tasks/{task_id}/phases/{phase_name}", body))
    emit(as_json, p, lambda p: click.echo(_phase_line(p)))


class DeclaredPhaseCommand(click.Command):
    """A phase action's command: the options every phase action declares
    (server.api_models.PhaseAction), read as the local `palimpsest phases ACTION` reads them, are
    added when it is parsed or its help printed; one the action does not take is refused by the
    server, as on every surface."""

    loaded = False

    def get_params(self, ctx):
        if not self.loaded:
            # the declarations (pydantic) load when a phase action runs: `palimpsest --help` and the
            # other remote commands stay light
            from server.cli.phases import action_options

            self.params[2:2] = action_options()  # after TASK and PHASE
            self.loaded = True
        return super().get_params(ctx)


def _declared_body(options: dict) -> dict | None:
    """The declared options given, named as the API's body names them (each flag's name:
    `--close` is `close`); None when none is given."""
    ctx = click.get_current_context()
    names = {p.name: p.opts[0].lstrip("-").replace("-", "_") for p in ctx.command.params}
    body = {names[k]: v for k, v in options.items() if v is not None and v is not False}
    return body or None


def _action(name: str, help_text: str):
    @click.command(name, help=help_text, cls=DeclaredPhaseCommand)
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @JSON
    def command(task_id, phase_name, as_json, **options):
        body = _declared_body(options)
        r = call(
            as_json,
            lambda c: c.send_json("POST", f"/tasks/{task_id}/phases/{phase_name}/{name}", body),
        )
        emit(as_json, r, lambda r: _action_lines(r))

    return command


def _action_lines(r: dict) -> None:
    click.echo(_phase_line(r["phase"]))
    for x in r.get("reruns") or ():
        click.echo(rerun_line(x))


# a command for every phase action the server declares (server.actions.phase_help), with its help
# from there, each importable by its name (`cli.organizer.phases.show_board`); publish, which asks
# first, is written out below
for _name, _help in PHASE_ACTION_HELP.items():
    if _name != "publish":
        globals()[_name.replace("-", "_")] = _action(_name, _help)


@click.command("publish", help=PHASE_ACTION_HELP["publish"], cls=DeclaredPhaseCommand)
@click.argument("task_id", metavar="TASK")
@click.argument("phase_name", metavar="PHASE")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON
def publish(task_id, phase_name, yes, as_json, **options):
    if not yes and not as_json and sys.stdin.isatty():
        click.confirm(
            f"Publish the final ranking of {task_id}/{phase_name}? It cannot be undone, only "
            "corrected",
            abort=True,
        )
    body = _declared_body(options)
    r = call(
        as_json,
        lambda c: c.send_json("POST", f"/tasks/{task_id}/phases/{phase_name}/publish", body),
    )
    emit(
        as_json,
        r,
        lambda r: click.echo(
            f"{task_id} {phase_name}: final ranking version {r['ranking']['version']} "
            f"published (sha256 {r['ranking']['sha256'][:16]})"
        ),
    )


# every phase action's command, in the declared order
ACTIONS: dict[str, click.Command] = {
    name: globals()[name.replace("-", "_")] for name in PHASE_ACTION_HELP
}
