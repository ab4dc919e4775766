"""`palimpsest organizer competitions create|edit|export|clone`: competitions as bundles."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from urllib.parse import quote

import click

from cli.common import JSON, call, emit


def change_lines(got: dict) -> None:
    """What an edited bundle changed (a BundleUpdateOut), a line per task, then the notes."""
    for t in got["tasks"]:
        boards = "; ".join(
            f"the {p['phase']} phase's boards: "
            + "; ".join(f"{k} {', '.join(p[k])}" for k in ("added", "removed", "changed") if p[k])
            for p in t.get("boards") or []
        )
        if t["versioned"]:
            what = "; ".join(
                f"{k}: {', '.join(t[k])}" for k in ("declared", "files", "gold") if t[k]
            )
            stale = sum(p["stale"] for p in t["phases"])
            queued = sum(len(p["rescoring"]) for p in t["phases"])
            line = (
                f"{t['task']}: version {t['previous_version']} -> {t['version']} ({what}); "
                f"{stale} run(s) stale, {queued} queued for rescoring; published rankings unchanged"
            )
        elif t["texts"]:
            line = f"{t['task']}: texts changed in place ({', '.join(t['texts'])})"
        elif boards:
            line = f"{t['task']}: published rankings unchanged"
        else:
            line = f"{t['task']}: unchanged (version {t['version']})"
        click.echo(f"{line}; {boards}" if boards else line)
    for n in got.get("notes") or []:
        click.echo(f"note: {n}")


@click.group("competitions")
def competitions():
    """Competitions as bundles: create one from a bundle, export one, clone one."""


@competitions.command("create")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--update",
    is_flag=True,
    help="Apply an edited bundle to its existing competition (its owners and organizers): "
    "a task whose metrics, primary, files or gold changed gets a new version.",
)
@click.option("--reason", default="", help="With --update: why.")
@JSON
def competitions_create(bundle, update, reason, as_json):
    """Create a competition from a bundle (a directory or a .zip holding competition.yaml)
    on the server (a site administrator's token); every problem is printed and nothing is
    created unless all of it is. With --update, change an existing one's tasks."""
    with tempfile.TemporaryDirectory(prefix="palimpsest-bundle-") as d:
        path = bundle
        if bundle.is_dir():
            path = Path(shutil.make_archive(str(Path(d) / "bundle"), "zip", root_dir=bundle))
        fields = {"update": "1", "reason": reason} if update else {}
        made = call(as_json, lambda c: c.upload("/competitions/bundle", path, fields))
    if update:
        emit(as_json, made, change_lines)
        return
    emit(
        as_json,
        made,
        lambda r: click.echo(f"created {r['id']} ({r['state']}): {', '.join(r['tasks'])}"),
    )


@competitions.command("edit")
@click.argument("competition")
@click.option("--title", default=None, help="A new title.")
@click.option(
    "--state",
    type=click.Choice(["draft", "visible", "archived"]),
    default=None,
    help="draft: its people only; visible: everyone; archived: readable, not listed.",
)
@JSON
def competitions_edit(competition, title, state, as_json):
    """Change a competition's title or state (its owners and organizers)."""
    body = {k: v for k, v in (("title", title), ("state", state)) if v is not None}
    made = call(
        as_json,
        lambda c: c.send_json("PATCH", f"/competitions/{quote(competition, safe='')}", body),
    )
    emit(as_json, made, lambda r: click.echo(f"{r['id']} ({r['state']}): {r['title']}"))


@competitions.command("export")
@click.argument("competition")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--with-gold", is_flag=True, help="Include the hidden gold.")
def competitions_export(competition, output, with_gold):
    """Download a competition as a bundle zip that re-creates it (its organizers)."""
    r = call(
        False,
        lambda c: c.request(
            "GET",
            f"/competitions/{quote(competition, safe='')}/bundle",
            {"gold": "1" if with_gold else "0"},
        ),
    )
    output.write_bytes(r.body)
    click.echo(f"wrote {len(r.body)} bytes to {output}", err=True)


@competitions.command("clone")
@click.argument("competition")
@click.argument("new_id")
@JSON
def competitions_clone(competition, new_id, as_json):
    """A new draft competition made from this one (its tasks' ids suffixed with NEW_ID)."""
    made = call(
        as_json,
        lambda c: c.send_json(
            "POST", f"/competitions/{quote(competition, safe='')}/clone", {"id": new_id}
        ),
    )
    emit(
        as_json,
        made,
        lambda r: click.echo(f"created {r['id']} ({r['state']}): {', '.join(r['tasks'])}"),
    )
