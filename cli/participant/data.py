"""What a task offers a participant: `palimpsest download TASK`, `palimpsest leaderboard TASK` and
the server's tasks with the caller's quota (`palimpsest tasks list` with a server set)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import click

from cli.client import ClientError, load_config
from cli.common import api_client, die, print_table
from tasks.declared import DECLARATION
from tasks.store import TaskStore

# where `download` writes unless told otherwise: a folder of its own in the current directory,
# never the data directory a server on this machine reads ($PALIMPSEST_HOME)
DOWNLOADS = "palimpsest-data"


@click.command("download")
@click.argument("task_id", metavar="TASK")
@click.option(
    "--split",
    default=None,
    help="Only this split or folder (default: every one released now).",
)
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PALIMPSEST_DOWNLOADS",
    default=Path(DOWNLOADS),
    show_default=True,
    help="Where to write (its tasks/TASK/ folder); give it to `validate` and `score` as "
    "--home. Never the server's data directory unless named here ($PALIMPSEST_DOWNLOADS).",
)
def download(task_id, split, home):
    """Download a task's public files into a folder of their own (so `validate` and `score
    --split dev` work offline there)."""
    store = TaskStore(task_id, home)
    if (store.root / "gold").exists():
        die(
            ClientError(
                f"{store.root} holds a server's copy of {task_id} (its gold/ folder); "
                "download into another --home"
            )
        )
    try:
        r = api_client().request("GET", f"/tasks/{task_id}/download", {"split": split})
    except ClientError as e:
        die(e)
    try:
        zf = zipfile.ZipFile(io.BytesIO(r.body))
    except zipfile.BadZipFile:
        die(ClientError("the server sent something that is not a zip archive"))
    n = 0
    for info in zf.infolist():
        name = info.filename
        if info.is_dir() or name.startswith("/") or ".." in Path(name).parts:
            continue
        if name not in ("task.json", DECLARATION) and not name.startswith("public/"):
            continue
        dest = store.root / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(zf.read(info))
        n += 1
    click.echo(f"downloaded {n} file(s) of {task_id} to {store.root}")
    try:
        withheld = json.loads(zf.read("task.json")).get("withheld") or {}
    except (KeyError, ValueError):
        withheld = {}
    for area, at in sorted(withheld.items()):
        if at == "blind":
            click.echo(f"never downloaded: {area} (blind: your system runs on it on the server)")
        else:
            click.echo(f"not released yet: {area} (from {at or 'its phase opening'})")


@click.command("leaderboard")
@click.argument("task_id", metavar="TASK")
@click.option("--phase", default=None, help="Phase name (default: test).")
@click.option(
    "--board",
    default=None,
    help="One of the phase's boards (default: main; `palimpsest tasks --json` lists them).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def leaderboard(task_id, phase, board, as_json):
    """Show a task's leaderboard (one of its phase's boards with --board)."""
    name = board
    try:
        board = api_client().get_json(f"/tasks/{task_id}/leaderboard", phase=phase, board=name)
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(board))
        return
    cols = [c["key"] for c in board.get("columns", [])][:6]  # the primary column first
    flat = [
        {
            "rank": r.get("rank"),
            "team": r.get("team"),
            # an organizer's board keeps removed and hidden runs, unranked: say so
            "type": f"{r.get('row_type')}: {r['note']}" if r.get("note") else r.get("row_type"),
            "method": r.get("method_name"),
            **{k: (r.get("metrics") or {}).get(k) for k in cols},
        }
        for r in board.get("rows", [])
    ]
    on = f", board {board.get('title') or board['board']}" if board.get("board") else ""
    prim = board.get("primary") or {}
    click.echo(
        f"{task_id} leaderboard ({board.get('phase')} phase{on}, ranked by "
        f"{prim.get('metric')} on {prim.get('subset')}, on the {board.get('ranked_on')} part)"
    )
    print_table(flat, ["rank", "team", "type", "method", *cols])


def server_tasks(as_json: bool) -> bool:
    """List the server's tasks and phases with the caller's quota; False when no server is set."""
    cfg = load_config()
    if not cfg.get("server"):
        return False
    try:
        rows = api_client().get_all("/tasks")
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(rows))
        return True
    flat = []
    for t in rows:
        for p in t.get("phases", []):
            q = p.get("quota") or {}
            flat.append(
                {
                    "task": t["id"],
                    "phase": p["name"],
                    "open": "yes" if p.get("is_open") else "no",
                    "closes": p.get("closes_at"),
                    "left today": q.get("daily_left"),
                    "left in all": q.get("total_left"),
                    "next allowed": q.get("next_allowed_at"),
                }
            )
    print_table(
        flat, ["task", "phase", "open", "closes", "left today", "left in all", "next allowed"]
    )
    return True
