"""`palimpsest organizer audit`: the audit log."""

from __future__ import annotations

import json

import click

from cli.common import JSON, call, emit, print_table


@click.command("audit")
@click.option("--action", default=None, help="Only this action, e.g. ranking.publish.")
@click.option("--all", "everything", is_flag=True, help="Also the workers' status changes.")
@click.option(
    "--limit", type=int, default=50, show_default=True, help="At most this many, newest first."
)
@JSON
def audit(action, everything, limit, as_json):
    """The audit log, newest first."""
    rows = call(
        as_json,
        lambda c: c.get_all("/audit", limit=limit, action=action, all="1" if everything else None),
    )
    emit(
        as_json,
        rows,
        lambda rows: print_table(
            [
                {**r, "details": json.dumps(r.get("details") or {}, ensure_ascii=False)[:80]}
                for r in rows
            ],
            ["id", "created", "actor", "action", "target", "details"],
        ),
    )
