"""What the remote commands (`palimpsest organizer ...` and the participants' commands) share:
the client of the configured server, a failure's one line, tables and `--json`."""

from __future__ import annotations

import json
import re
import sys

import click

from cli.client import Client, ClientError

# a terminal's escape sequences (CSI, OSC, DCS and the like, 7- and 8-bit) and every other
# control character but newline and tab: what a run printed never drives the reader's terminal
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|(?:\x1b[P\]X^_]|[\x90\x9d\x98\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"  # DCS/OSC/SOS/PM/APC
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]",
    re.S,
)


def plain(text: str) -> str:
    """`text` without terminal escapes or control characters (newlines and tabs kept): a run's
    log, printed to a terminal, shows what it says and changes nothing there."""
    return _ESCAPES.sub("", text or "")


def api_client() -> Client:
    return Client.from_config()


def die(e: ClientError, as_json: bool = False):
    if as_json:
        click.echo(json.dumps({"error": {"message": str(e), "status": e.status, **e.body}}))
    else:
        click.echo(f"error: {e}", err=True)
        if e.body.get("code") == "invalid_request" and len(e.body.get("problems") or []) <= 1:
            sys.exit(1)  # the message is the one problem
        for p in (e.body.get("problems") or [])[:50]:
            click.echo(f"  {problem(p)}", err=True)
        extra = (e.body.get("total") or 0) - len(e.body.get("problems") or [])
        if extra > 0 and e.body.get("problems"):
            click.echo(f"  ... and {extra} more", err=True)
    sys.exit(1)


def problem(p: dict) -> str:
    """A problem from the server, worded as the offline validator words it."""
    # the scorer loads only when a command needs it: `palimpsest --help` stays light
    from scorer.errors import Problem

    return str(Problem(str(p.get("message", "")), p.get("line"), p.get("id")))


def print_table(rows: list[dict], cols: list[str]) -> None:
    if not rows:
        click.echo("(none)")
        return
    width = {c: max(len(c), *(len(cell(r.get(c))) for r in rows)) for c in cols}
    click.echo("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        click.echo("  ".join(cell(r.get(c)).ljust(width[c]) for c in cols))


def cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def call(as_json: bool, fn):
    try:
        return fn(api_client())
    except ClientError as e:
        die(e, as_json)


def emit(as_json: bool, data, text) -> None:
    if as_json:
        click.echo(json.dumps(data))
    else:
        text(data)
