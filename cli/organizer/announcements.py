"""`palimpsest organizer announce`: an announcement, shown and mailed."""

from __future__ import annotations

from pathlib import Path

import click

from cli.client import ClientError
from cli.common import JSON, call, die, emit


@click.command("announce")
@click.argument("competition", metavar="COMPETITION")
@click.option("--title", required=True, help="The announcement's title (one line).")
@click.option("--body", "body_text", help="Its text (Markdown).")
@click.option(
    "--file",
    "body_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Markdown file with its text (instead of --body).",
)
@JSON
def announce(competition, title, body_text, body_file, as_json):
    """Post an announcement: shown on the competition page and mailed to its approved
    participants (those who did not turn announcements off)."""
    if (body_text is None) == (body_file is None):
        die(
            ClientError("give the text with --body TEXT or --file FILE.md (one of them)"),
            as_json,
        )
    if body_file is not None:
        try:
            body_text = body_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            die(ClientError(f"cannot read {body_file}: {e}"), as_json)
    a = call(
        as_json,
        lambda c: c.send_json(
            "POST",
            f"/competitions/{competition}/announcements",
            {"title": title, "body_markdown": body_text},
        ),
    )
    emit(
        as_json,
        a,
        lambda a: click.echo(
            f"announcement {a['id']} posted in {a['competition']}: mailed to "
            f"{a['recipients']} participant(s)"
        ),
    )
