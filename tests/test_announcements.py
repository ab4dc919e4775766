"""Announcements, the mail queue's delivery and run notices, against a real SMTP server (aiosmtpd
on a local port): an announcement reaches each approved participant once (two senders at once
send no message twice), an opted-out, pending or banned person gets none, a refused message is
retried later and then sent, mail off leaves the rows queued and the request fast, a run's notice
reaches an opted-in submitter only; organizers of another competition and participants are
refused; the API answers as its OpenAPI description says; the web form and the CLI post the same
announcement."""

from __future__ import annotations

import io
import threading
import time
from datetime import timedelta

import mailkit
import pytest
from apikit import _check, _tric_file
from mailkit import (  # noqa: F401  (smtp: the fixture)
    BASE,
    Mailbox,
    _app,
    _deliver,
    _free_port,
    _h,
    _mail_settings,
    _people,
    _rows,
    _settings,
    smtp,
)
from sqlalchemy import insert, update
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_token

from server.actions import competitions as comp
from server.jobs import outbox
from server.models import AuditLog, OutgoingMail, Registration, User, utcnow
from tasks import get_task

# the fixtures the tests below request, from the helper module that holds them
box, mapp, pg_mapp = mailkit.box, mailkit.mapp, mailkit.pg_mapp


def _post(client, token, slug="shared", **body):
    body = {"title": "Test data released", "body_markdown": "The **test** phase is open.", **body}
    return client.post(f"/api/v1/competitions/{slug}/announcements", headers=_h(token), json=body)


# ----------------------------------------------------------------------------- announcements


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_an_announcement_reaches_each_approved_participant_once(request, kind, box):
    app = request.getfixturevalue("mapp" if kind == "sqlite" else "pg_mapp")
    u = _people(app)
    c = app.test_client()
    spec = c.get("/api/v1/openapi.json").json
    owner = make_token(app, u["admin"])
    r = _post(
        c,
        owner,
        title="Test data released",
        body_markdown="The **test** phase is open.\n\n<script>alert(1)</script>",
    )
    a = _check(spec, r, 201)
    assert a["recipients"] == 3 and a["competition"] == "shared"  # ann, bob, cyd
    assert "<strong>test</strong>" in a["html"] and "<script" not in a["html"]
    rows = _rows(app)
    assert sorted(r.to_addr for r in rows) == [
        "ann@example.org",
        "bob@example.org",
        "cyd@example.org",
    ]
    assert {r.dedup_key for r in rows} == {
        f"announcement:{a['id']}:{u[n].id}" for n in ("ann", "bob", "cyd")
    }
    assert all(r.status == "queued" for r in rows)
    # two senders at once, one row per claim: each row is claimed by one of them only
    results = []

    def sender():
        results.append(_deliver(app, limit=1))

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(x["sent"] for x in results) == 3, results
    got = box.wait(3)
    time.sleep(0.3)  # a duplicate would arrive now
    assert sorted(m["to"][0] for m in box.messages) == [
        "ann@example.org",
        "bob@example.org",
        "cyd@example.org",
    ]
    assert _deliver(app)["sent"] == 0  # nothing is sent twice
    msg = got[0]
    assert msg["subject"] == "[Shared Task] Test data released"
    assert "The **test** phase is open." in msg["body"]
    assert f"{BASE}/competitions/shared" in msg["body"]
    assert "To receive no more announcements" in msg["body"]
    assert all(r.status == "sent" and r.sent_at is not None for r in _rows(app))
    # the list, public as the competition is: anonymous visitors read it
    listed = _check(spec, c.get("/api/v1/competitions/shared/announcements"), 200)
    assert [x["id"] for x in listed["items"]] == [a["id"]]
    with Session(engine_of(app)) as s:
        audit = s.exec(select(AuditLog).where(AuditLog.action == "announcement_create")).one()
        assert audit.actor_id == u["admin"].id and audit.details["recipients"] == 3
        assert audit.competition_id == comp.find(s, "shared").id


def test_refused_by_smtp_is_retried_later_then_sent_and_fails_after_max_attempts(mapp, box):
    u = _people(mapp)
    c = mapp.test_client()
    box.refuse = {"bob@example.org": 1, "cyd@example.org": 99}
    assert _post(c, make_token(mapp, u["admin"])).status_code == 201
    got = _deliver(mapp)
    assert (got["sent"], got["retry"]) == (1, 2), got
    rows = {r.to_addr: r for r in _rows(mapp)}
    bob = rows["bob@example.org"]
    assert bob.status == "queued" and bob.attempts == 1 and "451" in bob.last_error
    assert bob.next_try_at > utcnow() + timedelta(seconds=50)  # later, not now
    assert _deliver(mapp)["claimed"] == 0  # not due yet
    for _ in (2, 3):  # time passes, twice
        with engine_of(mapp).begin() as conn:
            conn.execute(
                update(OutgoingMail)
                .where(OutgoingMail.status == "queued")
                .values(next_try_at=utcnow() - timedelta(seconds=1))
            )
        _deliver(mapp)
    rows = {r.to_addr: r for r in _rows(mapp)}
    assert rows["bob@example.org"].status == "sent" and rows["bob@example.org"].attempts == 1
    cyd = rows["cyd@example.org"]
    assert cyd.status == "failed" and cyd.attempts == 3 and "451" in cyd.last_error
    assert sorted(m["to"][0] for m in box.wait(2)) == ["ann@example.org", "bob@example.org"]


def test_a_row_left_sending_by_a_dead_sender_is_queued_again(mapp, box):
    u = _people(mapp)
    assert _post(mapp.test_client(), make_token(mapp, u["admin"])).status_code == 201
    claimed = outbox.claim(engine_of(mapp), limit=1)  # a sender that dies right after claiming
    assert len(claimed) == 1
    assert _deliver(mapp)["sent"] == 2  # the claimed row is not sent while its lease runs
    with engine_of(mapp).begin() as conn:
        conn.execute(
            update(OutgoingMail)
            .where(OutgoingMail.status == "sending")
            .values(next_try_at=utcnow() - timedelta(seconds=1))
        )
    got = _deliver(mapp)
    assert got["released"] == 1 and got["sent"] == 1
    assert len(box.wait(3)) == 3 and all(r.status == "sent" for r in _rows(mapp))


def test_mail_off_leaves_rows_queued_and_1000_participants_return_fast(app):
    u = _people(app)
    with Session(engine_of(app)) as s:
        shared = comp.find(s, "shared")
        start = s.exec(select(User.id).order_by(User.id.desc())).first() + 1
        s.execute(
            insert(User),
            [
                {"id": start + i, "email": f"p{i}@bulk.example.org", "password_hash": "x"}
                for i in range(1000)
            ],
        )
        s.execute(
            insert(Registration),
            [
                {"competition_id": shared.id, "user_id": start + i, "status": "approved"}
                for i in range(1000)
            ],
        )
        s.commit()
    c = app.test_client()
    token = make_token(app, u["admin"])
    t0 = time.perf_counter()
    r = _post(c, token)
    took = time.perf_counter() - t0
    print(f"announcement to 1,003 participants: {took * 1000:.0f} ms")
    assert r.status_code == 201 and r.json["recipients"] == 1003
    assert took < 1.0, took
    got = _deliver(app)
    assert got["skipped"] == "mail is not configured" and got["sent"] == 0
    rows = _rows(app)
    assert len(rows) == 1003 and {r.status for r in rows} == {"queued"}
    assert {r.attempts for r in rows} == {0}


def test_who_may_announce(mapp):
    u = _people(mapp)
    c = mapp.test_client()
    spec = c.get("/api/v1/openapi.json").json
    r = _check(spec, _post(c, make_token(mapp, u["ann"])), 403)  # a participant
    assert r["error"]["code"] == "not_organizer"
    r = _check(spec, _post(c, make_token(mapp, u["org2"])), 403)  # organizer of another one
    assert r["error"]["code"] == "not_organizer"
    assert _post(c, make_token(mapp, u["org2"]), slug="other").status_code == 201
    r = _check(spec, _post(c, make_token(mapp, u["ann"]), slug="nope"), 404)
    assert r["error"]["code"] == "unknown_competition"
    r = _post(c, make_token(mapp, u["admin"]), title="a\x07b")  # refused before any route
    assert r.status_code == 400 and r.json["error"]["field"] == "title"
    r = _check(spec, _post(c, make_token(mapp, u["admin"]), body_markdown="   "), 422)
    assert "body_markdown" in r["error"]["message"]
    r = _check(
        spec, _post(c, make_token(mapp, u["admin"]), body_markdown="- x\n" + "  " * 40 + "- y"), 422
    )
    assert "body_markdown" in r["error"]["message"]
    assert c.post("/api/v1/competitions/shared/announcements", json={}).status_code == 401
    assert len(_rows(mapp)) == 0  # other has no participants; nothing else was queued


def test_a_draft_and_its_announcements_are_hidden_from_an_outsider(mapp):
    u = _people(mapp, state="draft")
    c = mapp.test_client()
    assert _post(c, make_token(mapp, u["admin"])).status_code == 201
    assert c.get("/api/v1/competitions/shared/announcements").status_code == 404
    r = _post(c, make_token(mapp, u["org2"]))
    assert r.status_code == 404 and r.json["error"]["code"] == "unknown_competition"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_concurrent_claims_never_share_a_row(request, kind):
    app = request.getfixturevalue("app" if kind == "sqlite" else "pg_app")
    with Session(engine_of(app)) as s:
        n = outbox.queue_many(
            s,
            [
                {"to": f"p{i}@x.org", "subject": "s", "body": "b", "dedup_key": f"t:{i}"}
                for i in range(600)
            ],
        )
        s.commit()
        again = outbox.queue_many(
            s, [{"to": "a@x.org", "subject": "s", "body": "b", "dedup_key": "t:5"}]
        )
    assert (n, again) == (600, 0)  # a dedup key is queued once
    claimed: list[list[int]] = []
    go = threading.Barrier(4)

    def claimer():
        mine = []
        go.wait()
        while rows := outbox.claim(engine_of(app), limit=7):
            mine += [r[0] for r in rows]
        claimed.append(mine)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [i for mine in claimed for i in mine]
    assert len(every) == len(set(every)) == 600, [len(m) for m in claimed]
    print(f"{kind}: claims per sender {[len(m) for m in claimed]}")


@pytest.mark.redis
def test_the_reconciler_sweep_enqueues_one_delivery_job_that_a_worker_runs(
    mapp, box, redis_tcp_url, monkeypatch
):
    import redis
    from rq.serializers import JSONSerializer

    from server.jobs.queue import SCORING, get_queue
    from server.jobs.worker import PromptSimpleWorker

    u = _people(mapp)
    assert _post(mapp.test_client(), make_token(mapp, u["admin"])).status_code == 201
    conn = redis.Redis.from_url(redis_tcp_url)
    settings = _settings(mapp)
    assert outbox.sweep(engine_of(mapp), settings, conn) == 3  # three due: a job is asked for
    assert outbox.enqueue_delivery(settings, conn)  # asked again while it waits: nothing added
    q = get_queue(SCORING, conn, settings)
    assert q.job_ids == [outbox.DELIVERY_JOB_ID]
    # the worker reads its settings from the environment, as `palimpsest worker` does
    for k, v in _mail_settings(box.port).items():
        monkeypatch.setenv(f"PALIMPSEST_{k.upper()}", str(v))
    PromptSimpleWorker([q], connection=conn, serializer=JSONSerializer).work(burst=True)
    assert sorted(m["to"][0] for m in box.wait(3)) == [
        "ann@example.org",
        "bob@example.org",
        "cyd@example.org",
    ]
    assert outbox.sweep(engine_of(mapp), settings, conn) == 0  # nothing left to deliver


# ----------------------------------------------------------------------------- preferences


def test_mail_preferences_by_api(mapp, box):
    u = _people(mapp)
    c = mapp.test_client()
    spec = c.get("/api/v1/openapi.json").json
    ann = make_token(mapp, u["ann"])
    got = _check(spec, c.get("/api/v1/competitions/shared/mail", headers=_h(ann)), 200)
    assert got == {"competition": "shared", "announcements": True, "runs": False}
    r = c.put("/api/v1/competitions/shared/mail", headers=_h(ann), json={"announcements": False})
    assert _check(spec, r, 200) == {"competition": "shared", "announcements": False, "runs": False}
    r = c.put("/api/v1/competitions/shared/mail", headers=_h(ann), json={"runs": "maybe"})
    assert _check(spec, r, 422)["error"]["problems"][0]["id"] == "runs"
    # not registered (the competition asks for approval, so no implicit registration)
    with Session(engine_of(mapp)) as s:
        shared = comp.find(s, "shared")
        shared.approval = "manual"
        s.add(shared)
        s.commit()
    r = c.put("/api/v1/competitions/shared/mail", headers=_h(make_token(mapp, u["out"])), json={})
    assert _check(spec, r, 404)["error"]["code"] == "not_registered"
    _post(c, make_token(mapp, u["admin"]))
    assert sorted(r.to_addr for r in _rows(mapp)) == ["bob@example.org", "cyd@example.org"]
    with Session(engine_of(mapp)) as s:
        a = s.exec(select(AuditLog).where(AuditLog.action == "mail_preferences")).one()
        assert a.actor_id == u["ann"].id and a.details["announcements"] == [True, False]


# ----------------------------------------------------------------------------- run notices


def test_a_run_notice_reaches_an_opted_in_submitter_only(mapp, box, web_home):
    from server.jobs.scoring import score_submission

    u = _people(mapp)
    make_phase(mapp, "tric-binary", "test")
    c = mapp.test_client()
    tokens = {}
    for name in ("ann", "bob"):
        tokens[name] = make_token(mapp, u[name])
        r = c.post("/api/v1/team", headers=_h(tokens[name]), json={"name": f"team-{name}"})
        assert r.status_code == 201, r.json
    r = c.put("/api/v1/competitions/shared/mail", headers=_h(tokens["ann"]), json={"runs": True})
    assert r.json["runs"] is True
    ids = {}
    for name in ("ann", "bob"):
        for what, data in (("good", _tric_file(web_home)), ("bad", b'{"nonsense": 1}\n')):
            r = c.post(
                "/api/v1/tasks/tric-binary/submissions",
                headers=_h(tokens[name]),
                data={"file": (io.BytesIO(data), "p.jsonl"), "phase": "test"},
                content_type="multipart/form-data",
            )
            assert r.status_code in (201, 202), r.json
            ids[name, what] = r.json["id"]
    with mapp.app_context():
        for sid in ids.values():
            score_submission(sid)
        score_submission(ids["ann", "good"])  # a job run twice: one notice
    rows = [r for r in _rows(mapp) if r.kind == "run"]
    assert sorted(r.dedup_key for r in rows) == sorted(
        [f"run:{ids['ann', 'good']}:1:scored", f"run:{ids['ann', 'bad']}:1:failed"]
    )
    _deliver(mapp)
    got = {m["subject"]: m for m in box.wait(2)}
    assert set(got) == {
        f"Run {ids['ann', 'good']} scored (tric-binary)",
        f"Run {ids['ann', 'bad']} failed (tric-binary)",
    }
    assert all(m["to"] == ["ann@example.org"] for m in got.values())
    scored = got[f"Run {ids['ann', 'good']} scored (tric-binary)"]["body"]
    metric = get_task("tric-binary").primary[1]
    assert f"Primary score (public, {metric}" in scored and "): 0." in scored, scored
    assert f"{BASE}/submissions/{ids['ann', 'good']}" in scored
    failed = got[f"Run {ids['ann', 'bad']} failed (tric-binary)"]["body"]
    assert "problem" in failed and f"{BASE}/submissions/{ids['ann', 'bad']}" in failed


# ----------------------------------------------------------------------------- web and CLI


def test_web_announce_form_page_and_mail_block(mapp, box):
    u = _people(mapp)
    org = Browser(mapp.test_client())
    org.login("admin@example.org")
    assert org.get("/competitions/shared/announce").status_code == 200
    r = org.post("/competitions/shared/announce", {"title": "", "body_markdown": "x"})
    assert r.status_code == 400 and "give the announcement a title" in r.get_data(as_text=True)
    r = org.post(
        "/competitions/shared/announce",
        {"title": "Kick-off", "body_markdown": "Welcome <script>x()</script> *all*"},
    )
    assert r.status_code == 302
    page = org.get("/competitions/shared").get_data(as_text=True)
    assert "Kick-off" in page and "<em>all</em>" in page and "<script>x()" not in page
    assert "mailed to 3 participant(s)" in page
    # a participant: the page lists it and shows the mail block; unticking turns both off
    p = Browser(mapp.test_client())
    p.login("ann@example.org")
    page = p.get("/competitions/shared").get_data(as_text=True)
    assert "Kick-off" in page and "Save mail preferences" in page
    assert "Post an announcement" not in page
    assert p.post("/competitions/shared/mail", {"runs": "y"}).status_code == 302
    with Session(engine_of(mapp)) as s:
        reg = s.exec(select(Registration).where(Registration.user_id == u["ann"].id)).one()
        assert (reg.mail_announcements, reg.mail_runs) == (False, True)
    assert p.get("/competitions/shared/announce").status_code == 403
    anon = mapp.test_client().get("/competitions/shared").get_data(as_text=True)
    assert "Kick-off" in anon and "Save mail preferences" not in anon


@pytest.fixture
def served(mapp):
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, mapp, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def test_cli_announce(served, mapp, tmp_path):
    import json

    from click.testing import CliRunner

    from cli.main import main

    u = _people(mapp)

    def cli(token, *args):
        env = {
            "PALIMPSEST_SERVER": served,
            "PALIMPSEST_TOKEN": token,
            "XDG_CONFIG_HOME": "/nonexistent",
        }
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    owner = make_token(mapp, u["admin"])
    f = tmp_path / "news.md"
    f.write_text("# News\n\nThe *final* phase opens.\n", encoding="utf-8")
    r = cli(owner, "organizer", "announce", "shared", "--title", "News", "--file", str(f), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # exactly one JSON document
    assert doc["recipients"] == 3 and "<em>final</em>" in doc["html"]
    r = cli(owner, "organizer", "announce", "shared", "--title", "Hi", "--body", "Hello")
    assert r.exit_code == 0 and "mailed to 3 participant(s)" in r.stdout
    r = cli(owner, "organizer", "announce", "shared", "--title", "Hi", "--json")
    assert r.exit_code == 1 and "--body" in json.loads(r.stdout)["error"]["message"]
    r = cli(
        make_token(mapp, u["ann"]),
        "organizer",
        "announce",
        "shared",
        "--title",
        "x",
        "--body",
        "y",
        "--json",
    )
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["status"] == 403
