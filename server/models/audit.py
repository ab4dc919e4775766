"""The audit log: one row per organizer action or state change."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
import server.models.competitions  # noqa: F401
from server.models.base import TableModel, utcnow


class AuditLog(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    actor_id: Optional[int] = Field(default=None, foreign_key="user.id")
    action: str = Field(max_length=64, index=True)
    target: str = Field(default="", max_length=200)
    details: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    # the competition the change belongs to, so that its organizers read its log (None: site-wide)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)
