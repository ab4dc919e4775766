"""Registrations: a person registers for a competition (accepting its terms), sees their
registration, and its organizers list the participants and decide on them (approve, reject,
suspend, ban, reinstate).

Who takes part is `server.domain.people.participation` (downloads and submissions ask it); a ban
also
takes the person's runs off the live boards of the competition's tasks (`server.boards.leaderboard`
leaves
out `people.excluded_users`), so every phase of those tasks is marked changed through
`server.domain.lifecycle.bump` and its cached board is rendered again. Published snapshots are never
touched.
"""

from __future__ import annotations

from sqlalchemy import and_, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.actions.competitions import find, visible
from server.domain import audit, lifecycle, people, teams
from server.domain.bounds import CONTROL
from server.domain.emails import lookup_form
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs import outbox
from server.models import (
    Competition,
    CompetitionPage,
    Phase,
    Registration,
    Team,
    TeamMember,
    User,
    utcnow,
)

# action -> (the status it sets, the statuses it may start from; None: any other)
DECISIONS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "approve": (people.APPROVED, (people.PENDING, people.REJECTED)),
    "reject": (people.REJECTED, (people.PENDING, people.APPROVED)),
    "suspend": (people.SUSPENDED, (people.PENDING, people.APPROVED)),
    "ban": (people.BANNED, None),
    "reinstate": (people.APPROVED, (people.SUSPENDED, people.BANNED, people.REJECTED)),
}
NEEDS_REASON = frozenset({"reject", "suspend", "ban"})
MAX_REASON = 500


def _terms_url(s: Session, c: Competition) -> str | None:
    q = select(CompetitionPage.id).where(
        CompetitionPage.competition_id == c.id, CompetitionPage.slug == "terms"
    )
    return f"/competitions/{c.slug}/terms" if s.exec(q).first() is not None else None


def _out(s: Session, c: Competition, user: User, reg: Registration | None) -> m.RegistrationOut:
    if reg is None and people.registers_implicitly(c):
        # no side effect here: a competition that registers implicitly does so when one acts
        p = people.Participation(True)
    else:
        p = people.participation(s, user, c)
    fields: dict = {}
    if reg is not None:
        fields = dict(
            status=reg.status,
            terms_version=reg.terms_version,
            terms_accepted_at=reg.terms_accepted_at,
            registered_at=reg.created_at,
            decided_at=reg.decided_at,
            reason=reg.reason,
            mail_announcements=reg.mail_announcements,
            mail_runs=reg.mail_runs,
        )
    return m.RegistrationOut(
        competition=c.slug,
        registered=reg is not None,
        current_terms_version=c.terms_version,
        terms_url=_terms_url(s, c),
        participating=p.ok,
        code=p.code,
        message=p.message,
        **fields,
    )


def _open_for(s: Session, user: User, competition: str) -> Competition:
    """The competition if it takes registrations now (visible), else why not."""
    c = visible(s, competition, user)
    if c.state != "visible":
        raise LifecycleRefused(
            f"competition {c.slug!r} is {c.state}: it takes no registrations",
            f"competition_{c.state}",
        )
    return c


@action
def register(
    *,
    s: Session,
    user: User,
    competition: str,
    accept_terms: bool,
    via: str,
    terms_version: int | None = None,
) -> m.RegistrationOut:
    """Register for a competition, or accept its changed terms. A competition with terms needs
    `accept_terms`; an allow-list of email domains refuses other addresses; a new registration is
    approved at once where approval is automatic, else it waits for an organizer. A rejected,
    suspended or banned person cannot register again by themselves. `terms_version` is the
    version the person read (the form's, the client's): accepting other terms than those is
    refused, so that nobody is recorded as accepting a version they never saw. Audited;
    commits."""
    c = _open_for(s, user, competition)
    if not people.domain_allowed(c, user.email):
        raise Forbidden(
            f"competition {c.slug!r} takes registrations from addresses at "
            f"{', '.join(c.allowed_domains)} only",
            "domain_not_allowed",
        )
    if c.terms_version > 0 and not accept_terms:
        raise UploadFieldsInvalid(
            {
                "accept_terms": f"accept the terms of {c.slug!r} (version {c.terms_version}) "
                "to register"
            }
        )
    if accept_terms and terms_version is not None and terms_version != c.terms_version:
        raise LifecycleRefused(
            f"the terms of {c.slug!r} changed since you read them (version {terms_version}; now "
            f"version {c.terms_version}): read them again, then accept",
            "terms_changed",
        )
    now = utcnow()
    reg = people.registration(s, user, c.id)
    target = f"{c.slug}/{user.email}"
    if reg is not None:
        if reg.status not in (people.PENDING, people.APPROVED):
            raise Forbidden(
                f"your registration for {c.slug!r} is {reg.status}"
                + (f": {reg.reason}" if reg.reason else "")
                + "; only its organizers can change that",
                f"registration_{reg.status}",
            )
        if accept_terms and (reg.terms_accepted_at is None or reg.terms_version < c.terms_version):
            before = reg.terms_version
            reg.terms_version = c.terms_version
            reg.terms_accepted_at = now
            s.add(reg)
            audit.record(
                s,
                user,
                "registration_terms",
                target,
                competition_id=c.id,
                via=via,
                terms_version=[before, c.terms_version],
            )
        return _out(s, c, user, reg)
    auto = c.approval == "auto"
    reg = Registration(
        competition_id=c.id,
        user_id=user.id,
        status=people.APPROVED if auto else people.PENDING,
        terms_version=c.terms_version if accept_terms else 0,
        terms_accepted_at=now if accept_terms else None,
        created_at=now,
        decided_at=now if auto else None,
        reason="automatic approval" if auto else "",
    )
    s.add(reg)
    s.flush()
    audit.record(
        s,
        user,
        "registration_create",
        target,
        competition_id=c.id,
        via=via,
        status=reg.status,
        terms_version=reg.terms_version,
    )
    return _out(s, c, user, reg)


@action
def my_registration(*, s: Session, user: User, competition: str) -> m.RegistrationOut:
    """The person's registration for a competition they may see (`registered` false: none) and
    whether they may download and submit, with why not."""
    c = visible(s, competition, user)
    return _out(s, c, user, people.registration(s, user, c.id))


def _participant(reg: Registration, user: User, team: str | None) -> m.ParticipantOut:
    return m.ParticipantOut(
        user_id=user.id,
        email=user.email,
        status=reg.status,
        terms_version=reg.terms_version,
        terms_accepted_at=reg.terms_accepted_at,
        team=team,
        registered_at=reg.created_at,
        decided_at=reg.decided_at,
        reason=reg.reason,
    )


def _team_name(own: TeamMember | None, own_team, every: TeamMember | None, every_team):
    """`people.team_of` on joined rows: the membership of this competition, else the one of
    every competition; an active one only."""
    if own is not None:
        return own_team.name if own.status == "active" and own_team is not None else None
    if every is not None and every.status == "active" and every_team is not None:
        return every_team.name
    return None


@action
def list_participants(
    *,
    s: Session,
    actor: User | None,
    competition: str,
    status: str | None = None,
    after: int | None = None,
    limit: int = 50,
) -> m.ParticipantList:
    """The people registered for a competition (its organizers), newest registration first, with
    their team there; one query for a page. `after` is the `next_after` of the page before."""
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    if status is not None and status not in people.STATUSES:
        raise UploadFieldsInvalid({"status": f"{status!r}: one of {', '.join(people.STATUSES)}"})
    if not 1 <= limit <= 500:
        raise UploadFieldsInvalid({"limit": "1 to 500"})
    own, every = aliased(TeamMember), aliased(TeamMember)
    own_team, every_team = aliased(Team), aliased(Team)
    q = (
        select(Registration, User, own, own_team, every, every_team)
        .join(User, User.id == Registration.user_id)
        .outerjoin(own, and_(own.user_id == User.id, own.competition_id == c.id))
        .outerjoin(own_team, own_team.id == own.team_id)
        .outerjoin(every, and_(every.user_id == User.id, every.competition_id.is_(None)))
        .outerjoin(every_team, every_team.id == every.team_id)
        .where(Registration.competition_id == c.id)
    )
    if status is not None:
        q = q.where(Registration.status == status)
    if after is not None:
        q = q.where(Registration.id < after)
    rows = list(s.exec(q.order_by(Registration.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    items = [_participant(reg, u, _team_name(o, ot, e, et)) for reg, u, o, ot, e, et in rows]
    return m.ParticipantList(items=items, next_after=rows[-1][0].id if more and rows else None)


def _person(s: Session, user: int | str) -> User:
    """A person by id (a number) or email."""
    if isinstance(user, int) or (isinstance(user, str) and user.isdigit() and len(user) < 12):
        u = s.get(User, int(user))
    else:
        email = lookup_form(str(user))
        u = s.exec(select(User).where(func.lower(User.email) == email)).first()
    if u is None:
        raise NotFound(f"no person {user!r}", "unknown_user")
    return u


def _task_phases(s: Session, c: Competition) -> list[Phase]:
    tids = people.task_ids(s, c.id)
    if not tids:
        return []
    return list(s.exec(select(Phase).where(Phase.task_id.in_(tids)).order_by(Phase.id)))


@action
def decide(
    *,
    s: Session,
    actor: User | None,
    competition: str,
    user: int | str,
    action: str,
    reason: str = "",
    via: str = "web",
) -> m.ParticipantOut:
    """An organizer's decision on a registration: approve, reject, suspend, ban or reinstate.
    Reject, suspend and ban need a reason (the participant is shown it and mailed). A ban takes the
    person's runs off the competition's live boards and reinstating brings them back (each phase's
    board is marked changed). Audited; commits."""
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    if action not in DECISIONS:
        raise UploadFieldsInvalid({"action": f"{action!r}: one of {', '.join(DECISIONS)}"})
    reason = " ".join((reason or "").split())
    if len(reason) > MAX_REASON or CONTROL.search(reason):
        raise UploadFieldsInvalid({"reason": f"at most {MAX_REASON} characters"})
    if action in NEEDS_REASON and not reason:
        raise UploadFieldsInvalid({"reason": f"say why ({action}): the participant is shown it"})
    person = _person(s, user)
    reg = people.registration(s, person, c.id)
    if reg is None:
        raise NotFound(f"{person.email} is not registered for {c.slug!r}", "not_registered")
    new, starts = DECISIONS[action]
    if reg.status == new and action != "reinstate":
        return _participant(reg, person, _team(s, person, c))
    if starts is not None and reg.status not in starts:
        raise LifecycleRefused(
            f"{person.email}'s registration is {reg.status}: {action} applies to "
            f"{' or '.join(starts)} ones"
            + ("; reinstate it" if reg.status in (people.SUSPENDED, people.BANNED) else ""),
            "registration_state",
        )
    before = reg.status
    now = utcnow()
    reg.status = new
    reg.reason = reason
    reg.decided_at = now
    reg.decided_by = actor.id if actor is not None else None
    s.add(reg)
    audit.record(
        s,
        actor,
        f"registration_{action}",
        f"{c.slug}/{person.email}",
        competition_id=c.id,
        via=via,
        user_id=person.id,
        status=[before, new],
        reason=reason,
    )
    outbox.queue(
        s,
        to=person.email,
        subject=f"[{c.title}] your registration is {new}",
        body=(
            f"Your registration for {c.title} ({c.slug}) is now {new}."
            + (f"\n\nReason: {reason}" if reason else "")
            + "\n"
        ),
        dedup_key=f"registration:{reg.id}:{action}:{now.isoformat()}",
        kind="registration",
        competition_id=c.id,
    )
    if new in (people.BANNED, people.SUSPENDED, people.REJECTED):
        _no_longer_captain(s, person, c)
    if people.BANNED in (before, new):
        for p in _task_phases(s, c):  # the boards change with the decision, in its transaction
            lifecycle.bump(s, p, actor=actor, action="leaderboard.refresh", why=f"{action}")
    return _participant(reg, person, _team(s, person, c))


def _no_longer_captain(s: Session, person: User, c: Competition) -> None:
    """A person barred from a competition captains none of its teams: the captaincy passes to the
    longest-standing member who takes part (`server.domain.teams.hand_over_captaincy`)."""
    own = s.exec(
        select(TeamMember).where(
            TeamMember.user_id == person.id,
            TeamMember.competition_id == c.id,
            TeamMember.role == "captain",
        )
    ).first()
    if own is not None:
        s.flush()
        teams.hand_over_captaincy(s, own.team_id, c)


def _team(s: Session, person: User, c: Competition) -> str | None:
    t = people.team_of(s, person, c.id)
    return None if t is None else t.name
