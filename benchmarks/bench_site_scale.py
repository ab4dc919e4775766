"""A SemEval-sized site on PostgreSQL: N teams and M scored runs of one phase, seeded through the
models with bulk inserts, and the cost of what the site does with them as M grows.

    python3 benchmarks/bench_site_scale.py [--teams 2000] [--runs 10000,50000] [--B 1000]

Each size is a database of its own, seeded once (N teams, M runs of one phase); the cold
measurements then alternate between the sizes (small, large, small, large, ...: `--repeats`
rounds, medians reported with every round's values and the ratio large/small of each figure), so
that the load of a shared machine moves both sizes alike. Each round: the CPU time of a cold
`build_board`, of the cold public board page, its JSON and its CSV (a fresh app: an empty render
cache), of the organizer's preview CSV export (cold, then again at the same version: cached), of a
signed-in team's first view once the public board is rendered (the overlay check: whether the
team's view is the public one), and the statistics of a board of N ranked rows (rank ranges,
p-values and clusters from N x B resampled scores; its peak memory measured in a child process).
`--only burst`: a deadline burst on the smallest size, runs scored while views a second are
offered over the public board and signed-in teams' boards under gunicorn (`measure_burst`;
`--burst-scores`, `--burst-seconds`, `--burst-views`, `--burst-teams`: a reduced scale while
developing; a worker of the boards queue renders what the views find due, its CPU apart).
`--only workers`: two scoring workers (`--workers`) on the smallest size, the runs they score per
second against empty jobs' rate (`measure_workers`, `--worker-runs` of each).
`--only latency`: upload-to-score, one at a time, against an empty job's enqueue to its end, on
one data directory and on the store (`measure_latency`, `--latency-runs`, `--layouts`).
`--only queue`: a claim's hit and miss on a queue `--queue-depth` runs deep
(benchmarks/bench_queue_depth.py on its embedded default, its table kept in the report).
`--only loci`: Loci Similes' 8.3 M-link top-100 run scored by this checkout and each
`--loci-against` checkout in turns (benchmarks/bench_scorer.py --only loci-top100 --against, its
table kept in the report).
Prints one JSON document. Needs the PostgreSQL server of the tests (`PALIMPSEST_TEST_PG`, default
postgresql://postgres@127.0.0.1:5432/test); the databases it makes are dropped at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TASK = "tric-binary"


# a child process's own peak memory: VmHWM, its address space's high-water mark since its exec
# (getrusage's ru_maxrss would report the benchmark's own when that one was larger at the fork)
HWM = (
    "next(round(int(x.split()[1]) / 1024) for x in open('/proc/self/status') "
    "if x.startswith('VmHWM:'))"
)


def cpu(fn, *a, **kw):
    gc.collect()  # the garbage of what ran before is not this call's
    t0 = time.process_time()
    out = fn(*a, **kw)
    return out, round(time.process_time() - t0, 3)


class Site:
    """A data directory with the demo's tasks and a fresh PostgreSQL database."""

    def __init__(self, admin: str):
        import psycopg

        self.admin = admin
        self.name = f"bench_scale_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{self.name}"')
        base = admin.rsplit("/", 1)[0]
        self.url = f"postgresql+psycopg://{base.split('://', 1)[1]}/{self.name}"
        self.home = Path(tempfile.mkdtemp(prefix="palimpsest-scale-"))

    def drop(self) -> None:
        import psycopg

        from server.db import _engines

        for eng in list(_engines.values()):
            eng.dispose()
        with psycopg.connect(self.admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def settings_of(site: Site):
    from server.settings import Settings

    return Settings.from_env(home=site.home, database_url=site.url, redis_url=None)


def setup(site: Site, teams: int, dev_rows: int = 60) -> int:
    """The schema, the demo's tric-binary (its dev split of `dev_rows` instances, its test split
    twice that), a dev phase and `teams` teams; the phase's id."""
    from sqlalchemy import insert
    from sqlmodel import Session

    from server.db import get_engine
    from server.demo import import_demo_tasks
    from server.domain.accounts import new_invite_code
    from server.migrate import upgrade
    from server.models import Phase, Team

    import_demo_tasks(site.home, n_pairs=2 * dev_rows)
    settings = settings_of(site)
    upgrade(settings)
    eng = get_engine(settings.sqlalchemy_url())
    with Session(eng) as s:
        phase = Phase(task_id=TASK, name="dev", split="dev", public_fraction=1.0)
        s.add(phase)
        # a later phase on the test split, as a competition has: an upload is checked against it
        s.add(Phase(task_id=TASK, name="evaluation", split="test", public_fraction=0.5))
        s.commit()
        pid = phase.id
        rows = [
            Team(name=f"team {i:05d}", invite_code=new_invite_code(), is_baseline=(i == 0))
            for i in range(teams)
        ]
        s.execute(insert(Team), [_row(t) for t in rows])
        s.commit()
    return pid


def _row(obj) -> dict:
    d = obj.model_dump()
    d.pop("id", None)
    return d


def seed_runs(site: Site, phase_id: int, start: int, n: int, rng: random.Random) -> float:
    """`n` more scored runs of the phase, spread over its teams (one in eleven marked primary),
    each with its Score row as the scorer writes it; the wall seconds the inserts took."""
    from sqlalchemy import func, insert, select, text
    from sqlmodel import Session

    from server.db import get_engine
    from server.domain.provenance import current_provenance
    from server.models import Score, Submission, Team
    from tasks import get_task

    task = get_task(TASK)
    prov = current_provenance(task, "dev", site.home)
    eng = get_engine(settings_of(site).sqlalchemy_url())
    t0 = time.perf_counter()
    with Session(eng) as s:
        team_ids = [t for t in s.exec(select(Team.id).order_by(Team.id)).scalars()]
        base = s.exec(select(func.coalesce(func.max(Submission.id), 0))).scalar_one()
        subs, scores = [], []
        t_start = __import__("datetime").datetime(2026, 1, 1)
        for k in range(n):
            i = start + k
            sid = base + k + 1
            team = team_ids[i % len(team_ids)]
            subs.append(
                _row(
                    Submission(
                        team_id=team,
                        task_id=TASK,
                        phase_id=phase_id,
                        status="scored",
                        file_sha256=f"{i:064x}",
                        method_name=f"method {i % 5}",
                        score_attempt=1,
                        attempts=1,
                        is_baseline=(team == team_ids[0]),
                        is_primary=(i % 11 == 0),
                        created_at=t_start + timedelta(seconds=i),
                    )
                )
                | {"id": sid}
            )
            metrics = {sb: {m: round(rng.random(), 4) for m in task.metrics} for sb in task.subsets}
            v = metrics["all"]["f1"]
            scores.append(
                _row(
                    Score(
                        submission_id=sid,
                        attempt=1,
                        part="all",
                        primary_value=v,
                        task_version=task.version,
                        gold_sha256=prov["gold_sha256"],
                        scorer_version=prov["scorer_version"],
                        result={
                            "task": TASK,
                            "split": "dev",
                            "metrics": metrics,
                            "primary": {
                                "name": "f1",
                                "subset": "all",
                                "value": v,
                                "greater_is_better": True,
                            },
                            "provenance": prov,
                        },
                    )
                )
            )
        for a in range(0, n, 5000):
            s.execute(insert(Submission), subs[a : a + 5000])
            s.execute(insert(Score), scores[a : a + 5000])
        s.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('submission', 'id'), max(id)) FROM submission"
            )
        )
        s.execute(
            text("UPDATE phase SET revision = coalesce(revision, 0) + 1 WHERE id = :p"),
            {"p": phase_id},
        )
        s.commit()
    with eng.connect() as c:
        c.exec_driver_sql("ANALYZE")
    return round(time.perf_counter() - t0, 1)


def bench_app(site: Site, **extra):
    """A fresh app on the site (an empty render cache; nothing enqueued, no shared renders), frozen
    out of the collector's full collections as create_app does in a served process (not under
    "testing"): the objects alive once the app is built are left alone from then on."""
    from server import create_app

    a = create_app(
        {
            "home": site.home,
            "env": "testing",
            "database_url": site.url,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
            "PALIMPSEST_SHARED_RENDERS": False,
        }
        | extra
    )
    gc.freeze()
    return a


def measure_cold(site: Site, phase_id: int) -> dict:
    """One round of the cold measurements at one size: `build_board`, the board page, its JSON and
    its CSV (each in a fresh app: an empty render cache), each again at the same version, the
    organizer's preview CSV export (cold, then cached) and a signed-in team's first view once the
    public board is rendered; CPU seconds of this process."""
    from sqlmodel import Session

    from server.boards import leaderboard as lb
    from server.db import get_engine
    from server.domain.provenance import current_provenance
    from server.models import Phase
    from tasks import get_task

    settings = settings_of(site)
    task = get_task(TASK)
    prov = current_provenance(task, "dev", site.home)
    eng = get_engine(settings.sqlalchemy_url())
    out = {}

    def build(**kw):
        with Session(eng) as s:
            return lb.build_board(s, task, s.get(Phase, phase_id), provenance=prov, **kw)

    board, out["build_board_s"] = cpu(build)
    out["rows"] = len(board.rows)

    def app():
        return bench_app(site)

    for name, path in (
        ("board_page_s", f"/tasks/{TASK}/leaderboard?phase=dev"),
        ("board_json_s", f"/tasks/{TASK}/leaderboard.json?phase=dev"),
        ("board_csv_s", f"/tasks/{TASK}/leaderboard.csv?phase=dev"),
    ):
        a = app()
        # the app's own first-request costs apart: a page, and the board's template compiled by
        # another phase's (empty) board, as any process that has served a board has it
        a.test_client().get(f"/tasks/{TASK}")
        warm = a.test_client().get(path.replace("phase=dev", "phase=evaluation"))
        assert warm.status_code == 200, warm.status_code
        r, t = cpu(a.test_client().get, path)
        assert r.status_code == 200, (path, r.status_code)
        out[name] = t
        out[name.replace("_s", "_bytes")] = len(r.data)
        _, out[name.replace("_s", "_warm_s")] = cpu(a.test_client().get, path)

    # the organizer's preview export: cold, then at the same version
    from server.actions.exports import _previews

    version = next(
        st.version for st in lb.phase_states(eng, TASK, lambda _s: prov) if st.id == phase_id
    )

    def preview():
        def render():
            return lb.to_csv(build(audience="public", show_private=True, include_closed=True))

        return _previews(settings).get(("export-preview", TASK, "dev", "csv", ()), version, render)

    _previews(settings).clear()
    _, out["organizer_csv_cold_s"] = cpu(preview)
    _, out["organizer_csv_cached_s"] = cpu(preview)
    _previews(settings).clear()

    # a signed-in team's first view once the public board is rendered: the overlay check
    with Session(eng) as s:
        phase = s.get(Phase, phase_id)
        team_id = board.rows[len(board.rows) // 2].team_id
        same, t = cpu(lb.team_sees_the_public_board, s, task, phase, team_id)
    out["team_first_view_s"] = t
    out["team_view_is_public"] = same
    return out


def measure_hidden(site: Site, phase_id: int, repeats: int) -> dict:
    """A hidden team's board page (its runs not shown publicly: its view is the public board plus
    its own row) once the public page of the version is rendered: the public render with the
    team's row put in (the default) against a whole render of its board (`PALIMPSEST_SPLICE`
    off), each in a fresh app, alternating, `repeats` rounds; CPU seconds of this process, and
    whether the two pages are the same bytes."""
    import statistics

    from sqlalchemy import text

    from server.db import get_engine
    from server.web.leaderboard import serve_board

    eng = get_engine(settings_of(site).sqlalchemy_url())
    with eng.begin() as c:
        team = c.execute(
            text(
                "SELECT team_id FROM submission WHERE phase_id = :p ORDER BY id LIMIT 1 OFFSET 999"
            ),
            {"p": phase_id},
        ).scalar_one()
        c.execute(
            text("UPDATE submission SET show_publicly = false WHERE team_id = :t"), {"t": team}
        )
        c.execute(text("UPDATE phase SET revision = revision + 1 WHERE id = :p"), {"p": phase_id})
    path = f"/tasks/{TASK}/leaderboard?phase=dev"
    got: dict[str, list] = {"spliced": [], "whole": []}
    pages: dict[str, bytes] = {}
    for _ in range(repeats):
        for how in ("spliced", "whole"):
            a = bench_app(site, PALIMPSEST_SPLICE=how == "spliced")
            assert a.test_client().get(path).status_code == 200  # the public page, rendered

            def view(a=a):
                with a.test_request_context(path):
                    return serve_board(TASK, "html", who=f"team:{team}").get_data()

            pages[how], t = cpu(view)
            got[how].append(t)
    return {
        "team": team,
        "spliced_s": round(statistics.median(got["spliced"]), 4),
        "whole_s": round(statistics.median(got["whole"]), 4),
        "rounds": got,
        "same_bytes": pages["spliced"] == pages["whole"],
        "page_bytes": len(pages["whole"]),
    }


def measure_pages(sites: dict, repeats: int) -> dict:
    """The cold measurements of every size, interleaved (small, large, small, large, ...:
    `repeats` rounds), so that the machine's load moves both alike; per size the median of each
    figure and every round's values, and per figure the ratio of the largest size's median to the
    smallest's."""
    import statistics

    rounds: dict[int, list[dict]] = {m: [] for m in sites}
    for _ in range(repeats):
        for m, (site, pid) in sites.items():
            rounds[m].append(measure_cold(site, pid))
    out = {}
    for m, got in rounds.items():
        med = {}
        for k, v in got[0].items():
            if isinstance(v, bool):
                med[k] = all(g[k] for g in got)
            elif k.endswith("_s"):
                med[k] = round(statistics.median(g[k] for g in got), 4)
                med[k.replace("_s", "_all_s")] = [g[k] for g in got]
            else:
                med[k] = max(g[k] for g in got)
        out[m] = med
    small, large = min(sites), max(sites)
    ratios = {
        k: round(out[large][k] / out[small][k], 2)
        for k in out[small]
        if k.endswith("_s") and not k.endswith("_all_s") and out[small][k] > 0
    }
    return {"by_size": out, "ratio_large_to_small": ratios}


def start_redis(base: Path) -> tuple[subprocess.Popen, str]:
    """A `redis-server` of the benchmark's own on a free loopback port."""
    import shutil
    import socket

    import redis

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    exe = shutil.which("redis-server") or "redis-server"
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(base)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    r = redis.Redis.from_url(url, socket_connect_timeout=1)
    for _ in range(200):
        try:
            r.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    r.close()
    return proc, url


def stop_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def serve(site: Site, redis_url: str, *, home: Path | None = None, extra_env=None, workers=1):
    """A gunicorn with `workers` sync worker processes serving the site; (process, url, the file
    its requests' CPU times are written to)."""
    import socket
    import urllib.request

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PALIMPSEST_HOME=str(home or site.home),
        DATABASE_URL=site.url,
        REDIS_URL=redis_url,
        PYTHONPATH=str(REPO),
        PALIMPSEST_SECRET_KEY="s" * 40,
        **(extra_env or {}),
    )
    log = open(site.home.parent / f"gunicorn-{port}.log", "ab")
    conf = site.home.parent / f"gunicorn-{port}.conf.py"
    conf.write_text(GUNICORN_CPU.format(out=str(site.home.parent / f"cpu-{port}.tsv")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}"]
        + ["-c", str(conf), "--timeout", "300", "server:create_app()"],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/api/v1/openapi.json", timeout=5).read()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("gunicorn did not start") from None
            time.sleep(0.2)
    return proc, url, site.home.parent / f"cpu-{port}.tsv"


# a gunicorn configuration that writes each request's CPU time (the worker process's clock, from
# before the request is read to after its answer is sent) with its method and path
GUNICORN_CPU = """
import time

def pre_request(worker, req):
    worker.cpu_t0 = time.process_time()

def post_request(worker, req, environ, resp):
    with open({out!r}, "a") as f:
        f.write(f"{{req.method}}\\t{{req.path}}\\t{{time.process_time() - worker.cpu_t0:.6f}}\\n")
"""


def participants(site: Site, n: int) -> list[tuple[int, str]]:
    """`n` accounts with API tokens, each the captain of one of the seeded teams (teams 1..n):
    (team id, token)."""
    from sqlmodel import Session, select

    from server.db import get_engine
    from server.domain.accounts import create_token, create_user
    from server.models import Team, TeamMember

    eng = get_engine(settings_of(site).sqlalchemy_url())
    out = []
    with Session(eng, expire_on_commit=False) as s:
        teams = s.exec(select(Team.id).order_by(Team.id).offset(1).limit(n)).all()
        for i, tid in enumerate(teams):
            u = create_user(s, email=f"bench-{i}-{uuid.uuid4().hex[:6]}@x.org", password="pw " * 4)
            s.add(TeamMember(team_id=tid, user_id=u.id, role="captain"))
            _, tok = create_token(s, user=u)
            out.append((tid, tok))
        s.commit()
    return out


def _http(
    url: str,
    token: str,
    *,
    data: bytes | None = None,
    answer: list | None = None,
    gzip: bool = False,
):
    """One request (a multipart upload when `data`); (status, wall seconds). `answer`: the
    parsed JSON answer is appended to it. `gzip`: the answer asked for compressed, as a
    browser asks (read as it comes)."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    body = None
    if data is not None:
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="phase"\r\n\r\ndev\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="method_name"\r\n\r\n'
                f'bench\r\n--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="pred.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if data else "GET")
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            body = r.read()
            code = r.status
    except urllib.error.HTTPError as e:
        body = e.read()
        code = e.code
    took = time.perf_counter() - t0
    if answer is not None:
        answer.append(json.loads(body))
    return code, took


def measure_uploads(site: Site, phase_id: int, n: int) -> dict:
    """The upload request against an authenticated API GET (`/api/v1/me`) under the same gunicorn
    (one sync worker process, a Redis of its own, no scoring worker: the runs stay queued, as on
    a deadline day): `n` uploads of distinct valid dev files, each by another team (its token's
    first use in the minute), and `n` GETs, interleaved one by one; the wall time of each as the
    client sees it and the CPU time the gunicorn worker spent on each (its process's clock, read
    by gunicorn's request hooks). For context, another ordinary authenticated GET, the run just
    uploaded (`/api/v1/submissions/<id>`: its status and place in the queue), interleaved too
    (`run_get`)."""
    import statistics

    from server.demo import predictions

    people = participants(site, n + 3)  # one upload per team: within every limit
    files = [predictions(TASK, "dev", site.home, 0.3, seed)[0] for seed in range(n + 3)]
    redis_proc, redis_url = start_redis(Path(tempfile.mkdtemp(prefix="bench-redis-")))
    web, url, cpu_log = serve(site, redis_url)
    up = f"{url}/api/v1/tasks/{TASK}/submissions"
    kinds = ("upload", "get", "run_get")
    got = {k: [] for k in kinds}
    codes = {k: {} for k in kinds}
    try:
        for i in range(n, n + 3):  # each route's first-request costs, apart
            answer = []
            _http(up, people[i][1], data=files[i], answer=answer)
            _http(url + "/api/v1/me", people[i][1])
            _http(f"{url}/api/v1/submissions/{answer[0]['id']}", people[i][1])
        time.sleep(0.5)
        cpu_log.write_text("")
        load0 = round(os.getloadavg()[0], 2)
        for i in range(n):
            tok = people[i][1]
            answer = []
            for kind in kinds:
                if kind == "upload":
                    code, t = _http(up, tok, data=files[i], answer=answer)
                elif kind == "get":
                    code, t = _http(url + "/api/v1/me", tok)
                else:
                    code, t = _http(f"{url}/api/v1/submissions/{answer[0]['id']}", tok)
                got[kind].append(t)
                codes[kind][code] = codes[kind].get(code, 0) + 1
        time.sleep(0.5)
    finally:
        stop_group(web)
        redis_proc.terminate()
    # the runs uploaded stay queued (no worker): failed here, so that the phase can be published
    from sqlalchemy import text

    from server.db import get_engine

    with get_engine(settings_of(site).sqlalchemy_url()).begin() as c:
        c.execute(
            text(
                "UPDATE submission SET status = 'failed', failure_kind = 'infra' "
                "WHERE phase_id = :p AND status = 'queued'"
            ),
            {"p": phase_id},
        )
    cpu_of = {k: [] for k in kinds}
    for line in cpu_log.read_text().splitlines():
        method, path, t = line.split("\t")
        kind = "upload" if method == "POST" else "get" if path.endswith("/me") else "run_get"
        cpu_of[kind].append(float(t))
    out = {"n": n, "file_bytes": len(files[0]), "load": [load0, round(os.getloadavg()[0], 2)]}
    for kind in kinds:
        out[kind] = {
            "wall_median_s": round(statistics.median(got[kind]), 4),
            "cpu_median_s": round(statistics.median(cpu_of[kind]), 4),
            "status": codes[kind],
        }
    up_, me = out["upload"], out["get"]
    out["wall_ratio"] = round(up_["wall_median_s"] / me["wall_median_s"], 2)
    out["cpu_ratio"] = round(up_["cpu_median_s"] / me["cpu_median_s"], 2)
    run = out["run_get"]
    out["wall_ratio_to_run_get"] = round(up_["wall_median_s"] / run["wall_median_s"], 2)
    out["cpu_ratio_to_run_get"] = round(up_["cpu_median_s"] / run["cpu_median_s"], 2)
    return out


def measure_workers(site: Site, phase_id: int, runs: int, workers: int) -> dict:
    """Scoring on the site: `workers` scoring workers (`python -m server.jobs.worker --queue
    scoring`, sharing the site's data directory, a Redis of their own), warmed with a few runs,
    then `runs` empty jobs (`time.sleep(0)`: what RQ and the fork cost alone) and `runs` dev runs
    of as many teams (uploaded through the intake before), each queued at once; each rate is the
    jobs over the time from the first start to the last end, as `bench_scoring_throughput.py`
    measures it (its functions), and the ratio runs scored per second over empty jobs per second.
    A scoring job takes up to `PALIMPSEST_SCORE_BATCH` (default 8) queued runs of its phase."""
    import redis
    from bench_scoring_throughput import (
        empty_all,
        score_all,
        start_workers,
        stop_workers,
        tree_cpu,
        wait_workers,
    )
    from sqlmodel import Session, select

    from server.db import get_engine
    from server.demo import predictions
    from server.domain.submissions import take_file
    from server.models import Team

    settings = settings_of(site)
    engine = get_engine(settings.sqlalchemy_url())
    with Session(engine) as s:
        team_ids = list(s.exec(select(Team.id).order_by(Team.id).offset(1)))
    seed = {"n": 0}

    def upload(n: int) -> list[int]:  # one run per team, in turn, through the intake
        ids = []
        with Session(engine, expire_on_commit=False) as s:
            for _ in range(n):
                k = seed["n"]
                seed["n"] += 1
                data, name = predictions(TASK, "dev", site.home, 0.3, 1000 + k)
                sub = take_file(
                    s,
                    user=None,
                    team=s.get(Team, team_ids[k % len(team_ids)]),
                    task_id=TASK,
                    phase=phase_id,
                    stream=data,
                    filename=name,
                    method_name="bench",
                    settings=settings,
                    exempt=True,  # the benchmark's own runs: no phase limit applies to them
                    dedupe=False,
                )
                s.commit()
                ids.append(sub.id)
        return ids

    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    redis_proc, redis_url = start_redis(tmp)
    conn = redis.Redis.from_url(redis_url)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DATABASE_URL=site.url,
        REDIS_URL=redis_url,
        PYTHONPATH=str(REPO),
        PALIMPSEST_SECRET_KEY="s" * 40,
        OPENBLAS_NUM_THREADS="1",
    )
    procs = start_workers(workers, env, [site.home] * workers, tmp / "workers.log")
    try:
        wait_workers(conn, workers)
        score_all(conn, settings, engine, upload(3 * workers))  # warmed
        ids = upload(runs)
        load0 = round(os.getloadavg()[0], 2)
        c0 = tree_cpu(procs)
        t_empty = empty_all(conn, runs)
        c1 = tree_cpu(procs)
        t_score = score_all(conn, settings, engine, ids)
        time.sleep(0.5)  # the last horse reaped
        c2 = tree_cpu(procs)
    finally:
        stop_workers(procs)
        conn.close()
        redis_proc.terminate()
    return {
        "workers": workers,
        "runs": runs,
        "batch": int(os.environ.get("PALIMPSEST_SCORE_BATCH", "8")),
        "empty_jobs_per_s": round(runs / t_empty, 2),
        "scored_per_s": round(runs / t_score, 2),
        "ratio": round(t_empty / t_score, 2),
        "empty_job_cpu_ms": round(1000 * (c1 - c0) / runs, 1),
        "scored_run_cpu_ms": round(1000 * (c2 - c1) / runs, 1),
        "load": [load0, round(os.getloadavg()[0], 2)],
    }


def measure_latency(site: Site, phase_id: int, n: int, layout: str) -> dict:
    """Upload-to-score on the site, one at a time, against an empty job's enqueue to its end: a
    gunicorn (one sync worker process) and one scoring worker (`python -m server.jobs.worker
    --queue scoring`, the default batching), a Redis of their own. `layout` `onedir`: the worker
    shares the site's data directory; `store`: the files in SeaweedFS (`weed mini`, as the tests
    start it), the web on the site's data directory, the worker on an empty one of its own. After
    three warming uploads, `n` rounds, each an empty job (`time.sleep(0)` queued on the scoring
    queue) then an upload by another team: each figure from the client's clock before the
    enqueue or the POST to the end its worker recorded (RQ's `ended_at`, the run's
    `finished_at`: the same machine's clock), each waited for before the next."""
    import statistics
    from datetime import timezone

    import redis
    from bench_scoring_throughput import start_workers, stop_workers, wait_workers
    from rq.job import Job
    from rq.serializers import JSONSerializer
    from sqlalchemy import select

    from server.db import get_engine
    from server.demo import predictions
    from server.jobs.queue import SCORING, get_queue
    from server.models import Submission

    def epoch(dt) -> float:
        return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()

    tmp = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    people = participants(site, n + 3)
    base = 5000 + 1000 * ("onedir", "store").index(layout)  # files no layout uploaded before
    files = [predictions(TASK, "dev", site.home, 0.3, base + i)[0] for i in range(n + 3)]
    weed, store_env, home = None, {}, site.home
    redis_proc, redis_url = start_redis(tmp)
    try:
        if layout == "store":
            sys.path.insert(0, str(REPO / "tests"))
            from seaweed import s3_env, start_weed

            from server import objectstore
            from server.settings import Settings

            weed, info = start_weed(tmp / "weed")
            store_env = s3_env(info)
            on_store = Settings.from_env(
                home=site.home,
                database_url=site.url,
                redis_url=None,
                s3_bucket=store_env["PALIMPSEST_S3_BUCKET"],
                s3_endpoint=store_env["PALIMPSEST_S3_ENDPOINT"],
                s3_access_key=store_env["PALIMPSEST_S3_ACCESS_KEY"],
                s3_secret_key=store_env["PALIMPSEST_S3_SECRET_KEY"],
            )
            objectstore.push_tree(on_store, "tasks")
            home = Path(tempfile.mkdtemp(prefix="worker-", dir=tmp))  # the worker's, empty
        web, url, _ = serve(site, redis_url, extra_env=store_env)
        conn = redis.Redis.from_url(redis_url)
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(
            DATABASE_URL=site.url,
            REDIS_URL=redis_url,
            PYTHONPATH=str(REPO),
            PALIMPSEST_SECRET_KEY="s" * 40,
            OPENBLAS_NUM_THREADS="1",
            **store_env,
        )
        procs = start_workers(1, env, [home], tmp / "worker.log")
        engine = get_engine(settings_of(site).sqlalchemy_url())
        q = get_queue(SCORING, conn)
        up = f"{url}/api/v1/tasks/{TASK}/submissions"

        def empty() -> float:
            t0 = time.time()
            job = q.enqueue_call("time.sleep", args=(0,), result_ttl=600)
            while True:
                got = Job.fetch(job.id, connection=conn, serializer=JSONSerializer)
                if got.ended_at is not None:
                    return epoch(got.ended_at) - t0
                time.sleep(0.005)

        parts: dict[str, list[float]] = {"answered": [], "started": []}

        def scored(i: int) -> float:
            answer = []
            t0 = time.time()
            code, _ = _http(up, people[i][1], data=files[i], answer=answer)
            answered = time.time() - t0
            if code != 201:  # a new run (not one uploaded before)
                raise RuntimeError(f"upload answered {code}: {answer}")
            sid = answer[0]["id"]
            while True:
                with engine.connect() as c:
                    st, start, end = c.execute(
                        select(
                            Submission.status, Submission.started_at, Submission.finished_at
                        ).where(Submission.id == sid)
                    ).one()
                if st in ("scored", "failed"):
                    if st != "scored":
                        raise RuntimeError(f"run {sid} {st}")
                    parts["answered"].append(answered)
                    parts["started"].append(epoch(start) - t0)
                    return epoch(end) - t0
                time.sleep(0.005)

        try:
            wait_workers(conn, 1)
            for i in range(n, n + 3):  # warmed: the worker's first runs fetch the task's files
                scored(i)
                empty()
            for shares in parts.values():  # the warming uploads' left out
                shares.clear()
            load0 = round(os.getloadavg()[0], 2)
            e, u = [], []
            for i in range(n):
                e.append(empty())
                u.append(scored(i))
        finally:
            stop_workers(procs)
            stop_group(web)
            conn.close()
    finally:
        redis_proc.terminate()
        if weed is not None:
            from seaweed import stop_weed

            stop_weed(weed)
    med_e, med_u = statistics.median(e), statistics.median(u)
    return {
        "layout": layout,
        "n": n,
        "empty_job_median_s": round(med_e, 4),
        "upload_to_score_median_s": round(med_u, 4),
        "upload_to_score_p90_s": round(sorted(u)[int(0.9 * (n - 1))], 4),
        # of an upload's time to its score: the POST's answer, and the run's recorded start
        "answered_median_s": round(statistics.median(parts["answered"]), 4),
        "started_median_s": round(statistics.median(parts["started"]), 4),
        "ratio": round(med_u / med_e, 2),
        "load": [load0, round(os.getloadavg()[0], 2)],
    }


def queue_runs(site: Site, phase_id: int, n: int) -> list[int]:
    """`n` queued runs of the phase, one per team in turn (the teams after the baseline's), as
    uploads leave them on a deadline day; their ids."""
    from sqlalchemy import func, insert, select, text
    from sqlmodel import Session

    from server.db import get_engine
    from server.models import Submission, Team

    eng = get_engine(settings_of(site).sqlalchemy_url())
    with Session(eng) as s:
        team_ids = [t for t in s.exec(select(Team.id).order_by(Team.id).offset(1)).scalars()]
        base = s.exec(select(func.coalesce(func.max(Submission.id), 0))).scalar_one()
        now = __import__("datetime").datetime(2026, 6, 1)
        rows = [
            _row(
                Submission(
                    team_id=team_ids[k % len(team_ids)],
                    task_id=TASK,
                    phase_id=phase_id,
                    status="queued",
                    file_sha256=f"b{k:063x}",
                    method_name="deadline",
                    created_at=now + timedelta(milliseconds=k),
                )
            )
            | {"id": base + k + 1}
            for k in range(n)
        ]
        for a in range(0, n, 5000):
            s.execute(insert(Submission), rows[a : a + 5000])
        s.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('submission', 'id'), max(id)) FROM submission"
            )
        )
        s.commit()
    return [r["id"] for r in rows]


def record_burst(site: Site, ids: list[int], seconds: float, stop) -> dict:
    """Score the queued runs `ids` evenly over `seconds`, each as a scoring job records it (its
    start, then its scores, status, the board's revision, audit row and notice in one
    transaction: `lifecycle.start_attempt`, `lifecycle.finish_scored`), without the scoring's
    own CPU (the workers' rate is `bench_scoring_throughput.py`'s); how many, and how late the
    last one was."""
    from server.db import get_engine
    from server.domain import lifecycle
    from server.domain.provenance import current_provenance
    from tasks import get_task

    task = get_task(TASK)
    prov = current_provenance(task, "dev", site.home)
    eng = get_engine(settings_of(site).sqlalchemy_url())
    rng = random.Random(11)
    t0 = time.perf_counter()
    done = 0
    for k, sid in enumerate(ids):
        due = t0 + seconds * k / len(ids)
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        if stop.is_set():
            break
        attempt = lifecycle.start_attempt(eng, sid, 3, only_queued=True)
        metrics = {sb: {m: rng.random() for m in task.metrics} for sb in task.subsets}
        v = metrics["all"]["f1"]
        result = {
            "task": TASK,
            "split": "dev",
            "metrics": metrics,
            "primary": {"name": "f1", "subset": "all", "value": v, "greater_is_better": True},
            "provenance": prov,
        }
        if lifecycle.finish_scored(eng, sid, attempt, {"all": result}).won:
            done += 1
    took = time.perf_counter() - t0
    return {"scored": done, "wall_s": round(took, 1), "per_s": round(done / took, 1)}


def measure_burst(
    site: Site, phase_id: int, *, scores: int, seconds: float, views: float, teams: int
) -> dict:
    """A deadline burst: `scores` runs scored over `seconds` on the board while `views` views a
    second are spread over the public board page and `teams` signed-in teams' boards (the API's
    board with their token: the public render plus their own row), each asked for gzipped as a
    browser asks, under gunicorn (two sync
    worker processes sharing their renders through a Redis of its own; the board rendered at
    most once per `board_refresh_seconds`). The web's CPU per view is each request's CPU in its
    gunicorn worker (its process clock, read by gunicorn's request hooks): mean, median, p99 and
    max, per audience; the views answered and their wall times as the clients saw them."""
    import statistics
    import threading
    from concurrent.futures import ThreadPoolExecutor

    people = participants(site, teams)
    ids = queue_runs(site, phase_id, scores)
    redis_proc, redis_url = start_redis(Path(tempfile.mkdtemp(prefix="bench-redis-")))
    web, url, cpu_log = serve(site, redis_url, workers=2)
    renderer = boards_worker(site, redis_url)  # the boards' renders, off the views' requests
    public = f"{url}/tasks/{TASK}/leaderboard?phase=dev"
    team_url = f"{url}/api/v1/tasks/{TASK}/leaderboard?phase=dev"
    viewers = [("public", public, "")] + [("team", team_url, tok) for _, tok in people]
    walls: dict[str, list[float]] = {"public": [], "team": []}
    codes: dict[int, int] = {}
    lock = threading.Lock()

    late = {"n": 0}
    end = float("inf")  # set at the burst's start

    def view(kind, u, tok):
        if time.perf_counter() > end:  # the server did not keep up: not sent after the burst
            with lock:
                late["n"] += 1
            return
        try:
            code, t = _http(u, tok, gzip=True)
        except OSError:
            code, t = -1, 0.0
        with lock:
            codes[code] = codes.get(code, 0) + 1
            if code == 200:
                walls[kind].append(t)

    try:
        for kind, u, tok in viewers:  # each audience's first render, before the burst
            view(kind, u, tok)
        time.sleep(0.5)
        cpu_log.write_text("")
        for k in walls:
            walls[k].clear()
        codes.clear()
        stop = threading.Event()
        load0 = round(os.getloadavg()[0], 2)
        worker0 = process_cpu(renderer.pid)
        watch = RenderWatch(redis_url)  # the site's renders of each board as they are replaced
        got = {}
        recorder = threading.Thread(
            target=lambda: got.update(record_burst(site, ids, seconds, stop)), daemon=True
        )
        recorder.start()
        n = int(views * seconds)
        with ThreadPoolExecutor(max_workers=32) as pool:
            t0 = time.perf_counter()
            end = t0 + seconds + 5
            for k in range(n):  # open loop: each view at its time, whether or not the last ended
                due = t0 + k / views
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                pool.submit(view, *viewers[k % len(viewers)])
            offered = time.perf_counter() - t0
        views_wall = time.perf_counter() - t0
        recorder.join()
        stop.set()
        time.sleep(0.5)
        load1 = round(os.getloadavg()[0], 2)
        worker_cpu = process_cpu(renderer.pid) - worker0
        renders = render_jobs(redis_url)
        renders["versions_per_board"] = watch.stop()
    finally:
        stop_group(web)
        stop_group(renderer)
        redis_proc.terminate()
    from sqlalchemy import text

    from server.db import get_engine

    with get_engine(settings_of(site).sqlalchemy_url()).begin() as c:  # any left: failed
        c.execute(
            text(
                "UPDATE submission SET status = 'failed', failure_kind = 'infra' "
                "WHERE phase_id = :p AND status IN ('queued', 'running')"
            ),
            {"p": phase_id},
        )
    cpu = {"public": [], "team": []}
    for line in cpu_log.read_text().splitlines():
        method, path, t = line.split("\t")
        cpu["team" if path.startswith("/api/") else "public"].append(float(t))
    allv = cpu["public"] + cpu["team"]

    def summary(xs):
        if not xs:
            return {}
        xs = sorted(xs)
        return {
            "n": len(xs),
            "mean_ms": round(1000 * statistics.fmean(xs), 2),
            "median_ms": round(1000 * statistics.median(xs), 2),
            "p99_ms": round(1000 * xs[min(len(xs) - 1, int(0.99 * len(xs)))], 2),
            "max_ms": round(1000 * xs[-1], 2),
        }

    return {
        "scores": got,
        "views_offered": n,
        "views_offered_per_s": round(n / offered, 1),
        "views_answered": codes,
        "views_not_sent": late["n"],
        "views_wall_s": round(views_wall, 1),
        "web_cpu_per_view": summary(allv),
        "web_cpu_public": summary(cpu["public"]),
        "web_cpu_team": summary(cpu["team"]),
        "wall_public": summary(walls["public"]),
        "wall_team": summary(walls["team"]),
        "web_cpu_total_s": round(sum(allv), 2),
        "renders_worker_cpu_s": round(worker_cpu, 2),
        "render_jobs": renders,
        "load": [load0, load1],
    }


def boards_worker(site: Site, redis_url: str) -> subprocess.Popen:
    """A worker of the boards queue (`server.jobs.board_jobs`), as the site runs one: started, and
    waited for until it is registered (its web app built in the parent)."""
    import redis
    from rq import Worker

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PALIMPSEST_HOME=str(site.home),
        DATABASE_URL=site.url,
        REDIS_URL=redis_url,
        PYTHONPATH=str(REPO),
        PALIMPSEST_SECRET_KEY="s" * 40,
    )
    log = open(site.home.parent / f"boards-worker-{site.name}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.jobs.worker", "--queue", "boards"],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    conn = redis.Redis.from_url(redis_url)
    for _ in range(600):
        if Worker.count(connection=conn) or proc.poll() is not None:
            break
        time.sleep(0.2)
    conn.close()
    return proc


class RenderWatch:
    """The versions each board's shared render (`SharedRenders`: one Redis key per board, format
    and audience) takes, read every half second from each key's first bytes (its version)."""

    def __init__(self, redis_url: str):
        import threading

        import redis

        self.conn = redis.Redis.from_url(redis_url)
        self.seen: dict[bytes, set] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.5):
            for key in self.conn.scan_iter("palimpsest:render:*"):
                head = self.conn.getrange(key, 0, 80)
                if head[:1] == b"v":
                    self.seen.setdefault(key, set()).add(head[2 : 2 + head[1]])

    def stop(self) -> list[int]:
        """Per board (key), how many versions it took during the watch, most first."""
        self.done.set()
        self.thread.join()
        self.conn.close()
        return sorted((len(v) for v in self.seen.values()), reverse=True)


def process_cpu(pid: int) -> float:
    """A process's CPU seconds with its children waited for (a worker and its work horses)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def render_jobs(redis_url: str) -> dict:
    """The boards queue's render jobs failed and still waiting at the burst's end."""
    import redis
    from rq import Queue
    from rq.registry import FailedJobRegistry

    conn = redis.Redis.from_url(redis_url)
    q = Queue("boards", connection=conn)
    return {"failed": len(FailedJobRegistry(queue=q)), "waiting": q.count}


def measure_publication(site: Site, phase_id: int) -> dict:
    """Close and publish the phase in a child process (its own CPU time and peak memory), with
    every ranked run's resamples in place as the statistics worker leaves them (synthetic: the
    seeded runs have no uploads), the full pairwise matrix frozen beside the snapshot included;
    then the sizes of the published pages and JSON, and of the matrix file asked for."""
    code = f"""
import json, resource, sys, time
sys.path.insert(0, {str(REPO)!r})
import numpy as np
from sqlmodel import Session
from server.boards import stats, leaderboard as lb
from server.db import get_engine
from server.domain import lifecycle, publication
from server.domain.provenance import current_provenance
from server.models import Phase
from server.settings import Settings
from tasks import get_task
settings = Settings.from_env(home={str(site.home)!r}, database_url={site.url!r}, redis_url=None)
eng = get_engine(settings.sqlalchemy_url())
task = get_task({TASK!r})
prov = current_provenance(task, "dev", settings.home)
with Session(eng) as s:
    phase = s.get(Phase, {phase_id})
    board = lb.build_board(s, task, phase, audience="public", show_private=True,
                           include_closed=True, provenance=prov)
    part = stats.Part.get(settings, eng, task, phase, "all")
rng = np.random.default_rng(0)
shared = rng.normal(0, 0.02, part.B)
for r in board.rows:
    if r.attempt is None or r.values.get("all/f1") is None:
        continue
    x = r.values["all/f1"] + shared + rng.normal(0, 0.01, part.B)
    p = part.samples_path(settings.home, r.submission_id, r.attempt)
    p.parent.mkdir(parents=True, exist_ok=True)
    np.save(p, x)
t0 = time.process_time()
with Session(eng) as s:
    phase = s.get(Phase, {phase_id})
    rv = publication.publish(s, phase, task=task, actor=None, settings=settings, close_first=True)
    s.commit()
    out = {{"publish_cpu_s": round(time.process_time() - t0, 2),
           "snapshot_json_bytes": len(rv.body_json), "snapshot_csv_bytes": len(rv.body_csv),
           "statistics": json.loads(rv.body_json)["statistics"].get("status")}}
    from server.boards import pairwise
    frozen = pairwise.published_path(settings.home, {phase_id}, rv.version, rv.sha256, None)
    out["matrix_gz_bytes"] = frozen.stat().st_size if frozen.is_file() else None
out["publish_peak_mb"] = {HWM}
print(json.dumps(out))
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(REPO))
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if r.returncode != 0:
        return {"publish_error": r.stderr[-2000:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    from server import create_app

    a = create_app(
        {
            "home": site.home,
            "env": "testing",
            "database_url": site.url,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
            "PALIMPSEST_SHARED_RENDERS": False,
        }
    )
    for name, path in (
        ("published_page", f"/tasks/{TASK}/leaderboard?phase=dev"),
        ("published_json", f"/tasks/{TASK}/leaderboard.json?phase=dev"),
        ("published_csv", f"/tasks/{TASK}/leaderboard.csv?phase=dev"),
        ("published_significance", f"/tasks/{TASK}/leaderboard/significance?phase=dev"),
        # the full matrix file, asked for (streamed; decompressed in pieces for this client)
        ("published_matrix_csv", f"/tasks/{TASK}/leaderboard/significance.csv?phase=dev"),
    ):
        resp, t = cpu(fetch, a, path)  # a streamed answer's body read inside the measure
        out[f"{name}_bytes"] = len(resp.data)
        out[f"{name}_s"] = t
        out[f"{name}_status"] = resp.status_code
    return out


def fetch(app, path: str):
    r = app.test_client().get(path)
    r.get_data()  # buffered: the streamed pieces are made here
    return r


def measure_stats(
    rows: int, B: int, matrix: bool = True, pair_budget: int | None = None, repo: Path = REPO
) -> dict:
    """The statistics of one change of a board of `rows` ranked rows on B resamples, in a child
    process (its own peak memory): intervals, rank statistics (the pairs the board shows) and rank
    sets, as the statistics job computes them; then (`matrix`) the board's full pairwise matrix
    file as the pairwise job writes it on request (its CPU, sizes and the peak memory after it).
    `pair_budget`: the pairs held in memory (the p-values' vector) before the statistics are
    computed in passes (scorer.streamsel; default the scorer's PAIR_BUDGET). The child imports
    what a worker's parent preloads before it forks a job (numpy, scipy.stats), and the scorer
    from `repo` (another checkout: its code, measured the same way)."""
    code = f"""
import json, resource, time
import numpy as np
import scipy.stats  # as the worker's parent preloads it (server/jobs/worker.py)
from scorer import bootstrap, ranksets
from scorer.bootstrap import intervals, rank_statistics
from scorer.ranksets import rank_sets
if {pair_budget is not None}:
    bootstrap.PAIR_BUDGET = ranksets.PAIR_BUDGET = {pair_budget or 0}
rng = np.random.default_rng(0)
R, B = {rows}, {B}
level, difficulty = rng.uniform(0.4, 0.9, R), rng.normal(0, 0.02, B)
x = rng.normal(0, 0.01, (R, B))  # built in place: one R x B array (the job's resamples)
x += level[:, None]
x += difficulty[None, :]
pts = x.mean(axis=1)
before = {HWM}
t0 = time.process_time()
intervals(x)
st = rank_statistics(x, pts, True)
rank_sets(x, pts, True, 0.05)
t = time.process_time() - t0
body = json.dumps(st)
peak = {HWM}
out = {{"cpu_s": round(t, 3), "peak_mb": peak, "before_mb": before, "json_bytes": len(body),
        "clusters": max(st["cluster"])}}
if {matrix}:
    # the full matrix file, as the pairwise job writes it (the CSV's pieces, gzip level 1)
    import zlib
    from server.boards.pairwise import lines
    t1 = time.process_time()
    full = rank_statistics(x, pts, True, arrays=True)
    p, ph = full.pop("p_array"), full.pop("p_holm_array")
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    raw = gz = 0
    for piece in lines([f"team {{i:05d}}" for i in range(R)], p, ph):
        raw += len(piece)
        gz += len(z.compress(piece))
    gz += len(z.flush())
    out.update(matrix_file_cpu_s=round(time.process_time() - t1, 3), matrix_csv_bytes=raw,
               matrix_gz_bytes=gz, matrix_peak_mb={HWM})
print(json.dumps(out))
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(repo))
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=repo
    )
    return json.loads(r.stdout)


def sibling(args: list[str]) -> dict:
    """Another benchmark of this directory as a process of its own: its table (standard output)
    kept in the report, with its wall time and the load before and after it."""
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{args[0]} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return {
        "command": " ".join(["python3", *args]),
        "table": out.stdout.strip().splitlines(),
        "wall_s": round(time.perf_counter() - t0, 1),
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--teams", type=int, default=2000)
    ap.add_argument("--runs", default="10000,50000")
    ap.add_argument("--B", type=int, default=1000)
    ap.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="rounds of the cold measurements, the sizes interleaved in each",
    )
    ap.add_argument(
        "--uploads",
        type=int,
        default=60,
        help="uploads (and as many GETs) measured under gunicorn at the smallest size; 0: none",
    )
    ap.add_argument(
        "--upload-rows",
        default="60",
        help="uploads: the dev file's rows, one site each (its demo dev split of that size, "
        "seeded with the smallest --runs), comma-separated: e.g. 60,411 (TRoTR fold 1's test "
        "file has 411)",
    )
    ap.add_argument(
        "--only",
        default="pages,uploads,burst,publication,statistics",
        help="what to measure, of pages, hidden, uploads, burst, publication, statistics, workers, "
        "latency, queue, loci",
    )
    ap.add_argument(
        "--queue-depth", type=int, default=100_000, help="queue: the runs waiting (its depth)"
    )
    ap.add_argument(
        "--loci-against",
        nargs="*",
        default=[],
        metavar="CHECKOUT",
        help="loci: other checkouts (git worktrees) scored in turns with this one",
    )
    ap.add_argument("--loci-runs", type=int, default=3, help="loci: whole processes each")
    ap.add_argument(
        "--worker-runs",
        type=int,
        default=60,
        help="workers: runs scored (and as many empty jobs) at the smallest size",
    )
    ap.add_argument("--workers", type=int, default=2, help="workers: scoring workers")
    ap.add_argument(
        "--latency-runs", type=int, default=20, help="latency: uploads (and empty jobs) timed"
    )
    ap.add_argument(
        "--layouts", default="onedir,store", help="latency: onedir, store (comma-separated)"
    )
    ap.add_argument(
        "--burst-scores", type=int, default=1000, help="burst: runs scored during the burst"
    )
    ap.add_argument(
        "--burst-seconds", type=float, default=60.0, help="burst: its length in seconds"
    )
    ap.add_argument(
        "--burst-views", type=float, default=100.0, help="burst: views a second offered"
    )
    ap.add_argument(
        "--burst-teams", type=int, default=10, help="burst: signed-in teams viewing the board"
    )
    ap.add_argument(
        "--pair-budget",
        type=int,
        default=None,
        help="with statistics: the pairs held in memory before passes (default the scorer's)",
    )
    ap.add_argument(
        "--no-matrix",
        action="store_true",
        help="with statistics: leave out the full pairwise matrix file (asked for apart)",
    )
    ap.add_argument(
        "--against",
        nargs="*",
        default=[],
        metavar="CHECKOUT",
        help="with --only statistics: each checkout's scorer measured too, in turns with this "
        "one (--stats-rounds rounds, the order rotating)",
    )
    ap.add_argument(
        "--stats-rounds", type=int, default=1, help="with --only statistics: rounds of turns"
    )
    ap.add_argument(
        "--pg",
        default=os.environ.get("PALIMPSEST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    a = ap.parse_args()
    sizes = sorted({int(x) for x in a.runs.split(",")})
    only = set(a.only.split(","))
    os.environ.setdefault("PALIMPSEST_SECRET_KEY", "bench-site-scale")
    report = {
        "teams": a.teams,
        "B": a.B,
        "repeats": a.repeats,
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "sizes": sizes,
    }
    sites: dict[int, tuple[Site, int]] = {}
    if only == {"statistics"}:  # no site needed: the statistics of `--teams` rows alone
        repos = [REPO] + [Path(x).resolve() for x in a.against]
        turns: dict[str, list] = {str(r): [] for r in repos}
        for n in range(a.stats_rounds):
            for r in repos[n % len(repos) :] + repos[: n % len(repos)]:
                got = measure_stats(
                    a.teams, a.B, matrix=not a.no_matrix, pair_budget=a.pair_budget, repo=r
                )
                got["load"] = round(os.getloadavg()[0], 2)
                turns[str(r)].append(got)
        report["statistics"] = turns[str(REPO)][0] if len(turns[str(REPO)]) == 1 else None
        if len(repos) > 1 or a.stats_rounds > 1:
            report["statistics_turns"] = {
                r: {
                    "cpu_s": [g["cpu_s"] for g in gs],
                    "peak_mb": [g["peak_mb"] for g in gs],
                    "before_mb": [g["before_mb"] for g in gs],
                    "load": [g["load"] for g in gs],
                }
                for r, gs in turns.items()
            }
        if report["statistics"] is not None:
            report["statistics"]["rows"] = a.teams
        report["load_end"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(report, indent=2))
        return
    try:
        # every size at once, each its own database seeded once: the cold measurements then
        # alternate between them
        t0 = time.perf_counter()
        for m in sizes:
            site = Site(a.pg)
            pid = setup(site, a.teams)
            sites[m] = (site, pid)
            rng = random.Random(7)
            for start in range(0, m, 10000):
                seed_runs(site, pid, start, min(10000, m - start), rng)
        report["seed_wall_s"] = round(time.perf_counter() - t0, 1)
        marks: list[tuple[str, str, float]] = []

        def mark(name: str) -> None:  # each part's start: UTC time and the 1-minute load
            marks.append((name, time.strftime("%H:%M:%S", time.gmtime()), os.getloadavg()[0]))

        mark("pages")
        if "pages" in only:
            report["pages"] = measure_pages(sites, a.repeats)
        mark("hidden")
        if "hidden" in only:
            report["hidden"] = measure_hidden(*sites[sizes[0]], a.repeats)
            report["hidden"]["runs"] = sizes[0]
        mark("uploads")
        if "uploads" in only and a.uploads:
            rows = [int(x) for x in a.upload_rows.split(",")]
            report["uploads"] = {}
            for n_rows in rows:
                if n_rows == 60:
                    on = sites[sizes[0]]
                else:  # a site of its own, its dev split of n_rows instances
                    site = Site(a.pg)
                    on = (site, setup(site, a.teams, dev_rows=n_rows))
                    sites[-n_rows] = on
                    rng = random.Random(7)
                    for start in range(0, sizes[0], 10000):
                        seed_runs(*on, start, min(10000, sizes[0] - start), rng)
                got = measure_uploads(*on, a.uploads)
                got["rows"] = n_rows
                report["uploads"][str(n_rows)] = got
                print(json.dumps({"uploads": got}), file=sys.stderr, flush=True)
            if len(rows) == 1:
                report["uploads"] = report["uploads"][str(rows[0])]
        mark("latency")
        if "latency" in only:
            report["latency"] = {
                layout: measure_latency(*sites[sizes[0]], a.latency_runs, layout)
                for layout in a.layouts.split(",")
            }
        mark("workers")
        if "workers" in only:
            report["workers"] = measure_workers(*sites[sizes[0]], a.worker_runs, a.workers)
            report["workers"]["site_runs"] = sizes[0]
        mark("burst")
        if "burst" in only:
            report["burst"] = measure_burst(
                *sites[sizes[0]],
                scores=a.burst_scores,
                seconds=a.burst_seconds,
                views=a.burst_views,
                teams=a.burst_teams,
            )
            report["burst"]["runs"] = sizes[0]
        mark("publication")
        if "publication" in only:
            report["publication"] = measure_publication(*sites[sizes[-1]])
            report["publication"]["runs"] = sizes[-1]
        mark("statistics")
        if "statistics" in only:
            report["statistics"] = measure_stats(
                a.teams, a.B, matrix=not a.no_matrix, pair_budget=a.pair_budget
            )
            report["statistics"]["rows"] = a.teams
        mark("queue")
        if "queue" in only:  # on its embedded default, a site of its own
            report["queue"] = sibling(
                ["benchmarks/bench_queue_depth.py", "--depth", str(a.queue_depth)]
            )
        mark("loci")
        if "loci" in only:
            args = ["benchmarks/bench_scorer.py", "--only", "loci-top100"]
            args += ["--runs", str(a.loci_runs)]
            if a.loci_against:
                args += ["--against", *a.loci_against]
            report["loci"] = sibling(args)
        mark("end")
    finally:
        for site, _pid in sites.values():
            site.drop()
    # each part measured: its UTC start and end and the load average at both
    report["parts"] = {
        name: {"utc": [t0_, t1_], "load": [round(l0, 2), round(l1, 2)]}
        for (name, t0_, l0), (_, t1_, l1) in zip(marks, marks[1:], strict=False)
        if name in only
    }
    report["load_end"] = [round(x, 2) for x in os.getloadavg()]
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
