"""Teams: create one, join one by its invite code, leave it, rotate its code, and (for a
competition whose organizers ask for it) let its captain approve who joins. The web pages
(`server/web/teams.py`), the API (`server/api/`) and the CLI call these, so all of them refuse
the same things with the same words and the same status (server.statuses).

A team is made in one competition (`competition`: its `Competition` row), or for every competition
(`competition` None: the account-wide team, as before teams were per competition). A person has
at most one membership per competition and one for every competition; in a competition their own
membership there counts, else the one for every competition (`server.domain.people.membership`). A
competition's size cap and captain's approval apply to its own teams.
"""

from __future__ import annotations

import hmac

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.db import lock_row
from server.domain import names, people
from server.domain.accounts import audit, new_invite_code
from server.domain.baselines import reads_as_baselines
from server.domain.bounds import one_line_problem
from server.exceptions import TeamRefused
from server.models import Competition, Team, TeamMember, User

MAX_NAME = 120


def clean_name(name: str) -> str:
    """A team name as it is kept: NFKC, white space collapsed (`names.normalise`)."""
    return names.normalise(name)


def _check_reads_unlike_others(s: Session, name: str) -> None:
    """Refuse a name that reads as another team's (the same `names.skeleton`): team names are
    unique site-wide, the look-alikes included."""
    want = names.skeleton(name)
    taken = s.exec(select(Team.name)).all()
    if any(names.skeleton(other) == want for other in taken):
        raise TeamRefused("That team name is taken (or one that reads the same).", "name_taken")


def _cid(c: Competition | None) -> int | None:
    return None if c is None else c.id


def _where(c: Competition | None) -> str:
    return "" if c is None else f" in {c.slug}"


def _own(s: Session, user: User, c: Competition | None) -> TeamMember | None:
    """The person's membership made for exactly this scope (not the fallback)."""
    q = select(TeamMember).where(TeamMember.user_id == user.id)
    q = q.where(TeamMember.competition_id == c.id if c else TeamMember.competition_id.is_(None))
    return s.exec(q).first()


def _check_can_join(s: Session, user: User, c: Competition | None) -> None:
    if _own(s, user, c) is not None:
        raise TeamRefused(f"You are in a team{_where(c)} already; leave it first.", "in_a_team")
    if c is not None:
        p = people.participation(s, user, c)
        if not p.ok:
            raise TeamRefused(p.message, p.code, 403)


def _require_taking_part(s: Session, user: User, c: Competition | None) -> None:
    """A person who does not take part in the competition (banned, suspended, rejected, pending)
    acts for no team there: approves nobody, hands out no invite code."""
    if c is None:
        return
    p = people.participation(s, user, c)
    if not p.ok:
        raise TeamRefused(p.message, p.code, 403)


def hand_over_captaincy(s: Session, team_id: int, competition: Competition | None) -> User | None:
    """Make the longest-standing active member who is not banned, suspended or rejected in the
    competition the team's captain (the caller removed or barred the one before); flushes; the new
    captain, or None (nobody left)."""
    rows = s.exec(
        select(TeamMember)
        .where(TeamMember.team_id == team_id, TeamMember.status == "active")
        .order_by(TeamMember.id)
    ).all()
    barred = (people.BANNED, people.SUSPENDED, people.REJECTED)
    chosen = None
    for m in rows:
        reg = (
            None
            if competition is None
            else people.registration(s, s.get(User, m.user_id), competition.id)
        )
        if chosen is None and (reg is None or reg.status not in barred):
            chosen = m
        elif m.role == "captain":
            m.role = "member"
            s.add(m)
    if chosen is not None:
        chosen.role = "captain"
        s.add(chosen)
    s.flush()
    return None if chosen is None else s.get(User, chosen.user_id)


def create_team(s: Session, user: User, name: str, competition: Competition | None = None) -> Team:
    """A new team with the user as its captain."""
    _check_can_join(s, user, competition)
    problem = one_line_problem(name)
    if problem:
        raise TeamRefused(f"name: {problem}.", "bad_name", 422)
    hidden = names.invisible(name)
    if hidden is not None:
        raise TeamRefused(
            f"name: an invisible or direction-changing character (U+{ord(hidden):04X}) is not "
            "allowed in a team name.",
            "bad_name",
            422,
        )
    name = clean_name(name)
    if not name or len(name) > MAX_NAME:
        raise TeamRefused(f"A team name has 1 to {MAX_NAME} characters.", "bad_name", 422)
    if reads_as_baselines(name):
        raise TeamRefused(
            "That name is reserved for the organizers' baselines; choose another.",
            "reserved_name",
            422,
        )
    _check_reads_unlike_others(s, name)
    team = Team(name=name, invite_code=new_invite_code(), competition_id=_cid(competition))
    s.add(team)
    try:
        s.flush()
    except IntegrityError:  # the caller's transaction rolls back with the refusal
        raise TeamRefused("That team name is taken.", "name_taken") from None
    s.add(
        TeamMember(
            competition_id=_cid(competition), team_id=team.id, user_id=user.id, role="captain"
        )
    )
    audit(s, user, "team.create", f"team:{team.id}", competition_id=_cid(competition))
    s.flush()
    return team


def join_team(
    s: Session, user: User, invite_code: str, competition: Competition | None = None
) -> Team:
    """Join the team whose invite code this is; in a competition that asks for it the membership
    waits for the captain's approval. The team's row is locked before its members are counted, so
    parallel joins never pass its size cap."""
    code = (invite_code or "").strip()
    team = s.exec(select(Team).where(Team.invite_code == code)).first() if code else None
    if (
        team is None
        or not hmac.compare_digest(team.invite_code, code)
        or team.is_baseline
        or team.competition_id != _cid(competition)
    ):
        raise TeamRefused(
            f"No team{_where(competition)} has that invite code.", "bad_invite_code", 404
        )
    lock_row(s, Team, team.id)
    _check_can_join(s, user, competition)
    status = "active"
    if competition is not None:
        cap = competition.team_size_cap
        if cap is not None and len(people.team_members(s, team, status=None)) >= cap:
            raise TeamRefused(
                f"{team.name} has {cap} members, the most {competition.slug} allows.", "team_full"
            )
        if competition.join_needs_captain:
            status = "pending"
    s.add(
        TeamMember(
            competition_id=_cid(competition), team_id=team.id, user_id=user.id, status=status
        )
    )
    audit(s, user, "team.join", f"team:{team.id}", competition_id=_cid(competition), status=status)
    try:
        s.flush()
    except IntegrityError:  # the same person joined another team at the same moment
        raise TeamRefused(
            f"You are in a team{_where(competition)} already; leave it first.", "in_a_team"
        ) from None
    return team


def _membership(s: Session, user: User, c: Competition | None) -> TeamMember:
    m = _own(s, user, c)
    if m is None:
        raise TeamRefused(f"You are not in a team{_where(c)}.", "no_team")
    return m


def leave_team(s: Session, user: User, competition: Competition | None = None) -> int:
    """Leave the team (its submissions stay with it); returns the team's id. A captain
    who leaves hands the captaincy to the longest-standing active member."""
    m = _membership(s, user, competition)
    tid = m.team_id
    lock_row(s, Team, tid)
    s.expire_all()  # read again under the lock
    m = _membership(s, user, competition)
    tid = m.team_id
    s.delete(m)
    s.flush()
    if m.role == "captain":
        team = s.get(Team, tid)
        hand_over_captaincy(s, tid, competition or _team_competition(s, team))
    audit(s, user, "team.leave", f"team:{tid}", competition_id=_cid(competition))
    s.flush()
    return tid


def rotate_invite(s: Session, user: User, competition: Competition | None = None) -> Team:
    """A new invite code replaces the old one (a member who takes part in the competition);
    commits."""
    m = _membership(s, user, competition)
    _require_taking_part(s, user, competition)
    team = s.get(Team, m.team_id)
    team.invite_code = new_invite_code()
    s.add(team)
    audit(s, user, "team.invite_rotate", f"team:{team.id}", competition_id=_cid(competition))
    s.flush()
    return team


def decide_member(
    s: Session, captain: User, competition: Competition, member_id: int, *, approve: bool
) -> TeamMember | None:
    """The captain approves (or turns away) a pending member of their team; the team's row is
    locked before its members are counted (parallel approvals never pass the cap)."""
    mine = _membership(s, captain, competition)
    lock_row(s, Team, mine.team_id)
    s.expire_all()  # read again under the lock
    mine = _membership(s, captain, competition)
    if mine.role != "captain" or mine.status != "active":
        raise TeamRefused("Only the team's captain approves members.", "not_captain", 403)
    _require_taking_part(s, captain, competition)  # a banned captain approves nobody
    m = s.exec(
        select(TeamMember).where(
            TeamMember.team_id == mine.team_id,
            TeamMember.user_id == member_id,
            TeamMember.competition_id == competition.id,
        )
    ).first()
    if m is None or m.status != "pending":
        raise TeamRefused("Nobody with that id waits to join your team.", "no_such_member", 404)
    if approve:
        p = people.participation(s, s.get(User, member_id), competition)
        if not p.ok:
            raise TeamRefused(
                f"That person cannot take part in {competition.slug} ({p.code}).",
                "member_not_participating",
            )
        cap = competition.team_size_cap
        active = len(people.team_members(s, s.get(Team, mine.team_id)))
        if cap is not None and active >= cap:
            raise TeamRefused(f"The team has {cap} members, the most allowed.", "team_full")
        m.status = "active"
        s.add(m)
    else:
        s.delete(m)
    audit(
        s,
        captain,
        "team.approve" if approve else "team.turn_away",
        f"team:{mine.team_id}",
        competition_id=competition.id,
        member=member_id,
    )
    s.flush()
    return m if approve else None


def _team_competition(s: Session, team: Team | None) -> Competition | None:
    if team is None or team.competition_id is None:
        return None
    return s.get(Competition, team.competition_id)


def team_for(s: Session, user: User, competition: Competition | None = None) -> Team | None:
    """The team the person acts for in the competition (or their account-wide team)."""
    return people.team_of(s, user, _cid(competition))


def members(s: Session, team: Team) -> list[User]:
    return people.team_members(s, team)
