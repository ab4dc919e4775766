"""The reconciler: the database is the record of truth, Redis only a means.

Every few seconds it looks at what the database says is queued or running and asks Redis whether
a live job holds it: a job waiting in its queue, or one started whose worker still sends
heartbeats. Anything else (a worker killed mid-job, a job timed out, a Redis restart or FLUSHALL)
is enqueued again, or failed with a reason once it has used its attempts. Each pass also queues
for rescoring the scores that a gold re-import or a scorer upgrade made stale, and sweeps the mail
queue (server.jobs.outbox.sweep).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timedelta, timezone

from rq.job import JobStatus
from sqlalchemy import select
from sqlmodel import Session

from server import objectstore
from server.actions.large_uploads import abort_stale
from server.db import get_engine, session_scope
from server.domain import code_runs, run_queue
from server.domain.lifecycle import PENDING, fail_infra, requeue
from server.domain.provenance import mark_stale
from server.jobs import reminders
from server.jobs.outbox import notify_run
from server.jobs.outbox import sweep as mail_sweep
from server.jobs.queue import (
    SCORING,
    claim_holder,
    connect,
    enqueue_code_run,
    enqueue_submission,
    fetch_job,
    fetch_run_job,
    get_queue,
    job_by_id,
)
from server.jobs.retention import purge_invalid_uploads
from server.jobs.waits import RECONCILER_PROBLEMS, RECONCILER_STEPS
from server.models import CodeRun, Phase, Submission, utcnow
from server.settings import Settings

log = logging.getLogger(__name__)

_in_transit: dict[str, float] = {}
GRACE = 3.0  # seconds: a submission just committed is about to be enqueued by its creator


def job_is_live(conn, submission_id: int, settings: Settings, listed=None) -> bool:
    """True when a job in Redis waits for this submission or runs it on a live worker, or when a
    live scoring job claimed it (a batch: server.jobs.scoring.score_more); a claim made outside
    any job holds until its key expires. `listed`: the scoring queue's lists as `_listed` read
    them once for a pass (else each job is looked up in them)."""
    if _live(conn, fetch_job(conn, submission_id), settings, listed):
        return True
    holder = claim_holder(conn, submission_id)
    if holder is None:
        return False
    return holder == "" or _live(conn, job_by_id(conn, holder), settings)


def _listed(conn, settings: Settings) -> tuple[set[str], set[str]]:
    """The ids in the scoring queue's list and in its list of jobs popped but not yet started,
    read once for a pass: looking each pending run up in them would walk the list once per run."""
    q = get_queue(SCORING, conn, settings)
    return (
        {x.decode() for x in conn.lrange(q.key, 0, -1)},
        {x.decode() for x in conn.lrange(q.intermediate_queue_key, 0, -1)},
    )


def _live(conn, job, settings: Settings, listed=None) -> bool:
    if job is None:
        return False
    status = job.get_status(refresh=False)
    if status == JobStatus.QUEUED:
        q = get_queue(job.origin or SCORING, conn, settings)
        if listed is not None and q.name == SCORING:
            waiting, popped = job.id in listed[0], job.id in listed[1]
        else:
            waiting = conn.lpos(q.key, job.id) is not None
            popped = not waiting and conn.lpos(q.intermediate_queue_key, job.id) is not None
        if waiting:
            return True
        # Popped by a worker that has not started it yet: live for a while, not forever.
        if popped:
            first = _in_transit.setdefault(job.id, time.monotonic())
            return time.monotonic() - first < settings.stale_after
        return False
    if status in (JobStatus.SCHEDULED, JobStatus.DEFERRED):
        return True
    if status == JobStatus.STARTED:
        beat = job.last_heartbeat or job.started_at
        if beat is None:
            return False
        if beat.tzinfo is None:
            beat = beat.replace(tzinfo=timezone.utc)
        return datetime.now(timezone.utc) - beat < timedelta(seconds=settings.stale_after)
    return False  # finished, failed, stopped or canceled while the database still waits


def reconcile(settings: Settings, engine, conn) -> dict:
    """One pass; returns counts of what it found and did."""
    cutoff = utcnow() - timedelta(seconds=GRACE)
    with engine.connect() as c:
        rows = c.execute(
            select(
                Submission.id, Submission.status, Submission.attempts, Submission.attempt_ceiling
            )
            .where(Submission.status.in_(PENDING), Submission.created_at < cutoff)
            .order_by(Submission.id)
        ).all()
    stats = {"pending": len(rows), "live": 0, "requeued": 0, "failed": 0}
    listed = _listed(conn, settings) if rows else None
    for sid, status, attempts, attempt_ceiling in rows:
        if job_is_live(conn, sid, settings, listed):
            stats["live"] += 1
            continue
        if attempts >= (attempt_ceiling if attempt_ceiling is not None else settings.max_attempts):
            if fail_infra(
                engine,
                sid,
                f"gave up after {attempts} attempts (the worker died, the job "
                "timed out or the queue lost it each time); this costs the "
                "team nothing",
            ):
                stats["failed"] += 1
                notify_run(engine, settings, sid)  # never raises
            continue
        if requeue(engine, sid, attempts):  # back to queued, unless a run finished meanwhile
            enqueue_submission(conn, sid, settings, replace=True)
            stats["requeued"] += 1
            log.info(
                "reconciler: re-enqueued submission %s (was %s, %s attempts)", sid, status, attempts
            )
    stats.update(_reconcile_code_runs(settings, engine, conn, cutoff))
    # scores computed against another gold or scorer version are marked stale and rescored
    with session_scope(engine) as s:  # the reconciler's own step
        stale = mark_stale(s, settings)
    for sid in stale:
        enqueue_submission(conn, sid, settings, replace=True)
    stats["stale"] = len(stale)
    _step(stats, conn, "purged", lambda: purge_invalid_uploads(engine, settings))
    # the digests of pending registrations, the reminders of closing phases
    _step(stats, conn, "reminders", lambda: reminders.queue_due(engine, settings))
    # the mail queue: what a dead sender left is queued again, and a worker is asked to deliver
    # what is due (the job enqueued when a message is queued may have been lost)
    _step(stats, conn, "mail_due", lambda: mail_sweep(engine, settings, conn))
    # large uploads nobody can finish any more (their part URLs expired): aborted in the store
    if settings.s3_bucket:
        _step(stats, conn, "stale_uploads", lambda: abort_stale(settings))
        # the zips of a task's public files that a task update replaced
        _step(stats, conn, "stale_downloads", lambda: objectstore.purge_stale_downloads(settings))
    return stats


# ----------------------------------------------------------------------------- failing steps
#
# A step of the pass that fails does not stop the others (the scoring side stands), but it is an
# error an operator sees: logged once when it starts failing (and when it recovers), kept in Redis
# for the status page, and `reconcile --once` exits 1 naming it.


def _step(stats: dict, conn, name: str, fn) -> None:
    try:
        stats[name] = fn()
    except Exception as e:  # noqa: BLE001 - the other steps stand; the failure is recorded
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        msg = f"{type(e).__name__}: {first}"[:300]
        stats.setdefault("errors", {})[name] = msg
        _record(conn, name, msg)
        return
    _recovered(conn, name)


def _record(conn, name: str, msg: str) -> None:
    now = utcnow().replace(microsecond=0).isoformat() + "Z"
    old = None
    try:
        raw = conn.hget(RECONCILER_PROBLEMS, name)
        old = json.loads(raw) if raw else None
        since = old["since"] if old and old.get("error") == msg else now
        doc = {"since": since, "last": now, "error": msg}
        conn.hset(RECONCILER_PROBLEMS, name, json.dumps(doc))
    except Exception:  # noqa: BLE001 - Redis away: the log below still says it
        pass
    if not old or old.get("error") != msg:
        log.error("reconciler: %s fails: %s", RECONCILER_STEPS.get(name, name), msg)


def _recovered(conn, name: str) -> None:
    try:
        if conn.hdel(RECONCILER_PROBLEMS, name):
            log.warning("reconciler: %s works again", RECONCILER_STEPS.get(name, name))
    except Exception:  # noqa: BLE001 - Redis away: nothing was recorded either
        pass


def _reconcile_code_runs(settings: Settings, engine, conn, cutoff) -> dict:
    """Code runs the database says run under a lease that ran out (its worker died or went
    silent: `run_queue`): back to their queue while they have an attempt left (a dead code
    worker's run is tried once more), else failed for the server's reasons (not counted against
    the team). Queued runs with no job waiting for them get one (a job runs whichever run the
    round-robin gives it, so there is one per run waiting). A running run with no lease (queued
    before leases) is judged by its job's heartbeat, as before."""
    out = {"runs_requeued": 0, "runs_failed": 0}
    with Session(engine) as s:
        expired = run_queue.expired(s)
    for rid, attempts in expired:
        if attempts >= code_runs.MAX_ATTEMPTS:
            if code_runs.fail_infra(
                engine, rid, f"gave up after {attempts} attempts (the code worker died each time)"
            ):
                out["runs_failed"] += 1
            continue
        if run_queue.take_back(engine, rid):
            log.warning("reconciler: code run %s lost its lease; queued again", rid)
    with engine.connect() as c:
        rows = c.execute(
            select(
                CodeRun.id, CodeRun.attempts, CodeRun.stage, CodeRun.phase_id, CodeRun.lease_until
            )
            .where(CodeRun.stage.in_(("queued", "running")), CodeRun.created_at < cutoff)
            .order_by(CodeRun.id)
        ).all()
    out["runs_held"] = 0
    held: dict[int, object] = {}  # phase -> the date its runs wait for (None: none)
    for rid, attempts, stage, phase_id, lease in rows:
        if stage == "running" and lease is not None:
            continue  # leased: live until its lease runs out (above)
        if stage == "queued":  # held until its inputs' date: left alone until then
            if phase_id not in held:
                with Session(engine) as s:
                    held[phase_id] = code_runs.held_until(s, s.get(Phase, phase_id))
            if held[phase_id] is not None:
                out["runs_held"] += 1
                continue
        if _live(conn, fetch_run_job(conn, rid), settings):
            continue
        if attempts >= code_runs.MAX_ATTEMPTS:
            if code_runs.fail_infra(
                engine, rid, f"gave up after {attempts} attempts (the code worker died each time)"
            ):
                out["runs_failed"] += 1
            continue
        enqueue_code_run(conn, rid, settings, replace=True)
        out["runs_requeued"] += 1
    return out


def run_forever(settings: Settings, engine=None, stop: threading.Event | None = None) -> None:
    """Reconcile every `settings.reconcile_every` seconds until `stop` is set; survives outages."""
    engine = engine or get_engine(settings.sqlalchemy_url())
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            stats = reconcile(settings, engine, connect(settings, start_embedded=False))
            if stats["requeued"] or stats["failed"] or stats.get("stale"):
                log.warning("reconciler: %s", stats)
        except Exception as e:  # Redis or the database away: try again next tick
            log.warning("reconciler: pass failed (%s: %s)", type(e).__name__, e)
        stop.wait(settings.reconcile_every)


def start_thread(settings: Settings, engine=None) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    t = threading.Thread(
        target=run_forever, args=(settings, engine, stop), name="reconciler", daemon=True
    )
    t.start()
    return t, stop
