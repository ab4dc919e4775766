"""Phases of a task, the gold partitions they score with, and the published rankings."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Any, Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
from server.models.base import TableModel, utcnow


class GoldPartition(TableModel, table=True):
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


class Phase(TableModel, table=True):
    """A phase of a task (dev, test): its window, limits and the public/private gold split."""

    __table_args__ = (UniqueConstraint("task_id", "name"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=32)
    split: str = Field(max_length=16)
    opens_at: Optional[NaiveDatetime] = None
    closes_at: Optional[NaiveDatetime] = None
    # when the inputs of the phase's split may be downloaded (server.domain.download_rule); None:
    # when it opens
    inputs_at: Optional[NaiveDatetime] = None
    daily_limit: Optional[int] = 5
    total_limit: Optional[int] = 100
    concurrent_limit: Optional[int] = 2
    public_fraction: float = 1.0
    # what the published ranking is computed on, for a phase with a private part: "private" (that
    # part), or "whole" (the whole split, as SemEval and most shared tasks publish; the whole
    # split's score is hidden like the private part's until publication)
    published_on: str = Field(default="private", max_length=16)
    # the gold partition the phase scores with (server.domain.lifecycle.partition_for): the one
    # shared by
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
    # what the phase takes: prediction files, participants' systems run on the server, or both;
    # a blind phase never serves its split's inputs (a system sees them only inside its run)
    accepts: str = Field(default="predictions", max_length=16)
    blind: bool = False
    # CPU seconds of system runs each team may use in the phase (None: no budget)
    compute_budget_seconds: Optional[int] = None
    # the boards beside the default one ("main"), as declared (tasks.bundle_models.BoardSpec as
    # JSON, in their order); None or []: the default board only
    boards: Optional[list] = Field(default=None, sa_column=Column(JSON))
    # what the live public board shows of each run's public score (scorer.release.Rule as JSON:
    # "ladder", {"rule": "ladder", "eta": 0.01}, ...); None: every score exactly
    release_rule: Optional[Any] = Field(default=None, sa_column=Column(JSON))


class RankingVersion(TableModel, table=True):
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


class BoardRanking(TableModel, table=True):
    """The published final ranking of one of a phase's declared boards, in the same publication
    (or correction) as the phase's `RankingVersion` (the default board's): immutable like it, and
    served byte for byte. The published ranking of a phase is that version's set of boards."""

    __table_args__ = (UniqueConstraint("ranking_id", "board"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    ranking_id: int = Field(foreign_key="rankingversion.id", index=True)
    board: str = Field(max_length=32)
    sha256: str = Field(max_length=64)  # of body_json
    body_json: str = Field(sa_column=Column(Text, nullable=False))
    body_csv: str = Field(sa_column=Column(Text, nullable=False))
    body_latex: str = Field(sa_column=Column(Text, nullable=False))
