"""Organizer commands over the REST API, with an organizer's token (`palimpsest login`):
`palimpsest organizer phases|close|freeze|unfreeze|show-board|hide-board|publish|rankings|export|
submissions|rescore|rescore-all|hide|unhide|primary|audit|baselines|participants|approve|reject|suspend|
ban|reinstate|announce`; one module per group of commands, each command a click command importable
by its name (`cli.organizer.phases.publish`).

They do over the network what the organizer pages do, through the same server code; the local
set-up commands (`palimpsest users|tokens|phases|rankings|db`, on the server's own database) stay
beside them. Each takes `--json` (exactly one JSON document on stdout); a failure is one line.
"""

from __future__ import annotations

import click

from cli.organizer import (
    announcements,
    audit,
    baselines,
    competitions,
    participants,
    phases,
    rankings,
    roles,
    runs,
)

# every command under `palimpsest organizer`, by module (a new command is one line here; the
# campaigns' and the tasks' commands add their groups themselves: cli/campaigns.py,
# cli/task_changes.py)
COMMANDS: tuple[click.Command, ...] = (
    phases.phases,
    *phases.ACTIONS.values(),  # one for each phase action the server declares
    rankings.rankings,
    rankings.export,
    runs.submissions,
    runs.runs,
    runs.review,
    runs.rescore,
    runs.rescore_all,
    runs.hide,
    runs.unhide,
    runs.remove,
    runs.restore,
    runs.move_track,
    runs.primary,
    audit.audit,
    baselines.baselines,
    participants.participants,
    participants.approve,
    participants.reject,
    participants.suspend,
    participants.ban,
    participants.reinstate,
    roles.invite,
    roles.roles,
    roles.revoke,
    announcements.announce,
    competitions.competitions,
)


def register(main: click.Group) -> None:
    @main.group("organizer")
    def organizer():
        """Organizer actions over the API (an organizer's token): phases, publication, rescoring,
        hiding, exports, the audit log, baseline runs."""

    for command in COMMANDS:
        organizer.add_command(command)
