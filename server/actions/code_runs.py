"""Actions on code runs: a team submits its system to run blind, anyone allowed reads a run, an
organizer reviews one (unblinding its log on a blind phase) and lists those waiting."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from sqlmodel import Session, select

from baselines.run import method_label, plan
from baselines.systems import Models, Options
from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.actions.submissions import submit
from server.domain import code_runs, lifecycle, people
from server.domain.accounts import audit
from server.domain.baselines import (
    baseline_archive,
    baseline_phases,
    server_database,
    server_settings,
)
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs.dispatch import KEY, Jobs
from server.jobs.queue import connect, run_job_id
from server.models import CodeRun, Phase, Submission, User, utcnow
from server.settings import Settings, get_settings

MAX_RELEASED_LOG = 256 * 1024  # the redacted log an organizer releases


def _run(s: Session, run_id: int) -> CodeRun:
    r = s.get(CodeRun, run_id)
    if r is None:
        raise NotFound(f"no code run {run_id}")
    return r


def run_out(s: Session, r: CodeRun, *, organizer: bool) -> m.CodeRunOut:
    """What a viewer of the run is shown: to the organizers everything; to its team on an open
    phase, or once released as it is, everything but the worker's details; to its team on a
    blind phase otherwise `code_runs.team_view` and nothing else."""
    phase = s.get(Phase, r.phase_id)
    if not organizer and not code_runs.disclosed(r, phase):
        out = _gated_out(code_runs.team_view(s, r, phase, get_settings()), r, phase)
        out.held_until = code_runs.held_run(s, r, phase)
        return out
    sub = s.get(Submission, r.submission_id) if r.submission_id is not None else None
    sub_status = sub.status if sub is not None else None
    return m.CodeRunOut(
        id=r.id,
        task=r.task_id,
        phase=phase.name,
        team=r.team_id,
        stage=r.stage,
        category=code_runs.outcome_state(r, sub) or r.stage,
        failure_kind=r.failure_kind,
        reason=r.reason,
        attempts=r.attempts,
        created=r.created_at,
        held_until=code_runs.held_run(s, r, phase),
        started=r.started_at,
        finished=r.finished_at,
        command=list((r.manifest or {}).get("command", [])),
        resources=dict(r.outcome or {}),
        cpu_seconds=r.cpu_seconds,
        kernel_limits=(r.outcome or {}).get("cgroup"),
        submission=r.submission_id,
        submission_status=sub_status,
        blind=phase.blind,
        reviewed=r.reviewed_at is not None,
        release=r.release,
        review_note=r.review_note or "",
        log=r.log,
        log_hidden=False,
        redacted=False,
        review_text=code_runs.review_text(s, r) if organizer and phase.blind else None,
    )


def _gated_out(view: dict, r: CodeRun, phase: Phase) -> m.CodeRunOut:
    # the team's view of a gated run, field by field from `team_view`; every other field fixed
    state, review = view["state"], view["review"] or {}
    ran = state in ("valid and scored", "invalid output")
    return m.CodeRunOut(
        id=view["run"],
        task=view["task"],
        phase=view["phase"],
        team=r.team_id,
        stage="submitted" if state == code_runs.SUBMITTED else "ran" if ran else "failed",
        category=state,
        attempts=0,
        created=view["submitted"],
        command=list((r.manifest or {}).get("command", [])),
        blind=True,
        reviewed=bool(review),
        release=review.get("decision"),
        review_note=review.get("note", ""),
        log=review.get("released"),
        log_hidden=review.get("released") is None,
        redacted=review.get("released") is not None,
        scores=view["scores"],
    )


@action
def get_run(*, s: Session, run_id: int, viewer: User | None) -> m.CodeRunOut:
    """A run, to its team and the organizers (NotFound to anyone else)."""
    r = _run(s, run_id)
    organizer = viewer is None or people.organizes_task(s, viewer, r.task_id)
    if viewer is not None and people.is_admin(viewer):
        organizer = True
    if not organizer and (
        viewer is None or people.team_id_for_task(s, viewer, r.task_id) != r.team_id
    ):
        raise NotFound(f"no code run {run_id}")
    return run_out(s, r, organizer=organizer)


@action
def review_run(
    *,
    s: Session,
    run_id: int,
    actor: User | None,
    decision: str | None,
    log: str | None = None,
    note: str = "",
) -> m.CodeRunOut:
    """An organizer's review of an ended run, the decision always named (nothing is released by
    default): on a blind phase `release` gives its team what the review shows as it is
    (`code_runs.review_text`: the log, the output's problems line by line, the figures),
    `redact` the organizer's edited copy of that text alone (`log`), `withhold` a `note` alone.
    The audit entry records what was released. A later review replaces the decision."""
    r = _run(s, run_id)
    common.require_organizer(actor, s, task_id=r.task_id)
    if r.stage not in ("ran", "failed"):
        raise LifecycleRefused(
            f"code run {run_id} is {r.stage}: review it when it ended", "running"
        )
    note = (note or "").strip()
    if decision not in code_runs.DECISIONS:
        raise UploadFieldsInvalid({"decision": f"one of {', '.join(code_runs.DECISIONS)}"})
    if decision == "redact" and log is None:
        raise UploadFieldsInvalid({"log": "the redacted text the team may read"})
    if log is not None and len(log) > MAX_RELEASED_LOG:
        raise UploadFieldsInvalid({"log": f"at most {MAX_RELEASED_LOG:,} characters"})
    if len(note) > 2000:
        raise UploadFieldsInvalid({"note": "at most 2,000 characters"})
    released = {
        "release": code_runs.review_text(s, r),
        "redact": log or "",
        "withhold": "",
    }[decision]
    was_released = r.release == "release"
    r.reviewed_at = utcnow()
    r.reviewed_by = actor.id if actor is not None else None
    r.release = decision
    r.released_log = released if decision == "redact" else ""
    r.review_note = note
    s.add(r)
    phase = s.get(Phase, r.phase_id)
    if r.submission_id is not None and phase is not None and phase.blind:
        if was_released != (decision == "release"):
            # its output's row appears (or goes) before its shown moment, its scorer's notes
            # with it (server.boards.blind): the boards render again, and only then
            lifecycle.bump_phase(s, phase.id)
    audit(
        s,
        actor,
        "run.review",
        f"run:{r.id}",
        decision=decision,
        released=["log", "problems", "figures", "notes"] if decision == "release" else
        ["text"] if decision == "redact" else [],
        released_sha256=hashlib.sha256(released.encode()).hexdigest() if released else None,
        released_chars=len(released),
        note=note,
    )  # fmt: skip
    return run_out(s, r, organizer=True)


@action
def list_runs(
    *, s: Session, task_id: str, actor: User | None, awaiting_review: bool = False
) -> m.CodeRunsOut:
    """A task's code runs for its organizers, newest first (only the ended, unreviewed ones of
    blind phases with `awaiting_review`)."""
    common.task(task_id)
    common.require_organizer(actor, s, task_id=task_id)
    q = select(CodeRun).where(CodeRun.task_id == task_id).order_by(CodeRun.id.desc())
    if awaiting_review:
        blind = select(Phase.id).where(Phase.task_id == task_id, Phase.blind.is_(True))
        q = q.where(
            CodeRun.reviewed_at.is_(None),
            CodeRun.stage.in_(("ran", "failed")),
            CodeRun.phase_id.in_(blind),
        )
    return m.CodeRunsOut(runs=[run_out(s, r, organizer=True) for r in s.exec(q).all()])


def record_baseline_runs(
    session: Session,
    *,
    task_id: str,
    system: str,
    options: Options,
    phases: list[str] | None = None,
    settings: Settings,
    user: User | None = None,
) -> list[dict]:
    """Queue (task, system) as a code run of the baselines team in each of the task's phases on
    its test split (or `phases`): the same path, sandbox and accounting as a team's system. One
    {phase, run, duplicate} per phase."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        archive = baseline_archive(task_id, system, options, Path(tmp) / f"{system}.zip")
        for ph in baseline_phases(session, task_id, phases, options.split):
            fields = m.UploadFields(
                phase=ph.name,
                method_name=method_label(system, Models(options).model_name(system)),
                description=f"reference system {system}, run in the sandbox",
                baseline=True,
            )
            with archive.open("rb") as f:
                run, duplicate = submit(
                    s=session,
                    user=user,
                    task_id=task_id,
                    fields=fields,
                    stream=f,
                    filename=archive.name,
                    settings=settings,
                    system=True,
                )
            out.append({"phase": ph.name, "run": run.id, "duplicate": duplicate})
    return out


def enqueue_baseline_systems(
    task_ids: list[str] | None,
    systems: list[str] | None,
    options: Options,
    home=None,
    phases: list[str] | None = None,
) -> list[dict]:
    """`baselines run --enqueue --sandbox`: each asked-for (task, system) as code runs of the
    baselines team in the local server's database and queue (one {task, system, job, status,
    phase, run, duplicate} per phase)."""
    settings = server_settings(home)
    runs, _notes = plan(task_ids, systems, options, settings.home, here=False)
    conn = connect(settings)
    out = []
    with Session(server_database(settings), info={KEY: Jobs(settings, redis=conn)}) as s:
        for task_id, system in runs:
            for rec in record_baseline_runs(
                s,
                task_id=task_id,
                system=system,
                options=options,
                phases=phases,
                settings=settings,
            ):
                status = "duplicate" if rec["duplicate"] else "queued"
                out.append(
                    {"task": task_id, "system": system, "job": run_job_id(rec["run"])}
                    | {"status": status, **rec}
                )
    return out
