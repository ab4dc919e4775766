"""Organizer commands over the REST API, with an organizer's token (`palimpsest login`):
`palimpsest organizer phases|close|freeze|unfreeze|publish|rankings|export|submissions|rescore|
rescore-all|hide|unhide|audit|baselines|participants|approve|reject|suspend|ban|reinstate|
announce`.

They do over the network what the organizer pages do, through the same server code; the local
set-up commands (`palimpsest users|tokens|phases|rankings|db`, on the server's own database) stay
beside them. Each takes `--json` (exactly one JSON document on stdout); a failure is one line.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

import click

from cli.client import ClientError
from cli.participant import api_client, cell, die, print_table

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


def _phase_line(p: dict) -> str:
    lim = p.get("limits") or {}
    return (
        f"{p['name']:<8} {p['split']:<5} {', '.join(p.get('state') or []):<22} "
        f"opens {p.get('opens_at') or '-'}  closes {p.get('closes_at') or '-'}  "
        f"daily {cell(lim.get('daily'))} total {cell(lim.get('total'))} "
        f"concurrent {cell(lim.get('concurrent'))} public {p.get('public_fraction')}"
    )


def _when(v: str | None):
    """An option's time: 'none' clears it; otherwise sent as typed (the server says what is
    wrong)."""
    if v is None:
        return ...
    return None if v.lower() == "none" else v


def _limit(v: str | None):
    if v is None:
        return ...
    if v.lower() == "none":
        return None
    try:
        return int(v)
    except ValueError:
        raise click.BadParameter(f"{v!r} is not a whole number or 'none'") from None


def _phase_fields(
    opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction
) -> dict:
    fields = {
        "opens_at": _when(opens),
        "closes_at": _when(closes),
        "daily_limit": _limit(daily_limit),
        "total_limit": _limit(total_limit),
        "concurrent_limit": _limit(concurrent_limit),
        "public_fraction": public_fraction if public_fraction is not None else ...,
    }
    return {k: v for k, v in fields.items() if v is not ...}


def _phase_options(fn):
    for opt in reversed(
        [
            click.option(
                "--opens", help="Opening time (ISO 8601; UTC without an offset) or 'none'."
            ),
            click.option(
                "--closes", help="Closing time (ISO 8601; UTC without an offset) or 'none'."
            ),
            click.option(
                "--daily-limit", help="Scored submissions per team per UTC day, or 'none'."
            ),
            click.option(
                "--total-limit", help="Scored submissions per team in the phase, or 'none'."
            ),
            click.option(
                "--concurrent-limit", help="Submissions waiting or running at once, or 'none'."
            ),
            click.option(
                "--public-fraction", type=float, help="Share of the test gold scored publicly."
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def change_lines(got: dict) -> None:
    """What an edited bundle changed (a BundleUpdateOut), a line per task, then the notes."""
    for t in got["tasks"]:
        if t["versioned"]:
            what = "; ".join(
                f"{k}: {', '.join(t[k])}" for k in ("declared", "files", "gold") if t[k]
            )
            stale = sum(p["stale"] for p in t["phases"])
            queued = sum(len(p["rescoring"]) for p in t["phases"])
            click.echo(
                f"{t['task']}: version {t['previous_version']} -> {t['version']} ({what}); "
                f"{stale} run(s) stale, {queued} queued for rescoring; published rankings unchanged"
            )
        elif t["texts"]:
            click.echo(f"{t['task']}: texts changed in place ({', '.join(t['texts'])})")
        else:
            click.echo(f"{t['task']}: unchanged (version {t['version']})")
    for n in got.get("notes") or []:
        click.echo(f"note: {n}")


def register(main: click.Group) -> None:
    @main.group("organizer")
    def organizer():
        """Organizer actions over the API (an organizer's token): phases, publication, rescoring,
        hiding, exports, the audit log, baseline runs."""

    # ------------------------------------------------------------------------- phases

    @organizer.group("phases")
    def phases():
        """A task's phases: list, create, edit."""

    @phases.command("list")
    @click.argument("task_id", metavar="TASK")
    @JSON
    def phases_list(task_id, as_json):
        """List a task's phases with their state."""
        items = call(as_json, lambda c: c.get_all(f"/tasks/{task_id}/phases"))
        emit(as_json, items, lambda rows: [click.echo(_phase_line(p)) for p in rows] or None)

    @phases.command("create")
    @click.argument("task_id", metavar="TASK")
    @click.argument("name")
    @click.option(
        "--split", required=True, help="The task's split the phase scores on (dev, test)."
    )
    @_phase_options
    @JSON
    def phase_create(
        task_id,
        name,
        split,
        opens,
        closes,
        daily_limit,
        total_limit,
        concurrent_limit,
        public_fraction,
        as_json,
    ):
        """Create a phase of a task."""
        body = {
            "name": name,
            "split": split,
            **_phase_fields(
                opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction
            ),
        }
        p = call(as_json, lambda c: c.send_json("POST", f"/tasks/{task_id}/phases", body))
        emit(as_json, p, lambda p: click.echo(_phase_line(p)))

    @phases.command("edit")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @_phase_options
    @JSON
    def phase_edit(
        task_id,
        phase_name,
        opens,
        closes,
        daily_limit,
        total_limit,
        concurrent_limit,
        public_fraction,
        as_json,
    ):
        """Change a phase's window, limits or public fraction (only what is given changes)."""
        body = _phase_fields(
            opens, closes, daily_limit, total_limit, concurrent_limit, public_fraction
        )
        if not body:
            raise click.UsageError(
                "nothing to change: give --opens, --closes, a limit or --public-fraction"
            )
        p = call(
            as_json, lambda c: c.send_json("PATCH", f"/tasks/{task_id}/phases/{phase_name}", body)
        )
        emit(as_json, p, lambda p: click.echo(_phase_line(p)))

    def _action(name: str, help_text: str):
        @organizer.command(name, help=help_text)
        @click.argument("task_id", metavar="TASK")
        @click.argument("phase_name", metavar="PHASE")
        @JSON
        def command(task_id, phase_name, as_json):
            r = call(
                as_json,
                lambda c: c.send_json("POST", f"/tasks/{task_id}/phases/{phase_name}/{name}"),
            )
            emit(as_json, r, lambda r: click.echo(_phase_line(r["phase"])))

        return command

    _action("close", "Close a phase now: no further submissions are accepted.")
    _action(
        "freeze", "Freeze a phase's leaderboard: later submissions are not shown to participants."
    )
    _action("unfreeze", "Unfreeze a phase's leaderboard.")

    @organizer.command("publish")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option(
        "--close", "close_first", is_flag=True, help="Close an open phase in the same step."
    )
    @click.option("--reason", default="", help="Why this correction (needed from version 2 on).")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @JSON
    def publish(task_id, phase_name, close_first, reason, yes, as_json):
        """Publish the final ranking of a closed phase (an immutable snapshot); again, with
        --reason, to publish a correction as a new version."""
        if not yes and not as_json and sys.stdin.isatty():
            click.confirm(
                f"Publish the final ranking of {task_id}/{phase_name}? It cannot be undone, only "
                "corrected",
                abort=True,
            )
        r = call(
            as_json,
            lambda c: c.send_json(
                "POST",
                f"/tasks/{task_id}/phases/{phase_name}/publish",
                {"close": close_first, "reason": reason},
            ),
        )
        emit(
            as_json,
            r,
            lambda r: click.echo(
                f"{task_id} {phase_name}: final ranking version {r['ranking']['version']} "
                f"published (sha256 {r['ranking']['sha256'][:16]})"
            ),
        )

    @organizer.command("rankings")
    @click.argument("task_id", metavar="TASK")
    @click.argument("phase_name", metavar="PHASE")
    @click.option(
        "--version", type=int, default=None, help="Print this version (the snapshot, as published)."
    )
    @JSON
    def rankings(task_id, phase_name, version, as_json):
        """List the published versions of a phase's final ranking, or print one."""
        if version is not None:
            r = call(
                as_json,
                lambda c: c.request(
                    "GET", f"/tasks/{task_id}/phases/{phase_name}/rankings/{version}"
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

    @organizer.command("export")
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
    def export(task_id, phase_name, fmt, version, output, facts):
        """The final ranking as CSV, JSON or a LaTeX table: the published snapshot byte for byte, or
        a preview before publication."""
        r = call(
            False,
            lambda c: c.request(
                "GET",
                f"/tasks/{task_id}/phases/{phase_name}/export",
                {"format": fmt, "version": version, **({"facts": "true"} if facts else {})},
            ),
        )
        if output is None:
            click.echo(r.body.decode("utf-8"), nl=False)
        else:
            output.write_bytes(r.body)
            click.echo(f"wrote {len(r.body)} bytes to {output}", err=True)

    # ------------------------------------------------------------------------- submissions

    @organizer.command("submissions")
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

    @organizer.command("runs")
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

    @organizer.command("review")
    @click.argument("run_id", type=int)
    @click.option(
        "--redact",
        "redacted",
        type=click.File("r", encoding="utf-8"),
        help="Release this file (the log with lines removed or redacted) instead of the log.",
    )
    @click.option("--withhold", is_flag=True, help="Withhold the log from the team.")
    @click.option("--note", default="", help="A note the team reads (why a log is withheld).")
    @JSON
    def review(run_id, redacted, withhold, note, as_json):
        """Review an ended code run: on a blind phase its team then reads its log as it is (the
        default), the redacted copy `--redact FILE`, or nothing but `--note` (`--withhold`)."""
        if redacted is not None and withhold:
            raise click.UsageError("--redact or --withhold, not both")
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
                f"code run {r['id']} reviewed: {r.get('release') or 'release'}\n"
                + (r.get("log") or "")
            ),
        )

    @organizer.command("rescore")
    @click.argument("submission_id", type=int)
    @click.option("--reason", default="", help="Recorded in the audit log.")
    @JSON
    def rescore(submission_id, reason, as_json):
        """Score one submission again."""
        r = call(
            as_json,
            lambda c: c.send_json(
                "POST", f"/submissions/{submission_id}/rescore", {"reason": reason}
            ),
        )
        emit(
            as_json,
            r,
            lambda r: click.echo(f"queued for rescoring: {', '.join(map(str, r['queued']))}"),
        )

    @organizer.command("rescore-all")
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
            lambda r: click.echo(
                f"{len(r['queued'])} submission(s) of {task_id} queued for rescoring"
            ),
        )

    def _visibility(name: str, help_text: str, needs_reason: bool):
        @organizer.command(name, help=help_text)
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

    _visibility(
        "hide", "Hide a submission from the leaderboard (the team is shown the reason).", True
    )
    _visibility("unhide", "Show a hidden submission again.", False)
    _visibility(
        "remove",
        "Remove a submission (nothing is deleted for real; the team sees the reason).",
        True,
    )
    _visibility("restore", "Restore a removed submission.", False)

    # ------------------------------------------------------------------------- audit and baselines

    @organizer.command("audit")
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
            lambda c: c.get_all(
                "/audit", limit=limit, action=action, all="1" if everything else None
            ),
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

    @organizer.group("baselines")
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
    @click.option(
        "--model", default=None, help="Bi-encoder / token encoder (a local path or a name)."
    )
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
            lambda r: click.echo(
                f"queued {len(r['jobs'])} baseline run(s): {', '.join(r['jobs'])}"
            ),
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

    # ------------------------------------------------------------------------- registrations

    @organizer.command("participants")
    @click.argument("competition", metavar="COMPETITION")
    @click.option(
        "--status",
        type=click.Choice(["pending", "approved", "rejected", "suspended", "banned"]),
        default=None,
        help="Only registrations with this status.",
    )
    @click.option("--limit", type=int, default=None, help="At most this many, newest first.")
    @JSON
    def participants(competition, status, limit, as_json):
        """The people registered for a competition: status, terms accepted, team."""
        rows = call(
            as_json,
            lambda c: c.get_all(
                f"/competitions/{quote(competition, safe='')}/participants",
                limit=limit,
                status=status,
            ),
        )
        emit(
            as_json,
            rows,
            lambda rows: print_table(
                rows,
                ["user_id", "email", "status", "terms_version", "team", "registered_at", "reason"],
            ),
        )

    def _decide(competition: str, who: str, action: str, reason: str | None, as_json: bool):
        return call(
            as_json,
            lambda c: c.send_json(
                "POST",
                f"/competitions/{quote(competition, safe='')}/participants/"
                f"{quote(who, safe='')}/{action}",
                {"reason": reason or ""},
            ),
        )

    @organizer.command("approve")
    @click.argument("competition", metavar="COMPETITION")
    @click.argument("people_", metavar="EMAIL_OR_ID...", nargs=-1, required=True)
    @click.option("--reason", default=None, help="Shown to the participant (optional).")
    @JSON
    def approve(competition, people_, reason, as_json):
        """Approve registrations (pending or rejected ones)."""
        done = [_decide(competition, who, "approve", reason, as_json) for who in people_]
        if as_json:
            click.echo(json.dumps(done))
            return
        for r in done:
            click.echo(f"{r['email']}: {r['status']}")

    def _decision(action: str, help_text: str, needs_reason: bool):
        @organizer.command(action, help=help_text)
        @click.argument("competition", metavar="COMPETITION")
        @click.argument("who", metavar="EMAIL_OR_ID")
        @click.option(
            "--reason", required=needs_reason, help="Shown to the participant (and mailed)."
        )
        @JSON
        def command(competition, who, reason, as_json):
            r = _decide(competition, who, action, reason, as_json)
            emit(as_json, r, lambda r: click.echo(f"{r['email']}: {r['status']}"))

        return command

    _decision("reject", "Reject a registration (the person is shown the reason).", True)
    _decision("suspend", "Suspend a participant: no downloads, no submissions.", True)
    _decision(
        "ban",
        "Ban a participant: no downloads, no submissions, and their runs leave the live boards "
        "(published rankings keep them).",
        True,
    )
    _decision("reinstate", "Reinstate a rejected, suspended or banned participant.", False)

    # ------------------------------------------------------------------------ roles and invitations

    @organizer.command("invite")
    @click.argument("competition")
    @click.argument("email")
    @click.option(
        "--role",
        type=click.Choice(["organizer", "assessor", "owner"]),
        default="organizer",
        show_default=True,
        help="The role offered.",
    )
    @JSON
    def invite(competition, email, role, as_json):
        """Invite a person by email to a role in a competition (its owners): the link is mailed,
        or, where the server sends no mail, the role is granted at once to an existing account,
        else the link is printed for you to hand over."""
        r = call(
            as_json,
            lambda c: c.send_json(
                "POST", f"/competitions/{competition}/roles", {"email": email, "role": role}
            ),
        )

        def text(r):
            click.echo(r["message"])
            if r.get("link"):
                click.echo(r["link"])

        emit(as_json, r, text)

    @organizer.command("roles")
    @click.argument("competition")
    @JSON
    def roles(competition, as_json):
        """Who has which role in a competition, and its pending invitations."""
        r = call(as_json, lambda c: c.get_json(f"/competitions/{competition}/roles"))

        def text(r):
            print_table(r["people"], ["user_id", "email", "role", "since"])
            if r["invites"]:
                click.echo("pending invitations:")
                print_table(r["invites"], ["id", "email", "role", "created_at", "expires_at"])

        emit(as_json, r, text)

    @organizer.command("revoke")
    @click.argument("competition")
    @click.argument("email")
    @JSON
    def revoke(competition, email, as_json):
        """Take a person's role in a competition away and cancel their pending invitations (its
        owners; never the last owner). EMAIL may also be an account's id."""
        r = call(
            as_json,
            lambda c: c.send_json(
                "DELETE", f"/competitions/{competition}/roles/{quote(email, safe='')}"
            ),
        )
        emit(
            as_json,
            r,
            lambda r: click.echo(
                f"{r['email']}: "
                + (f"no longer {r['role']} of {r['competition']}" if r.get("role") else "")
                + (", " if r.get("role") and r["invites_cancelled"] else "")
                + (
                    f"{r['invites_cancelled']} invitation(s) cancelled"
                    if r["invites_cancelled"]
                    else ""
                )
            ),
        )

    # ------------------------------------------------------------------------- announcements

    @organizer.command("announce")
    @click.argument("competition", metavar="COMPETITION")
    @click.option("--title", required=True, help="The announcement's title (one line).")
    @click.option("--body", "body_text", help="Its text (Markdown).")
    @click.option(
        "--file",
        "body_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="A Markdown file with its text (instead of --body).",
    )
    @JSON
    def announce(competition, title, body_text, body_file, as_json):
        """Post an announcement: shown on the competition page and mailed to its approved
        participants (those who did not turn announcements off)."""
        if (body_text is None) == (body_file is None):
            die(
                ClientError("give the text with --body TEXT or --file FILE.md (one of them)"),
                as_json,
            )
        if body_file is not None:
            try:
                body_text = body_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                die(ClientError(f"cannot read {body_file}: {e}"), as_json)
        a = call(
            as_json,
            lambda c: c.send_json(
                "POST",
                f"/competitions/{competition}/announcements",
                {"title": title, "body_markdown": body_text},
            ),
        )
        emit(
            as_json,
            a,
            lambda a: click.echo(
                f"announcement {a['id']} posted in {a['competition']}: mailed to "
                f"{a['recipients']} participant(s)"
            ),
        )

    # ------------------------------------------------------------------------- bundles

    @organizer.group("competitions")
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
