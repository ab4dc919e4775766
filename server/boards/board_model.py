"""The one shape of a leaderboard: the models that `build_board` returns, the templates render,
the API serves (and documents in its OpenAPI) and a published snapshot is read back into.

Field names are the ones the code uses; where the JSON name differs it is the field's alias, so a
board is written with `model_dump(by_alias=True)` and read back with `model_validate`, with no
mapping written by hand either way; a key the JSON leaves out when empty says so in its field
(`exclude_if`). The OpenAPI document is generated from these same classes.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    computed_field,
    field_serializer,
    field_validator,
)

STATS_FIELDS = (
    "part",
    "method",
    "unit",
    "B",
    "seed",
    "partition",
    "alpha",
    "metric",
    "order",
    "teams",
    "p",
    "p_holm",
    "neighbours",
    "top_sets",
    "boards_won",
)


def stats_summary(stats: dict | None) -> dict:
    """The board-wide part of the statistics (the rows carry their own): how they were computed and
    the pairwise p-values in the order of `order` (submission ids); `{"status": "pending"}` while
    a worker computes them."""
    if stats is None:
        return {"status": "pending"}
    return {"status": "ready", **{k: stats.get(k) for k in STATS_FIELDS}}


def clean_name(s: str | None) -> str:
    """A method or team name as exported: its whitespace collapsed and stripped."""
    return " ".join((s or "").split())


_COUNT_METRICS: frozenset | None = None


@functools.lru_cache(maxsize=4096)
def _metric_of(key: str) -> str:
    """The metric of a column key ("subset/metric", "subset/metric@fold")."""
    return key.split("/", 1)[-1].split("@", 1)[0]


def json_value(metric: str, v):
    """A metric's value in the JSON: a count as an integer, else as it is."""
    global _COUNT_METRICS
    if v is None:
        return v
    if _COUNT_METRICS is None:
        # here: the scorer (numpy) loads when a board is first exported, once
        from scorer.metrics import COUNT_METRICS

        _COUNT_METRICS = frozenset(COUNT_METRICS)
    if metric in _COUNT_METRICS and float(v).is_integer():
        return int(v)
    return v


def _empty(v) -> bool:
    return v is None or v == "" or v is False


def _none(v) -> bool:
    return v is None


def _empty_list(v) -> bool:
    return not v


class _Shape(BaseModel):
    """Mutable (a board is filled in step by step), read by field name or by alias. Reading a
    snapshot back ignores the keys that are computed (`key`, `primary`); the declared answer
    admits no key it does not name."""

    model_config = ConfigDict(
        populate_by_name=True,
        extra="ignore",
        json_schema_extra={"additionalProperties": False},
    )


class PendingStatistics(BaseModel):
    """A worker is computing the board's statistics."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["pending"]


class BoardStatistics(BaseModel):
    """The board-wide part of the statistics: how they were computed, the pairwise p-values."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["ready"]
    part: Optional[str] = None
    method: Optional[str] = None
    unit: Optional[str] = None
    B: Optional[int] = Field(None, description="Bootstrap resamples.")
    seed: Optional[int] = Field(None, description="The seed of the bootstrap resamples.")
    partition: Optional[str] = Field(
        None,
        description="A fingerprint of the public/private partition (a keyed hash: the same for "
        "every phase sharing it; it cannot be used to redraw the partition).",
    )
    alpha: Optional[float] = None
    metric: Optional[str] = None
    order: Optional[list[Optional[int]]] = Field(
        None, description="Submission ids, the order of `p`."
    )
    teams: Optional[list[Any]] = None
    p: Optional[list[list[Optional[float]]]] = Field(
        None,
        description="Pairwise paired-bootstrap p-values (null on a board of more than 60 ranked "
        "rows: see `neighbours`).",
    )
    p_holm: Optional[list[list[Optional[float]]]] = Field(
        None, description="The same, Holm-corrected."
    )
    neighbours: Optional[dict[str, list[Optional[float]]]] = Field(
        None,
        description="In the order of `order`: the p-values (`p_next`, `p_holm_next`) of each row "
        "against the next one and (`p_head`, `p_holm_head`) against the best row of its cluster "
        "(null for the last row, and for a cluster's best); Holm's correction is over every pair.",
    )
    top_sets: Optional[dict[str, list[int]]] = Field(
        None,
        description='tau ("1", "3") -> the submission ids that may be among the tau best: every '
        "row truly among them is there with probability 1 - alpha (the simultaneous rank sets' "
        "lower ends).",
    )
    boards_won: Optional[dict] = Field(
        None,
        description="An overall board's: {K, alpha, counts}: counts[i][j], in the order of "
        "`order`, the boards on which row i is better than row j, claimed with family-wise "
        "control over every pair (Dror et al., TACL 2017: partial conjunction tests, Bonferroni); "
        "null beyond 60 ranked rows.",
    )


class BoardColumn(_Shape):
    """A column of the board: a metric on a subset, or a cross-validated detail of one."""

    subset: str
    metric: str
    greater_is_better: bool
    primary: bool = False
    stat: str = Field(
        "",
        exclude_if=_empty,
        description="a cross-validated board's detail column: `std` (the standard deviation over "
        "folds) or `fold` (the value on one fold)",
    )
    fold: Optional[str] = Field(None, exclude_if=_none, description="the fold of a `fold` column")
    over: list[str] = Field(
        default_factory=list,
        exclude_if=_empty_list,
        description="a board's own mean (its `subset` a name of the board's): the groups it is "
        "the mean of the metric over (those the gold holds)",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def key(self) -> str:
        """`subset/metric`, then `@std` or `@fold<k>` for a detail column."""
        base = f"{self.subset}/{self.metric}"
        if self.stat == "std":
            return base + "@std"
        if self.stat == "fold":
            return f"{base}@fold{self.fold}"
        return base

    @property
    def label(self) -> str:
        """The metric as a header names it: `f1`, `f1 std`, `f1 fold 3`."""
        if self.stat == "std":
            return f"{self.metric} std"
        if self.stat == "fold":
            return f"{self.metric} fold {self.fold}"
        return self.metric


class BoardPrimary(BaseModel):
    subset: str
    metric: str
    greater_is_better: bool


class LeaderboardRow(_Shape):
    """One row: a team's ranked run, a baseline method's newest entry, or a reference row."""

    rank: Optional[int] = Field(
        description="null: not ranked (hidden, not public, stale, unscored)."
    )
    row_type: Literal["team", "baseline", "human", "paper"] = Field(
        description='"human": a reference row (the annotators\' agreement); "paper": a published '
        "system's figures as the task declares them; neither is ranked."
    )
    team: str
    team_id: int = Field(0, exclude=True)
    submission_id: Optional[int] = Field(
        description="null for a human-agreement or paper row, and on a blind phase's live board "
        "outside its organizers' view (`run` names the row there: a submission's id is given when "
        "a run ends, so it would tell when other runs ended)."
    )
    run: Optional[int] = Field(
        None,
        exclude_if=_none,
        description="On a blind phase's live board (outside its organizers' view): the team's "
        "run in the phase that the row shows, counted 1, 2, ... in the order the team submitted "
        "its systems (and files); its `submitted_at` is when that system was submitted.",
    )
    method_name: str = ""
    url: str = ""
    submitted_at: datetime = Field(description="UTC, ISO 8601 with a Z.")
    is_primary: bool = Field(
        False,
        serialization_alias="primary_run",
        validation_alias=AliasChoices("primary_run", "is_primary"),
    )
    values: dict[str, Optional[float]] = Field(
        serialization_alias="metrics",
        validation_alias=AliasChoices("metrics", "values"),
        description="Column key (`subset/metric`) -> value.",
    )
    chosen_by: str = Field(
        "",
        exclude_if=_empty,
        description='"primary run", "latest scored run", "baseline method" or "re-run of an '
        'archived system".',
    )
    public_value: Optional[float] = Field(
        None,
        exclude_if=_none,
        serialization_alias="public_primary",
        validation_alias=AliasChoices("public_primary", "public_value"),
        description="After publication: the public part's primary value.",
    )
    public_rank: Optional[int] = Field(None, exclude_if=_none)
    note: str = Field(
        "", exclude_if=_empty, description='e.g. "hidden", "not public", "stale" (organizers).'
    )
    why_empty: str = Field(
        "", exclude_if=_empty, description="Why the primary value is empty (the scorer's notes)."
    )
    ci: Optional[list[Optional[float]]] = Field(
        None, description="[lo, hi]: 95 % percentile bootstrap interval of the primary value."
    )
    rank_range: Optional[list[Optional[int]]] = Field(
        None, description="[best, worst]: 95 % rank interval."
    )
    rank_set: Optional[dict] = Field(
        None,
        exclude_if=_none,
        description="{low, high, coverage, kind, method}: the confidence set for the row's rank "
        'that holds its true rank with probability `coverage` (kind "marginal"; Mogstad, Romano, '
        'Shaikh and Wilhelm\'s max-t procedure, "holm" beyond 500 ranked rows).',
    )
    rank_set_simultaneous: Optional[dict] = Field(
        None,
        exclude_if=_none,
        description="The same, of kind \"simultaneous\": every row's set holds every row's true "
        "rank at once with probability `coverage`.",
    )
    rerun_of: Optional[dict] = Field(
        None,
        exclude_if=_none,
        description="{run, task, phase}: the row is an archived system re-run on this phase's "
        "inputs by the organizers; the code run first uploaded, of that task and phase.",
    )
    cluster: Optional[int] = Field(
        None, description="Rows not significantly different share a cluster."
    )
    ci_note: str = Field("", exclude_if=_empty, description="Why a row has no interval (yet).")
    runs: Optional[int] = Field(
        None,
        exclude_if=_none,
        description="On a live board: the runs the team made in the phase (scored or not; on a "
        "frozen board, those made before it froze).",
    )
    public_ci: Optional[list[Optional[float]]] = Field(
        None, exclude_if=_none, description="After publication: the public part's interval."
    )
    # what the server keeps beside a row and never writes on a live board
    parts: dict[str, dict] = Field(default_factory=dict, exclude=True)
    attempt: Optional[int] = Field(None, exclude=True)
    notes: list = Field(default_factory=list, exclude=True)
    # under the parameter-free ladder: the team's runs on the board up to this one
    # (server.boards.ladder), for the statistics job
    ladder_runs: list = Field(default_factory=list, exclude=True)

    @field_serializer("method_name")
    def _clean(self, v: str) -> str:
        return clean_name(v)

    @field_serializer("values")
    def _counts(self, v: dict[str, Optional[float]]) -> dict[str, int | float | None]:
        return {k: json_value(_metric_of(k), x) for k, x in v.items()}

    @field_serializer("submitted_at")
    def _utc(self, v: datetime) -> str:
        return v.replace(microsecond=0, tzinfo=None).isoformat() + "Z"

    @field_validator("submitted_at", mode="before")
    @classmethod
    def _parse_utc(cls, v):
        if isinstance(v, str):
            return datetime.fromisoformat(v.rstrip("Z"))
        return v


class Leaderboard(_Shape):
    """A phase's leaderboard as one audience may see it."""

    task_id: str = Field(
        serialization_alias="task", validation_alias=AliasChoices("task", "task_id")
    )
    phase: str
    board: str = Field(
        "main",
        exclude_if=lambda v: v == "main",
        description='The board of the phase (absent: "main", the default one).',
    )
    title: str = Field("", exclude_if=_empty, description="A declared board's title.")
    filter: Optional[dict] = Field(
        None,
        exclude_if=_none,
        description="A declared board's filter: the runs whose fact sheet answers `fact` with "
        "one of `equals`.",
    )
    overall: Optional[dict] = Field(
        None,
        exclude_if=_none,
        description="An overall board: {boards, rule, missing}: each team's values on `boards` "
        "(its columns) combined by `rule` (mean, borda, mean-rank), a team missing one of them "
        "left out, shown unranked or ranked last there (`missing`).",
    )
    release_rule: Optional[Any] = Field(
        None,
        exclude_if=_none,
        description="The phase's release rule, where the live board shows released public "
        'scores rather than exact ones ("ladder", {"rule": "ladder", "eta": 0.01}, "ladder-paired" '
        'or "rounded"; '
        "docs/statistics.md); its intervals are then withheld.",
    )
    split: str
    part: Literal["public", "private", "whole", "all"] = Field(
        serialization_alias="ranked_on",
        validation_alias=AliasChoices("ranked_on", "part"),
        description="The gold part ranked on.",
    )
    published: bool
    frozen: bool
    gold: Optional[str] = Field(
        None,
        exclude_if=_none,
        description="The gold version ranked on, once the split's gold has more than one (e.g. "
        '"gold v2 — extended by campaign 3"; absent: the imported gold).',
    )
    closed: bool = Field(
        False, exclude_if=_empty, description="A board shown to organizers only (true, or absent)."
    )
    columns: list[BoardColumn]
    rows: list[LeaderboardRow] = Field(default_factory=list)
    version: str = Field("", exclude=True)
    stats: Optional[dict] = Field(
        None,
        serialization_alias="statistics",
        validation_alias=AliasChoices("statistics", "stats"),
        description="How the intervals were computed, and the pairwise p-values (Holm).",
    )
    public_stats: Optional[dict] = Field(
        None,
        exclude_if=_none,
        serialization_alias="public_statistics",
        validation_alias=AliasChoices("public_statistics", "public_stats"),
        description="After publication: the same on the public part.",
    )

    # an overall board's component boards, as built with it (what its statistics combine)
    _components: list = PrivateAttr(default_factory=list)

    @property
    def primary(self) -> BoardColumn:
        """The ranking column (always the first)."""
        return self.columns[0]

    @computed_field(alias="primary")  # type: ignore[prop-decorator]
    @property
    def primary_summary(self) -> BoardPrimary:
        """The ranking column as the JSON names it (`primary`)."""
        c = self.columns[0]
        return BoardPrimary(subset=c.subset, metric=c.metric, greater_is_better=c.greater_is_better)

    @field_validator("stats", "public_stats", mode="before")
    @classmethod
    def _ready_only(cls, v):
        """A snapshot's `{"status": "pending"}` reads back as no statistics."""
        if isinstance(v, dict) and v.get("status") != "ready":
            return None
        return v

    @field_serializer("stats", "public_stats")
    def _summary(self, v: Optional[dict]) -> BoardStatistics | PendingStatistics:
        if v is None:
            return PendingStatistics(status="pending")
        return BoardStatistics(**stats_summary(v))

    def to_dict(self) -> dict[str, Any]:
        """The board's JSON shape (what the API serves and a snapshot stores)."""
        return self.model_dump(mode="json", by_alias=True)


class PartScores(BaseModel):
    """One part's scores. In a snapshot with `part_metrics` (server.domain.snapshot_parts):
    `metrics` a list of values in the order `part_metrics` names them (or, where a part's
    metrics differ from those names, `{subset: {metric: value}}`), `provenance` the index of its
    signature and provenance in `part_provenance`. In an earlier snapshot: `metrics` by name,
    `signature` and `provenance` on the part."""

    primary: Optional[float]
    metrics: Optional[dict[str, Any] | list[Any]]
    notes: list[Any]
    signature: str = ""
    provenance: dict[str, Any] | int


class PartProvenance(BaseModel):
    signature: str
    provenance: dict[str, Any]


class RankingMeta(BaseModel):
    version: int
    published_at: str
    published_by: Optional[str]
    reason: str
    rule: str = Field(description="How each team's ranked run was chosen.")


class SnapshotRow(LeaderboardRow):
    """A row of a published final ranking: the rule that chose it and every score it has."""

    chosen_by: str
    parts: dict[str, PartScores] = Field(
        description="Every score of every part, with its signature."
    )


class Snapshot(Leaderboard):
    """A published final ranking, served byte for byte as published."""

    rows: list[SnapshotRow]
    ranking: RankingMeta
    part_metrics: Optional[list[list[str]]] = Field(
        None,
        description="The metrics of the rows' parts, [subset, metric] in the order each part's "
        "`metrics` list gives their values (absent in a snapshot published before).",
    )
    part_provenance: Optional[list[PartProvenance]] = Field(
        None,
        description="The distinct signatures and provenances of the rows' parts; a part's "
        "`provenance` is an index here (absent in a snapshot published before).",
    )


# the names the code uses for the live board
Board = Leaderboard
Column = BoardColumn
Row = LeaderboardRow
