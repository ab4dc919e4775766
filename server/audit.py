"""The audit record: one row per organizer action or state change, written in the transaction of
the change it records."""

from __future__ import annotations

from sqlmodel import Session

from server.models import AuditLog, User


def record(s: Session, actor: User | int | None, action: str, target: str, **details) -> None:
    """Add an audit row for `action` on `target` to the session's transaction."""
    actor_id = actor.id if isinstance(actor, User) else actor
    s.add(AuditLog(actor_id=actor_id, action=action, target=target[:200], details=details or None))
