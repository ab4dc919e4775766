"""Who is who in a competition: its roles, its registrations and its teams.

One module answers, for every surface and action:
- which competition a task belongs to (`competition_of_task`; a task with phases but no
  competition gets one of its own, `ensure_competition`);
- whether a person organizes a competition (`organizes`): a site administrator organizes every
  one; an owner or organizer their own; an assessor none (the assessment pages ask for
  `has_role(..., ASSESSOR)`);
- whether a person takes part (`participation`): an approved registration that accepted the
  current terms. A competition with automatic approval and no terms registers a person the first
  time they act in it (`ensure_registration`), so that a task that was never set up as a
  competition behaves as it always did;
- which team a person is in there (`team_of`): their membership in that competition, else their
  membership of every competition.

Nothing here knows of Flask; the callers translate the answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session, select

from server import models  # other subjects' tables: models.X, loaded when first used
from server.db import row_locked, savepoint
from server.domain.emails import BadEmail, domain_of, normalize_domain
from server.models import User, utcnow

OWNER, ORGANIZER, ASSESSOR = "owner", "organizer", "assessor"
ROLES = (OWNER, ORGANIZER, ASSESSOR)
ORGANIZING = frozenset({OWNER, ORGANIZER})
# registration statuses; only "approved" takes part
PENDING, APPROVED, REJECTED, SUSPENDED, BANNED = (
    "pending",
    "approved",
    "rejected",
    "suspended",
    "banned",
)
STATUSES = (PENDING, APPROVED, REJECTED, SUSPENDED, BANNED)


def is_admin(user: User | None) -> bool:
    """A site administrator (the global flag)."""
    return user is not None and bool(user.is_admin)


def competition_of_task(s: Session, task_id: str) -> models.Competition | None:
    """The competition the task is a subtask of, or None. Read once per transaction of the
    session (an upload asks five times) and again after any flush of it."""
    memo = s.info.setdefault(_LINKS, {})
    if task_id not in memo:
        # the link and its competition in one read, the competition held with the link: the
        # session's identity map holds it weakly, and one let go between two asks was read
        # again each time (four times an upload)
        C, CT = models.Competition, models.CompetitionTask
        memo[task_id] = s.exec(
            select(C).join(CT, CT.competition_id == C.id).where(CT.task_id == task_id)
        ).first()
    return memo[task_id]


_LINKS = "palimpsest.task_competition"
_ROLES = "palimpsest.competition_roles"


@event.listens_for(OrmSession, "after_flush")
@event.listens_for(OrmSession, "after_transaction_end")
def _forget_links(session, *_args) -> None:
    session.info.pop(_LINKS, None)
    session.info.pop(_ROLES, None)


def ensure_competition(s: Session, task_id: str) -> models.Competition:
    """The task's competition; a task without one gets its own (short id and title the task's,
    visible, public data, automatic approval, no terms): how a task set up by phases alone, or
    imported on a fresh installation, keeps behaving as before competitions. Flushes."""
    c = competition_of_task(s, task_id)
    if c is not None:
        return c
    slug, n = task_id, 1
    while (
        s.exec(select(models.Competition).where(models.Competition.slug == slug)).first()
        is not None
    ):
        n += 1
        slug = f"{task_id}-{n}"
    c = models.Competition(
        slug=slug, title=task_id, state="visible", data_public=True, placeholder=True
    )
    try:  # another request linked the task first: use that one (this one's rows go)
        with savepoint(s):
            s.add(c)
            s.flush()
            s.add(models.CompetitionTask(competition_id=c.id, task_id=task_id, position=0))
    except IntegrityError:
        return competition_of_task(s, task_id)
    return c


def task_ids(s: Session, competition_id: int) -> list[str]:
    q = select(models.CompetitionTask.task_id).where(
        models.CompetitionTask.competition_id == competition_id
    )
    return list(s.exec(q.order_by(models.CompetitionTask.position, models.CompetitionTask.id)))


def role_of(s: Session, user: User | None, competition_id: int | None) -> str | None:
    """The person's role in the competition (owner, organizer, assessor), or None. Read once per
    transaction of the session (an upload asks twice: may they take part, are they exempt from
    the limits) and again after any flush of it."""
    if user is None or user.id is None or competition_id is None:
        return None
    memo = s.info.setdefault(_ROLES, {})
    key = (competition_id, user.id)
    if key not in memo:
        r = s.exec(
            select(models.CompetitionRole).where(
                models.CompetitionRole.competition_id == competition_id,
                models.CompetitionRole.user_id == user.id,
            )
        ).first()
        memo[key] = None if r is None else r.role
    return memo[key]


def organizes(s: Session, user: User | None, competition_id: int | None) -> bool:
    """Whether the person may act as an organizer of the competition."""
    if is_admin(user):
        return True
    return role_of(s, user, competition_id) in ORGANIZING


def organizes_task(s: Session, user: User | None, task_id: str) -> bool:
    """Whether the person organizes the competition of the task (administrators: every task; a
    task in no competition: administrators only)."""
    if is_admin(user):
        return True
    c = competition_of_task(s, task_id)
    return c is not None and organizes(s, user, c.id)


def has_role(s: Session, user: User | None, competition_id: int | None, *roles: str) -> bool:
    return is_admin(user) or role_of(s, user, competition_id) in roles


def organized_competitions(s: Session, user: User | None) -> set[int] | None:
    """The ids of the competitions the person organizes; None for an administrator (every one)."""
    if is_admin(user):
        return None
    if user is None or user.id is None:
        return set()
    q = select(models.CompetitionRole.competition_id).where(
        models.CompetitionRole.user_id == user.id,
        models.CompetitionRole.role.in_(tuple(ORGANIZING)),
    )
    return set(s.exec(q))


def organizes_anything(s: Session, user: User | None) -> bool:
    got = organized_competitions(s, user)
    return got is None or bool(got)


def organized_tasks(s: Session, user: User | None) -> set[str] | None:
    """The tasks the person organizes; None for an administrator (every task)."""
    cids = organized_competitions(s, user)
    if cids is None:
        return None
    if not cids:
        return set()
    q = select(models.CompetitionTask.task_id).where(
        models.CompetitionTask.competition_id.in_(tuple(cids))
    )
    return set(s.exec(q))


def grant(
    s: Session, competition_id: int, user: User, role: str, *, by: User | None = None
) -> models.CompetitionRole:
    """Give the person a role in the competition (replacing the one they had); flushes."""
    if role not in ROLES:
        raise ValueError(f"{role!r}: one of {', '.join(ROLES)}")
    r = s.exec(
        select(models.CompetitionRole).where(
            models.CompetitionRole.competition_id == competition_id,
            models.CompetitionRole.user_id == user.id,
        )
    ).first()
    if r is None:
        r = models.CompetitionRole(competition_id=competition_id, user_id=user.id, role=role)
    r.role = role
    r.granted_by = None if by is None else by.id
    s.add(r)
    s.flush()
    return r


# --- registration -------------------------------------------------------------------------------


def registration(s: Session, user: User | None, competition_id: int) -> models.Registration | None:
    if user is None or user.id is None:
        return None
    return s.exec(
        select(models.Registration).where(
            models.Registration.competition_id == competition_id,
            models.Registration.user_id == user.id,
        )
    ).first()


def registers_implicitly(c: models.Competition) -> bool:
    """A competition with automatic approval, no terms and no allow-list registers a person the
    first time they act in it."""
    return c.approval == "auto" and c.terms_version == 0 and not c.allowed_domains


def domain_allowed(c: models.Competition, email: str) -> bool:
    """Whether the address is at one of the competition's allowed domains (or a subdomain of
    one); both in their one form (`server.domain.emails`): an address with an empty label is at
    none."""
    if not c.allowed_domains:
        return True
    host = domain_of(email)
    if host is None:
        return False
    domains = []
    for d in c.allowed_domains:
        try:
            domains.append(normalize_domain(d))
        except BadEmail:
            continue  # an entry no address is at
    return any(host == d or host.endswith("." + d) for d in domains)


def ensure_registration(
    s: Session, user: User, c: models.Competition
) -> models.Registration | None:
    """The person's registration; one is made (approved) when the competition registers
    implicitly. Flushes."""
    reg = registration(s, user, c.id)
    if reg is None and registers_implicitly(c):
        now = utcnow()
        reg = models.Registration(
            competition_id=c.id,
            user_id=user.id,
            status=APPROVED,
            terms_version=0,
            decided_at=now,
            reason="automatic: the competition has no terms",
        )
        try:  # another request registered the person first: theirs stands
            with savepoint(s):
                s.add(reg)
        except IntegrityError:
            reg = registration(s, user, c.id)
    return reg


@dataclass(frozen=True)
class Participation:
    """Whether a person takes part in a competition, and if not, why (a code and a sentence)."""

    ok: bool
    code: str = ""
    message: str = ""


def participation(s: Session, user: User | None, c: models.Competition) -> Participation:
    """Whether the person may download and submit in the competition: organizers always; else an
    approved registration that accepted the current terms."""
    if user is None:
        return Participation(False, "not_signed_in", "sign in and register for the competition")
    if organizes(s, user, c.id):
        return Participation(True)
    reg = ensure_registration(s, user, c)
    if reg is None:
        return Participation(
            False,
            "not_registered",
            f"register for competition {c.slug!r} first: accept its terms on its page or run "
            f"`palimpsest register {c.slug} --accept-terms`",
        )
    if reg.status == PENDING:
        return Participation(
            False,
            "registration_pending",
            f"your registration for {c.slug!r} waits for the organizers' approval",
        )
    if reg.status != APPROVED:
        return Participation(
            False,
            f"registration_{reg.status}",
            f"your registration for {c.slug!r} is {reg.status}"
            + (f": {reg.reason}" if reg.reason else ""),
        )
    if reg.terms_version < c.terms_version:
        return Participation(
            False,
            "terms_changed",
            f"the terms of {c.slug!r} changed (version {c.terms_version}); accept them again "
            f"on its page or with `palimpsest register {c.slug} --accept-terms`",
        )
    return Participation(True)


def excluded_users(s: Session, competition_id: int) -> set[int]:
    """The people whose runs leave the competition's live boards: banned ones."""
    q = select(models.Registration.user_id).where(
        models.Registration.competition_id == competition_id, models.Registration.status == BANNED
    )
    return set(s.exec(q))


# --- teams --------------------------------------------------------------------------------------


def membership(
    s: Session, user: User | None, competition_id: int | None
) -> models.TeamMember | None:
    """The person's membership for the competition: their own there, else the one of every
    competition (`competition_id` None asks for that one only)."""
    if user is None or user.id is None:
        return None
    rows = s.exec(
        select(models.TeamMember).where(
            models.TeamMember.user_id == user.id,
            (models.TeamMember.competition_id == competition_id)
            if competition_id is not None
            else models.TeamMember.competition_id.is_(None),
        )
    ).all()
    if rows:
        return rows[0]
    if competition_id is None:
        return None
    return s.exec(
        select(models.TeamMember).where(
            models.TeamMember.user_id == user.id, models.TeamMember.competition_id.is_(None)
        )
    ).first()


def team_of(
    s: Session, user: User | None, competition_id: int | None, *, lock: bool = False
) -> models.Team | None:
    """The team the person acts for in the competition (an active membership), or None: the
    membership `membership` finds (their own there first, else the one of every competition) and
    its team in one read (every upload asks). `lock`: on PostgreSQL the team's row locked by that
    read (`FOR UPDATE`, held until the transaction ends: the lock an upload takes before it counts
    the team's runs, `server.db.lock_row`, without a statement of its own)."""
    if user is None or user.id is None:
        return None
    TM, T = models.TeamMember, models.Team
    where = TM.competition_id.is_(None)
    if competition_id is not None:
        where = (TM.competition_id == competition_id) | where
    lock = lock and s.get_bind().dialect.name == "postgresql"
    q = (
        select(TM, T)
        # a membership names its team (a foreign key, never null): the inner join, which a lock
        # needs (the nullable side of an outer join cannot be locked), finds the same row
        .join(T, T.id == TM.team_id)
        .where(TM.user_id == user.id, where)
        # their own membership there before the one of every competition
        .order_by(TM.competition_id.is_(None), TM.id)
        .limit(1)
    )
    row = s.exec(q.with_for_update(of=T) if lock else q).first()
    if row is None or row[0].status != "active":
        return None
    if lock:
        row_locked(s, T, row[1].id)
    return row[1]


def team_id_for_task(s: Session, user: User | None, task_id: str) -> int | None:
    """The id of the person's team in the task's competition, or None."""
    if user is None:
        return None
    c = competition_of_task(s, task_id)
    t = team_of(s, user, None if c is None else c.id)
    return None if t is None else t.id


def team_members(s: Session, team: models.Team, *, status: str | None = "active") -> list[User]:
    q = (
        select(User)
        .join(models.TeamMember, models.TeamMember.user_id == User.id)
        .where(models.TeamMember.team_id == team.id)
    )
    if status is not None:
        q = q.where(models.TeamMember.status == status)
    return list(s.exec(q.order_by(User.id)).unique())


def team_ids_of(s: Session, user: User | None) -> list[int]:
    """Every team the person is an active member of, in any competition."""
    if user is None or user.id is None:
        return []
    q = select(models.TeamMember.team_id).where(
        models.TeamMember.user_id == user.id, models.TeamMember.status == "active"
    )
    return sorted(set(s.exec(q)))


def may_download(s: Session, user: User | None, task_id: str) -> Participation:
    """Whether the person may download the task's data: anyone when its competition's data is
    public (or the task is in none), else a participant (`participation`)."""
    c = competition_of_task(s, task_id)
    if c is None or c.data_public:
        return Participation(True)
    return participation(s, user, c)


def task_visible(s: Session, user: User | None, task_id: str) -> bool:
    """Whether the person may see the task at all: its competition is not a draft, or they have a
    role in it (or administer the site). A task in no competition is visible."""
    c = competition_of_task(s, task_id)
    if c is None or c.state != "draft":
        return True
    return is_admin(user) or role_of(s, user, c.id) is not None
