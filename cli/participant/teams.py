"""`palimpsest teams create|join|show|leave|rotate|approve`: your team."""

from __future__ import annotations

import json

import click

from cli.client import ClientError
from cli.common import api_client, die


@click.group("teams")
def teams():
    """Your team: create one, join one with its invite code, show it, leave it. With
    `--competition ID`, your team in that competition; without, your team of every
    competition where you have none of your own."""


def _team_cmd(name, help_text, method, path, body_of=None, args=()):
    def command(as_json, competition, **kw):
        scope = {"competition": competition} if competition else {}
        try:
            c = api_client()
            if method == "GET":
                team = c.get_json(path, **scope)
            elif body_of is not None:
                team = c.send_json(method, path, {**body_of(**kw), **scope})
            else:
                team = c.send_json(method, path, None, **scope)
        except ClientError as e:
            die(e, as_json)
        if as_json:
            click.echo(json.dumps(team))
        elif "left_team" in team:
            click.echo("you left the team; its submissions stay with it")
        else:
            where = f" in {team['competition']}" if team.get("competition") else ""
            click.echo(
                f"team {team['name']}{where} (id {team['id']}); invite code: {team['invite_code']}"
            )
            click.echo(
                "members: "
                + ", ".join(
                    x["email"]
                    + (" (captain)" if x.get("role") == "captain" else "")
                    + (" (waiting for the captain)" if x.get("status") == "pending" else "")
                    for x in team.get("members", [])
                )
            )

    command.__doc__ = help_text
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(command)
    command = click.option(
        "--competition",
        default=None,
        metavar="ID",
        help="The competition (its short id); without: your team of every competition.",
    )(command)
    for a in reversed(args):
        command = click.argument(a)(command)
    return teams.command(name)(command)


teams_create = _team_cmd(
    "create",
    "Create a team (you become its captain).",
    "POST",
    "/team",
    lambda name: {"name": name},
    ("name",),
)
teams_join = _team_cmd(
    "join",
    "Join a team with its invite code (where a competition asks, the captain approves).",
    "POST",
    "/team/join",
    lambda code: {"invite_code": code},
    ("code",),
)
teams_show = _team_cmd("show", "Show your team: its members and invite code.", "GET", "/team")
teams_leave = _team_cmd(
    "leave", "Leave your team (its submissions stay with it).", "POST", "/team/leave"
)
teams_rotate = _team_cmd(
    "rotate",
    "Replace your team's invite code (the old one stops working).",
    "POST",
    "/team/invite",
)


@teams.command("approve")
@click.argument("user_id", type=int)
@click.option("--competition", required=True, metavar="ID", help="The competition.")
@click.option("--turn-away", is_flag=True, help="Turn the person away instead.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def teams_approve(user_id, competition, turn_away, as_json):
    """As the captain, approve a person waiting to join your team in a competition."""
    try:
        team = api_client().send_json(
            "POST",
            f"/team/members/{user_id}",
            None,
            competition=competition,
            approve="0" if turn_away else "1",
        )
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(team))
    else:
        click.echo(("turned away" if turn_away else "approved") + f" user {user_id}")
