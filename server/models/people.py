"""The people of a competition: its organizers' roles and invitations, the participants'
registrations, teams and their members."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
import server.models.competitions  # noqa: F401
from server.models.base import TableModel, utcnow


class CompetitionRole(TableModel, table=True):
    """A person's role in a competition: "owner", "organizer" or "assessor"."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    role: str = Field(max_length=16)
    granted_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    # an owner's or organizer's hourly digest of registrations waiting for a decision (opt-out)
    mail_pending: bool = True


class CompetitionInvite(TableModel, table=True):
    """An invitation by email to a role in a competition; accepted through a signed link."""

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    email: str = Field(max_length=320, index=True)
    role: str = Field(max_length=16)
    invited_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    accepted_at: Optional[NaiveDatetime] = None
    accepted_by: Optional[int] = Field(default=None, foreign_key="user.id")
    revoked_at: Optional[NaiveDatetime] = None


class Registration(TableModel, table=True):
    """A participant's registration for a competition: the terms accepted (their version and
    when) and the organizers' decision."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    # "pending" | "approved" | "rejected" | "suspended" | "banned"
    status: str = Field(default="pending", max_length=16, index=True)
    terms_version: int = 0
    terms_accepted_at: Optional[NaiveDatetime] = None
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    decided_at: Optional[NaiveDatetime] = None
    decided_by: Optional[int] = Field(default=None, foreign_key="user.id")
    reason: str = Field(default="", max_length=500)
    # mail: announcements (opt-out) and a notice when a run is scored or fails (opt-in)
    mail_announcements: bool = True
    mail_runs: bool = False


class Team(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=120)
    invite_code: str = Field(index=True, unique=True, max_length=64)
    is_baseline: bool = False
    # the competition the team was made in; None for a team of every competition (made before
    # teams were per competition, or through the account-wide team routes)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class TeamMember(TableModel, table=True):
    """A person in a team for one competition, or for every competition (`competition_id` None)
    where they have no membership of their own. One membership per person per competition (and one
    for every competition), checked in `server.domain.teams`."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    team_id: int = Field(foreign_key="team.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    role: str = Field(default="member", max_length=16)  # "captain" | "member"
    status: str = Field(default="active", max_length=16)  # "active" | "pending" (captain's yes)
    created_at: NaiveDatetime = Field(default_factory=utcnow)
