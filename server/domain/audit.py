"""The audit record: one row per organizer action or state change, written in the transaction of
the change it records, with the competition it belongs to (so that its organizers read its log and
no other's)."""

from __future__ import annotations

import functools

from sqlalchemy import insert
from sqlmodel import Session, select

from server import models  # other subjects' tables: models.X, loaded when first used
from server.models import User, utcnow


def competition_of_target(s: Session, target: str) -> int | None:
    """The competition an audit target ("phase:3", "submission:7", "team:2", "<task>/<phase>",
    "<task>") belongs to, or None for a site-wide one."""
    kind, _, rest = target.partition(":")
    task_id = None
    if rest and rest.isdigit() and len(rest) < 18:
        row = {"phase": models.Phase, "submission": models.Submission, "team": models.Team}.get(
            kind
        )
        obj = s.get(row, int(rest)) if row is not None else None
        if isinstance(obj, models.Team):
            return obj.competition_id
        task_id = getattr(obj, "task_id", None)
    elif not rest:
        task_id = target.split("/", 1)[0]
    if not task_id:
        return None
    link = s.exec(
        select(models.CompetitionTask).where(models.CompetitionTask.task_id == task_id)
    ).first()
    return None if link is None else link.competition_id


def record(
    s: Session,
    actor: User | int | None,
    action: str,
    target: str,
    *,
    competition_id: int | None = None,
    **details,
) -> None:
    """Add an audit row for `action` on `target` to the session's transaction; the competition
    is the one given, else the target's."""
    actor_id = actor.id if isinstance(actor, User) else actor
    if competition_id is None:
        with s.no_autoflush:
            competition_id = competition_of_target(s, target)
    s.add(
        models.AuditLog(
            actor_id=actor_id,
            action=action,
            target=target[:200],
            details=details or None,
            competition_id=competition_id,
        )
    )


def insert_row(
    s: Session, actor_id: int | None, action: str, target: str, competition_id, details: dict
) -> None:
    """`record` with the competition known, as one INSERT built once and run at once on the
    session's connection (the scoring job's moves: no ORM bookkeeping of the row)."""
    s.connection().execute(
        _insert_statement(),
        {
            "actor_id": actor_id,
            "action": action,
            "target": target[:200],
            "details": details or None,
            "competition_id": competition_id,
            "created_at": utcnow(),
        },
    )


@functools.cache
def _insert_statement():
    return insert(models.AuditLog)
