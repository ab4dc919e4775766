"""The declared models' base classes, errors, pages and the small types every answer uses."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Generic, Optional, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
)

T = TypeVar("T")


class Model(BaseModel):
    # a model's validator and serializer are built when it is first used, not when its module
    # loads: a command uses a few of the hundred (`palimpsest competitions list` one)
    model_config = ConfigDict(extra="forbid", defer_build=True)


def _utc_iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


class Out(Model):
    """An answer: datetimes are written in UTC with a `Z`."""

    @field_serializer("*", when_used="json", check_fields=False)
    def _dt(self, v):
        if isinstance(v, datetime):
            return _utc_iso(v)
        return v


Stamp = Optional[datetime]


# ----------------------------------------------------------------------------- errors


class Problem(Model):
    line: Optional[int] = None
    id: Optional[str] = None
    message: str


class ErrorBody(Model):
    code: str = Field(
        description="A stable name of the failure, e.g. `phase_closed`, `limit_reached`."
    )
    message: str = Field(description="One line for a person: what went wrong and what to do.")
    problems: Optional[list[Problem]] = None
    total: Optional[int] = None
    next_allowed_at: Optional[str] = None
    limit: Optional[str] = None
    field: Optional[str] = Field(None, description="The input field a 400 or 404 is about.")


class Error(Model):
    """Every failure: the status comes from one table shared with the web pages
    (server.statuses)."""

    error: ErrorBody


# ----------------------------------------------------------------------------- pages


class Page(Out, Generic[T]):
    """A page of a list, newest first: follow `next` (or pass `cursor=next_cursor`) for the next
    one."""

    items: list[T]
    next_cursor: Optional[str] = Field(None, description="Opaque; null on the last page.")
    next: Optional[str] = Field(
        None, description="The URL of the next page; null on the last page."
    )


class PageQuery(Model):
    limit: int = Field(50, ge=1, le=500, description="Items per page (1 to 500).")
    cursor: Optional[str] = Field(None, description="`next_cursor` of the previous page.")
