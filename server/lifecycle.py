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
board, show or hide the board, and publish its final ranking, which only a closed phase may be:
publication writes an immutable `RankingVersion`, and a correction is a new version with a reason.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import datetime
from enum import StrEnum
from typing import Iterable

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from server.exceptions import LifecycleRefused
from server.models import (
    AuditLog,
    GoldPartition,
    Phase,
    RankingVersion,
    Score,
    Submission,
    User,
    utcnow,
)

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


def _problem(message: str) -> dict:
    return {"line": None, "id": None, "message": message}


def _bump_phase(s: Session, phase_id: int) -> None:
    s.execute(update(Phase).where(Phase.id == phase_id).values(revision=Phase.revision + 1))


def _bump_phase_of(s: Session, submission_id: int) -> None:
    sub_phase = select(Submission.phase_id).where(Submission.id == submission_id).scalar_subquery()
    s.execute(update(Phase).where(Phase.id == sub_phase).values(revision=Phase.revision + 1))


def _audit(s: Session, actor: User | int | None, action: str, target: str, **details) -> None:
    actor_id = actor.id if isinstance(actor, User) else actor
    s.add(AuditLog(actor_id=actor_id, action=action, target=target[:200], details=details or None))


def _move(
    s: Session, submission_id: int, event: str, *, where=(), actor=None, details=None, **values
) -> bool:
    """Make one transition of one submission if its status allows it (conditional UPDATE), bump
    its phase's revision and audit it, in the session's transaction; True when it happened."""
    sources, target = EVENTS[event]
    n = s.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.status.in_(tuple(sources)), *where)
        .values(status=str(target), **values)
        .execution_options(synchronize_session=False)
    ).rowcount
    if not n:
        return False
    _bump_phase_of(s, submission_id)
    # a rescore is somebody's decision; every other transition is the workers' bookkeeping
    _audit(
        s,
        actor,
        "submission.rescore" if event == "rescore" else "submission.status",
        f"submission:{submission_id}",
        event=event,
        to=str(target),
        **(details or {}),
    )
    return True


def _one(engine, fn):
    """Run fn(session) in a transaction of its own; returns what it returns."""
    with Session(engine, expire_on_commit=False) as s:
        try:
            out = fn(s)
            s.commit()
            return out
        except BaseException:
            s.rollback()
            raise


# ----------------------------------------------------------------------------- scoring jobs


def ceiling(max_attempts: int):
    """The SQL expression for the attempt number a submission may reach in its current round."""
    return func.coalesce(Submission.attempt_ceiling, max_attempts)


def start_attempt(engine, submission_id: int, max_attempts: int) -> int | None:
    """Mark a pending submission running and count the attempt; None when there is nothing to do
    (already final, or every attempt of its round used: then it fails, costing the team nothing)."""
    now = utcnow()

    def go(s: Session):
        if _move(
            s,
            submission_id,
            "give_up",
            where=(Submission.attempts >= ceiling(max_attempts),),
            finished_at=now,
            failure_kind="infra",
            errors=[
                _problem(
                    f"gave up after {max_attempts} attempts (the worker died or the job "
                    "timed out each time); this costs the team nothing"
                )
            ],
        ):
            return None
        if not _move(
            s,
            submission_id,
            "start",
            where=(Submission.attempts < ceiling(max_attempts),),
            attempts=Submission.attempts + 1,
            started_at=now,
        ):
            return None
        return int(
            s.execute(
                select(Submission.attempts).where(Submission.id == submission_id)
            ).scalar_one()
        )

    return _one(engine, go)


def finish_invalid(engine, submission_id: int, errors: list[dict]) -> bool:
    """The file failed validation: the submission fails as "invalid" (no cost to the team)."""
    return _one(
        engine,
        lambda s: _move(
            s, submission_id, "invalid", failure_kind="invalid", errors=errors, finished_at=utcnow()
        ),
    )


def fail_infra(engine, submission_id: int, reason: str) -> bool:
    """Fail a pending submission for the server's own reasons (no cost to the team)."""
    return _one(
        engine,
        lambda s: _move(
            s,
            submission_id,
            "fail",
            failure_kind="infra",
            errors=[_problem(reason)],
            finished_at=utcnow(),
        ),
    )


def requeue(engine, submission_id: int, attempts: int) -> bool:
    """Back to queued (the reconciler found no live job), unless a run moved it meanwhile."""
    return _one(
        engine,
        lambda s: _move(s, submission_id, "requeue", where=(Submission.attempts == attempts,)),
    )


def record_scores(engine, submission_id: int, attempt: int, results: dict[str, dict]) -> bool:
    """Write one Score row per part for this attempt (idempotently), then mark the submission
    scored if no other run did first; True when this run's scores are the ones that count."""
    with Session(engine) as s:
        have = set(
            s.execute(
                select(Score.part).where(
                    Score.submission_id == submission_id, Score.attempt == attempt
                )
            ).scalars()
        )
        for part, r in results.items():
            if part in have:
                continue
            prov = r["provenance"]
            s.add(
                Score(
                    submission_id=submission_id,
                    attempt=attempt,
                    part=part,
                    result=r,
                    primary_value=r["primary"]["value"],
                    task_version=prov["task_version"],
                    gold_sha256=prov["gold_sha256"],
                    scorer_version=prov["scorer_version"],
                )
            )
        try:
            s.flush()
        except IntegrityError:  # another run wrote the same attempt's rows first
            s.rollback()
        won = _move(
            s,
            submission_id,
            "score",
            score_attempt=attempt,
            finished_at=utcnow(),
            errors=None,
            failure_kind=None,
            stale=False,
        )
        s.commit()
    return won


# ----------------------------------------------------------------------------- organizers and teams


def rescore(
    s: Session, subs: Iterable[Submission], *, actor, max_attempts: int, reason: str = ""
) -> list[int]:
    """Queue final submissions for scoring again, each in a new round of `max_attempts` attempts
    (attempt numbers keep growing, keeping each scoring's Score rows apart; the standing scores stay
    on the board until the new ones count). Commits; returns the ids to enqueue."""
    moved = []
    for sub in subs:
        if sub.removed_at is not None:
            continue
        if _move(
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
    s.commit()
    return moved


def set_primary(s: Session, sub: Submission, *, team_id: int, actor=None) -> Submission:
    """Make a team's submission its primary (ranked) run in its phase; the others become contrastive."""
    from server.exceptions import NotFound

    if sub is None or sub.team_id != team_id or sub.removed_at is not None:
        raise NotFound(f"your team has no submission {getattr(sub, 'id', '?')}")
    s.execute(
        update(Submission)
        .where(
            Submission.team_id == team_id,
            Submission.phase_id == sub.phase_id,
            Submission.id != sub.id,
        )
        .values(is_primary=False)
        .execution_options(synchronize_session=False)
    )
    s.execute(
        update(Submission)
        .where(Submission.id == sub.id)
        .values(is_primary=True)
        .execution_options(synchronize_session=False)
    )
    _bump_phase(s, sub.phase_id)
    _audit(s, actor, "submission.primary", f"submission:{sub.id}", team=team_id)
    s.commit()
    s.refresh(sub)
    return sub


VISIBILITY = ("hide", "unhide", "remove", "restore")


def set_visibility(
    s: Session, sub: Submission, action: str, *, actor, reason: str = ""
) -> Submission:
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
        "restore": dict(removed_at=None),
    }[action]
    s.execute(
        update(Submission)
        .where(Submission.id == sub.id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    _bump_phase(s, sub.phase_id)
    _audit(s, actor, f"submission.{action}", f"submission:{sub.id}", reason=reason)
    s.commit()
    s.refresh(sub)
    return sub


# ----------------------------------------------------------------------------- phases


def phase_state(phase: Phase, now: datetime | None = None) -> str:
    """ "not open yet", "open" or "closed", by the phase's window."""
    now = now or utcnow()
    if phase.opens_at and now < phase.opens_at:
        return "not open yet"
    if phase.closes_at and now >= phase.closes_at:
        return "closed"
    return "open"


def phase_labels(phase: Phase, now: datetime | None = None) -> list[str]:
    """The phase's state as words: its window, then frozen and published when they hold."""
    out = [phase_state(phase, now)]
    if phase.frozen:
        out.append("frozen")
    if phase.published_at is not None:
        out.append("published")
    return out


def _phase_changed(s: Session, phase: Phase, actor, action: str, **details) -> None:
    phase.revision = (phase.revision or 0) + 1
    s.add(phase)
    _audit(s, actor, action, f"phase:{phase.id}", task=phase.task_id, phase=phase.name, **details)


def _jsonable(v):
    return v.isoformat() if isinstance(v, datetime) else v


PHASE_FIELDS = (
    "opens_at",
    "closes_at",
    "daily_limit",
    "total_limit",
    "concurrent_limit",
    "public_fraction",
)


def edit_phase(s: Session, phase: Phase, changes: dict, *, actor, via: str = "web") -> Phase:
    """Change a phase's window, limits or public fraction (validated); commits.

    The public fraction of a phase decides whether it scores with a hidden part; while any
    submission of the task's split is scored under the shared partition, a different fraction is
    refused (the partition is drawn once)."""
    unknown = set(changes) - set(PHASE_FIELDS)
    if unknown:
        raise LifecycleRefused(f"unknown phase field(s): {', '.join(sorted(unknown))}", "bad_field")
    new = {k: getattr(phase, k) for k in PHASE_FIELDS}
    new.update(changes)
    if new["opens_at"] and new["closes_at"] and new["closes_at"] <= new["opens_at"]:
        raise LifecycleRefused("a phase must close after it opens", "bad_window")
    for k in ("daily_limit", "total_limit", "concurrent_limit"):
        if new[k] is not None and new[k] < 0:
            raise LifecycleRefused("a limit is 0 or more (empty: no limit)", "bad_limit")
    frac = new["public_fraction"]
    if not (0.0 < float(frac) <= 1.0):
        raise LifecycleRefused("the public fraction is in (0, 1]", "bad_fraction")
    if "public_fraction" in changes and float(frac) != float(phase.public_fraction):
        _check_fraction_change(s, phase, float(frac))
    before = {k: _jsonable(getattr(phase, k)) for k in changes}
    for k, v in changes.items():
        setattr(phase, k, v)
    _phase_changed(
        s,
        phase,
        actor,
        "phase.edit",
        before=before,
        after={k: _jsonable(v) for k, v in changes.items()},
        via=via,
    )
    s.commit()
    return phase


def _check_fraction_change(s: Session, phase: Phase, frac: float) -> None:
    scored_here = s.execute(
        select(Submission.id).where(
            Submission.phase_id == phase.id, Submission.score_attempt.is_not(None)
        )
    ).first()
    if scored_here:
        raise LifecycleRefused(
            "the public fraction cannot change once submissions of the phase are scored "
            "(the public/private partition is drawn once)",
            "partition_fixed",
        )
    if frac >= 1.0:
        return
    part = s.execute(
        select(GoldPartition).where(GoldPartition.key == shared_key(phase.task_id, phase.split))
    ).scalar_one_or_none()
    if part is not None and part.public_fraction != frac and _partition_in_use(s, part.id):
        raise LifecycleRefused(
            f"the {phase.task_id}/{phase.split} gold is partitioned at a public fraction of "
            f"{part.public_fraction} for every phase on that split, and submissions are scored under it; "
            "this phase can use that fraction or 1 (no private part)",
            "partition_fixed",
        )


def create_phase(
    s: Session, *, task, name: str, split: str, actor, via: str = "web", **fields
) -> Phase:
    if not name or len(name) > 32 or split not in task.splits:
        raise LifecycleRefused(
            f"a phase needs a name (at most 32 characters) and a split of the task "
            f"({', '.join(task.splits)})",
            "bad_phase",
        )
    if s.execute(select(Phase.id).where(Phase.task_id == task.id, Phase.name == name)).first():
        raise LifecycleRefused(f"{task.id} has a phase {name} already", "exists")
    fields.setdefault("public_fraction", 1.0 if split != "test" else 0.5)
    p = Phase(task_id=task.id, name=name, split=split, **fields)
    s.add(p)
    s.flush()
    _audit(s, actor, "phase.create", f"phase:{p.id}", task=task.id, name=name, split=split, via=via)
    s.commit()
    return p


def close(s: Session, phase: Phase, *, actor, via: str = "web", commit: bool = True) -> Phase:
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
    _phase_changed(s, phase, actor, "phase.close", via=via)
    if commit:
        s.commit()
    return phase


def set_frozen(s: Session, phase: Phase, frozen: bool, *, actor, via: str = "web") -> Phase:
    """Freeze the board (later submissions are not shown to participants) or unfreeze it."""
    if bool(phase.frozen) == frozen:
        raise LifecycleRefused(
            f"the board of {phase.task_id}/{phase.name} is "
            f"{'frozen' if frozen else 'not frozen'} already",
            "unchanged",
        )
    phase.frozen, phase.frozen_at = frozen, (utcnow() if frozen else None)
    _phase_changed(
        s, phase, actor, "leaderboard.freeze" if frozen else "leaderboard.unfreeze", via=via
    )
    s.commit()
    return phase


def set_board_open(s: Session, phase: Phase, is_open: bool, *, actor, via: str = "web") -> Phase:
    """Show the board to everyone, or to organizers only."""
    phase.leaderboard_open = is_open
    _phase_changed(s, phase, actor, "leaderboard.open" if is_open else "leaderboard.close", via=via)
    s.commit()
    return phase


def bump(
    s: Session, phase: Phase, *, actor=None, action: str = "leaderboard.refresh", **details
) -> None:
    """Mark a phase's board as changed for a reason outside the submission and phase rows (e.g. a
    new partition); commits."""
    _phase_changed(s, phase, actor, action, **details)
    s.commit()


# ----------------------------------------------------------------------------- publication


def ranking_versions(s: Session, phase_id: int) -> list[RankingVersion]:
    return list(
        s.execute(
            select(RankingVersion)
            .where(RankingVersion.phase_id == phase_id)
            .order_by(RankingVersion.version)
        ).scalars()
    )


def latest_ranking(s: Session, phase_id: int, version: int | None = None) -> RankingVersion | None:
    q = select(RankingVersion).where(RankingVersion.phase_id == phase_id)
    if version is not None:
        q = q.where(RankingVersion.version == version)
    return s.execute(q.order_by(RankingVersion.version.desc()).limit(1)).scalar_one_or_none()


def publish(
    s: Session,
    phase: Phase,
    *,
    task,
    actor,
    settings,
    reason: str = "",
    via: str = "web",
    close_first: bool = False,
) -> RankingVersion:
    """Publish the final ranking of a closed phase as an immutable snapshot (version 1), or a
    correction of it (version n + 1, with a reason). With `close_first`, an open phase is closed
    in the same transaction. Commits."""
    from server import leaderboard as lb

    reason = " ".join((reason or "").split())[:2000]
    if phase.partition_id is None and (phase.split != "test" or phase.public_fraction >= 1):
        # the seed of the statistics (normally recorded by the worker already), recorded before
        # this transaction writes anything; a phase with a hidden part uses its partition's
        bootstrap_seed(s.get_bind(), phase.id)
    if phase.partition_id is None and phase.split == "test" and phase.public_fraction < 1:
        # published before any scoring: its partition is drawn now, in a transaction of its own and
        # before this one writes anything (the snapshot's statistics need it)
        s.commit()
        partition_of(s.get_bind(), phase.id)
        s.refresh(phase)
    if close_first and phase_state(phase) == "open":
        close(s, phase, actor=actor, via=via, commit=False)
    state = phase_state(phase)
    if state != "closed":
        s.rollback()
        raise LifecycleRefused(
            f"only a closed phase can be published: the {phase.name} phase of "
            f"{phase.task_id} is {state} (close it first, or close and publish)",
            "phase_open",
        )
    pending = s.execute(
        select(func.count(Submission.id)).where(
            Submission.phase_id == phase.id,
            Submission.status.in_(PENDING),
            Submission.removed_at.is_(None),
        )
    ).scalar_one()
    if pending:
        s.rollback()
        raise LifecycleRefused(
            f"{pending} submission(s) of the phase are still being scored; publish when "
            "every one is final",
            "pending",
        )
    prev = latest_ranking(s, phase.id)
    if prev is not None and not reason:
        s.rollback()
        raise LifecycleRefused(
            f"the final ranking of {phase.task_id}/{phase.name} was published as "
            f"version {prev.version}; a correction needs a reason",
            "reason_required",
        )
    now = utcnow()
    version = (prev.version if prev else 0) + 1
    # the snapshot is public: it names the role, never an address (the row keeps the account's id)
    who = "organizer" if isinstance(actor, User) else None
    board = lb.build_board(
        s,
        task,
        phase,
        audience="public",
        show_private=True,
        include_closed=True,
        provenance=current_provenance(task, phase.split, settings.home),
        with_parts=True,
    )
    board.published = (
        True  # as it will be served: the private ranking with the public part beside it
    )
    lb.add_reference_rows(board, task, settings.home)
    _snapshot_statistics(s, task, phase, board, settings)
    meta = {
        "version": version,
        "published_at": now.replace(microsecond=0).isoformat() + "Z",
        "published_by": who,
        "reason": reason,
        "rule": RANKED_RUN_RULE,
    }
    body = lb.snapshot_dict(board, meta, secret=settings.secret_key)
    body_json = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    rv = RankingVersion(
        phase_id=phase.id,
        task_id=phase.task_id,
        phase_name=phase.name,
        version=version,
        reason=reason,
        published_by=actor.id if isinstance(actor, User) else None,
        published_at=now,
        sha256=hashlib.sha256(body_json.encode("utf-8")).hexdigest(),
        body_json=body_json,
        body_csv=lb.snapshot_csv(body),
        body_latex=lb.snapshot_latex(body),
    )
    s.add(rv)
    if phase.published_at is None:
        phase.published_at = now
    changes = ranking_diff(json.loads(prev.body_json), body) if prev else None
    _phase_changed(
        s,
        phase,
        actor,
        "ranking.publish" if version == 1 else "ranking.correct",
        via=via,
        version=version,
        reason=reason,
        sha256=rv.sha256,
        changes=changes,
    )
    s.commit()
    return rv


def _snapshot_statistics(s: Session, task, phase: Phase, board, settings) -> None:
    """Freeze the board's statistics into the snapshot: intervals, rank ranges, p-values and
    clusters of the ranked part, and the public part's intervals beside them."""
    from server import stats

    try:
        snap = stats.for_snapshot(settings, s.get_bind(), task, phase, board)
    except Exception as e:  # noqa: BLE001 — publication never fails for its statistics
        log.warning(
            "statistics of the snapshot of phase %s not computed (%s: %s)",
            phase.id,
            type(e).__name__,
            e,
        )
        stats.attach(board, None, reason="no interval: its computation failed at publication")
        return
    stats.attach(board, snap["ranked"])
    if "public" in snap:
        board.public_stats = snap["public"]
        for r in board.rows:
            r.public_ci = snap["public"]["rows"].get(str(r.submission_id), {}).get("ci")


def ranking_diff(old: dict, new: dict) -> dict:
    """What changed between two published versions: rows added, removed, re-ranked or re-scored."""

    def key(r):
        return (
            (r["row_type"], r["team"], r.get("method_name", ""))
            if r["row_type"] != "team"
            else ("team", r["team"])
        )

    a = {key(r): r for r in old.get("rows", [])}
    b = {key(r): r for r in new.get("rows", [])}
    out = {"added": [], "removed": [], "changed": []}
    for k in b.keys() - a.keys():
        out["added"].append(
            {"team": b[k]["team"], "submission_id": b[k]["submission_id"], "rank": b[k]["rank"]}
        )
    for k in a.keys() - b.keys():
        out["removed"].append(
            {"team": a[k]["team"], "submission_id": a[k]["submission_id"], "rank": a[k]["rank"]}
        )
    for k in a.keys() & b.keys():
        ra, rb = a[k], b[k]
        diff = {
            f: [ra.get(f), rb.get(f)] for f in ("rank", "submission_id") if ra.get(f) != rb.get(f)
        }
        vals = {
            m: [ra["metrics"].get(m), rb["metrics"].get(m)]
            for m in rb["metrics"]
            if ra["metrics"].get(m) != rb["metrics"].get(m)
        }
        if vals:
            diff["metrics"] = vals
        if diff:
            out["changed"].append({"team": rb["team"], **diff})
    for v in out.values():
        v.sort(key=lambda r: r.get("team") or "")
    return out


# ----------------------------------------------------------------------------- the gold partition


def shared_key(task_id: str, split: str) -> str:
    return f"{task_id}/{split}"


def new_seed() -> int:
    import secrets

    return secrets.randbelow(2**31 - 1)


def _partition_in_use(s: Session, partition_id: int) -> bool:
    return (
        s.execute(
            select(Submission.id)
            .join(Phase, Phase.id == Submission.phase_id)
            .where(Phase.partition_id == partition_id, Submission.score_attempt.is_not(None))
        ).first()
        is not None
    )


def shared_partition(engine, task_id: str, split: str, public_fraction: float) -> GoldPartition:
    """The partition of a task's split that every phase on it shares, drawn once (first writer wins)."""
    key = shared_key(task_id, split)
    with Session(engine, expire_on_commit=False) as s:
        got = s.execute(select(GoldPartition).where(GoldPartition.key == key)).scalar_one_or_none()
        if got is not None:
            return got
        s.add(
            GoldPartition(
                key=key,
                task_id=task_id,
                split=split,
                seed=new_seed(),
                public_fraction=public_fraction,
                method="stratified",
            )
        )
        _audit(s, None, "partition.draw", f"partition:{key}", public_fraction=public_fraction)
        try:
            s.commit()
        except IntegrityError:
            s.rollback()
        return s.execute(select(GoldPartition).where(GoldPartition.key == key)).scalar_one()


def partition_of(engine, phase_id: int) -> GoldPartition | None:
    """The partition a phase scores with, attaching it to its split's shared one on first use;
    None when the phase has no private part."""
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        if phase.split != "test" or phase.public_fraction >= 1:
            return None
        if phase.partition_id is not None:
            return s.get(GoldPartition, phase.partition_id)
        task_id, split, frac = phase.task_id, phase.split, phase.public_fraction
    part = shared_partition(engine, task_id, split, frac)
    if part.public_fraction != frac:
        # drawn at another fraction: redraw it only while nothing is scored under it
        with Session(engine, expire_on_commit=False) as s:
            if not _partition_in_use(s, part.id):
                s.execute(
                    update(GoldPartition)
                    .where(GoldPartition.id == part.id)
                    .values(public_fraction=frac, seed=new_seed())
                )
                _audit(s, None, "partition.redraw", f"partition:{part.key}", public_fraction=frac)
                s.commit()
                part = s.get(GoldPartition, part.id, populate_existing=True)
    with Session(engine) as s:
        s.execute(
            update(Phase)
            .where(Phase.id == phase_id, Phase.partition_id.is_(None))
            .values(partition_id=part.id, revision=Phase.revision + 1)
        )
        s.commit()
        pid = s.execute(select(Phase.partition_id).where(Phase.id == phase_id)).scalar_one()
    with Session(engine, expire_on_commit=False) as s:
        return s.get(GoldPartition, pid)


def draw(part: GoldPartition, home) -> tuple[list[str], list[str]]:
    """(public, private) unit ids of a partition."""
    from scorer import partition_strata, partition_units
    from scorer.partition import legacy_partition, stratified_partition

    if part.method == "legacy":
        return legacy_partition(
            partition_units(part.task_id, part.split, home), part.seed, part.public_fraction
        )
    return stratified_partition(
        partition_strata(part.task_id, part.split, home), part.seed, part.public_fraction
    )


def gold_parts(engine, phase_id: int, settings) -> dict[str, frozenset | None]:
    """{"all": None}, or {"public": units, "private": units} for a phase with a hidden part."""
    part = partition_of(engine, phase_id)
    if part is None:
        return {"all": None}
    public, private = draw(part, settings.home)
    return {"public": frozenset(public), "private": frozenset(private)}


def redraw_partition(s: Session, phase: Phase, *, actor, via: str = "web") -> GoldPartition:
    """Move a phase that kept its own partition (from before partitions were shared) onto its
    split's shared, stratified one; only before its first scored submission. Commits."""
    if s.execute(
        select(Submission.id).where(
            Submission.phase_id == phase.id, Submission.score_attempt.is_not(None)
        )
    ).first():
        raise LifecycleRefused(
            "the partition cannot be re-drawn once a submission of the phase is scored",
            "partition_fixed",
        )
    engine = s.get_bind()
    part = shared_partition(engine, phase.task_id, phase.split, phase.public_fraction)
    phase.partition_id = part.id
    _phase_changed(s, phase, actor, "partition.attach", partition=part.key, via=via)
    s.commit()
    return part


def bootstrap_seed(engine, phase_id: int) -> int:
    """The seed of a board's bootstrap resamples: the phase's gold partition's recorded seed, or,
    for a phase without a private part, a seed drawn once for the phase and recorded (audited)."""
    with Session(engine) as s:
        partition_id, got = s.execute(
            select(Phase.partition_id, Phase.stats_seed).where(Phase.id == phase_id)
        ).one()
        if partition_id is not None:  # attached by the first scoring on a hidden part
            return int(s.get(GoldPartition, partition_id).seed)
        if got is not None:
            return int(got)
        seed = new_seed()
        n = s.execute(
            update(Phase)
            .where(Phase.id == phase_id, Phase.stats_seed.is_(None))
            .values(stats_seed=seed)
        ).rowcount
        if n:
            _audit(s, None, "stats.seed", f"phase:{phase_id}", seed=seed)
        s.commit()
        return int(s.execute(select(Phase.stats_seed).where(Phase.id == phase_id)).scalar_one())


# ----------------------------------------------------------------------------- provenance


def current_provenance(task, split: str, home) -> dict | None:
    """What a score must have been computed against to be ranked now: the task's declared version,
    the split's gold checksum and the scorer's version; None when the task is not imported."""
    import scorer
    from tasks.store import TaskStore

    store = TaskStore(task.id, home)
    if not store.exists():
        return None
    try:
        gold = store.gold_checksum(split)
    except Exception:  # noqa: BLE001 — a broken manifest: nothing can be compared
        return None
    return {"task_version": task.version, "gold_sha256": gold, "scorer_version": scorer.__version__}


def is_current(result: dict | None, prov: dict | None) -> bool:
    if prov is None or not result:
        return True
    got = result.get("provenance") or {}
    return all(got.get(k) == v for k, v in prov.items())


def check_provenance(engine, settings) -> list[int]:
    """Mark stale every scored submission whose counted scores were computed against another gold,
    task or scorer version than the current one, and queue it for rescoring; returns the ids to
    enqueue (the caller enqueues them after this commits)."""
    from tasks import all_tasks

    out: list[int] = []
    with Session(engine, expire_on_commit=False) as s:
        phases = list(s.execute(select(Phase)).scalars())
        tasks = {t.id: t for t in all_tasks()}
        for phase in phases:
            task = tasks.get(phase.task_id)
            prov = current_provenance(task, phase.split, settings.home) if task else None
            if prov is None:
                continue
            rows = (
                s.execute(
                    select(Submission)
                    .join(
                        Score,
                        (Score.submission_id == Submission.id)
                        & (Score.attempt == Submission.score_attempt),
                    )
                    .where(
                        Submission.phase_id == phase.id,
                        Submission.stale.is_(False),
                        Submission.removed_at.is_(None),
                        (Score.gold_sha256 != prov["gold_sha256"])
                        | (Score.task_version != prov["task_version"])
                        | (Score.scorer_version != prov["scorer_version"]),
                    )
                )
                .scalars()
                .unique()
                .all()
            )
            for sub in rows:
                s.execute(
                    update(Submission)
                    .where(Submission.id == sub.id)
                    .values(stale=True)
                    .execution_options(synchronize_session=False)
                )
                _audit(s, None, "submission.stale", f"submission:{sub.id}", current=prov)
                if sub.status in FINAL and _move(
                    s,
                    sub.id,
                    "rescore",
                    details={"reason": "stale provenance"},
                    attempt_ceiling=(sub.attempts or 0) + settings.max_attempts,
                    failure_kind=None,
                    errors=None,
                    finished_at=None,
                ):
                    out.append(sub.id)
            if rows:
                _bump_phase(s, phase.id)
        s.commit()
    return out


def gold_id(secret: str, gold_sha256: str) -> str:
    """An identifier of a gold version that cannot be used to check a guess offline: a keyed hash
    with the server's secret (the raw sha256 is for organizers only)."""
    return (
        "g"
        + hmac.new(
            secret.encode("utf-8"), gold_sha256.encode("ascii", "replace"), hashlib.sha256
        ).hexdigest()[:15]
    )


def public_result(result: dict, secret: str) -> dict:
    """A scoring result as a participant may see it: the gold's sha256 replaced by its keyed id,
    in the provenance and in the signature."""
    out = dict(result)
    prov = dict(out.get("provenance") or {})
    sha = prov.pop("gold_sha256", None)
    if sha:
        gid = gold_id(secret, sha)
        prov["gold_id"] = gid
        sig = out.get("signature") or ""
        out["signature"] = "|".join(
            f"gold:{gid}" if p.startswith("gold:") else p for p in sig.split("|")
        )
    out["provenance"] = prov
    return out


# ----------------------------------------------------------------------------- invalid uploads


def purge_invalid_uploads(engine, settings, *, batch: int = 200) -> int:
    """Delete the stored files of submissions that failed validation longer ago than the retention
    period (a file another live submission also uses is kept); returns how many were purged. The
    rows and their problem reports stay."""
    from datetime import timedelta

    from server.storage import path_for

    cutoff = utcnow() - timedelta(days=settings.invalid_retention_days)
    done = 0
    with Session(engine, expire_on_commit=False) as s:
        rows = s.execute(
            select(Submission.id, Submission.storage_key)
            .where(
                Submission.status == Status.FAILED,
                Submission.failure_kind == "invalid",
                Submission.finished_at < cutoff,
                Submission.file_purged_at.is_(None),
            )
            .limit(batch)
        ).all()
        for sid, key in rows:
            in_use = s.execute(
                select(Submission.id).where(
                    Submission.storage_key == key,
                    Submission.id != sid,
                    ~(
                        (Submission.status == Status.FAILED)
                        & (Submission.failure_kind == "invalid")
                        & (Submission.finished_at < cutoff)
                    ),
                )
            ).first()
            if not in_use and key:
                try:
                    path_for(settings.home, key).unlink(missing_ok=True)
                except (OSError, ValueError) as e:
                    log.warning("could not delete the upload of submission %s: %s", sid, e)
                    continue
            s.execute(
                update(Submission)
                .where(Submission.id == sid)
                .values(file_purged_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            done += 1
        if done:
            _audit(
                s,
                None,
                "uploads.purge",
                "uploads",
                count=done,
                older_than_days=settings.invalid_retention_days,
            )
        s.commit()
    return done
