"""Code runs: the stages of a participant's system run blind, and what it may be shown.

Stages: queued -> running -> ran (its output became submission `submission_id`, scored on the
ordinary queue) or failed (`failure_kind` "code": the system broke a limit or wrote no valid
output, which counts against the phase's limits; "infra": the server failed it twice, which does
not count). Every change is conditional on the row, so a job run twice moves a run once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy import update
from sqlmodel import Session

from server.db import session_scope
from server.models import CodeRun, Phase, utcnow
from tasks import get_task
from tasks.bundle_models import REQUIRED_INPUTS
from tasks.store import TaskStore

MAX_ATTEMPTS = 2  # a run the server failed (a dead worker) is tried once more, never a third time
STAGES = ("queued", "running", "ran", "failed")


def start(engine, run_id: int) -> int | None:
    """Move a queued run (or one left running by a dead worker) to running; its attempt number,
    or None when it is final or out of attempts."""
    with session_scope(engine) as s:  # the worker's own step
        n = s.execute(
            update(CodeRun)
            .where(
                CodeRun.id == run_id,
                CodeRun.stage.in_(("queued", "running")),
                CodeRun.attempts < MAX_ATTEMPTS,
            )
            .values(stage="running", attempts=CodeRun.attempts + 1, started_at=utcnow())
        ).rowcount
    if not n:
        return None
    with Session(engine) as s:
        return s.get(CodeRun, run_id).attempts


def finish(engine, run_id: int, *, stage: str, **values) -> bool:
    """Record a running run's end (ran or failed) once; False when another run of the job did."""
    with session_scope(engine) as s:  # the worker's own step
        n = s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id, CodeRun.stage == "running")
            .values(stage=stage, finished_at=utcnow(), **values)
        ).rowcount
    return bool(n)


def fail_infra(engine, run_id: int, reason: str) -> bool:
    """Fail a run for the server's reasons (not counted against the team)."""
    with session_scope(engine) as s:  # the worker's (or the reconciler's) own step
        n = s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id, CodeRun.stage.in_(("queued", "running")))
            .values(stage="failed", failure_kind="infra", reason=reason[:500], finished_at=utcnow())
        ).rowcount
    return bool(n)


def input_names(task_id: str) -> tuple[str, ...]:
    """The files of a split a system reads: its family's inputs (never a gold file)."""
    return REQUIRED_INPUTS.get(get_task(task_id).kind, ("inputs.jsonl",))


def stage_inputs(
    home: Path, task_id: str, split: str, dest: Path, blind: set[str] = frozenset()
) -> list[str]:
    """Lay out what a system reads, readable by the sandbox's user: the split's input files at the
    top of `dest` (`/input/inputs.jsonl`), and under `dest/public/<area>/` every public file a
    participant may download (the training data, the dev gold) plus the run's own split; never a
    blind split's but its own, never a gold file of the server. A code worker needs nothing
    else."""
    store = TaskStore(task_id, home)
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in input_names(task_id):
        src = store.public(split, name)
        if src.is_file() and not src.is_symlink():
            shutil.copyfile(src, dest / name)
            copied.append(name)
    public = store.root / "public"
    for p in store.public_files():
        rel = p.relative_to(public)
        if p.is_symlink() or (rel.parts[0] in blind and rel.parts[0] != split):
            continue
        target = dest / "public" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
    for d, _dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return copied


def may_see_log(run: CodeRun, phase: Phase, *, organizer: bool) -> bool:
    """The organizers see a run's log at once; its team on an open phase at once, on a blind
    phase once an organizer reviewed the run (nothing of the hidden inputs leaks through it)."""
    return organizer or not phase.blind or run.reviewed_at is not None


def add_run(
    s: Session,
    *,
    team_id: int,
    user_id: int | None,
    phase: Phase,
    stored: tuple[str, str, int],
    filename: str,
    manifest: dict,
    fields: dict,
    is_baseline: bool,
) -> CodeRun:
    """The row of an admitted system (`stored`: what `submissions.store` returned), queued,
    flushed; `fields` are the upload's, given to the submission its output becomes."""
    key, sha, size = stored
    run = CodeRun(
        team_id=team_id,
        user_id=user_id,
        task_id=phase.task_id,
        phase_id=phase.id,
        archive_sha256=sha,
        storage_key=key,
        file_name=(filename or "")[:255],
        size=size,
        manifest=manifest,
        fields=fields,
        is_baseline=is_baseline,
    )
    s.add(run)
    s.flush()
    return run
