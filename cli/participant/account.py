"""`palimpsest login` and `palimpsest register COMPETITION`."""

from __future__ import annotations

import json
import sys

import click

from cli.client import Client, ClientError, save_config
from cli.common import api_client, die


@click.command("login")
@click.option(
    "--server", required=True, help="The server's base URL, e.g. https://palimpsest.example.org"
)
@click.option(
    "--token", prompt=True, hide_input=True, help="Your API token (from your account page)."
)
def login(server, token):
    """Store the server URL and API token (config file mode 0600)."""
    c = Client(server, token, retries=1)
    try:
        me = c.get_json("/me")
    except ClientError as e:
        die(e)
    p = save_config(server, token)
    team = (me.get("team") or {}).get("name") or "no team yet"
    click.echo(f"logged in to {server} as {me.get('email')} ({team}); saved to {p}")


@click.command("register")
@click.argument("competition", metavar="COMPETITION")
@click.option("--accept-terms", is_flag=True, help="Accept the terms (their current version).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def register_cmd(competition, accept_terms, as_json):
    """Register for a competition (or accept its changed terms). Without --accept-terms, a
    competition with terms prints where to read them and exits 1."""
    c = None
    try:
        c = api_client()
        mine = c.get_json(f"/competitions/{competition}/registration")
        if mine.get("current_terms_version", 0) > 0 and not accept_terms:
            where = c.server + (mine.get("terms_url") or f"/competitions/{competition}")
            message = (
                f"read the terms of {competition} (version {mine['current_terms_version']}) "
                f"at {where}, then run `palimpsest register {competition} --accept-terms`"
            )
            if as_json:
                body = {"code": "terms_not_accepted", "message": message, "terms_url": where}
                click.echo(json.dumps({"error": {**body, "status": None}}))
            else:
                click.echo(message, err=True)
            sys.exit(1)
        body = {"accept_terms": accept_terms}
        if accept_terms:  # the version it told of: changed since, the server refuses
            body["terms_version"] = mine.get("current_terms_version", 0)
        got = c.send_json("POST", f"/competitions/{competition}/registration", body)
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(got))
        return
    line = f"registered for {competition}: {got.get('status')}"
    if got.get("terms_version"):
        line += f" (terms version {got['terms_version']} accepted)"
    click.echo(line)
    if not got.get("participating") and got.get("message"):
        click.echo(got["message"])
