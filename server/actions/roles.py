"""Roles in a competition and invitations to them.

The owners of a competition (and site administrators) invite people by email to be owners,
organizers or assessors of it. An invitation is a row (`CompetitionInvite`) and a signed link
(purpose "competition-invite", carrying the invitation's id, valid 14 days). With mail configured
the link is queued to the address (`server.jobs.outbox`), and the signed-in person whose email
matches the invitation accepts it and gets the role: the mail proves the address. Without mail
nothing proves that an account's address is its holder's (anyone may register any address), so
no role is ever granted to an address: the link is handed back to the owner to pass on by a
channel they trust, and whoever holds it, signed in with any account, accepts it.

The organizers of a competition read who has which role there and the pending invitations; its
owners take a role away (never the last owner's) and cancel invitations. Everything is audited
with the competition.
"""

from __future__ import annotations

from datetime import timedelta

from itsdangerous import BadData, SignatureExpired, URLSafeTimedSerializer
from sqlmodel import Session, select

from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.actions.competitions import find
from server.db import lock_row
from server.domain import audit, people
from server.domain.emails import BadEmail, lookup_form, normalize_email
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs import outbox
from server.models import Competition, CompetitionInvite, CompetitionRole, User, utcnow
from server.settings import Settings, get_settings

PURPOSE = "competition-invite"
VALID_DAYS = 14
MAX_AGE = VALID_DAYS * 24 * 3600


# ----------------------------------------------------------------------------- the signed link


def serializer(secret_key: str) -> URLSafeTimedSerializer:
    """The signer of invitation links (the same scheme as server.web.auth's reset links)."""
    return URLSafeTimedSerializer(secret_key, salt=f"palimpsest.{PURPOSE}")


def invite_token(secret_key: str, invite_id: int) -> str:
    return serializer(secret_key).dumps({"i": invite_id})


def invite_link(settings: Settings, invite_id: int) -> str:
    base = (settings.base_url or "http://127.0.0.1:5000").rstrip("/")
    return f"{base}/invites/{invite_token(settings.secret_key, invite_id)}"


def _invite_of_token(s: Session, settings: Settings, token: str) -> CompetitionInvite:
    """The invitation a link names, if it is still usable; else a refusal saying why."""
    try:
        data = serializer(settings.secret_key).loads(token, max_age=MAX_AGE)
        inv = s.get(CompetitionInvite, int(data["i"]))
    except SignatureExpired:
        raise LifecycleRefused(
            f"this invitation link has expired (links are valid {VALID_DAYS} days): ask the "
            "competition's owner for a new one",
            "invite_expired",
        ) from None
    except (BadData, KeyError, TypeError, ValueError):
        raise NotFound("this invitation link is not valid", "unknown_invite") from None
    if inv is None:
        raise NotFound("this invitation link is not valid", "unknown_invite")
    if inv.revoked_at is not None:
        raise LifecycleRefused(
            "this invitation was cancelled by the competition's owners", "invite_revoked"
        )
    if inv.accepted_at is not None:
        raise LifecycleRefused("this invitation was accepted already", "invite_used")
    return inv


# ----------------------------------------------------------------------------- checks


def _require_owner(s: Session, actor: User | None, c: Competition) -> None:
    """An owner of `c` (or an administrator, or the shell); a draft is not disclosed to someone
    with no role in it."""
    if actor is None or people.has_role(s, actor, c.id, people.OWNER):
        return
    if c.state == "draft" and people.role_of(s, actor, c.id) is None:
        raise NotFound(f"no competition {c.slug!r}", "unknown_competition")
    raise Forbidden(f"this needs an owner of {c.slug!r}", "not_owner")


@action
def require_owner(*, s: Session, actor: User | None, competition: str) -> None:
    """Refuse, before anything else is read, someone who may not invite or revoke in it."""
    _require_owner(s, actor, find(s, competition))


def _owners(s: Session, c: Competition) -> list[int]:
    q = select(CompetitionRole.user_id).where(
        CompetitionRole.competition_id == c.id, CompetitionRole.role == people.OWNER
    )
    return list(s.exec(q))


def _refuse_last_owner(s: Session, c: Competition, user: User, new_role: str | None) -> None:
    """Refuse a change that would leave the competition without an owner."""
    if new_role == people.OWNER or people.role_of(s, user, c.id) != people.OWNER:
        return
    if _owners(s, c) == [user.id]:
        raise LifecycleRefused(
            f"{user.email} is the last owner of {c.slug!r}: make someone else an owner first",
            "last_owner",
        )


def _user_by_email(s: Session, email: str) -> User | None:
    return s.exec(select(User).where(User.email == email)).first()


def _pending(s: Session, c: Competition, email: str | None = None) -> list[CompetitionInvite]:
    """The invitations of `c` neither accepted, cancelled nor expired (of one address if given)."""
    q = select(CompetitionInvite).where(
        CompetitionInvite.competition_id == c.id,
        CompetitionInvite.accepted_at.is_(None),
        CompetitionInvite.revoked_at.is_(None),
        CompetitionInvite.created_at > utcnow() - timedelta(days=VALID_DAYS),
    )
    if email is not None:
        q = q.where(CompetitionInvite.email == email)
    return list(s.exec(q.order_by(CompetitionInvite.id)))


def _expires(inv: CompetitionInvite):
    return inv.created_at + timedelta(days=VALID_DAYS)


def _mail_body(c: Competition, role: str, inviter: User | None, link: str) -> str:
    who = inviter.email if inviter is not None else "The operators of this server"
    return (
        f"{who} invites you to be {'an' if role[0] in 'aeiou' else 'a'} {role} of the "
        f"competition {c.title!r} ({c.slug}) on Palimpsest.\n\n"
        f"Sign in (or register) with this address, then accept the invitation here within "
        f"{VALID_DAYS} days:\n\n{link}\n\n"
        "If you did not expect this, ignore this message."
    )


# ----------------------------------------------------------------------------- actions


@action
def invite(
    *,
    s: Session,
    actor: User | None,
    competition: str,
    email: str,
    role: str,
    via: str,
    settings: Settings | None = None,
) -> m.InviteOut:
    """Invite a person by email to a role (owner, organizer, assessor) in a competition: its
    owners and site administrators. With mail configured the link is queued to the address;
    without, the link is returned for the owner to hand over (an account with that address gets
    nothing: its address is not proved). A pending invitation of the same address is replaced."""
    settings = settings or get_settings()
    c = find(s, competition)
    lock_row(s, Competition, c.id)  # the owners are read and changed under the lock
    _require_owner(s, actor, c)
    try:
        email = normalize_email(email)
    except BadEmail as e:
        raise UploadFieldsInvalid({"email": f"{(email or '')[:320]!r}: {e}"}) from None
    if role not in people.ROLES:
        raise UploadFieldsInvalid({"role": f"{role!r}: one of {', '.join(people.ROLES)}"})
    inv, status, link, message = invite_person(s, settings, c, actor, email, role, via=via)
    return m.InviteOut(
        id=inv.id,
        competition=c.slug,
        email=email,
        role=role,
        status=status,
        link=link,
        expires_at=_expires(inv),
        message=message,
    )


def invite_person(
    s: Session,
    settings: Settings,
    c: Competition,
    actor: User | None,
    email: str,
    role: str,
    *,
    via: str,
) -> tuple[CompetitionInvite, str, str | None, str]:
    """The invitation itself, uncommitted (`invite`, and a bundle's `roles` on create): mailed,
    or (no mail) a link to hand over; never a role granted to an address's current holder."""
    existing = _user_by_email(s, email)
    if existing is not None and people.role_of(s, existing, c.id) == role:
        raise LifecycleRefused(f"{email} is {role} of {c.slug!r} already", "has_role")
    if existing is not None:
        _refuse_last_owner(s, c, existing, role)
    now = utcnow()
    for old in _pending(s, c, email):  # the new invitation replaces an earlier one
        old.revoked_at = now
        s.add(old)
    inv = CompetitionInvite(
        competition_id=c.id,
        email=email,
        role=role,
        invited_by=None if actor is None else actor.id,
        created_at=now,
    )
    s.add(inv)
    s.flush()
    link = invite_link(settings, inv.id)
    if settings.mail_configured():
        outbox.queue(
            s,
            to=email,
            subject=f"Invitation: {role} of {c.title} on Palimpsest",
            body=_mail_body(c, role, actor, link),
            dedup_key=f"invite:{inv.id}",
            kind="invite",
            competition_id=c.id,
        )
        status, message = "mailed", f"an invitation link was mailed to {email}"
        link = None  # the mail proves the address: the link goes to it alone
    else:
        # without mail nothing proves who holds the address (anyone may register any address):
        # the link, handed over by the owner, is the proof; whoever signs in with it accepts
        status = "link"
        message = (
            f"this server sends no mail, so nothing proves who holds {email}: hand them this "
            f"link yourself; whoever opens it signed in (any account) and accepts it within "
            f"{VALID_DAYS} days gets the role"
        )
    audit.record(
        s,
        actor,
        "competition_role_invite",
        f"{c.slug}/{email}",
        competition_id=c.id,
        via=via,
        role=role,
        invite=inv.id,
        outcome=status,
    )
    return inv, status, link, message


def masked(email: str) -> str:
    """An address as a link's wrong holder is shown it: its first letter and its domain."""
    local, _, domain = email.partition("@")
    return f"{local[:1]}…@{domain}"


@action
def show_invite(
    *, s: Session, user: User, token: str, settings: Settings | None = None
) -> m.InviteShown:
    """What an invitation link offers (its competition and role), checked as `accept` checks it,
    without accepting it."""
    settings = settings or get_settings()
    inv = _invite_of_token(s, settings, token)
    c = s.get(Competition, inv.competition_id)
    lock_row(s, Competition, c.id)  # the owners are read and changed under the lock
    s.expire_all()
    inv = _invite_of_token(s, settings, token)  # used or cancelled meanwhile?
    yours = _may_accept(settings, user, inv)
    return m.InviteShown(
        competition=c.slug,
        title=c.title,
        email=inv.email if yours else masked(inv.email),
        role=inv.role,
        expires_at=_expires(inv),
        yours=yours,
    )


def _may_accept(settings: Settings, user: User, inv: CompetitionInvite) -> bool:
    """With mail, the invited address's holder alone (the mail proved it); without, the link's
    holder (the owner handed it over: no address is proved on such a site)."""
    return not settings.mail_configured() or lookup_form(user.email) == lookup_form(inv.email)


@action
def accept(
    *, s: Session, user: User, token: str, via: str = "web", settings: Settings | None = None
) -> m.InviteAccepted:
    """Accept an invitation: the signed-in person whose email is the invitation's gets its role
    (with mail; without, whoever holds the link). Refused, saying why, for another account or an
    expired, cancelled or used link."""
    settings = settings or get_settings()
    inv = _invite_of_token(s, settings, token)
    c = s.get(Competition, inv.competition_id)
    lock_row(s, Competition, c.id)  # the owners are read and changed under the lock
    s.expire_all()
    inv = _invite_of_token(s, settings, token)  # used or cancelled meanwhile?
    if not _may_accept(settings, user, inv):
        raise Forbidden(
            f"this invitation is for another address ({masked(inv.email)}), and you are signed "
            f"in as {user.email}: sign in with the invited address",
            "wrong_account",
        )
    _refuse_last_owner(s, c, user, inv.role)
    people.grant(
        s, c.id, user, inv.role, by=s.get(User, inv.invited_by) if inv.invited_by else None
    )
    inv.accepted_at, inv.accepted_by = utcnow(), user.id
    s.add(inv)
    audit.record(
        s,
        user,
        "competition_role_accept",
        f"{c.slug}/{user.email}",
        competition_id=c.id,
        via=via,
        role=inv.role,
        invite=inv.id,
    )
    return m.InviteAccepted(competition=c.slug, title=c.title, role=inv.role, email=user.email)


@action
def list_roles(*, s: Session, actor: User | None, competition: str) -> m.RolesOut:
    """Who has which role in a competition, and its pending invitations (its organizers read)."""
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    rows = s.exec(
        select(CompetitionRole, User)
        .join(User, User.id == CompetitionRole.user_id)
        .where(CompetitionRole.competition_id == c.id)
        .order_by(CompetitionRole.id)
    ).all()
    order = {r: i for i, r in enumerate(people.ROLES)}
    holders = sorted(rows, key=lambda rw: (order.get(rw[0].role, 9), rw[1].email))
    return m.RolesOut(
        competition=c.slug,
        people=[
            m.RoleOut(user_id=u.id, email=u.email, role=r.role, since=r.created_at)
            for r, u in holders
        ],
        invites=[
            m.PendingInvite(
                id=i.id,
                email=i.email,
                role=i.role,
                created_at=i.created_at,
                expires_at=_expires(i),
            )
            for i in _pending(s, c)
        ],
        may_change=actor is None or people.has_role(s, actor, c.id, people.OWNER),
    )


@action
def revoke(
    *, s: Session, actor: User | None, competition: str, user_or_email: str | int, via: str
) -> m.RoleRevoked:
    """Take a person's role in a competition away and cancel the pending invitations of their
    address (its owners and site administrators). `user_or_email` is an account's id or an email.
    The last owner cannot be removed: the competition's row is locked before its owners are
    read, so two owners removing each other at once leave one."""
    c = find(s, competition)
    lock_row(s, Competition, c.id)
    _require_owner(s, actor, c)
    key = str(user_or_email).strip()
    if key.isdigit() and len(key) < 12:
        user = s.get(User, int(key))
        email = user.email if user is not None else None
    else:
        email = lookup_form(key)
        user = _user_by_email(s, email)
    if email is None:
        raise NotFound(f"no account {key} has a role in {c.slug!r}", "no_role")
    role = people.role_of(s, user, c.id) if user is not None else None
    invites = _pending(s, c, email)
    if role is None and not invites:
        raise NotFound(f"{email} has no role and no pending invitation in {c.slug!r}", "no_role")
    if role is not None:
        _refuse_last_owner(s, c, user, None)
        row = s.exec(
            select(CompetitionRole).where(
                CompetitionRole.competition_id == c.id, CompetitionRole.user_id == user.id
            )
        ).one()
        s.delete(row)
    now = utcnow()
    for inv in invites:
        inv.revoked_at = now
        s.add(inv)
    audit.record(
        s,
        actor,
        "competition_role_revoke",
        f"{c.slug}/{email}",
        competition_id=c.id,
        via=via,
        role=role,
        invites=[i.id for i in invites],
    )
    return m.RoleRevoked(competition=c.slug, email=email, role=role, invites_cancelled=len(invites))
