"""What every table shares: its base class and the clock its rows are stamped with."""

# (no `from __future__ import annotations` here: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from datetime import datetime, timezone

from pydantic import ConfigDict
from sqlmodel import SQLModel


# Naive UTC throughout (sqlmodel >= 0.0.50 maps a bare `datetime` to an aware UTC type).
def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class TableModel(SQLModel):
    """The base of every table. Pydantic builds a table's validator and serializer when a row is
    first validated or dumped, not when the tables load: SQLModel makes and loads rows without
    them, so a local command (`palimpsest tokens create`) never builds the 29 schemas."""

    model_config = ConfigDict(defer_build=True)
