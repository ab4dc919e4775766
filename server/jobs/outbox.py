"""The mail queue: a message is a row (`OutgoingMail`) written in the transaction of what caused it
(an announcement, an invitation, a run's notice), then delivered by the worker, retried, never in a
request. `dedup_key` is unique, so that what is queued twice (a retried request, a run finished
twice) is one message, sent once.

`queue` (server.domain.mail, where the actions and the domain write it) is the one way to queue a
message; delivery is `deliver_due`.
"""

from __future__ import annotations

import logging
import os
import smtplib
import socket
from datetime import timedelta

from sqlalchemy import func, or_, update
from sqlmodel import select

from server.db import get_engine, session_scope
from server.domain import notices
from server.domain.mail import QUEUED, queue, queue_many  # noqa: F401 — the outbox's own names
from server.jobs.mail import connect_smtp, message
from server.jobs.queue import connect, enqueue_once
from server.models import OutgoingMail, utcnow
from server.settings import Settings, get_settings

SENDING, SENT, FAILED = "sending", "sent", "failed"


# ----------------------------------------------------------------------------- delivery

BATCH = 200  # rows claimed at once, sent over one SMTP connection
# A claimed row names its sender (`claimed_by`: host, process id and the process's start time). A
# sender on this machine that is gone is recognised at once and its rows are queued again on the
# next run; one on another machine when its lease runs out: the lease is renewed (the heartbeat)
# each time the sender marks a message sent, so it only runs out on a sender that stopped.
LEASE = timedelta(minutes=2)
BACKOFF = timedelta(minutes=1)  # the delay after a first failure; doubled after each next one
MAX_BACKOFF = timedelta(hours=6)
DELIVERY_JOB = "server.jobs.outbox.deliver_mail"
DELIVERY_JOB_ID = "mail-delivery"

log = logging.getLogger(__name__)


def backoff(attempts: int) -> timedelta:
    """The delay before the next try of a message that failed `attempts` times (1, 2, 4, ...
    minutes, at most MAX_BACKOFF)."""
    return min(BACKOFF * (2 ** max(0, min(attempts - 1, 20))), MAX_BACKOFF)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc), None where it is gone or
    unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count from its closing one
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def sender_id() -> str:
    """This process as a claimer: `host|pid|start time`."""
    pid = os.getpid()
    return f"{socket.gethostname()[:64]}|{pid}|{_start_time(pid) or '?'}"


def sender_alive(claimer: str) -> bool | None:
    """Whether the sender that claimed rows still runs: True or False when it ran on this machine,
    None when it ran on another one (only its lease tells)."""
    host, _, rest = (claimer or "").partition("|")
    pid, _, started = rest.partition("|")
    if host != socket.gethostname()[:64] or not pid.isdigit():
        return None
    if started and started != "?":
        return _start_time(int(pid)) == started  # a pid used again is another process
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def release_stuck(engine, now=None) -> int:
    """Queue again the rows whose sender died mid-batch: at once when it ran on this machine and
    is gone, else when its lease ran out (still "sending" past it); each counts as an attempt. Of
    such rows at most the one in flight when the sender died was accepted by the SMTP server (the
    others are marked sent one by one), so at most that one is sent twice. Returns how many."""
    now = now or utcnow()
    with engine.connect() as c:
        claimers = c.execute(
            select(OutgoingMail.claimed_by).where(OutgoingMail.status == SENDING).distinct()
        ).scalars()
        dead = [x for x in claimers if sender_alive(x) is False]
    with engine.begin() as c:
        r = c.execute(
            update(OutgoingMail)
            .where(
                OutgoingMail.status == SENDING,
                or_(OutgoingMail.next_try_at <= now, OutgoingMail.claimed_by.in_(dead)),
            )
            .values(
                status=QUEUED,
                attempts=OutgoingMail.attempts + 1,
                next_try_at=now,
                claimed_by="",
                last_error="delivery interrupted (the sending worker stopped); retried",
            )
            .execution_options(synchronize_session=False)
        )
        return r.rowcount or 0


def claim(
    engine, limit: int = BATCH, now=None, claimer: str | None = None
) -> list[tuple[int, str, str, str, int]]:
    """Claim up to `limit` due queued rows for this sender with ONE conditional statement,
    `UPDATE ... SET status='sending' WHERE id IN (due ids) AND status='queued' RETURNING ...`, so
    that two senders never claim the same row: on PostgreSQL the due rows are picked with
    `FOR UPDATE SKIP LOCKED` (a row another sender is claiming is skipped, and the status is
    checked again on the row itself); on SQLite writers take turns (one statement takes the write
    lock at once, waiting out the busy timeout). The rows name their claimer (`sender_id`).
    Returns (id, to, subject, body, attempts)."""
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
            .values(status=SENDING, next_try_at=now + LEASE, claimed_by=claimer or sender_id())
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


def _mark_sent(engine, row_id: int, claimer: str) -> None:
    """One message the SMTP server accepted is marked sent at once (its own short transaction),
    and the lease of the sender's other rows is renewed: the heartbeat."""
    now = utcnow()
    with engine.begin() as c:
        c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.id == row_id, OutgoingMail.status == SENDING)
            .values(status=SENT, sent_at=now, next_try_at=None, last_error="")
            .execution_options(synchronize_session=False)
        )
        c.execute(
            update(OutgoingMail)
            .where(OutgoingMail.status == SENDING, OutgoingMail.claimed_by == claimer)
            .values(next_try_at=now + LEASE)
            .execution_options(synchronize_session=False)
        )


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
    me = sender_id()
    rows = claim(engine, limit, claimer=me)
    stats["claimed"] = len(rows)
    smtp = None
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
            _mark_sent(engine, row_id, me)  # accepted: never sent again, whatever comes next
            stats["sent"] += 1
    finally:
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
    try:
        enqueue_once(
            conn or connect(settings),
            settings,
            DELIVERY_JOB,
            DELIVERY_JOB_ID,
            description="deliver queued mail",
        )
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


def notify_run(engine, settings: Settings, submission_id: int) -> bool:
    """Queue a finished run's notice and ask a worker to deliver it; never raises."""
    try:
        with session_scope(engine) as s:  # the scoring job's own step, after the score's
            queued = notices.queue_run_notice(s, settings, submission_id)
        if queued:
            enqueue_delivery(settings)
        return queued
    except Exception:  # noqa: BLE001 — a notice must never break scoring
        log.exception("submission %s: run notice not queued", submission_id)
        return False
