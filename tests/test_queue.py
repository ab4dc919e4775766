"""Upload -> stored file -> committed row -> RQ job -> worker -> Score rows, on both backends."""

from __future__ import annotations

import json

import pytest
from backbone import (
    burst,
    get,
    make_team,
    phase,
    scores,
    set_phase,
    submit,
    wait_for,
    worker_process,
)
from sqlalchemy import select


def test_storage_is_content_addressed_and_ignores_client_names(tmp_path):
    from server.storage import path_for, safe_suffix, store_upload

    key, sha, size = store_upload(tmp_path, b'{"a": 1}\n', "../../etc/passwd.jsonl")
    assert key == f"{sha[:2]}/{sha}.jsonl" and size == 9
    assert path_for(tmp_path, key).read_bytes() == b'{"a": 1}\n'
    assert store_upload(tmp_path, b'{"a": 1}\n', "other.jsonl")[0] == key  # same bytes, same file
    assert (
        safe_suffix("x.CSV.gz") == ".csv.gz"
        and safe_suffix("evil.sh") == ""
        and safe_suffix(None) == ""
    )
    assert not list((tmp_path / "uploads" / "tmp").iterdir())  # nothing half-written left behind
    with pytest.raises(ValueError):
        path_for(tmp_path, "../x")


def test_upload_too_large_is_refused_before_anything_is_kept(tmp_path):
    from server.exceptions import UploadTooLarge
    from server.storage import store_upload

    with pytest.raises(UploadTooLarge):
        store_upload(tmp_path, b"x" * 100, "a.csv", max_bytes=10)
    assert not [p for p in (tmp_path / "uploads").rglob("*") if p.is_file()]


def test_dev_submission_is_scored_by_a_simple_worker(backend):
    from rq.serializers import JSONSerializer

    from server.jobs.queue import fetch_job

    team, user = make_team(backend)
    sub = submit(backend, team, user, "tric-binary", "dev", noise=0.0)
    assert get(backend, sub.id).status == "queued"
    job = fetch_job(backend.conn, sub.id)
    assert (
        job.id == f"submission-{sub.id}" and job.serializer is JSONSerializer and job.timeout == 600
    )
    burst(backend)
    s = get(backend, sub.id)
    assert (s.status, s.attempts, s.score_attempt, s.failure_kind) == ("scored", 1, 1, None)
    (row,) = scores(backend, sub.id)
    assert row.part == "all" and row.attempt == 1 and row.primary_value == pytest.approx(1.0)
    assert row.result["provenance"]["gold_sha256"] == row.gold_sha256 and row.task_version == 1
    assert row.scorer_version == row.result["provenance"]["scorer_version"]


@pytest.mark.parametrize(
    "task_id", ["tric-binary", "tric-ranking", "trac", "swissgov-rsd", "loci-similes"]
)
def test_test_phase_scores_a_public_and_a_private_part_drawn_once(embedded_backend, task_id):
    from scorer import partition_strata, partition_units
    from scorer.partition import stratified_partition
    from server.models import GoldPartition

    b = embedded_backend
    team, user = make_team(b)
    ph = phase(b, task_id, "test")
    assert ph.public_fraction == 0.5 and ph.partition_id is None  # attached at the first scoring
    ids = [submit(b, team, user, task_id, "test", noise=n).id for n in (0.1, 0.3)]
    burst(b)
    with b.session() as s:
        parts = s.execute(select(GoldPartition)).scalars().all()
    assert [(p.key, p.method, p.public_fraction) for p in parts] == [
        (f"{task_id}/test", "stratified", 0.5)
    ]
    units = partition_units(task_id, "test", b.settings.home)
    public, private = stratified_partition(
        partition_strata(task_id, "test", b.settings.home), parts[0].seed, 0.5
    )
    assert set(public).isdisjoint(private) and sorted(public + private) == sorted(units)
    for i in ids:
        assert get(b, i).status == "scored"
        got = {r.part: r for r in scores(b, i)}
        assert set(got) == {"public", "private"}
    assert phase(b, task_id, "test").partition_id == parts[0].id  # recorded, never redrawn


def test_public_fraction_one_scores_all(embedded_backend):
    b = embedded_backend
    set_phase(b, "tric-binary", "test", public_fraction=1.0)
    team, user = make_team(b)
    sub = submit(b, team, user, "tric-binary", "test")
    burst(b)
    assert [r.part for r in scores(b, sub.id)] == ["all"]


def test_invalid_file_fails_with_every_problem_and_costs_nothing(backend):
    team, user = make_team(backend)
    set_phase(backend, "tric-binary", "dev", daily_limit=1)
    bad = b'{"instanceID": "nope", "label": 7}\nnot json\n'
    sub = submit(backend, team, user, "tric-binary", "dev", data=bad, filename="bad.jsonl")
    burst(backend)
    s = get(backend, sub.id)
    assert (s.status, s.failure_kind) == ("failed", "invalid")
    messages = " | ".join(e["message"] for e in s.errors)
    assert "not valid JSON" in messages and "must be 0 or 1" in messages and len(s.errors) >= 2
    assert not scores(backend, sub.id)
    ok = submit(
        backend, team, user, "tric-binary", "dev"
    )  # the daily allowance of 1 is still there
    burst(backend)
    assert get(backend, ok.id).status == "scored"


def test_a_job_run_twice_scores_once(backend):
    from server.jobs.scoring import score_submission

    team, user = make_team(backend)
    sub = submit(backend, team, user, enqueue=False)
    first = score_submission(sub.id)
    again = score_submission(sub.id)  # e.g. RQ re-ran it after its parent worker died
    assert first["status"] == "scored" and again == {"submission": sub.id, "skipped": True}
    assert len(scores(backend, sub.id)) == 1 and get(backend, sub.id).attempts == 1


def test_two_overlapping_runs_keep_one_result_per_attempt(backend):
    """The reconciler re-enqueued a job whose first run was still going: both finish."""
    from scorer import score_validated, validate_file
    from server.jobs.scoring import start_attempt, write_scores
    from server.storage import path_for

    team, user = make_team(backend)
    sub = submit(backend, team, user, enqueue=False)
    a1 = start_attempt(backend.engine, sub.id, 3)
    a2 = start_attempt(backend.engine, sub.id, 3)
    assert (a1, a2) == (1, 2)
    v = validate_file(
        "tric-binary",
        path_for(backend.settings.home, get(backend, sub.id).storage_key),
        "dev",
        backend.settings.home,
    )
    r = {"all": score_validated(v, backend.settings.home)}
    assert write_scores(backend.engine, sub.id, a2, r) is True
    assert (
        write_scores(backend.engine, sub.id, a1, r) is False
    )  # late, recorded but not the one that counts
    assert write_scores(backend.engine, sub.id, a1, r) is False  # idempotent
    s = get(backend, sub.id)
    assert (s.status, s.score_attempt) == ("scored", 2)
    assert sorted((x.attempt, x.part) for x in scores(backend, sub.id)) == [(1, "all"), (2, "all")]


def test_jobs_are_stored_as_json_not_pickle(backend):
    import zlib

    from server.jobs.queue import fetch_job

    team, user = make_team(backend)
    sub = submit(backend, team, user)
    raw = backend.conn.hget(fetch_job(backend.conn, sub.id).key, "data")
    try:
        raw = zlib.decompress(raw)
    except zlib.error:
        pass
    assert json.loads(raw)[0] == "server.jobs.scoring.score_submission"


def test_enqueue_twice_keeps_one_job(backend):
    from server.jobs.queue import enqueue_submission, get_queue

    team, user = make_team(backend)
    sub = submit(backend, team, user)
    enqueue_submission(backend.conn, sub.id, backend.settings)
    assert get_queue("scoring", backend.conn).count == 1


def test_a_new_runs_job_is_written_in_one_round_trip_over_a_stale_hash_of_its_id(backend):
    # a new row's job: no check first (no job of its own can exist); a hash left under its id
    # (another database's, before a restore) is replaced whole, not merged into
    from rq.job import Job

    from server.jobs.queue import enqueue_submission, fetch_job, get_queue, job_id

    team, user = make_team(backend)
    sub = submit(backend, team, user)  # queued by the intake: a new row's job
    key = Job.key_for(job_id(sub.id))
    assert fetch_job(backend.conn, sub.id).get_status() == "queued"
    backend.conn.delete(key)
    backend.conn.hset(key, mapping={"status": "failed", "exc_info": "stale", "left_by": "x"})
    sent = []
    real = backend.conn.pipeline

    def counted(*a, **kw):
        p = real(*a, **kw)
        p_execute = p.execute

        def execute(*ea, **ekw):
            sent.append([c[0][0] for c in p.command_stack])
            return p_execute(*ea, **ekw)

        p.execute = execute
        return p

    backend.conn.pipeline = counted
    calls = []
    for name in ("exists", "hget", "hgetall", "hmget"):  # a read before the write: a round trip
        orig = getattr(backend.conn, name)

        def read(*a, _n=name, _o=orig, **k):
            calls.append(_n)
            return _o(*a, **k)

        setattr(backend.conn, name, read)
    try:
        enqueue_submission(backend.conn, sub.id, backend.settings, new=True)
    finally:
        for name in ("pipeline", "exists", "hget", "hgetall", "hmget"):
            backend.conn.__dict__.pop(name, None)
    assert calls == [] and len(sent) == 1 and sent[0][0] == "DEL", (calls, sent)
    fields = backend.conn.hgetall(key)
    assert fields[b"status"] == b"queued" and b"left_by" not in fields
    assert fields.get(b"exc_info") != b"stale"
    assert get_queue("scoring", backend.conn).count >= 1
    burst(backend)
    assert get(backend, sub.id).status == "scored"


def test_a_baseline_entry_is_scored_on_the_scoring_queue_not_by_the_model_workers(backend):
    # the baselines queue holds baseline runs for the GPU machine; any scoring worker scores the
    # files
    from server.jobs.queue import get_queue

    team, user = make_team(backend, baseline=True)
    sub = submit(backend, team, user)
    assert get(backend, sub.id).is_baseline
    assert (
        get_queue("scoring", backend.conn).count == 1
        and get_queue("baselines", backend.conn).count == 0
    )
    burst(backend, ("baselines",))
    assert get(backend, sub.id).status == "queued"
    burst(backend, ("scoring",))
    assert get(backend, sub.id).status == "scored"


@pytest.mark.parametrize("simple", [True, False], ids=["in-process", "forking"])
def test_a_worker_ends_its_command_channel_at_once(embedded_backend, simple):
    """A worker's end (a burst's, a shutdown's) stops its command channel's thread at once: with
    RQ's own order and redis-py 8.2 it waited for RQ's 60 s read timeout first (`build_worker`'s
    classes, server/jobs/worker.py)."""
    import time

    from server.jobs.worker import build_worker

    b = embedded_backend
    w = build_worker(b.settings, ("scoring",), b.conn, simple=simple)
    w.subscribe()
    time.sleep(0.5)  # the thread is reading its channel
    t0 = time.monotonic()
    w.unsubscribe()
    took = time.monotonic() - t0
    assert not w.pubsub_thread.is_alive() and took < 10, took
    t0 = time.monotonic()
    w.work(burst=True)  # an empty queue: subscribes, finds nothing, ends
    assert time.monotonic() - t0 < 10 and not w.pubsub_thread.is_alive()


@pytest.mark.slow
def test_a_real_worker_process_scores_submissions(backend):
    team, user = make_team(backend)
    ids = [
        submit(backend, team, user, "tric-ranking", "dev", noise=n, exempt=True).id
        for n in (0.1, 0.2, 0.3)
    ]
    w = worker_process(backend, "--burst")
    try:
        out, _ = w.communicate(timeout=120)
    finally:
        if w.poll() is None:
            w.kill()
    assert w.returncode == 0, out.decode()[-2000:]
    assert wait_for(lambda: all(get(backend, i).status == "scored" for i in ids), 5), (
        [get(backend, i) for i in ids],
        out.decode()[-3000:],
    )
