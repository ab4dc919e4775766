"""A scoring job that takes more queued runs of its phase (`score_batch`): each still its own
attempt, scores and outcome; runs are claimed in the database (one a worker has started is left to
it, and a claimed run's own job, should a worker pop it, starts nothing); another phase's runs are
left to their own jobs; a taken run reads as live while it is scored, and leaves no job behind."""

from __future__ import annotations

from backbone import get, make_team, scores, set_phase, submit
from rq.job import Job

from server.jobs.queue import SCORING, fetch_job, get_queue, job_id


def _queued(backend) -> list[str]:
    """The queue's jobs a worker would run (an id whose job a batch dropped is passed over)."""
    q = get_queue(SCORING, backend.conn, backend.settings)
    ids = [x.decode() for x in backend.conn.lrange(q.key, 0, -1)]
    return [x for x in ids if Job.exists(x, connection=backend.conn)]


def test_one_job_scores_up_to_the_batch_of_its_phase_each_on_its_own(backend, monkeypatch):
    from server.jobs import scoring
    from server.settings import get_settings

    for name in ("dev", "test"):
        set_phase(backend, "tric-binary", name, daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    dev = [submit(backend, team, user, noise=0.05 * i).id for i in range(3)]
    bad = submit(backend, team, user, data=b'{"nope": 1}\n', filename="x.jsonl").id
    other = submit(backend, team, user, "tric-binary", "test").id
    dev += [submit(backend, team, user, noise=0.3 + 0.05 * i).id for i in range(3)]
    held = dev[1]  # a worker has started this one: its run is running, not to be claimed
    q = get_queue(SCORING, backend.conn, backend.settings)
    assert backend.conn.lrem(q.key, 1, job_id(held)) == 1
    assert scoring.start_attempt(backend.engine, held, 3, only_queued=True) == 1
    assert len(_queued(backend)) == 7

    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "5")
    assert get_settings().score_batch == 5
    # the queue's first job, as a worker runs it: its run and four more of the dev phase
    backend.conn.lrem(q.key, 1, job_id(dev[0]))
    out = scoring.score_submission(dev[0])
    taken = [dev[2], bad, dev[3], dev[4]]
    assert out["status"] == "scored" and out["more"] == taken
    for sid in (dev[0], dev[2], dev[3], dev[4]):
        sub = get(backend, sid)
        assert (sub.status, sub.attempts) == ("scored", 1), sid
        assert [s.part for s in scores(backend, sid)] == ["all"]
    for sid in taken:
        assert fetch_job(backend.conn, sid) is None  # taken: no job left behind
    # the invalid file failed on its own, as its own job would have failed it
    b = get(backend, bad)
    assert (b.status, b.failure_kind, scores(backend, bad)) == ("failed", "invalid", [])
    # left to their own jobs: the next dev run (the batch was full) and the test run; the one a
    # worker started is still its own
    assert _queued(backend) == [job_id(other), job_id(dev[5])]
    for sid in (other, dev[5]):
        assert get(backend, sid).status == "queued"
    assert (get(backend, held).status, get(backend, held).attempts) == ("running", 1)
    # the distinct files got distinct scores: each scored against its own upload
    values = {scores(backend, s)[0].primary_value for s in (dev[0], dev[2], dev[3], dev[4])}
    assert len(values) == 4

    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "1")  # one run per job: nothing more taken
    backend.conn.lrem(q.key, 1, job_id(dev[5]))
    out = scoring.score_submission(dev[5])
    assert "more" not in out and _queued(backend) == [job_id(other)]


def test_a_taken_run_reads_as_a_live_job_while_it_is_scored(backend, monkeypatch):
    from server.jobs import reconciler, scoring

    team, user = make_team(backend)
    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    first, second = (submit(backend, team, user, noise=n).id for n in (0.1, 0.2))
    seen = {}
    real = scoring.score_one

    def spy(sid, settings, **kw):
        if sid == second:  # while the batch scores it, the reconciler leaves it alone
            seen["live"] = reconciler.job_is_live(backend.conn, sid, settings)
        return real(sid, settings, **kw)

    monkeypatch.setattr(scoring, "score_one", spy)
    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "2")
    q = get_queue(SCORING, backend.conn, backend.settings)
    backend.conn.lrem(q.key, 1, job_id(first))
    assert scoring.score_submission(first)["more"] == [second]
    assert seen == {"live": True}
    assert get(backend, second).status == "scored"
    assert not reconciler.job_is_live(backend.conn, second, backend.settings)


def test_a_worker_reads_in_its_parent_a_task_that_arrived_after_it_started(tmp_path, demo_home):
    """A worker on an empty data directory: its first job's horse fetches the task's files from
    the store, and its caches die with it; the parent reads the task after that job, once (again
    only when the task's files change), so that the next horses start warm."""
    import os
    import shutil

    from server.jobs import worker
    from server.settings import Settings

    settings = Settings(home=tmp_path, database_url=None, redis_url=None)
    read = []
    real = worker.partition_units

    def spy(task_id, split, home):
        read.append((task_id, split))
        return real(task_id, split, home)

    seen: dict[str, int] = {}
    orig, worker.partition_units = worker.partition_units, spy
    try:
        worker.warm_caches(settings, seen)
        assert read == [] and seen == {}  # nothing here yet
        shutil.copytree(demo_home / "tasks" / "tric-binary", tmp_path / "tasks" / "tric-binary")
        worker.warm_caches(settings, seen)
        assert {t for t, _ in read} == {"tric-binary"} and set(seen) == {"tric-binary"}
        n = len(read)
        worker.warm_caches(settings, seen)  # nothing new: nothing read
        assert len(read) == n
        manifest = tmp_path / "tasks" / "tric-binary" / "task.json"
        st = manifest.stat()  # a new version of the task's files
        os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        worker.warm_caches(settings, seen)
        assert len(read) == 2 * n
    finally:
        worker.partition_units = orig


def test_without_redis_a_job_scores_its_own_run_and_takes_no_more(backend, monkeypatch):
    from server.jobs import scoring

    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    first, second = (submit(backend, team, user, noise=n, enqueue=False).id for n in (0.1, 0.2))
    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "4")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    out = scoring.score_submission(first)
    assert (out["status"], out["more"]) == ("scored", [])
    assert get(backend, second).status == "queued"


def test_a_forked_job_compiles_no_sql_and_commits_its_start_and_its_score(backend, monkeypatch):
    """The worker's parent compiles the job's statements (`warm_statements`, on an engine whose
    cache starts empty): a job forked after it compiles none of its own (only the savepoints'
    names), and a run costs two commits: its start, then its scores with its status, the board's
    revision, the audit row and its notice, in one transaction."""
    import json
    import os

    from sqlalchemy import event
    from sqlalchemy.sql import compiler

    from server import db as dbm
    from server.jobs import scoring, worker
    from server.settings import get_settings

    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "1")
    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    sid = submit(backend, team, user, noise=0.1).id
    settings = get_settings()
    url = settings.sqlalchemy_url()
    dbm._engines.pop(url).dispose()  # a fresh engine: an empty cache, as a worker starts
    engine = dbm.get_engine(url)
    worker.warm_statements(engine)
    engine.dispose()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the work horse
        got = {"compiled": [], "commits": 0}
        try:
            real = compiler.Compiled.__init__

            def spy(self, dialect, statement, *a, **kw):
                real(self, dialect, statement, *a, **kw)
                got["compiled"].append(str(getattr(self, "string", ""))[:60])

            compiler.Compiled.__init__ = spy
            event.listen(
                dbm.get_engine(url),
                "commit",
                lambda c: got.__setitem__("commits", got["commits"] + 1),
            )
            got["out"] = scoring.score_submission(sid)
        except BaseException as e:  # noqa: BLE001 — told to the test
            got["error"] = repr(e)
        os.write(w, json.dumps(got).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = json.loads(f.read())
    os.waitpid(pid, 0)
    assert "error" not in got, got
    assert got["out"]["status"] == "scored" and got["out"]["recorded"], got
    assert [x for x in got["compiled"] if "SAVEPOINT" not in x] == [], got["compiled"]
    assert got["commits"] == 2, got
    assert get(backend, sid).status == "scored"


def test_a_run_costs_a_bounded_number_of_statements(backend, monkeypatch):
    """A one-run job's SQL, counted at the cursor: its start (the run's state change, its blind
    and competition facts said by the UPDATE's RETURNING on PostgreSQL; the phase's revision; the
    audit row; what the job needs of the run and phase) in one transaction, then its scores (one
    INSERT passing over a part written already), status, revision, audit row and the notice's
    one read in another; nothing else. A statement added to every run fails this test."""
    from sqlalchemy import event

    from server.db import get_engine
    from server.jobs import scoring
    from server.settings import get_settings

    monkeypatch.setenv("PALIMPSEST_SCORE_BATCH", "1")
    set_phase(backend, "tric-binary", "dev", daily_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    sid = submit(backend, team, user, noise=0.1).id
    engine = get_engine(get_settings().sqlalchemy_url())
    seen: list[str] = []

    def statement(conn, cursor, sql, params, context, many):
        seen.append(sql[:70].replace("\n", " "))

    def ended(conn):
        seen.append("COMMIT/ROLLBACK")

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine, "commit", ended)
    event.listen(engine, "rollback", ended)
    try:
        out = scoring.score_submission(sid)
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(engine, "commit", ended)
        event.remove(engine, "rollback", ended)
    assert out["status"] == "scored" and out["recorded"], out
    sql = [x for x in seen if x != "COMMIT/ROLLBACK"]
    # two transactions, each ended once by its commit (no read of a connection of its own)
    assert seen.count("COMMIT/ROLLBACK") == 2, seen
    # PostgreSQL: 9 (22 before: each move read the blind-run check and the competition apart,
    # the scores took a read, a savepoint and an INSERT per part, the notice four reads); SQLite's
    # RETURNING names no other table, so its two moves read those two facts apart
    bound = 13 if backend.engine.dialect.name == "sqlite" else 9
    assert len(sql) <= bound, sql
    assert sum(x.startswith("INSERT INTO score") for x in sql) == 1, sql
    assert get(backend, sid).status == "scored"
    assert [s.part for s in scores(backend, sid)] == ["all"]
