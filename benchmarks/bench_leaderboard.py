"""Leaderboard throughput: a page with 1,000 scored submissions under gunicorn, measured by wrk
(or, without wrk, a Python load generator in a separate process).

    python3 benchmarks/bench_leaderboard.py [--submissions 1000] [--duration 15] [--workers 3]

The bar: at least 1,000 requests a second with the 99th percentile under 50 ms on a
2-core machine. A request costs one small SQL statement (the board's version); the page itself is
rendered once per change of the scores, not once per request.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def seed(home: Path, n: int, teams: int) -> None:
    """A database with `n` scored submissions of tric-binary's dev phase from `teams` teams."""
    from sqlmodel import Session

    from server.db import get_engine
    from server.domain.accounts import new_invite_code
    from server.migrate import upgrade
    from server.models import Phase, Score, Submission, Team
    from server.settings import Settings
    from tasks import get_task

    task = get_task("tric-binary")
    settings = Settings.from_env(home=home, database_url=None)
    upgrade(settings)  # the schema from the migrations, as `palimpsest serve` builds it
    eng = get_engine(settings.sqlalchemy_url())
    rng = random.Random(7)
    with Session(eng) as s:
        phase = Phase(task_id=task.id, name="dev", split="dev", public_fraction=1.0)
        s.add(phase)
        ts = [
            Team(name=f"team-{i:03d} <&>", invite_code=new_invite_code(), is_baseline=(i == 0))
            for i in range(teams)
        ]
        s.add_all(ts)
        s.flush()
        for i in range(n):
            team = ts[i % teams]
            sub = Submission(
                team_id=team.id,
                task_id=task.id,
                phase_id=phase.id,
                status="scored",
                file_sha256=f"{i:064x}",
                method_name=f"method {i}",
                score_attempt=1,
                attempts=1,
                is_baseline=team.is_baseline,
                is_primary=(i % 7 == 0),
            )
            s.add(sub)
            s.flush()
            metrics = {
                sub_: {m: round(rng.random(), 4) for m in task.metrics} for sub_ in task.subsets
            }
            v = metrics["all"]["f1"]
            s.add(
                Score(
                    submission_id=sub.id,
                    attempt=1,
                    part="all",
                    primary_value=v,
                    task_version=1,
                    gold_sha256="0" * 64,
                    scorer_version="0.1.0",
                    result={
                        "task": task.id,
                        "split": "dev",
                        "metrics": metrics,
                        "primary": {
                            "name": "f1",
                            "subset": "all",
                            "value": v,
                            "greater_is_better": True,
                        },
                    },
                )
            )
        s.commit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout: float = 30) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:  # noqa: BLE001
            time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer {url}")


def run_wrk(url: str, duration: int, connections: int, threads: int, gzip: bool) -> dict:
    hdr = ["-H", "Accept-Encoding: gzip, deflate, br"] if gzip else []
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", *hdr, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "tool": "wrk",
        "requests_per_s": rps,
        "p50_ms": ms("50%"),
        "p90_ms": ms("90%"),
        "p99_ms": ms("99%"),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": errors.group(1) if errors else "",
        "raw": out,
    }


def run_python_load(url: str, duration: int, connections: int, gzip: bool) -> dict:
    """A fallback load generator: `connections` keep-alive clients in a separate process."""
    code = r"""
import http.client, sys, threading, time, json, urllib.parse
url, duration, conns = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
hdrs = {"Accept-Encoding": "gzip"} if sys.argv[4] == "1" else {}
u = urllib.parse.urlsplit(url)
lat, errors = [], [0]
stop = time.time() + duration
def client():
    c = http.client.HTTPConnection(u.hostname, u.port)
    mine = []
    while time.time() < stop:
        t0 = time.perf_counter()
        try:
            c.request("GET", u.path + ("?" + u.query if u.query else ""), headers=hdrs)
            r = c.getresponse(); r.read()
            if r.status != 200: errors[0] += 1
        except Exception:
            errors[0] += 1; c = http.client.HTTPConnection(u.hostname, u.port)
        mine.append(time.perf_counter() - t0)
    lat.extend(mine)
ts = [threading.Thread(target=client) for _ in range(conns)]
t0 = time.time(); [t.start() for t in ts]; [t.join() for t in ts]; el = time.time() - t0
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print(json.dumps({"tool": "python", "requests_per_s": len(lat) / el, "p50_ms": q(.5),
                  "p90_ms": q(.9), "p99_ms": q(.99), "non_2xx": errors[0]}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code, url, str(duration), str(connections), "1" if gzip else "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=1000)
    ap.add_argument("--teams", type=int, default=200)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument(
        "--worker-class",
        default="gthread",
        help="gunicorn worker class (gthread keeps connections alive; sync does not)",
    )
    ap.add_argument("--gthreads", type=int, default=2, help="threads per gthread worker")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="wrk threads")
    ap.add_argument("--path", default="/tasks/tric-binary/leaderboard?phase=dev")
    ap.add_argument(
        "--no-gzip",
        action="store_true",
        help="do not send Accept-Encoding: gzip (browsers send it; the page is then ~10x larger)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="palimpsest-bench-"))
    proc = None
    try:
        t0 = time.perf_counter()
        seed(home, args.submissions, args.teams)
        seeded = time.perf_counter() - t0
        port = free_port()
        env = dict(os.environ, PALIMPSEST_HOME=str(home), PALIMPSEST_ENV="development")
        env.pop("DATABASE_URL", None)
        wc = ["-k", args.worker_class] + (
            ["--threads", str(args.gthreads)] if args.worker_class == "gthread" else []
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-w",
                str(args.workers),
                *wc,
                "-b",
                f"127.0.0.1:{port}",
                "--access-logfile",
                "-",
                "--log-level",
                "warning",
                "server:create_app()",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}{args.path}"
        wait_up(url)
        # warm every worker's render cache, then check the page is the full one
        for _ in range(args.workers * 20):
            urllib.request.urlopen(url).read()
        with urllib.request.urlopen(url.replace("/leaderboard?", "/leaderboard.json?")) as r:
            rows = len(json.loads(r.read())["rows"])
        size = len(urllib.request.urlopen(url).read())
        gz = not args.no_gzip
        res = (
            run_wrk(url, args.duration, args.connections, args.threads, gz)
            if shutil.which("wrk")
            else run_python_load(url, args.duration, args.connections, gz)
        )
        raw = res.pop("raw", "")
        res.update(
            {
                "submissions": args.submissions,
                "rows_shown": rows,
                "page_bytes": size,
                "gzip": gz,
                "load_before": os.getloadavg()[0],
                "gunicorn_workers": args.workers,
                "worker_class": args.worker_class,
                "connections": args.connections,
                "duration_s": args.duration,
                "cpus": os.cpu_count(),
                "seed_s": round(seeded, 2),
                "passes": res["requests_per_s"] >= 1000
                and res["p99_ms"] < 50
                and not res["non_2xx"],
            }
        )
        if args.json:
            print(json.dumps(res, indent=1))
        else:
            print(raw)
            for k, v in res.items():
                print(f"{k:18} {v}")
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
