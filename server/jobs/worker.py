"""`palimpsest worker`: an RQ worker on the scoring queues, JSON-serialized, with short heartbeats.

Each job runs in a forked work horse, so a crash or a timeout kills the horse, not the worker.
RQ's worker exits when Redis goes away; outside burst mode this loop starts a new one.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

import numpy  # noqa: F401 - preloaded in the parent: each forked horse starts warm
import redis
import scipy.stats  # noqa: F401 - preloaded in the parent: each forked horse starts warm
import sqlmodel
from rq import SimpleWorker, Worker
from rq.serializers import JSONSerializer
from rq.worker import WorkerStatus
from sqlmodel import Session

import scorer.bootstrap  # noqa: F401 - preloaded in the parent: each forked horse starts warm
import scorer.families  # noqa: F401 - preloaded in the parent: each forked horse starts warm
import scorer.sweep
import server.boards.stats  # noqa: F401 - preloaded in the parent: each forked horse starts warm
import server.jobs.scoring as scoring  # preloaded in the parent: each forked horse starts warm
import server.storage  # noqa: F401 - preloaded in the parent: each forked horse starts warm
from scorer import partition_strata, partition_units
from scorer.families import read_jsonl
from server import objectstore
from server.db import get_engine
from server.domain import audit, notices, people, shown
from server.domain.lifecycle import claim_queued, compile_job_moves, record_scores
from server.jobs import board_jobs, sandbox, waits
from server.jobs.procs import die_with_parent
from server.jobs.queue import BOARDS, QUEUES, RUNS, connect, get_queue
from server.jobs.scoring import fail_infra, start_attempt
from server.migrate import SchemaError, check_at_head
from server.models import Competition, Phase, Registration, Submission, utcnow
from server.settings import Settings, get_settings
from tasks import all_tasks
from tasks.store import TaskStore

log = logging.getLogger(__name__)


def warm_statements(engine) -> None:
    """Compile the job's SQL once in the parent (no row has id 0), so horses find it cached:
    the start, the claim, the failure, the run's facts, and what a won score writes (the
    status, the phase's revision, the blind-run check, the audit row, the Score row, the run's
    notice), these last in a transaction never committed."""
    start_attempt(engine, 0, 1, only_queued=True)
    start_attempt(engine, 0, 10**6, only_queued=True)
    claim_queued(engine, 0, 1, besides=(0,))
    fail_infra(engine, 0, "")
    record_scores(engine, 0, 0, {})
    with engine.connect() as c:
        c.execute(scoring._RUN_FACTS, {"sid": 0}).all()
    with Session(engine) as s:
        s.get(Submission, 0)
        s.get(Phase, 0)
        notices.run_notice_wanted(s, 0)  # whether the run's submitter asked for its notice
        try:  # compiled before they run; nothing of it stays
            compile_job_moves(s)  # the start, the score, their revision, audit row and scores
            shown.is_unshown(s, 0, 0, utcnow())  # SQLite's reads after a move
            audit.competition_of_target(s, "-")
            people.competition_of_task(s, "-")  # the run's notice: its competition,
            s.get(Competition, 0)  # and its submitter's registration there
            s.exec(
                sqlmodel.select(Registration).where(
                    Registration.competition_id == 0, Registration.user_id == 0
                )
            ).first()
        except Exception as e:  # noqa: BLE001 — a statement refused is compiled all the same
            log.debug("worker: warm statements (%s)", type(e).__name__)
        # nothing committed: closing the session rolls it all back


def warm_caches(settings: Settings, seen: dict[str, int] | None = None) -> None:
    """Read every imported task's inputs and gold once in the parent: each forked horse inherits
    the parsed files (the scorer's caches are keyed by file version, so a re-import is seen).
    `seen` (task id to its manifest's version, kept by the worker): only the tasks imported or
    fetched since, as after each job on a data directory that started empty (the first job of a
    task there fetches its files from the store in its horse, whose caches die with it)."""
    for t in all_tasks():
        store = TaskStore(t.id, settings.home)
        if not store.exists():
            continue
        if seen is not None:
            try:
                version = store.manifest_path.stat().st_mtime_ns
            except OSError:
                continue
            if seen.get(t.id) == version:
                continue
            seen[t.id] = version
        imported = store.manifest().get("splits", t.splits)
        for split in (s for s in t.splits if s in imported):
            try:
                partition_units(t.id, split, settings.home)
                if t.has_private_part(split):
                    partition_strata(t.id, split, settings.home)
                gold = store.gold(split, "gold.jsonl")
                if gold.is_file():
                    read_jsonl(gold)
            except Exception as e:  # a broken import must not stop the worker; the job reports it
                log.warning("worker: could not preload %s/%s (%s)", t.id, split, e)


def reads_gold(queues) -> bool:
    """Whether a worker of these queues reads gold (scores, statistics, baselines, agreement
    fits): a code worker (the runs queue alone) never holds gold, so never reads any ahead."""
    return any(q != RUNS for q in queues)


def warm_store(settings: Settings) -> None:
    """Import boto3 and build the object store's client once in the parent (a site with a store):
    made in each forked horse, they cost 0.4-0.6 s of CPU per job, ten times a scoring job. One
    request is made here (what the client builds on its first), its connection closed after it:
    every horse opens its own."""
    try:
        store = objectstore.store_for(settings)
        if store is not None:
            store.warm()
    except Exception as e:  # noqa: BLE001 — a job that needs the store reports the problem
        log.warning("worker: the object store did not answer its first request (%s)", e)


class _EndsItsThreadAtOnce:
    """RQ's `unsubscribe`, in the order that ends the worker's pubsub thread at once with every
    redis-py. RQ (3.0) unsubscribes, then stops the thread (which reads its channel with a 60 s
    timeout), relying on the unsubscribe's confirmation to wake it. redis-py 8.2 stops a thread by
    joining it, and the thread, woken by that confirmation but not yet told to stop, then waits for
    a new subscription, RQ's 60 s: every worker's end (a burst's, a shutdown's) took up to 60 s
    (a test suite's in-process bursts 60 s each). Here the thread is told to stop first; the
    confirmation then wakes it and it ends. (The flag is redis-py's `PubSubWorkerThread._running`,
    an Event since redis-py 3.3; without it, RQ's own order.)"""

    def unsubscribe(self):
        thread = getattr(self, "pubsub_thread", None)
        running = getattr(thread, "_running", None)
        if not isinstance(running, threading.Event):
            return super().unsubscribe()
        running.clear()  # the thread's loop ends at its next wake
        self.pubsub.unsubscribe()  # its confirmation wakes the thread's read
        thread.join(timeout=5)
        self.pubsub.close()
        return None


class PromptSimpleWorker(_EndsItsThreadAtOnce, SimpleWorker):
    """RQ's SimpleWorker (each job in this process) whose end waits for no pubsub timeout."""


def _worker_class():
    class SupervisedWorker(_EndsItsThreadAtOnce, Worker):
        """RQ's Worker whose work horse dies with it (SIGKILL through PR_SET_PDEATHSIG): a worker
        killed outright leaves no horse behind; its job is re-enqueued by the reconciler."""

        palimpsest_settings: Settings | None = None

        def main_work_horse(self, job, queue):
            die_with_parent(signal.SIGKILL, parent_pid=self.pid)
            return super().main_work_horse(job, queue)

        def execute_job(self, job, queue):
            if job.origin == BOARDS:
                # a board's render runs in this process (as RQ's SimpleWorker runs a job): the web
                # app built here keeps what it built (a board's formats and audiences at one
                # version share one build), where a forked horse would start from nothing
                try:
                    self.perform_job(job, queue, self.prepare_execution(job))
                finally:
                    board_jobs.forked_safe()
                    self.set_state(WorkerStatus.IDLE)
                return None
            try:
                return super().execute_job(job, queue)
            finally:  # a task its horse fetched: read here too, for the horses to come
                if self.palimpsest_settings is not None and reads_gold(self.queue_names()):
                    try:
                        warm_caches(self.palimpsest_settings, _WARMED)
                    except Exception as e:  # noqa: BLE001 — the next job reads them itself
                        log.warning("worker: could not preload the tasks fetched (%s)", e)

    return SupervisedWorker


class _Stop(BaseException):
    """Raised by our SIGTERM/SIGINT handler outside RQ's work loop."""


def _own_signals() -> None:
    """SIGTERM and SIGINT stop this process whenever RQ's own handlers are not in place: while Redis
    is away and the loop below waits to start a worker again. (Before, a SIGTERM there reached the
    handler of a stale RQ worker, which tried to tell Redis, failed, and was swallowed: the worker
    lived on as an orphan that ignored SIGTERM.)"""

    def stop(signum, _frame):
        raise _Stop(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def build_worker(settings: Settings, queues=QUEUES, conn=None, *, simple: bool = False, name=None):
    """An RQ Worker (or SimpleWorker, which runs jobs in-process) over the given queues."""
    conn = conn or connect(settings, start_embedded=True)
    cls = PromptSimpleWorker if simple else _worker_class()
    w = cls(
        [get_queue(q, conn, settings) for q in queues],
        connection=conn,
        serializer=JSONSerializer,
        job_monitoring_interval=settings.heartbeat_every,
        worker_ttl=60,
        name=name,
    )
    if not simple:
        w.palimpsest_settings = settings
    return w


# the tasks this worker has read in the parent: id to its manifest's version (warm_caches)
_WARMED: dict[str, int] = {}


# what /status shows of a code worker, by its name: the limits its runs get (`sandbox.describe`)
# to everyone, and with the host's detail (mount points, paths) to administrators
LIMITS_KEY = "palimpsest:worker-limits:"
HOST_LIMITS_KEY = "palimpsest:worker-host-limits:"
POOLS_KEY = waits.POOLS_KEY  # and the pools of code runs it serves


def run(settings: Settings, queues=QUEUES, *, burst: bool = False) -> int:
    """Work until stopped (or, with burst, until the queues are empty); 0 on a clean exit. A
    worker of the runs queue says first which limits its blind runs get on this host."""
    _own_signals()
    limits = sandbox.describe(settings) if RUNS in queues else None
    public = sandbox.describe(settings, host=False) if RUNS in queues else None
    if limits is not None:
        log.warning("worker: %s", limits)
    try:
        engine = get_engine(settings.sqlalchemy_url())
        check_at_head(engine)  # SchemaError, saying to run `palimpsest db upgrade`
        if reads_gold(queues):  # a code worker holds no gold: nothing of it read ahead
            warm_caches(settings, _WARMED)
        warm_store(settings)
        warm_statements(engine)
        if BOARDS in queues:  # the web app the boards' renders need, built once for every horse
            board_jobs.warm_app()
        scorer.sweep.warm()  # the board statistics' compiled sweep, loaded once for every horse
        engine.dispose()
        while True:
            w, error = None, None
            try:
                w = build_worker(settings, queues)
                if limits is not None:
                    w.connection.set(LIMITS_KEY + w.name, public, ex=7 * 24 * 3600)
                    w.connection.set(HOST_LIMITS_KEY + w.name, limits, ex=7 * 24 * 3600)
                    pools = ",".join(settings.pools())  # the pools its runs' claims serve
                    w.connection.set(POOLS_KEY + w.name, pools, ex=7 * 24 * 3600)
                try:
                    w.work(burst=burst, logging_level="WARNING", with_scheduler=False)
                finally:
                    _own_signals()  # RQ's handlers belong to that worker only
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                error = e
            # A SIGTERM taken by RQ while Redis is away ends work() with a ConnectionError (its
            # teardown cannot tell Redis): the stop request is honoured all the same.
            if w is not None and getattr(w, "_shutdown_requested_date", None) is not None:
                return 0
            if error is None:
                if burst:
                    return 0
                log.warning(
                    "worker: stopped without being asked (Redis away?); starting again in 2 s"
                )
            elif burst:
                log.error("worker: Redis unavailable (%s)", error)
                return 1
            else:
                log.warning("worker: Redis unavailable (%s); starting again in 2 s", error)
            time.sleep(2)
    except _Stop:
        log.warning("worker: stopped by a signal")
        return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m server.jobs.worker")
    p.add_argument("--queue", action="append", choices=QUEUES)
    p.add_argument("--burst", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker %(message)s")
    parent = os.environ.get("PALIMPSEST_SUPERVISOR_PID")
    if (
        parent and parent.isdigit()
    ):  # started by `palimpsest serve`: die with it, even on its kill -9
        die_with_parent(signal.SIGTERM, parent_pid=int(parent))

    try:
        return run(get_settings(), tuple(a.queue or QUEUES), burst=a.burst)
    except SchemaError as e:
        print(f"worker: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
