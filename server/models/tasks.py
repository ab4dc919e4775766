"""The history of a bundle task: its declaration's versions, its archiving."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
from server.models.base import TableModel, utcnow


class TaskVersion(TableModel, table=True):
    """A version of a bundle task's declaration (`server.actions.tasks`): its metrics, primary,
    files or gold changed; every run scored under an earlier version is stale and rescored.
    The version a task was created with is recorded when a second one comes. `changes` says what
    changed; `effect` what the change did to each phase's live board (the ranks before, the runs
    marked stale and queued)."""

    __table_args__ = (UniqueConstraint("task_id", "version"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    version: int
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    changes: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    effect: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class TaskArchive(TableModel, table=True):
    """An archived task: its files and runs kept, its phases closed for good (no phase of it
    opens again, none is added)."""

    __table_args__ = (UniqueConstraint("task_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(max_length=64)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    archived_by: Optional[int] = Field(default=None, foreign_key="user.id")
    archived_at: NaiveDatetime = Field(default_factory=utcnow)
