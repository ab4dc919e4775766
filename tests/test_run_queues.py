"""The code runs' queues (server.domain.run_queue): one per competition and pool, served
round-robin, so that a burst of one competition delays another's runs by one run each; a worker
serves only its pools (and an attached worker only its token's competitions); a run held under a
lease goes back to its queue when its holder goes silent, and is charged once. The claim is the
unit here: the rows are written directly (the sandbox is tests/test_blind_runs.py's)."""

from __future__ import annotations

import threading
import time

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
    assert last_b <= 10  # one of A's runs at most before each of B's


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
