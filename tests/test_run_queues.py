"""The code runs' queues (server.domain.run_queue): one per competition and pool, served
round-robin, so that a burst of one competition delays another's runs by one run each; a worker
serves only its pools (and an attached worker only its token's competitions); a run held under a
lease goes back to its queue when its holder goes silent, and is charged once. The claim is the
unit here: the rows are written directly (the sandbox is tests/test_blind_runs.py's)."""

from __future__ import annotations

import threading
import time

import pytest
from backbone import make_team, phase

A, B = 9001, 9002  # two competitions' queues (the claim reads the run's competition id alone)


def _queue(backend, team, pid, competition: int, n: int, *, pool: str = "cpu") -> list[int]:
    from server.domain import run_queue
    from server.models import CodeRun

    ids = []
    with backend.session() as s:
        for i in range(n):
            r = CodeRun(
                team_id=team.id,
                task_id="tric-binary",
                phase_id=pid,
                archive_sha256=f"{competition}-{pool}-{i}",
                competition_id=competition,
                pool=pool,
            )
            s.add(r)
            s.flush()
            run_queue.join_queue(s, r)
            ids.append(r.id)
    return ids


def test_a_burst_of_one_competition_delays_another_by_one_run_each(backend):
    from server.domain import run_queue

    team, _ = make_team(backend)
    pid = phase(backend, "tric-binary", "dev").id
    a = _queue(backend, team, pid, A, 100)  # competition A queues 100 runs ...
    b = _queue(backend, team, pid, B, 5)  # ... then competition B queues 5
    order: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(2)

    def worker(name):  # two workers, each taking runs until none is left
        start.wait()
        while True:
            got = run_queue.claim(backend.engine, pools=["cpu"], holder=name, lease_seconds=60)
            if got is None:
                return
            with lock:
                order.append(got[0])

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(order) == sorted(a + b)  # every run once
    started_a = [i for i in order if i in set(a)]
    # a competition's runs keep their order (two workers' claims may be noted a step apart)
    assert all(abs(i - j) <= 2 for i, j in zip(started_a, sorted(started_a), strict=True))
    last_b = max(order.index(i) for i in b)
    twentieth_a = order.index(started_a[19])
    assert last_b < twentieth_a, (last_b, twentieth_a, order[:30])
    # one of A's runs at most before each of B's: B's last claim is the 10th (index 9); each of
    # the two workers notes its claim after its transaction ends, so a note may come two late
    assert last_b <= 11, (last_b, order[:30])


def test_a_worker_takes_only_its_pools_and_competitions(backend):
    from server.domain import run_queue

    team, _ = make_team(backend)
    pid = phase(backend, "tric-binary", "dev").id
    a = _queue(backend, team, pid, A, 2)
    gpu = _queue(backend, team, pid, B, 1, pool="gpu")
    own = _queue(backend, team, pid, B, 1, pool="lab-b")

    def claim(pools, competitions=None):
        got = run_queue.claim(
            backend.engine,
            pools=pools,
            holder="t",
            lease_seconds=60,
            competitions=competitions,
        )
        return None if got is None else got[0]

    assert claim(["cpu"], [B]) is None  # B's token: nothing of A's, though A's runs wait
    assert claim(["lab-b"], [A]) is None  # A's token does not reach B's own pool
    assert claim(["lab-b"], [B]) == own[0]
    assert claim(["cpu", "gpu"], [B]) == gpu[0]
    assert claim(["cpu", "gpu"], []) is None  # a token of no competition serves nothing
    assert [claim(["cpu"]), claim(["cpu"]), claim(["cpu"])] == [*a, None]


def test_a_silent_holder_loses_its_run_which_is_charged_once(backend):
    from server.domain import run_queue
    from server.jobs.reconciler import _reconcile_code_runs
    from server.models import CodeRun, utcnow

    team, _ = make_team(backend)
    pid = phase(backend, "tric-binary", "dev").id
    (rid,) = _queue(backend, team, pid, A, 1)
    assert run_queue.claim(backend.engine, pools=["cpu"], holder="w1", lease_seconds=0.3) == (
        rid,
        1,
    )
    assert run_queue.renew(backend.engine, rid, "w1", 0.3)  # its heartbeat
    assert not run_queue.renew(backend.engine, rid, "w2", 60)  # nobody else's
    assert not run_queue.take_back(backend.engine, rid)  # leased still
    time.sleep(0.5)  # w1 goes silent: its lease runs out
    cutoff = utcnow()
    _reconcile_code_runs(backend.settings, backend.engine, backend.conn, cutoff)
    with backend.session() as s:
        r = s.get(CodeRun, rid)
        assert (r.stage, r.attempts, r.held_by) == ("queued", 1, "")
    assert not run_queue.renew(backend.engine, rid, "w1", 60)  # w1 holds it no more
    # another worker takes it: its second and last attempt
    assert run_queue.claim(backend.engine, pools=["cpu"], holder="w2", lease_seconds=0.3) == (
        rid,
        2,
    )
    time.sleep(0.5)
    got = _reconcile_code_runs(backend.settings, backend.engine, backend.conn, utcnow())
    assert got["runs_failed"] == 1
    with backend.session() as s:
        r = s.get(CodeRun, rid)
        assert (r.stage, r.failure_kind, r.attempts) == ("failed", "infra", 2)
    # never a third start
    assert run_queue.claim(backend.engine, pools=["cpu"], holder="w3", lease_seconds=60) is None


def test_status_and_metrics_say_each_pools_depth_age_and_workers_as_the_queue_holds_them(
    app, redis_tcp_url
):
    import re
    from datetime import timedelta

    import redis
    from sqlmodel import Session
    from webkit import engine_of, make_phase, make_user, team_of

    from server.domain import run_queue
    from server.jobs.waits import POOLS_KEY
    from server.jobs.worker import build_worker
    from server.models import CodeRun, utcnow

    make_user(app, "ann@x.org", team="Readers")
    pid = make_phase(app, "tric-binary", "test").id
    team_id = team_of(app, "Readers").id
    now = utcnow()
    ages = {"cpu": [300, 20, 5], "gpu": [40], "lab-b": [99]}  # lab-b's run ended already
    with Session(engine_of(app)) as s:
        for pool, waits in ages.items():
            for i, age in enumerate(waits):
                r = CodeRun(
                    team_id=team_id,
                    task_id="tric-binary",
                    phase_id=pid,
                    archive_sha256=f"{pool}{i}",
                    competition_id=A + i % 2,
                    pool=pool,
                    created_at=now - timedelta(seconds=age),
                    stage="ran" if pool == "lab-b" else "queued",
                )
                s.add(r)
                s.flush()
                run_queue.join_queue(s, r)
        s.commit()
    engine = engine_of(app)
    # one cpu run running: the oldest (A's first), so the oldest waiting is 20 s old
    assert run_queue.claim(engine, pools=["cpu"], holder="w", lease_seconds=60) is not None
    conn = redis.Redis.from_url(redis_tcp_url)
    app.extensions["palimpsest.redis"] = conn
    w = build_worker(
        app.extensions["palimpsest.settings"], ("runs",), conn, simple=True, name="gpu1"
    )
    w.register_birth()
    conn.set(POOLS_KEY + "gpu1", "cpu,gpu")
    try:
        c = app.test_client()
        doc = c.get("/status.json").json
        text = c.get("/metrics")
        page = c.get("/status").get_data(as_text=True)
    finally:
        w.register_death()
        conn.delete(POOLS_KEY + "gpu1")
        app.extensions.pop("palimpsest.redis", None)
    pools = doc["pools"]
    assert set(pools) == {"cpu", "gpu", "lab-b"}  # an empty pool is listed too
    assert (pools["cpu"]["depth"], pools["cpu"]["running"]) == (2, 1)
    assert 20 <= pools["cpu"]["oldest_age_seconds"] < 60
    assert (pools["gpu"]["depth"], pools["gpu"]["running"]) == (1, 0)
    assert 40 <= pools["gpu"]["oldest_age_seconds"] < 80
    assert pools["lab-b"] == {"depth": 0, "oldest_age_seconds": 0.0, "running": 0, "workers": 0}
    assert (pools["cpu"]["workers"], pools["gpu"]["workers"]) == (1, 1)
    # the same figures for a Prometheus scraper
    assert text.status_code == 200 and text.content_type.startswith("text/plain; version=0.0.4")
    body = text.get_data(as_text=True)
    got = {
        (m[0], m[1]): float(m[2])
        for m in re.findall(r'^palimpsest_run_pool_(\w+)\{pool="([\w-]+)"\} (\S+)$', body, re.M)
    }
    for pool, f in pools.items():
        for key in ("depth", "oldest_age_seconds", "running", "workers"):
            assert got[(key, pool)] == pytest.approx(f[key], abs=5), (key, pool)
    assert "# TYPE palimpsest_run_pool_depth gauge" in body
    assert re.search(r"<td>cpu</td><td class=\"num\">2</td>", page)
    # without the queue's server: the workers are not known, never said to be 0
    doc = app.test_client().get("/status.json").json
    assert doc["pools"]["cpu"]["workers"] is None and doc["pools"]["cpu"]["depth"] == 2
    assert "palimpsest_run_pool_workers" not in app.test_client().get("/metrics").get_data(
        as_text=True
    ).replace("# HELP palimpsest_run_pool_workers", "").replace(
        "# TYPE palimpsest_run_pool_workers", ""
    )
