"""`palimpsest signup`: an account without the website. The first call asks the server to mail the
address a token (`POST /api/v1/signup`); the second finishes with that token and a password
(`POST /api/v1/signup/finish`) and stores the server and the new API token as `login` does."""

from __future__ import annotations

import json
import sys

import click

from cli.client import Client, ClientError, save_config


def register(main: click.Group) -> None:
    """Add `signup` to the `palimpsest` group."""

    @main.command("signup")
    @click.argument("email", required=False)
    @click.option(
        "--server", required=True, envvar="PALIMPSEST_SERVER", help="The server's base URL."
    )
    @click.option(
        "--competition",
        default=None,
        help="The competition you come for (its allowed domains are checked now).",
    )
    @click.option(
        "--finish", "token", default=None, metavar="TOKEN", help="The token the mail sent you."
    )
    @click.option(
        "--password-stdin", is_flag=True, help="Read the password from stdin (else a prompt)."
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    def signup(email, server, competition, token, password_stdin, as_json):
        """Sign up without the website: `signup EMAIL` mails you a token; `signup --finish TOKEN`
        chooses your password, makes the account and logs this command line in."""
        if (email is None) == (token is None):
            raise click.UsageError("give an EMAIL to sign up, or --finish TOKEN to finish")
        c = Client(server, None, retries=1)
        try:
            if email is not None:
                body = {"email": email}
                if competition:
                    body["competition"] = competition
                got = c.send_json("POST", "/signup", body)
            else:
                if password_stdin:
                    password = sys.stdin.readline().rstrip("\n")
                else:
                    password = click.prompt(
                        "Password", hide_input=True, confirmation_prompt=True, err=True
                    )
                got = c.send_json("POST", "/signup/finish", {"token": token, "password": password})
        except ClientError as e:
            if as_json:
                click.echo(json.dumps({"error": {"message": str(e), "status": e.status, **e.body}}))
            else:
                click.echo(f"error: {e}", err=True)
            sys.exit(1)
        if email is None:
            where = save_config(server, got["token"])
            got = {k: v for k, v in got.items() if k != "token"} | {"config": str(where)}
            line = f"signed up {got['email']}; logged in to {server} (saved to {where})"
            if got.get("competition"):
                line += f"; next: palimpsest register {got['competition']} --accept-terms"
        else:
            line = got["message"]
        click.echo(json.dumps(got) if as_json else line)
