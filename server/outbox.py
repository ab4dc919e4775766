"""The mail queue: a message is a row (`OutgoingMail`) written in the transaction of what caused it
(an announcement, an invitation, a run's notice), then delivered by the worker, retried, never in a
request. `dedup_key` is unique, so that what is queued twice (a retried request, a run finished
twice) is one message, sent once.

`queue` is the one way to queue a message; delivery is `deliver_due`.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.models import OutgoingMail


def queue(
    s: Session,
    *,
    to: str,
    subject: str,
    body: str,
    dedup_key: str,
    kind: str = "",
    competition_id: int | None = None,
) -> OutgoingMail | None:
    """Queue one message in the caller's transaction (flushed in a savepoint); None when a
    message with this `dedup_key` is queued or sent already."""
    if s.exec(select(OutgoingMail.id).where(OutgoingMail.dedup_key == dedup_key)).first():
        return None
    row = OutgoingMail(
        dedup_key=dedup_key[:200],
        to_addr=to,
        subject=subject[:300],
        body=body,
        kind=kind[:32],
        competition_id=competition_id,
    )
    try:
        with s.begin_nested():
            s.add(row)
    except IntegrityError:  # queued by a concurrent request between the look-up and the insert
        return None
    return row
