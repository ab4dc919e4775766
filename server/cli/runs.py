"""Runs and published rankings at the server's shell: rescore, hide, remove, restore, move to
another track, choose a team's ranked run; show a ranking."""

from __future__ import annotations

import json

import click

from server.cli.common import (
    Refused,
    done_quickly,
    home_option,
    local_session,
    local_settings,
    phase_or_refuse,
    task_or_refuse,
)


def _act(call):
    """`call(actions, settings, s)` with the submissions' actions on the local database, inside
    its session; a refusal (or no such run) is one line."""
    from scorer.errors import PalimpsestError
    from server.actions import submissions as actions

    settings = local_settings()
    with local_session(settings) as s:
        try:
            return call(actions, settings, s)
        except PalimpsestError as e:  # refused, or no such run
            raise Refused(getattr(e, "message", None) or str(e)) from None


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.group("runs")
    def runs():
        """Organizer actions on submitted runs, at the server's own shell: rescore, hide, remove."""

    @runs.command("rescore")
    @click.argument("submission_id", type=int, metavar="SUBMISSION")
    @click.option("--reason", default="", help="Why, for the audit log.")
    @click.option("--json", "as_json", is_flag=True, help="Print what was queued as JSON.")
    @home_option
    @done_quickly
    def runs_rescore(submission_id, reason, as_json):
        """Score a run again."""
        result = _act(
            lambda actions, settings, s: actions.rescore_submission(
                s=s, submission_id=submission_id, actor=None, settings=settings, reason=reason
            )
        )
        if as_json:
            click.echo(result.model_dump_json())
        else:
            click.echo(f"submission {submission_id} queued for rescoring")

    def _visibility_command(name: str, help_text: str):
        @runs.command(name, help=help_text)
        @click.argument("submission_id", type=int, metavar="SUBMISSION")
        @click.option("--reason", default="", help="hide, remove: the reason the team is shown.")
        @click.option("--json", "as_json", is_flag=True, help="Print the run's new state as JSON.")
        @home_option
        @done_quickly
        def command(submission_id, reason, as_json):
            def hide(actions, settings, s):
                sub = actions.set_visibility(
                    s=s, submission_id=submission_id, action=name, actor=None, reason=reason
                )
                return {
                    "id": sub.id,
                    "hidden": bool(sub.hidden),
                    "removed": sub.removed_at is not None,
                    "reason": sub.hidden_reason or "",
                }

            out = _act(hide)
            if as_json:
                click.echo(json.dumps(out))
            else:
                click.echo(f"submission {submission_id}: {name}")

        return command

    _visibility_command("hide", "Hide a run from the boards (the team sees the reason).")
    _visibility_command("unhide", "Show a hidden run again.")
    _visibility_command("remove", "Remove a run (kept, never deleted; the team sees the reason).")
    _visibility_command("restore", "Restore a removed run.")

    @runs.command("move-track")
    @click.argument("submission_id", type=int, metavar="SUBMISSION")
    @click.option("--to", "track", required=True, help="The track to move the run to (e.g. A).")
    @click.option("--reason", required=True, help="Why, for the audit log.")
    @click.option("--field", default=None, help="The track field, where there are several.")
    @click.option("--json", "as_json", is_flag=True, help="Print the run's new facts as JSON.")
    @home_option
    @done_quickly
    def runs_move_track(submission_id, track, reason, field, as_json):
        """Move a run to another track of its competition (its fact sheet's track answer)."""

        def move(actions, settings, s):
            sub = actions.move_track(
                s=s,
                submission_id=submission_id,
                track=track,
                reason=reason,
                field=field,
                actor=None,
                settings=settings,
                via="cli",
            )
            return {"id": sub.id, "facts": dict(sub.facts or {})}

        out = _act(move)
        if as_json:
            click.echo(json.dumps(out))
        else:
            click.echo(f"submission {submission_id}: track {track}")

    @runs.command("primary")
    @click.argument("submission_id", type=int, metavar="SUBMISSION")
    @click.option(
        "--board",
        default=None,
        help="A declared board of the phase: the run becomes its team's ranked run there "
        "(absent or main: the team's primary run of the phase).",
    )
    @click.option("--reason", required=True, help="Why you choose for the team (the audit log).")
    @click.option("--json", "as_json", is_flag=True, help="Print the run's new state as JSON.")
    @home_option
    @done_quickly
    def runs_primary(submission_id, board, reason, as_json):
        """Choose a team's ranked run for it: its primary run of the phase, or with --board its
        ranked run on one board (the team's own choice's action and checks; no score read)."""

        def choose(actions, settings, s):
            sub = actions.choose_primary(
                s=s, submission_id=submission_id, actor=None, board=board, reason=reason
            )
            return {
                "id": sub.id,
                "team_id": sub.team_id,
                "board": board or "main",
                "is_primary": bool(sub.is_primary),
            }

        out = _act(choose)
        if as_json:
            click.echo(json.dumps(out))
        else:
            where = f"the {board} board" if board not in (None, "", "main") else "its phase"
            click.echo(f"submission {submission_id}: its team's ranked run on {where}")

    @main.group("rankings")
    def rankings():
        """Published final rankings (immutable snapshots, numbered versions)."""

    @rankings.command("show")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option(
        "--version",
        "version",
        type=int,
        default=None,
        help="A published version (default: the latest).",
    )
    @click.option(
        "--json", "as_json", is_flag=True, help="Print the snapshot exactly as published (JSON)."
    )
    @home_option
    @done_quickly
    def rankings_show(task_id, phase_name, version, as_json):
        """Print a published final ranking, or list its versions."""
        from server.domain import publication

        task = task_or_refuse(task_id)
        with local_session(local_settings()) as s:
            p = phase_or_refuse(s, task, phase_name)
            rv = publication.latest_ranking(s, p.id, version)
            versions = publication.ranking_versions(s, p.id)
        if rv is None:
            raise Refused(
                f"{task.id} {phase_name} has no published ranking"
                + (f" version {version}" if version else "")
            )
        if as_json:
            click.echo(rv.body_json)
            return
        body = json.loads(rv.body_json)
        meta = body["ranking"]
        click.echo(
            f"{task.id} {p.name}: final ranking version {rv.version} of {len(versions)}, published "
            f"{meta['published_at']}"
            f"{' by ' + meta['published_by'] if meta.get('published_by') else ''}"
            f"{' (' + meta['reason'] + ')' if meta.get('reason') else ''}; sha256 {rv.sha256[:16]}"
        )
        key = body["columns"][0]["key"]
        click.echo(f"{'rank':>4}  {'team':<24} {'method':<24} {key:>14} {'public':>8}")
        for r in body["rows"]:
            v = r["metrics"].get(key)
            pub = r.get("public_primary")
            click.echo(
                f"{'' if r['rank'] is None else r['rank']:>4}  {r['team'][:24]:<24} "
                f"{(r.get('method_name') or '')[:24]:<24} {'-' if v is None else f'{v:.4f}':>14} "
                f"{'-' if pub is None else f'{pub:.4f}':>8}"
            )
