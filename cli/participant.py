"""Participant commands: login, tasks, download, submit, submissions, status, leaderboard.

Tables for people, `--json` for scripts; every failure is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import click

from cli.client import Client, ClientError, load_config, save_config, upload_large
from tasks.declared import DECLARATION
from tasks.store import TaskStore

FINAL = {"scored", "failed"}
# where `download` writes unless told otherwise: a folder of its own in the current directory,
# never the data directory a server on this machine reads ($PALIMPSEST_HOME)
DOWNLOADS = "palimpsest-data"
FACT_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")


def api_client() -> Client:
    return Client.from_config()


def die(e: ClientError, as_json: bool = False):
    if as_json:
        click.echo(json.dumps({"error": {"message": str(e), "status": e.status, **e.body}}))
    else:
        click.echo(f"error: {e}", err=True)
        if e.body.get("code") == "invalid_request" and len(e.body.get("problems") or []) <= 1:
            sys.exit(1)  # the message is the one problem
        for p in (e.body.get("problems") or [])[:50]:
            click.echo(f"  {_problem(p)}", err=True)
        extra = (e.body.get("total") or 0) - len(e.body.get("problems") or [])
        if extra > 0 and e.body.get("problems"):
            click.echo(f"  ... and {extra} more", err=True)
    sys.exit(1)


def _problem(p: dict) -> str:
    """A problem from the server, worded as the offline validator words it."""
    # the scorer loads only when a command needs it: `palimpsest --help` stays light
    from scorer.errors import Problem

    return str(Problem(str(p.get("message", "")), p.get("line"), p.get("id")))


def print_table(rows: list[dict], cols: list[str]) -> None:
    if not rows:
        click.echo("(none)")
        return
    width = {c: max(len(c), *(len(cell(r.get(c))) for r in rows)) for c in cols}
    click.echo("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        click.echo("  ".join(cell(r.get(c)).ljust(width[c]) for c in cols))


def cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def register(main: click.Group) -> None:
    """Add the participant commands to the `palimpsest` group."""

    @main.command("login")
    @click.option(
        "--server", required=True, help="The server's base URL, e.g. https://palimpsest.example.org"
    )
    @click.option(
        "--token", prompt=True, hide_input=True, help="Your API token (from your account page)."
    )
    def login(server, token):
        """Store the server URL and API token (config file mode 0600)."""
        c = Client(server, token, retries=1)
        try:
            me = c.get_json("/me")
        except ClientError as e:
            die(e)
        p = save_config(server, token)
        team = (me.get("team") or {}).get("name") or "no team yet"
        click.echo(f"logged in to {server} as {me.get('email')} ({team}); saved to {p}")

    @main.command("download")
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
                click.echo(
                    f"never downloaded: {area} (blind: your system runs on it on the server)"
                )
            else:
                click.echo(f"not released yet: {area} (from {at or 'its phase opening'})")

    @main.command("submit")
    @click.argument("task_id", metavar="TASK")
    @click.argument(
        "file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
    )
    @click.option(
        "--code",
        "code",
        type=click.Path(exists=True, path_type=Path),
        default=None,
        metavar="DIR|ZIP",
        help="Submit your system (a folder or zip with system.yaml) to run blind on the server, "
        "instead of a prediction file.",
    )
    @click.option(
        "--phase", default=None, help="Phase name (default: the open test phase, else dev)."
    )
    @click.option("--method-name", default="", help="Name of your method.")
    @click.option("--description", default="", help="A short description.")
    @click.option("--url", default="", help="Paper or code URL.")
    @click.option("--private", "private", is_flag=True, help="Keep off the public leaderboard.")
    @click.option(
        "--primary", is_flag=True, help="Make it your team's primary (ranked) run of the phase."
    )
    @click.option(
        "--fact",
        "fact",
        multiple=True,
        metavar="KEY=VALUE",
        help="An answer of the competition's fact sheet (repeatable; overrides --facts).",
    )
    @click.option(
        "--facts",
        "facts_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="The fact sheet's answers as a JSON object (key: value).",
    )
    @click.option("--wait", is_flag=True, help="Wait until scored, then print the scores.")
    @click.option(
        "--large-above",
        type=int,
        default=64 * 1024 * 1024,
        show_default=True,
        envvar="PALIMPSEST_LARGE_ABOVE",
        help="Bytes above which the file goes straight to the site's object store in parts "
        "(resumable: run the command again after a dropped connection).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def submit(
        task_id,
        file,
        code,
        phase,
        method_name,
        description,
        url,
        private,
        primary,
        fact,
        facts_file,
        wait,
        large_above,
        as_json,
    ):
        """Upload a prediction file (or, with --code, your system to run blind); with --wait,
        follow it until it is scored."""
        if (file is None) == (code is None):
            die(ClientError("give a prediction FILE or --code DIR|ZIP (one of them)"), as_json)
        try:
            sheet = fact_sheet(facts_file, fact)
        except ValueError as e:
            die(ClientError(str(e)), as_json)
        try:
            c = api_client()
        except ClientError as e:  # no server configured
            die(e, as_json)
        if code is not None:
            fields = {
                "phase": phase,
                "method_name": method_name,
                "description": description,
                "url": url,
                "show_publicly": "false" if private else "true",
                **({"primary": "true"} if primary else {}),
                **{f"fact.{k}": v for k, v in sheet.items()},
            }
            _submit_code(c, task_id, code, fields, wait, as_json)
            return
        bar = None
        if not as_json and sys.stderr.isatty():
            bar = click.progressbar(length=file.stat().st_size, label="uploading", file=sys.stderr)
        last = [0]

        def progress(sent, total):
            if bar is not None:
                bar.update(max(0, min(sent, bar.length) - last[0]))
                last[0] = min(sent, bar.length)

        form = {
            "phase": phase,
            "method_name": method_name,
            "description": description,
            "url": url,
            "show_publicly": "false" if private else "true",
            **({"primary": "true"} if primary else {}),
            **{f"fact.{k}": v for k, v in sheet.items()},
        }
        try:
            sub = None
            if file.stat().st_size > large_above:  # straight to the object store, in parts
                sub = upload_large(c, task_id, file, form, progress)
            if sub is None:
                sub = c.upload(f"/tasks/{task_id}/submissions", file, form, progress)
        except ClientError as e:
            if bar is not None:
                bar.render_finish()
            die(e, as_json)
        if bar is not None:
            bar.render_finish()
        if wait:
            sub = _wait(c, sub, as_json)
        said, closed = ([], False)
        if sub.get("duplicate"):
            said, closed = _duplicate_notes(c, sub, task_id, method_name)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "id": sub["id"],
                        "status": sub["status"],
                        "scores": sub.get("scores"),
                        "is_primary": sub.get("is_primary", False),
                        **({"errors": sub["errors"]} if sub.get("errors") else {}),
                        **(
                            {"duplicate": True, "phase_closed": closed, "notes": said}
                            if sub.get("duplicate")
                            else {}
                        ),
                    }
                )
            )
        else:
            for line in said:
                click.echo(line, err=closed)
            _print_submission(sub)
        if sub["status"] == "failed" or closed:
            sys.exit(1)

    @main.command("run")
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
            _print_run(run)

    @main.command("submissions")
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

    @main.command("primary")
    @click.argument("submission_id", type=int)
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def primary(submission_id, as_json):
        """Make a submission your team's primary (ranked) run of its phase; the others become
        contrastive."""
        try:
            sub = api_client().send_json("POST", f"/submissions/{submission_id}/primary")
        except ClientError as e:
            die(e, as_json)
        if as_json:
            click.echo(json.dumps(sub))
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
        main.command(name)(command)

    _own_run_cmd(
        "public",
        "Show one of your team's runs on the public board.",
        "POST",
        "/submissions/{id}/public",
        {"show_publicly": True},
        "is shown on the public board",
    )
    _own_run_cmd(
        "private",
        "Keep one of your team's runs off the public board (your team and the organizers still "
        "see it ranked).",
        "POST",
        "/submissions/{id}/public",
        {"show_publicly": False},
        "is kept off the public board",
    )
    _own_run_cmd(
        "delete",
        "Delete one of your team's runs: it leaves every board; the organizers keep it and may "
        "restore it; it still counts against your quota.",
        "DELETE",
        "/submissions/{id}",
        None,
        "is deleted (the organizers can restore it)",
    )

    @main.group("teams")
    def teams():
        """Your team: create one, join one with its invite code, show it, leave it. With
        `--competition ID`, your team in that competition; without, your team of every
        competition where you have none of your own."""

    def _team_cmd(name, help_text, method, path, body_of=None, args=()):
        def command(as_json, competition, **kw):
            scope = {"competition": competition} if competition else {}
            try:
                c = api_client()
                if method == "GET":
                    team = c.get_json(path, **scope)
                elif body_of is not None:
                    team = c.send_json(method, path, {**body_of(**kw), **scope})
                else:
                    team = c.send_json(method, path, None, **scope)
            except ClientError as e:
                die(e, as_json)
            if as_json:
                click.echo(json.dumps(team))
            elif "left_team" in team:
                click.echo("you left the team; its submissions stay with it")
            else:
                where = f" in {team['competition']}" if team.get("competition") else ""
                click.echo(
                    f"team {team['name']}{where} (id {team['id']}); "
                    f"invite code: {team['invite_code']}"
                )
                click.echo(
                    "members: "
                    + ", ".join(
                        x["email"]
                        + (" (captain)" if x.get("role") == "captain" else "")
                        + (" (waiting for the captain)" if x.get("status") == "pending" else "")
                        for x in team.get("members", [])
                    )
                )

        command.__doc__ = help_text
        command = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(command)
        command = click.option(
            "--competition",
            default=None,
            metavar="ID",
            help="The competition (its short id); without: your team of every competition.",
        )(command)
        for a in reversed(args):
            command = click.argument(a)(command)
        teams.command(name)(command)

    _team_cmd(
        "create",
        "Create a team (you become its captain).",
        "POST",
        "/team",
        lambda name: {"name": name},
        ("name",),
    )
    _team_cmd(
        "join",
        "Join a team with its invite code (where a competition asks, the captain approves).",
        "POST",
        "/team/join",
        lambda code: {"invite_code": code},
        ("code",),
    )
    _team_cmd("show", "Show your team: its members and invite code.", "GET", "/team")
    _team_cmd("leave", "Leave your team (its submissions stay with it).", "POST", "/team/leave")
    _team_cmd(
        "rotate",
        "Replace your team's invite code (the old one stops working).",
        "POST",
        "/team/invite",
    )

    @teams.command("approve")
    @click.argument("user_id", type=int)
    @click.option("--competition", required=True, metavar="ID", help="The competition.")
    @click.option("--turn-away", is_flag=True, help="Turn the person away instead.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def teams_approve(user_id, competition, turn_away, as_json):
        """As the captain, approve a person waiting to join your team in a competition."""
        try:
            team = api_client().send_json(
                "POST",
                f"/team/members/{user_id}",
                None,
                competition=competition,
                approve="0" if turn_away else "1",
            )
        except ClientError as e:
            die(e, as_json)
        if as_json:
            click.echo(json.dumps(team))
        else:
            click.echo(("turned away" if turn_away else "approved") + f" user {user_id}")

    @main.command("status")
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
            _print_submission(sub)

    @main.command("leaderboard")
    @click.argument("task_id", metavar="TASK")
    @click.option("--phase", default=None, help="Phase name (default: test).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def leaderboard(task_id, phase, as_json):
        """Show a task's leaderboard."""
        try:
            board = api_client().get_json(f"/tasks/{task_id}/leaderboard", phase=phase)
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
        click.echo(
            f"{task_id} leaderboard ({board.get('phase')} phase, ranked on the "
            f"{board.get('ranked_on')} part)"
        )
        print_table(flat, ["rank", "team", "type", "method", *cols])

    # ------------------------------------------------------------------------- registration

    @main.command("register")
    @click.argument("competition", metavar="COMPETITION")
    @click.option("--accept-terms", is_flag=True, help="Accept the terms (their current version).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def register_cmd(competition, accept_terms, as_json):
        """Register for a competition (or accept its changed terms). Without --accept-terms, a
        competition with terms prints where to read them and exits 1."""
        c = None
        try:
            c = api_client()
            mine = c.get_json(f"/competitions/{competition}/registration")
            if mine.get("current_terms_version", 0) > 0 and not accept_terms:
                where = c.server + (mine.get("terms_url") or f"/competitions/{competition}")
                message = (
                    f"read the terms of {competition} (version {mine['current_terms_version']}) "
                    f"at {where}, then run `palimpsest register {competition} --accept-terms`"
                )
                if as_json:
                    body = {"code": "terms_not_accepted", "message": message, "terms_url": where}
                    click.echo(json.dumps({"error": {**body, "status": None}}))
                else:
                    click.echo(message, err=True)
                sys.exit(1)
            body = {"accept_terms": accept_terms}
            if accept_terms:  # the version it told of: changed since, the server refuses
                body["terms_version"] = mine.get("current_terms_version", 0)
            got = c.send_json("POST", f"/competitions/{competition}/registration", body)
        except ClientError as e:
            die(e, as_json)
        if as_json:
            click.echo(json.dumps(got))
            return
        line = f"registered for {competition}: {got.get('status')}"
        if got.get("terms_version"):
            line += f" (terms version {got['terms_version']} accepted)"
        click.echo(line)
        if not got.get("participating") and got.get("message"):
            click.echo(got["message"])


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


def zip_system(folder: Path, out: Path) -> Path:
    """A folder as a zip with fixed times and sorted names (the same files: the same bytes, so a
    retried upload is recognised); caches and version control are left out."""
    skip = {"__pycache__", ".git", ".venv"}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(folder)
            if any(part in skip for part in rel.parts) or not p.is_file() or p.is_symlink():
                continue
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if os.access(p, os.X_OK) else 0o644) << 16
            zf.writestr(info, p.read_bytes())
    return out


RUN_FINAL = ("ran", "failed")


def _submit_code(c: Client, task_id: str, code: Path, fields: dict, wait: bool, as_json: bool):
    with tempfile.TemporaryDirectory() as tmp:
        archive = zip_system(code, Path(tmp) / f"{code.name}.zip") if code.is_dir() else code
        try:
            run = c.upload(f"/tasks/{task_id}/runs", archive, fields, field="code")
        except ClientError as e:
            die(e, as_json)
    sub = None
    if wait:
        delay = 0.3
        while run["stage"] not in RUN_FINAL:
            time.sleep(delay)
            delay = min(delay * 1.5, 3.0)
            try:
                run = c.get_json(f"/runs/{run['id']}")
            except ClientError as e:
                die(e, as_json)
        if run["stage"] == "ran" and run.get("submission"):
            try:
                sub = _wait(c, c.get_json(f"/submissions/{run['submission']}"), as_json)
            except ClientError as e:
                die(e, as_json)
    if as_json:
        click.echo(json.dumps({"run": run, "submission": sub}))
    else:
        _print_run(run)
        if sub is not None:
            _print_submission(sub)
    if run["stage"] == "failed" or (sub is not None and sub["status"] == "failed"):
        sys.exit(1)


def _print_run(run: dict) -> None:
    used = run.get("resources") or {}
    category = run.get("category") or run["stage"]
    click.echo(f"code run {run['id']} ({run['task']}, {run['phase']}): {category}")
    if used:
        click.echo(
            f"  used {used.get('cpu_seconds', 0):.2f} s of CPU, "
            f"{used.get('wall_seconds', 0):.2f} s wall, {used.get('peak_rss_mb', 0):.0f} MB"
        )
    if run.get("reason") and run["reason"] != category:
        click.echo(f"  {run['failure_kind'] or ''} failure: {run['reason']}")
    if run.get("submission"):
        click.echo(f"  its output is submission {run['submission']}")
    if run.get("review_note"):
        click.echo(f"  the organizers' note: {run['review_note']}")
    if run.get("log_hidden"):
        withheld = run.get("release") == "withhold"
        click.echo(
            "  its log is withheld by the organizers"
            if withheld
            else "  its log waits for an organizer's review (a blind phase)"
        )
    elif run.get("log"):
        click.echo(run["log"].rstrip())


def _wait(c: Client, sub: dict, as_json: bool) -> dict:
    delay, shown = 0.2, None
    while sub["status"] not in FINAL:
        if not as_json and sub["status"] != shown and sys.stderr.isatty():
            click.echo(f"submission {sub['id']}: {sub['status']}...", err=True)
            shown = sub["status"]
        time.sleep(delay)
        delay = min(delay * 1.5, 3.0)
        try:
            sub = c.get_json(f"/submissions/{sub['id']}")
        except ClientError as e:
            die(e, as_json)
    return sub


def _duplicate_notes(c, sub: dict, task_id: str, method_name: str) -> tuple[list[str], bool]:
    """What an identical re-upload became: which submission the file already is, whether a new
    method name was dropped, and whether its phase is closed (then nothing was accepted)."""
    said = [
        f"this file was already submitted by your team: submission {sub['id']} "
        f"({sub.get('task')}, {sub.get('phase')}), {sub['status']}; it was not submitted again"
    ]
    if method_name and method_name != sub.get("method_name"):
        said.append(
            f"the new --method-name {method_name!r} was not applied: submission {sub['id']} "
            f"keeps {sub.get('method_name') or ''!r}"
        )
    try:
        phases = c.get_json(f"/tasks/{task_id}").get("phases") or []
    except ClientError:
        phases = []
    closed = any(p.get("name") == sub.get("phase") and not p.get("is_open") for p in phases)
    if closed:
        said.append(f"error: the {sub.get('phase')} phase is closed: it accepts no submission")
    return said, closed


def _print_submission(sub: dict) -> None:
    click.echo(f"submission {sub['id']} ({sub.get('task')}, {sub.get('phase')}): {sub['status']}")
    if sub.get("queue"):
        click.echo(f"  {queue_line(sub['queue'])}")
    for p in sub.get("errors") or []:
        click.echo(f"  {_problem(p)}")
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


# ----------------------------------------------------------------------------- fact sheets


def fact_sheet(facts_file: Path | None, pairs: tuple[str, ...]) -> dict[str, str]:
    """The fact sheet's answers of `submit`: the JSON object of `--facts FILE`, then each
    `--fact KEY=VALUE` over it. A yes/no may be given as a JSON true or false. ValueError says
    what is wrong."""
    out: dict[str, str] = {}
    if facts_file is not None:
        try:
            got = json.loads(facts_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ValueError(f"--facts {facts_file}: not a JSON file ({e})") from None
        if not isinstance(got, dict):
            raise ValueError(f"--facts {facts_file}: a JSON object (key: value) is expected")
        for k, v in got.items():
            if isinstance(v, bool):
                v = "yes" if v else "no"
            elif v is None:
                v = ""
            elif not isinstance(v, (str, int, float)):
                raise ValueError(f"--facts {facts_file}: {k}: a text value is expected")
            out[str(k)] = str(v)
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k.strip():
            raise ValueError(f"--fact {pair!r}: KEY=VALUE is expected")
        out[k.strip()] = v
    for k in out:
        if not FACT_KEY.fullmatch(k):
            raise ValueError(f"{k!r} is not a fact sheet key (lowercase letters, digits and _)")
    return out
