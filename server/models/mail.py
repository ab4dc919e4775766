"""The mail queue."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import Column, Text
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.competitions  # noqa: F401
from server.models.base import TableModel, utcnow


class OutgoingMail(TableModel, table=True):
    """A message waiting for the mail queue, or sent. `dedup_key` is unique, so that a message is
    queued once (an announcement to a person, a run's notice) and sent once."""

    id: Optional[int] = Field(default=None, primary_key=True)
    dedup_key: str = Field(index=True, unique=True, max_length=200)
    to_addr: str = Field(max_length=320)
    subject: str = Field(max_length=300)
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    kind: str = Field(default="", max_length=32)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    status: str = Field(default="queued", max_length=16, index=True)  # queued | sent | failed
    attempts: int = 0
    last_error: str = Field(default="", max_length=500)
    next_try_at: Optional[NaiveDatetime] = None
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    sent_at: Optional[NaiveDatetime] = None
    # the sender that claimed the row ("host|pid|start time", server.jobs.outbox.sender_id): a dead
    # one
    # on the same machine is recognised at once, its rows queued again
    claimed_by: str = Field(default="", max_length=200)
