"""What the pull path of attached run workers costs, and how many runs per second they serve.

The example competition (examples/bundle-sts-latin) on SQLite, served by werkzeug in a process of
its own; its example system (examples/system-sts-latin), each run a distinct archive.

1. Overhead per run: the same runs, alternating, by today's site worker (`run_jobs.run_system`:
   claim, archive and inputs from the data directory, the sandbox, the output submitted) and by
   the pull path (`attached.run_claimed` after a claim over HTTP: the files through their signed
   links, heartbeats, the result posted to its link and recorded by the site); the median wall
   time of each and their difference (goal: at most 0.2 s).
2. Runs per second with 1, 2 and 4 attached workers (`palimpsest worker --attach URL --token T
   --burst`, each a process of its own, started together): `--runs` runs queued, the time from
   the start until every worker exits (start-up included).

    python benchmarks/bench_attached_workers.py --n 10 --runs 16 [--json OUT]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def _serve(app, port_q):
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    port_q.put(srv.server_port)
    srv.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10, help="runs each way for the overhead")
    ap.add_argument("--runs", type=int, default=16, help="runs queued per throughput figure")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as tmp:
        home = Path(tmp) / "home"
        (home / "tasks").mkdir(parents=True)
        os.environ["PALIMPSEST_HOME"] = str(home)
        for var in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(var, None)
        import psutil
        from blindkit import SLUG, SYSTEM, TASK, _competition, _facts, _h, _zip
        from sqlmodel import Session
        from webkit import engine_of

        from server import create_app
        from server.actions import competitions as comp
        from server.jobs import attached, dispatch
        from server.jobs.run_jobs import run_system
        from server.migrate import upgrade
        from server.models import CodeRun
        from server.settings import Settings

        # neither path enqueues the output's scoring (the served site does not either): the
        # figures are the runs' own
        dispatch.Jobs.enabled = property(lambda self: False)
        upgrade(Settings(home=home))
        app = create_app({"home": home, "env": "testing", "PALIMPSEST_ENQUEUE": False})
        tok = _competition(app)
        c = app.test_client()
        r = c.patch(
            f"/api/v1/tasks/{TASK}/phases/systems",
            json={
                "daily_limit": None,
                "total_limit": None,
                "concurrent_limit": None,
                "compute_budget_seconds": None,
            },
            headers=_h(tok["admin"]),
        )
        assert r.status_code == 200, r.json
        with Session(engine_of(app)) as s:
            cid = comp.find(s, SLUG).id
        r = c.post(
            "/api/v1/run-workers/tokens",
            json={"name": "bench", "competitions": [cid]},
            headers=_h(tok["admin"]),
        )
        secret = r.json["token"]
        predict = (SYSTEM / "predict.py").read_text()
        made = [0]

        def queue(k: int) -> list[int]:
            ids = []
            for _ in range(k):
                made[0] += 1
                code = _zip(
                    SYSTEM,
                    Path(tmp) / f"s{made[0]}.zip",
                    {"predict.py": f"{predict}\n# {made[0]}\n"},
                )
                r = c.post(
                    f"/api/v1/tasks/{TASK}/runs",
                    data={"phase": "systems", "code": (io.BytesIO(code), "s.zip"), **_facts()},
                    headers=_h(tok["ann"]),
                    content_type="multipart/form-data",
                )
                assert r.status_code == 201, r.json
                ids.append(r.json["id"])
            return ids

        engine_of(app).dispose()
        ctx = multiprocessing.get_context("fork")
        port_q = ctx.Queue()
        server = ctx.Process(target=_serve, args=(app, port_q), daemon=True)
        server.start()
        url = f"http://127.0.0.1:{port_q.get(timeout=30)}"
        site = attached.Site(url, secret)
        try:
            # 1. the overhead per run, alternating
            served = psutil.Process(server.pid)

            def cpu() -> float:
                """CPU seconds so far: this process, its ended children (the sandboxes), the
                served site."""
                t = os.times()
                site_t = served.cpu_times()
                return t.user + t.system + t.children_user + t.children_system + sum(site_t[:2])

            site_s, pull_s, site_c, pull_c = [], [], [], []
            for _ in range(args.n):
                queue(1)
                t0, c0 = time.perf_counter(), cpu()
                got = run_system(0)
                site_s.append(time.perf_counter() - t0)
                site_c.append(cpu() - c0)
                assert got.get("stage") == "ran", got
                queue(1)
                t0, c0 = time.perf_counter(), cpu()
                got = attached.run_claimed(site, site.claim())
                pull_s.append(time.perf_counter() - t0)
                pull_c.append(cpu() - c0)
                assert got.get("stage") == "ran", got
            med = statistics.median
            overhead = {
                "site_worker_median_s": round(med(site_s), 3),
                "attached_median_s": round(med(pull_s), 3),
                "overhead_s": round(med(pull_s) - med(site_s), 3),
                "site_worker_cpu_median_s": round(med(site_c), 3),
                "attached_cpu_median_s": round(med(pull_c), 3),
                "overhead_cpu_s": round(med(pull_c) - med(site_c), 3),
            }
            # 2. runs per second with 1, 2, 4 attached workers
            throughput = {}
            env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
            cmd = [sys.executable, "-c", "from cli.main import main; main()", "worker"]
            for w in (1, 2, 4):
                ids = queue(args.runs)
                t0 = time.perf_counter()
                procs = [
                    subprocess.Popen(
                        [*cmd, "--attach", url, "--token", secret, "--burst"],
                        env=env,
                        stdout=subprocess.DEVNULL,
                    )
                    for _ in range(w)
                ]
                for p in procs:
                    assert p.wait(600) == 0
                took = time.perf_counter() - t0
                with Session(engine_of(app)) as s:
                    stages = [s.get(CodeRun, i).stage for i in ids]
                assert stages == ["ran"] * len(ids), stages
                throughput[str(w)] = {
                    "runs": len(ids),
                    "seconds": round(took, 2),
                    "runs_per_second": round(len(ids) / took, 2),
                }
        finally:
            server.kill()
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load": os.getloadavg(),
        "overhead": overhead,
        "throughput": throughput,
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
