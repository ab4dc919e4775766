"""`palimpsest organizer rankings|export`: a phase's published final rankings."""

from __future__ import annotations

from pathlib import Path

import click

from cli.common import JSON, call, emit, print_table


@click.command("rankings")
@click.argument("task_id", metavar="TASK")
@click.argument("phase_name", metavar="PHASE")
@click.option(
    "--version", type=int, default=None, help="Print this version (the snapshot, as published)."
)
@click.option("--board", default=None, help="One of the phase's boards (default: main).")
@JSON
def rankings(task_id, phase_name, version, board, as_json):
    """List the published versions of a phase's final ranking, or print one."""
    if version is not None:
        r = call(
            as_json,
            lambda c: c.request(
                "GET",
                f"/tasks/{task_id}/phases/{phase_name}/rankings/{version}",
                {"board": board},
            ),
        )
        if as_json:
            click.echo(r.body.decode("utf-8"))
            return
        body = r.json()
        key = body["columns"][0]["key"]
        print_table(
            [
                {
                    "rank": x["rank"],
                    "team": x["team"],
                    "method": x.get("method_name"),
                    key: x["metrics"].get(key),
                    "public": x.get("public_primary"),
                }
                for x in body["rows"]
            ],
            ["rank", "team", "method", key, "public"],
        )
        return
    items = call(as_json, lambda c: c.get_all(f"/tasks/{task_id}/phases/{phase_name}/rankings"))
    emit(
        as_json,
        items,
        lambda rows: print_table(rows, ["version", "published_at", "reason", "sha256"]),
    )


@click.command("export")
@click.argument("task_id", metavar="TASK")
@click.argument("phase_name", metavar="PHASE")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "json", "tex"]),
    default="csv",
    show_default=True,
)
@click.option(
    "--version", type=int, default=None, help="A published version (default: the latest)."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (default: stdout).",
)
@click.option(
    "--facts",
    is_flag=True,
    help="The fact sheets of the published version's rows instead (csv or json).",
)
@click.option("--board", default=None, help="One of the phase's boards (default: main).")
def export(task_id, phase_name, fmt, version, output, facts, board):
    """The final ranking as CSV, JSON or a LaTeX table: the published snapshot byte for byte, or
    a preview before publication."""
    r = call(
        False,
        lambda c: c.request(
            "GET",
            f"/tasks/{task_id}/phases/{phase_name}/export",
            {
                "format": fmt,
                "version": version,
                "board": board,
                **({"facts": "true"} if facts else {}),
            },
        ),
    )
    if output is None:
        click.echo(r.body.decode("utf-8"), nl=False)
    else:
        output.write_bytes(r.body)
        click.echo(f"wrote {len(r.body)} bytes to {output}", err=True)
