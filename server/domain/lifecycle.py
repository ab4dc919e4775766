"""The lifecycle: the only code that changes a submission's status, a phase's state (open,
closed, frozen, published) or a leaderboard's revision.

Every change is one transaction holding three things: the conditional UPDATE that makes it (so
that two workers, the reconciler and an organizer racing on one row cannot both win), the bump of
the phase's board revision (from which every rendered leaderboard knows it is out of date), and
its audit record. Views, the API, the CLI, the scoring jobs, the reconciler and the baselines call
the functions here; nothing else writes `Submission.status`, the phase's state or its revision.

A submission moves along `EVENTS`:

    queued --start--> running --score--> scored --rescore--> queued
       |                 |  \\--invalid/fail--> failed --rescore--> queued
       \\--give_up--------+--requeue--> queued

A phase's window says whether it is open; organizers close it (now), freeze and unfreeze its
board, show or hide the board, and publish its final ranking, which only a closed phase may be.

What the state machine does not own lives apart, each in one module: the gold partition
(`server.domain.partitions`), publication and its snapshots (`server.domain.publication`),
provenance and stale
scores (`server.domain.provenance`), the retention of invalid uploads (`server.jobs.retention`) and
the audit
row itself (`server.domain.audit`).
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from enum import StrEnum
from typing import Callable, Iterable, NamedTuple

from sqlalchemy import DateTime, bindparam, func, null, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from server import models  # other subjects' tables: models.X, loaded when first used
from server.db import lock_row, savepoint, session_scope
from server.domain import audit, boards, exposure, partitions, people, shown, task_boards
from server.exceptions import LifecycleRefused, NotFound
from server.models import utcnow
from tasks import get_task
from tasks.bundle_models import board_lets_in, phase_release_rule

log = logging.getLogger(__name__)


class Status(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SCORED = "scored"
    FAILED = "failed"


PENDING = (Status.QUEUED.value, Status.RUNNING.value)
COUNTED = (Status.QUEUED.value, Status.RUNNING.value, Status.SCORED.value)  # count against limits
FINAL = (Status.SCORED.value, Status.FAILED.value)
STATUSES = tuple(s.value for s in Status)

# event -> (the statuses it may start from, the status it leads to)
EVENTS: dict[str, tuple[frozenset[str], str]] = {
    "start": (frozenset(PENDING), Status.RUNNING),  # a worker begins an attempt
    "give_up": (frozenset(PENDING), Status.FAILED),  # every attempt of the round is used
    "invalid": (frozenset(PENDING), Status.FAILED),  # the file failed validation
    "fail": (frozenset(PENDING), Status.FAILED),  # the server's own failure, last attempt
    "score": (frozenset(PENDING), Status.SCORED),  # scores recorded
    "requeue": (frozenset(PENDING), Status.QUEUED),  # the reconciler found no live job
    "rescore": (frozenset(FINAL), Status.QUEUED),  # an organizer, or stale provenance
}

RANKED_RUN_RULE = (
    "the team's marked primary run; without one, its latest scored run. The choice "
    "never looks at scores, and hidden or removed runs are never chosen."
)


def allowed(event: str, status: str) -> bool:
    return status in EVENTS[event][0]


# ----------------------------------------------------------------------------- primitives


def problem_text(message: str) -> dict:
    return {"line": None, "id": None, "message": message}


def bump_phase(s: Session, phase_id: int) -> None:
    s.execute(
        update(models.Phase)
        .where(models.Phase.id == phase_id)
        .values(revision=models.Phase.revision + 1)
    )


audit_change = audit.record


def move(
    s: Session,
    submission_id: int,
    event: str,
    *,
    where=(),
    actor=None,
    details=None,
    seen: dict | None = None,
    **values,
) -> bool:
    """Make one transition of one submission if its status allows it (conditional UPDATE), bump
    its phase's revision and audit it, in the session's transaction; True when it happened."""
    return (
        _moved(
            s, submission_id, event, where=where, actor=actor, details=details, seen=seen, **values
        )
        is not None
    )


def _moved(
    s: Session,
    submission_id: int,
    event: str,
    *,
    where=(),
    actor=None,
    details=None,
    seen: dict | None = None,
    **values,
):
    """`move`, returning the moved row's (phase_id, task_id, attempts) as they are after it, or
    None when it did not happen: the statement says which phase to bump and which competition
    the audit row belongs to (no read of the run again). `seen`: told whether the move bumped
    its phase's revision (`seen["bumped"]`: False for a blind run's output not shown yet)."""
    sources, target = EVENTS[event]
    now = utcnow()
    folded = _folds(s)
    row = s.execute(
        update(models.Submission)
        .where(
            models.Submission.id == submission_id,
            models.Submission.status.in_(tuple(sources)),
            *where,
        )
        .values(status=str(target), **values)
        .returning(*_returning(folded))
        .execution_options(synchronize_session=False),
        {"now_": now},
    ).first()
    if row is None:
        return None
    _after_move(s, submission_id, event, row, now, folded, actor=actor, details=details, seen=seen)
    return row


def _folds(s: Session) -> bool:
    """Whether a move's RETURNING says what follows it (PostgreSQL): whether the run is a blind
    run's output not shown yet, and the competition its audit row belongs to. SQLite's RETURNING
    names no other table: there they are read after it."""
    return s.get_bind().dialect.name != "sqlite"


@functools.cache
def _returning(folded: bool) -> tuple:
    """What a move's UPDATE returns (built once; the time that decides what is shown is bound
    at each call as `now_`)."""
    S = models.Submission
    cols = (S.phase_id, S.task_id, S.attempts)
    if not folded:
        return cols
    competition = (
        select(models.CompetitionTask.competition_id)
        .where(models.CompetitionTask.task_id == S.task_id)
        .limit(1)
        .scalar_subquery()
    )
    unshown = shown.unshown_row(bindparam("now_", type_=DateTime))
    return (*cols, unshown.label("unshown"), competition.label("competition_id"))


def _after_move(
    s: Session, submission_id, event, row, now, folded, *, actor, details, seen, hot=False
) -> None:
    """What follows a move in its transaction: its phase's revision (unless the run is a blind
    run's output not shown yet) and its audit row. `hot`: the scoring job's own moves, by
    statements built once (`_job_move`), in a session that holds no phase."""
    _, target = EVENTS[event]
    if folded:
        bumped, competition_id = not row.unshown, row.competition_id
    else:
        bumped = not shown.is_unshown(s, submission_id, row.phase_id, now)
        competition_id = audit.competition_of_target(s, row.task_id)
    if bumped:
        # a blind run's output moves no board before it is shown (`server.domain.shown`)
        if hot:
            s.connection().execute(_bump_statement(), {"phase_id": row.phase_id})
        else:
            bump_phase(s, row.phase_id)
    if seen is not None:
        seen["bumped"] = bumped
    # a rescore is somebody's decision; every other transition is the workers' bookkeeping
    action = "submission.rescore" if event == "rescore" else "submission.status"
    facts = {"event": event, "to": str(target), **(details or {})}
    if hot:  # the task's competition, or none (a site-wide task): said by the move already
        audit.insert_row(s, actor, action, f"submission:{submission_id}", competition_id, facts)
    else:
        audit_change(
            s, actor, action, f"submission:{submission_id}", competition_id=competition_id, **facts
        )


@functools.cache
def _bump_statement():
    """`bump_phase` as one statement built once (the phase's id bound at each call)."""
    return (
        update(models.Phase)
        .where(models.Phase.id == bindparam("phase_id"))
        .values(revision=models.Phase.revision + 1)
    )


@functools.cache
def _job_move(event: str, only_queued: bool, folded: bool):
    """The scoring job's own moves (a run's start, its score) as statements built once per
    process, every value bound at the call (`sid`, `now_`, `max_attempts`, `attempt`): the
    worker's parent builds and compiles them (`server.jobs.worker.warm_statements`), so that a
    forked job neither builds nor compiles any. Run on the session's connection (no ORM
    bookkeeping: the job's sessions hold no submission)."""
    S = models.Submission
    sources, target = EVENTS[event]
    now = bindparam("now_", type_=DateTime)
    where = [S.id == bindparam("sid"), S.status.in_(tuple(sorted(sources)))]
    if event == "start":
        where.append(S.attempts < func.coalesce(S.attempt_ceiling, bindparam("max_attempts")))
        values = {"attempts": S.attempts + 1, "started_at": now}
    elif event == "score":
        values = {
            "score_attempt": bindparam("attempt"),
            "finished_at": now,
            "errors": null(),
            "failure_kind": null(),
            "stale": False,
        }
    else:
        raise ValueError(event)
    if only_queued:
        where.append(S.status == Status.QUEUED.value)
    stmt = update(S).where(*where).values(status=str(target), **values)
    return stmt.returning(*_returning(folded))


def compile_job_moves(s: Session) -> None:
    """Run the scoring job's statements once in `s` (the worker's parent, before any fork; the
    caller never commits it): each move on no row, the phase's revision of no phase, an audit
    row and a score of no run (refused by its foreign key where the database checks it)."""
    for only_queued in (False, True):
        _job_moved(s, 0, "start", only_queued=only_queued, max_attempts=1)
    _job_moved(s, 0, "score", attempt=0)
    s.connection().execute(_bump_statement(), {"phase_id": 0})
    audit.insert_row(s, None, "submission.status", "submission:0", None, {"event": "score"})
    row = {
        "submission_id": 0,
        "attempt": 0,
        "part": "all",
        "result": {},
        "primary_value": 0.0,
        "task_version": 0,
        "gold_sha256": "",
        "scorer_version": "",
        "created_at": utcnow(),
    }
    try:
        with savepoint(s):
            s.connection().execute(new_rows(s, models.Score), [row])
    except IntegrityError:
        pass


def _job_moved(s: Session, submission_id: int, event: str, *, only_queued=False, seen=None, **kw):
    """A move of the scoring job's (`_job_move`): the row as `_moved` returns it, or None."""
    now = utcnow()
    folded = _folds(s)
    row = (
        s.connection()
        .execute(_job_move(event, only_queued, folded), {"sid": submission_id, "now_": now, **kw})
        .first()
    )
    if row is not None:
        _after_move(
            s, submission_id, event, row, now, folded, actor=None, details=None, seen=seen, hot=True
        )
    return row


def _one(engine, fn):
    """Run fn(session) in a transaction of its own (a worker's or the reconciler's step, not an
    action's); returns what it returns."""
    with session_scope(engine) as s:
        return fn(s)


# ----------------------------------------------------------------------------- scoring jobs


def ceiling(max_attempts: int):
    """The SQL expression for the attempt number a submission may reach in its current round."""
    return func.coalesce(models.Submission.attempt_ceiling, max_attempts)


def start_attempt(
    engine, submission_id: int, max_attempts: int, *, only_queued: bool = False
) -> int | None:
    """Mark a pending submission running and count the attempt; None when there is nothing to do
    (already final, or every attempt of its round used: then it fails, costing the team nothing).
    `only_queued` (a scoring job's own start): a running submission is left alone, whoever holds
    it (a batch that claimed it, or an attempt the reconciler will take back once it is dead)."""
    got = start_run(engine, submission_id, max_attempts, only_queued=only_queued)
    return None if got is None else got[0]


def start_run(
    engine,
    submission_id: int,
    max_attempts: int,
    *,
    only_queued: bool = False,
    then: Callable[[Session], object] | None = None,
) -> tuple[int, object] | None:
    """`start_attempt`, with `then(session)` read in the same transaction once the attempt has
    started (what the scoring job needs of the run and its phase); returns (the attempt, what
    `then` returned), or None when no attempt started."""

    def go(s: Session):
        # the usual case first: an attempt left (the two conditions exclude each other)
        started = _job_moved(
            s, submission_id, "start", only_queued=only_queued, max_attempts=max_attempts
        )
        if started is not None:
            return int(started.attempts), (then(s) if then is not None else None)
        now = utcnow()
        whose = (models.Submission.status == Status.QUEUED.value,) if only_queued else ()
        move(
            s,
            submission_id,
            "give_up",
            where=(models.Submission.attempts >= ceiling(max_attempts), *whose),
            finished_at=now,
            failure_kind="infra",
            errors=[
                problem_text(
                    f"gave up after {max_attempts} attempts (the worker died or the job "
                    "timed out each time); this costs the team nothing"
                )
            ],
        )
        return None

    return _one(engine, go)


def claim_queued(
    engine, phase_id: int, max_attempts: int, *, besides: Iterable[int] = ()
) -> tuple[int, int] | None:
    """Claim the phase's first queued run (by id; the ids `besides` excluded) that has an attempt
    left: it is started as `start_attempt` starts it, in one transaction; returns (its id, the
    attempt number), or None when no run is left to claim. On PostgreSQL the candidate row is locked
    with `FOR UPDATE SKIP LOCKED`, so claimers at the same moment take different runs without
    waiting on each other; on SQLite the claimer takes the database's write lock first
    (`lock_row`), so claimers take turns. Nothing walks a queue: the read is the phase's first
    queued row."""
    S = models.Submission

    def go(s: Session):
        if s.get_bind().dialect.name == "sqlite":  # the write lock first: claimers take turns
            lock_row(s, models.Phase, phase_id)
        q = (
            select(S.id)
            .where(
                S.phase_id == phase_id,
                S.status == Status.QUEUED.value,
                S.attempts < ceiling(max_attempts),
            )
            .order_by(S.id)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        if besides:
            q = q.where(S.id.not_in(list(besides)))
        sid = s.execute(q).scalar()
        if sid is None:
            return None
        # the start's own statement (the row was read with an attempt left, and is locked)
        started = _job_moved(s, sid, "start", only_queued=True, max_attempts=max_attempts)
        return None if started is None else (int(sid), int(started.attempts))

    return _one(engine, go)


def finish_invalid(engine, submission_id: int, errors: list[dict]) -> bool:
    """The file failed validation: the submission fails as "invalid" (no cost to the team)."""
    return _one(
        engine,
        lambda s: move(
            s, submission_id, "invalid", failure_kind="invalid", errors=errors, finished_at=utcnow()
        ),
    )


def fail_infra(engine, submission_id: int, reason: str) -> bool:
    """Fail a pending submission for the server's own reasons (no cost to the team)."""
    return _one(
        engine,
        lambda s: move(
            s,
            submission_id,
            "fail",
            failure_kind="infra",
            errors=[problem_text(reason)],
            finished_at=utcnow(),
        ),
    )


def requeue(engine, submission_id: int, attempts: int) -> bool:
    """Back to queued (the reconciler found no live job), unless a run moved it meanwhile."""
    return _one(
        engine,
        lambda s: move(
            s, submission_id, "requeue", where=(models.Submission.attempts == attempts,)
        ),
    )


def record_scores(engine, submission_id: int, attempt: int, results: dict[str, dict]) -> bool:
    """Write one Score row per part for this attempt (idempotently), then mark the submission
    scored if no other run did first; True when this run's scores are the ones that count."""
    return finish_scored(engine, submission_id, attempt, results).won


class Scored(NamedTuple):
    won: bool  # this run's scores are the ones that count
    moved: bool  # and they moved its board (not a blind run's output shown later)
    then: object  # what `then` returned (None when it did not run)


def finish_scored(
    engine,
    submission_id: int,
    attempt: int,
    results: dict[str, dict],
    *,
    then: Callable[[Session], object] | None = None,
    then_if: Callable[[Session], bool] | None = None,
) -> Scored:
    """`record_scores`, in one transaction with what follows a won score: the scores, the
    status, the phase's revision, the audit row and `then(session)` (the scoring job's notice of
    the run: a failure of it is logged and costs the score nothing, its savepoint undone).
    `then_if(session)`: a read saying whether `then` has anything to do (most runs' submitters
    asked for no notice: no savepoint opened for them; should the read fail, the transaction
    fails with it). The scores are inserted in one statement that passes over a part this attempt
    has already (another run writing the same attempt's rows first wins)."""
    seen: dict = {}
    out = None
    now = utcnow()
    rows = [
        {
            "submission_id": submission_id,
            "attempt": attempt,
            "part": part,
            "result": r,
            "primary_value": r["primary"]["value"],
            "task_version": r["provenance"]["task_version"],
            "gold_sha256": r["provenance"]["gold_sha256"],
            "scorer_version": r["provenance"]["scorer_version"],
            "created_at": now,
        }
        for part, r in results.items()
    ]
    try:
        with session_scope(engine) as s:
            if rows:
                s.connection().execute(new_rows(s, models.Score), rows)
            won = _job_moved(s, submission_id, "score", seen=seen, attempt=attempt) is not None
            # the read runs in the transaction itself: should it fail, the whole is retried
            if won and then is not None and (then_if is None or then_if(s)):
                try:
                    with savepoint(s):
                        out = then(s)
                except Exception:  # noqa: BLE001 — what follows a score never undoes it
                    log.exception("submission %s: what follows its score failed", submission_id)
    except IntegrityError:  # the run's row is gone (its scores refused by their foreign key)
        log.warning("submission %s: scored, but its row is gone", submission_id)
        return Scored(False, False, None)
    return Scored(won, bool(won and seen.get("bumped")), out)


def new_rows(s: Session, model):
    """An INSERT of `model`'s rows that passes over a row a unique key has already (`ON CONFLICT
    DO NOTHING`, on PostgreSQL and SQLite alike)."""
    return _new_rows(s.get_bind().dialect.name, model)


@functools.cache
def _new_rows(dialect: str, model):
    insert = sqlite_insert if dialect == "sqlite" else postgresql_insert
    return insert(model).on_conflict_do_nothing()


# ----------------------------------------------------------------------------- organizers and teams


def rescore(
    s: Session, subs: Iterable[models.Submission], *, actor, max_attempts: int, reason: str = ""
) -> list[int]:
    """Queue final submissions for scoring again, each in a new round of `max_attempts` attempts
    (attempt numbers keep growing, keeping each scoring's Score rows apart; the standing scores stay
    on the board until the new ones count). The caller commits; returns the ids to enqueue."""
    moved = []
    for sub in subs:
        if sub.removed_at is not None:
            continue
        if move(
            s,
            sub.id,
            "rescore",
            actor=actor,
            details={"reason": reason} if reason else None,
            attempt_ceiling=(sub.attempts or 0) + max_attempts,
            failure_kind=None,
            errors=None,
            finished_at=None,
        ):
            moved.append(sub.id)
    s.flush()
    return moved


def set_primary(
    s: Session, sub: models.Submission, *, team_id: int, actor=None, reason: str = ""
) -> models.Submission:
    """Make a team's submission its primary (ranked) run in its phase; the others become
    contrastive. `reason`: an organizer's, choosing for the team (kept in the audit row)."""
    if sub is None or sub.team_id != team_id or sub.removed_at is not None:
        raise NotFound(f"your team has no submission {getattr(sub, 'id', '?')}")
    s.execute(
        update(models.Submission)
        .where(
            models.Submission.team_id == team_id,
            models.Submission.phase_id == sub.phase_id,
            models.Submission.id != sub.id,
        )
        .values(is_primary=False)
        .execution_options(synchronize_session=False)
    )
    s.execute(
        update(models.Submission)
        .where(models.Submission.id == sub.id)
        .values(is_primary=True)
        .execution_options(synchronize_session=False)
    )
    bump_phase(s, sub.phase_id)
    said = {"reason": reason} if reason else {}
    audit_change(s, actor, "submission.primary", f"submission:{sub.id}", team=team_id, **said)
    s.flush()
    s.refresh(sub)
    return sub


def set_board_choice(
    s: Session, sub: models.Submission, *, team_id: int, board: str, actor=None, reason: str = ""
) -> models.Submission:
    """Make a team's submission its ranked run on one of its phase's declared boards (the default
    board, "main": its primary run, `set_primary`). The run must be one the board lets in (its
    filter on the fact sheet); whether it has the board's value is not asked (no score is read):
    a chosen run without it leaves the board to the usual rule. Refused once the phase is
    published (the published boards keep the runs they ranked) and on an overall board (it has no
    runs of its own)."""
    if sub is None or sub.team_id != team_id or sub.removed_at is not None:
        raise NotFound(f"your team has no submission {getattr(sub, 'id', '?')}")
    phase = s.get(models.Phase, sub.phase_id)
    if board in (None, "", boards.MAIN_BOARD):
        return set_primary(s, sub, team_id=team_id, actor=actor, reason=reason)
    spec = boards.resolve(phase, board)
    if spec.overall is not None:
        raise LifecycleRefused(
            f"{board} is an overall board: it ranks each team's runs on its boards "
            f"({', '.join(spec.overall.boards)}); choose the run of each of those",
            "overall_board",
        )
    if phase.published_at is not None:
        raise LifecycleRefused(
            f"the {phase.name} phase is published: its boards keep the runs they ranked",
            "published",
        )
    comp = people.competition_of_task(s, phase.task_id)
    fields = list(comp.fact_fields or ()) if comp is not None else []
    if not board_lets_in(spec, sub.facts, fields):
        f = spec.filter
        raise LifecycleRefused(
            f"submission {sub.id} is not on the {board} board: its fact sheet does not answer "
            f"{f.fact} with {' or '.join(f.equals)}",
            "not_on_board",
        )
    lock_row(s, models.Team, team_id)  # one choice per team and board at a time
    got = s.execute(
        select(models.BoardChoice).where(
            models.BoardChoice.phase_id == phase.id,
            models.BoardChoice.team_id == team_id,
            models.BoardChoice.board == spec.name,
        )
    ).scalar_one_or_none()
    if got is None:
        got = models.BoardChoice(
            phase_id=phase.id, team_id=team_id, board=spec.name, submission_id=0
        )
    got.submission_id, got.chosen_at = sub.id, utcnow()
    s.add(got)
    bump_phase(s, sub.phase_id)
    said = {"reason": reason} if reason else {}
    audit_change(
        s,
        actor,
        "submission.board_choice",
        f"submission:{sub.id}",
        team=team_id,
        board=spec.name,
        **said,
    )
    s.flush()
    return sub


VISIBILITY = ("hide", "unhide", "remove", "restore")


def set_visibility(
    s: Session, sub: models.Submission, action: str, *, actor, reason: str = ""
) -> models.Submission:
    """Hide, unhide, remove or restore a run (nothing is deleted for real); hide and remove need a
    reason, which the team is shown."""
    if action not in VISIBILITY:
        raise LifecycleRefused(
            f"unknown action {action!r} (one of {', '.join(VISIBILITY)})", "bad_action"
        )
    reason = " ".join((reason or "").split())[:500]
    if action in ("hide", "remove") and not reason:
        raise LifecycleRefused("Say why: the reason is shown to the team", "reason_required")
    values = {
        "hide": dict(hidden=True, hidden_reason=reason),
        "unhide": dict(hidden=False),  # the reason stays, for the record
        "remove": dict(removed_at=utcnow(), hidden_reason=reason),
        "restore": dict(removed_at=None, removed_by_team=False),
    }[action]
    s.execute(
        update(models.Submission)
        .where(models.Submission.id == sub.id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    bump_phase(s, sub.phase_id)
    audit_change(s, actor, f"submission.{action}", f"submission:{sub.id}", reason=reason)
    s.flush()
    s.refresh(sub)
    return sub


def set_shown_publicly(
    s: Session, sub: models.Submission, show: bool, *, actor
) -> models.Submission:
    """Show a team's run on the public board, or keep it to the team and the organizers."""
    s.execute(
        update(models.Submission)
        .where(models.Submission.id == sub.id)
        .values(show_publicly=bool(show))
        .execution_options(synchronize_session=False)
    )
    bump_phase(s, sub.phase_id)
    audit_change(
        s, actor, "submission.public" if show else "submission.private", f"submission:{sub.id}"
    )
    s.flush()
    s.refresh(sub)
    return sub


TEAM_DELETED = "deleted by its team"


def delete_by_team(s: Session, sub: models.Submission, *, actor) -> models.Submission:
    """A team deletes its own run: removed from every board and list but kept (organizers see it
    and may restore it); it still counts against the team's quota."""
    s.execute(
        update(models.Submission)
        .where(models.Submission.id == sub.id)
        .values(removed_at=utcnow(), removed_by_team=True, hidden_reason=TEAM_DELETED)
        .execution_options(synchronize_session=False)
    )
    bump_phase(s, sub.phase_id)
    audit_change(s, actor, "submission.delete", f"submission:{sub.id}", team=sub.team_id)
    s.flush()
    s.refresh(sub)
    return sub


# ----------------------------------------------------------------------------- phases


def phase_state(phase: models.Phase, now: datetime | None = None) -> str:
    """ "not open yet", "open" or "closed", by the phase's window."""
    now = now or utcnow()
    if phase.opens_at and now < phase.opens_at:
        return "not open yet"
    if phase.closes_at and now >= phase.closes_at:
        return "closed"
    return "open"


def phase_labels(phase: models.Phase, now: datetime | None = None) -> list[str]:
    """The phase's state as words: its window, then frozen and published when they hold."""
    out = [phase_state(phase, now)]
    if phase.frozen:
        out.append("frozen")
    if phase.published_at is not None:
        out.append("published")
    return out


def phase_changed(s: Session, phase: models.Phase, actor, action: str, **details) -> None:
    phase.revision = (phase.revision or 0) + 1
    s.add(phase)
    audit_change(
        s, actor, action, f"phase:{phase.id}", task=phase.task_id, phase=phase.name, **details
    )


def _jsonable(v):
    return v.isoformat() if isinstance(v, datetime) else v


PHASE_FIELDS = (
    "opens_at",
    "closes_at",
    "inputs_at",
    "daily_limit",
    "total_limit",
    "concurrent_limit",
    "public_fraction",
    "accepts",
    "blind",
    "compute_budget_seconds",
    "boards",
    "release_rule",
)
ACCEPTS = ("predictions", "code", "both")


def release_rule_json(spec):
    """A phase's release rule as stored (None: exact), or LifecycleRefused saying what is wrong."""
    try:
        rule = phase_release_rule(spec)
    except ValueError as e:
        raise LifecycleRefused(
            f"release rule: a phase offers {', '.join(PHASE_RELEASE_RULES)}: {e}",
            "bad_release_rule",
        ) from None
    if rule == "ladder":
        return {"rule": "ladder", "eta": 0.01}
    return None if rule in (None, "exact") else rule


PHASE_RELEASE_RULES = ("exact", "ladder", "ladder-paired", "rounded")
"""The release rules a phase may set (scorer.release); `ladder-paired` is released by the board's
statistics job, from every run's resamples (server.boards.ladder)."""


def _archived(s: Session, task_id: str) -> bool:
    """Whether the task is archived (server.actions.tasks.archive_task): its phases stay closed."""
    q = select(models.TaskArchive.id).where(models.TaskArchive.task_id == task_id)
    return s.execute(q).first() is not None


def edit_phase(
    s: Session, phase: models.Phase, changes: dict, *, actor, via: str = "web"
) -> models.Phase:
    """Change a phase's window, limits or public fraction (validated), in the caller's transaction.

    The public fraction of a phase decides whether it scores with a hidden part; while any
    submission of the task's split is scored under the shared partition, a different fraction is
    refused (the partition is drawn once)."""
    unknown = set(changes) - set(PHASE_FIELDS)
    if unknown:
        raise LifecycleRefused(f"unknown phase field(s): {', '.join(sorted(unknown))}", "bad_field")
    if {"opens_at", "closes_at"} & set(changes) and _archived(s, phase.task_id):
        raise LifecycleRefused(
            f"{phase.task_id} is archived: its phases stay closed", "task_archived"
        )
    new = {k: getattr(phase, k) for k in PHASE_FIELDS}
    new.update(changes)
    if new["opens_at"] and new["closes_at"] and new["closes_at"] <= new["opens_at"]:
        raise LifecycleRefused("a phase must close after it opens", "bad_window")
    for k in ("daily_limit", "total_limit", "concurrent_limit"):
        if new[k] is not None and new[k] < 0:
            raise LifecycleRefused("a limit is 0 or more (empty: no limit)", "bad_limit")
    if new["accepts"] not in ACCEPTS:
        raise LifecycleRefused(f"a phase accepts one of {', '.join(ACCEPTS)}", "bad_accepts")
    if new["compute_budget_seconds"] is not None and new["compute_budget_seconds"] < 0:
        raise LifecycleRefused("a compute budget is 0 or more (empty: none)", "bad_limit")
    if "blind" in changes:
        changes["blind"] = bool(changes["blind"])
    if "release_rule" in changes:
        changes["release_rule"] = release_rule_json(changes["release_rule"])
    if "boards" in changes:
        # a published ranking keeps the boards it was published with (its snapshots)
        changes["boards"] = boards.checked(s, get_task(phase.task_id), changes["boards"]) or None
    frac = new["public_fraction"]
    if not (0.0 < float(frac) <= 1.0):
        raise LifecycleRefused("the public fraction is in (0, 1]", "bad_fraction")
    if "public_fraction" in changes and float(frac) != float(phase.public_fraction):
        partitions.check_fraction_change(s, phase, float(frac))
    before = {k: _jsonable(getattr(phase, k)) for k in changes}
    for k, v in changes.items():
        setattr(phase, k, v)
    phase_changed(
        s,
        phase,
        actor,
        "phase.edit",
        before=before,
        after={k: _jsonable(v) for k, v in changes.items()},
        via=via,
    )
    s.flush()
    return phase


def create_phase(
    s: Session,
    *,
    task,
    name: str,
    split: str,
    actor,
    via: str = "web",
    home=None,
    **fields,
) -> models.Phase:
    """Create a phase on a split of a task (validated against the exposure rule and the split's
    one partition), in the caller's transaction. `home`: the data directory (default: the
    environment's)."""
    if not name or len(name) > 32 or split not in task.splits:
        raise LifecycleRefused(
            f"a phase needs a name (at most 32 characters) and a split of the task "
            f"({', '.join(task.splits)})",
            "bad_phase",
        )
    if _archived(s, task.id):
        raise LifecycleRefused(f"{task.id} is archived: no phase is added", "task_archived")
    if s.execute(
        select(models.Phase.id).where(models.Phase.task_id == task.id, models.Phase.name == name)
    ).first():
        raise LifecycleRefused(f"{task.id} has a phase {name} already", "exists")
    fields["public_fraction"] = partitions.check_new_phase(
        s, task.id, split, fields.get("public_fraction")
    )
    try:
        exposure.check_phase(task, home, split)
    except exposure.ExposureRefused as e:
        raise LifecycleRefused(str(e), "exposes_hidden_gold") from e
    # a task's board belongs to a competition: one of its own unless it is in one already
    people.ensure_competition(s, task.id)
    # the boards beside the default one: as given, else as the task declares them for the phase
    declared = fields.pop("boards", None)
    if declared is None:  # the task's declaration, else what its import found (STR's tracks)
        declared = task.boards_of_phase(name) or task_boards.imported_boards(
            s, task, name, split, home
        )
    fields["boards"] = boards.checked(s, task, declared) or None
    if "release_rule" in fields:
        fields["release_rule"] = release_rule_json(fields["release_rule"])
    # what the published ranking is computed on: the private part, or the whole split (as the
    # task declares for its phases unless given); only a phase with a private part has a choice
    on = fields.pop("published_on", None) or getattr(task, "published_on", "private")
    if on not in partitions.PUBLISHED_ON:
        raise LifecycleRefused(
            f"published_on: {on!r} is not one of {', '.join(partitions.PUBLISHED_ON)}",
            "bad_phase",
        )
    fields["published_on"] = on if fields["public_fraction"] < 1.0 else "private"
    p = models.Phase(task_id=task.id, name=name, split=split, **fields)
    s.add(p)
    s.flush()
    audit_change(
        s, actor, "phase.create", f"phase:{p.id}", task=task.id, name=name, split=split, via=via
    )
    s.flush()
    return p


def close(s: Session, phase: models.Phase, *, actor, via: str = "web") -> models.Phase:
    """Close an open phase now: no further submissions are accepted."""
    state = phase_state(phase)
    if state == "closed":
        raise LifecycleRefused(
            f"the {phase.name} phase of {phase.task_id} is closed already", "closed"
        )
    if state == "not open yet":
        raise LifecycleRefused(
            f"the {phase.name} phase of {phase.task_id} has not opened yet; change its "
            "window instead",
            "not_open",
        )
    phase.closes_at = utcnow()
    phase_changed(s, phase, actor, "phase.close", via=via)
    s.flush()
    return phase


def set_frozen(
    s: Session, phase: models.Phase, frozen: bool, *, actor, via: str = "web"
) -> models.Phase:
    """Freeze the board (later submissions are not shown to participants) or unfreeze it."""
    if bool(phase.frozen) == frozen:
        raise LifecycleRefused(
            f"the board of {phase.task_id}/{phase.name} is "
            f"{'frozen' if frozen else 'not frozen'} already",
            "unchanged",
        )
    phase.frozen, phase.frozen_at = frozen, (utcnow() if frozen else None)
    phase_changed(
        s, phase, actor, "leaderboard.freeze" if frozen else "leaderboard.unfreeze", via=via
    )
    s.flush()
    return phase


def set_board_open(
    s: Session, phase: models.Phase, is_open: bool, *, actor, via: str = "web"
) -> models.Phase:
    """Show the board to everyone, or to organizers only."""
    phase.leaderboard_open = is_open
    phase_changed(s, phase, actor, "leaderboard.open" if is_open else "leaderboard.close", via=via)
    s.flush()
    return phase


def bump(
    s: Session, phase: models.Phase, *, actor=None, action: str = "leaderboard.refresh", **details
) -> None:
    """Mark a phase's board as changed for a reason outside the submission and phase rows (e.g. a
    new partition), in the caller's transaction."""
    phase_changed(s, phase, actor, action, **details)
    s.flush()


# ----------------------------------------------------------------------------- the gold partition


def redraw_partition(
    s: Session, phase: models.Phase, *, actor, via: str = "web"
) -> models.GoldPartition:
    """Move a phase that kept its own partition (from before partitions were shared) onto its
    split's shared, stratified one; only before its first scored submission."""
    if s.execute(
        select(models.Submission.id).where(
            models.Submission.phase_id == phase.id, models.Submission.score_attempt.is_not(None)
        )
    ).first():
        raise LifecycleRefused(
            "the partition cannot be re-drawn once a submission of the phase is scored",
            "partition_fixed",
        )
    engine = s.get_bind()
    part = partitions.shared_partition(engine, phase.task_id, phase.split, phase.public_fraction)
    phase.partition_id = part.id
    phase_changed(s, phase, actor, "partition.attach", partition=part.key, via=via)
    s.flush()
    return part
