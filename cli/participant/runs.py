"""Your team's runs: `palimpsest submissions|status|run|primary|public|private|delete`."""

from __future__ import annotations

import json

import click

from cli.client import ClientError
from cli.common import api_client, cell, die, plain, print_table, problem


@click.command("run")
@click.argument("run_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def run_show(run_id, as_json):
    """Show a code run of your team's: its stage, what it used and (when allowed) its log."""
    try:
        run = api_client().get_json(f"/runs/{run_id}")
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(run))
    else:
        print_run(run)


@click.command("submissions")
@click.option("--task", "task_id", default=None, help="Only this task.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def submissions(task_id, as_json):
    """List your team's submissions."""
    try:
        rows = api_client().get_all("/submissions", task=task_id)
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(rows))
        return
    print_table(
        [
            {
                **r,
                "score": (r.get("scores") or {}).get("primary", {}).get("value"),
                "primary": "yes" if r.get("is_primary") else "",
            }
            for r in rows
        ],
        ["id", "task", "phase", "status", "created", "method_name", "score", "primary"],
    )


@click.command("primary")
@click.argument("submission_id", type=int)
@click.option(
    "--board",
    default=None,
    help="A declared board of the phase (a track's): the run becomes your team's ranked run "
    "there, whatever its primary run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def primary(submission_id, board, as_json):
    """Make a submission your team's primary (ranked) run of its phase (the others become
    contrastive), or with --board its ranked run on one board."""
    try:
        sub = api_client().send_json(
            "POST", f"/submissions/{submission_id}/primary", {"board": board} if board else None
        )
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(sub))
    elif board:
        click.echo(f"submission {sub['id']} is now your team's ranked run on the {board} board")
    else:
        click.echo(
            f"submission {sub['id']} is now your team's primary run of the {sub['phase']} "
            f"phase of {sub['task']}"
        )


def _own_run_cmd(name, help_text, method, path, body, said):
    @click.argument("submission_id", type=int)
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def command(submission_id, as_json):
        try:
            sub = api_client().send_json(method, path.format(id=submission_id), body)
        except ClientError as e:
            die(e, as_json)
        if as_json:
            click.echo(json.dumps(sub))
        else:
            click.echo(f"submission {sub['id']} of {sub['task']} ({sub['phase']}) {said}")

    command.__doc__ = help_text
    return click.command(name)(command)


make_public = _own_run_cmd(
    "public",
    "Show one of your team's runs on the public board.",
    "POST",
    "/submissions/{id}/public",
    {"show_publicly": True},
    "is shown on the public board",
)
make_private = _own_run_cmd(
    "private",
    "Keep one of your team's runs off the public board (your team and the organizers still "
    "see it ranked).",
    "POST",
    "/submissions/{id}/public",
    {"show_publicly": False},
    "is kept off the public board",
)
delete = _own_run_cmd(
    "delete",
    "Delete one of your team's runs: it leaves every board; the organizers keep it and may "
    "restore it; it still counts against your quota.",
    "DELETE",
    "/submissions/{id}",
    None,
    "is deleted (the organizers can restore it)",
)


@click.command("status")
@click.argument("submission_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(submission_id, as_json):
    """Show a submission's status, problems and scores."""
    try:
        sub = api_client().get_json(f"/submissions/{submission_id}")
    except ClientError as e:
        die(e, as_json)
    if as_json:
        click.echo(json.dumps(sub))
    else:
        print_submission(sub)


def print_run(run: dict) -> None:
    """A run as text; whatever the run printed (its log, its reason) without terminal escapes."""
    used = run.get("resources") or {}
    category = run.get("category") or run["stage"]
    click.echo(f"code run {run['id']} ({run['task']}, {run['phase']}): {category}")
    if run.get("held_until"):
        click.echo(
            f"  held until {run['held_until']} UTC, when its inputs are released: "
            "it runs then, never before"
        )
    for part, got in sorted((run.get("scores") or {}).items()):
        for subset, ms in sorted((got.get("metrics") or {}).items()):
            shown = ", ".join(f"{k} {v}" for k, v in sorted(ms.items()))
            click.echo(f"  {part} part, {subset}: {shown}")
    if used:
        click.echo(
            f"  used {used.get('cpu_seconds', 0):.2f} s of CPU, "
            f"{used.get('wall_seconds', 0):.2f} s wall, {used.get('peak_rss_mb', 0):.0f} MB"
        )
    if run.get("reason") and run["reason"] != category:
        click.echo(f"  {run['failure_kind'] or ''} failure: {plain(run['reason'])}")
    if run.get("submission"):
        click.echo(f"  its output is submission {run['submission']}")
    if run.get("review_note"):
        click.echo(f"  the organizers' note: {plain(run['review_note'])}")
    if run.get("review_text") is not None:  # an organizer's: what a release would show the team
        click.echo("--- what a release shows the team ---")
        click.echo(plain(run["review_text"]).rstrip())
    elif run.get("log_hidden"):
        withheld = run.get("release") == "withhold"
        click.echo(
            "  its log is withheld by the organizers"
            if withheld
            else "  its log waits for an organizer's review (a blind phase)"
        )
    elif run.get("log"):
        click.echo(plain(run["log"]).rstrip())


def print_submission(sub: dict) -> None:
    click.echo(f"submission {sub['id']} ({sub.get('task')}, {sub.get('phase')}): {sub['status']}")
    if sub.get("queue"):
        click.echo(f"  {queue_line(sub['queue'])}")
    for p in sub.get("errors") or []:
        click.echo(f"  {problem(p)}")
    scores = sub.get("scores")
    if scores:
        for part, res in (scores.get("parts") or {scores.get("part", "all"): scores}).items():
            prim = res.get("primary", {})
            click.echo(
                f"  {part}: {prim.get('name')} ({prim.get('subset')}) = {cell(prim.get('value'))}"
            )


def duration(seconds: float) -> str:
    """Seconds for people: 40 s, 3 min, 1 h 20 min."""
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {round((s % 3600) / 60)} min"


def queue_line(q: dict) -> str:
    """A waiting run's place and estimate, in one line (the API's `queue`)."""
    if q.get("position") == 0:
        where = "being scored"
    else:
        where = f"position {q.get('position')} of {q.get('queued')} in the queue"
    workers = q.get("workers")
    crew = "workers unknown" if workers is None else f"{workers} worker(s) alive"
    wait = q.get("estimated_wait_s")
    est = "no estimate yet" if wait is None else f"scored in about {duration(wait)}"
    return f"{where}; {est} ({crew}; {q.get('basis')})"
