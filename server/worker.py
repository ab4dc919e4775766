"""`palimpsest worker`: an RQ worker on the scoring queues, JSON-serialized, with short heartbeats.

Each job runs in a forked work horse, so a crash or a timeout kills the horse, not the worker.
RQ's worker exits when Redis goes away; outside burst mode this loop starts a new one.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from server.queue import QUEUES, connect, get_queue
from server.settings import Settings

log = logging.getLogger(__name__)


def preload() -> None:
    """Import what every job needs once in the parent, so each forked horse starts warm."""
    import numpy  # noqa: F401
    import scipy.stats  # noqa: F401

    import scorer.bootstrap  # noqa: F401
    import scorer.families  # noqa: F401
    import server.jobs  # noqa: F401
    import server.stats  # noqa: F401
    import server.storage  # noqa: F401


def warm_statements(engine) -> None:
    """Compile the job's SQL once in the parent (no row has id 0), so horses find it cached."""
    from sqlalchemy import select
    from sqlmodel import Session

    from server.jobs import fail_infra, start_attempt
    from server.models import Phase, Score, Submission

    start_attempt(engine, 0, 1)
    start_attempt(engine, 0, 10**6)
    fail_infra(engine, 0, "")
    with Session(engine) as s:
        s.get(Submission, 0)
        s.get(Phase, 0)
        s.execute(select(Score.part).where(Score.submission_id == 0, Score.attempt == 0)).all()


def warm_caches(settings: Settings) -> None:
    """Read every imported task's inputs and gold once in the parent: each forked horse inherits
    the parsed files (the scorer's caches are keyed by file version, so a re-import is seen)."""
    from scorer import partition_strata, partition_units
    from scorer.families import read_jsonl
    from tasks import all_tasks
    from tasks.store import TaskStore

    for t in all_tasks():
        store = TaskStore(t.id, settings.home)
        if not store.exists():
            continue
        for split in t.splits:
            try:
                partition_units(t.id, split, settings.home)
                if split == "test":
                    partition_strata(t.id, split, settings.home)
                gold = store.gold(split, "gold.jsonl")
                if gold.is_file():
                    read_jsonl(gold)
            except Exception as e:  # a broken import must not stop the worker; the job reports it
                log.warning("worker: could not preload %s/%s (%s)", t.id, split, e)


def build_worker(settings: Settings, queues=QUEUES, conn=None, *, simple: bool = False, name=None):
    """An RQ Worker (or SimpleWorker, which runs jobs in-process) over the given queues."""
    from rq import SimpleWorker, Worker
    from rq.serializers import JSONSerializer

    conn = conn or connect(settings, start_embedded=True)
    cls = SimpleWorker if simple else Worker
    return cls([get_queue(q, conn, settings) for q in queues], connection=conn, serializer=JSONSerializer,
               job_monitoring_interval=settings.heartbeat_every, worker_ttl=60, name=name)


def run(settings: Settings, queues=QUEUES, *, burst: bool = False) -> int:
    """Work until stopped (or, with burst, until the queues are empty); 0 on a clean exit."""
    import redis

    from server.db import create_all, get_engine

    preload()
    warm_caches(settings)
    engine = get_engine(settings.sqlalchemy_url())
    create_all(engine)
    warm_statements(engine)
    engine.dispose()
    while True:
        try:
            w = build_worker(settings, queues)
            w.work(burst=burst, logging_level="WARNING", with_scheduler=False)
            if burst or getattr(w, "_shutdown_requested_date", None) is not None:
                return 0
            log.warning("worker: stopped without being asked (Redis away?); starting again in 2 s")
            time.sleep(2)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            if burst:
                log.error("worker: Redis unavailable (%s)", e)
                return 1
            log.warning("worker: Redis unavailable (%s); starting again in 2 s", e)
            time.sleep(2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m server.worker")
    p.add_argument("--queue", action="append", choices=QUEUES)
    p.add_argument("--burst", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s worker %(message)s")
    return run(Settings.from_env(), tuple(a.queue or QUEUES), burst=a.burst)


if __name__ == "__main__":
    sys.exit(main())
