"""The queue's own structures, used through RQ's public API: requests that coalesce queue one job
however many callers ask at once, and a scoring job takes more runs of its phase by claiming them
in the database (`FOR UPDATE SKIP LOCKED` on PostgreSQL), never by walking the queue's list."""

from __future__ import annotations

import threading

from backbone import get, make_team, phase, set_phase, submit


def test_simultaneous_requests_for_statistics_queue_one_job(backend):
    from server.boards import stats
    from server.jobs.queue import STATS, get_queue

    pid = phase(backend, "tric-binary", "dev").id
    q = get_queue(STATS, backend.conn, backend.settings)
    callers, rounds = 8, 20
    for _ in range(rounds):
        q.empty()
        for jid in (f"stats-{pid}", f"stats-{pid}-again"):
            backend.conn.delete(f"rq:job:{jid}")
        start = threading.Barrier(callers)
        answers: list[bool] = []

        def ask(start=start, answers=answers):
            start.wait()
            answers.append(stats.enqueue(backend.settings, pid, backend.conn))

        threads = [threading.Thread(target=ask) for _ in range(callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [True] * callers
        queued = [x.decode() for x in backend.conn.lrange(q.key, 0, -1)]
        assert queued == [f"stats-{pid}"], queued
    assert not backend.conn.keys("palimpsest:enqueue-guard:*")  # every turn given back


def test_claimers_at_the_same_moment_take_each_run_once(backend):
    from server.domain import lifecycle

    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    ids = [submit(backend, team, user, noise=0.01 * i, enqueue=False).id for i in range(12)]
    pid = phase(backend, "tric-binary", "dev").id
    start = threading.Barrier(6)
    got: list[tuple[int, int]] = []

    def claim():
        start.wait()
        while (c := lifecycle.claim_queued(backend.engine, pid, 3, besides=ids[:1])) is not None:
            got.append(c)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [(i, 1) for i in ids[1:]]  # every run once, the one set aside never
    assert [get(backend, i).status for i in ids] == ["queued"] + ["running"] * 11


def test_a_claimed_runs_own_job_starts_nothing(backend):
    from server.domain import lifecycle
    from server.jobs import reconciler, scoring
    from server.jobs.queue import drop_waiting_job, fetch_job, hold_claim

    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    sid = submit(backend, team, user).id
    pid = phase(backend, "tric-binary", "dev").id
    assert lifecycle.claim_queued(backend.engine, pid, 3) == (sid, 1)
    hold_claim(backend.conn, sid, "", 60)
    drop_waiting_job(backend.conn, sid)
    assert fetch_job(backend.conn, sid) is None
    assert reconciler.job_is_live(backend.conn, sid, backend.settings)  # held by the claim
    # a worker that popped the job before it was dropped: it starts no second attempt
    assert scoring.score_submission(sid) == {"submission": sid, "skipped": True}
    s = get(backend, sid)
    assert (s.status, s.attempts) == ("running", 1)


def test_a_request_for_statistics_whose_job_waits_takes_no_turn(backend, monkeypatch):
    """While the phase's statistics job waits (or runs with its follow-up waiting), asking again
    reads both jobs' statuses in one round trip and queues nothing, without taking the enqueue's
    turn; when neither waits, the turn is taken and one job queued."""
    from rq.job import Job

    from server.boards import stats
    from server.jobs import queue
    from server.jobs.queue import STATS, get_queue

    pid = phase(backend, "tric-binary", "dev").id
    q = get_queue(STATS, backend.conn, backend.settings)
    q.empty()
    for jid in (f"stats-{pid}", f"stats-{pid}-again"):
        backend.conn.delete(Job.key_for(jid))
    turns = []
    real = queue._one_at_a_time

    def turn(conn, key):
        turns.append(key)
        return real(conn, key)

    monkeypatch.setattr(queue, "_one_at_a_time", turn)
    assert stats.enqueue(backend.settings, pid, backend.conn)  # nothing waits: a turn, a job
    assert len(turns) == 1
    assert [x.decode() for x in backend.conn.lrange(q.key, 0, -1)] == [f"stats-{pid}"]
    for _ in range(3):  # it waits: no turn, nothing more queued
        assert stats.enqueue(backend.settings, pid, backend.conn)
    assert len(turns) == 1
    # it runs: its follow-up is queued once (a turn), then waits (no turn)
    backend.conn.hset(Job.key_for(f"stats-{pid}"), "status", "started")
    assert stats.enqueue(backend.settings, pid, backend.conn)
    assert stats.enqueue(backend.settings, pid, backend.conn)
    assert len(turns) == 2
    queued = [x.decode() for x in backend.conn.lrange(q.key, 0, -1)]
    assert queued == [f"stats-{pid}", f"stats-{pid}-again"], queued
