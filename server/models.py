"""The database: the record of truth for users, teams, phases, submissions and scores.

Nothing is deleted for real: rows are hidden or marked removed, and organizer actions are logged.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


# Naive UTC throughout (sqlmodel >= 0.0.50 maps a bare `datetime` to an aware UTC type).
def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class User(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    email: str = Field(index=True, unique=True, max_length=320)
    password_hash: str
    is_organizer: bool = False
    team_id: Optional[int] = Field(default=None, foreign_key="team.id", index=True)
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    # signed into every session cookie; raising it ends every earlier session (sign-out, password
    # change)
    session_epoch: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class Team(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=120)
    invite_code: str = Field(index=True, unique=True, max_length=64)
    is_baseline: bool = False
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class ApiToken(SQLModel, table=True):
    """An API token: shown once, stored as its sha256, revocable."""

    id: Optional[int] = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_sha256: str = Field(index=True, unique=True, max_length=64)
    prefix: str = Field(max_length=16)
    name: str = Field(default="", max_length=120)
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    last_used_at: Optional[NaiveDatetime] = None
    revoked_at: Optional[NaiveDatetime] = None


class Phase(SQLModel, table=True):
    """A phase of a task (dev, test): its window, limits and the public/private gold split."""

    __table_args__ = (UniqueConstraint("task_id", "name"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=32)
    split: str = Field(max_length=16)
    opens_at: Optional[NaiveDatetime] = None
    closes_at: Optional[NaiveDatetime] = None
    daily_limit: Optional[int] = 5
    total_limit: Optional[int] = 100
    concurrent_limit: Optional[int] = 2
    public_fraction: float = 1.0
    # the gold partition the phase scores with (server.lifecycle.partition_for): the one shared by
    # every phase on the task's split, or a phase's own from before partitions were shared
    partition_id: Optional[int] = Field(default=None, foreign_key="goldpartition.id")
    partition_seed: Optional[int] = None  # legacy: a phase's own seed, kept for its own partition
    # the seed of the board's bootstrap resamples when the phase has no partition (drawn once)
    stats_seed: Optional[int] = None
    frozen: bool = False
    published_at: Optional[NaiveDatetime] = None
    # the web side: a closed leaderboard is shown to organizers only; a frozen one shows the
    # scores as they were at frozen_at; revision changes with every change of visibility,
    # so that a rendered leaderboard is reused until then
    leaderboard_open: bool = True
    frozen_at: Optional[NaiveDatetime] = None
    revision: int = 0


class Submission(SQLModel, table=True):
    """A prediction file and its fate: queued, running, scored or failed (with every message)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", index=True)
    user_id: Optional[int] = Field(default=None, foreign_key="user.id", index=True)
    task_id: str = Field(index=True, max_length=64)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    status: str = Field(default="queued", index=True, max_length=16)
    failure_kind: Optional[str] = Field(default=None, max_length=16)  # "invalid" | "infra"
    errors: Optional[list] = Field(default=None, sa_column=Column(JSON))
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)
    started_at: Optional[NaiveDatetime] = None
    finished_at: Optional[NaiveDatetime] = None
    attempts: int = 0
    # attempts may run up to this number; a rescore starts a new round of max_attempts
    attempt_ceiling: Optional[int] = None
    file_sha256: str = Field(index=True, max_length=64)
    file_name: str = Field(default="", max_length=255)  # the client's name, for display only
    storage_key: str = Field(default="", max_length=120)  # where server.storage keeps the file
    score_attempt: Optional[int] = None  # the attempt whose Score rows count (set when scored)
    size: int = 0
    method_name: str = Field(default="", max_length=200)
    description: str = Field(default="", sa_column=Column(Text))
    url: str = Field(default="", max_length=500)
    show_publicly: bool = True
    is_primary: bool = False
    is_baseline: bool = False
    hidden: bool = False
    hidden_reason: str = Field(default="", max_length=500)
    removed_at: Optional[NaiveDatetime] = None
    # the counted scores were computed against another gold, task or scorer version than the
    # current one: not ranked, queued for rescoring (server.provenance.check_provenance)
    stale: bool = False
    # the file of an invalid submission is deleted after the retention period (settings)
    file_purged_at: Optional[NaiveDatetime] = None


class Score(SQLModel, table=True):
    """One scoring of one submission, per attempt and gold part; written idempotently."""

    __table_args__ = (UniqueConstraint("submission_id", "attempt", "part"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    submission_id: int = Field(foreign_key="submission.id", index=True)
    attempt: int
    part: str = Field(max_length=16)  # "public", "private" or "all"
    result: dict = Field(sa_column=Column(JSON))
    primary_value: Optional[float] = None
    task_version: int
    gold_sha256: str = Field(max_length=64)
    scorer_version: str = Field(max_length=32)
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class AuditLog(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    actor_id: Optional[int] = Field(default=None, foreign_key="user.id")
    action: str = Field(max_length=64, index=True)
    target: str = Field(default="", max_length=200)
    details: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)


class GoldPartition(SQLModel, table=True):
    """A public/private partition of a split's gold, drawn once from a recorded seed.

    `key` is "<task>/<split>" for the partition every phase on that split shares, or
    "phase:<id>" for a phase's own partition kept from before partitions were shared
    (method "legacy": unstratified, from the phase's seed).
    """

    id: Optional[int] = Field(default=None, primary_key=True)
    key: str = Field(index=True, unique=True, max_length=120)
    task_id: str = Field(max_length=64)
    split: str = Field(max_length=16)
    seed: int
    public_fraction: float
    method: str = Field(default="stratified", max_length=16)  # "stratified" or "legacy"
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class RankingVersion(SQLModel, table=True):
    """A published final ranking: an immutable snapshot, served byte for byte.

    Version 1 is the publication; every later version is a correction with a reason. Rows are
    never updated or deleted (the lifecycle module only inserts them).
    """

    __table_args__ = (UniqueConstraint("phase_id", "version"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    task_id: str = Field(max_length=64)
    phase_name: str = Field(max_length=32)
    version: int
    reason: str = Field(default="", sa_column=Column(Text))
    published_by: Optional[int] = Field(default=None, foreign_key="user.id")
    published_at: NaiveDatetime = Field(default_factory=utcnow)
    sha256: str = Field(max_length=64)  # of body_json
    body_json: str = Field(sa_column=Column(Text, nullable=False))
    body_csv: str = Field(sa_column=Column(Text, nullable=False))
    body_latex: str = Field(sa_column=Column(Text, nullable=False))


class Competition(SQLModel, table=True):
    """A shared task as its organizers run it: a short id, a title, a state and its pages.

    Its tasks (subtasks) are linked by `CompetitionTask`; the phases, teams and submissions stay
    keyed by task as before, so a competition adds to them without changing a row of theirs.
    """

    id: Optional[int] = Field(default=None, primary_key=True)
    slug: str = Field(index=True, unique=True, max_length=64)
    title: str = Field(max_length=200)
    state: str = Field(default="draft", max_length=16)  # "draft" | "visible" | "archived"
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class CompetitionTask(SQLModel, table=True):
    """A task (subtask) of a competition; a task belongs to one competition at most."""

    __table_args__ = (UniqueConstraint("task_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    task_id: str = Field(max_length=64)
    position: int = 0


class CompetitionPage(SQLModel, table=True):
    """A page of a competition (overview, data, evaluation, terms, timeline, ...), in Markdown."""

    __table_args__ = (UniqueConstraint("competition_id", "slug"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    slug: str = Field(max_length=64)
    title: str = Field(max_length=200)
    body_markdown: str = Field(default="", sa_column=Column(Text, nullable=False))
    # the Markdown rendered and sanitized when the page is saved (server.sanitize), so that a
    # visit never renders
    body_html: str = Field(default="", sa_column=Column(Text, nullable=False))
    position: int = 0
    updated_at: NaiveDatetime = Field(default_factory=utcnow)
