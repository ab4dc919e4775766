"""Scoring throughput on 1, 2 and 4 workers against an empty job's rate, on both layouts:

- `onedir`: the workers share the site's data directory (one machine);
- `store`: each worker on an empty data directory of its own, the files in an S3 store
  (SeaweedFS's `weed mini` on loopback, started as the tests start it), sharing only PostgreSQL,
  Redis and the store with the web.

    python3 benchmarks/bench_scoring_throughput.py [--runs 120] [--workers 1,2,4]
        [--layouts onedir,store] [--batch 1,8]

For each layout and number of workers: the workers are started on the `scoring` queue and waited
for (registered with Redis), warmed with a few runs (a worker on the store fetches the task's
files once), then `--runs` empty jobs (`time.sleep(0)`: what RQ and the fork cost alone) and as
many tric-binary dev runs (uploaded before, through the intake) are queued; each rate is the jobs
over the time from the first job's start to the last one's end (Redis's and the database's
clocks), and each cost the CPU time of the workers and their work horses per job (what a loaded
machine changes least). With `--batch N` a scoring job takes up to N queued runs of its phase
(`PALIMPSEST_SCORE_BATCH`). Prints one JSON document. The board statistics each score asks for go
to the `stats` queue, which these workers do not take (a deployment runs `--queue stats`
elsewhere or on the same workers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # seaweed: the store as the tests start it
sys.path.insert(0, str(REPO / "benchmarks"))
TASK = "tric-binary"


def site_up(pg: str, redis_url: str, store: dict | None):
    """A fresh database and data directory with the demo tasks, a team, the dev phase without
    limits; (site, settings, engine, team id, user id)."""
    from bench_site_scale import Site

    site = Site(pg)
    try:
        return _site_up(site, redis_url, store)
    except BaseException:
        site.drop()
        raise


def _site_up(site, redis_url: str, store: dict | None):
    from sqlmodel import Session, select

    from server import objectstore
    from server.db import get_engine
    from server.demo import import_demo_tasks
    from server.domain.submissions import ensure_phases
    from server.migrate import upgrade
    from server.models import Phase, Team, TeamMember, User
    from server.settings import Settings

    import_demo_tasks(site.home)
    extra = {}
    if store:
        extra = {
            "s3_bucket": store["PALIMPSEST_S3_BUCKET"],
            "s3_endpoint": store["PALIMPSEST_S3_ENDPOINT"],
            "s3_access_key": store["PALIMPSEST_S3_ACCESS_KEY"],
            "s3_secret_key": store["PALIMPSEST_S3_SECRET_KEY"],
        }
    settings = Settings.from_env(
        home=site.home, database_url=site.url, redis_url=redis_url, **extra
    )
    upgrade(settings)
    engine = get_engine(settings.sqlalchemy_url())
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s, site.home)
        team = Team(name="bench", invite_code="bench")
        user = User(email="bench@example.org", password_hash="x")
        s.add_all([team, user])
        s.flush()
        s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
        for p in s.exec(select(Phase).where(Phase.task_id == TASK)):
            p.concurrent_limit = p.daily_limit = p.total_limit = None
        s.commit()
    if store:
        objectstore.push_tree(settings, "tasks")
    return site, settings, engine, team.id, user.id


def upload(settings, engine, team_id: int, user_id: int, n: int, seed: int) -> list[int]:
    """`n` distinct dev runs through the intake, not queued; their ids."""
    from sqlmodel import Session

    from server.demo import predictions
    from server.domain.submissions import take_file
    from server.models import Team, User

    ids = []
    with Session(engine, expire_on_commit=False) as s:
        team, user = s.get(Team, team_id), s.get(User, user_id)
        for i in range(n):
            data, name = predictions(TASK, "dev", settings.home, 0.3, seed + i)
            sub = take_file(
                s,
                user=user,
                team=team,
                task_id=TASK,
                phase="dev",
                stream=data,
                filename=name,
                method_name="bench",
                settings=settings,
                dedupe=False,
            )
            s.commit()
            ids.append(sub.id)
    return ids


def start_workers(n: int, env: dict, homes: list[Path], log: Path) -> list[subprocess.Popen]:
    out = []
    for i in range(n):
        e = dict(env, PALIMPSEST_HOME=str(homes[i]))
        out.append(
            subprocess.Popen(
                [sys.executable, "-m", "server.jobs.worker", "--queue", "scoring"],
                env=e,
                cwd=REPO,
                stdout=open(log, "ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    return out


def stop_workers(procs) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def wait_workers(conn, n: int, timeout: float = 300) -> None:
    from rq import Worker

    t0 = time.monotonic()
    while len(Worker.all(connection=conn)) < n:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("the workers did not start")
        time.sleep(0.2)


def score_all(conn, settings, engine, ids: list[int], timeout: float = 900) -> float:
    """Queue the runs' scoring jobs as the intake queues them (with the upload's storage key:
    on the store layout a small file's bytes go to Redis beside its job) and wait for every one
    to be final; the seconds from the first start to the last finish (the database's clock)."""
    from sqlalchemy import func, select

    from server.jobs.queue import enqueue_submission
    from server.models import Submission

    with engine.connect() as c:
        keys = dict(
            c.execute(
                select(Submission.id, Submission.storage_key).where(Submission.id.in_(ids))
            ).all()
        )
    for sid in ids:
        enqueue_submission(conn, sid, settings, upload=keys[sid])
    t0 = time.monotonic()
    while True:
        with engine.connect() as c:
            rows = c.execute(
                select(
                    func.count(),
                    func.min(Submission.started_at),
                    func.max(Submission.finished_at),
                    func.count().filter(Submission.status == "scored"),
                ).where(Submission.id.in_(ids), Submission.status.in_(("scored", "failed")))
            ).one()
        if rows[0] == len(ids):
            if rows[3] != len(ids):
                raise RuntimeError(f"{len(ids) - rows[3]} runs failed")
            return (rows[2] - rows[1]).total_seconds()
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"only {rows[0]} of {len(ids)} runs final")
        time.sleep(0.05)


def empty_all(conn, n: int, timeout: float = 900) -> float:
    """`n` empty jobs on the scoring queue; the seconds from the first start to the last end."""
    from rq.job import Job
    from rq.serializers import JSONSerializer

    from server.jobs.queue import SCORING, get_queue

    q = get_queue(SCORING, conn)
    jobs = [q.enqueue_call("time.sleep", args=(0,), result_ttl=600) for _ in range(n)]
    ids = [j.id for j in jobs]
    t0 = time.monotonic()
    while True:
        got = Job.fetch_many(ids, connection=conn, serializer=JSONSerializer)
        if all(j is not None and j.ended_at is not None for j in got):
            return (max(j.ended_at for j in got) - min(j.started_at for j in got)).total_seconds()
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("the empty jobs did not finish")
        time.sleep(0.05)


def tree_cpu(procs) -> float:
    """The CPU seconds of the workers and of their work horses (forked, waited for: counted as
    their children)."""
    import psutil

    total = 0.0
    for p in procs:
        t = psutil.Process(p.pid).cpu_times()
        total += t.user + t.system + t.children_user + t.children_system
    return total


def measure(layout: str, a, redis_url: str, store_env: dict | None, tmp: Path) -> dict:
    import redis

    site, settings, engine, team_id, user_id = site_up(a.pg, redis_url, store_env)
    conn = redis.Redis.from_url(redis_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_S3_")}
    env.update(
        DATABASE_URL=site.url,
        REDIS_URL=redis_url,
        PYTHONPATH=str(REPO),
        PALIMPSEST_SECRET_KEY="bench-scoring",
        OPENBLAS_NUM_THREADS="1",
        **(store_env or {}),
    )
    out = {}
    seed = 0
    try:
        for batch in a.batch:
            env["PALIMPSEST_SCORE_BATCH"] = str(batch)
            for n in a.workers:
                conn.flushdb()
                if layout == "onedir":
                    homes = [site.home] * n
                else:  # each worker on an empty data directory of its own
                    homes = [Path(tempfile.mkdtemp(prefix=f"w{i}-", dir=tmp)) for i in range(n)]
                log = tmp / f"workers-{layout}.log"
                procs = start_workers(n, env, homes, log)
                try:
                    wait_workers(conn, n)
                    warm = upload(settings, engine, team_id, user_id, 3 * n, seed)
                    seed += 3 * n
                    score_all(conn, settings, engine, warm)
                    ids = upload(settings, engine, team_id, user_id, a.runs, seed)
                    seed += a.runs
                    c0 = tree_cpu(procs)
                    t_empty = empty_all(conn, a.runs)
                    c1 = tree_cpu(procs)
                    t_score = score_all(conn, settings, engine, ids)
                    time.sleep(0.5)  # the last horse reaped
                    c2 = tree_cpu(procs)
                finally:
                    stop_workers(procs)
                key = f"batch {batch}, {n} worker(s)"
                out[key] = {
                    "empty_jobs_per_s": round(a.runs / t_empty, 2),
                    "scored_per_s": round(a.runs / t_score, 2),
                    "ratio": round(t_empty / t_score, 2),
                    "empty_job_cpu_ms": round(1000 * (c1 - c0) / a.runs, 1),
                    "scored_run_cpu_ms": round(1000 * (c2 - c1) / a.runs, 1),
                    "load": round(os.getloadavg()[0], 1),
                }
                print(layout, key, out[key], file=sys.stderr, flush=True)
    finally:
        conn.close()
        site.drop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=120)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--layouts", default="onedir,store")
    ap.add_argument("--batch", default="1", help="runs a scoring job may take, comma-separated")
    ap.add_argument(
        "--pg",
        default=os.environ.get("PALIMPSEST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    a = ap.parse_args()
    a.workers = [int(x) for x in a.workers.split(",")]
    a.batch = [int(x) for x in a.batch.split(",")]
    os.environ.setdefault("PALIMPSEST_SECRET_KEY", "bench-scoring")
    from bench_site_scale import start_redis

    tmp = Path(tempfile.mkdtemp(prefix="bench-scoring-"))
    redis_proc, redis_url = start_redis(tmp)
    weed = None
    report = {"runs": a.runs, "cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    try:
        for layout in a.layouts.split(","):
            store_env = None
            if layout == "store":
                from seaweed import s3_env, start_weed

                weed, info = start_weed(tmp / "weed")
                store_env = s3_env(info)
            report[layout] = measure(layout, a, redis_url, store_env, tmp)
    finally:
        if weed is not None:
            from seaweed import stop_weed

            stop_weed(weed)
        redis_proc.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    report["load_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
