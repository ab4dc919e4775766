"""Mail the site sends on its own, through the mail queue (server.jobs.outbox), each message once:

- `pending`: a competition's owners and organizers get a digest of the registrations waiting for
  their decision, at most one an hour each, only when one arrived since their last digest;
  `CompetitionRole.mail_pending` turns it off (`PUT /api/v1/competitions/<id>/mail`
  `{"pending_registrations": false}`).
- `terms`: when a competition's terms change, every registered participant is told that their
  next download or submission asks them to accept the new version (`terms_changed`, in the
  transaction of the change).
- `closing`: `settings.closing_reminder_hours` before a phase closes, the approved participants of
  its competition who take its announcements are reminded (once per closing time: a phase whose
  deadline moves reminds again).

`queue_due` (the pending digests and the closing reminders) runs in every reconciler pass.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlmodel import Session, select

from server.db import session_scope
from server.domain import people
from server.jobs import outbox
from server.models import (
    Competition,
    CompetitionRole,
    CompetitionTask,
    OutgoingMail,
    Phase,
    Registration,
    User,
    utcnow,
)
from server.settings import Settings

log = logging.getLogger(__name__)

PENDING, TERMS, CLOSING = "pending", "terms", "closing"
DIGEST_EVERY = timedelta(hours=1)
LISTED = 50  # registrations a digest names (the rest counted)


def _base(settings: Settings) -> str:
    return (settings.base_url or "http://127.0.0.1:5000").rstrip("/")


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def pending_digests(s: Session, settings: Settings, now: datetime) -> int:
    """Queue the due digests of pending registrations (not committed); how many."""
    n = 0
    # the ids, distinct (PostgreSQL has no equality for the json columns of a whole row)
    ids = s.exec(
        select(Registration.competition_id)
        .where(Registration.status == people.PENDING)
        .distinct()
        .order_by(Registration.competition_id)
    ).all()
    for cid in ids:
        c = s.get(Competition, cid)
        if c is None:
            continue
        waiting = s.exec(
            select(Registration, User)
            .join(User, User.id == Registration.user_id)
            .where(Registration.competition_id == c.id, Registration.status == people.PENDING)
            .order_by(Registration.created_at, Registration.id)
        ).all()
        organizers = s.exec(
            select(CompetitionRole, User)
            .join(User, User.id == CompetitionRole.user_id)
            .where(
                CompetitionRole.competition_id == c.id,
                CompetitionRole.role.in_((people.OWNER, people.ORGANIZER)),
                CompetitionRole.mail_pending.is_(True),
            )
        ).all()
        for _, org in organizers:
            last = s.exec(
                select(OutgoingMail.created_at)
                .where(
                    OutgoingMail.kind == PENDING,
                    OutgoingMail.competition_id == c.id,
                    OutgoingMail.to_addr == org.email,
                )
                .order_by(OutgoingMail.created_at.desc())
            ).first()
            if last is not None and now - last < DIGEST_EVERY:
                continue
            if last is not None and not any(r.created_at > last for r, _ in waiting):
                continue  # nothing new since the last digest
            lines = [
                f"{len(waiting)} registration(s) for {c.title} wait for your decision:",
                "",
                *(f"- {u.email} (since {_stamp(r.created_at)})" for r, u in waiting[:LISTED]),
            ]
            if len(waiting) > LISTED:
                lines.append(f"- ... and {len(waiting) - LISTED} more")
            lines += [
                "",
                f"Decide: {_base(settings)}/competitions/{c.slug}/participants",
                "",
                "At most one such digest an hour. Turn it off: PUT "
                f"{_base(settings)}/api/v1/competitions/{c.slug}/mail "
                '{"pending_registrations": false}.',
            ]
            row = outbox.queue(
                s,
                to=org.email,
                subject=f"{len(waiting)} registration(s) waiting: {c.title}",
                body="\n".join(lines) + "\n",
                dedup_key=f"pending:{c.id}:{org.id}:{now.strftime('%Y%m%d%H')}",
                kind=PENDING,
                competition_id=c.id,
            )
            if row is not None:
                row.created_at = now  # the digest's "as of" (the next one counts from it)
                n += 1
    return n


def closing_reminders(s: Session, settings: Settings, now: datetime) -> int:
    """Queue the reminders of phases closing within `closing_reminder_hours` (not committed)."""
    hours = settings.closing_reminder_hours
    if not hours:
        return 0
    n = 0
    phases = s.exec(
        select(Phase).where(
            Phase.closes_at.is_not(None),
            Phase.closes_at > now,
            Phase.closes_at <= now + timedelta(hours=hours),
        )
    ).all()
    for p in phases:
        if p.opens_at is not None and p.opens_at > now:
            continue  # not open yet: nothing to remind of
        link = s.exec(select(CompetitionTask).where(CompetitionTask.task_id == p.task_id)).first()
        c = s.get(Competition, link.competition_id) if link else None
        if c is None or c.state != "visible":
            continue
        regs = s.exec(
            select(Registration, User)
            .join(User, User.id == Registration.user_id)
            .where(
                Registration.competition_id == c.id,
                Registration.status == people.APPROVED,
                Registration.mail_announcements.is_(True),
            )
        ).all()
        left = p.closes_at - now
        when = f"{int(left.total_seconds() // 3600)} h {int(left.total_seconds() % 3600 // 60)} min"
        messages = [
            {
                "to": u.email,
                "subject": f"{p.task_id}, phase {p.name} closes {_stamp(p.closes_at)}",
                "body": (
                    f"The phase {p.name} of {p.task_id} ({c.title}) closes at "
                    f"{_stamp(p.closes_at)}, in about {when}. Runs uploaded after that are "
                    f"refused.\n\nSubmit: {_base(settings)}/tasks/{p.task_id}/submit\n\n"
                    "You receive this with the competition's announcements; turn them off under "
                    '"Mail" on the competition\'s page.\n'
                ),
                "dedup_key": f"closing:{p.id}:{p.closes_at.isoformat()}:{u.id}",
                "kind": CLOSING,
                "competition_id": c.id,
            }
            for _, u in regs
        ]
        n += outbox.queue_many(s, messages)
    return n


def queue_due(engine, settings: Settings, now: datetime | None = None) -> dict:
    """One pass: the due digests and reminders, committed; {"pending": n, "closing": n}."""
    now = now or utcnow()
    with session_scope(engine) as s:  # the reconciler's own step
        out = {
            "pending": pending_digests(s, settings, now),
            "closing": closing_reminders(s, settings, now),
        }
    if any(out.values()):
        outbox.enqueue_delivery(settings)
    return out


def terms_changed(s: Session, settings: Settings, c: Competition) -> int:
    """Queue the notice of new terms to every participant registered for `c` (in the caller's
    transaction); how many."""
    regs = s.exec(
        select(Registration, User)
        .join(User, User.id == Registration.user_id)
        .where(
            Registration.competition_id == c.id,
            Registration.status.in_((people.PENDING, people.APPROVED)),
            Registration.terms_version < c.terms_version,
        )
    ).all()
    messages = [
        {
            "to": u.email,
            "subject": f"New terms: {c.title}",
            "body": (
                f"The terms of {c.title} changed (version {c.terms_version}). Your next download "
                "or submission asks you to accept them; read and accept them here:\n\n"
                f"{_base(settings)}/competitions/{c.slug}/terms\n"
            ),
            "dedup_key": f"terms:{c.id}:{c.terms_version}:{u.id}",
            "kind": TERMS,
            "competition_id": c.id,
        }
        for _, u in regs
    ]
    return outbox.queue_many(s, messages)
