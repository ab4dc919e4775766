"""Team actions: create a team, join one by its invite code, leave it, give it a new invite code,
approve or turn away a member who asked to join. Each is one transaction over the rules of
`server.domain.teams` (caps, captains, bans, one team per person and competition); a refusal
(`TeamRefused`) leaves nothing behind. The web's team page and the API call these."""

from __future__ import annotations

from sqlmodel import Session

from server.actions.common import action
from server.domain import teams
from server.models import Competition, Team, User


@action
def create_team(*, s: Session, user: User, name: str, competition: Competition | None) -> Team:
    """A new team with `user` as its captain."""
    return teams.create_team(s, user, name, competition)


@action
def join_team(*, s: Session, user: User, invite_code: str, competition: Competition | None) -> Team:
    """Join the team whose invite code this is (pending where its captain approves members)."""
    return teams.join_team(s, user, invite_code, competition)


@action
def leave_team(*, s: Session, user: User, competition: Competition | None) -> int:
    """Leave one's team; its submissions stay with it. Returns the team's id."""
    return teams.leave_team(s, user, competition)


@action
def rotate_invite(*, s: Session, user: User, competition: Competition | None) -> Team:
    """A new invite code for the captain's team; the old one stops working."""
    return teams.rotate_invite(s, user, competition)


@action
def decide_member(
    *, s: Session, captain: User, competition: Competition, user_id: int, approve: bool
):
    """The captain approves or turns away a member who asked to join."""
    return teams.decide_member(s, captain, competition, user_id, approve=approve)
