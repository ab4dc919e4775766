"""Assessment campaigns: items, judgments, agreement, adjudication, closing, the Bayesian fits."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import (
    Field,
)

from server.api_models.base import Model, Out, Stamp
from server.domain.sanitize import MAX_MARKDOWN

# ----------------------------------------------------------------------------- assessment campaigns

FACTORS = ("run", "source_work", "overlap", "query_had_gold", "gold", "stratum")
Factor = Literal["run", "source_work", "overlap", "query_had_gold", "gold", "stratum"]


class CampaignOpenIn(Model):
    """Open an assessment campaign on a task's phase (the organizers of its competition)."""

    depth: int = Field(
        ge=1,
        le=10_000,
        description="Links: the top-k links per query of each ranked run (by score); pair tasks: "
        "items sampled per stratum.",
    )
    assessors: list[str] = Field(
        min_length=1,
        max_length=200,
        description="The assessors' email addresses: each has the assessor role in the task's "
        "competition (or organizes it).",
    )
    per_item: int = Field(3, ge=1, le=50, description="Assessors per item (3, as in the paper).")
    labels: Optional[list[str]] = Field(
        None,
        min_length=2,
        max_length=20,
        description='The labels an assessor chooses from (default ["reference", "no reference"]).',
    )
    guideline: str = Field("", max_length=MAX_MARKDOWN, description="Markdown, for assessors.")
    seed: Optional[int] = Field(
        None, ge=0, le=2**31 - 1, description="Of the assignment and order (drawn when absent)."
    )
    positive: Optional[list[str]] = Field(
        None,
        min_length=1,
        max_length=19,
        description="Links tasks: the labels that make an item a link when the campaign closes "
        "(default: the first label).",
    )
    allow_participants: bool = Field(
        False,
        description="Open it although an assessor takes part in the competition (a team or runs "
        "of their own): refused otherwise.",
    )


class CampaignItemOut(Out):
    """A pooled item as the organizers see it (never shown to assessors)."""

    id: int
    key: str
    factors: dict[str, Any]


class CampaignAssessorOut(Out):
    email: str
    assigned: int
    judged: int
    gold_judged: Optional[int] = Field(
        None, description="Links: the gold links among their judged items (blind to them)."
    )
    gold_agreed: Optional[int] = Field(
        None, description="Links: how many of those they judged a link (a positive label)."
    )


class CampaignCounts(Out):
    items: int
    assignments: int
    judgments: int


class CampaignOut(Out):
    """A campaign as its organizers see it: its counts per assessor and (on opening or asked)
    its pooled items."""

    id: int
    competition: str
    task: str
    phase: str
    state: str
    depth: int
    per_item: int
    labels: list[str]
    positive: list[str] = Field(description="The labels that count as a link.")
    guideline: str
    seed: int
    runs: list[int] = Field(description="The ranked runs (submission ids) the pool came from.")
    created_at: Stamp = None
    counts: CampaignCounts
    assessors: list[CampaignAssessorOut]
    participants: list[str] = Field(
        [],
        description="Assessors who take part in the competition (a team or runs of their own): "
        "they know their runs, and so what the pool holds of them.",
    )
    items: Optional[list[CampaignItemOut]] = None


class AssessItemOut(Out):
    """An item as its assessor sees it: the query and the candidate with their texts, and the
    assessor's own judgment; nothing of the runs, their scores or other judgments."""

    item: int = Field(description="The item's id (`--item`).")
    position: int
    query: Optional[str] = None
    candidate: Optional[str] = None
    query_text: Optional[str] = None
    candidate_text: Optional[str] = None
    fields: Optional[dict[str, Any]] = Field(
        None, description="Pair tasks: the instance's public input fields."
    )
    label: Optional[str] = None
    comment: str = ""
    judged_at: Stamp = None


class AssessOut(Out):
    """An assessor's items in their order, with the campaign's labels and guideline."""

    campaign: int
    task: str
    state: str
    labels: list[str]
    guideline: str
    judged: int
    total: int
    items: list[AssessItemOut]


class MyCampaignOut(Out):
    """A campaign that gives the signed-in person items to judge, and their own progress."""

    campaign: int
    competition: str
    task: str
    phase: str
    state: str
    judged: int
    total: int


class JudgmentIn(Model):
    label: str = Field(min_length=1, max_length=64)
    comment: str = Field("", max_length=2000)


class JudgmentOut(Out):
    campaign: int
    item: int
    label: str
    comment: str
    created_at: Stamp = None
    updated_at: Stamp = None


class AgreementQuery(Model):
    by: Optional[Factor] = Field(None, description=f"A factor: {', '.join(FACTORS)}.")


class AgreementOut(Out):
    """Multi-kappa (and the other measures of the agreement module) with percentile-bootstrap
    intervals over the items every assigned assessor judged; overall and, with `by`, per level
    of a factor."""

    campaign: int
    by: Optional[str] = None
    counts: dict[str, int]
    overall: dict[str, Any]
    levels: Optional[list[dict[str, Any]]] = None


class DisagreementOut(Out):
    """An item of a campaign whose judgments are not unanimous (or are not all in), with each
    label's count and its decision, if any."""

    item: int
    key: str
    complete: bool = Field(description="Every assigned assessor judged it.")
    counts: dict[str, int]
    majority: Optional[str] = Field(None, description="The label a strict majority gave.")
    decision: Optional[str] = None
    rule: Optional[str] = Field(None, description='"majority" | "organizer" | "unanimous"')
    reason: str = ""


class DisagreementsOut(Out):
    campaign: int
    state: str
    counts: dict[str, int] = Field(
        description="items, complete, unanimous, disagreeing, decided, undecided (the items a "
        "close still needs a decision for)"
    )
    items: list[DisagreementOut]


class AdjudicateIn(Model):
    """Either `majority` (every item with a strict majority label gets it), or an `item` with its
    `label` and a `reason` (an organizer's decision; it may overrule anything)."""

    majority: bool = False
    item: Optional[int] = None
    label: Optional[str] = Field(None, max_length=64)
    reason: str = Field("", max_length=2000)


class DecisionOut(Out):
    item: int
    key: str
    label: str
    rule: str
    reason: str = ""
    decided_at: Stamp = None


class AdjudicateOut(Out):
    campaign: int
    decided: list[DecisionOut] = Field(description="The decisions this step made.")
    ties: list[int] = Field(description="Items left for a person: no strict majority.")
    undecided: int = Field(description="Items a close still needs a decision for.")


class GoldVersionOut(Out):
    task: str
    split: str
    version: int
    sha256: str
    parent_sha256: Optional[str] = None
    reason: str
    campaign: Optional[int] = None
    added: int
    judged_negative: int
    created_at: Stamp = None


class PublishedOut(Out):
    phase: str
    version: int
    command: str = Field(description="Publishes a new version ranked under the new gold.")


class CloseOut(Out):
    """A closed campaign: the new gold version, the runs queued for rescoring, and the published
    rankings that stay as published until an organizer publishes a new version."""

    campaign: int
    state: str
    gold: GoldVersionOut
    decisions: dict[str, int] = Field(description="Decisions by rule.")
    rescoring: list[int] = Field(description="Submissions marked stale and queued.")
    published: list[PublishedOut]


class ExportOut(Out):
    """A campaign's export: file name -> its text (judgments.csv, decisions.csv, gold/...,
    qrels.txt, agreement.json, agreement.svg)."""

    campaign: int
    files: dict[str, str]


class BayesIn(Model):
    """Ask a worker for the Bayesian agreement model of a campaign; each setting has a default
    and a bound (the work a request may cost)."""

    seed: Optional[int] = Field(
        None, ge=0, le=2**31 - 1, description="The sampler's seed; the campaign's seed if left out."
    )
    chains: Optional[int] = Field(None, ge=1, le=4, description="NUTS chains (default 2).")
    warmup: Optional[int] = Field(
        None, ge=10, le=1000, description="Warmup draws per chain (default 500)."
    )
    samples: Optional[int] = Field(
        None, ge=10, le=1000, description="Kept draws per chain (default 500)."
    )


class BayesFitOut(Out):
    """One requested fit of the Bayesian agreement model: its state (queued, running, done,
    not_converged, failed), what it read (how many judgments, a digest of the table), its
    posterior multi-kappa and diagnostics when it converged, else why not."""

    id: int
    campaign: int
    state: str
    seed: int
    settings: dict[str, int]
    judgments: Optional[int] = None
    digest: Optional[str] = None
    current: Optional[bool] = Field(
        None, description="Whether the judgments stored now give the same table (done fits)."
    )
    result: Optional[dict[str, Any]] = None
    error: str = ""
    created_at: datetime
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None


class BayesFitsOut(Out):
    """A campaign's fits of the Bayesian agreement model, the newest first."""

    campaign: int
    fits: list[BayesFitOut]
