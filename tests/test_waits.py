"""A waiting run's place in the queue and its estimate (server.jobs.waits) on the submission page,
the
API and the CLI's `status`; the status page (depths and workers for everyone, details for
administrators)."""

from __future__ import annotations

import os
import re
from datetime import timedelta

import redis
from sqlmodel import Session
from webkit import Browser, engine_of, make_phase, make_token, make_user, team_of

from cli.participant.runs import queue_line
from server.jobs import waits
from server.models import Submission, utcnow

TASK = "tric-binary"


def _runs(app, team_id, phase_id, now, *, scored, queued, running):
    """`scored`: durations (s) of finished runs; `queued`: how many wait; `running`: seconds
    since each running one started. The ids of the queued ones, in order."""
    ids = []
    with Session(engine_of(app)) as s:
        for i, d in enumerate(scored):
            start = now - timedelta(hours=1, seconds=100 * i)
            s.add(
                Submission(
                    team_id=team_id,
                    task_id=TASK,
                    phase_id=phase_id,
                    status="scored",
                    file_sha256=f"s{i}",
                    started_at=start,
                    finished_at=start + timedelta(seconds=d),
                )
            )
        for i, ago in enumerate(running):
            s.add(
                Submission(
                    team_id=team_id,
                    task_id=TASK,
                    phase_id=phase_id,
                    status="running",
                    file_sha256=f"r{i}",
                    started_at=now - timedelta(seconds=ago),
                )
            )
        s.commit()
        for i in range(queued):
            sub = Submission(team_id=team_id, task_id=TASK, phase_id=phase_id, file_sha256=f"q{i}")
            s.add(sub)
            s.commit()
            ids.append(sub.id)
    return ids


def _naive(ahead: list[float], running_left: list[float], mine: float, workers: int) -> float:
    """First come, first served, second by second: when this run is scored."""
    busy = sorted(running_left) + [0.0] * (workers - len(running_left))
    t, queue = 0.0, list(ahead)
    while True:
        free = [i for i, b in enumerate(busy) if b <= t + 1e-9]
        while free and queue:
            busy[free.pop(0)] = t + queue.pop(0)
        if free and not queue:
            return t + mine
        t = min(b for b in busy if b > t + 1e-9)


def test_the_estimate_is_first_come_first_served_on_the_workers(app):
    user = make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "test")
    now = utcnow()
    ids = _runs(
        app,
        team_of(app, "Readers").id,
        phase.id,
        now,
        scored=[8, 12, 10, 30, 9],  # median 10
        queued=6,
        running=[4, 25],  # 6 s left, and one past its median (0 left)
    )
    with Session(engine_of(app)) as s:
        assert waits.durations(s) == {TASK: 10.0, "*": 10.0}
        for workers in (1, 2, 3):
            for k, sid in enumerate(ids):
                q = waits.standing(s, s.get(Submission, sid), workers, now=now)
                assert q["position"] == k + 1 and q["queued"] == 6 and q["running"] == 2
                expect = _naive([10.0] * k, [6.0, 0.0], 10.0, max(workers, 2))  # 2 at work
                assert abs(q["estimated_wait_s"] - expect) < 0.11, (workers, k)
        # nothing to wait for once scored
        done = s.exec(Submission.__table__.select().where(Submission.status == "scored")).first()
        assert waits.standing(s, s.get(Submission, done.id), 2) is None
    assert user.id


def test_no_estimate_before_any_run_is_scored(app):
    make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "test")
    (sid,) = _runs(
        app, team_of(app, "Readers").id, phase.id, utcnow(), scored=[], queued=1, running=[]
    )
    with Session(engine_of(app)) as s:
        q = waits.standing(s, s.get(Submission, sid), None)
    assert (
        q["position"] == 1 and q["estimated_wait_s"] is None and q["basis"] == "no run scored yet"
    )
    assert "no estimate yet" in queue_line(q) and "workers unknown" in queue_line(q)


def test_page_api_and_cli_show_the_same_standing(app):
    user = make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "test")
    ids = _runs(
        app,
        team_of(app, "Readers").id,
        phase.id,
        utcnow(),
        scored=[20, 20, 20],
        queued=3,
        running=[],
    )
    c = app.test_client()
    r = c.get(
        f"/api/v1/submissions/{ids[2]}",
        headers={"Authorization": f"Bearer {make_token(app, user)}"},
    )
    q = r.get_json()["queue"]
    assert (q["position"], q["queued"], q["workers"]) == (3, 3, None)
    assert q["estimated_wait_s"] == 60.0  # two ahead of it and itself, on one worker at most
    assert queue_line(q).startswith("position 3 of 3 in the queue; scored in about 60 s")
    b = Browser(c)
    b.login("ann@x.org")
    page = b.get(f"/submissions/{ids[2]}").get_data(as_text=True)
    assert "Position 3 of 3 in the scoring queue; scored in about 60 s" in page
    assert "/status" in page


def test_status_page_summary_for_all_details_for_administrators(app, redis_tcp_url):
    from server.jobs.worker import build_worker

    conn = redis.Redis.from_url(redis_tcp_url)
    app.extensions["palimpsest.redis"] = conn
    settings = app.extensions["palimpsest.settings"]
    w = build_worker(settings, ("scoring",), conn, simple=True, name="scorer-one")
    w.register_birth()
    try:
        make_user(app, "root@x.org", organizer=True)
        make_user(app, "ann@x.org", team="Readers")
        phase = make_phase(app, TASK, "test")
        _runs(app, team_of(app, "Readers").id, phase.id, utcnow(), scored=[5], queued=4, running=[])
        c = app.test_client()
        page = c.get("/status").get_data(as_text=True)
        assert re.search(r"<td>scoring</td><td class=\"num\">4</td>", page)
        assert "Scoring workers alive: <strong>1</strong>" in page and "scorer-one" not in page
        b = Browser(c)
        b.login("root@x.org")
        page = b.get("/status").get_data(as_text=True)
        assert "scorer-one" in page and "<h2>Workers</h2>" in page
    finally:
        w.register_death()
        app.extensions.pop("palimpsest.redis", None)
    # without Redis: said plainly, the database's depth still shown
    page = app.test_client().get("/status").get_data(as_text=True)
    assert "cannot be read" in page and "not known" in page


def test_a_waiting_runs_status_reads_the_workers_once_in_a_while_not_per_request(
    app, redis_tcp_url
):
    # a team polling its run (the API, the CLI's status, the page): the workers alive (several
    # round trips to Redis each) are read at most every RECENT_INPUTS_S per process, as for the
    # upload's answer; the place in the queue is read each time
    from server.jobs.worker import build_worker

    conn = redis.Redis.from_url(redis_tcp_url)
    app.extensions["palimpsest.redis"] = conn
    settings = app.extensions["palimpsest.settings"]
    alive = [
        build_worker(settings, ("scoring",), conn, simple=True, name=f"scorer-{i}")
        for i in range(4)
    ]
    for w in alive:
        w.register_birth()
    sent = []
    real = conn.execute_command

    def counted(*args, **kw):
        sent.append(" ".join(str(a) for a in args))
        return real(*args, **kw)

    try:
        user = make_user(app, "ann@x.org", team="Readers")
        phase = make_phase(app, TASK, "test")
        ids = _runs(
            app,
            team_of(app, "Readers").id,
            phase.id,
            utcnow(),
            scored=[20] * 3,
            queued=3,
            running=[],
        )
        c = app.test_client()
        auth = {"Authorization": f"Bearer {make_token(app, user)}"}
        waits._inputs.clear()
        conn.execute_command = counted
        seen, reads = [], []
        for _ in range(3):
            sent.clear()
            q = c.get(f"/api/v1/submissions/{ids[2]}", headers=auth).get_json()["queue"]
            seen.append((q["position"], q["workers"], q["estimated_wait_s"]))
            reads.append(len([x for x in sent if "worker" in x]))
        assert seen == [(3, 4, 20.0)] * 3, seen
        # the first request read the four workers (several commands each); the next, none
        assert reads[0] >= 4 and reads[1:] == [0, 0], reads
    finally:
        conn.__dict__.pop("execute_command", None)
        for w in alive:
            w.register_death()
        app.extensions.pop("palimpsest.redis", None)


def test_a_page_that_read_the_run_keeps_it_as_read_and_only_the_upload_answer_rechecks(app):
    # the run's page reads the run and its scores, then its standing: a worker that scored it in
    # between must not turn the page's run to "scored" without its scores (it shows the state it
    # read; its next poll swaps in the scored page); the upload's answer, which never read the
    # run again, is rechecked against the queue
    make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "test")
    (rid,) = _runs(
        app, team_of(app, "Readers").id, phase.id, utcnow(), scored=[20], queued=1, running=[]
    )
    with Session(engine_of(app), expire_on_commit=False) as s:
        sub = s.get(Submission, rid)
        s.commit()  # (what the page read; its transaction over)
        with Session(engine_of(app)) as worker:
            worker.get(Submission, rid).status = "scored"
            worker.commit()
        waits._inputs.clear()
        waits.live_standing(s, sub, None, recent=True)
        assert sub.status == "queued"
        waits.live_standing(s, sub, None, recent=True, recheck=True)
        assert sub.status == "scored"


def test_the_pace_counts_what_else_the_workers_did_while_the_queue_was_backed_up(app):
    """Ten runs uploaded at once, each scored in 1 s, but finishing one every 1.5 s on 2 workers:
    each held its worker 3 s, so estimates run 3 times the scoring time."""
    make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "test")
    t0 = utcnow() - timedelta(hours=1)
    with Session(engine_of(app)) as s:
        for i in range(10):
            finished = t0 + timedelta(seconds=3 + 1.5 * i)
            s.add(
                Submission(
                    team_id=team_of(app, "Readers").id,
                    task_id=TASK,
                    phase_id=phase.id,
                    status="scored",
                    file_sha256=f"p{i}",
                    created_at=t0,
                    started_at=finished - timedelta(seconds=1),
                    finished_at=finished,
                )
            )
        s.commit()
        # 9 gaps, each with a run waiting when it began
        assert abs(waits.pace(s, 2) - 3.0) < 1e-9
        assert waits.pace(s, 1) == 1.5
        (sid,) = _runs(
            app, team_of(app, "Readers").id, phase.id, utcnow(), scored=[], queued=1, running=[]
        )
        q = waits.standing(s, s.get(Submission, sid), 2)
        assert q["estimated_wait_s"] == 3.0 and "times 3.00" in q["basis"]
        # the upload's answer: the same estimate from the inputs read once and kept a few seconds
        waits._inputs.clear()
        sub = s.get(Submission, sid)
        assert waits.live_standing(s, sub, recent=True) == waits.live_standing(s, sub)
        assert waits.standing(s, sub, 2, known=waits.durations(s), ratio=waits.pace_ratio(s)) == q


def test_the_upload_answer_shows_the_runs_place_as_its_page_does(app):
    """The API's answer to an upload (its estimate's inputs kept a few seconds) and the run's own
    GET agree on its place in the queue and its estimate."""
    import io

    from server.demo import predictions

    user = make_user(app, "ann@x.org", team="Readers")
    make_user(app, "bob@x.org", team="Writers")  # the runs ahead: another team's
    phase = make_phase(app, TASK, "dev")
    _runs(
        app, team_of(app, "Writers").id, phase.id, utcnow(), scored=[20, 20], queued=2, running=[]
    )

    data, name = predictions(TASK, "dev", os.environ["PALIMPSEST_HOME"], 0.2, seed=1)
    h = {"Authorization": f"Bearer {make_token(app, user)}"}
    waits._inputs.clear()
    r = app.test_client().post(
        f"/api/v1/tasks/{TASK}/submissions",
        headers=h,
        data={"file": (io.BytesIO(data), name), "phase": "dev"},
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.get_json()
    got = r.get_json()
    again = app.test_client().get(f"/api/v1/submissions/{got['id']}", headers=h).get_json()
    assert got["queue"]["position"] == 3 and got["queue"]["estimated_wait_s"] == 60.0
    assert got["queue"] == again["queue"]
    assert {k: v for k, v in got.items() if k not in ("duplicate",)} == {
        k: v for k, v in again.items() if k not in ("duplicate",)
    }


def test_the_upload_answer_shows_a_run_a_worker_took_before_the_answer_as_running(app):
    """The answer to an upload shows the run as its transaction committed it, without reading it
    again, unless the queue (read for its place) has it in another state: a worker that took it
    between the commit and the answer makes it `running`, position 0, as its GET says."""
    import io

    from sqlalchemy import event, update
    from sqlalchemy.orm import Session as OrmSession

    from server.demo import predictions

    user = make_user(app, "ann@x.org", team="Readers")
    phase = make_phase(app, TASK, "dev")
    team_id = team_of(app, "Readers").id
    eng = engine_of(app)

    def a_worker_takes_it(session):
        if any(isinstance(o, Submission) for o in session.identity_map.values()):
            with eng.begin() as c:
                c.execute(
                    update(Submission)
                    .where(Submission.team_id == team_id, Submission.status == "queued")
                    .values(status="running", started_at=utcnow())
                )

    data, name = predictions(TASK, "dev", os.environ["PALIMPSEST_HOME"], 0.2, seed=1)
    h = {"Authorization": f"Bearer {make_token(app, user)}"}
    waits._inputs.clear()
    event.listen(OrmSession, "after_commit", a_worker_takes_it)
    try:
        r = app.test_client().post(
            f"/api/v1/tasks/{TASK}/submissions",
            headers=h,
            data={"file": (io.BytesIO(data), name), "phase": phase.name},
            content_type="multipart/form-data",
        )
    finally:
        event.remove(OrmSession, "after_commit", a_worker_takes_it)
    assert r.status_code == 201, r.get_json()
    got = r.get_json()
    assert got["status"] == "running" and got["started"] is not None
    assert got["queue"]["position"] == 0
    again = app.test_client().get(f"/api/v1/submissions/{got['id']}", headers=h).get_json()
    assert {k: v for k, v in got.items() if k not in ("duplicate", "queue")} == {
        k: v for k, v in again.items() if k not in ("duplicate", "queue")
    }


def test_a_code_worker_says_first_which_limits_its_runs_get_and_status_shows_them(
    app, redis_tcp_url, caplog, monkeypatch
):
    """The worker's first log line is the limits its blind runs get on this host (the sandbox's
    own account of it: cgroup version and controllers, or why none; the syscall filter), said
    before anything else can fail; it writes it beside its name in Redis, and /status lists the
    limits to everyone while the worker lives, the host's detail (mount points) to administrators
    alone."""
    import logging

    from server.jobs import sandbox, worker

    # the worker's warm-ups (tasks, store, statements, the statistics' sweep) are not this test's
    for name in ("warm_caches", "warm_store", "warm_statements"):
        monkeypatch.setattr(worker, name, lambda *a, **k: None)
    monkeypatch.setattr(worker.scorer.sweep, "warm", lambda: None)
    settings = app.extensions["palimpsest.settings"]
    said = sandbox.describe(settings)
    assert said.startswith("blind runs: ")
    assert f"at most {settings.run_memory_mb} MB of memory" in said
    if not sandbox.available():
        assert ("a cgroup per run: " in said) != ("no cgroup per run (" in said), said
    conn = redis.Redis.from_url(redis_tcp_url)
    settings = settings.model_copy(update={"redis_url": redis_tcp_url})
    caplog.set_level(logging.WARNING)
    assert worker.run(settings, ("runs",), burst=True) == 0
    assert caplog.records[0].getMessage() == f"worker: {said}"
    public = sandbox.describe(settings, host=False)  # the limits without the host's mount points
    assert public.startswith("blind runs: ") and " at /" not in public
    assert "no cgroup per run (" not in public
    keys = conn.keys(worker.LIMITS_KEY + "*")
    assert len(keys) == 1 and conn.get(keys[0]).decode() == public
    name = keys[0].decode()[len(worker.LIMITS_KEY) :]
    assert conn.get(worker.HOST_LIMITS_KEY + name).decode() == said
    # the same worker alive (its birth registered again under its name): /status says its limits
    app.extensions["palimpsest.redis"] = conn
    w = worker.build_worker(settings, ("runs",), conn, simple=True, name=name)
    w.register_birth()
    try:
        from markupsafe import escape
        from webkit import Browser, make_user

        page = app.test_client().get("/status").get_data(as_text=True)
        assert "Systems run blind by these workers get:" in page
        assert f"<li>{escape(public)}</li>" in page
        assert "/sys/fs/cgroup" not in page and "status-host-limits" not in page
        make_user(app, "root@x.org", organizer=True)  # an administrator sees the host's detail
        admin = Browser(app.test_client())
        admin.login("root@x.org")
        page = admin.get("/status").get_data(as_text=True)
        assert f'<td class="status-host-limits">{escape(said)}</td>' in page
    finally:
        w.register_death()
        app.extensions.pop("palimpsest.redis", None)
    # a scoring worker says nothing of runs
    caplog.clear()
    assert worker.run(settings, ("scoring",), burst=True) == 0
    assert not any("blind runs" in r.getMessage() for r in caplog.records)


def test_runs_ahead_go_to_the_worker_free_first_as_a_heap_would_send_them():
    import heapq
    import random

    rng = random.Random(7)
    for _ in range(500):
        free = [rng.choice([0.0, 6.0, 10.0, rng.random() * 30]) for _ in range(rng.randint(1, 5))]
        count, seconds = rng.randint(0, 30), rng.choice([10.0, 0.5, 3.3, rng.random() * 5 + 0.01])
        heap = list(free)
        heapq.heapify(heap)
        for _ in range(count):
            heapq.heappush(heap, heapq.heappop(heap) + seconds)
        got = sorted(waits.after_runs(free, count, seconds))
        assert all(abs(a - b) < 1e-6 for a, b in zip(got, sorted(heap), strict=True)), free
