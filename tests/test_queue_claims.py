"""The queue's own structures, used through RQ's public API: requests that coalesce queue one job
however many callers ask at once, and a scoring job takes more runs of its phase by claiming them
in the database (`FOR UPDATE SKIP LOCKED` on PostgreSQL), never by walking the queue's list."""

from __future__ import annotations

import threading

from backbone import phase


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
