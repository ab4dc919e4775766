"""Organizer actions on submissions: rescore one run or a selection, hide, unhide, remove or
restore a run. Each is written here once."""

from __future__ import annotations

from sqlmodel import Session, select

from server import api_models as m
from server import lifecycle
from server.actions import common
from server.auth import audit
from server.exceptions import LifecycleRefused
from server.models import Submission, User


def rescore_submission(
    *,
    s: Session,
    submission_id: int,
    actor: User | None,
    settings,
    enqueue,
    reason: str = "",
) -> m.Rescored:
    """Queue one scored or failed run for scoring again; `enqueue(ids)` hands it to the queue."""
    common.require_organizer(actor)
    sub = common.submission(s, submission_id)
    if sub.removed_at is not None:
        raise LifecycleRefused(f"submission {sub.id} is removed; restore it first", "removed")
    ids = lifecycle.rescore(
        s, [sub], actor=actor, max_attempts=settings.max_attempts, reason=reason
    )
    if not ids:
        raise LifecycleRefused(
            f"submission {sub.id} is {sub.status}: only a scored or failed submission is rescored",
            "not_final",
        )
    enqueue(ids)
    return m.Rescored(queued=ids, skipped=0)


def rescore_selection(
    *,
    s: Session,
    task_id: str,
    actor: User | None,
    settings,
    enqueue,
    phase: str | None = None,
    include_invalid: bool = False,
    reason: str = "",
    via: str,
) -> m.Rescored:
    """Queue every final run of a task (or of one phase) for scoring again; a file that failed
    validation only when asked (it would fail again)."""
    common.require_organizer(actor)
    task = common.task(task_id)
    p = common.phase(s, task.id, phase) if phase else None
    q = select(Submission).where(
        Submission.task_id == task.id,
        Submission.status.in_(lifecycle.FINAL),
        Submission.removed_at.is_(None),
    )
    if p is not None:
        q = q.where(Submission.phase_id == p.id)
    subs = [
        x
        for x in s.exec(q).all()
        if x.status == "scored" or x.failure_kind != "invalid" or include_invalid
    ]
    audit(
        s,
        actor,
        "task.rescore",
        f"task:{task.id}",
        phase=p.name if p else None,
        count=len(subs),
        via=via,
    )
    ids = lifecycle.rescore(s, subs, actor=actor, max_attempts=settings.max_attempts, reason=reason)
    enqueue(ids)
    return m.Rescored(queued=ids, skipped=0)


def set_visibility(
    *, s: Session, submission_id: int, action: str, actor: User | None, reason: str = ""
) -> Submission:
    """Hide, unhide, remove or restore a run (nothing is deleted for real); hide and remove need
    a reason, which the team is shown. Returns the run, for the surface to show as it shows
    runs."""
    common.require_organizer(actor)
    sub = common.submission(s, submission_id)
    return lifecycle.set_visibility(s, sub, action, actor=actor, reason=reason)
