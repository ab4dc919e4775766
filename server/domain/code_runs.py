"""Code runs: the stages of a participant's system run blind, and what it may be shown.

Stages: queued -> running -> ran (its output became submission `submission_id`, scored on the
ordinary queue) or failed (`failure_kind` "code": the system broke a limit or wrote no valid
output, which counts against the phase's limits; "infra": the server failed it (twice, or its
sandbox failed before the system started), which does not count). Every change is conditional
on the row, so a job run twice moves a run once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy import update
from sqlmodel import Session, select

from server.db import session_scope
from server.domain import download_rule, exposure
from server.domain.download_rule import area_files
from server.domain.visibility import viewer_of
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
            .values(stage=stage, finished_at=utcnow(), reserved_cpu=0.0, **values)
        ).rowcount
    return bool(n)


def fail_infra(engine, run_id: int, reason: str) -> bool:
    """Fail a run for the server's reasons (not counted against the team)."""
    with session_scope(engine) as s:  # the worker's (or the reconciler's) own step
        n = s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id, CodeRun.stage.in_(("queued", "running")))
            .values(
                stage="failed",
                failure_kind="infra",
                reason=reason[:500],
                finished_at=utcnow(),
                reserved_cpu=0.0,  # its reservation is given back
            )
        ).rowcount
    return bool(n)


def requeue_for_store(engine, run_id: int) -> bool:
    """A running run the object store's outage stopped: back to queued, its attempt given back
    (the store's absence is the server's, never counted toward `failed_twice`), for the
    reconciler to enqueue again."""
    with session_scope(engine) as s:  # the worker's own step
        n = s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id, CodeRun.stage == "running", CodeRun.attempts > 0)
            .values(stage="queued", attempts=CodeRun.attempts - 1)
        ).rowcount
    return bool(n)


def cpu_limit(manifest: dict, settings) -> float:
    """The CPU seconds a run may use: what its manifest asks, capped by the site."""
    res = (manifest or {}).get("resources") or {}
    return float(min(int(res.get("cpu_seconds", 600)), settings.run_cpu_seconds))


def reserve_budget(run: CodeRun, settings) -> None:
    """Reserve the run's CPU limit against its team's compute budget: the intake admits a system
    under the team's lock only while what the team's runs used and hold reserved is under the
    budget (`submissions.check_compute`), so parallel runs overshoot it by one run's limit at most.
    The reservation is settled to what the run used when it ends, given back if the server
    failed it."""
    run.reserved_cpu = cpu_limit(run.manifest, settings)


def failed_twice(s: Session, team_id: int, phase_id: int, sha256: str) -> CodeRun | None:
    """A run of this archive that the server failed to finish twice (its system may be what
    kills the worker): the same archive is refused afterwards, not run again for free."""
    return s.exec(
        select(CodeRun).where(
            CodeRun.team_id == team_id,
            CodeRun.phase_id == phase_id,
            CodeRun.archive_sha256 == sha256,
            CodeRun.failure_kind == "infra",
            CodeRun.attempts >= MAX_ATTEMPTS,
        )
    ).first()


def input_names(task_id: str) -> tuple[str, ...]:
    """The files of a split a system reads: its family's inputs (never a gold file)."""
    return REQUIRED_INPUTS.get(get_task(task_id).kind, ("inputs.jsonl",))


def released_areas(s: Session, task_id: str, home) -> set[str]:
    """The public areas a run may read: those the download rule releases to a
    participant now (`server.domain.download_rule`: never a blind split, never one before its date,
    never one that would expose hidden gold). The run's own split's inputs come beside them
    (`stage_inputs`)."""
    task = get_task(task_id)
    out = set()
    for a in download_rule.areas(s, task, home):
        if not a.released or not a.files:
            continue
        try:
            exposure.check_download(task, home, [a.name])
        except exposure.ExposureRefused:
            continue
        out.add(a.name)
    return out


def stage_inputs(home: Path, task_id: str, split: str, dest: Path, areas: set[str]) -> list[str]:
    """Lay out what a system reads, readable by the sandbox's user: the split's input files at the
    top of `dest` (`/input/inputs.jsonl`), and under `dest/public/<area>/` the files of each of
    `areas` (`released_areas`: what a participant may download now, and the run's own split's
    inputs); never another file, never a gold file of the server. A code worker needs nothing
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
    for area in sorted(set(areas) | {split}):
        files = area_files(store, area)
        if area not in areas:  # its own split unreleased: the inputs, nothing beside them
            files = [p for p in files if p.name in copied]
        for p in files:
            target = dest / "public" / p.relative_to(public)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
    for d, _dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return copied


# ----------------------------------------------------------------------------- the release gate
# On a blind phase nothing computed from the hidden inputs reaches the team before an organizer
# reviews the run: the team sees the run's stage and a fixed category, once scored its scores, and
# the count and kind of its output's problems. Reviewing releases the log as it is, releases it
# with lines removed or redacted, or withholds it with a note; only a release as it is gives the
# team the exact figures (sizes, exit status, times, memory) and its output's problems line by line.

DECISIONS = ("release", "redact", "withhold")

# the fixed words a team reads about its run while the gate holds
CATEGORIES = {
    "queued": "queued",
    "running": "running",
    "ran": "ran",
    "invalid": "invalid output",
    "timeout": "failed: time",
    "cpu": "failed: time",
    "memory": "failed: memory",
    "processes": "failed: processes",
    "output": "failed: output",
    "exit": "failed: exit",
    "signal": "failed: exit",
    "no_output": "failed: output",
    "infra": "server failure",
}


def disclosed(run: CodeRun, phase: Phase) -> bool:
    """Whether the run's team sees what it computed as it is: on an open phase at once, on a
    blind one once an organizer released it as it is."""
    return not phase.blind or run.release == "release"


def may_see_log(run: CodeRun, phase: Phase, *, organizer: bool) -> bool:
    """The organizers see a run's log at once; its team on an open phase at once, on a blind
    phase once an organizer released it (as it is, or redacted)."""
    return organizer or not phase.blind or run.release in ("release", "redact")


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


def team_log(run: CodeRun, phase: Phase) -> str | None:
    """The log its team reads: the whole log, the organizer's redacted one, or None."""
    if disclosed(run, phase):
        return run.log
    if run.release == "redact":
        return run.released_log or ""
    return None


def category(run: CodeRun, submission_status: str | None = None) -> str:
    """The run's fixed category (CATEGORIES): what its team reads while the gate holds."""
    if run.stage == "failed":
        if run.failure_kind == "infra":
            return CATEGORIES["infra"]
        status = (run.outcome or {}).get("status", "exit")
        if status == "ok":  # it ended well but wrote no usable /output file
            return CATEGORIES["no_output"]
        return CATEGORIES.get(status, "failed: exit")
    if run.stage == "ran" and submission_status == "failed":
        return CATEGORIES["invalid"]
    return CATEGORIES.get(run.stage, run.stage)


# the kinds of a validation problem, found from the server's own message templates; a team whose
# output came from a gated run reads how many of each, never a line, an id or a quoted value
PROBLEM_KINDS = (
    ("duplicate", "a duplicate id"),
    ("unknown", "an id not among the inputs"),
    ("missing", "missing ids or fields"),
    ("covers no", "missing ids or fields"),
    ("utf-8", "a line that cannot be read"),
    ("nul byte", "a line that cannot be read"),
    ("json", "a line that cannot be read"),
    ("parse", "a line that cannot be read"),
    ("columns", "a line that cannot be read"),
    ("header", "a line that cannot be read"),
)


def problem_kind(message: str) -> str:
    low = (message or "").lower()
    for needle, kind in PROBLEM_KINDS:
        if needle in low:
            return kind
    return "a value of a field"


def gated_problems(errors: list | None) -> list[dict]:
    """A gated submission's problems as its team reads them: a count per kind."""
    counts: dict[str, int] = {}
    for e in errors or []:
        msg = e.get("message", "") if isinstance(e, dict) else str(e)
        kind = problem_kind(msg)
        counts[kind] = counts.get(kind, 0) + 1
    out = [
        {"line": None, "id": None, "message": f"{n} problem{'s' if n != 1 else ''}: {kind}"}
        for kind, n in sorted(counts.items())
    ]
    if out:
        out.append(
            {
                "line": None,
                "id": None,
                "message": "the output of a blind run: its problems line by line go to the "
                "organizers until they release the run",
            }
        )
    return out


def gating_run(s: Session, submission_id: int) -> CodeRun | None:
    """The run of a blind phase, not released as it is, whose output is this submission (its
    team then reads the submission through the gate); None when there is none."""
    rows = s.exec(
        select(CodeRun, Phase)
        .join(Phase, Phase.id == CodeRun.phase_id)
        .where(CodeRun.submission_id == submission_id, Phase.blind.is_(True))
    ).all()
    for run, phase in rows:
        if not disclosed(run, phase):
            return run
    return None


def gated_for(s: Session, user, sub) -> bool:
    """Whether `user` reads submission `sub` through the release gate: anyone but its task's
    organizers, when it is the output of a blind run not released as it is."""
    if viewer_of(user, s, sub.task_id).is_organizer:
        return False
    return gating_run(s, sub.id) is not None
