"""Teams: create one, join one by its invite code, leave it, rotate its code. The web pages
(`server/views/teams.py`) and the API (`server/api.py`) call these, so both refuse the same things
with the same words and the same status (server.errors)."""

from __future__ import annotations

import hmac

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.auth import audit, new_invite_code
from server.baselines import reads_as_baselines
from server.exceptions import TeamRefused
from server.models import Team, User

MAX_NAME = 120


def clean_name(name: str) -> str:
    return " ".join((name or "").split())


def create_team(s: Session, user: User, name: str) -> Team:
    """A new team with the user as its first member; commits."""
    if user.team_id:
        raise TeamRefused("You are in a team already; leave it first.", "in_a_team")
    name = clean_name(name)
    if not name or len(name) > MAX_NAME:
        raise TeamRefused(f"A team name has 1 to {MAX_NAME} characters.", "bad_name", 422)

    if reads_as_baselines(name):
        raise TeamRefused(
            "That name is reserved for the organizers' baselines; choose another.",
            "reserved_name",
            422,
        )
    team = Team(name=name, invite_code=new_invite_code())
    s.add(team)
    try:
        s.flush()
    except IntegrityError:
        s.rollback()
        raise TeamRefused("That team name is taken.", "name_taken") from None
    user.team_id = team.id
    s.add(user)
    audit(s, user, "team.create", f"team:{team.id}")
    s.commit()
    return team


def join_team(s: Session, user: User, invite_code: str) -> Team:
    """Join the team whose invite code this is; commits."""
    if user.team_id:
        raise TeamRefused("You are in a team already; leave it first.", "in_a_team")
    code = (invite_code or "").strip()
    team = s.exec(select(Team).where(Team.invite_code == code)).first() if code else None
    if team is None or not hmac.compare_digest(team.invite_code, code) or team.is_baseline:
        raise TeamRefused("No team has that invite code.", "bad_invite_code", 404)
    user.team_id = team.id
    s.add(user)
    audit(s, user, "team.join", f"team:{team.id}")
    s.commit()
    return team


def leave_team(s: Session, user: User) -> int:
    """Leave the team (its submissions stay with it); commits; returns the team's id."""
    if not user.team_id:
        raise TeamRefused("You are not in a team.", "no_team")
    tid = user.team_id
    user.team_id = None
    s.add(user)
    audit(s, user, "team.leave", f"team:{tid}")
    s.commit()
    return tid


def rotate_invite(s: Session, user: User) -> Team:
    """A new invite code replaces the old one; commits."""
    team = s.get(Team, user.team_id) if user.team_id else None
    if team is None:
        raise TeamRefused("You are not in a team.", "no_team")
    team.invite_code = new_invite_code()
    s.add(team)
    audit(s, user, "team.invite_rotate", f"team:{team.id}")
    s.commit()
    return team


def members(s: Session, team: Team) -> list[User]:
    return list(s.exec(select(User).where(User.team_id == team.id).order_by(User.id)))
