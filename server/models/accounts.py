"""People's accounts: a user, their API tokens, and the sign-in throttle's counters."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlmodel import Field

from server.models.base import TableModel, utcnow


class User(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    email: str = Field(index=True, unique=True, max_length=320)
    password_hash: str
    # a site administrator: creates competitions and acts in every one (the organizers of a
    # competition are its roles, `CompetitionRole`)
    is_admin: bool = False
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    # signed into every session cookie; raising it ends every earlier session (sign-out, password
    # change)
    session_epoch: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class ApiToken(TableModel, table=True):
    """An API token: shown once, stored as its sha256, revocable."""

    id: Optional[int] = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_sha256: str = Field(index=True, unique=True, max_length=64)
    prefix: str = Field(max_length=16)
    name: str = Field(default="", max_length=120)
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    last_used_at: Optional[NaiveDatetime] = None
    revoked_at: Optional[NaiveDatetime] = None


class ThrottleCount(TableModel, table=True):
    """A fixed-window counter of the sign-in throttle, kept in the database while its Redis is away
    (server.web.throttle): one row per limit, key and window, shared by every process."""

    key: str = Field(primary_key=True, max_length=255)
    count: int = 0
    expires_at: NaiveDatetime = Field(index=True)
