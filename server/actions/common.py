"""What every action needs: finding what it acts on and checking who may act."""

from __future__ import annotations

import functools

from sqlalchemy import bindparam, text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select

from scorer.errors import TaskNotFound
from server import models  # other subjects' tables: models.X, loaded when first used
from server.db import lock_row, savepoint, transaction
from server.domain import people, phase_choice
from server.domain.accounts import can_see_submission
from server.exceptions import Forbidden, LifecycleRefused, NotFound
from server.models import User
from tasks import get_task


def require_organizer(
    actor: User | None,
    s: Session | None = None,
    *,
    task_id: str | None = None,
    competition_id: int | None = None,
    slug: str | None = None,
    phase_id: int | None = None,
    submission_id: int | None = None,
    campaign_id: int | None = None,
) -> None:
    """The one organizer check: refuse an actor who does not organize the competition that what
    is named belongs to (a task, a competition by id or short id, a phase, a submission, a
    campaign); naming none, one who organizes nothing. None, the server's own shell, always may;
    a site administrator organizes every competition. One query for the actor's role decides:
    someone with no role in it is told a campaign or a draft competition does not exist
    (NotFound, as for one that does not), anyone else that they may not (Forbidden). Surfaces
    translate the two (404, 403) and check nothing of their own."""
    if actor is None or people.is_admin(actor):
        return
    if s is None:
        raise Forbidden("this needs a site administrator", "not_organizer")
    hidden: NotFound | None = None
    if campaign_id is not None:
        camp = s.get(models.AssessmentCampaign, campaign_id)
        if camp is None:
            raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
        competition_id = camp.competition_id
        hidden = NotFound(f"no campaign {campaign_id}", "unknown_campaign")
    if phase_id is not None:
        task_id = phase_by_id(s, phase_id).task_id
    if submission_id is not None:
        task_id = submission(s, submission_id).task_id
    comp = None
    if slug is not None:
        comp = s.exec(select(models.Competition).where(models.Competition.slug == slug)).first()
        if comp is None:
            raise NotFound(f"no competition {slug!r}", "unknown_competition")
    elif competition_id is not None:
        comp = s.get(models.Competition, competition_id)
    elif task_id is not None:
        comp = people.competition_of_task(s, task_id)
        if comp is None:  # a task in no competition: administrators only
            raise Forbidden("this needs an organizer of this task's competition", "not_organizer")
    else:
        if not people.organizes_anything(s, actor):
            raise Forbidden("this needs an organizer of a competition", "not_organizer")
        return
    if comp is None:
        raise NotFound(f"no competition {competition_id}", "unknown_competition")
    role = people.role_of(s, actor, comp.id)
    if role in people.ORGANIZING:
        return
    if role is None and hidden is None and comp.state == "draft":
        hidden = NotFound(f"no competition {comp.slug!r}", "unknown_competition")
    if role is None and hidden is not None:
        raise hidden
    raise Forbidden(f"this needs an organizer of {comp.slug!r}", "not_organizer")


def require_participant(s: Session, user: User, task_id: str) -> None:
    """Refuse a person who does not take part in the task's competition (not registered, not
    approved, banned, terms not accepted), naming why and what to do."""
    c = people.competition_of_task(s, task_id)
    if c is None:
        return
    p = people.participation(s, user, c)
    if not p.ok:
        raise Forbidden(p.message, p.code)


def task(task_id: str):
    """The declared task `task_id`, or NotFound naming it and the closest id."""
    try:
        return get_task(task_id)
    except TaskNotFound as e:
        raise NotFound(str(e)) from None


def visible_task(s: Session, viewer: User | None, task_id: str):
    """The declared task `task_id` if `viewer` may see it (a draft competition's task is its
    people's only: anyone else is told what they would be told of a task that does not exist)."""
    t = task(task_id)
    if not people.task_visible(s, viewer, t.id):
        raise NotFound(f"no task {task_id!r}")
    return t


def phase_by_id(s: Session, phase_id: int) -> models.Phase:
    """The phase with this id, or NotFound."""
    p = s.get(models.Phase, phase_id)
    if p is None:
        raise NotFound(f"no phase {phase_id}")
    return p


def phase(s: Session, task_id: str, name: str) -> models.Phase:
    """The phase `name` of a task, or NotFound listing the phases it has."""
    p = s.exec(
        select(models.Phase).where(models.Phase.task_id == task_id, models.Phase.name == name)
    ).first()
    if p is None:
        names = s.exec(select(models.Phase.name).where(models.Phase.task_id == task_id)).all()
        raise NotFound(
            f"{task_id} has no phase {name!r}"
            + (f" (it has: {', '.join(sorted(names))})" if names else " (it has none yet)")
        )
    return p


def submission(s: Session, submission_id: int) -> models.Submission:
    """The submission with this id, or NotFound."""
    sub = s.get(models.Submission, submission_id)
    if sub is None:
        raise NotFound(f"no submission {submission_id}")
    return sub


def visible_submission(s: Session, viewer: User | None, submission_id: int) -> models.Submission:
    """The submission if `viewer` may see its details (its team, the task's organizers); NotFound
    otherwise, the same answer for "not yours" and "does not exist" (ids are no oracle). A removed
    run stays readable, marked, as it stays listed (`server.domain.submissions.team_runs`)."""
    sub = s.get(models.Submission, submission_id)
    if sub is None or not can_see_submission(viewer, sub, s):
        raise NotFound(f"no submission {submission_id} visible to you")
    return sub


def phases_of(s: Session, task_id: str) -> list[models.Phase]:
    """A task's phases in the order they were made."""
    return list(s.execute(_phases_statement(), {"task_id": task_id}).scalars())


@functools.cache
def _phases_statement():
    """`phases_of`' query, built once (the task bound at each call)."""
    P = models.Phase
    return select(P).where(P.task_id == bindparam("task_id")).order_by(P.id)


def phase_or_default(
    s: Session,
    task_id: str,
    name: str | None,
    accepts: str | None = "predictions",
    phases: list[models.Phase] | None = None,
) -> models.Phase:
    """The phase `name` of a task; without a name, the one `phase_choice.default_phase` picks by
    splits and dates (the open test phase, else the open dev phase, whatever they are called).
    NotFound names the phases there are. `phases`: the task's, read already."""
    phases = phases_of(s, task_id) if phases is None else phases
    if not phases:
        raise NotFound(f"task {task_id!r} has no phases", "no_phase")
    if name:
        for p in phases:
            if p.name == name:
                return p
        raise NotFound(
            f"task {task_id!r} has no phase {name!r} (phases: {', '.join(p.name for p in phases)})",
            "unknown_phase",
        )
    return phase_choice.default_phase(phases, accepts=accepts)


def action(fn):
    """An action is one transaction: what `fn` changes on its session `s` is committed when it
    returns and rolled back, with its rollback hooks, when it raises (a refusal included), so a
    refused action leaves nothing behind. An action called from another joins its transaction."""

    @functools.wraps(fn)
    def run(*args, s: Session, **kwargs):
        with transaction(s):
            return fn(*args, s=s, **kwargs)

    return run


def lock_for_change(s: Session, model, row_id, what: str, seconds: int = 60) -> None:
    """Serialize the changes of a whole task or phase (`what` names it): a second one waits for
    the first to commit, then reads what it left; after `seconds` of waiting it is refused with
    409 naming the change in progress. Take it before reading what the change depends on."""
    busy = LifecycleRefused(
        f"another change of {what} is in progress (an update or a publication by an organizer); "
        "it was not finished after waiting for it: try again once it is done",
        "change_in_progress",
    )
    try:
        if s.get_bind().dialect.name == "postgresql":
            with savepoint(s):  # the timeout, for this transaction only
                s.execute(text(f"SET LOCAL lock_timeout = '{int(seconds)}s'"))
        lock_row(s, model, row_id)
    except OperationalError as e:  # SQLite: "database is locked"; PostgreSQL: lock_timeout
        if "locked" in str(e) or "lock timeout" in str(e) or "LockNotAvailable" in repr(e.orig):
            raise busy from None
        raise
