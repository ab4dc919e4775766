"""Phases at the server's shell: list, set (create or change), and the phase actions by name."""

from __future__ import annotations

import json

import click

from server.actions.phase_help import PHASE_ACTION_HELP, rerun_line
from server.cli.common import (
    OptionalInt,
    Refused,
    When,
    done_quickly,
    echo_model,
    home_option,
    local_session,
    local_settings,
    phase_or_refuse,
    task_or_refuse,
)


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.group("phases")
    def phases():
        """Phases of a task: windows, limits and the public part of the test gold."""

    @phases.command("list")
    @click.argument("task_id", metavar="[TASK]", required=False)
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @home_option
    @done_quickly
    def phases_list(task_id, as_json):
        """List a task's phases (every task's without TASK) with their window and limits, as
        `palimpsest organizer phases list TASK` does over the API."""
        from sqlalchemy import select

        from server.actions.phases import ensure_phases
        from server.domain.submissions import phase_state
        from server.models import Phase

        q = select(Phase).order_by(Phase.task_id, Phase.name)
        if task_id is not None:
            q = q.where(Phase.task_id == task_or_refuse(task_id).id)
        with local_session(settings := local_settings()) as s:
            ensure_phases(s=s, home=settings.home)
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
        "--opens", type=When(), help="Opening time (ISO 8601, UTC if no offset) or 'none'."
    )
    @click.option(
        "--closes", type=When(), help="Closing time (ISO 8601, UTC if no offset) or 'none'."
    )
    @click.option(
        "--daily-limit",
        type=OptionalInt(),
        help="Scored submissions per team per UTC day, or 'none'.",
    )
    @click.option(
        "--total-limit",
        type=OptionalInt(),
        help="Scored submissions per team in the phase, or 'none'.",
    )
    @click.option(
        "--concurrent-limit",
        type=OptionalInt(),
        help="Submissions waiting or running at once, or 'none'.",
    )
    @click.option(
        "--public-fraction",
        type=click.FloatRange(0, 1, min_open=True),
        help="Share of the test gold scored publicly while the phase runs (1 = no private part).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the phase as JSON.")
    @home_option
    @done_quickly
    def phases_set(
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
        """Create or change a phase of a task."""
        from server.actions.phases import ensure_phases, set_phase
        from server.exceptions import LifecycleRefused

        task = task_or_refuse(task_id)
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
        with local_session(settings := local_settings()) as s:
            ensure_phases(s=s, home=settings.home)
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
            if as_json:  # the action's declared model, as the API answers it
                echo_model(p)
                return
            click.echo(
                f"{task.id} {phase_name}: opens {p.opens_at or '-'}, closes {p.closes_at or '-'}, "
                f"daily {p.limits.daily}, total {p.limits.total}, concurrent "
                f"{p.limits.concurrent}, public fraction {p.public_fraction}"
            )

    for name, help_text in PHASE_COMMANDS.items():
        phases.add_command(phase_command(name, help_text))


# `palimpsest phases NAME`: a command for every phase action server.actions.phase_help declares,
# with its help from there (a new action gets its command by itself). Their options (`--reason`,
# `--close`) are read from the actions' one declaration (server.api_models.PhaseAction) when one
# of these commands runs, so that the other commands start without the API's models.
PHASE_COMMANDS = PHASE_ACTION_HELP


def action_flag(name: str, field=None) -> str:
    """The flag of a declared option: its public name (`close_first` is `--close`)."""
    return "--" + (getattr(field, "alias", None) or name).replace("_", "-")


def action_options() -> list[click.Option]:
    """The declared options of the phase actions as flags (a yes-or-no one as a bare flag); their
    values are checked against the declaration when the command runs."""
    # here, and their own subject only: the remote `organizer close|freeze|unfreeze|publish` read
    # them too, and load no other declared model (nor the database) for it
    from server.api_models.tasks import PhaseAction

    out = []
    for name, f in PhaseAction.model_fields.items():
        if f.annotation is bool:
            out.append(click.Option([action_flag(name, f), name], is_flag=True, help=f.description))
        else:
            ann, args = f.annotation, getattr(f.annotation, "__args__", ())
            kind = ann if ann in (int, float) else next((k for k in (int, float) if k in args), str)
            out.append(
                click.Option(
                    [action_flag(name, f), name], type=kind, default=None, help=f.description
                )
            )
    return out


class LazyPhaseCommand(click.Command):
    """A phase action's command: its declared options are added when it is parsed (or its help
    printed), not when `palimpsest` starts."""

    loaded = False

    def get_params(self, ctx):
        if not self.loaded:
            self.params[2:2] = action_options()  # after TASK and PHASE
            self.loaded = True
        return super().get_params(ctx)


def phase_command(name: str, help_text: str) -> click.Command:
    """`palimpsest phases NAME TASK PHASE`: the phase action NAME, with the options every phase
    action declares; one the action does not take is refused, never ignored."""

    @click.command(name, help=help_text, cls=LazyPhaseCommand)
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option("--json", "as_json", is_flag=True, help="Print the action's answer as JSON.")
    @home_option
    @done_quickly
    def command(task_id, phase_name, as_json, **options):
        from server import api_models as m  # here: loaded when a phase action runs
        from server.actions.phases import PHASE_ACTIONS, phase_action_options
        from server.exceptions import PalimpsestError, UploadFieldsInvalid

        task = task_or_refuse(task_id)
        settings = local_settings()
        fields = m.PhaseAction.model_fields
        try:  # the values as the declaration reads them (the API's body, the web form's)
            given = {fields[k].alias or k: v for k, v in options.items() if v is not None}
            options = m.PhaseAction.model_validate(given).model_dump()
        except ValueError as e:  # pydantic's ValidationError, naming each field
            raise Refused(
                "; ".join(
                    f"{action_flag(str(x['loc'][0]), fields.get(str(x['loc'][0])))}: {x['msg']}"
                    for x in e.errors()
                )
            ) from None
        try:
            extra = phase_action_options(name, options, settings)
        except UploadFieldsInvalid as e:
            stray = next(iter(e.fields))
            flag = action_flag(stray, m.PhaseAction.model_fields[stray])
            raise Refused(f"phases {name} takes no {flag}") from None
        with local_session(settings) as s:
            p = phase_or_refuse(s, task, phase_name)
            try:
                result = PHASE_ACTIONS[name](
                    s=s, task_id=task.id, phase=p.name, actor=None, via="cli", **extra
                )
            except PalimpsestError as e:  # refused (nothing done): its reason
                raise Refused(getattr(e, "message", None) or str(e)) from None
            if as_json:  # the action's declared model, as the API answers it
                echo_model(result)
            else:
                ranking = result.ranking
                more = f"; final ranking version {ranking.version}" if ranking is not None else ""
                click.echo(f"{task.id} {p.name}: {', '.join(result.phase.state)}{more}")
                for r in result.reruns or ():
                    click.echo(rerun_line(r.model_dump()))

    return command
