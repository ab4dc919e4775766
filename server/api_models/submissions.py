"""Submissions: the upload's fields, a submission, its scores, quotas."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema

from server.api_models.base import Model, Out, PageQuery, Problem, Stamp
from server.domain.bounds import CONTROL, one_line_problem, url_problem

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
    streamed). Text is stripped; the URL, when given, is http(s).

    The one declaration of what every upload carries: the web's form (server.web.forms) and the
    remote `submit`'s flags (cli.participant.submit) are built from these fields (`title`: the
    form's label; `description`: the flag's help; in `json_schema_extra`, `input`: the form's
    input type, `flag` and `flag_help`: a yes/no field's flag that sets it to no); the API reads
    its body into this model; what `row()` returns is what the run's row keeps (its columns, on
    server.models.Submission): every field but those acted on apart (`ACTED_ON`)."""

    model_config = ConfigDict(extra="ignore")

    # acted on, not kept as such: the phase chosen, the primary choice, a baseline's flag, the
    # fact sheet (checked against the competition's declared fields, kept as `facts`)
    ACTED_ON: ClassVar[frozenset[str]] = frozenset({"phase", "primary", "baseline", "facts"})

    phase: str | None = Field(None, description="Default: the open test phase, else dev.")
    method_name: str = Field(
        "", max_length=200, title="Method name", description="Name of your method."
    )
    description: str = Field(
        "", max_length=5000, title="Short description", description="A short description."
    )
    url: str = Field(
        "",
        max_length=500,
        title="Paper or code URL (optional)",
        description="Paper or code URL.",
        json_schema_extra={"input": "url"},
    )
    show_publicly: bool = Field(
        True,
        title="Show on the public leaderboard",
        description="A row on the public leaderboard (the command line's --private: no).",
        json_schema_extra={"flag": "--private", "flag_help": "Keep off the public leaderboard."},
    )
    primary: bool = Field(
        False,
        title="Make this our primary (ranked) run of the phase",
        description="Make this the team's primary (ranked) run of the phase.",
    )
    baseline: bool = Field(False, description="Organizers: record a baseline entry.")
    # fact sheets: the answers, sent as one form field `fact.<key>` each
    # (server.domain.facts.form_facts);
    # checked against the competition's declared fields by the submit action
    facts: SkipJsonSchema[dict[str, str]] = Field(default_factory=dict)

    @classmethod
    def carried(cls) -> list[str]:
        """The names of the fields the run's row keeps, in their declared order."""
        return [
            k for k in cls.model_fields if k not in cls.ACTED_ON and k in UploadFields.model_fields
        ]

    def row(self) -> dict:
        """What the run's row keeps of this upload (`carried()`: name -> value)."""
        return {k: getattr(self, k) for k in self.carried()}

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


class CodeRunReviewIn(Model):
    """An organizer's review of an ended run: the decision is always named (nothing is released
    by default)."""

    decision: Literal["release", "redact", "withhold"] = Field(
        description="`release`: the team reads what the review shows as it is (the log, the "
        "output's problems line by line, the run's figures); `redact`: the team reads `log` alone, "
        "the organizer's edited copy of that text (problems included); `withhold`: the team reads "
        "`note`.",
    )
    log: Optional[str] = Field(None, description="redact: the text the team may read.")
    note: str = Field("", max_length=2000, description="A note the team reads with the decision.")


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
    board: str | None = Field(
        None,
        max_length=200,
        description="One of the phase's boards (the phase's `boards` in the task's JSON; "
        'default "main"); 404 naming the boards that exist for another.',
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
    status: Literal["submitted", "queued", "running", "scored", "failed"]
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
    size: Optional[int] = Field(
        description="Bytes (not shown to the team of a blind run's output until it is released)."
    )
    sha256: Optional[str] = Field(description="The file's sha256 (likewise).")
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
        None,
        description="True for a run removed by its team or the organizers: kept, listed and "
        "readable, marked; `hidden_reason` says why (server.domain.submissions.team_runs).",
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
    stage: Literal["submitted", "queued", "running", "ran", "failed"]
    category: str = Field(
        "",
        description="The run's result, one of a fixed set: submitted (not known, or not shown "
        "yet), valid and scored, invalid output, failed: a limit, failed: the system, server "
        "failure (with its scores, all a team reads of a blind run until an organizer releases "
        "it as it is).",
    )
    failure_kind: Optional[Literal["code", "infra"]] = None
    reason: str = ""
    attempts: int
    created: Stamp
    held_until: Stamp = Field(
        None,
        description="A queued run's inputs are released then: it is held until that date and "
        "runs then, never before (none: not held).",
    )
    started: Stamp = None
    finished: Stamp = None
    command: list[str]
    resources: dict = Field(
        default_factory=dict,
        description="What the run used: status, exit_code, wall_seconds, cpu_seconds, "
        "peak_rss_mb, output_bytes.",
    )
    cpu_seconds: Optional[float] = Field(
        None, description="CPU seconds used (not shown to the team of an unreleased blind run)."
    )
    kernel_limits: Optional[bool] = Field(
        None,
        description="True: the run's limits and accounting were the kernel's (a cgroup per run); "
        "false: the weaker limits of a worker without cgroups (docs/blind-runs.md); none: not run.",
    )
    submission: Optional[int] = Field(None, description="The submission its output became.")
    submission_status: Optional[Literal["queued", "running", "scored", "failed"]] = Field(
        None, description="That submission's status: its output validated and scored, or not."
    )
    blind: bool
    reviewed: bool
    release: Optional[Literal["release", "redact", "withhold"]] = Field(
        None, description="The review's decision on the log: as it is, redacted, or withheld."
    )
    review_note: str = Field("", description="The organizer's note (why a log is withheld).")
    log: Optional[str] = Field(None, description="stdout and stderr (their ends), when allowed.")
    log_hidden: bool = Field(
        False, description="The log waits for an organizer's review, or was withheld."
    )
    redacted: bool = Field(False, description="The log shown is the organizer's redacted copy.")
    review_text: Optional[str] = Field(
        None,
        description="Organizers only: everything a release as it is gives the team (its result, "
        "figures, the output's problems line by line, the log), the text a redaction edits.",
    )
    scores: Optional[dict] = Field(
        None,
        description="A gated blind run's scores once shown: {part: {subset: {metric: value}}} "
        "on the parts its team may see.",
    )


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


class PrimaryChoice(Model):
    board: Optional[str] = Field(
        None,
        max_length=64,
        description="A declared board of the phase: the run becomes your team's ranked run on "
        'that board (absent or "main": your primary run of the phase).',
    )
    reason: Optional[str] = Field(
        None,
        max_length=500,
        description="An organizer of the task choosing for the run's team (a team that asked by "
        "mail): why, kept in the audit log. Absent: the team's own choice.",
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


class TrackMove(Model):
    track: str = Field(
        min_length=1,
        max_length=200,
        description="The track to move the run to: a choice of the competition's track field.",
        json_schema_extra={"examples": ["A"]},
    )
    reason: str = Field(
        min_length=1,
        max_length=500,
        description="Why (recorded in the audit log).",
        json_schema_extra={"examples": ["declared B but trained on the eng training file"]},
    )
    field: Optional[str] = Field(
        None,
        max_length=40,
        description="The track field's key when the competition has several choice fields "
        "(default: `track`, else its only choice field).",
    )


class RunWorkerTokenIn(Model):
    """A run worker's token: for one competition (its organizers), or for a set of competitions or
    the whole site (administrators: `competitions` empty)."""

    name: str = Field("", max_length=120, description="What the token is for (a machine's name).")
    competitions: list[int] = Field(
        default_factory=list,
        description="The competitions (ids) whose runs it claims; empty: every competition "
        "(administrators only).",
        examples=[[1]],
    )
    pools: list[str] = Field(
        default_factory=lambda: ["cpu", "gpu"],
        description="The pools of runs it claims: `cpu`, `gpu` or an organizer's own pool.",
    )


class RunWorkerTokenOut(Out):
    """A run worker's token (its secret only in the answer that made it)."""

    id: int
    name: str
    prefix: str
    competitions: list[int]
    pools: list[str]
    created: Stamp
    last_seen: Optional[Stamp] = None
    revoked: Optional[Stamp] = None
    token: Optional[str] = Field(None, description="The secret, shown once.")
    released: list[int] = Field(
        default_factory=list, description="revocation: the runs it held, queued again at once."
    )


class RunWorkerTokensOut(Out):
    tokens: list[RunWorkerTokenOut]


class WorkerFile(Out):
    """A file of a claimed run: where it goes in the run's folder, and a link that fetches it
    (with the token) for a few minutes, naming this one file of this attempt."""

    path: str = Field(description="`code.zip`, or `input/<name>` (the system's `/input`).")
    url: str


class WorkerClaimOut(Out):
    """The run an attached worker claimed (none when nothing waits for it: `run` null)."""

    run: Optional[int] = None
    attempt: Optional[int] = None
    lease_seconds: Optional[float] = None
    heartbeat_every: Optional[float] = None
    task: Optional[str] = None
    command: list[str] = Field(default_factory=list)
    limits: dict[str, Any] = Field(
        default_factory=dict,
        description="The sandbox's limits for this run (`server.jobs.sandbox.Limits`): what its "
        "manifest asks, capped by the site, exactly as a site worker applies them.",
    )
    files: list[WorkerFile] = Field(default_factory=list)
    result_url: Optional[str] = Field(
        None,
        description="Where the run's result is posted (`POST`, multipart: `result`, `output`), "
        "for a few minutes; each heartbeat gives a fresh one.",
    )


class WorkerHeartbeatOut(Out):
    run: int
    attempt: int = 0
    lease_seconds: float
    result_url: Optional[str] = Field(
        None, description="A fresh link for the run's result (a few minutes)."
    )


class WorkerResultIn(Model):
    """How an attached worker's run ended, as `server.jobs.execute.execute` says: `ok` (its
    output file posted beside), `code` (the system's failure: a limit, an exit, no output;
    counted), `infra` (the sandbox itself failed, or the archive could not be unpacked: the
    server's failure, not counted); the kernel's counters and the log as the site keeps them."""

    kind: Literal["ok", "code", "infra"]
    status: str = Field("", max_length=32, description="The sandbox's status (`ok`, `timeout`...).")
    reason: str = Field("", max_length=2000)
    exit_code: Optional[int] = Field(None, ge=-(2**31), le=2**31 - 1)
    wall_seconds: float = Field(0.0, ge=0, le=1e7)
    cpu_seconds: float = Field(0.0, ge=0, le=1e8)
    peak_rss_mb: float = Field(0.0, ge=0, le=1e8)
    output_bytes: int = Field(0, ge=0, le=2**40)
    cgroup: bool = False
    log: str = Field("", max_length=400_000)

    def counters(self) -> dict:
        """The run's record of what it used (`CodeRun.outcome`), as a site worker writes it."""
        return {
            k: getattr(self, k)
            for k in (
                "status", "exit_code", "wall_seconds", "cpu_seconds", "peak_rss_mb",
                "output_bytes", "cgroup",
            )
        }  # fmt: skip


class WorkerResultForm(Model):
    """An attached worker's result (`multipart/form-data`): `result`, the JSON of
    `WorkerResultIn`; `output`, the run's output file (a run that ended `ok`)."""

    result: str = Field(description="`WorkerResultIn` as JSON.")
    output: Optional[bytes] = Field(None, description="The run's output file (`ok` only).")


class WorkerResultOut(Out):
    """The result recorded: the run's stage, and its submission when its output was taken (then
    validated, scored and reviewed as every run's)."""

    run: int
    stage: str
    submission: Optional[int] = None
