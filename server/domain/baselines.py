"""Baseline entries: the reserved baselines team, the phases a baseline is recorded in, the
server a local command records into, and a reference system as a participant's archive.

A baseline's file is recorded exactly as a team's upload is, through the one intake
(`server.actions.baselines.record_baseline`); nothing here ever writes a score.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import yaml
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

import baselines as baselines_package
from baselines.errors import BaselineError
from baselines.systems import EXTENSIONS, Options
from server.db import savepoint
from server.domain import names
from server.domain.accounts import new_invite_code
from server.domain.submissions import ensure_phases, resolve_phase
from server.exceptions import NotFound
from server.migrate import SchemaError, prepare
from server.models import Phase, Team
from server.settings import Settings

BASELINE_TEAM = "Baselines"


def reads_as_baselines(name: str) -> bool:
    """True for a team name that reads as the reserved baselines team's: "Baselines", "baselines",
    "B a s e l i n e s", "Baselines!", "Baseline", "Baselines (2)", "Ｂａｓｅｌｉｎｅｓ",
    "Bаselines" with a Cyrillic а (any case, width, accents, spacing, punctuation or look-alike
    letter (`names.skeleton`), with or without a number)."""
    stem = re.sub(r"[\s\W_]*\d+[\W_]*$", "", names.normalise(name))  # "Baselines (2)"
    return names.skeleton(stem) in (names.skeleton("Baselines"), names.skeleton("Baseline"))


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
    try:  # made once, first writer wins: the loser uses the winner's
        with savepoint(session):
            session.add(team)
    except IntegrityError:
        return baseline_team(session)
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
