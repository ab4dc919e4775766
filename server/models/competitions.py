"""Competitions: what each one is, its tasks, its pages and its announcements."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
from server.models.base import TableModel, utcnow


class Competition(TableModel, table=True):
    """A shared task as its organizers run it: a short id, a title, a state and its pages.

    Its tasks (subtasks) are linked by `CompetitionTask`; the phases, teams and submissions stay
    keyed by task as before, so a competition adds to them without changing a row of theirs.
    """

    id: Optional[int] = Field(default=None, primary_key=True)
    slug: str = Field(index=True, unique=True, max_length=64)
    title: str = Field(max_length=200)
    state: str = Field(default="draft", max_length=16)  # "draft" | "visible" | "archived"
    # registration: "auto" approves at once, "manual" waits for an organizer; an allow-list of
    # email domains (empty: any); the data (inputs and labelled splits) downloadable without an
    # approved registration when public
    approval: str = Field(default="auto", max_length=16)
    allowed_domains: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    data_public: bool = False
    # the version of the terms page: raised whenever its text changes; a registration that
    # accepted an older version is asked again (0: the competition has no terms)
    terms_version: int = 0
    # teams: at most this many members (None: no cap); joining waits for the captain's yes
    team_size_cap: Optional[int] = None
    join_needs_captain: bool = False
    # team and method names hidden on public boards until the ranking is published
    anonymous_board: bool = False
    # the fact sheet a submission carries: [{key, label, kind, choices, required, help}]
    fact_fields: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # made for a task that was in no competition (`server.domain.people.ensure_competition`): a
    # competition created with that task takes it over, and this one is archived
    placeholder: bool = False
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class CompetitionTask(TableModel, table=True):
    """A task (subtask) of a competition; a task belongs to one competition at most."""

    __table_args__ = (UniqueConstraint("task_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    task_id: str = Field(max_length=64)
    position: int = 0


class CompetitionPage(TableModel, table=True):
    """A page of a competition (overview, data, evaluation, terms, timeline, ...), in Markdown."""

    __table_args__ = (UniqueConstraint("competition_id", "slug"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    slug: str = Field(max_length=64)
    title: str = Field(max_length=200)
    body_markdown: str = Field(default="", sa_column=Column(Text, nullable=False))
    # the Markdown rendered and sanitized when the page is saved (server.domain.sanitize), so that a
    # visit never renders
    body_html: str = Field(default="", sa_column=Column(Text, nullable=False))
    position: int = 0
    updated_at: NaiveDatetime = Field(default_factory=utcnow)


class Announcement(TableModel, table=True):
    """An organizers' announcement, shown on the competition page and mailed to its participants."""

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    title: str = Field(max_length=200)
    body_markdown: str = Field(default="", sa_column=Column(Text, nullable=False))
    body_html: str = Field(default="", sa_column=Column(Text, nullable=False))
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)
    recipients: int = 0
