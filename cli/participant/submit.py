"""`palimpsest submit TASK FILE` (or `--code DIR|ZIP`, a system to run blind), with `--wait`."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import click

from cli.client import Client, ClientError, upload_large
from cli.common import api_client, die
from cli.participant.runs import print_run, print_submission

FINAL = {"scored", "failed"}
FACT_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")


def upload_options() -> list[click.Option]:
    """The flags of what every upload carries, from its one declaration (the fields of
    server.api_models.UploadFields the run keeps, and `primary`): a text field `--method-name`, a
    yes/no one a bare flag (its declared `flag`, as `--private`, sets it to no)."""
    # here: the declaration loads when `submit` is parsed (or its help shown), not with every
    # command of the remote command line
    from server.api_models.submissions import UploadFields

    out = []
    for name in (*UploadFields.carried(), "primary"):
        f = UploadFields.model_fields[name]
        extra = f.json_schema_extra or {}
        flag = extra.get("flag") or "--" + name.replace("_", "-")
        if f.annotation is bool:
            out.append(
                click.Option(
                    [flag, name],
                    is_flag=True,
                    flag_value=not f.default,
                    default=f.default,
                    help=extra.get("flag_help") or f.description,
                )
            )
        else:
            out.append(click.Option([flag, name], default="", help=f.description))
    return out


class DeclaredUploadCommand(click.Command):
    """`submit`, its upload flags added from the declaration when it is parsed."""

    loaded = False

    def get_params(self, ctx):
        if not self.loaded:
            at = next(i for i, p in enumerate(self.params) if p.name == "phase") + 1
            self.params[at:at] = upload_options()
            self.loaded = True
        return super().get_params(ctx)


def _carried_form(carried: dict) -> dict:
    """The upload's declared fields as the API's form takes them (a yes/no as true or false)."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in carried.items()}


@click.command("submit", cls=DeclaredUploadCommand)
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
@click.option("--phase", default=None, help="Phase name (default: the open test phase, else dev).")
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
    fact,
    facts_file,
    wait,
    large_above,
    as_json,
    **carried,
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
            **_carried_form(carried),
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
        **_carried_form(carried),
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
    _stale_copy_note(c, task_id)
    if wait:
        sub = _wait(c, sub, as_json)
    said, closed = ([], False)
    if sub.get("duplicate"):
        said, closed = _duplicate_notes(c, sub, task_id, carried["method_name"])
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
        print_submission(sub)
    if sub["status"] == "failed" or closed:
        sys.exit(1)


def _stale_copy_note(c, task_id: str) -> None:
    """Say on stderr when the task's downloaded copy (`palimpsest download`'s folder) is of an
    older version of the task than the server's: what `validate` and `score` read offline there
    is then not what the server scores against."""
    from cli.participant.data import DOWNLOADS
    from tasks.declared import DECLARATION
    from tasks.store import TaskStore

    home = Path(os.environ.get("PALIMPSEST_DOWNLOADS") or DOWNLOADS)
    local = TaskStore(task_id, home).root / DECLARATION
    try:
        mine = json.loads(local.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return  # no copy here (or not one `download` wrote)
    try:
        theirs = c.get_json(f"/tasks/{task_id}").get("version")
    except ClientError:
        return
    if mine is not None and theirs is not None and mine != theirs:
        click.echo(
            f"note: your downloaded copy of {task_id} ({local.parent}) is version {mine}; the "
            f"task is now version {theirs}: download it again (`palimpsest download {task_id}`) "
            "before validating or scoring offline",
            err=True,
        )


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
        while run["stage"] not in RUN_FINAL and not run.get("held_until"):
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
        print_run(run)
        if sub is not None:
            print_submission(sub)
    if run["stage"] == "failed" or (sub is not None and sub["status"] == "failed"):
        sys.exit(1)


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
