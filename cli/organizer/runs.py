"""`palimpsest organizer submissions|runs|review|rescore|rescore-all|hide|unhide|remove|restore|
move-track|primary`: every team's runs."""

from __future__ import annotations

import sys

import click

from cli.common import JSON, call, emit, plain, print_table


@click.command("submissions")
@click.option("--task", "task_id", default=None, help="Only this task.")
@click.option(
    "--status", type=click.Choice(["queued", "running", "scored", "failed"]), default=None
)
@click.option(
    "--limit", type=int, default=50, show_default=True, help="At most this many, newest first."
)
@JSON
def submissions(task_id, status, limit, as_json):
    """Every team's submissions, newest first."""
    rows = call(
        as_json,
        lambda c: c.get_all("/submissions", limit=limit, mine="0", task=task_id, status=status),
    )
    emit(
        as_json,
        rows,
        lambda rows: print_table(
            [
                {
                    **r,
                    "score": ((r.get("scores") or {}).get("primary") or {}).get("value"),
                    "flags": " ".join(
                        f
                        for f, on in (
                            ("primary", r.get("is_primary")),
                            ("hidden", r.get("hidden")),
                            ("baseline", r.get("is_baseline")),
                        )
                        if on
                    ),
                }
                for r in rows
            ],
            ["id", "team", "task", "phase", "status", "created", "score", "flags"],
        ),
    )


@click.command("runs")
@click.argument("task_id", metavar="TASK")
@click.option(
    "--awaiting-review", is_flag=True, help="Only ended runs of blind phases not reviewed."
)
@JSON
def runs(task_id, awaiting_review, as_json):
    """A task's code runs (systems run blind), newest first."""
    got = call(
        as_json,
        lambda c: c.get_json(
            f"/tasks/{task_id}/runs", awaiting_review="1" if awaiting_review else None
        ),
    )
    emit(
        as_json,
        got,
        lambda got: print_table(
            [
                {
                    **r,
                    "cpu": f"{r['cpu_seconds']:.2f}",
                    "reviewed": "yes" if r["reviewed"] else "",
                }
                for r in got["runs"]
            ],
            ["id", "team", "phase", "stage", "failure_kind", "cpu", "submission", "reviewed"],
        ),
    )


@click.command("review")
@click.argument("run_id", type=int)
@click.option(
    "--release",
    "release",
    is_flag=True,
    help="Release what `palimpsest run RUN` shows you (the log, the problems line by line, the "
    "figures) as it is.",
)
@click.option(
    "--redact",
    "redacted",
    type=click.File("r", encoding="utf-8"),
    help="Release this file alone (that text with lines removed or redacted, problems included).",
)
@click.option("--withhold", is_flag=True, help="Release nothing but --note.")
@click.option("--note", default="", help="A note the team reads (why it is withheld).")
@JSON
def review(run_id, release, redacted, withhold, note, as_json):
    """Review an ended code run: on a blind phase its team then reads what the review shows as
    it is (`--release`), the edited copy `--redact FILE`, or nothing but `--note` (`--withhold`).
    One of the three is always named: nothing is released by default."""
    if sum((bool(release), redacted is not None, bool(withhold))) != 1:
        raise click.UsageError("name one decision: --release, --redact FILE or --withhold")
    body = {"decision": "withhold" if withhold else "redact" if redacted else "release"}
    if redacted is not None:
        body["log"] = redacted.read()
    if note:
        body["note"] = note
    r = call(as_json, lambda c: c.send_json("POST", f"/runs/{run_id}/review", body))
    emit(
        as_json,
        r,
        lambda r: click.echo(
            f"code run {r['id']} reviewed: {r.get('release')}\n" + plain(r.get("review_text") or "")
        ),
    )


@click.command("rescore")
@click.argument("submission_id", type=int)
@click.option("--reason", default="", help="Recorded in the audit log.")
@JSON
def rescore(submission_id, reason, as_json):
    """Score one submission again."""
    r = call(
        as_json,
        lambda c: c.send_json("POST", f"/submissions/{submission_id}/rescore", {"reason": reason}),
    )
    emit(
        as_json,
        r,
        lambda r: click.echo(f"queued for rescoring: {', '.join(map(str, r['queued']))}"),
    )


@click.command("rescore-all")
@click.argument("task_id", metavar="TASK")
@click.option("--phase", default=None, help="Only this phase.")
@click.option("--include-invalid", is_flag=True, help="Also files that failed validation.")
@click.option("--reason", default="", help="Recorded in the audit log.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON
def rescore_all(task_id, phase, include_invalid, reason, yes, as_json):
    """Score every final submission of a task (or of one phase) again."""
    if not yes and not as_json and sys.stdin.isatty():
        click.confirm(
            f"Rescore every scored submission of {task_id}{f'/{phase}' if phase else ''}?",
            abort=True,
        )
    r = call(
        as_json,
        lambda c: c.send_json(
            "POST",
            f"/tasks/{task_id}/rescore",
            {"phase": phase, "include_invalid": include_invalid, "reason": reason},
        ),
    )
    emit(
        as_json,
        r,
        lambda r: click.echo(f"{len(r['queued'])} submission(s) of {task_id} queued for rescoring"),
    )


@click.command("move-track")
@click.argument("submission_id", type=int)
@click.option("--to", "track", required=True, help="The track to move the run to (e.g. A).")
@click.option("--reason", required=True, help="Why (recorded in the audit log).")
@click.option(
    "--field", default=None, help="The track field's key, where the competition has several."
)
@JSON
def move_track(submission_id, track, reason, field, as_json):
    """Move a run to another track of its competition (its fact sheet's track answer)."""
    body = {"track": track, "reason": reason, **({"field": field} if field else {})}
    r = call(as_json, lambda c: c.send_json("POST", f"/submissions/{submission_id}/track", body))
    emit(
        as_json,
        r,
        lambda r: click.echo(
            f"submission {r['id']}: track {((r.get('facts') or {}).get(field or 'track'))}"
        ),
    )


def _visibility(name: str, help_text: str, needs_reason: bool):
    @click.command(name, help=help_text)
    @click.argument("submission_id", type=int)
    @click.option("--reason", required=needs_reason, help="Shown to the team.")
    @JSON
    def command(submission_id, reason, as_json):
        r = call(
            as_json,
            lambda c: c.send_json(
                "POST",
                f"/submissions/{submission_id}/visibility",
                {"action": name, "reason": reason or ""},
            ),
        )
        emit(as_json, r, lambda r: click.echo(f"submission {r['id']}: {name}"))

    return command


hide = _visibility(
    "hide", "Hide a submission from the leaderboard (the team is shown the reason).", True
)
unhide = _visibility("unhide", "Show a hidden submission again.", False)
remove = _visibility(
    "remove",
    "Remove a submission (nothing is deleted for real; the team sees the reason).",
    True,
)
restore = _visibility("restore", "Restore a removed submission.", False)


@click.command("primary")
@click.argument("submission_id", type=int)
@click.option(
    "--board",
    default=None,
    help="A declared board of the phase (a track's): the run becomes its team's ranked run there "
    "(absent or main: the team's primary run of the phase).",
)
@click.option("--reason", required=True, help="Why you choose for the team (the audit log).")
@JSON
def primary(submission_id, board, reason, as_json):
    """Choose a team's ranked run for it (a team that asked by mail): its primary run of the
    phase, or with --board its ranked run on one board. The same action as the team's own choice
    (the board's filter, refused once the phase is published; no score is read)."""
    body = {"reason": reason, **({"board": board} if board else {})}
    r = call(as_json, lambda c: c.send_json("POST", f"/submissions/{submission_id}/primary", body))
    where = f"the {board} board" if board not in (None, "", "main") else f"the {r['phase']} phase"
    emit(
        as_json,
        r,
        lambda r: click.echo(f"submission {r['id']}: its team's ranked run on {where}"),
    )
