"""The database: the record of truth for users, teams, phases, submissions and scores.

Nothing is deleted for real: rows are hidden or marked removed, and organizer actions are logged.
"""

# (no `from __future__ import annotations` here: pydantic would evaluate every column's annotation
# from its text, a tenth of the time the tables take to load)
from datetime import datetime, timezone
from typing import Optional

from pydantic import ConfigDict, NaiveDatetime
from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


# Naive UTC throughout (sqlmodel >= 0.0.50 maps a bare `datetime` to an aware UTC type).
def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class TableModel(SQLModel):
    """The base of every table. Pydantic builds a table's validator and serializer when a row is
    first validated or dumped, not when the tables load: SQLModel makes and loads rows without
    them, so a local command (`palimpsest tokens create`) never builds the 29 schemas."""

    model_config = ConfigDict(defer_build=True)


class User(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    email: str = Field(index=True, unique=True, max_length=320)
    password_hash: str
    # a site administrator: creates competitions and acts in every one (the organizers of a
    # competition are its roles, `CompetitionRole`)
    is_admin: bool = False
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    # signed into every session cookie; raising it ends every earlier session (sign-out, password
    # change)
    session_epoch: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class Team(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=120)
    invite_code: str = Field(index=True, unique=True, max_length=64)
    is_baseline: bool = False
    # the competition the team was made in; None for a team of every competition (made before
    # teams were per competition, or through the account-wide team routes)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class TeamMember(TableModel, table=True):
    """A person in a team for one competition, or for every competition (`competition_id` None)
    where they have no membership of their own. One membership per person per competition (and one
    for every competition), checked in `server.domain.teams`."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    team_id: int = Field(foreign_key="team.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    role: str = Field(default="member", max_length=16)  # "captain" | "member"
    status: str = Field(default="active", max_length=16)  # "active" | "pending" (captain's yes)
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class ApiToken(TableModel, table=True):
    """An API token: shown once, stored as its sha256, revocable."""

    id: Optional[int] = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    token_sha256: str = Field(index=True, unique=True, max_length=64)
    prefix: str = Field(max_length=16)
    name: str = Field(default="", max_length=120)
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    last_used_at: Optional[NaiveDatetime] = None
    revoked_at: Optional[NaiveDatetime] = None


class Phase(TableModel, table=True):
    """A phase of a task (dev, test): its window, limits and the public/private gold split."""

    __table_args__ = (UniqueConstraint("task_id", "name"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=32)
    split: str = Field(max_length=16)
    opens_at: Optional[NaiveDatetime] = None
    closes_at: Optional[NaiveDatetime] = None
    # when the inputs of the phase's split may be downloaded (server.domain.releases); None: when
    # it opens
    inputs_at: Optional[NaiveDatetime] = None
    daily_limit: Optional[int] = 5
    total_limit: Optional[int] = 100
    concurrent_limit: Optional[int] = 2
    public_fraction: float = 1.0
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


class Submission(TableModel, table=True):
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
    # current one: not ranked, queued for rescoring (server.domain.provenance.check_provenance)
    stale: bool = False
    # the file of an invalid submission is deleted after the retention period (settings)
    file_purged_at: Optional[NaiveDatetime] = None


class CodeRun(TableModel, table=True):
    """A team's system (an archive with system.yaml) run blind on a phase's inputs in the sandbox
    (server.jobs.sandbox); its output becomes an ordinary submission, scored like an uploaded
    file."""

    id: Optional[int] = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", index=True)
    user_id: Optional[int] = Field(default=None, foreign_key="user.id")
    task_id: str = Field(index=True, max_length=64)
    phase_id: int = Field(foreign_key="phase.id", index=True)
    stage: str = Field(default="queued", index=True, max_length=16)  # queued running ran failed
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
    reviewed_at: Optional[NaiveDatetime] = None
    reviewed_by: Optional[int] = Field(default=None, foreign_key="user.id")


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


class AuditLog(TableModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    actor_id: Optional[int] = Field(default=None, foreign_key="user.id")
    action: str = Field(max_length=64, index=True)
    target: str = Field(default="", max_length=200)
    details: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    # the competition the change belongs to, so that its organizers read its log (None: site-wide)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    created_at: NaiveDatetime = Field(default_factory=utcnow, index=True)


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


class CompetitionRole(TableModel, table=True):
    """A person's role in a competition: "owner", "organizer" or "assessor"."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    role: str = Field(max_length=16)
    granted_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    # an owner's or organizer's hourly digest of registrations waiting for a decision (opt-out)
    mail_pending: bool = True


class CompetitionInvite(TableModel, table=True):
    """An invitation by email to a role in a competition; accepted through a signed link."""

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    email: str = Field(max_length=320, index=True)
    role: str = Field(max_length=16)
    invited_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    accepted_at: Optional[NaiveDatetime] = None
    accepted_by: Optional[int] = Field(default=None, foreign_key="user.id")
    revoked_at: Optional[NaiveDatetime] = None


class Registration(TableModel, table=True):
    """A participant's registration for a competition: the terms accepted (their version and
    when) and the organizers' decision."""

    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    competition_id: int = Field(foreign_key="competition.id", index=True)
    user_id: int = Field(foreign_key="user.id", index=True)
    # "pending" | "approved" | "rejected" | "suspended" | "banned"
    status: str = Field(default="pending", max_length=16, index=True)
    terms_version: int = 0
    terms_accepted_at: Optional[NaiveDatetime] = None
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    decided_at: Optional[NaiveDatetime] = None
    decided_by: Optional[int] = Field(default=None, foreign_key="user.id")
    reason: str = Field(default="", max_length=500)
    # mail: announcements (opt-out) and a notice when a run is scored or fails (opt-in)
    mail_announcements: bool = True
    mail_runs: bool = False


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


class OutgoingMail(TableModel, table=True):
    """A message waiting for the mail queue, or sent. `dedup_key` is unique, so that a message is
    queued once (an announcement to a person, a run's notice) and sent once."""

    id: Optional[int] = Field(default=None, primary_key=True)
    dedup_key: str = Field(index=True, unique=True, max_length=200)
    to_addr: str = Field(max_length=320)
    subject: str = Field(max_length=300)
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    kind: str = Field(default="", max_length=32)
    competition_id: Optional[int] = Field(default=None, foreign_key="competition.id", index=True)
    status: str = Field(default="queued", max_length=16, index=True)  # queued | sent | failed
    attempts: int = 0
    last_error: str = Field(default="", max_length=500)
    next_try_at: Optional[NaiveDatetime] = None
    created_at: NaiveDatetime = Field(default_factory=utcnow)
    sent_at: Optional[NaiveDatetime] = None
    # the sender that claimed the row ("host|pid|start time", server.jobs.outbox.sender_id): a dead
    # one
    # on the same machine is recognised at once, its rows queued again
    claimed_by: str = Field(default="", max_length=200)


class ThrottleCount(TableModel, table=True):
    """A fixed-window counter of the sign-in throttle, kept in the database while its Redis is away
    (server.web.throttle): one row per limit, key and window, shared by every process."""

    key: str = Field(primary_key=True, max_length=255)
    count: int = 0
    expires_at: NaiveDatetime = Field(index=True)


# ----------------------------------------------------------------------------- assessment campaigns


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


class TaskVersion(TableModel, table=True):
    """A version of a bundle task's declaration (`server.actions.tasks`): its metrics, primary,
    files or gold changed; every run scored under an earlier version is stale and rescored.
    The version a task was created with is recorded when a second one comes. `changes` says what
    changed; `effect` what the change did to each phase's live board (the ranks before, the runs
    marked stale and queued)."""

    __table_args__ = (UniqueConstraint("task_id", "version"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=64)
    version: int
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    changes: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    effect: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_by: Optional[int] = Field(default=None, foreign_key="user.id")
    created_at: NaiveDatetime = Field(default_factory=utcnow)


class TaskArchive(TableModel, table=True):
    """An archived task: its files and runs kept, its phases closed for good (no phase of it
    opens again, none is added)."""

    __table_args__ = (UniqueConstraint("task_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(max_length=64)
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))
    archived_by: Optional[int] = Field(default=None, foreign_key="user.id")
    archived_at: NaiveDatetime = Field(default_factory=utcnow)
