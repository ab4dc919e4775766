"""Tasks and phases."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal, Optional, Union

from pydantic import (
    Field,
    field_validator,
)

from server.api_models.base import Model, Out, Stamp
from tasks.bundle_models import BoardFilter, BoardSpec, BoardValue, OverallSpec

# ----------------------------------------------------------------------------- tasks and phases


class Limits(Out):
    daily: Optional[int]
    total: Optional[int]
    concurrent: Optional[int]


class Quota(Out):
    daily_used: int
    daily_limit: Optional[int]
    daily_left: Optional[int]
    total_used: int
    total_limit: Optional[int]
    total_left: Optional[int]
    running: int
    concurrent_limit: Optional[int]
    resets_at: Stamp
    next_allowed_at: Stamp = None
    compute_used_seconds: Optional[float] = Field(
        None,
        description="CPU seconds your team's systems used in the phase (phases that take code).",
    )
    compute_budget_seconds: Optional[int] = None


class BoardOut(Out):
    """A board of a phase: `main` (the default board, ranked by the task's primary value, every
    run) first, then the declared ones."""

    name: str
    title: str
    ranking: Optional[BoardValue] = Field(
        None, description="The value it ranks by (null on an overall board: see `overall`)."
    )
    overall: Optional[OverallSpec] = Field(
        None,
        description="An overall board: the boards it combines, its rule and where a team "
        "absent from one of them stands (null on any other board).",
    )
    columns: list[BoardValue] = Field(default_factory=list)
    filter: Optional[BoardFilter] = Field(
        None,
        description="The runs it ranks: those whose fact sheet answers `fact` with one of "
        "`equals` (null: every run).",
    )


class PhaseOut(Out):
    name: str
    split: str
    kind: Literal["standard", "cross-validated"] = Field(
        description="cross-validated: scored fold by fold on the task's cross-validated split; "
        "each row of a submission names its fold, the board shows the mean over folds ± std"
    )
    opens_at: Stamp
    closes_at: Stamp
    inputs_at: Stamp = Field(
        None, description="When its split's inputs are released (null: opens_at)."
    )
    is_open: bool
    published: bool
    limits: Limits
    quota: Optional[Quota] = Field(None, description="What is left of your team's allowance.")
    accepts: Literal["predictions", "code", "both"] = Field(
        "predictions", description="What the phase takes: prediction files, systems, or both."
    )
    blind: bool = Field(
        False, description="Its split's inputs are never downloadable; systems run on them."
    )
    boards: list[BoardOut] = Field(
        default_factory=list,
        description="Its boards (`?board=NAME` on the leaderboard): `main` first.",
    )
    release_rule: Union[str, dict] = Field(
        "exact",
        description="What the live public board shows of each run's public score "
        '(docs/statistics.md): "exact" (default), "rounded", "ladder", "ladder-paired" or '
        '{"rule": "ladder", "eta": 0.01}; the private part and the published ranking are never '
        "affected.",
    )


class PhaseState(PhaseOut):
    """A phase as organizers see it."""

    state: list[str] = Field(
        description='Its window ("not open yet", "open", "closed"), then '
        '"frozen" and "published" when they hold.'
    )
    frozen: bool
    leaderboard_open: bool
    published_at: Stamp
    public_fraction: float
    compute_budget_seconds: Optional[int] = None


class PhaseCreate(Model):
    name: str = Field(min_length=1, max_length=32, json_schema_extra={"examples": ["final"]})
    split: str = Field(json_schema_extra={"examples": ["test"]})
    opens_at: Optional[datetime] = Field(None, description="ISO 8601; UTC when no offset is given.")
    closes_at: Optional[datetime] = None
    inputs_at: Optional[datetime] = Field(None, description="Inputs released (default: opening).")
    daily_limit: Optional[int] = Field(None, ge=0)
    total_limit: Optional[int] = Field(None, ge=0)
    concurrent_limit: Optional[int] = Field(None, ge=0)
    public_fraction: Optional[float] = Field(None, gt=0, le=1)
    accepts: Optional[Literal["predictions", "code", "both"]] = Field(
        None, description="What the phase takes (default: prediction files)."
    )
    blind: Optional[bool] = Field(
        None, description="Never serve the split's inputs: systems run on them blind."
    )
    compute_budget_seconds: Optional[int] = Field(
        None, ge=0, description="CPU seconds of system runs per team (null: no budget)."
    )
    boards: Optional[list[BoardSpec]] = Field(
        None,
        max_length=40,  # STR's tracks: 33
        description="The boards beside the default one (`main`), replacing those declared "
        "(`[]`: the default board only); each checked against the task's subsets and metrics and "
        "the competition's fact fields.",
    )
    release_rule: Optional[Union[str, dict]] = Field(
        None,
        description="What the live public board shows of each run's public score "
        '(docs/statistics.md): "exact" (default), "rounded", "ladder", "ladder-paired" or '
        '{"rule": "ladder", "eta": 0.01}; the private part and the published ranking are never '
        "affected.",
    )


class PhaseEdit(Model):
    """Only the fields sent change; `null` clears a time or a limit (no limit)."""

    opens_at: Optional[datetime] = Field(
        None,
        description="ISO 8601; UTC when no offset is given.",
        json_schema_extra={"examples": ["2026-01-10T00:00:00Z"]},
    )
    closes_at: Optional[datetime] = None
    inputs_at: Optional[datetime] = Field(
        None, description="When the split's inputs may be downloaded (null: when it opens)."
    )
    daily_limit: Optional[int] = Field(None, ge=0)
    total_limit: Optional[int] = Field(None, ge=0)
    concurrent_limit: Optional[int] = Field(None, ge=0)
    public_fraction: Optional[float] = Field(None, gt=0, le=1)
    accepts: Optional[Literal["predictions", "code", "both"]] = Field(
        None, description="What the phase takes (default: prediction files)."
    )
    blind: Optional[bool] = Field(
        None, description="Never serve the split's inputs: systems run on them blind."
    )
    compute_budget_seconds: Optional[int] = Field(
        None, ge=0, description="CPU seconds of system runs per team (null: no budget)."
    )
    boards: Optional[list[BoardSpec]] = Field(
        None,
        max_length=40,  # STR's tracks: 33
        description="The boards beside the default one (`main`), replacing those declared "
        "(`[]`: the default board only); each checked against the task's subsets and metrics and "
        "the competition's fact fields.",
    )
    release_rule: Optional[Union[str, dict]] = Field(
        None,
        description="What the live public board shows of each run's public score "
        '(docs/statistics.md): "exact" (default), "rounded", "ladder", "ladder-paired" or '
        '{"rule": "ladder", "eta": 0.01}; the private part and the published ranking are never '
        "affected.",
    )

    @field_validator("opens_at", "closes_at", "inputs_at")
    @classmethod
    def _naive_utc(cls, v):
        if v is not None and v.tzinfo is not None:
            v = v.astimezone(timezone.utc).replace(tzinfo=None)
        return v


class PhaseAction(Model):
    """The options of the phase actions (server.actions.phases.PHASE_ACTIONS), declared once:
    each field is named as the actions' parameter, and the API's body (by its alias), the web
    form's fields and the local command's flags (`--close`) are read from these declarations.
    An action takes those its own signature names; one given that it does not take is refused."""

    reason: str = Field(
        "", max_length=2000, description="publish: why this correction (from version 2 on)."
    )
    close_first: bool = Field(
        False, alias="close", description="publish: close an open phase in the same step."
    )
    runs: str = Field(
        "",
        max_length=2000,
        description="rerun: the archived systems to re-run on the phase, by the id of a code run "
        "of theirs, comma-separated (`12,15`).",
    )


class PrimaryRule(Out):
    metric: str
    subset: str
    greater_is_better: bool


class FormatField(Out):
    name: str
    kind: str
    description: str
    optional: bool


class FormatOut(Out):
    native: str
    also: list[str]
    example: str
    fields: list[FormatField]


class TaskSummary(Out):
    id: str
    title: str
    primary: PrimaryRule
    imported: bool
    phases: list[PhaseOut]


class TaskOut(TaskSummary):
    version: int
    description: str
    citation: str
    licence: str
    source: str
    metrics: list[str]
    subsets: list[str]
    splits: list[str]
    format: FormatOut


class DownloadQuery(Model):
    split: str | None = Field(
        None,
        description="Only this split or folder (default: every one released now; the zip's "
        "task.json names those withheld and their release time).",
    )
