"""Participant commands: login, register, tasks, download, submit, submissions, status, run,
primary, public, private, delete, teams, leaderboard; one module per group of commands, each
command a click command importable by its name (`cli.participant.runs.status`).

Tables for people, `--json` for scripts; every failure is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import click

from cli.participant import account, data, runs, submit, teams

# every participant command on `palimpsest`, by module (a new command is one line here)
COMMANDS: tuple[click.Command, ...] = (
    account.login,
    account.register_cmd,
    data.download,
    data.leaderboard,
    submit.submit,
    runs.run_show,
    runs.submissions,
    runs.primary,
    runs.make_public,
    runs.make_private,
    runs.delete,
    runs.status,
    teams.teams,
)


def register(main: click.Group) -> None:
    """Add the participant commands to the `palimpsest` group."""
    for command in COMMANDS:
        main.add_command(command)
