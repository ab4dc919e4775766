"""Accounts and API tokens at the server's shell: create, reset link, sign out; a token."""

from __future__ import annotations

import sys

import click

from server.cli.common import Refused, done_quickly, home_option, local_session, local_settings


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

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
    @home_option
    @done_quickly
    def users_create(email, password_stdin, organizer):
        """Create an account; the password is read from standard input."""
        from server.actions.accounts import create_account

        password = sys.stdin.readline().rstrip("\r\n")
        with local_session(local_settings()) as s:
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

        from server.domain.emails import lookup_form
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
    @home_option
    @done_quickly
    def users_reset_link(email, base_url):
        """Print a single-use password-reset link for an account (for a server that sends no mail).

        It expires after PALIMPSEST_RESET_MINUTES; it is signed with PALIMPSEST_SECRET_KEY, which
        must be the server's."""
        from server.actions.accounts import reset_link_for

        settings = local_settings()
        with local_session(settings) as s:
            u = _user_by_email(s, email)
            link = reset_link_for(s=s, settings=settings, user=u, base_url=base_url, via="cli")
        click.echo(link)
        click.echo(
            f"valid {settings.reset_minutes} minutes, once; hand it to {u.email} in private",
            err=True,
        )

    @users.command("sign-out")
    @click.argument("email")
    @home_option
    @done_quickly
    def users_sign_out(email):
        """End every session of an account (its API tokens stay: revoke those apart)."""
        from server.actions.accounts import sign_out_everywhere

        with local_session(local_settings()) as s:
            u = _user_by_email(s, email)
            sign_out_everywhere(s=s, user=u, via="cli")
        click.echo(f"every session of {u.email} is signed out")

    @main.group("tokens")
    def tokens():
        """API tokens (shown once, stored as sha256)."""

    @tokens.command("create")
    @click.option("--email", required=True)
    @click.option("--name", default="cli", show_default=True, help="A label for the token.")
    @home_option
    @done_quickly
    def tokens_create(email, name):
        """Print a new API token for a user, once; only its sha256 is stored."""
        from sqlalchemy import select

        from server.actions.accounts import new_token
        from server.domain.emails import lookup_form
        from server.models import User

        with local_session(local_settings()) as s:
            u = s.execute(select(User).where(User.email == lookup_form(email))).scalar_one_or_none()
            if u is None:
                raise Refused(f"no user with email {email!r}")
            _, plaintext = new_token(s=s, user=u, name=name)
        click.echo(plaintext)
