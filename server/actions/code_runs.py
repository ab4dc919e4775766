"""Actions on code runs: a team submits its system to run blind, anyone allowed reads a run, an
organizer reviews one (unblinding its log on a blind phase) and lists those waiting."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import BinaryIO

from sqlmodel import Session, select

from baselines.run import method_label, plan
from baselines.systems import Models, Options
from server import api_models as m
from server import objectstore
from server.actions import common
from server.actions.common import action
from server.actions.submissions import fact_sheet, uploader_team
from server.domain import code_runs, people
from server.domain.accounts import audit
from server.domain.baselines import (
    baseline_archive,
    baseline_phases,
    server_database,
    server_settings,
)
from server.domain.submissions import check_limits, compute_used, lock_team
from server.domain.system_archive import LIMITS, SystemInvalid, unpack
from server.exceptions import (
    EmptyUpload,
    LifecycleRefused,
    LimitReached,
    NotFound,
    StoreUnreachable,
    SystemRefused,
)
from server.jobs.dispatch import KEY, Jobs, jobs
from server.jobs.queue import connect, run_job_id
from server.models import CodeRun, Phase, Submission, User, utcnow
from server.settings import Settings
from server.storage import path_for, store_upload
from tasks.store import TaskStore


@action
def submit_code(
    *,
    s: Session,
    user: User,
    task_id: str,
    fields: m.UploadFields,
    stream: BinaryIO,
    filename: str,
    settings,
) -> tuple[CodeRun, bool]:
    """Take a team's system (a zip with system.yaml, streamed to the store), check it can be run,
    count it against the phase's limits and compute budget, and queue it on the runs queue. The
    same archive already submitted by the team in the phase answers with that run (counted once).
    Returns the run and whether it was that earlier one."""
    task = common.task(task_id)
    team = uploader_team(s, user, task.id, baseline=fields.baseline)
    if not TaskStore(task.id, settings.home).exists():
        raise LifecycleRefused(f"task {task.id!r} has no data yet", "not_imported")
    phase = common.phase_or_default(s, task.id, fields.phase, accepts="code")
    if phase.accepts == "predictions" and not fields.baseline:  # baselines run anywhere
        raise LifecycleRefused(
            f"the {phase.name} phase of {task.id} takes prediction files, not systems",
            "no_code",
        )
    sheet = fact_sheet(s, task.id, phase, fields)
    exempt = fields.baseline or people.organizes_task(s, user, task.id)
    if not exempt:
        budget = phase.compute_budget_seconds
        if budget is not None and compute_used(s, team.id, phase.id) >= budget:
            raise LimitReached(
                f"your team has used its compute budget of {phase.compute_budget_seconds} CPU "
                f"seconds in the {phase.name} phase",
                None,
                "compute",
            )
    key, sha, size = store_upload(settings.home, stream, filename, LIMITS.max_zip_bytes)
    if size == 0:
        raise EmptyUpload()
    # into the object store, when the site has one, before any row names it (a code worker on
    # another machine fetches it from there); unreachable: 503 with nothing left behind
    try:
        objectstore.push_upload(settings, key)
    except StoreUnreachable:
        if s.exec(select(CodeRun.id).where(CodeRun.storage_key == key).limit(1)).first() is None:
            path_for(settings.home, key).unlink(missing_ok=True)
        raise
    with tempfile.TemporaryDirectory() as tmp:
        try:
            manifest = unpack(path_for(settings.home, key), Path(tmp) / "code")
        except SystemInvalid as e:
            raise SystemRefused(
                [{"line": None, "id": w, "message": msg} for w, msg in e.problems]
            ) from None
    if manifest.runtime == "image" and not settings.run_images:
        raise SystemRefused(
            [
                {
                    "line": None,
                    "id": "system.yaml: runtime",
                    "message": "this site runs systems in its Python runtime only "
                    "(`runtime: python`); container images are not accepted",
                }
            ]
        )
    phase_id, team_id = phase.id, team.id
    try:
        lock_team(s, team_id)
        phase = s.get(Phase, phase_id, populate_existing=True)
        same = s.exec(
            select(CodeRun)
            .where(
                CodeRun.team_id == team_id,
                CodeRun.phase_id == phase_id,
                CodeRun.archive_sha256 == sha,
                (CodeRun.failure_kind.is_(None)) | (CodeRun.failure_kind != "infra"),
            )
            .order_by(CodeRun.id)
        ).first()
        if same is not None:  # a retried upload: the same run, counted once
            s.rollback()
            return same, True
        if not exempt:
            check_limits(s, team_id, phase, utcnow())
        run = CodeRun(
            team_id=team_id,
            user_id=user.id if user is not None else None,
            task_id=task.id,
            phase_id=phase_id,
            archive_sha256=sha,
            storage_key=key,
            file_name=(filename or "")[:255],
            size=size,
            manifest=manifest.model_dump(),
            fields={
                "method_name": fields.method_name,
                "description": fields.description,
                "url": fields.url,
                "show_publicly": fields.show_publicly,
                "primary": fields.primary,
                "facts": sheet or None,
            },
            is_baseline=bool(fields.baseline),
        )
        s.add(run)
        audit(s, user, "run.submit", f"run:{task.id}/{phase.name}", sha256=sha, size=size)
        s.flush()
        jobs(s, settings).run_code(s, run.id)  # once committed; the reconciler if Redis is away
        s.commit()
    except BaseException:
        s.rollback()
        raise
    return run, False


def _run(s: Session, run_id: int) -> CodeRun:
    r = s.get(CodeRun, run_id)
    if r is None:
        raise NotFound(f"no code run {run_id}")
    return r


def run_out(s: Session, r: CodeRun, *, organizer: bool) -> m.CodeRunOut:
    """What a viewer of the run is shown (the log only when `code_runs.may_see_log`)."""
    phase = s.get(Phase, r.phase_id)
    see = code_runs.may_see_log(r, phase, organizer=organizer)
    return m.CodeRunOut(
        id=r.id,
        task=r.task_id,
        phase=phase.name,
        team=r.team_id,
        stage=r.stage,
        failure_kind=r.failure_kind,
        reason=r.reason if see or r.failure_kind != "code" else _outline(r.reason),
        attempts=r.attempts,
        created=r.created_at,
        started=r.started_at,
        finished=r.finished_at,
        command=list((r.manifest or {}).get("command", [])),
        resources=dict(r.outcome or {}),
        cpu_seconds=r.cpu_seconds,
        submission=r.submission_id,
        submission_status=(
            s.get(Submission, r.submission_id).status if r.submission_id is not None else None
        ),
        blind=phase.blind,
        reviewed=r.reviewed_at is not None,
        log=r.log if see else None,
        log_hidden=not see and bool(r.log),
    )


def _outline(reason: str) -> str:
    # a blind run's failure names the limit it broke, never what it printed
    return reason.split(":", 1)[0]


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
def review_run(*, s: Session, run_id: int, actor: User | None) -> m.CodeRunOut:
    """An organizer has read the run's log (on a blind phase its team may then read it)."""
    r = _run(s, run_id)
    common.require_organizer(actor, s, task_id=r.task_id)
    if r.stage not in ("ran", "failed"):
        raise LifecycleRefused(
            f"code run {run_id} is {r.stage}: review it when it ended", "running"
        )
    if r.reviewed_at is None:
        r.reviewed_at = utcnow()
        r.reviewed_by = actor.id if actor is not None else None
        s.add(r)
        audit(s, actor, "run.review", f"run:{r.id}")
        s.commit()
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
                run, duplicate = submit_code(
                    s=session,
                    user=user,
                    task_id=task_id,
                    fields=fields,
                    stream=f,
                    filename=archive.name,
                    settings=settings,
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
