"""Baseline entries: the reserved baselines team, and recording a baseline's submission file.

A baseline is recorded exactly as a team's upload is: `create_submission` stores the file and
enqueues its scoring (on the scoring queue); nothing here ever writes a score. Recording the same
file twice in a phase returns the first submission (deduplicated under the team lock), so re-running
a deterministic baseline adds no row. The leaderboard shows the newest scored entry per method.
"""

from __future__ import annotations

import json
import re
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from sqlalchemy import select
from sqlmodel import Session

import baselines as baselines_package
from baselines.errors import BaselineError
from baselines.run import describe_run, plan, recorded_method
from baselines.systems import EXTENSIONS, Options
from server.domain.accounts import new_invite_code
from server.domain.submissions import create_submission, ensure_phases, resolve_phase
from server.exceptions import DuplicateSubmission, NotFound
from server.jobs.queue import connect, enqueue_baseline_run
from server.migrate import SchemaError, prepare
from server.models import Phase, Team, User
from server.settings import Settings, get_settings

BASELINE_TEAM = "Baselines"


def reads_as_baselines(name: str) -> bool:
    """True for a team name that reads as the reserved baselines team's: "Baselines", "baselines",
    "B a s e l i n e s", "Baselines!", "Baseline", "Baselines (2)", "Ｂａｓｅｌｉｎｅｓ" (any case,
    width, accents, spacing or punctuation, with or without a number)."""
    folded = unicodedata.normalize("NFKD", name).casefold()
    letters = "".join(c for c in folded if c.isalnum() and not unicodedata.combining(c))
    return re.fullmatch(r"baselines?\d*", letters) is not None


def baseline_team(session: Session) -> Team:
    """The team baseline entries belong to, created on first use (no invite code is ever shown)."""
    team = (
        session.execute(select(Team).where(Team.is_baseline.is_(True)).order_by(Team.id))
        .scalars()
        .first()
    )
    if team is not None:
        return team
    taken = {
        n for (n,) in session.execute(select(Team.name).where(Team.name.like(f"{BASELINE_TEAM}%")))
    }
    name = next(
        n
        for n in (BASELINE_TEAM, *(f"{BASELINE_TEAM} ({i})" for i in range(2, 100)))
        if n not in taken
    )
    team = Team(name=name, invite_code=new_invite_code(), is_baseline=True)
    session.add(team)
    session.commit()
    session.refresh(team)
    return team


def baseline_phases(
    session: Session, task_id: str, names: list[str] | None = None, split: str = "test"
) -> list[Phase]:
    """The phases a baseline run on `split` is recorded in: the named ones, else every phase of the
    task on that split. Raises NotFound for a name the task lacks, or when it has no such phase."""
    ensure_phases(session)
    if names:
        return [resolve_phase(session, task_id, n) for n in names]
    found = list(
        session.execute(
            select(Phase).where(Phase.task_id == task_id, Phase.split == split).order_by(Phase.id)
        ).scalars()
    )
    if not found:
        raise NotFound(f"task {task_id!r} has no phase on its {split} split to record baselines in")
    return found


@dataclass
class Recorded:
    phase: str
    submission_id: int
    duplicate: bool

    def as_dict(self) -> dict:
        return {
            "phase": self.phase,
            "submission_id": self.submission_id,
            "duplicate": self.duplicate,
        }


def record_file(
    session: Session,
    *,
    task_id: str,
    path: str | Path,
    method_name: str,
    description: str = "",
    phases: list[str] | None = None,
    settings: Settings | None = None,
    user: User | None = None,
    split: str = "test",
) -> list[Recorded]:
    """Submit `path` as a baseline entry of `task_id` in each of its phases on `split` (or
    `phases`)."""
    settings = settings or get_settings()
    team = baseline_team(session)
    path = Path(path)
    out = []
    for ph in baseline_phases(session, task_id, phases, split):
        try:
            with path.open("rb") as f:
                sub = create_submission(
                    session,
                    user=user,
                    team=team,
                    task_id=task_id,
                    phase=ph,
                    upload=f,
                    filename=path.name,
                    method_name=method_name,
                    description=description,
                    is_baseline=True,
                    settings=settings,
                    dedupe=True,
                )
            out.append(Recorded(ph.name, sub.id, False))
        except DuplicateSubmission as e:
            out.append(Recorded(ph.name, e.submission_id, True))
    return out


def server_settings(home=None) -> Settings:
    """The server's settings (database, queue) with `home` as its data directory when given."""
    return Settings.from_env(home=home) if home is not None else Settings.from_env()


def server_database(settings: Settings):
    """The engine of the local server's database, at the migrations' head (the embedded default is
    upgraded; a DATABASE_URL that is behind is refused with BaselineError, saying what to run)."""
    try:
        return prepare(settings)
    except SchemaError as e:
        raise BaselineError(str(e)) from None


def record_baseline(
    result: dict,
    *,
    home=None,
    phases: list[str] | None = None,
    settings: Settings | None = None,
) -> list[dict]:
    """Record one run of `run_baselines` on the leaderboard as a baseline entry.

    The file goes through the participants' path -- stored, validated and scored by the queue -- as
    a submission of the reserved baselines team, in every phase of the task on its test split (or
    in `phases`); the scores in `result` are never inserted. Into the server's database and queue
    of `home` (or of `settings`). Recording the same file again returns the first submission
    (`duplicate: true`). Returns one {phase, submission_id, duplicate} per phase.
    """
    method = recorded_method(result)
    if settings is None:
        settings = server_settings(home)
    with Session(server_database(settings)) as s:
        rec = record_file(
            s,
            task_id=result["task"],
            path=result["file"],
            method_name=method,
            description=describe_run(result),
            phases=phases,
            settings=settings,
            split=result.get("split", "test"),
        )
    return [r.as_dict() for r in rec]


def enqueue_baselines(
    task_ids: list[str] | None = None,
    systems: list[str] | None = None,
    options: Options | None = None,
    home=None,
    phases: list[str] | None = None,
) -> list[dict]:
    """Put each asked-for (task, system) run on the baselines queue of the server at `home` (or
    REDIS_URL), for `palimpsest worker --queue baselines` on a machine with the models (as code
    runs of the baselines team instead: server.actions.code_runs.enqueue_baseline_systems)."""
    options = options or Options()
    settings = server_settings(home)
    runs, _notes = plan(
        task_ids, systems, options, settings.home, here=False
    )  # models: the worker's
    opts = options.job_args()
    try:
        conn = connect(settings)
        conn.ping()
    except Exception as e:  # noqa: BLE001 - any failure to reach Redis
        where = (
            settings.redis_url
            or f"the embedded Redis of {settings.home} (is `palimpsest serve` running?)"
        )
        raise BaselineError(f"cannot reach the queue at {where}: {e}") from None
    jobs = []
    for task_id, system in runs:
        job = enqueue_baseline_run(conn, task_id, system, opts, settings, phases)
        status = job.get_status(refresh=False)
        jobs.append(
            {
                "task": task_id,
                "system": system,
                "job": job.id,
                "status": getattr(status, "value", status) or "queued",
            }
        )
    return jobs


# ------------------------------------------------------------------- baselines as code runs

# what a baseline's archive carries: the reference systems and what they import of the project
PACKAGES = ("baselines", "scorer", "tasks")


def baseline_archive(task_id: str, system: str, options: Options, out: Path) -> Path:
    """The baselines team's system for (task, system) as a participant's would be: a zip of the
    project's pure-Python packages the reference systems import and a system.yaml running
    `baselines.sandboxed`. Fixed member times and order: the same code and options give the same
    bytes, so asking twice records one run."""
    base = Path(baselines_package.__file__).resolve().parent.parent
    opts = json.dumps(options.job_args(), sort_keys=True)
    output = f"predictions.{EXTENSIONS.get(task_id, 'jsonl')}"  # the reader goes by the ending
    manifest = {
        "command": [
            *("python3", "-m", "baselines.sandboxed", task_id, system),
            *("--options", opts, "--output", f"/output/{output}"),
        ],
        "runtime": "python",
        "output": output,
        "resources": {"gpu": options.device == "cuda"},
    }
    members = {"system.yaml": yaml.safe_dump(manifest, sort_keys=False).encode()}
    for name in PACKAGES:
        for p in sorted((base / name).rglob("*")):
            rel = p.relative_to(base)
            if p.is_file() and "__pycache__" not in rel.parts and p.suffix != ".pyc":
                members[rel.as_posix()] = p.read_bytes()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return out
