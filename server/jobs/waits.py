"""Where a waiting run stands: its place in the scoring queue and an estimate of when it is
scored, from the queue's depth (the database's queued runs, first come first served), the workers
alive and recent scoring times. One computation for the submission page, the API (so the CLI's
`status`) and the status page (`/status`).

The estimate: each run ahead, and this one, takes its task's median scoring time over the last
`RECENT` scored runs (all tasks' median when the task has none, nothing when no run was ever
scored), times the workers' recent pace (`pace`: what else a worker does between two runs); a
running one keeps its worker for what is left of its median. The runs ahead go, in order, to the
worker free first; this one starts when a worker is free after them and is scored its own time
later.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import time
from datetime import datetime, timedelta

import sqlalchemy
from sqlalchemy import func
from sqlmodel import Session, select

from server.domain import run_queue
from server.jobs.queue import QUEUES, RUNS, SCORING, connect, get_queue
from server.models import RunQueueTurn, RunWorkerToken, Submission, utcnow
from server.settings import get_settings

RECENT = 50


def durations(s: Session) -> dict[str, float]:
    """Median scoring seconds by task over the last RECENT scored runs of each, and "*" over the
    last RECENT of all."""
    rows = s.exec(
        select(Submission.task_id, Submission.started_at, Submission.finished_at)
        .where(
            Submission.status == "scored",
            Submission.started_at.is_not(None),
            Submission.finished_at.is_not(None),
        )
        .order_by(Submission.finished_at.desc())
        .limit(20 * RECENT)
    ).all()
    by: dict[str, list[float]] = {}
    every: list[float] = []
    for task_id, started, finished in rows:
        d = max(0.0, (finished - started).total_seconds())
        if len(every) < RECENT:
            every.append(d)
        if len(by.setdefault(task_id, [])) < RECENT:
            by[task_id].append(d)
    out = {t: statistics.median(v) for t, v in by.items() if v}
    if every:
        out["*"] = statistics.median(every)
    return out


def pace(s: Session, n_workers: int, ratio: float | None = None) -> float:
    """How much longer than their scoring times the runs held the workers lately (1 at least):
    the workers also start each job, run the boards' statistics and send mail. Measured while the
    queue was backed up (a run waited when another finished): there the runs finish one every
    `interval` seconds, so each held its worker `n_workers * interval` against a median scoring
    time `d`; the factor is their ratio over the last RECENT such finishes (1 with fewer than 5).
    `ratio`: `pace_ratio` read already."""
    r = pace_ratio(s) if ratio is None else ratio
    if r is None:
        return 1.0
    return min(10.0, max(1.0, n_workers * r))


def pace_ratio(s: Session) -> float | None:
    """`pace` for one worker before its bounds: the mean gap between finishes while the queue was
    backed up over the median time a run held its worker; None with too few such finishes."""
    rows = s.exec(
        select(Submission.created_at, Submission.started_at, Submission.finished_at)
        .where(Submission.finished_at.is_not(None), Submission.status.in_(("scored", "failed")))
        .order_by(Submission.finished_at.desc())
        .limit(4 * RECENT)
    ).all()
    rows = sorted(rows, key=lambda r: r[2])
    gaps, held = [], []
    for a, b in zip(rows, rows[1:], strict=False):
        f = a[2]
        # a run waited at f (uploaded, not started): every worker was busy just before
        if any(c <= f and (st is None or st > f) for c, st, _ in rows):
            gaps.append((b[2] - f).total_seconds())
            if a[1] is not None:
                held.append((f - a[1]).total_seconds())
    gaps, held = gaps[-RECENT:], held[-RECENT:]
    if len(gaps) < 5 or not held or statistics.median(held) <= 0:
        return None
    return statistics.mean(gaps) / statistics.median(held)


def workers(conn) -> list[dict] | None:
    """The RQ workers alive (their heartbeat within its TTL) and what they do; None when Redis
    cannot be read."""
    if conn is None:
        return None
    try:
        from rq import Worker  # RQ loads when a page asks for the workers

        out = []
        for w in Worker.all(connection=conn):
            job = w.get_current_job_id()
            # a code worker's (worker.py): for everyone, and with its host's detail
            limits = conn.get(f"palimpsest:worker-limits:{w.name}")
            host = conn.get(f"palimpsest:worker-host-limits:{w.name}")
            pools = conn.get(f"{POOLS_KEY}{w.name}")  # the pools of code runs it serves
            out.append(
                {
                    "name": w.name,
                    "hostname": w.hostname or "",
                    "pid": w.pid,
                    "queues": w.queue_names(),
                    "state": w.get_state(),
                    "current_job": job,
                    "last_heartbeat": w.last_heartbeat,
                    "limits": limits.decode() if isinstance(limits, bytes) else limits,
                    "host_limits": host.decode() if isinstance(host, bytes) else host,
                    "pools": pools.decode().split(",") if pools else [],
                }
            )
        return sorted(out, key=lambda w: w["name"])
    except Exception:  # noqa: BLE001 — the page says the queue cannot be read
        return None


# the pools of code runs a code worker serves, by its name (written by server.jobs.worker)
POOLS_KEY = "palimpsest:worker-pools:"


def run_pools(s: Session, conn, settings=None) -> dict[str, dict]:
    """What an autoscaler reads of the code runs' queues, per pool: `depth` (runs waiting),
    `oldest_age_seconds` (the oldest waiting run's age; 0 when none waits), `running` (runs held
    by a worker now) and `workers` (the live workers serving the pool: the site's code workers
    alive, and one per attached worker's token heard from within its lease; None when the
    queue's server cannot be read). Every pool the site's workers serve, or that ever held a run, is
    listed, the empty ones too (an autoscaler scales them to their floor)."""
    settings = settings or get_settings()
    figures = run_queue.figures(s)
    names = set(settings.pools()) | set(figures)
    names |= set(s.exec(select(RunQueueTurn.pool).distinct()).all())
    found = workers(conn)
    attached = attached_workers(s, settings)
    out = {}
    for pool in sorted(names):
        f = figures.get(pool) or run_queue.figures_empty()
        live = None
        if found is not None:
            live = sum(1 for w in found if RUNS in w["queues"] and pool in w["pools"])
            live += sum(1 for pools in attached if pool in pools)
        out[pool] = {
            "depth": f["depth"],
            "oldest_age_seconds": f["oldest_age_seconds"],
            "running": f["running"],
            "workers": live,
        }
    return out


def attached_workers(s: Session, settings) -> list[list[str]]:
    """The pools of each attached worker's token heard from (a claim or a heartbeat) within the
    lease (`stale_after`, a minute at least): one live worker per token."""
    since = utcnow() - timedelta(seconds=max(60.0, float(settings.stale_after)))
    rows = s.exec(
        select(RunWorkerToken.pools).where(
            RunWorkerToken.revoked_at.is_(None), RunWorkerToken.last_seen_at >= since
        )
    ).all()
    return [list(p or []) for p in rows]


def status_document(s: Session, conn, settings=None) -> dict:
    """`/status.json`: each queue's depth (`queue_depths`), the workers alive, and the code runs'
    pools (`run_pools`), read once."""
    found = workers(conn)
    return {
        "queues": queue_depths(s, conn),
        "workers": None if found is None else len(found),
        "scoring_workers": scoring_workers(found),
        "pools": run_pools(s, conn, settings),
    }


def prometheus(doc: dict) -> str:
    """`status_document` in Prometheus' text format (version 0.0.4): gauges labelled by queue and
    pool; a figure not known (the queue's server away) is left out, never written as 0."""
    lines: list[str] = []

    def gauge(name: str, help_: str, samples: list[tuple[str, object]]) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{labels} {_num(v)}" for labels, v in samples if v is not None)

    q = doc["queues"]
    gauge(
        "palimpsest_queue_depth",
        "Jobs waiting in each queue (the scoring queue's runs from the database).",
        [(f'{{queue="{n}"}}', v) for n, v in q.items()],
    )
    gauge("palimpsest_workers", "Workers alive.", [("", doc["workers"])])
    pools = doc["pools"]
    for key, help_ in (
        ("depth", "Code runs waiting in the pool."),
        ("oldest_age_seconds", "Age of the pool's oldest waiting code run, in seconds."),
        ("running", "Code runs held by a worker of the pool now."),
        ("workers", "Live workers serving the pool."),
    ):
        name = f"palimpsest_run_pool_{key}"
        gauge(name, help_, [(f'{{pool="{_label(p)}"}}', f[key]) for p, f in pools.items()])
    return "\n".join(lines) + "\n"


def _num(v) -> str:
    return str(int(v)) if isinstance(v, int | bool) else repr(float(v))


def _label(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def scoring_workers(found: list[dict] | None) -> int | None:
    if found is None:
        return None
    return sum(1 for w in found if SCORING in w["queues"])


def queue_depths(s: Session, conn) -> dict[str, int | None]:
    """Each queue's waiting jobs: the scoring queue's runs from the database (what participants
    wait for), the other queues from Redis (None when it cannot be read)."""
    out: dict[str, int | None] = {
        SCORING: s.exec(
            select(func.count()).select_from(Submission).where(Submission.status == "queued")
        ).one()
    }
    for name in QUEUES:
        if name == SCORING:
            continue
        try:
            out[name] = None if conn is None else get_queue(name, conn).count
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


def duration(seconds: float) -> str:
    """Seconds for people: 40 s, 3 min, 1 h 20 min."""
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {round((s % 3600) / 60)} min"


def words(q: dict) -> str:
    """A waiting run's place and estimate in a sentence (the page's; the CLI words it alike)."""
    where = (
        "Being scored now"
        if q["position"] == 0
        else f"Position {q['position']} of {q['queued']} in the scoring queue"
    )
    crew = "workers unknown" if q["workers"] is None else f"{q['workers']} worker(s) alive"
    wait = q["estimated_wait_s"]
    est = "no estimate yet" if wait is None else f"scored in about {duration(wait)}"
    return f"{where}; {est} ({crew}; {q['basis']})."


def redis_or_none(conn=None):
    """The app's Redis when it answers (never starting the embedded one), else None."""
    try:
        conn = conn or connect(get_settings(), start_embedded=False)
        conn.ping()
        return conn
    except Exception:  # noqa: BLE001 — no Redis: workers unknown
        return None


def live_standing(
    s: Session, sub: Submission, conn=None, *, recent: bool = False, recheck: bool = False
) -> dict | None:
    """`standing` with the workers alive now. `recent` (a run's page, its API answer and the
    upload's): with the slow-moving inputs (the scoring times, the pace, the workers alive) as
    read at most `RECENT_INPUTS_S` ago by this process, so that a team polling its run reads only
    the queue itself (its place in it is exact; its estimate's inputs a few seconds old), not a
    handful of Redis round trips per worker alive on every request. `recheck`: `sub` is as the
    upload committed it, not read again (`standing`); a page or answer that read the run itself,
    and what it shows with it, leaves it as read (refreshed here, the status would no longer be
    the one its scores were read with)."""
    if sub.status not in ("queued", "running"):
        return None
    if not recent:
        return standing(s, sub, scoring_workers(workers(redis_or_none(conn))))
    bind = s.get_bind()
    if not s.in_transaction() and bind.dialect.name == "postgresql":
        # the answer's reads (one statement where the run still waits) outside any transaction,
        # as the session's next connection reads them: no BEGIN and ROLLBACK around them, two of
        # the upload's round trips to the database
        s.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
    key = str(bind.url)
    now = time.monotonic()
    got = _inputs.get(key)
    if got is None or now - got[0] > RECENT_INPUTS_S:
        n = scoring_workers(workers(redis_or_none(conn)))
        got = _inputs[key] = (now, n, durations(s), pace_ratio(s))
    _, n, known, ratio = got
    return standing(s, sub, n, known=known, ratio=ratio, recheck=recheck)


# the estimate's slow-moving inputs per database, for the upload's answer: (read at, workers,
# durations, pace ratio)
RECENT_INPUTS_S = 10.0
_inputs: dict[str, tuple[float, int | None, dict[str, float], float | None]] = {}


def standing(
    s: Session,
    sub: Submission,
    n_workers: int | None,
    now: datetime | None = None,
    known: dict[str, float] | None = None,
    ratio: float | None | str = "read",
    recheck: bool = False,
) -> dict | None:
    """A queued or running run's place: {position (1: next to start), queued (all waiting),
    running, workers, estimated_wait_s (until scored; None without a scoring time), basis}.
    None for a run that waits no more. `recheck`: `sub` is as its upload committed it, not read
    again; where the queue read here finds it in another state (a worker took it, or finished
    it, in the meantime), it is read again (`sub` refreshed) and its place is that state's."""
    if sub.status not in ("queued", "running"):
        return None
    now = now or utcnow()
    known = durations(s) if known is None else known
    fallback = known.get("*")

    def d(task_id: str) -> float | None:
        return known.get(task_id, fallback)

    # the queue in two reads of counts: the runs waiting by task (all, and those ahead of this
    # one by id), and the runs being scored (as many as the workers), this one's state beside
    tasks, running, state = _queue_counts(s, sub.id)
    if recheck and state != sub.status:
        s.refresh(sub)
        return standing(s, sub, n_workers, now, known, ratio)
    # runs being scored each hold a worker: at least that many are at work
    w = max(1, n_workers or 1, len(running))
    mine = d(sub.task_id)
    out = {
        "position": None,
        "queued": sum(n for n, _ in tasks.values()),
        "running": len(running),
        "workers": n_workers,
        "estimated_wait_s": None,
        "basis": (
            f"median scoring time of recent {sub.task_id} runs"
            if sub.task_id in known
            else "median scoring time of recent runs"
            if fallback is not None
            else "no run scored yet"
        ),
    }
    if sub.status == "running":
        out["position"] = 0
        if mine is not None and sub.started_at is not None:
            out["estimated_wait_s"] = round(
                max(0.0, mine - (now - sub.started_at).total_seconds()), 1
            )
        return out
    out["position"] = sum(a for _, a in tasks.values()) + 1
    if mine is None:
        return out
    f = pace(s, w) if ratio == "read" else pace(s, w, ratio) if ratio is not None else 1.0
    if f > 1.0:
        out["basis"] += f", times {f:.2f} for the workers' other work lately"
    # first come, first served on w workers: each run ahead goes to the worker free first
    free = [
        max(0.0, (d(t) or mine) - ((now - started).total_seconds() if started else 0.0))
        for t, started in running
    ]
    free += [0.0] * (w - len(free))
    for t, (_, ahead) in sorted(tasks.items()):
        free = after_runs(free, ahead, f * (d(t) or mine))
    out["estimated_wait_s"] = round(min(free) + f * mine, 1)
    return out


def after_runs(free: list[float], count: int, seconds: float) -> list[float]:
    """When each worker is free (`free`) after `count` runs of `seconds` each went, one after the
    other, to the worker free first: the heap's answer, in arithmetic instead of a step per run.
    The runs start at the `count` smallest of every worker's `free + k * seconds` (k = 0, 1, ...):
    below a level T found by bisection, each worker takes those of its starts under T, and the
    rest start at T itself."""
    if count <= 0:
        return list(free)
    if seconds <= 0:
        return list(free)
    lo, hi = min(free), min(free) + count * seconds  # one worker could take them all

    def under(t: float) -> list[int]:  # each worker's starts strictly below t
        return [max(0, math.ceil((t - x) / seconds)) if t > x else 0 for x in free]

    for _ in range(200):  # the level: the first t whose starts below it fall short of count
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if sum(under(mid)) >= count:
            hi = mid
        else:
            lo = mid
    taken = under(lo)  # fewer than count; the rest start at the level, on the workers free there
    rest = count - sum(taken)
    out = []
    for x, k in sorted(zip(free, taken, strict=True), key=lambda p: p[0] + p[1] * seconds):
        if rest > 0:
            k, rest = k + 1, rest - 1
        out.append(x + k * seconds)
    return out


def _queue_counts(s: Session, sub_id: int):
    """({task: (runs waiting, of which ahead of `sub_id`)}, [(task, started_at) of each run being
    scored], the state of `sub_id`): counts from the database, not a row per waiting run, in one
    read (the counts by task, then the runs being scored and this one, as rows of one union)."""
    tasks, running, state = {}, [], None
    for kind, i, t, n, a, started, st in s.connection().execute(_queue_statement(), {"me": sub_id}):
        if kind == 0:
            tasks[t] = (int(n), int(a or 0))
            continue
        if i == sub_id:
            state = st
        if st == "running":
            running.append((t, started))
    return tasks, running, state


@functools.cache
def _queue_statement():
    """The waiting runs counted by task, all and those before a given id (rows of kind 0); the
    runs being scored (as many as the workers) and the given run whatever its state (kind 1);
    built once."""
    S = Submission.__table__.c
    me = sqlalchemy.bindparam("me")

    def null(col=None):  # a NULL of the column's type: the union's rows read as that column's
        return sqlalchemy.cast(sqlalchemy.null(), (col if col is not None else S.id).type)

    counts = (
        sqlalchemy.select(
            sqlalchemy.literal(0).label("kind"),
            null().label("id"),
            S.task_id,
            func.count().label("n"),
            func.sum(sqlalchemy.case((S.id < me, 1), else_=0)).label("ahead"),
            null(S.started_at).label("started_at"),
            null(S.status).label("status"),
        )
        .where(S.status == "queued")
        .group_by(S.task_id)
    )
    rows = sqlalchemy.select(
        sqlalchemy.literal(1),
        S.id,
        S.task_id,
        null(),
        null(),
        S.started_at,
        S.status,
    ).where(sqlalchemy.or_(S.status == "running", S.id == me))
    return sqlalchemy.union_all(counts, rows)


# ----------------------------------------------------------------------------- the reconciler's
# steps that fail (server.jobs.reconciler records them; the status page shows administrators)

RECONCILER_PROBLEMS = "palimpsest:reconciler:problems"
RECONCILER_STEPS = {
    "purged": "purging invalid uploads",
    "reminders": "queueing the pending-registration digests and closing reminders",
    "mail_due": "sweeping the mail queue",
    "stale_uploads": "aborting the large uploads not completed in time",
    "stale_downloads": "deleting the download zips a task update replaced",
}


def reconciler_problems(conn) -> list[dict]:
    """The reconciler's steps failing now: what, since when, the error."""
    if conn is None:
        return []
    try:
        raw = conn.hgetall(RECONCILER_PROBLEMS)
    except Exception:  # noqa: BLE001 - Redis away: the page says so elsewhere
        return []
    out = []
    for k, v in sorted(raw.items()):
        k = k.decode() if isinstance(k, bytes) else k
        out.append({"step": RECONCILER_STEPS.get(k, k), **json.loads(v)})
    return out
