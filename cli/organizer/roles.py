"""`palimpsest organizer invite|roles|revoke`: roles in a competition and invitations."""

from __future__ import annotations

from urllib.parse import quote

import click

from cli.common import JSON, call, emit, print_table


@click.command("invite")
@click.argument("competition")
@click.argument("email")
@click.option(
    "--role",
    type=click.Choice(["organizer", "assessor", "owner"]),
    default="organizer",
    show_default=True,
    help="The role offered.",
)
@JSON
def invite(competition, email, role, as_json):
    """Invite a person by email to a role in a competition (its owners): the link is mailed,
    or, where the server sends no mail, printed for you to hand over (whoever accepts it signed
    in gets the role: no address is proved on such a server)."""
    r = call(
        as_json,
        lambda c: c.send_json(
            "POST", f"/competitions/{competition}/roles", {"email": email, "role": role}
        ),
    )

    def text(r):
        click.echo(r["message"])
        if r.get("link"):
            click.echo(r["link"])

    emit(as_json, r, text)


@click.command("roles")
@click.argument("competition")
@JSON
def roles(competition, as_json):
    """Who has which role in a competition, and its pending invitations."""
    r = call(as_json, lambda c: c.get_json(f"/competitions/{competition}/roles"))

    def text(r):
        print_table(r["people"], ["user_id", "email", "role", "since"])
        if r["invites"]:
            click.echo("pending invitations:")
            print_table(r["invites"], ["id", "email", "role", "created_at", "expires_at"])

    emit(as_json, r, text)


@click.command("revoke")
@click.argument("competition")
@click.argument("email")
@JSON
def revoke(competition, email, as_json):
    """Take a person's role in a competition away and cancel their pending invitations (its
    owners; never the last owner). EMAIL may also be an account's id."""
    r = call(
        as_json,
        lambda c: c.send_json(
            "DELETE", f"/competitions/{competition}/roles/{quote(email, safe='')}"
        ),
    )
    emit(
        as_json,
        r,
        lambda r: click.echo(
            f"{r['email']}: "
            + (f"no longer {r['role']} of {r['competition']}" if r.get("role") else "")
            + (", " if r.get("role") and r["invites_cancelled"] else "")
            + (
                f"{r['invites_cancelled']} invitation(s) cancelled"
                if r["invites_cancelled"]
                else ""
            )
        ),
    )
