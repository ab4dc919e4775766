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
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import case, update
from sqlmodel import Session, select

from server.db import session_scope
from server.domain import download_rule, exposure, people, run_queue
from server.domain.download_rule import area_files
from server.domain.shown import unshown_outputs  # noqa: F401 - the boards' side of the gate
from server.domain.submissions import check_compute, lock_team, visible_scores
from server.domain.visibility import viewer_of
from server.models import CodeRun, Phase, Submission, utcnow
from tasks import get_task
from tasks.bundle_models import REQUIRED_INPUTS
from tasks.store import TaskStore

# a run the server failed (a dead worker) is tried once more, never a third time
MAX_ATTEMPTS = run_queue.MAX_ATTEMPTS
STAGES = ("queued", "running", "ran", "failed")


def postpone_shown(engine, run_id: int, shown_no_sooner: datetime) -> None:
    """A run starting now (held until its inputs' date, or long in the queue) is shown no sooner
    than its wall limit and the delay after it starts (`release_moment`), so that when it ends
    still says nothing."""
    later = CodeRun.shown_at.is_(None) | (CodeRun.shown_at < shown_no_sooner)
    with session_scope(engine) as s:  # the worker's own step
        s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id)
            .values(shown_at=case((later, shown_no_sooner), else_=CodeRun.shown_at))
        )


def finish(engine, run_id: int, *, stage: str, **values) -> bool:
    """Record a running run's end (ran or failed) once; False when another run of the job did."""
    with session_scope(engine) as s:  # the worker's own step
        n = s.execute(
            update(CodeRun)
            .where(CodeRun.id == run_id, CodeRun.stage == "running")
            .values(stage=stage, finished_at=utcnow(), reserved_cpu=0.0, lease_until=None, **values)
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
                lease_until=None,
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
            .values(stage="queued", attempts=CodeRun.attempts - 1, held_by="", lease_until=None)
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


def input_files(home: Path, task_id: str, split: str, areas: set[str]) -> list[tuple[str, Path]]:
    """What a system reads, as (its path under `/input`, the server's file): the split's input
    files at the top (`inputs.jsonl`), and under `public/<area>/` the files of each of `areas`
    (`released_areas`: what a participant may download now, and the run's own split's inputs);
    never another file, never a gold file of the server."""
    store = TaskStore(task_id, home)
    out: list[tuple[str, Path]] = []
    names = set()
    for name in input_names(task_id):
        src = store.public(split, name)
        if src.is_file() and not src.is_symlink():
            out.append((name, src))
            names.add(name)
    public = store.root / "public"
    for area in sorted(set(areas) | {split}):
        files = area_files(store, area)
        if area not in areas:  # its own split unreleased: the inputs, nothing beside them
            files = [p for p in files if p.name in names]
        out += [(f"public/{p.relative_to(public).as_posix()}", p) for p in files]
    return out


def stage_inputs(home: Path, task_id: str, split: str, dest: Path, areas: set[str]) -> list[str]:
    """Lay out `input_files` in `dest`, readable by the sandbox's user; the names of the split's
    input files copied. A code worker needs nothing else."""
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for rel, src in input_files(home, task_id, split, areas):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        if "/" not in rel:
            copied.append(rel)
    for d, _dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return copied


# ----------------------------------------------------------------------------- the release gate
# On a blind phase nothing computed from the hidden inputs reaches the team before an organizer
# reviews the run but what `team_view` builds: one state of a fixed set and, once scored, its
# scores on the part the phase shows; never a count, a kind of problem, a size, a time. Its
# result is shown no sooner than the run's wall limit and a fixed delay after it was submitted
# (`shown_from`), so the moment it appears says nothing of how long it ran. Reviewing releases
# what the organizer saw as it is, releases an edited copy of it, or withholds it with a note.

DECISIONS = ("release", "redact", "withhold")

SUBMITTED = "submitted"  # the result is not known, or not shown yet
# the states a team reads of a gated run: about log2(6) bits, the first of them carrying none
STATES = (
    SUBMITTED,
    "valid and scored",
    "invalid output",
    "failed: a limit",
    "failed: the system",
    "server failure",
)
LIMIT_STATUSES = ("timeout", "cpu", "memory", "processes", "output")


def held_until(s: Session, phase: Phase, now: datetime | None = None) -> datetime | None:
    """The date a system for `phase` waits for: its split's inputs' release (the downloads' rule,
    `download_rule.inputs_release`), None once they are released. A run is accepted before it and
    held, queued, until it: it never reads inputs before their date."""
    return download_rule.inputs_release(s, phase.task_id, phase.split, now)


def held_run(s: Session, run: CodeRun, phase: Phase) -> datetime | None:
    """The date a queued run is held until (`held_until`); None for any other."""
    return held_until(s, phase) if run.stage == "queued" else None


def wall_limit(manifest: dict, settings) -> float:
    """The wall-clock seconds a run may take: what its manifest asks, capped by the site."""
    res = (manifest or {}).get("resources") or {}
    return min(float(res.get("wall_seconds", 600)), settings.run_wall_seconds)


def release_moment(manifest: dict, settings, submitted: datetime) -> datetime:
    """When a blind run submitted at `submitted` is shown: its wall limit and the site's fixed
    delay after it."""
    wait = wall_limit(manifest, settings) + settings.run_release_seconds
    return submitted + timedelta(seconds=wait)


def shown_from(run: CodeRun, settings) -> datetime:
    """When a gated run's result becomes visible to its team and its output's row on the boards:
    its wall limit and the site's fixed delay after it was submitted (or when it is known, if
    later), fixed when the run is submitted (`shown_at`), so the moment says nothing of what the
    run did."""
    if run.shown_at is not None:
        return run.shown_at
    return release_moment(run.manifest, settings, run.created_at)


def outcome_state(run: CodeRun, sub: Submission | None) -> str | None:
    """The run's result as one of STATES (None while it is not known)."""
    if run.stage == "failed":
        if run.failure_kind == "infra":
            return "server failure"
        status = (run.outcome or {}).get("status", "exit")
        return "failed: a limit" if status in LIMIT_STATUSES else "failed: the system"
    if run.stage == "ran" and sub is not None:
        if sub.status == "scored":
            return "valid and scored"
        if sub.status == "failed":
            return "server failure" if sub.failure_kind == "infra" else "invalid output"
    return None


def _number(v):
    return round(v, 4) if isinstance(v, float) else v


def _metrics(s: Session, sub: Submission, phase: Phase) -> dict | None:
    """A scored output's primary score and metrics on the parts its team may see, each value as
    the boards show it (4 decimals); none of the result's other fields (its files' checksums,
    counts, provenance)."""
    declared = set(get_task(sub.task_id).metrics)  # never a count beside them (`n`)
    out = {}
    for sc in visible_scores(s, sub, phase, organizer=False):
        result = sc.result or {}
        primary = result.get("primary") or {}
        out[sc.part] = {
            "primary": {"name": primary.get("name"), "value": _number(primary.get("value"))},
            "metrics": {
                subset: {
                    name: _number(v)
                    for name, v in sorted((ms or {}).items())
                    if name in declared and (v is None or isinstance(v, (int, float)))
                }
                for subset, ms in sorted((result.get("metrics") or {}).items())
            },
        }
    return out or None


def team_view(
    s: Session, run: CodeRun, phase: Phase, settings, now: datetime | None = None
) -> dict:
    """THE team's view of a blind run not released as it is: every surface (the API, the web
    pages, both CLIs, mail notices) shows this and nothing else of the run. `state`: one of
    STATES (`submitted` until the result is known and `shown_from` has passed); `scores`: once
    valid and scored, its metrics on the part the phase shows; `review`: the organizer's decision,
    its note and the text it released (an edited copy), once the result is shown."""
    sub = s.get(Submission, run.submission_id) if run.submission_id is not None else None
    state = outcome_state(run, sub)
    if state is None or (now or utcnow()) < shown_from(run, settings):
        state = SUBMITTED
    view = {
        "run": run.id,
        "task": run.task_id,
        "phase": phase.name,
        "submitted": run.created_at,
        "state": state,
        "scores": _metrics(s, sub, phase) if state == "valid and scored" else None,
        "review": None,
    }
    if state != SUBMITTED and run.release in ("redact", "withhold"):
        view["review"] = {
            "decision": run.release,
            "note": run.review_note or "",
            "released": run.released_log if run.release == "redact" else None,
        }
    return view


FIGURES = ("status", "exit_code", "wall_seconds", "cpu_seconds", "peak_rss_mb", "output_bytes")


def review_text(s: Session, run: CodeRun) -> str:
    """Everything a release as it is gives the run's team, as one text the reviewer reads (and
    edits for a redacted release): the run's result and reason, its figures, its output's
    problems line by line, the scorer's notes on its scores (its board row shows them once
    released), its log. Nothing else of the run reaches the team."""
    sub = s.get(Submission, run.submission_id) if run.submission_id is not None else None
    used = run.outcome or {}
    lines = [f"result: {outcome_state(run, sub) or run.stage}"]
    if run.reason:
        lines.append(f"reason: {run.reason}")
    figures = [f"{k} {used[k]}" for k in FIGURES if used.get(k) is not None]
    if figures:
        lines.append("figures: " + ", ".join(figures))
    if run.started_at and run.finished_at:
        lines.append(f"ran: {run.started_at:%Y-%m-%d %H:%M:%S} to {run.finished_at:%H:%M:%S} UTC")
    if sub is not None:
        lines.append(f"output: {sub.size} bytes, sha256 {sub.file_sha256}")
        problems = sub.errors or []
        if problems:
            lines.append(f"problems of the output ({len(problems)}):")
        for e in problems:
            if isinstance(e, dict):
                where = f"line {e['line']}: " if e.get("line") not in (None, "") else ""
                what = f"{e['id']}: " if e.get("id") else ""
                lines.append(f"  {where}{what}{e.get('message', '')}")
            else:
                lines.append(f"  {e}")
        # the scorer's notes, which the output's board row carries once released
        phase = s.get(Phase, run.phase_id)
        notes = [
            f"  {sc.part}: {n}"
            for sc in (visible_scores(s, sub, phase, organizer=False) if phase else ())
            for n in (sc.result or {}).get("notes") or ()
        ]
        if notes:
            lines += ["the scorer's notes (on its board row):", *notes]
    lines += ["log:", run.log or ""]
    return "\n".join(lines)


def disclosed(run: CodeRun, phase: Phase) -> bool:
    """Whether the run's team sees what it computed as it is: on an open phase at once, on a
    blind one once an organizer released it as it is."""
    return not phase.blind or run.release == "release"


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
    settings,
    held: datetime | None = None,
) -> CodeRun:
    """The row of an admitted system (`stored`: what `submissions.store` returned), queued,
    flushed, with the moment its result is shown (`shown_from`: counted from `held`, the date
    its inputs are released, when it is held until then); `fields` are the upload's, given to
    the submission its output becomes."""
    key, sha, size = stored
    now = utcnow()
    competition = people.competition_of_task(s, phase.task_id)
    run = CodeRun(
        created_at=now,
        shown_at=release_moment(manifest, settings, max(now, held or now)),
        competition_id=competition.id if competition is not None else 0,
        pool=run_queue.pool_for(manifest),
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
    run_queue.join_queue(s, run)
    return run


def team_log(run: CodeRun, phase: Phase) -> str | None:
    """The log its team reads as it is: on an open phase, or once released as it is."""
    return run.log if disclosed(run, phase) else None


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


# ---------------------------------------------------------------------------- archived systems
# An organizer re-runs archived systems (code runs of this or an earlier phase, another version
# of the task, another task of the same family) on a phase's inputs: each re-run is a code run of
# its own, through the same sandbox, review and compute budget as any, its output a submission of
# its own marked `rerun_of` (its board row stands beside the team's own run). Only with the team's
# consent: the original run's fact sheet answered the competition's yes/no field `rerun_consent`
# with yes (declared required, it is a rule of the phase every team accepts with each upload).

RERUN_CONSENT = "rerun_consent"  # the fact sheet's field a team consents by


def rerun_root(s: Session, run: CodeRun) -> CodeRun:
    """The code run first uploaded whose archive `run` runs (itself when it is not a re-run)."""
    return s.get(CodeRun, run.rerun_of) if run.rerun_of is not None else run


def consented(run: CodeRun) -> bool:
    """Whether the team of an uploaded run consented to its system being re-run on new data (a
    baseline, the organizers' own system, always has)."""
    return (
        bool(run.is_baseline) or ((run.fields or {}).get("facts") or {}).get(RERUN_CONSENT) is True
    )


def add_rerun(s: Session, *, root: CodeRun, phase: Phase, settings) -> tuple[CodeRun, bool]:
    """The re-run of `root`'s archive on `phase`, queued and flushed, its CPU limit reserved
    against its team's budget in `phase` (checked under the team's lock); an earlier re-run of the
    same system on the phase answers instead (counted once). Returns (run, whether it was that
    earlier one)."""
    lock_team(s, root.team_id)
    same = s.exec(
        select(CodeRun).where(CodeRun.rerun_of == root.id, CodeRun.phase_id == phase.id)
    ).first()
    if same is not None:
        return same, True
    check_compute(s, root.team_id, phase)
    fields = dict(root.fields or {}) | {"primary": False, "rerun_of": root.id}
    run = add_run(
        s,
        team_id=root.team_id,
        user_id=root.user_id,
        phase=phase,
        stored=(root.storage_key, root.archive_sha256, root.size),
        filename=root.file_name,
        manifest=dict(root.manifest or {}),
        fields=fields,
        is_baseline=root.is_baseline,
        settings=settings,
        held=held_until(s, phase),  # never before the phase's inputs' date, as any run
    )
    run.rerun_of = root.id
    reserve_budget(run, settings)
    s.add(run)
    s.flush()
    return run, False


def reruns_of(s: Session, submission_ids) -> dict[int, dict]:
    """Of the given submissions, each re-run's original: submission id -> {run, task, phase}."""
    ids = sorted({i for i in submission_ids if i is not None})
    if not ids:
        return {}
    rows = s.exec(
        select(Submission.id, CodeRun.id, CodeRun.task_id, Phase.name)
        .join(CodeRun, CodeRun.id == Submission.rerun_of)
        .join(Phase, Phase.id == CodeRun.phase_id)
        .where(Submission.id.in_(ids))
    ).all()
    return {sid: {"run": rid, "task": task, "phase": name} for sid, rid, task, name in rows}
