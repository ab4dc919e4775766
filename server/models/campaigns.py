"""Assessment campaigns: the pool, its assignments, judgments and decisions, the agreement model's
fits, and the gold versions a closed campaign makes."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
import server.models.competitions  # noqa: F401
import server.models.phases  # noqa: F401
from server.models.base import TableModel, utcnow


class AssessmentCampaign(TableModel, table=True):
    """Experts judge the candidates that the ranked runs of a task's phase proposed
    (`server.actions.campaigns`): the pool, its assignment to assessors and their judgments."""

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    task_id: str = Field(index=True, max_length=64)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    state: str = Field(default="open", max_length=16)  # "open" | "closed"
    depth: int  # links: the top-k links per query of each run; pairs: items per stratum
    assessors_per_item: int = 3
    labels: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    guideline: str = Field(default="", sa_column=Column(Text, nullable=False))
    seed: int  # of the assignment and of each assessor's order (and of a pair task's sample)
    # the ranked runs (submission ids) the pool was drawn from
    runs: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # the labels that count as a link (links tasks): None = the first label
    positive: Optional[list] = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class CampaignItem(TableModel, table=True):
    """A pooled candidate: "query_id<TAB>source_id" for links, the instance id for pair tasks.
    `factors` (the proposing runs among them) are for the organizers' agreement by factor only;
    an assessor never sees them."""

    __table_args__ = (UniqueConstraint("campaign_id", "key"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    campaign_id: int = Field(foreign_key="assessmentcampaign.id", index=True)
    key: str = Field(max_length=500)
    factors: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    position: int = 0


class CampaignAssignment(TableModel, table=True):
    """An item given to an assessor, at a place in that assessor's own (shuffled) order."""

    __table_args__ = (UniqueConstraint("item_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    campaign_id: int = Field(foreign_key="assessmentcampaign.id", index=True)
    item_id: int = Field(foreign_key="campaignitem.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    position: int = 0


class Judgment(TableModel, table=True):
    """An assessor's label for an assigned item; judging again updates it (audited)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    assignment_id: int = Field(foreign_key="campaignassignment.id", unique=True)
    label: str = Field(max_length=64)
    comment: str = Field(default="", sa_column=Column(Text, nullable=False))
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    updated_at: NaiveDatetime = Field(default_factory=utcnow)


class CampaignDecision(TableModel, table=True):
    """What an item of a campaign is, as decided: "unanimous" (every assigned assessor gave the
    label), "majority" (a strict majority, applied by an organizer in one step) or "organizer"
    (an organizer's decision with a reason, which may overrule anything). Deciding again replaces
    the row (audited)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    campaign_id: int = Field(foreign_key="assessmentcampaign.id", index=True)
    item_id: int = Field(foreign_key="campaignitem.id", unique=True)
    label: str = Field(max_length=64)
    rule: str = Field(max_length=16)  # "unanimous" | "majority" | "organizer"
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    decided_by: Optional[int] = Field(default=None, foreign_key="user.id")
    decided_at: NaiveDatetime = Field(default_factory=utcnow)


class CampaignModelFit(TableModel, table=True):
    """An organizer's request for the Bayesian agreement model of a campaign
    (`server.actions.campaign_models`), fitted by a worker on the judgments stored when it ran:
    "queued" | "running" | "done" | "not_converged" | "failed". A fit that did not converge keeps
    its diagnostics and what failed, never its figures."""

    id: Optional[int] = Field(default=None, primary_key=True)
    campaign_id: int = Field(foreign_key="assessmentcampaign.id", index=True)
    state: str = Field(default="queued", max_length=16)
    seed: int
    # chains, warmup, samples
    settings: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    judgments: Optional[int] = None  # the stored judgments the fit read
    digest: Optional[str] = Field(default=None, max_length=64)  # sha256 of the table it fitted
    result: Optional[dict] = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str = Field(default="", sa_column=Column(Text, nullable=False))
    requested_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    started_at: Optional[NaiveDatetime] = None
    finished_at: Optional[NaiveDatetime] = None


class GoldVersion(TableModel, table=True):
    """A version of a split's gold (`server.actions.campaigns.close_campaign`): version 1 is the
    imported gold (recorded when a first campaign closes); each later one extends its parent."""

    __table_args__ = (UniqueConstraint("task_id", "split", "version"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    split: str = Field(max_length=32)
    version: int
    sha256: str = Field(max_length=64)
    parent_sha256: Optional[str] = Field(default=None, max_length=64)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    campaign_id: Optional[int] = Field(default=None, foreign_key="assessmentcampaign.id")
    added: int = 0  # links added (links tasks) or gold values changed (pair tasks)
    judged_negative: int = 0
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
