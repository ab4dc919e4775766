"""The scoring job: a plain importable function that takes a submission id.

RQ 3.0 may run a job twice (its parent worker died while the work horse went on) and calls
`on_failure` after every failed attempt, so every step here is idempotent and conditional on the
database row: a run starts only while the submission is queued or running, Score rows are keyed
by (submission, attempt, part), and only the first run to finish marks the submission scored.
"""

from __future__ import annotations

import logging
import random
import secrets

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from server.db import get_engine
from server.models import Phase, Score, Submission, utcnow
from server.settings import Settings

log = logging.getLogger(__name__)

PENDING = ("queued", "running")


def _engine(settings: Settings):
    return get_engine(settings.sqlalchemy_url())


def score_submission(submission_id: int) -> dict:
    """Validate and score one submission against its phase's split, recording the outcome."""
    from scorer import SubmissionInvalid, score_validated, validate_file
    from server.storage import path_for

    settings = Settings.from_env()
    engine = _engine(settings)
    attempt = start_attempt(engine, submission_id, settings.max_attempts)
    if attempt is None:
        return {"submission": submission_id, "skipped": True}
    try:
        with Session(engine) as s:
            sub = s.get(Submission, submission_id)
            phase = s.get(Phase, sub.phase_id)
            task_id, split, key = sub.task_id, phase.split, sub.storage_key
            round_ceiling = sub.attempt_ceiling
        path = path_for(settings.home, key)
        try:
            v = validate_file(task_id, path, split, settings.home)
        except SubmissionInvalid as e:
            finish_invalid(engine, submission_id, e)
            return {"submission": submission_id, "status": "failed", "failure_kind": "invalid"}
        parts = gold_parts(engine, phase.id, settings)
        results = {part: score_validated(v, settings.home, only=units) for part, units in parts.items()}
        won = write_scores(engine, submission_id, attempt, results)
        return {"submission": submission_id, "status": "scored", "attempt": attempt, "recorded": won}
    except Exception as e:
        if is_last_attempt(attempt, round_ceiling, settings.max_attempts):
            fail_infra(engine, submission_id,
                       f"scoring failed on its last attempt ({attempt} of "
                       f"{round_ceiling or settings.max_attempts}): "
                       f"{type(e).__name__}: {e}")
            return {"submission": submission_id, "status": "failed", "failure_kind": "infra"}
        raise  # RQ retries: the server's own failure, not the team's


def ceiling(max_attempts: int):
    """The SQL expression for the attempt number a submission may reach in its current round."""
    from sqlalchemy import func

    return func.coalesce(Submission.attempt_ceiling, max_attempts)


def start_attempt(engine, submission_id: int, max_attempts: int) -> int | None:
    """Mark a pending submission running and count the attempt; None when there is nothing to do."""
    now = utcnow()
    with engine.begin() as conn:
        gave_up = conn.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(PENDING),
                   Submission.attempts >= ceiling(max_attempts))
            .values(status="failed", failure_kind="infra", finished_at=now,
                    errors=[_problem(f"gave up after {max_attempts} attempts (the worker died or "
                                     "the job timed out each time); this costs the team nothing")])
        ).rowcount
        if gave_up:
            return None
        row = conn.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(PENDING),
                   Submission.attempts < ceiling(max_attempts))
            .values(status="running", attempts=Submission.attempts + 1, started_at=now)
            .returning(Submission.attempts)
        ).first()
    return None if row is None else int(row[0])


def is_last_attempt(attempt: int, attempt_ceiling: int | None, max_attempts: int) -> bool:
    return attempt >= (attempt_ceiling if attempt_ceiling is not None else max_attempts)


def _problem(message: str) -> dict:
    return {"line": None, "id": None, "message": message}


def finish_invalid(engine, submission_id: int, e) -> bool:
    """Record every validation problem; the submission fails as "invalid" (no cost to the team)."""
    errors = e.to_list()
    if e.total > len(errors):
        errors.append(_problem(f"... and {e.total - len(errors)} more problems"))
    with engine.begin() as conn:
        return bool(conn.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(PENDING))
            .values(status="failed", failure_kind="invalid", errors=errors, finished_at=utcnow())
        ).rowcount)


def fail_infra(engine, submission_id: int, reason: str) -> bool:
    """Fail a pending submission for the server's own reasons (no cost to the team)."""
    with engine.begin() as conn:
        return bool(conn.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(PENDING))
            .values(status="failed", failure_kind="infra", errors=[_problem(reason)], finished_at=utcnow())
        ).rowcount)


def write_scores(engine, submission_id: int, attempt: int, results: dict[str, dict]) -> bool:
    """Write one Score row per part for this attempt (idempotently), then mark the submission
    scored if no other run did first; True when this run's scores are the ones that count."""
    with Session(engine) as s:
        have = set(s.execute(select(Score.part).where(Score.submission_id == submission_id,
                                                   Score.attempt == attempt)).scalars())
        for part, r in results.items():
            if part in have:
                continue
            prov = r["provenance"]
            s.add(Score(submission_id=submission_id, attempt=attempt, part=part, result=r,
                        primary_value=r["primary"]["value"], task_version=prov["task_version"],
                        gold_sha256=prov["gold_sha256"], scorer_version=prov["scorer_version"]))
        try:
            s.flush()
        except IntegrityError:  # another run wrote the same attempt's rows first
            s.rollback()
        won = s.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(PENDING))
            .values(status="scored", score_attempt=attempt, finished_at=utcnow(), errors=None,
                    failure_kind=None)
        ).rowcount
        s.commit()
    return bool(won)


# ------------------------------------------------------------------ the public/private gold split


def new_seed() -> int:
    return secrets.randbelow(2**31 - 1)


def ensure_partition_seed(engine, phase_id: int) -> int:
    """The phase's recorded seed, drawn once (the first writer wins)."""
    with engine.begin() as conn:
        conn.execute(update(Phase).where(Phase.id == phase_id, Phase.partition_seed.is_(None))
                     .values(partition_seed=new_seed()))
        return int(conn.execute(select(Phase.partition_seed).where(Phase.id == phase_id)).scalar_one())


def partition(units: list[str], seed: int, public_fraction: float) -> tuple[list[str], list[str]]:
    """Split the units at random, reproducibly from the seed: (public, private)."""
    order = sorted(units)
    random.Random(seed).shuffle(order)
    k = round(len(order) * public_fraction)
    k = max(1, min(len(order) - 1, k)) if len(order) > 1 else len(order)
    return sorted(order[:k]), sorted(order[k:])


def gold_parts(engine, phase_id: int, settings: Settings) -> dict[str, frozenset | None]:
    """{"all": None}, or {"public": units, "private": units} for a test phase with a hidden part."""
    from scorer import partition_units

    with Session(engine) as s:
        phase = s.get(Phase, phase_id)
        task_id, split, fraction, seed = phase.task_id, phase.split, phase.public_fraction, phase.partition_seed
    if split != "test" or fraction >= 1:
        return {"all": None}
    if seed is None:
        seed = ensure_partition_seed(engine, phase_id)
    public, private = partition(partition_units(task_id, split, settings.home), seed, fraction)
    return {"public": frozenset(public), "private": frozenset(private)}


# ------------------------------------------------------------------ RQ callback


def on_job_failure(job, connection, exc_type=None, exc_value=None, tb=None) -> None:
    """RQ calls this after every failed attempt: fail the submission only after the last one."""
    if job.retries_left:
        return
    from server.queue import submission_id_of

    settings = Settings.from_env()
    engine = _engine(settings)
    sid = submission_id_of(job.id)
    with Session(engine) as s:
        sub = s.get(Submission, sid)
        if sub is None or sub.status not in PENDING or \
                not is_last_attempt(sub.attempts, sub.attempt_ceiling, settings.max_attempts):
            return  # the reconciler re-enqueues what still has attempts left
    fail_infra(engine, sid, f"scoring failed on its last attempt ({settings.max_attempts} of "
                            f"{settings.max_attempts}): {exc_type.__name__ if exc_type else 'error'}: {exc_value}")
