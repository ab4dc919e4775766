"""What the scoring queue's depth costs: taking a queued run for a batch, and a waiting run's
place and estimate, at a given number of runs waiting.

A site on the embedded default (SQLite and the embedded Redis; DATABASE_URL and REDIS_URL for
PostgreSQL and a Redis of your own) with the demo tasks, `--depth` runs waiting in the database
(another phase's) and as many ids in the scoring queue's list, then `--hits` runs of the measured
phase queued behind them, each with its RQ job. Per operation, the median of `--repeat`:

- the claim of a batch (server.jobs.scoring.score_more's step: `lifecycle.claim_queued`, the
  claim key, the run's own job dropped through RQ's API), a hit (a run of the phase was queued)
  and a miss (none left);
- the removal from the queue's list with LREM that the claim replaces (what batch scoring did
  before), a hit (the run's id near the list's end) and a miss (an id not in the list);
- a waiting run's standing (server.jobs.waits.standing: counts from the database), and the
  read of a row per waiting run that it replaces (the same query plus the per-run heap).

    python3 benchmarks/bench_queue_depth.py [--depth 100000] [--hits 200] [--repeat 200]
"""

from __future__ import annotations

import argparse
import heapq
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.3f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--hits", type=int, default=200, help="runs of the measured phase")
    ap.add_argument("--repeat", type=int, default=200)
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-depth-"))
    home = tmp / "home"
    os.environ["PALIMPSEST_HOME"] = str(home)

    from server.db import get_engine
    from server.demo import import_demo_tasks
    from server.jobs.embedded import EmbeddedRedis
    from server.migrate import upgrade
    from server.settings import Settings

    import_demo_tasks(home)
    settings = Settings.from_env()
    upgrade(settings)
    engine = get_engine(settings.sqlalchemy_url())
    if not settings.redis_url:
        EmbeddedRedis(home).start()
    try:
        measure(a, settings, engine)
    finally:
        if not settings.redis_url:
            EmbeddedRedis(home).stop()


def measure(a, settings, engine) -> None:
    from sqlalchemy import insert, select, update
    from sqlmodel import Session

    from server.domain import lifecycle
    from server.domain.submissions import ensure_phases
    from server.jobs import waits
    from server.jobs.queue import (
        SCORING,
        connect,
        drop_claim,
        drop_waiting_job,
        enqueue_submission,
        get_queue,
        hold_claim,
        job_id,
    )
    from server.models import Phase, Submission, Team

    conn = connect(settings)
    q = get_queue(SCORING, conn, settings)
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s)
        phases = s.exec(select(Phase).where(Phase.task_id == "tric-binary")).scalars().all()
        team = Team(name="bench", invite_code="bench")
        s.add(team)
        s.commit()
    measured = next(p for p in phases if p.name == "test")
    filler = next(p for p in phases if p.name == "dev")

    def add_runs(phase_id: int, n: int, start: int) -> None:
        rows = [
            {
                "team_id": team.id,
                "task_id": "tric-binary",
                "phase_id": phase_id,
                "status": "queued",
                "file_sha256": f"{start + i:064x}",
            }
            for i in range(n)
        ]
        with engine.begin() as c:
            for k in range(0, n, 10_000):
                c.execute(insert(Submission.__table__), rows[k : k + 10_000])

    def row_per_run(s, sub) -> float:
        """The read that `standing` did before: a row per waiting run, then a heap step each."""
        S = Submission.__table__.c
        rows = s.execute(
            select(S.id, S.task_id, S.started_at, S.status)
            .where(S.status.in_(("queued", "running")))
            .order_by(S.id)
        ).all()
        ahead = [t for i, t, _, st in rows if st == "queued" and i < sub.id]
        free = [0.0, 0.0]
        for _ in ahead:
            heapq.heappush(free, heapq.heappop(free) + 1.0)
        return heapq.heappop(free)

    print(f"database {engine.dialect.name}, load average {os.getloadavg()}", file=sys.stderr)
    lines = [
        "| runs waiting | claim: hit | claim: miss | LREM: hit | LREM: miss | standing "
        "(counts) | standing (a row per run, before) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    done = 0
    for depth in sorted(a.depth):
        # the depth: another phase's runs in the database, as many ids in the queue's list
        add_runs(filler.id, depth - done, 10**9 + done)
        for k in range(done, depth, 10_000):
            conn.rpush(q.key, *(f"filler-{i}" for i in range(k, min(depth, k + 10_000))))
        done = depth
        with engine.begin() as c:  # the measured phase: nothing left over from a smaller depth
            c.execute(
                update(Submission)
                .where(Submission.phase_id == measured.id)
                .values(status="scored", attempts=0)
            )
        add_runs(measured.id, a.hits, 2 * 10**9 + depth)
        with engine.connect() as c:
            ids = (
                c.execute(
                    select(Submission.id)
                    .where(Submission.phase_id == measured.id, Submission.status == "queued")
                    .order_by(Submission.id)
                )
                .scalars()
                .all()
            )
        for sid in ids:
            enqueue_submission(conn, sid, settings)
        hit, miss, lrem_hit, lrem_miss, stand, before = [], [], [], [], [], []
        with Session(engine) as s:  # the standing of the last run waiting
            sub = s.get(Submission, ids[-1])
            for _ in range(min(a.repeat, 50)):
                t0 = time.perf_counter()
                waits.standing(s, sub, 2, known={"tric-binary": 1.0, "*": 1.0}, ratio=None)
                stand.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                row_per_run(s, sub)
                before.append(time.perf_counter() - t0)
        for _ in range(min(a.repeat, a.hits)):
            t0 = time.perf_counter()
            got = lifecycle.claim_queued(engine, measured.id, 3)
            hold_claim(conn, got[0], "bench", 60)
            drop_waiting_job(conn, got[0])
            drop_claim(conn, got[0])
            hit.append(time.perf_counter() - t0)
        while lifecycle.claim_queued(engine, measured.id, 3) is not None:
            pass
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            assert lifecycle.claim_queued(engine, measured.id, 3) is None
            miss.append(time.perf_counter() - t0)
        # before: the run's id taken off the list with LREM (put back after each hit)
        tail = job_id(ids[-1])
        for _ in range(a.repeat):
            conn.rpush(q.key, tail)
            t0 = time.perf_counter()
            assert conn.lrem(q.key, 1, tail) == 1
            lrem_hit.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert conn.lrem(q.key, 1, "submission-0") == 0
            lrem_miss.append(time.perf_counter() - t0)
        lines.append(
            f"| {depth:,} | {_ms(hit)} | {_ms(miss)} | {_ms(lrem_hit)} | {_ms(lrem_miss)} | "
            f"{_ms(stand)} | {_ms(before)} |"
        )
        print(lines[-1], file=sys.stderr)
    print("\n".join([*lines, "", f"load average at the end: {os.getloadavg()}"]))


if __name__ == "__main__":
    main()
