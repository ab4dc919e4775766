"""The mail queue: a message is a row (`OutgoingMail`) written in the transaction of what caused it
(an announcement, an invitation, a run's notice), then delivered by the worker, retried, never in a
request. `dedup_key` is unique, so that what is queued twice (a retried request, a run finished
twice) is one message, sent once.

`queue` is the one way to queue a message; delivery is `deliver_due`.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta

from rq.job import JobStatus
from sqlalchemy import func, or_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.db import get_engine
from server.mail import connect_smtp, message
from server.models import OutgoingMail, utcnow
from server.queue import SCORING, _fetch, _live_or_cleared, connect, get_queue
from server.settings import Settings, get_settings

QUEUED, SENDING, SENT, FAILED = "queued", "sending", "sent", "failed"


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


# ----------------------------------------------------------------------------- delivery

BATCH = 200  # rows claimed at once, sent over one SMTP connection
LEASE = timedelta(minutes=10)  # a row "sending" longer than this lost its worker: queued again
FLUSH_EVERY = 50  # sent rows are marked in groups of this many
BACKOFF = timedelta(minutes=1)  # the delay after a first failure; doubled after each next one
MAX_BACKOFF = timedelta(hours=6)
DELIVERY_JOB = "server.outbox.deliver_mail"
DELIVERY_JOB_ID = "mail-delivery"

log = logging.getLogger(__name__)


def backoff(attempts: int) -> timedelta:
    """The delay before the next try of a message that failed `attempts` times (1, 2, 4, ...
    minutes, at most MAX_BACKOFF)."""
    return min(BACKOFF * (2 ** max(0, min(attempts - 1, 20))), MAX_BACKOFF)


def release_stuck(engine, now=None) -> int:
    """Queue again the rows whose sender died mid-batch (still "sending" past their lease); each
    counts as an attempt. Returns how many."""
    now = now or utcnow()
    with engine.begin() as c:
        r = c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.status == SENDING, OutgoingMail.next_try_at <= now)
            .values(
                status=QUEUED,
                attempts=OutgoingMail.attempts + 1,
                next_try_at=now,
                last_error="delivery interrupted (the sending worker stopped); retried",
            )
        )
        return r.rowcount or 0


def claim(engine, limit: int = BATCH, now=None) -> list[tuple[int, str, str, str, int]]:
    """Claim up to `limit` due queued rows for this sender with ONE conditional statement,
    `UPDATE ... SET status='sending' WHERE id IN (due ids) AND status='queued' RETURNING ...`, so
    that two senders never claim the same row: on PostgreSQL the due rows are picked with
    `FOR UPDATE SKIP LOCKED` (a row another sender is claiming is skipped, and the status is
    checked again on the row itself); on SQLite writers take turns (one statement takes the write
    lock at once, waiting out the busy timeout). Returns (id, to, subject, body, attempts)."""
    now = now or utcnow()
    due = (
        select(OutgoingMail.id)
        .where(
            OutgoingMail.status == QUEUED,
            or_(OutgoingMail.next_try_at.is_(None), OutgoingMail.next_try_at <= now),
        )
        .order_by(OutgoingMail.id)
        .limit(limit)
    )
    if engine.dialect.name == "postgresql":
        due = due.with_for_update(skip_locked=True)
    with engine.begin() as c:
        rows = c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.id.in_(due.scalar_subquery()), OutgoingMail.status == QUEUED)
            .values(status=SENDING, next_try_at=now + LEASE)
            .returning(
                OutgoingMail.id,
                OutgoingMail.to_addr,
                OutgoingMail.subject,
                OutgoingMail.body,
                OutgoingMail.attempts,
            )
            .execution_options(synchronize_session=False)
        ).all()
    return sorted((tuple(r) for r in rows), key=lambda r: r[0])


def _mark_sent(engine, ids: list[int]) -> None:
    if not ids:
        return
    with engine.begin() as c:
        c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.id.in_(ids), OutgoingMail.status == SENDING)
            .values(status=SENT, sent_at=utcnow(), next_try_at=None, last_error="")
        )
    ids.clear()


def _mark_failed(engine, row_id: int, attempts: int, error: str, max_attempts: int) -> str:
    """Back to queued after a delay, or failed for good after `max_attempts`."""
    n = attempts + 1
    status = FAILED if n >= max_attempts else QUEUED
    with engine.begin() as c:
        c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.id == row_id, OutgoingMail.status == SENDING)
            .values(
                status=status,
                attempts=n,
                last_error=error[:500],
                next_try_at=None if status == FAILED else utcnow() + backoff(n),
            )
        )
    return status


def _describe(e: BaseException) -> str:
    if isinstance(e, smtplib.SMTPRecipientsRefused):
        refused = "; ".join(f"{a}: {code} {msg!r}" for a, (code, msg) in e.recipients.items())
        return f"recipient refused ({refused})"
    if isinstance(e, smtplib.SMTPResponseException):
        text = e.smtp_error.decode("utf-8", "replace") if isinstance(e.smtp_error, bytes) else ""
        return f"{type(e).__name__}: {e.smtp_code} {text}".strip()
    return f"{type(e).__name__}: {e}"


def deliver_due(engine, settings: Settings, limit: int = BATCH) -> dict:
    """Send one batch of due messages over one SMTP connection; returns counts. Without an SMTP
    host nothing is claimed: the rows stay queued until mail is configured."""
    stats = {"sent": 0, "retry": 0, "failed": 0, "released": release_stuck(engine)}
    if not settings.mail_configured():
        stats["skipped"] = "mail is not configured"
        return stats
    rows = claim(engine, limit)
    stats["claimed"] = len(rows)
    smtp = None
    sent: list[int] = []
    try:
        for row_id, to, subject, body, attempts in rows:
            try:
                if smtp is None:
                    smtp = connect_smtp(settings)
                smtp.send_message(message(settings, to, subject, body))
            except Exception as e:  # noqa: BLE001 — the row keeps the reason and is retried
                if not isinstance(e, smtplib.SMTPResponseException) and smtp is not None:
                    _close(smtp)  # the connection may be broken: the next message opens another
                    smtp = None
                status = _mark_failed(
                    engine, row_id, attempts, _describe(e), settings.mail_max_attempts
                )
                stats["failed" if status == FAILED else "retry"] += 1
                log.warning("mail %s to %s not sent (%s): %s", row_id, to, status, _describe(e))
                continue
            sent.append(row_id)
            stats["sent"] += 1
            if len(sent) >= FLUSH_EVERY:
                _mark_sent(engine, sent)
    finally:
        _mark_sent(engine, sent)
        if smtp is not None:
            _close(smtp)
    return stats


def _close(smtp) -> None:
    try:
        smtp.quit()
    except Exception:  # noqa: BLE001 — already gone
        smtp.close()


def deliver_all(engine, settings: Settings, max_batches: int = 50, limit: int = BATCH) -> dict:
    """Batches until nothing is due (or `max_batches`); the counts summed."""
    total: dict = {"sent": 0, "retry": 0, "failed": 0, "released": 0, "claimed": 0}
    for _ in range(max_batches):
        got = deliver_due(engine, settings, limit)
        for k, v in got.items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
            else:
                total[k] = v
        if not got.get("claimed"):
            break
    return total


def deliver_mail() -> dict:
    """The queued job (on the scoring queue): deliver everything due."""
    settings = get_settings()
    return deliver_all(get_engine(settings.sqlalchemy_url()), settings)


def enqueue_delivery(settings: Settings, conn=None) -> bool:
    """Ask a worker to deliver the queue. Requests coalesce like the board statistics' do: while
    a delivery job waits, nothing is added; while one runs, one follow-up is queued. Never raises:
    False when Redis is away (the reconciler's sweep delivers later)."""
    waiting = (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED)
    try:
        conn = conn or connect(settings)
        for jid in (DELIVERY_JOB_ID, f"{DELIVERY_JOB_ID}-again"):
            job = _fetch(conn, jid)
            status = job.get_status(refresh=False) if job is not None else None
            if status in waiting:
                return True
            if status == JobStatus.STARTED:
                continue
            _live_or_cleared(conn, jid)
            get_queue(SCORING, conn, settings).enqueue_call(
                DELIVERY_JOB,
                job_id=jid,
                timeout=settings.job_timeout,
                result_ttl=60,
                failure_ttl=24 * 3600,
                description="deliver queued mail",
            )
            return True
        return True
    except Exception as e:  # noqa: BLE001 — the rows stay queued; the reconciler sweeps them
        log.warning("mail delivery not enqueued (%s: %s)", type(e).__name__, e)
        return False


def due_count(engine, now=None) -> int:
    now = now or utcnow()
    with engine.connect() as c:
        return c.execute(
            select(func.count(OutgoingMail.id)).where(
                OutgoingMail.status == QUEUED,
                or_(OutgoingMail.next_try_at.is_(None), OutgoingMail.next_try_at <= now),
            )
        ).scalar_one()


def sweep(engine, settings: Settings, conn) -> int:
    """The reconciler's pass: queue again what a dead sender left, and ask a worker to deliver
    what is due (the periodic safety net behind the job enqueued when a message is queued).
    Returns how many messages are due."""
    release_stuck(engine)
    if not settings.mail_configured():
        return 0
    n = due_count(engine)
    if n:
        enqueue_delivery(settings, conn)
    return n
