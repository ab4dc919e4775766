"""Queueing mail: a message is a row (`OutgoingMail`) written in the transaction of what caused it
(an announcement, an invitation, a run's notice); the worker delivers it (server.jobs.outbox).
`dedup_key` is unique, so that what is queued twice is one message, sent once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.db import savepoint
from server.models import OutgoingMail, utcnow

QUEUED = "queued"


def queue(
    s: Session,
    *,
    to: str,
    subject: str,
    body: str,
    dedup_key: str,
    kind: str = "",
    competition_id: int | None = None,
    not_before: datetime | None = None,
) -> OutgoingMail | None:
    """Queue one message in the caller's transaction (flushed in a savepoint); None when a
    message with this `dedup_key` is queued or sent already. `not_before`: it is not sent
    sooner."""
    if s.exec(select(OutgoingMail.id).where(OutgoingMail.dedup_key == dedup_key)).first():
        return None
    row = OutgoingMail(
        dedup_key=dedup_key[:200],
        to_addr=to,
        subject=subject[:300],
        body=body,
        kind=kind[:32],
        competition_id=competition_id,
        next_try_at=not_before,
    )
    try:
        with savepoint(s):
            s.add(row)
    except IntegrityError:  # queued by a concurrent request between the look-up and the insert
        return None
    return row


def queue_many(s: Session, messages: list[dict]) -> int:
    """Queue many messages in the caller's transaction with one INSERT (each a dict of `to`,
    `subject`, `body`, `dedup_key`, `kind`, `competition_id`); a `dedup_key` queued already is
    skipped (ON CONFLICT DO NOTHING). Returns how many rows the INSERT added."""
    if not messages:
        return 0
    now = utcnow()
    rows = [
        {
            "dedup_key": m["dedup_key"][:200],
            "to_addr": m["to"],
            "subject": m["subject"][:300],
            "body": m["body"],
            "kind": m.get("kind", "")[:32],
            "competition_id": m.get("competition_id"),
            "status": QUEUED,
            "attempts": 0,
            "last_error": "",
            "created_at": now,
        }
        for m in messages
    ]
    dialect = s.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    # one statement sent as multi-row INSERTs by SQLAlchemy's "insertmanyvalues" (compiled once
    # and cached, unlike a literal VALUES list of every row); RETURNING counts what was added
    stmt = (
        insert(OutgoingMail)
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(OutgoingMail.id)
    )
    return len(s.connection().execute(stmt, rows).all())
