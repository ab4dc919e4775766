"""The scoring job: a plain importable function that takes a submission id.

Every change of the submission's status goes through server.domain.lifecycle. RQ 3.0 may run a job
twice (its parent worker died while the work horse went on) and calls `on_failure` after every
failed attempt, so every step here is idempotent and conditional on the database row: a run starts
only while the submission is queued or running, Score rows are keyed by (submission, attempt, part),
and only the first run to finish marks the submission scored.
"""

from __future__ import annotations

import json
import logging
import time

import redis
from rq import get_current_job
from sqlalchemy import bindparam, select
from sqlmodel import Session

from scorer import Problem, SubmissionInvalid, score_validated, validate_file
from server import objectstore
from server.boards.stats import compute_board_stats, enqueue, save_units
from server.db import get_engine
from server.domain import lifecycle, notices
from server.domain.lifecycle import (
    PENDING,
    fail_infra,
    problem_text,  # noqa: F401  (one wording of a problem)
    start_attempt,  # noqa: F401  (importable from here)
)
from server.domain.partitions import gold_parts
from server.jobs.outbox import enqueue_delivery, notify_run
from server.jobs.queue import (
    connect,
    drop_claim,
    drop_waiting_job,
    enqueue_submission,
    hold_claim,
    submission_id_of,
    take_upload_copy,
)
from server.jobs.rlimits import TooCostly, bounded
from server.models import Phase, Submission
from server.settings import Settings, get_settings
from server.storage import path_for
from tasks import get_task
from tasks.store import TaskStore

log = logging.getLogger(__name__)

# the transitions live in server.domain.lifecycle; these names stay importable from here
write_scores = lifecycle.record_scores


def _engine(settings: Settings):
    return get_engine(settings.sqlalchemy_url())


def score_submission(submission_id: int) -> dict:
    """Validate and score one submission against its phase's split, recording the outcome; then,
    while more runs of its phase wait (up to `score_batch` in all, within half the job's time),
    claim each in the database and score it the same way (`score_more`)."""
    settings = get_settings()
    _ensured.clear()  # the task's files are compared with the store's once per job
    out = score_one(submission_id, settings)
    if settings.score_batch > 1 and out.get("phase") is not None:
        out["more"] = score_more(settings, out["phase"], submission_id)
    return out


# the tasks whose files this job has compared with the store's (a batch's runs share them)
_ensured: set[str] = set()


def score_more(settings: Settings, phase_id: int, first: int) -> list[int]:
    """Score up to `score_batch - 1` more queued runs of the phase in this job, in the order they
    came. Each is claimed in the database first (`lifecycle.claim_queued`: started there, so that
    its own job, should a worker pop it, starts nothing), its waiting job is dropped through RQ's
    API, and a claim key names this job as the one scoring it: the reconciler takes the run
    back, as any run of a dead worker, only once this job's heartbeat is stale. Each is scored
    as its own job would score it (its own transactions, attempts and outcome); one whose
    scoring raises with attempts left is queued again as a job of its own. No queue is walked:
    a claim costs the same whatever the queue's depth. Returns the ids scored here."""
    engine = _engine(settings)
    deadline = time.monotonic() + settings.job_timeout / 2
    conn = connect(settings)
    try:  # no Redis: nobody could tell that this job holds the runs; they wait for their jobs
        conn.ping()
    except redis.RedisError as e:
        log.warning("scoring: no more runs taken in this job (%s)", e)
        return []
    current = get_current_job()
    holder = current.id if current is not None else ""
    done: list[int] = []
    passed = {first}  # this job's runs: its own, and any whose scoring failed here
    while len(done) < settings.score_batch - 1 and time.monotonic() < deadline:
        got = lifecycle.claim_queued(engine, phase_id, settings.max_attempts, besides=passed)
        if got is None:
            break
        sid, attempt = got
        passed.add(sid)
        try:
            hold_claim(conn, sid, holder, settings.job_timeout)
            drop_waiting_job(conn, sid)
        except redis.RedisError as e:  # the run is ours in the database: scored all the same
            log.warning("submission %s: claim not recorded in Redis (%s)", sid, e)
        try:
            score_one(sid, settings, attempt=attempt)
        except Exception:  # the server's own failure with attempts left: a job of its own
            log.exception("submission %s: scoring failed in a batch; queued again", sid)
            if lifecycle.requeue(engine, sid, attempt):
                enqueue_submission(conn, sid, settings, replace=True)
            continue
        finally:
            try:
                drop_claim(conn, sid)
            except redis.RedisError:  # it expires
                pass
        done.append(sid)
    return done


def score_one(submission_id: int, settings: Settings, *, attempt: int | None = None) -> dict:
    """Validate and score one submission against its phase's split, recording the outcome.
    `attempt`: the run was claimed and started already (`score_more`); otherwise its attempt
    starts here, from queued only (a running run is held by a batch, or by an attempt the
    reconciler takes back once it is dead)."""
    engine = _engine(settings)
    facts = None
    if attempt is None:  # the start, and what the job needs of the run and phase, in one go
        got = lifecycle.start_run(
            engine,
            submission_id,
            settings.max_attempts,
            only_queued=True,
            then=lambda s: s.connection().execute(_RUN_FACTS, {"sid": submission_id}).one(),
        )
        if got is None:
            return {"submission": submission_id, "skipped": True}
        attempt, facts = got
    round_ceiling = None
    try:
        if facts is None:  # a run a batch claimed: one statement
            with engine.connect() as c:
                facts = c.execute(_RUN_FACTS, {"sid": submission_id}).one()
        task_id, key, round_ceiling, phase_id, split = facts[:5]
        # the upload and the task's files, from the object store when this machine lacks them
        path = fetch_upload(settings, key)
        if task_id not in _ensured:
            objectstore.ensure_task(settings, task_id)
            _ensured.add(task_id)
        parts = gold_parts(engine, phase_id, settings, phase=facts)
        try:
            with bounded(settings.file_cpu_seconds, settings.file_memory_bytes):
                v = validate_file(task_id, path, split, settings.home, settings.limits())
                results = {
                    part: score_validated(v, settings.home, only=units)
                    for part, units in parts.items()
                }
        except SubmissionInvalid as e:
            if finish_invalid(engine, submission_id, e):
                notify_run(engine, settings, submission_id)
            # retention deletes it from the store; this machine's copy goes now
            objectstore.drop_local_copy(settings, key)
            return {
                "submission": submission_id,
                "status": "failed",
                "failure_kind": "invalid",
                "phase": phase_id,
            }
        except TooCostly as e:
            what = "CPU time" if str(e) == "cpu" else "memory"
            done = finish_invalid(
                engine,
                submission_id,
                SubmissionInvalid(
                    [
                        Problem(
                            f"this file is too costly to validate: it needed more {what} than one "
                            f"file may use ({settings.file_cpu_seconds} s of CPU, "
                            f"{settings.file_memory_bytes // 2**20} MiB of memory); check it "
                            "offline with `palimpsest validate`"
                        )
                    ]
                ),
            )
            if done:
                notify_run(engine, settings, submission_id)
            objectstore.drop_local_copy(settings, key)
            return {
                "submission": submission_id,
                "status": "failed",
                "failure_kind": "invalid",
                "phase": phase_id,
            }
        # the scores, the status, the board's revision, the audit row and the run's notice: one
        # transaction (a blind run's output not shown yet moves no board)
        won, moved, noticed = lifecycle.finish_scored(
            engine,
            submission_id,
            attempt,
            results,
            then=lambda s: notices.queue_run_notice(s, settings, submission_id),
            then_if=lambda s: notices.run_notice_wanted(s, submission_id),
        )
        if won:
            # then the per-unit predictions the board's statistics resample, before those are
            # asked for: the score is recorded (and shown) without waiting for their write (on a
            # site with a store, a PUT); lost with the job, they are read from the upload again
            keep_units(settings, submission_id, attempt, v)
            if moved:
                board_statistics(settings, phase_id)
            if noticed:
                enqueue_delivery(settings)  # never raises
        return {
            "submission": submission_id,
            "status": "scored",
            "attempt": attempt,
            "recorded": won,
            "phase": phase_id,
        }
    except Exception as e:
        if is_last_attempt(attempt, round_ceiling, settings.max_attempts):
            failed = fail_infra(
                engine,
                submission_id,
                f"scoring failed on its last attempt ({attempt} of "
                f"{round_ceiling or settings.max_attempts}): "
                f"{type(e).__name__}: {e}",
            )
            if failed:
                notify_run(engine, settings, submission_id)
            return {"submission": submission_id, "status": "failed", "failure_kind": "infra"}
        raise  # RQ retries: the server's own failure, not the team's


def fetch_upload(settings: Settings, key: str):
    """The run's upload in this machine's data directory: there already (one data directory), or
    the copy the intake put in Redis beside its job (checked against its sha256), or fetched from
    the object store."""
    path = path_for(settings.home, key)
    if path.is_file() or objectstore.store_for(settings) is None:
        return path
    try:
        data = take_upload_copy(connect(settings), key)
    except redis.RedisError as e:  # the store has it
        log.warning("upload %s: its copy not read from Redis (%s)", key, e)
        data = None
    if data is not None:
        return objectstore.keep_upload(settings, key, data)
    return objectstore.local_upload(settings, key)


# the run's task, upload, round and phase, as the job reads them before scoring (and whether its
# phase has a private part: `gold_parts`)
_RUN_FACTS = (
    select(
        Submission.task_id,
        Submission.storage_key,
        Submission.attempt_ceiling,
        Submission.phase_id,
        Phase.split,
        Phase.public_fraction,
    )
    .join(Phase, Phase.id == Submission.phase_id)
    .where(Submission.id == bindparam("sid"))
)


def keep_units(settings: Settings, submission_id: int, attempt: int, v) -> None:
    """Keep the per-unit predictions the board's bootstrap resamples (server.boards.stats)."""
    try:
        save_units(
            settings.home,
            submission_id,
            attempt,
            get_task(v.task_id),
            TaskStore(v.task_id, settings.home),
            v.split,
            v.parsed,
            settings=settings,
        )
    except Exception:  # the board's statistics re-parse the upload when they need it
        log.exception("submission %s: per-unit predictions not kept", submission_id)


def board_statistics(settings: Settings, phase_id: int) -> None:
    """The phase's board changed: ask a worker for its statistics (a burst of scores coalesces
    into one or two jobs); without Redis, compute them here. A failure never touches the score."""
    try:
        if not enqueue(settings, phase_id):
            compute_board_stats(phase_id, settings)
    except Exception:
        log.exception("board statistics of phase %s failed", phase_id)


def is_last_attempt(attempt: int, attempt_ceiling: int | None, max_attempts: int) -> bool:
    return attempt >= (attempt_ceiling if attempt_ceiling is not None else max_attempts)


REPORT_PROBLEMS = 200
REPORT_BYTES = 64 * 1024


def report(e) -> list[dict]:
    """The problems of an invalid file as stored and shown: at most REPORT_PROBLEMS of them and
    REPORT_BYTES of JSON, then one line counting the rest."""
    errors, size = [], 2
    for p in e.to_list()[:REPORT_PROBLEMS]:
        n = len(json.dumps(p, ensure_ascii=False).encode("utf-8")) + 1
        if size + n > REPORT_BYTES - 200:
            break
        errors.append(p)
        size += n
    if e.total > len(errors):
        errors.append(problem_text(f"... and {e.total - len(errors)} more problems"))
    return errors


def finish_invalid(engine, submission_id: int, e) -> bool:
    """Record the validation problems (bounded); the submission fails as "invalid" (no cost to
    the team)."""
    return lifecycle.finish_invalid(engine, submission_id, report(e))


# ------------------------------------------------------------------ RQ callback


def on_job_failure(job, connection, exc_type=None, exc_value=None, tb=None) -> None:
    """RQ calls this after every failed attempt: fail the submission only after the last one;
    before a retry, its run goes back to queued, since a job starts only a queued run."""
    settings = get_settings()
    engine = _engine(settings)
    sid = submission_id_of(job.id)
    if job.retries_left:
        with Session(engine) as s:
            sub = s.get(Submission, sid)
            running = sub is not None and sub.status == "running"
            attempts = sub.attempts if sub is not None else 0
        if running:
            lifecycle.requeue(engine, sid, attempts)
        return
    with Session(engine) as s:
        sub = s.get(Submission, sid)
        if (
            sub is None
            or sub.status not in PENDING
            or not is_last_attempt(sub.attempts, sub.attempt_ceiling, settings.max_attempts)
        ):
            return  # the reconciler re-enqueues what still has attempts left
    if fail_infra(
        engine,
        sid,
        f"scoring failed on its last attempt ({settings.max_attempts} of "
        f"{settings.max_attempts}): {exc_type.__name__ if exc_type else 'error'}: {exc_value}",
    ):
        notify_run(engine, settings, sid)
