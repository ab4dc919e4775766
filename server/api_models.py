"""The declared shapes of `/api/v1`: every request body and every answer is one of these pydantic
models, and the OpenAPI 3.1 description (server/api/openapi.py) is generated from them.

Answers are built by validating into these models (`out(Model, ...)`), so an answer that strays
from its declaration fails in the server, not in a client. Leaderboards and published snapshots are
served byte for byte from their render cache and snapshot rows; their models are the board's own
(server.boards.board_model), and the tests check every served board against them.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Generic, Literal, Optional, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    field_serializer,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema

from server.boards.board_model import Leaderboard, Snapshot
from server.domain.inputs import CONTROL, one_line_problem
from server.domain.sanitize import MAX_MARKDOWN
from server.domain.submissions import url_problem
from server.jobs.emails import normalize_domain

# bundle: the fact-sheet field is declared once, with the competition bundles (re-exported here)
from tasks.bundle import FactField

T = TypeVar("T")


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    """Every failure: the status comes from one table shared with the web pages (server.errors)."""

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


# ----------------------------------------------------------------------------- users and teams


class TeamRef(Out):
    id: int
    name: str


class Me(Out):
    id: int
    email: str
    is_admin: bool = Field(description="A site administrator: creates competitions.")
    is_organizer: bool = Field(description="An organizer of at least one competition.")
    team: Optional[TeamRef] = Field(description="Your team of every competition, if any.")


class Member(Out):
    id: int
    email: str
    role: str = Field("member", description="captain or member")
    status: str = Field("active", description="active, or pending: waits for the captain")


class TeamOut(Out):
    id: int
    name: str
    competition: Optional[str] = Field(
        None, description="The competition it is a team of; none: every competition."
    )
    invite_code: str = Field(
        description="Share it with teammates; `POST /team/invite` replaces it."
    )
    members: list[Member]
    created: Stamp


_COMPETITION = Field(
    None,
    pattern=r"^[a-z0-9][a-z0-9-]{0,63}$",
    description="The competition (its short id); none: your team of every competition.",
)


class TeamQuery(Model):
    competition: Optional[str] = _COMPETITION


class MemberDecision(Model):
    competition: Optional[str] = _COMPETITION
    approve: Literal["0", "1"] = "1"


class TeamCreate(Model):
    name: str = Field(
        min_length=1, max_length=120, json_schema_extra={"examples": ["Team Lexical"]}
    )
    competition: Optional[str] = _COMPETITION

    @field_validator("name")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if one_line_problem(v):
            raise ValueError(one_line_problem(v))
        return v


class TeamJoin(Model):
    invite_code: str = Field(
        min_length=1, max_length=64, json_schema_extra={"examples": ["code-alpha"]}
    )
    competition: Optional[str] = _COMPETITION


class Left(Out):
    left_team: int


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

    @field_validator("opens_at", "closes_at", "inputs_at")
    @classmethod
    def _naive_utc(cls, v):
        if v is not None and v.tzinfo is not None:
            v = v.astimezone(timezone.utc).replace(tzinfo=None)
        return v


class PhaseAction(Model):
    reason: str = Field(
        "", max_length=2000, description="publish: why this correction (from version 2 on)."
    )
    close: bool = Field(False, description="publish: close an open phase in the same step.")


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


# ----------------------------------------------------------------------------- submissions


YES = ("1", "true", "yes", "on", "y")  # "y": what a WTForms checkbox posts when ticked
NO = ("0", "false", "no", "off", "n", "")


def _flagged(v):
    """A form's yes/no field: 1, true, yes, on, y (any case) are yes; 0, false, no, off, n and
    the empty string are no; anything else is refused, naming what is accepted."""
    if isinstance(v, str):
        w = v.strip().lower()
        if w in YES:
            return True
        if w in NO:
            return False
        raise ValueError(
            f"{v[:20]!r} is not a yes/no value (yes: 1, true, yes, on, y; no: 0, false, no, off, n)"
        )
    return bool(v)


class UploadFields(Model):
    """The fields of an upload, on the web form and the API alike (the file travels beside them,
    streamed). Text is stripped; the URL, when given, is http(s)."""

    model_config = ConfigDict(extra="ignore")

    phase: str | None = Field(None, description="Default: the open test phase, else dev.")
    method_name: str = Field("", max_length=200)
    description: str = Field("", max_length=5000)
    url: str = Field("", max_length=500)
    show_publicly: bool = True
    primary: bool = Field(
        False, description="Make this the team's primary (ranked) run of the phase."
    )
    baseline: bool = Field(False, description="Organizers: record a baseline entry.")
    # fact sheets: the answers, sent as one form field `fact.<key>` each
    # (server.domain.facts.form_facts);
    # checked against the competition's declared fields by the submit action
    facts: SkipJsonSchema[dict[str, str]] = Field(default_factory=dict)

    @field_validator("phase", mode="before")
    @classmethod
    def _phase(cls, v):
        return (v or "").strip() or None

    @field_validator("method_name", "description", "url", mode="before")
    @classmethod
    def _strip(cls, v, info):
        v = (v or "").strip()
        if CONTROL.search(v):
            raise ValueError("a control character is not allowed in this field")
        if info.field_name == "method_name" and one_line_problem(v):
            raise ValueError(one_line_problem(v))
        return v

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        problem = url_problem(v)  # the one URL rule of every surface
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("show_publicly", "primary", "baseline", mode="before")
    @classmethod
    def _flags(cls, v):
        return _flagged(v)


class UploadForm(UploadFields):
    """The multipart upload (`curl -F file=@predictions.jsonl -F phase=test`). The fact sheet's
    answers travel as fields `fact.<key>` (`-F fact.affiliation=...`), one per declared field."""

    model_config = ConfigDict(
        json_schema_extra={
            "patternProperties": {r"^fact\.[a-z][a-z0-9_]{0,39}$": {"type": "string"}}
        }
    )

    file: bytes = Field(
        description="The prediction file (the task's format; .gz and .zip accepted)."
    )


class CodeUploadForm(UploadFields):
    """A system to run blind (`curl -F code=@system.zip -F phase=evaluation`): a zip with
    system.yaml at its top (docs/blind-runs.md), and the same fields as a prediction file."""

    code: bytes = Field(description="The system: a zip archive holding system.yaml and its files.")


class CodeRunsQuery(Model):
    awaiting_review: Optional[Literal["0", "1"]] = Field(
        None, description="`1`: only ended runs of blind phases no organizer reviewed yet."
    )


class LeaderboardQuery(Model):
    phase: str | None = Field(
        None, description="Default: the test phase when it is open or published."
    )
    version: int | None = Field(
        None, ge=1, description="A published phase: that version of the final ranking."
    )


class Scores(BaseModel):
    """The scorer's JSON contract for the part of the gold the caller may see (`part`: public,
    private or all); `parts` holds each visible part when several are."""

    model_config = ConfigDict(extra="allow")
    part: str
    primary: dict[str, Any]
    metrics: Optional[dict[str, Any]] = None
    parts: Optional[dict[str, dict[str, Any]]] = None


class QueueStanding(Out):
    """Where a waiting run stands (server.jobs.waits)."""

    position: Optional[int] = Field(description="1: the next to start; 0: being scored now.")
    queued: int = Field(description="Runs waiting in the scoring queue, all teams.")
    running: int
    workers: Optional[int] = Field(description="Scoring workers alive (null: not known).")
    estimated_wait_s: Optional[float] = Field(
        description="Seconds until scored, from recent scoring times (null: none yet)."
    )
    basis: str


class SubmissionOut(Out):
    id: int
    task: str
    phase: Optional[str]
    status: Literal["queued", "running", "scored", "failed"]
    created: Stamp
    started: Stamp
    finished: Stamp
    method_name: str
    description: str
    url: str
    show_publicly: bool
    is_primary: bool
    is_baseline: bool
    file_name: str
    size: int
    sha256: str
    hidden: bool
    hidden_reason: Optional[str]
    failure_kind: Optional[str]
    errors: list[Problem]
    scores: Optional[Scores]
    team: Optional[str] = Field(None, description="The team's name (organizers' lists).")
    facts: Optional[dict[str, Any]] = Field(
        None, description="The fact sheet's answers (key: value), as the team gave them."
    )
    removed: Optional[bool] = Field(
        None, description="After a deletion: true (the run is kept for the organizers)."
    )
    duplicate: Optional[bool] = Field(
        None,
        description="At upload: true when this very file was "
        "submitted before (the earlier submission, counted once).",
    )
    queue: Optional[QueueStanding] = Field(
        None, description="While queued or running: its place and an estimate (one run's view)."
    )


class CodeRunOut(Out):
    """A team's system run blind: its stage, what it used and, when its team may read it, its
    log (organizers at once; the team on a blind phase once an organizer reviewed the run)."""

    id: int
    task: str
    phase: str
    team: int
    stage: Literal["queued", "running", "ran", "failed"]
    failure_kind: Optional[Literal["code", "infra"]] = None
    reason: str = ""
    attempts: int
    created: Stamp
    started: Stamp = None
    finished: Stamp = None
    command: list[str]
    resources: dict = Field(
        default_factory=dict,
        description="What the run used: status, exit_code, wall_seconds, cpu_seconds, "
        "peak_rss_mb, output_bytes.",
    )
    cpu_seconds: float = 0.0
    submission: Optional[int] = Field(None, description="The submission its output became.")
    submission_status: Optional[Literal["queued", "running", "scored", "failed"]] = Field(
        None, description="That submission's status: its output validated and scored, or not."
    )
    blind: bool
    reviewed: bool
    log: Optional[str] = Field(None, description="stdout and stderr (their ends), when allowed.")
    log_hidden: bool = Field(False, description="The log waits for an organizer's review.")


class CodeRunsOut(Out):
    runs: list[CodeRunOut]


class SubmissionsQuery(PageQuery):
    task: Optional[str] = None
    mine: Optional[Literal["0", "1"]] = Field(
        None, description="Organizers: `0` lists every team's."
    )
    status: Optional[Literal["queued", "running", "scored", "failed"]] = None


class Rescore(Model):
    reason: str = Field("", max_length=500)


class TaskRescore(Model):
    phase: Optional[str] = Field(
        None, description="Only this phase (default: every phase of the task)."
    )
    include_invalid: bool = Field(
        False, description="Also files that failed validation (they fail again)."
    )
    reason: str = Field("", max_length=500)


class Rescored(Out):
    queued: list[int] = Field(description="The submissions queued for scoring again.")
    skipped: int = Field(
        0, description="Selected but not final (queued or running), so left alone."
    )


class ShowPublicly(Model):
    show_publicly: bool = Field(description="true: a row on the public board; false: none.")

    @field_validator("show_publicly", mode="before")
    @classmethod
    def _flag(cls, v):
        return _flagged(v)


class Visibility(Model):
    action: Literal["hide", "unhide", "remove", "restore"] = Field(
        json_schema_extra={"examples": ["hide"]}
    )
    reason: str = Field(
        "",
        max_length=500,
        description="hide and remove: shown to the team.",
        json_schema_extra={"examples": ["a duplicate of an earlier run"]},
    )


# ----------------------------------------------------------------------------- leaderboards


# the board's shapes are declared once, in server.boards.board_model


class Board(RootModel[Snapshot | Leaderboard]):
    """A live board, or the final ranking of a published phase as published."""


class VersionOut(Out):
    version: int
    published_at: Stamp
    reason: str
    sha256: str


class PhaseActionOut(Out):
    phase: PhaseState
    ranking: Optional[VersionOut] = None


class RankingsOut(Out):
    phase: PhaseState
    items: list[VersionOut]
    next_cursor: Optional[str] = None
    next: Optional[str] = None


class ExportQuery(Model):
    format: Literal["csv", "json", "tex"] = "csv"
    version: Optional[int] = Field(
        None,
        ge=1,
        description="A published version (default: the latest; a preview before publication).",
    )
    # fact sheets
    facts: bool = Field(
        False,
        description="The fact sheets of the published version's rows (csv or json) instead.",
    )


# ----------------------------------------------------------------------------- audit and baselines


class AuditQuery(PageQuery):
    action: Optional[str] = Field(None, description="Only this action, e.g. `ranking.publish`.")
    all: Optional[Literal["0", "1"]] = Field(
        None, description="`1`: also the workers' status changes."
    )


class AuditEntry(Out):
    id: int
    actor: Optional[str]
    action: str
    target: str
    details: Optional[dict[str, Any]]
    created: Stamp


class BaselineRuns(Model):
    systems: list[str] = Field(min_length=1, json_schema_extra={"examples": [["lexical"]]})
    device: Literal["auto", "cpu", "cuda"] = "auto"
    model: Optional[str] = None
    cross_model: Optional[str] = None


class BaselinesQueued(Out):
    jobs: list[str]
    systems: list[str]


class BaselinesQuery(PageQuery):
    phase: Optional[str] = None


class BaselineRun(Out):
    """A baseline run the baselines queue still knows of."""

    id: str
    what: Optional[str]
    status: str = Field(description="queued, started, finished, failed, ...")
    enqueued: Stamp
    ended: Stamp
    recorded: list[dict[str, Any]] = Field(
        description="Finished: the baseline entries it recorded (phase, submission_id, duplicate)."
    )
    error: str = Field(description="Failed: the last line of its error.")


# ----------------------------------------------------------------------------- competitions

SLUG = r"^[a-z0-9][a-z0-9-]{0,63}$"
CompetitionState = Literal["draft", "visible", "archived"]


def _no_control(v: str | None) -> str | None:
    if v is not None and CONTROL.search(v):
        raise ValueError("control characters are not allowed")
    return v


def _one_line(v: str | None) -> str | None:
    """A title: one line (it becomes a mail subject and a heading)."""
    if v is not None and one_line_problem(v):
        raise ValueError(one_line_problem(v))
    return v


class CompetitionPageOut(Out):
    """A page of a competition: its Markdown and the sanitized HTML it renders to."""

    slug: str
    title: str
    position: int
    updated_at: datetime
    body_markdown: str
    html: str = Field(description="The Markdown rendered and sanitized (no script, http(s) links).")


class CompetitionSummary(Out):
    """A competition as a list shows it."""

    id: str = Field(description="The short id, as in /competitions/<id>.")
    title: str
    state: CompetitionState
    created_at: datetime
    tasks: list[str] = Field(description="The ids of its tasks (subtasks).")


DOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


class CompetitionSettings(Model):
    """How a competition takes participants and teams, and what its boards and submissions show.
    In an edit, only the fields sent change."""

    approval: Optional[Literal["auto", "manual"]] = Field(
        None, description="auto: a registration is approved at once; manual: an organizer decides."
    )
    allowed_domains: Optional[list[str]] = Field(
        None, max_length=100, description="Email domains that may register (empty: any)."
    )
    data_public: Optional[bool] = Field(
        None, description="Downloads without an approved registration."
    )
    team_size_cap: Optional[int] = Field(None, ge=0, le=1000, description="0: no cap.")
    join_needs_captain: Optional[bool] = None
    anonymous_board: Optional[bool] = Field(
        None, description="Team and method names hidden on public boards until publication."
    )
    fact_fields: Optional[list[FactField]] = Field(None, max_length=50)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, v):
        if v is None:
            return v
        out = []
        for d in v:
            d = normalize_domain(d)  # BadEmail, a ValueError, says why
            if not DOMAIN.fullmatch(d):
                raise ValueError(f"{d!r} is not an email domain")
            out.append(d)
        return out

    @field_validator("fact_fields")
    @classmethod
    def _keys(cls, v):
        if v is None:
            return v
        seen = set()
        for f in v:
            if f.key in seen:
                raise ValueError(f"fact field {f.key!r} is declared twice")
            seen.add(f.key)
        return v


class CompetitionSettingsOut(Out):
    approval: Literal["auto", "manual"]
    allowed_domains: list[str]
    data_public: bool
    team_size_cap: Optional[int]
    join_needs_captain: bool
    anonymous_board: bool
    terms_version: int = Field(description="Raised whenever the terms page changes.")
    fact_fields: list[FactField]


class CompetitionOut(CompetitionSummary):
    """A competition with its pages, in their order, and its settings."""

    pages: list[CompetitionPageOut]
    settings: CompetitionSettingsOut
    role: Optional[str] = Field(
        None, description="Your role in it (owner, organizer, assessor, admin), if any."
    )
    registration: Optional[str] = Field(
        None, description="Your registration's status (pending, approved, ...), if any."
    )


class CompetitionCreate(Model):
    id: str = Field(pattern=SLUG, json_schema_extra={"examples": ["text-reuse-2027"]})
    title: str = Field(min_length=1, max_length=200, json_schema_extra={"examples": ["Reuse"]})
    state: CompetitionState = "draft"
    tasks: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Declared tasks that become its subtasks (each in one competition at most).",
    )

    _title = field_validator("title")(_one_line)


class CompetitionEdit(CompetitionSettings):
    """Only the fields sent change."""

    title: Optional[str] = Field(None, min_length=1, max_length=200)
    state: Optional[CompetitionState] = Field(None, json_schema_extra={"examples": ["visible"]})

    _title = field_validator("title")(_one_line)


class CompetitionPageSet(Model):
    """A page's new title and Markdown; `position` orders the pages (kept when left out)."""

    title: str = Field(min_length=1, max_length=200, json_schema_extra={"examples": ["Overview"]})
    body_markdown: str = Field(
        "", max_length=MAX_MARKDOWN, json_schema_extra={"examples": ["# The task\n\nFind reuse."]}
    )
    position: Optional[int] = Field(None, ge=0, le=10_000)

    _title = field_validator("title")(_one_line)


# ----------------------------------------------------------------------------- registrations

RegistrationStatus = Literal["pending", "approved", "rejected", "suspended", "banned"]
DecisionAction = Literal["approve", "reject", "suspend", "ban", "reinstate"]


class RegistrationIn(Model):
    """Register for a competition; a competition with terms needs `accept_terms: true` (of their
    current version)."""

    accept_terms: bool = Field(
        False, strict=True, json_schema_extra={"examples": [True]}, description="JSON true only."
    )
    terms_version: Optional[int] = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="The version of the terms you read (`current_terms_version`): accepting is "
        "refused (409 `terms_changed`) if they changed since.",
    )


class RegistrationOut(Out):
    """Your registration for a competition, and whether you may download and submit in it."""

    competition: str = Field(description="The competition's short id.")
    registered: bool = Field(description="Whether you have a registration at all.")
    status: Optional[RegistrationStatus] = Field(
        None, description="pending, approved, rejected, suspended or banned; null: none."
    )
    terms_version: int = Field(0, description="The version of the terms you accepted (0: none).")
    current_terms_version: int = Field(description="The terms' current version (0: no terms).")
    terms_url: Optional[str] = Field(None, description="The terms page's path, if there is one.")
    terms_accepted_at: Stamp = None
    registered_at: Stamp = None
    decided_at: Stamp = None
    reason: str = Field("", description="The organizers' reason for their decision.")
    mail_announcements: bool = True
    mail_runs: bool = False
    participating: bool = Field(description="Whether you may download and submit now.")
    code: str = Field("", description="Why not, as a stable name (e.g. terms_changed).")
    message: str = Field("", description="Why not, and what to do, in one line.")


class ParticipantOut(Out):
    """A person registered for a competition, as its organizers see them."""

    user_id: int
    email: str
    status: RegistrationStatus
    terms_version: int
    terms_accepted_at: Stamp
    team: Optional[str] = Field(description="Their team in this competition, if any.")
    registered_at: datetime
    decided_at: Stamp
    reason: str


class ParticipantList(Out):
    """A page of participants, newest registration first; `next_after` continues it."""

    items: list[ParticipantOut]
    next_after: Optional[int] = None


class ParticipantsQuery(PageQuery):
    status: Optional[RegistrationStatus] = None


class ParticipantDecision(Model):
    """An organizer's decision; reject, suspend and ban need a reason (the participant sees it)."""

    reason: str = Field("", max_length=500, json_schema_extra={"examples": ["shared the gold"]})

    _reason = field_validator("reason")(_no_control)


# ---------------------------------------------------------------------------- roles and invitations

RoleName = Literal["owner", "organizer", "assessor"]


class InviteCreate(Model):
    """Invite a person by email to a role in the competition."""

    email: str = Field(
        min_length=3, max_length=320, json_schema_extra={"examples": ["ada@example.org"]}
    )
    role: RoleName = Field(json_schema_extra={"examples": ["organizer"]})

    _email = field_validator("email")(_no_control)


class InviteOut(Out):
    """An invitation made: what happened to it (`status`) and, unless the role was granted at
    once, its signed link."""

    id: int
    competition: str
    email: str
    role: RoleName
    status: Literal["mailed", "granted", "link"] = Field(
        description="mailed: the link was queued by mail; granted: an account with that address "
        "has the role now (this server sends no mail); link: hand the link over yourself."
    )
    link: Optional[str] = Field(
        None,
        description="The signed link that accepts the invitation: only where you hand it over "
        "yourself (`link`); a mailed link goes to the address alone.",
    )
    expires_at: datetime
    message: str


class InviteAccept(Model):
    token: str = Field(min_length=1, max_length=2000, description="The token of the link.")


class InviteShown(Out):
    """What an invitation link offers."""

    competition: str
    title: str
    email: str
    role: RoleName
    expires_at: datetime
    yours: bool = Field(description="Whether it is for the signed-in account's address.")


class InviteAccepted(Out):
    competition: str
    title: str
    role: RoleName
    email: str


class RoleOut(Out):
    user_id: int
    email: str
    role: RoleName
    since: datetime


class PendingInvite(Out):
    id: int
    email: str
    role: RoleName
    created_at: datetime
    expires_at: datetime


class RolesOut(Out):
    """Who has which role in a competition, and its pending invitations."""

    competition: str
    people: list[RoleOut]
    invites: list[PendingInvite]
    may_change: bool = Field(description="Whether you may invite and revoke (an owner).")


class RoleRevoked(Out):
    competition: str
    email: str
    role: Optional[RoleName] = Field(None, description="The role taken away, if there was one.")
    invites_cancelled: int


# ----------------------------------------------------------------------------- announcements, mail


class AnnouncementCreate(Model):
    """An announcement: shown on the competition page and mailed to its approved participants
    (those who did not opt out)."""

    title: str = Field(
        min_length=1, max_length=200, json_schema_extra={"examples": ["Test data released"]}
    )
    body_markdown: str = Field(
        min_length=1,
        max_length=MAX_MARKDOWN,
        json_schema_extra={"examples": ["The test phase is open until **31 May**."]},
    )

    _title = field_validator("title")(_one_line)


class AnnouncementOut(Out):
    """An announcement, its Markdown and the sanitized HTML it renders to."""

    id: int
    competition: str
    title: str
    body_markdown: str
    html: str
    created_at: datetime
    recipients: int = Field(description="The participants it was mailed to.")


class MailPreferences(Model):
    """What a registered person is mailed in a competition; a field left out stays as it is."""

    announcements: Optional[bool] = Field(
        None, description="The organizers' announcements (on unless turned off)."
    )
    runs: Optional[bool] = Field(
        None, description="A notice when one of your runs is scored or fails (off unless on)."
    )
    pending_registrations: Optional[bool] = Field(
        None,
        description="Owners and organizers: an hourly digest of registrations waiting for a "
        "decision (on unless turned off).",
    )


class MailPreferencesOut(Out):
    competition: str
    announcements: bool
    runs: bool
    pending_registrations: Optional[bool] = Field(
        None, description="Owners and organizers only (left out for others)."
    )


# ----------------------------------------------------------------------------- bundles


class BundleForm(Model):
    """A competition bundle: a zip of `competition.yaml`, its pages and its tasks' files
    (`curl -F bundle=@bundle.zip`)."""

    bundle: bytes = Field(description="The bundle, a .zip (see the documentation's Bundles page).")
    update: Literal["0", "1"] = Field(
        "0",
        description="1: an edited bundle of an existing competition (its owners and organizers): "
        "each changed task gets a new version or its texts changed (docs/bundles.md).",
    )
    reason: str = Field("", max_length=2000, description="With update: why.")


class BundleQuery(Model):
    gold: Literal["0", "1"] = Field(
        "0", description="1: include the hidden gold (organizers; a clone needs it)."
    )


class CloneIn(Model):
    """A clone's short id; its tasks' ids get it as a suffix."""

    id: str = Field(pattern=SLUG, json_schema_extra={"examples": ["reuse-2028"]})


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


# ----------------------------------------------------------------------------- large uploads


class LargeUploadIn(Model):
    """A large file to send straight to the object store in parts."""

    phase: str | None = Field(None, description="Default: the open test phase, else dev.")
    filename: str = Field("", max_length=255, description="The file's name (its suffix counts).")
    size: int = Field(ge=1, description="Bytes; refused above the site's upload limit.")


class LargeUploadPart(Model):
    number: int
    url: str = Field(description="Presigned PUT URL of the part (valid 24 hours).")


class LargeUploadOut(Out):
    upload: str = Field(description="The signed ticket of this upload (resume and complete it).")
    part_size: int = Field(description="Bytes of every part but the last.")
    size: int
    parts: list[LargeUploadPart] = Field(description="The parts still to send, with their URLs.")
    done: list[int] = Field(description="Numbers of the parts the store holds already.")


class LargeUploadTicket(Model):
    upload: str


class LargeUploadComplete(UploadFields):
    """Finish a large upload: the ticket and the submission's fields (as a plain upload's)."""

    upload: str
