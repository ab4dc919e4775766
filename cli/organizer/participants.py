"""`palimpsest organizer participants|approve|reject|suspend|ban|reinstate`: a competition's
registrations."""

from __future__ import annotations

import json
from urllib.parse import quote

import click

from cli.common import JSON, call, emit, print_table


@click.command("participants")
@click.argument("competition", metavar="COMPETITION")
@click.option(
    "--status",
    type=click.Choice(["pending", "approved", "rejected", "suspended", "banned"]),
    default=None,
    help="Only registrations with this status.",
)
@click.option("--limit", type=int, default=None, help="At most this many, newest first.")
@JSON
def participants(competition, status, limit, as_json):
    """The people registered for a competition: status, terms accepted, team."""
    rows = call(
        as_json,
        lambda c: c.get_all(
            f"/competitions/{quote(competition, safe='')}/participants",
            limit=limit,
            status=status,
        ),
    )
    emit(
        as_json,
        rows,
        lambda rows: print_table(
            rows,
            ["user_id", "email", "status", "terms_version", "team", "registered_at", "reason"],
        ),
    )


def _decide(competition: str, who: str, action: str, reason: str | None, as_json: bool):
    return call(
        as_json,
        lambda c: c.send_json(
            "POST",
            f"/competitions/{quote(competition, safe='')}/participants/"
            f"{quote(who, safe='')}/{action}",
            {"reason": reason or ""},
        ),
    )


@click.command("approve")
@click.argument("competition", metavar="COMPETITION")
@click.argument("people_", metavar="EMAIL_OR_ID...", nargs=-1, required=True)
@click.option("--reason", default=None, help="Shown to the participant (optional).")
@JSON
def approve(competition, people_, reason, as_json):
    """Approve registrations (pending or rejected ones)."""
    done = [_decide(competition, who, "approve", reason, as_json) for who in people_]
    if as_json:
        click.echo(json.dumps(done))
        return
    for r in done:
        click.echo(f"{r['email']}: {r['status']}")


def _decision(action: str, help_text: str, needs_reason: bool):
    @click.command(action, help=help_text)
    @click.argument("competition", metavar="COMPETITION")
    @click.argument("who", metavar="EMAIL_OR_ID")
    @click.option("--reason", required=needs_reason, help="Shown to the participant (and mailed).")
    @JSON
    def command(competition, who, reason, as_json):
        r = _decide(competition, who, action, reason, as_json)
        emit(as_json, r, lambda r: click.echo(f"{r['email']}: {r['status']}"))

    return command


reject = _decision("reject", "Reject a registration (the person is shown the reason).", True)
suspend = _decision("suspend", "Suspend a participant: no downloads, no submissions.", True)
ban = _decision(
    "ban",
    "Ban a participant: no downloads, no submissions, and their runs leave the live boards "
    "(published rankings keep them).",
    True,
)
reinstate = _decision("reinstate", "Reinstate a rejected, suspended or banned participant.", False)
