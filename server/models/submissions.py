"""Submissions (uploaded files and systems run on the server) and their scores."""

# (no `from __future__ import annotations`: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from typing import Optional

from pydantic import NaiveDatetime
from sqlalchemy import JSON, BigInteger, Column, Index, Text, UniqueConstraint
from sqlmodel import Field

# the tables its foreign keys name: SQLAlchemy resolves them when it sorts a flush
import server.models.accounts  # noqa: F401
import server.models.people  # noqa: F401
import server.models.phases  # noqa: F401
from server.models.base import TableModel, utcnow


class Submission(TableModel, table=True):
    """A prediction file and its fate: queued, running, scored or failed (with every message)."""

    # a phase's first queued run, claimed by a scoring job (lifecycle.claim_queued), from here
    __table_args__ = (Index("ix_submission_queue", "phase_id", "status", "id"),)

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
    # the fact sheet: the competition's declared fields (Competition.fact_fields), key -> value
    facts: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    show_publicly: bool = True
    is_primary: bool = False
    is_baseline: bool = False
    hidden: bool = False
    hidden_reason: str = Field(default="", max_length=500)
    removed_at: Optional[NaiveDatetime] = None
    # removed by its own team (deleted on its pages): it still counts against the quota
    removed_by_team: bool = False
    # the counted scores were computed against another gold, task or scorer version than the
    # current one: not ranked, queued for rescoring (server.domain.provenance.mark_stale)
    stale: bool = False
    # the file of an invalid submission is deleted after the retention period (settings)
    file_purged_at: Optional[NaiveDatetime] = None
    # the output of an archived system re-run on this phase (server.actions.reruns): the code run
    # first uploaded (of this or another phase or task); its board row stands beside the team's own
    # (its id, not a foreign key: a code run already names its submission, and the two tables stay
    # in one order for a restore)
    rerun_of: Optional[int] = Field(default=None, index=True)


class CodeRun(TableModel, table=True):
    """A team's system (an archive with system.yaml) run blind on a phase's inputs in the sandbox
    (server.jobs.sandbox); its output becomes an ordinary submission, scored like an uploaded
    file."""

    # a pool's queued runs of one competition, first by id (server.domain.run_queue.claim); a
    # phase's runs by the moment they are shown (server.domain.shown)
    __table_args__ = (
        Index("ix_code_run_queue", "stage", "pool", "competition_id", "id"),
        Index("ix_coderun_shown", "phase_id", "shown_at"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", index=True)
    user_id: Optional[int] = Field(default=None, foreign_key="user.id")
    task_id: str = Field(index=True, max_length=64)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    stage: str = Field(default="queued", index=True, max_length=16)  # queued running ran failed
    # the queue it waits in: its competition's (0: a task in none) in its pool ("cpu", "gpu" or
    # the name of an organizer's own pool), served round-robin across competitions
    competition_id: int = 0
    pool: str = Field(default="cpu", max_length=32)
    # who runs it now ("job:<RQ job id>" or "token:<id>") and until when, unless it renews the
    # lease (its heartbeat); an expired lease is the reconciler's to take back
    held_by: str = Field(default="", max_length=64)
    lease_until: Optional[NaiveDatetime] = None
    failure_kind: Optional[str] = Field(default=None, max_length=16)  # "code" | "infra"
    reason: str = Field(default="", max_length=500)
    attempts: int = 0
    archive_sha256: str = Field(max_length=64)
    storage_key: str = Field(default="", max_length=120)
    file_name: str = Field(default="", max_length=255)
    size: int = 0
    manifest: dict = Field(default_factory=dict, sa_column=Column(JSON))
    # the upload's fields (method, description, url, public, primary, facts), for the submission
    fields: dict = Field(default_factory=dict, sa_column=Column(JSON))
    outcome: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    log: str = Field(default="", sa_column=Column(Text))
    cpu_seconds: float = 0.0
    # the submission its output became (two systems writing the same file share one, counted once)
    submission_id: Optional[int] = Field(default=None, foreign_key="submission.id", index=True)
    is_baseline: bool = False
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)
    started_at: Optional[NaiveDatetime] = None
    finished_at: Optional[NaiveDatetime] = None
    # when a blind run's result becomes visible to its team and on the boards, fixed when it is
    # submitted (server.domain.code_runs.shown_from); None: computed from the run
    shown_at: Optional[NaiveDatetime] = None
    reviewed_at: Optional[NaiveDatetime] = None
    reviewed_by: Optional[int] = Field(default=None, foreign_key="user.id")
    # the review's decision on a blind phase (server.domain.code_runs): "release" (the log as it
    # is), "redact" (`released_log`, the organizer's copy) or "withhold" (`review_note` says why)
    release: Optional[str] = Field(default=None, max_length=16)
    released_log: str = Field(default="", sa_column=Column(Text))
    review_note: str = Field(default="", max_length=2000)
    # CPU seconds reserved against the compute budget while the run waits or runs (its declared
    # CPU limit), settled to `cpu_seconds` when it ends
    reserved_cpu: float = 0.0
    # an organizer's re-run of an archived system on this phase (server.actions.reruns): the code
    # run first uploaded, whose archive this one runs; None for a team's own upload
    rerun_of: Optional[int] = Field(default=None, foreign_key="coderun.id", index=True)


class RunQueueTurn(TableModel, table=True):
    """A competition's place in a pool's round-robin: the pool serves next the competition with
    queued runs that it served least recently (`served`: when, in nanoseconds; 0: never)."""

    pool: str = Field(primary_key=True, max_length=32)
    competition_id: int = Field(primary_key=True)
    served: int = Field(default=0, sa_type=BigInteger)


class RunWorkerToken(TableModel, table=True):
    """A run worker's token: an organizer's for one competition, an administrator's for a set of
    competitions or the whole site (`competition_ids` empty); it claims code runs of those
    competitions in `pools` over the API, nothing else. Shown once, stored as its sha256,
    revocable (its runs released at once)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    token_sha256: str = Field(index=True, unique=True, max_length=64)
    prefix: str = Field(max_length=16)
    name: str = Field(default="", max_length=120)
    competition_ids: list = Field(default_factory=list, sa_column=Column(JSON))
    pools: list = Field(default_factory=list, sa_column=Column(JSON))
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    last_seen_at: Optional[NaiveDatetime] = None
    revoked_at: Optional[NaiveDatetime] = None


class Score(TableModel, table=True):
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


class BoardChoice(TableModel, table=True):
    """A team's ranked run on one of a phase's declared boards, chosen by the team (never by a
    score); without one, the board ranks the team's primary run where it enters, else its latest
    that does. The default board ("main") ranks the team's primary run (Submission.is_primary)."""

    __table_args__ = (UniqueConstraint("phase_id", "team_id", "board"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    team_id: int = Field(foreign_key="team.id")
    board: str = Field(max_length=32)
    submission_id: int = Field(foreign_key="submission.id")
    chosen_at: NaiveDatetime = Field(default_factory=utcnow)
