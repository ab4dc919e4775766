"""Announcements and mail preferences: an organizer's announcement is shown on the competition page
and mailed, through the mail queue (server.jobs.outbox), to every approved participant who did not
turn
announcements off; a registered person chooses what they are mailed (announcements: on unless
turned off; a notice of each run scored or failed: off unless turned on)."""

from __future__ import annotations

from sqlmodel import Session, select

from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.actions.competitions import checked_text, find, invalid, visible
from server.domain import audit, people
from server.domain.bounds import CONTROL
from server.domain.sanitize import MAX_MARKDOWN, MarkdownTooDeep, check_markdown, render_markdown
from server.exceptions import Forbidden, NotFound
from server.jobs import outbox
from server.jobs.dispatch import jobs
from server.models import Announcement, Competition, CompetitionRole, Registration, User
from server.settings import Settings, get_settings

KIND = "announcement"


def link_base(settings: Settings) -> str:
    """The site's address that links in mails start with (never the request's Host header)."""
    return (settings.base_url or "http://127.0.0.1:5000").rstrip("/")


def competition_url(settings: Settings, c: Competition) -> str:
    return f"{link_base(settings)}/competitions/{c.slug}"


def opt_out_text(settings: Settings, c: Competition) -> str:
    url = competition_url(settings, c)
    return (
        f"You receive this as a participant of {c.title}. To receive no more announcements, "
        f'turn them off under "Mail" on {url} (signed in), or send '
        f'PUT {link_base(settings)}/api/v1/competitions/{c.slug}/mail {{"announcements": false}}.'
    )


def mail_body(settings: Settings, c: Competition, title: str, body_markdown: str) -> str:
    """The plain-text mail of an announcement: its title, its Markdown, the competition's address
    and how to opt out."""
    return (
        f"{title}\n{'=' * min(len(title), 72)}\n\n{body_markdown.strip()}\n\n"
        f"-- \n{c.title}: {competition_url(settings, c)}\n\n{opt_out_text(settings, c)}\n"
    )


def announcement_out(a: Announcement, c: Competition) -> m.AnnouncementOut:
    return m.AnnouncementOut(
        id=a.id,
        competition=c.slug,
        title=a.title,
        body_markdown=a.body_markdown,
        html=a.body_html,
        created_at=a.created_at,
        recipients=a.recipients,
    )


def _markdown(value: str) -> str:
    value = (value or "").strip()
    if not value or len(value) > MAX_MARKDOWN or CONTROL.search(value):
        raise invalid("body_markdown", f"1 to {MAX_MARKDOWN} characters, no control character")
    try:
        check_markdown(value)
    except MarkdownTooDeep as e:
        raise invalid("body_markdown", str(e)) from None
    return value


def recipients(s: Session, c: Competition) -> list[tuple[int, str]]:
    """(user id, email) of every approved participant who takes announcements, in one query."""
    q = (
        select(User.id, User.email)
        .join(Registration, Registration.user_id == User.id)
        .where(
            Registration.competition_id == c.id,
            Registration.status == people.APPROVED,
            Registration.mail_announcements.is_(True),
        )
        .order_by(User.id)
    )
    return [(uid, email) for uid, email in s.exec(q)]


@action
def announce(
    *,
    s: Session,
    actor: User | None,
    competition: str,
    title: str,
    body_markdown: str,
    via: str,
    settings: Settings | None = None,
) -> m.AnnouncementOut:
    """Post an announcement (an owner or organizer of the competition): it is shown on the
    competition page (sanitized HTML) and one message per approved participant who takes
    announcements is queued in the same transaction, with one INSERT; then, once committed, a worker
    is asked to deliver them (a failure to ask is logged; the reconciler's sweep delivers later)."""
    settings = settings or get_settings()
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    title = checked_text(title, "title", 200)
    body_markdown = _markdown(body_markdown)
    a = Announcement(
        competition_id=c.id,
        title=title,
        body_markdown=body_markdown,
        body_html=render_markdown(body_markdown),
        created_by=None if actor is None else actor.id,
    )
    s.add(a)
    s.flush()
    to = recipients(s, c)
    subject = f"[{c.title}] {title}"
    body = mail_body(settings, c, title, body_markdown)
    a.recipients = outbox.queue_many(
        s,
        [
            {
                "to": email,
                "subject": subject,
                "body": body,
                "dedup_key": f"announcement:{a.id}:{uid}",
                "kind": KIND,
                "competition_id": c.id,
            }
            for uid, email in to
        ],
    )
    s.add(a)
    audit.record(
        s,
        actor,
        "announcement_create",
        c.slug,
        competition_id=c.id,
        via=via,
        announcement=a.id,
        title=title,
        recipients=a.recipients,
    )
    if a.recipients:
        jobs(s, settings).deliver_mail(s)
    return announcement_out(a, c)


@action
def list_announcements(
    *, s: Session, viewer: User | None, competition: str, operator: bool = False
) -> list[m.AnnouncementOut]:
    """The announcements of a competition the viewer may see, newest first."""
    c = visible(s, competition, viewer, operator)
    q = (
        select(Announcement)
        .where(Announcement.competition_id == c.id)
        .order_by(Announcement.created_at.desc(), Announcement.id.desc())
    )
    return [announcement_out(a, c) for a in s.exec(q)]


# --- mail preferences ---------------------------------------------------------------------------


def preferences_out(
    c: Competition, reg: Registration, role: CompetitionRole | None = None
) -> m.MailPreferencesOut:
    extra = {} if role is None else {"pending_registrations": role.mail_pending}  # else left out
    return m.MailPreferencesOut(
        competition=c.slug, announcements=reg.mail_announcements, runs=reg.mail_runs, **extra
    )


def _organizer_role(s: Session, user: User, c: Competition) -> CompetitionRole | None:
    """The person's owner or organizer role in the competition (their digest's switch)."""
    return s.exec(
        select(CompetitionRole).where(
            CompetitionRole.competition_id == c.id,
            CompetitionRole.user_id == user.id,
            CompetitionRole.role.in_((people.OWNER, people.ORGANIZER)),
        )
    ).first()


def _registration(s: Session, user: User, c: Competition) -> Registration:
    reg = people.ensure_registration(s, user, c)  # a competition without terms registers here
    if reg is None:
        raise NotFound(
            f"you are not registered for {c.slug!r}: register first, then choose your mail",
            "not_registered",
        )
    return reg


@action
def get_mail_preferences(*, s: Session, user: User, competition: str) -> m.MailPreferencesOut:
    """What the person is mailed in the competition (NotFound when not registered). Reading
    writes nothing: in a competition that registers people implicitly, one who has not acted
    there yet is shown the defaults."""
    c = visible(s, competition, user)
    reg = people.registration(s, user, c.id)
    role = _organizer_role(s, user, c)
    if reg is None and (people.registers_implicitly(c) or role is not None):
        reg = Registration(competition_id=c.id, user_id=user.id)  # not added: the defaults
    if reg is None:
        raise NotFound(
            f"you are not registered for {c.slug!r}: register first, then choose your mail",
            "not_registered",
        )
    return preferences_out(c, reg, role)


@action
def set_mail_preferences(
    *,
    s: Session,
    user: User,
    competition: str,
    announcements: bool | None = None,
    runs: bool | None = None,
    pending_registrations: bool | None = None,
    via: str = "api",
) -> m.MailPreferencesOut:
    """Change what the person is mailed in the competition: announcements, notices of their runs
    (None: unchanged), and for its owners and organizers the digest of pending registrations.
    NotFound when they are not registered for it (nor organize it)."""
    c = visible(s, competition, user)
    role = _organizer_role(s, user, c)
    changes: dict = {}
    if pending_registrations is not None:
        if role is None:
            raise Forbidden(
                f"only the owners and organizers of {c.slug!r} get the digest of pending "
                "registrations",
                "not_organizer",
            )
        if bool(pending_registrations) != role.mail_pending:
            changes["pending_registrations"] = [role.mail_pending, bool(pending_registrations)]
            role.mail_pending = bool(pending_registrations)
            s.add(role)
    if role is not None and announcements is None and runs is None:
        reg = people.registration(s, user, c.id) or Registration(
            competition_id=c.id, user_id=user.id
        )
    else:
        reg = _registration(s, user, c)
    for name, column, value in (
        ("announcements", "mail_announcements", announcements),
        ("runs", "mail_runs", runs),
    ):
        if value is not None and bool(value) != getattr(reg, column):
            changes[name] = [getattr(reg, column), bool(value)]
            setattr(reg, column, bool(value))
            s.add(reg)
    if changes:
        audit.record(s, user, "mail_preferences", c.slug, competition_id=c.id, via=via, **changes)
    return preferences_out(c, reg, role)
