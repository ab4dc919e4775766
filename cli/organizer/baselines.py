"""`palimpsest organizer baselines list|queue|runs`: a task's baseline entries and runs."""

from __future__ import annotations

import click

from cli.common import JSON, call, emit, print_table


@click.group("baselines")
def baselines():
    """Baseline entries of a task: list them, queue runs."""


@baselines.command("list")
@click.argument("task_id", metavar="TASK")
@JSON
def baselines_list(task_id, as_json):
    """List a task's baseline entries, newest first."""
    rows = call(as_json, lambda c: c.get_all(f"/tasks/{task_id}/baselines"))
    emit(
        as_json,
        rows,
        lambda rows: print_table(
            [
                {**r, "score": ((r.get("scores") or {}).get("primary") or {}).get("value")}
                for r in rows
            ],
            ["id", "phase", "method_name", "status", "created", "score"],
        ),
    )


@baselines.command("queue")
@click.argument("task_id", metavar="TASK")
@click.argument("systems", nargs=-1, required=True)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option("--model", default=None, help="Bi-encoder / token encoder (a local path or a name).")
@click.option("--cross-model", default=None, help="Cross-encoder.")
@JSON
def baselines_queue(task_id, systems, device, model, cross_model, as_json):
    """Queue baseline runs for a worker of the baselines queue
    (`palimpsest worker --queue baselines`)."""
    r = call(
        as_json,
        lambda c: c.send_json(
            "POST",
            f"/tasks/{task_id}/baselines",
            {
                "systems": list(systems),
                "device": device,
                "model": model,
                "cross_model": cross_model,
            },
        ),
    )
    emit(
        as_json,
        r,
        lambda r: click.echo(f"queued {len(r['jobs'])} baseline run(s): {', '.join(r['jobs'])}"),
    )


@baselines.command("runs")
@click.option("--limit", type=int, default=50, show_default=True)
@JSON
def baselines_runs(limit, as_json):
    """Baseline runs on the queue: waiting, running, finished (what they recorded), failed."""
    rows = call(as_json, lambda c: c.get_all("/baselines/runs", limit=limit))
    emit(
        as_json,
        rows,
        lambda rows: print_table(
            [
                {
                    **r,
                    "recorded": ", ".join(
                        f"#{x.get('submission_id')}" for x in r.get("recorded") or []
                    ),
                }
                for r in rows
            ],
            ["id", "status", "enqueued", "ended", "recorded", "error"],
        ),
    )
