"""Teams and their members."""

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
