"""Creating submissions: store the file, lock the team, check the limits, insert the row; the
caller's action commits (and queues its scoring once committed).

Limits are counted per team and phase under a lock on the team's row (SELECT ... FOR UPDATE on
PostgreSQL, BEGIN IMMEDIATE on SQLite: `server.db.lock_row`), held until the action's transaction
ends, so parallel uploads cannot overrun them. Only
submissions that are scored, or still may be (queued, running), count: a file that fails
validation or a job that fails for the server's reasons costs the team nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import BinaryIO

import sqlmodel
from sqlalchemy import and_, bindparam, func, or_, select, true
from sqlmodel import Session

from server import models, objectstore  # models.X: other subjects' tables, loaded when first used
from server.db import before_commit, lock_row, on_rollback
from server.domain import people
from server.domain.bounds import url_problem

# the statuses and the phase window are the lifecycle's; importable from here as before
from server.domain.lifecycle import (  # noqa: F401
    COUNTED,
    PENDING,
    Status,
    create_phase,
    phase_state,
    set_primary,
)
from server.domain.provenance import public_result
from server.domain.visibility import HIDDEN, ORGANIZER, TEAM, Viewer, may_see
from server.exceptions import (
    DuplicateSubmission,
    LimitReached,
    NotFound,
    PhaseClosed,
    SubmissionRefused,
)
from server.models import User, utcnow
from server.settings import Settings, get_settings
from server.storage import path_for, write_upload
from tasks import all_tasks
from tasks.store import TaskStore


def _fmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


def visible_scores(
    session: Session, sub: models.Submission, phase: models.Phase | None, *, organizer: bool
) -> list[models.Score]:
    """The Score rows of a submission's counted scoring that a viewer entitled to its details may
    see: the private part only after publication (organizers always)."""
    scores = (
        session.execute(
            select(models.Score)
            .where(models.Score.submission_id == sub.id)
            .order_by(models.Score.attempt, models.Score.part)
        )
        .scalars()
        .all()
    )
    viewer = Viewer(ORGANIZER) if organizer else Viewer(TEAM, sub.team_id)
    counted = sub.score_attempt or max((sc.attempt for sc in scores), default=None)
    return [
        sc
        for sc in scores
        if sc.attempt == counted and may_see(viewer, phase, sub.created_at, sc.part)
    ]


@dataclass(frozen=True)
class ShownScore:
    """A Score row as one viewer may see it (`result`: the participant's view of it, or the
    organizers' whole one)."""

    part: str
    attempt: int
    result: dict
    created_at: datetime
    primary_value: float | None


def shown_scores(
    session: Session,
    user: User | None,
    sub: models.Submission,
    phase: models.Phase | None,
    secret: str,
) -> list[ShownScore]:
    """What `user` may see of a submission's counted scores, for the web page and the API alike:
    the private part only after publication (its organizers always), and for anyone but its
    organizers the gold named by its keyed id, never by its sha256."""
    organizer = people.organizes_task(session, user, sub.task_id)
    # a phase with a release rule (scorer.release) shows its runs' live scores only as the board
    # releases them: until publication no one but its organizers reads a run's exact score
    released = (
        not organizer and phase is not None and phase.release_rule and phase.published_at is None
    )
    return [
        ShownScore(sc.part, sc.attempt, WITHHELD_SCORE, sc.created_at, None)
        if released and sc.part not in HIDDEN
        else ShownScore(
            sc.part,
            sc.attempt,
            sc.result if organizer else public_result(sc.result, secret),
            sc.created_at,
            sc.primary_value,
        )
        for sc in visible_scores(session, sub, phase, organizer=organizer)
    ]


WITHHELD_SCORE = {
    "primary": {"value": None},
    "metrics": {},
    "notes": [],
    "withheld": "this phase's release rule shows each team's public score on the live board as "
    "it releases it (the ladder, or rounded); the run's exact score is shown at publication",
}


def day_start(now: datetime) -> datetime:
    """The start of the UTC day the daily limit counts in (it resets at 00:00 UTC)."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def resolve_phase(session: Session, task_id: str, phase: models.Phase | str | int) -> models.Phase:
    if isinstance(phase, models.Phase):
        found = session.get(models.Phase, phase.id)
    elif isinstance(phase, int):
        found = session.get(models.Phase, phase)
    else:
        found = session.execute(
            select(models.Phase).where(models.Phase.task_id == task_id, models.Phase.name == phase)
        ).scalar_one_or_none()
    if found is None or found.task_id != task_id:
        raise NotFound(f"task {task_id!r} has no phase {getattr(phase, 'name', phase)!r}")
    return found


def lock_team(session: Session, team_id: int) -> None:
    """Serialize the uploads of one team until the action's transaction ends (a row lock on
    PostgreSQL, the write lock on SQLite); nothing is committed."""
    lock_row(session, models.Team, team_id)


def store(
    session: Session,
    settings: Settings,
    stream: bytes | BinaryIO,
    filename: str,
    max_bytes: int,
    *,
    in_place: bool = True,
) -> tuple[str, str, int]:
    """Store an upload (content-addressed) in the data directory and, when the site has one, the
    object store, before any row names it; returns (storage_key, sha256, size). Should the
    session's transaction roll back (a refusal, a failure, an unreachable store), the file goes
    again unless a committed row names it. Not `in_place` (a prediction file, which nothing reads
    before the commit): made durable under its name in a thread while the intake reads and writes
    the database, and waited for before the session commits (`server.storage.write_upload`); on
    a site with a store, put into the store after that in another thread, and waited for before
    the commit too (a failed push stops it). Raises UploadTooLarge, StoreUnreachable (at once, or
    from the commit)."""
    session.connection()  # the transaction the undo hangs on is open
    on_store = objectstore.store_for(settings) is not None
    small = None  # a small prediction file's bytes, put into a site's store from memory
    if not in_place and on_store:
        stream, small = _whole_if_small(stream, objectstore.ASK_FIRST_ABOVE)
    key, sha, size, synced = write_upload(settings.home, stream, filename, max_bytes)
    on_rollback(
        session,
        functools.partial(_drop_unnamed, session.get_bind(), settings.home, key, synced),
    )
    if in_place:
        synced()
        objectstore.push_upload(settings, key)
    elif not on_store:
        before_commit(session, synced)
    elif small is not None:  # into the store from memory while the file is made durable here
        before_commit(session, synced)
        before_commit(session, objectstore.push_bytes_soon(settings, key, small))
    else:  # into the store once in place, both while the intake does its database work
        before_commit(session, objectstore.push_upload_soon(settings, key, synced))
    return key, sha, size


class _Rest:
    """A stream read on from bytes already read off it (`_whole_if_small`)."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self.head, self.rest = head, rest

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:  # the rest, whole
            got, self.head = self.head + self.rest.read(), b""
            return got
        got, self.head = self.head[:n], self.head[n:]
        return got + self.rest.read(n - len(got)) if len(got) < n else got


def _whole_if_small(stream: bytes | BinaryIO, limit: int) -> tuple[bytes | BinaryIO, bytes | None]:
    """(a stream of the same bytes, the bytes themselves when there are at most `limit`)."""
    if isinstance(stream, (bytes, bytearray, memoryview)):
        data = bytes(stream)
        return data, data if len(data) <= limit else None
    head = stream.read(limit + 1)
    if len(head) <= limit:
        return head, head
    return _Rest(head, stream), None


def _drop_unnamed(engine, home, key: str, synced=None) -> None:
    """After a rollback: remove a stored upload no committed submission or code run names (once
    it is in place: `synced`)."""
    if synced is not None:
        try:
            synced()
        except Exception:  # noqa: BLE001 — not in place: nothing to remove but what is there
            pass
    with Session(engine) as own:
        named = any(
            own.execute(select(t.id).where(t.storage_key == key).limit(1)).first()
            for t in (models.Submission, models.CodeRun)
        )
    if not named:
        path_for(home, key).unlink(missing_ok=True)


def team_runs(team_ids, *, task: str | None = None, status: str | None = None):
    """The one rule for a team's run list (the web's pages, the API's list, the CLI through it):
    every run of these teams, removed ones included and marked (`removed_at`; `hidden_reason`
    says why), so that a team can read why the organizers took a run off; the outputs of blind
    runs not released as they are left out. A query of the runs to page on (its `whereclause` to
    join them to more)."""
    q = sqlmodel.select(models.Submission).where(models.Submission.team_id.in_(list(team_ids)))
    # a blind run's output not released as it is stays off the list: when it appeared would
    # tell when the run ended (its run's page shows it, `code_runs.team_view`)
    gated = (
        sqlmodel.select(models.CodeRun.submission_id)
        .join(models.Phase, models.Phase.id == models.CodeRun.phase_id)
        .where(
            models.Phase.blind.is_(True),
            models.CodeRun.submission_id.is_not(None),
            or_(models.CodeRun.release.is_(None), models.CodeRun.release != "release"),
        )
    )
    q = q.where(models.Submission.id.not_in(gated))
    if task:
        q = q.where(models.Submission.task_id == task)
    if status:
        q = q.where(models.Submission.status == status)
    return q


# a run removed by an organizer gives its slot back; one its team deleted keeps it (deleting and
# uploading again would otherwise score the hidden gold without end)
def counts_against_quota():
    # an organizer's re-run of an archived system (`rerun_of`) is not the team's upload
    return and_(
        or_(models.Submission.removed_at.is_(None), models.Submission.removed_by_team.is_(True)),
        models.Submission.rerun_of.is_(None),
    )


def code_runs_counted(
    session: Session, team_id: int, phase_id: int, *, pending_only: bool = False, since=None
) -> int:
    """Code runs that count against a phase's limits and have no submission (yet): those waiting
    or running, and (unless `pending_only`) those that failed because of their code; a run that
    failed because of the server never counts, and one that ran counts as its submission."""
    stage = models.CodeRun.stage.in_(("queued", "running"))
    if not pending_only:
        stage = stage | (
            (models.CodeRun.stage == "failed") & (models.CodeRun.failure_kind == "code")
        )
    q = select(func.count(models.CodeRun.id)).where(
        models.CodeRun.team_id == team_id,
        models.CodeRun.phase_id == phase_id,
        models.CodeRun.submission_id.is_(None),
        models.CodeRun.rerun_of.is_(None),  # the organizers', not the team's
        stage,
    )
    if since is not None:
        q = q.where(models.CodeRun.created_at >= since)
    return session.execute(q).scalar_one()


def limit_counts(
    session: Session, team_id: int, phase: models.Phase, now: datetime, sha: str | None = None
) -> dict:
    """What `check_limits`, `check_invalid_limit` and `duplicate_of` (a file's) count, read in
    one query: the team's runs of the phase waiting or running, counted, counted today (each with
    the code runs that count so), invalid files today, and with `sha` the earlier upload of those
    bytes that still stands (its id, or None)."""
    params = {"team_id": team_id, "phase_id": phase.id, "start": day_start(now)}
    if sha is not None:
        params["sha"] = sha
    return _counts_of(session.execute(_limits_statement(sha is not None), params).one())


def phase_and_counts(
    session: Session, team_id: int, phase_id: int, now: datetime, sha: str | None = None
) -> tuple[models.Phase, dict]:
    """The phase read again (what the session holds of it replaced: its dates and limits as
    committed now) and `limit_counts`, in one query."""
    params = {"team_id": team_id, "phase_id": phase_id, "start": day_start(now)}
    if sha is not None:
        params["sha"] = sha
    row = session.execute(
        _limits_statement(sha is not None, with_phase=True),
        params,
        execution_options={"populate_existing": True},
    ).one()
    return row[0], _counts_of(row)


def _counts_of(row) -> dict:
    got = row._mapping
    return {
        "pending": got["pending"] + got["code_pending"],
        "counted": got["counted"] + got["code_counted"],
        "today": got["today"] + got["code_today"],
        "invalid": got["invalid"],
        "same": got.get("same"),
    }


@functools.cache
def _limits_statement(with_sha: bool, with_phase: bool = False):
    """`limit_counts`' query, built once (its parameters bound at each call); `with_phase`: the
    phase's row first (`phase_and_counts`)."""
    S, C = models.Submission, models.CodeRun
    team, phase, start = bindparam("team_id"), bindparam("phase_id"), bindparam("start")
    quota = counts_against_quota()
    pending = S.status.in_(PENDING)
    counted = S.status.in_(COUNTED)
    invalid = (S.status == Status.FAILED.value) & (S.failure_kind == "invalid")

    def runs(*conds):
        return func.count(S.id).filter(*conds)

    def code(*conds):
        return (
            select(func.count(C.id))
            .where(C.team_id == team, C.phase_id == phase, C.submission_id.is_(None))
            .where(C.rerun_of.is_(None), *conds)  # a re-run is the organizers', not the team's
            .scalar_subquery()
        )

    waiting = C.stage.in_(("queued", "running"))
    charged = waiting | ((C.stage == "failed") & (C.failure_kind == "code"))
    cols = [
        runs(quota, pending).label("pending"),
        runs(quota, counted).label("counted"),
        runs(quota, counted, S.created_at >= start).label("today"),
        runs(S.created_at >= start, invalid).label("invalid"),
        code(waiting).label("code_pending"),
        code(charged).label("code_counted"),
        code(charged, C.created_at >= start).label("code_today"),
    ]
    if with_sha:
        stands = (S.file_sha256 == bindparam("sha")) & S.removed_at.is_(None)
        stands = stands & (S.failure_kind.is_(None) | (S.failure_kind != "infra"))
        cols.append(func.min(S.id).filter(stands).label("same"))
    counts = select(*cols).select_from(S).where(S.team_id == team, S.phase_id == phase)
    if not with_phase:
        return counts
    counts = counts.subquery("counts")  # an aggregate: one row, whatever the runs
    P = models.Phase
    return select(P, *counts.c).join_from(P, counts, true()).where(P.id == phase)


def check_limits(
    session: Session, team_id: int, phase: models.Phase, now: datetime, counts: dict | None = None
) -> None:
    """Raise PhaseClosed or LimitReached, saying why and when the next submission is allowed
    (`counts`: `limit_counts` read already)."""
    if phase.opens_at and now < phase.opens_at:
        raise PhaseClosed(
            f"the {phase.name} phase of {phase.task_id} opens at {_fmt(phase.opens_at)}",
            phase.opens_at,
        )
    if phase.closes_at and now >= phase.closes_at:
        raise PhaseClosed(
            f"the {phase.name} phase of {phase.task_id} closed at {_fmt(phase.closes_at)}; "
            "no further submissions are accepted",
            None,
        )

    def count(*conds, pending_only: bool = False, since=None, key: str = "") -> int:
        if counts is not None:
            return counts[key]
        return session.execute(
            select(func.count(models.Submission.id)).where(
                models.Submission.team_id == team_id,
                models.Submission.phase_id == phase.id,
                counts_against_quota(),
                *conds,
            )
        ).scalar_one() + code_runs_counted(
            session, team_id, phase.id, pending_only=pending_only, since=since
        )

    if phase.concurrent_limit is not None:
        n = count(models.Submission.status.in_(PENDING), pending_only=True, key="pending")
        if n >= phase.concurrent_limit:
            raise LimitReached(
                f"your team has {n} submission(s) waiting or running in the {phase.name} phase "
                f"(limit {phase.concurrent_limit} at once); submit again when one of them has "
                "finished",
                None,
                "concurrent",
            )
    if phase.total_limit is not None:
        n = count(models.Submission.status.in_(COUNTED), key="counted")
        if n >= phase.total_limit:
            raise LimitReached(
                f"your team has used all {phase.total_limit} submissions of the {phase.name} phase "
                f"({n} scored or pending); only a failed pending one would free a slot",
                None,
                "total",
            )
    if phase.daily_limit is not None:
        start = day_start(now)
        n = count(
            models.Submission.status.in_(COUNTED),
            models.Submission.created_at >= start,
            since=start,
            key="today",
        )
        if n >= phase.daily_limit:
            nxt = start + timedelta(days=1)
            if phase.closes_at and nxt >= phase.closes_at:
                raise LimitReached(
                    f"your team has used today's {phase.daily_limit} submissions of the "
                    f"{phase.name} phase and the phase closes at {_fmt(phase.closes_at)} before "
                    "the daily reset",
                    None,
                    "daily",
                )
            raise LimitReached(
                f"your team has used today's {phase.daily_limit} submissions of the {phase.name} "
                f"phase ({n} scored or pending); the next is allowed at {_fmt(nxt)} (the daily "
                "limit resets at 00:00 UTC), or sooner if a pending one fails",
                nxt,
                "daily",
            )


def check_invalid_limit(
    session: Session,
    team_id: int,
    phase: models.Phase,
    now: datetime,
    settings: Settings,
    counts: dict | None = None,
) -> None:
    """Invalid files cost no quota, but not without end: after `invalid_daily_limit` of them in a
    UTC day the team is asked to validate offline first."""
    limit = settings.invalid_daily_limit
    if limit is None:
        return
    start = day_start(now)
    if counts is not None:
        n = counts["invalid"]
    else:
        n = session.execute(
            select(func.count(models.Submission.id)).where(
                models.Submission.team_id == team_id,
                models.Submission.phase_id == phase.id,
                models.Submission.created_at >= start,
                models.Submission.status == Status.FAILED.value,
                models.Submission.failure_kind == "invalid",
            )
        ).scalar_one()
    if n >= limit:
        nxt = start + timedelta(days=1)
        raise LimitReached(
            f"your team has uploaded {n} invalid files in the {phase.name} phase today (limit "
            f"{limit}); check your file offline with `palimpsest validate {phase.task_id} FILE` "
            f"first; the count resets at {_fmt(nxt)}",
            nxt,
            "invalid",
        )


def duplicate_of(
    session: Session, team_id: int, phase_id: int, sha: str, *, system: bool = False
) -> int | None:
    """The id of the team's earlier upload of these bytes in the phase (a submission, or with
    `system` a code run) that still stands: not removed, not failed for the server's reasons."""
    t = models.CodeRun if system else models.Submission
    sha_col = models.CodeRun.archive_sha256 if system else models.Submission.file_sha256
    q = select(t.id).where(
        t.team_id == team_id,
        t.phase_id == phase_id,
        sha_col == sha,
        t.failure_kind.is_(None) | (t.failure_kind != "infra"),
    )
    if not system:
        q = q.where(models.Submission.removed_at.is_(None))
    return session.execute(q.order_by(t.id).limit(1)).scalars().first()


def admit(
    session: Session,
    *,
    team_id: int,
    phase_id: int,
    sha: str,
    exempt: bool,
    settings: Settings,
    system: bool = False,
    dedupe: bool = True,
) -> tuple[models.Phase, int | None]:
    """What every upload goes through once it is stored: the team's lock (held until the action's
    transaction ends), then, read again under it, the same upload already taken (its id: counted
    once, nothing added) or the phase's limits (window, at once, total, daily, invalid files;
    a system's compute budget too) unless `exempt`. Returns the phase as read under the lock and
    the earlier upload's id, or None."""
    lock_team(session, team_id)
    now = utcnow()
    counts = None
    if system:
        ph = session.get(models.Phase, phase_id, populate_existing=True)
        same = duplicate_of(session, team_id, phase_id, sha, system=system) if dedupe else None
        if same is not None:
            return ph, same
    else:  # a file's: the phase, the duplicate and every count in one query
        ph, counts = phase_and_counts(session, team_id, phase_id, now, sha if dedupe else None)
        if counts["same"] is not None:
            return ph, counts["same"]
    if not exempt:
        check_limits(session, team_id, ph, now, counts)
        check_invalid_limit(session, team_id, ph, now, settings, counts)
        if system:
            check_compute(session, team_id, ph)
    return ph, None


def check_compute(session: Session, team_id: int, phase: models.Phase) -> None:
    """Raise LimitReached once what a team's systems used, with the CPU limit each run still
    waiting or running holds reserved, reaches the phase's compute budget."""
    budget = phase.compute_budget_seconds
    if budget is not None and compute_used(session, team_id, phase.id) >= budget:
        raise LimitReached(
            f"your team has used its compute budget of {budget} CPU seconds in the "
            f"{phase.name} phase",
            None,
            "compute",
        )


def exempt_from_limits(
    session: Session,
    *,
    user: User | None,
    team: models.Team,
    task_id: str,
    baseline: bool = False,
) -> bool:
    """The one rule that frees an upload from the phase's limits, for every intake: a baseline's
    run (asked as one, or its team's) or one its task's organizer uploads. (A run counted
    elsewhere, a blind system's output counted when the system was uploaded, or a seeded demo
    run, says so itself: `take_file(..., exempt=True)`.)"""
    return bool(baseline or team.is_baseline or people.organizes_task(session, user, task_id))


def take_file(
    session: Session,
    *,
    user: User | None,
    team: models.Team,
    task_id: str,
    phase: models.Phase | str | int,
    stream: bytes | BinaryIO,
    filename: str,
    settings: Settings | None = None,
    exempt: bool | None = None,
    baseline: bool = False,
    dedupe: bool,
    facts: dict | None = None,
    **row,
) -> models.Submission:
    """The intake's core for a prediction file, under the caller's transaction: stored, then under
    the team's lock the same file already taken in the phase (raises DuplicateSubmission naming
    it, counted once; unless not `dedupe`) or the phase's limits (unless `exempt`: by default
    `exempt_from_limits`), then the row, flushed. The action `submit` calls it for every upload
    (web, API, CLI, large uploads), and so do what submit files of their own: a blind run's output,
    the demo, the benchmarks and the test kits. The caller queues its scoring (`jobs(s).score`),
    which happens once the transaction commits.

    Raises PhaseClosed, LimitReached or UploadTooLarge (all SubmissionRefused, with
    `next_allowed_at`), DuplicateSubmission or NotFound. `facts`: the fact sheet's answers, checked
    by the caller (server.domain.facts.check_facts). `row`: what the run's row keeps of the upload
    (`add_submission`)."""
    problem = url_problem((row.get("url") or "").strip())
    if problem:
        raise SubmissionRefused(f"url: {problem}")
    settings = settings or get_settings()
    if exempt is None:
        exempt = exempt_from_limits(
            session, user=user, team=team, task_id=task_id, baseline=baseline
        )
    team_id = team.id
    phase_id = resolve_phase(session, task_id, phase).id
    stored = store(session, settings, stream, filename, settings.max_upload_bytes, in_place=False)
    ph, same = admit(
        session,
        team_id=team_id,
        phase_id=phase_id,
        sha=stored[1],
        exempt=exempt,
        settings=settings,
        dedupe=dedupe,
    )
    if same is not None:
        raise DuplicateSubmission(same)
    return add_submission(
        session,
        team_id=team_id,
        user_id=user.id if user is not None else None,
        phase=ph,
        stored=stored,
        filename=filename,
        is_baseline=bool(baseline or team.is_baseline),
        facts=facts,
        **row,
    )


def add_submission(
    session: Session,
    *,
    team_id: int,
    user_id: int | None,
    phase: models.Phase,
    stored: tuple[str, str, int],
    filename: str,
    is_baseline: bool = False,
    facts: dict | None = None,
    **row,
) -> models.Submission:
    """The row of an admitted upload (`stored`: what `store` returned), queued, flushed. `row`:
    what the row keeps of the upload's fields, by column (m.UploadFields.row(): the method's
    name, description, URL, whether it is shown publicly, and any field declared there since); a
    name with control characters or runs of blanks is made one line, a URL stripped."""
    key, sha, size = stored
    if "method_name" in row:
        row["method_name"] = " ".join((row["method_name"] or "").split())[:200]
    if "url" in row:
        row["url"] = (row["url"] or "").strip()
    if "description" in row:
        row["description"] = row["description"] or ""
    row["show_publicly"] = bool(row.get("show_publicly", True))
    sub = models.Submission(
        team_id=team_id,
        user_id=user_id,
        task_id=phase.task_id,
        phase_id=phase.id,
        status=Status.QUEUED.value,
        created_at=utcnow(),
        file_sha256=sha,
        file_name=(filename or "")[:255],
        storage_key=key,
        size=size,
        is_baseline=is_baseline,
        facts=facts,
        **row,
    )
    session.add(sub)
    session.flush()
    return sub


def quota(
    session: Session,
    *,
    phase: models.Phase,
    team: models.Team | None = None,
    team_id: int | None = None,
) -> dict:
    """What remains of a team's allowance in a phase, counted as `check_limits` counts it."""
    team = team if team is not None else session.get(models.Team, team_id)
    now = utcnow()
    start = day_start(now)
    rows = session.execute(
        select(models.Submission.status, models.Submission.created_at).where(
            models.Submission.team_id == team.id,
            models.Submission.phase_id == phase.id,
            counts_against_quota(),
        )
    ).all()
    counted = [c for st, c in rows if st in COUNTED]
    today = sum(1 for c in counted if c >= start)
    running = sum(1 for st, _ in rows if st in PENDING)
    runs = code_runs_counted(session, team.id, phase.id)
    today += code_runs_counted(session, team.id, phase.id, since=start)
    running += code_runs_counted(session, team.id, phase.id, pending_only=True)
    counted += [start] * runs
    unlimited = bool(team.is_baseline)

    def left(limit, used):
        return None if unlimited or limit is None else max(0, limit - used)

    return {
        "daily_used": today,
        "daily_limit": None if unlimited else phase.daily_limit,
        "daily_left": left(phase.daily_limit, today),
        "total_used": len(counted),
        "total_limit": None if unlimited else phase.total_limit,
        "total_left": left(phase.total_limit, len(counted)),
        "running": running,
        "concurrent_limit": None if unlimited else phase.concurrent_limit,
        "resets_at": start + timedelta(days=1),
        **(
            {
                "compute_used_seconds": round(compute_used(session, team.id, phase.id), 3),
                "compute_budget_seconds": None if unlimited else phase.compute_budget_seconds,
            }
            if phase.accepts != "predictions"
            else {}
        ),
    }


def compute_used(session: Session, team_id: int, phase_id: int) -> float:
    """CPU seconds a team's systems used in a phase, with the CPU limit of each run still
    waiting or running (reserved when it was queued); runs the server failed not counted."""
    used = models.CodeRun.cpu_seconds + models.CodeRun.reserved_cpu
    return float(
        session.execute(
            select(func.coalesce(func.sum(used), 0.0)).where(
                models.CodeRun.team_id == team_id,
                models.CodeRun.phase_id == phase_id,
                models.CodeRun.failure_kind.is_(None) | (models.CodeRun.failure_kind != "infra"),
            )
        ).scalar_one()
    )


DEFAULT_PHASES = {
    "dev": dict(daily_limit=20, total_limit=500, concurrent_limit=2, public_fraction=1.0),
    "test": dict(daily_limit=5, total_limit=100, concurrent_limit=2, public_fraction=0.5),
}
# a task's cross-validated split (TRoTR's ten folds): its gold is in the folds' training data, so
# its board ranks on all of it
CROSS_VALIDATED_PHASE = dict(
    daily_limit=20, total_limit=500, concurrent_limit=2, public_fraction=1.0
)


def ensure_phases(session: Session, home=None) -> list[models.Phase]:
    """Create the default `dev` and `test` phases of every registered task imported here whose
    split has no phase yet, and a phase on a task's cross-validated split (named after it), through
    the lifecycle's one `create_phase` (checked and audited like an organizer's). A task never
    imported gets none, and so no placeholder competition: a fresh site shows what exists."""
    made = []
    home = home if home is not None else get_settings().home
    for t in all_tasks():
        store = TaskStore(t.id, home)
        if not store.exists():
            continue  # a task never imported here: no phase, so no placeholder competition
        imported = store.manifest().get("splits", t.splits)
        for split in t.splits:
            if split not in imported:
                continue  # imported without it (a cross-validated split is an import's choice)
            defaults = (
                CROSS_VALIDATED_PHASE if t.is_cross_validated(split) else DEFAULT_PHASES.get(split)
            )
            if defaults is None:
                continue
            # a split with a phase of any name has its phases (a bundle names its own)
            exists = session.execute(
                select(models.Phase.id).where(
                    models.Phase.task_id == t.id,
                    (models.Phase.name == split) | (models.Phase.split == split),
                )
            ).first()
            if exists:
                continue
            made.append(
                create_phase(
                    session, task=t, name=split, split=split, actor=None, via="system", **defaults
                )
            )
    session.flush()
    return made


def mark_primary(
    session: Session, *, submission_id: int, team_id: int, actor=None
) -> models.Submission:
    """Make a team's submission its primary (ranked) run in its phase; the others become
    contrastive."""
    return set_primary(
        session, session.get(models.Submission, submission_id), team_id=team_id, actor=actor
    )
