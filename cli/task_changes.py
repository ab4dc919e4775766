"""Tasks that change, over the REST API (an organizer's token):
`palimpsest organizer task show|edit|version|archive TASK` (docs/bundles.md, "Changing a task").
Each takes `--json` (exactly one JSON document on stdout); a failure is one line."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import click

from cli.common import JSON, call, emit
from cli.organizer.competitions import change_lines

TEXTS = ("title", "description", "citation", "licence", "source", "unit", "group_name")


def _q(v: str) -> str:
    return quote(str(v), safe="")


def _state_lines(st: dict) -> None:
    archived = f", archived {st['archived_at']}" if st["archived"] else ""
    click.echo(f"{st['task']} version {st['version']}{archived}: {st['title']}")
    for v in st["versions"]:
        changed = "; ".join(f"{k}: {', '.join(x)}" for k, x in v["changes"].items() if x)
        click.echo(f"  v{v['version']} {v['created_at']} {v['reason'] or '-'} {changed}".rstrip())
    if st.get("phases_closed"):
        click.echo(f"  phases closed: {', '.join(st['phases_closed'])}")


@click.group("task")
def task():
    """A task that changes: its versions, its texts, a new version, archiving."""


@task.command("show")
@click.argument("task_id", metavar="TASK")
@JSON
def show(task_id, as_json):
    """The task's version, its recorded versions and whether it is archived."""
    got = call(as_json, lambda c: c.request("GET", f"/tasks/{_q(task_id)}/versions").json())
    emit(as_json, got, _state_lines)


@task.command("edit")
@click.argument("task_id", metavar="TASK")
@click.option("--title")
@click.option("--description")
@click.option("--citation")
@click.option("--licence")
@click.option("--source")
@click.option("--unit")
@click.option("--group-name", "group_name")
@JSON
def edit(task_id, as_json, **texts):
    """Change the task's texts in place: no new version, nothing rescored."""
    body = {k: v for k, v in texts.items() if v is not None}
    got = call(as_json, lambda c: c.send_json("PATCH", f"/tasks/{_q(task_id)}", body))
    emit(as_json, got, _state_lines)


@task.command("version")
@click.argument("task_id", metavar="TASK")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--reason", default="", help="Why (kept with the version).")
@JSON
def version(task_id, bundle, reason, as_json):
    """A new version of TASK from its competition's edited bundle (a .zip): its runs are
    rescored under it, published rankings stay as published."""
    got = call(
        as_json,
        lambda c: c.upload(
            f"/tasks/{_q(task_id)}/versions", bundle, {"reason": reason}, field="bundle"
        ),
    )
    emit(as_json, got, change_lines)


@task.command("archive")
@click.argument("task_id", metavar="TASK")
@click.option("--reason", default="")
@JSON
def archive(task_id, reason, as_json):
    """Archive the task: its phases closed for good, its files and runs kept."""
    got = call(
        as_json,
        lambda c: c.send_json("POST", f"/tasks/{_q(task_id)}/archive", {"reason": reason}),
    )
    emit(as_json, got, _state_lines)


def register(main: click.Group) -> None:
    """Add `organizer task ...` under the organizer group."""
    main.commands["organizer"].add_command(task)
