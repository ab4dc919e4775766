"""Organizer controls: phases, leaderboard state, hiding, publication, exports, rescoring, the
queue; every action in the audit log and nothing deleted."""

from __future__ import annotations

import json

import organizer_world
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_submission, team_of

from server.models import AuditLog, Phase, Submission

# the fixtures the tests below request, from the helper module that holds them
org, world = organizer_world.org, organizer_world.world


def actions(app):
    """The audit log's organizer and team actions (not the workers' status bookkeeping)."""
    with Session(engine_of(app)) as s:
        return [
            (x.action, x.target)
            for x in s.exec(
                select(AuditLog).where(AuditLog.action != "submission.status").order_by(AuditLog.id)
            ).all()
        ]


def test_only_organizers_reach_the_organizer_pages(app, world, browser):
    urls = [
        "/organizer/",
        "/organizer/queue",
        "/organizer/audit",
        "/organizer/submissions",
        f"/organizer/phases/{world['test'].id}",
        f"/organizer/phases/{world['test'].id}/ranking",
        f"/organizer/phases/{world['test'].id}/export.csv",
    ]
    for u in urls:
        assert browser.get(u).status_code == 302  # nobody: to the login page
    browser.login("a@x.org")
    for u in urls:
        assert browser.get(u).status_code == 403
    posts = [
        f"/organizer/phases/{world['test'].id}/actions/publish",
        f"/organizer/phases/{world['test'].id}/actions/hide-board",
        f"/organizer/submissions/{world['b_dev'].id}/hide",
        f"/organizer/submissions/{world['b_dev'].id}/rescore",
        "/organizer/tasks/tric-binary/rescore",
        "/organizer/tasks/tric-binary/phases",
        f"/organizer/phases/{world['test'].id}",
    ]
    for u in posts:
        assert browser.post(u, {"action": "publish"}).status_code == 403
    with Session(engine_of(app)) as s:
        assert s.get(Phase, world["test"].id).published_at is None


def test_dashboard_and_pages_render(app, world, org):
    for u in [
        "/organizer/",
        "/organizer/audit",
        "/organizer/submissions?task=tric-binary&status=scored",
        f"/organizer/phases/{world['test'].id}",
    ]:
        assert org.get(u).status_code == 200, u


def test_edit_phase_and_limits(app, world, org):
    pid = world["dev"].id
    r = org.post(
        f"/organizer/phases/{pid}",
        {
            "opens_at": "2030-01-01 00:00",
            "closes_at": "2030-02-01T12:00",
            "daily_limit": "3",
            "total_limit": "",
            "concurrent_limit": "1",
            "public_fraction": "1",
        },
    )
    assert r.status_code == 302
    with Session(engine_of(app)) as s:
        p = s.get(Phase, pid)
        assert (p.daily_limit, p.total_limit, p.concurrent_limit) == (3, None, 1)
        assert p.opens_at.year == 2030 and p.closes_at.hour == 12
    assert (
        org.post(
            f"/organizer/phases/{pid}",
            {"opens_at": "2030-02-01", "closes_at": "2030-01-01", "public_fraction": "1"},
        ).status_code
        == 400
    )
    assert (
        org.post(
            f"/organizer/phases/{pid}", {"daily_limit": "-1", "public_fraction": "1"}
        ).status_code
        == 400
    )
    # the public fraction is fixed once scored
    r = org.post(f"/organizer/phases/{world['test'].id}", {"public_fraction": "0.3"})
    assert r.status_code == 400 and b"cannot change" in r.data
    # a new phase
    assert (
        org.post(
            "/organizer/tasks/tric-binary/phases", {"name": "post-eval", "split": "test"}
        ).status_code
        == 302
    )
    assert ("phase.edit", f"phase:{pid}") in actions(app)
    assert any(a == "phase.create" for a, _ in actions(app))


def test_open_close_freeze(app, world, org, client):
    pid = world["dev"].id
    org.post(f"/organizer/phases/{pid}/actions/hide-board")
    assert client.get("/tasks/tric-binary/leaderboard.json?phase=dev").status_code == 404
    assert (
        org.get("/tasks/tric-binary/leaderboard.json?phase=dev").status_code == 200
    )  # organizers still see it
    org.post(f"/organizer/phases/{pid}/actions/show-board")
    assert client.get("/tasks/tric-binary/leaderboard.json?phase=dev").status_code == 200
    org.post(f"/organizer/phases/{pid}/actions/freeze")
    make_submission(app, team=team_of(app, "beta"), phase=world["dev"], scores={"all": 0.99})
    rows = client.get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [r["team"] for r in rows] == ["alpha", "beta"] and rows[1]["metrics"]["all/f1"] == 0.6
    org.post(f"/organizer/phases/{pid}/actions/unfreeze")
    rows = client.get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert rows[0]["team"] == "beta"
    assert [a for a, _ in actions(app)] == [
        "leaderboard.close",
        "leaderboard.open",
        "leaderboard.freeze",
        "leaderboard.unfreeze",
    ]


def test_hide_with_reason_shown_to_the_team(app, world, org, client):
    sid = world["a_dev"].id
    assert (
        b"Say why"
        in org.post(
            f"/organizer/submissions/{sid}/hide",
            {"action": "hide", "confirm": "yes"},
            follow_redirects=True,
        ).data
    )
    org.post(
        f"/organizer/submissions/{sid}/hide",
        {"action": "hide", "reason": "Used the <b>test</b> labels", "confirm": "yes"},
    )
    rows = client.get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [r["team"] for r in rows] == ["beta"]
    team = Browser(app.test_client())
    team.login("a@x.org")
    page = team.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "Used the &lt;b&gt;test&lt;/b&gt; labels" in page
    org.post(f"/organizer/submissions/{sid}/hide", {"action": "unhide"})
    rows = client.get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [r["team"] for r in rows] == ["alpha", "beta"]
    org.post(
        f"/organizer/submissions/{sid}/hide",
        {"action": "remove", "reason": "withdrawn", "confirm": "yes"},
    )
    with Session(engine_of(app)) as s:
        sub = s.get(Submission, sid)
        assert sub is not None and sub.removed_at is not None  # soft: the row stays
    assert [a for a, _ in actions(app)] == [
        "submission.hide",
        "submission.unhide",
        "submission.remove",
    ]


def test_publish_reveals_private_ranking_and_exports(app, world, org, client):
    pid = world["test"].id
    before = client.get("/tasks/tric-binary/leaderboard.json?phase=test").get_data(as_text=True)
    assert "0.3456" not in before and "0.8765" not in before
    # organizers may preview and export before publication
    prev = org.get(f"/organizer/phases/{pid}/ranking").get_data(as_text=True)
    assert "0.8765" in prev and "preview" in prev
    # an open phase is not published; "close and publish" asks for a confirmation first
    confirmation = f"/organizer/phases/{pid}/publish?action=publish"
    r = org.post(
        f"/organizer/phases/{pid}/actions/publish", {"next": confirmation}, follow_redirects=True
    )
    assert "only a closed phase can be published" in r.get_data(as_text=True).lower()
    r = org.get(f"/organizer/phases/{pid}/publish?action=close_and_publish")
    page = r.get_data(as_text=True)
    assert r.status_code == 200 and "I have checked this ranking" in page
    # the confirmation posts to the phase action by its declared name, with the declared option
    assert f'action="/organizer/phases/{pid}/actions/publish"' in page
    assert 'name="close" value="yes"' in page
    with Session(engine_of(app)) as s:
        assert s.get(Phase, pid).published_at is None
    org.post(f"/organizer/phases/{pid}/actions/publish", {"close": "yes"})
    data = client.get("/tasks/tric-binary/leaderboard.json?phase=test").get_json()
    assert data["published"], data
    assert [(r["team"], r["rank"], r["public_rank"]) for r in data["rows"]] == [
        ("beta", 1, 2),
        ("alpha", 2, 1),
    ]
    csv_ = org.get(f"/organizer/phases/{pid}/export.csv")
    assert csv_.mimetype == "text/csv" and "attachment" in csv_.headers["Content-Disposition"]
    assert csv_.get_data(as_text=True).splitlines()[1].split(",")[2] == "beta"
    js = json.loads(org.get(f"/organizer/phases/{pid}/export.json").data)
    assert js["ranked_on"] == "private" and js["rows"][0]["metrics"]["all/f1"] == 0.8765
    tex = org.get(f"/organizer/phases/{pid}/export.tex").get_data(as_text=True)
    assert r"\begin{table}" in tex and r"\textbf{0.8765}" in tex and "beta" in tex
    assert org.get(f"/organizer/phases/{pid}/export.exe").status_code == 404
    acts = [a for a, _ in actions(app)]
    # the statistics' seed and the partition are drawn at publication here: these runs were scored
    # without the queue (the bootstrap seed is the phase's own, never the partition's)
    assert acts == [
        "stats.seed",
        "partition.draw",
        "phase.close",
        "ranking.publish",
        "ranking.export",
        "ranking.export",
        "ranking.export",
    ]
    # the exports are the published snapshot, byte for byte
    body = org.get(f"/organizer/phases/{pid}/export.json").data
    assert body == client.get("/tasks/tric-binary/leaderboard.json?phase=test").data


class FakeRedisDown(Exception):
    pass


def test_rescore_one_and_all_requeue_and_log(app, world, org, monkeypatch):
    import server.jobs.queue as q  # where the session's queues (server.jobs.dispatch) enqueue

    app.config["PALIMPSEST_ENQUEUE"] = True
    calls = []
    monkeypatch.setattr(q, "connect", lambda settings, **kw: "conn")
    monkeypatch.setattr(
        q, "enqueue_submission", lambda conn, sid, settings, **kw: calls.append(sid)
    )
    sid = world["a_dev"].id
    org.post(f"/organizer/submissions/{sid}/rescore")
    with Session(engine_of(app)) as s:
        assert s.get(Submission, sid).status == "queued"
    assert calls == [sid]
    org.post("/organizer/tasks/tric-binary/rescore", {"phase": "test", "confirm": "yes"})
    assert sorted(calls[1:]) == sorted([world["a_test"].id, world["b_test"].id])
    assert [a for a, _ in actions(app)] == [
        "submission.rescore",
        "task.rescore",
        "submission.rescore",
        "submission.rescore",
    ]


def test_rescore_with_redis_down_leaves_it_queued(app, world, org, monkeypatch):
    import server.jobs.queue as q  # where the session's queues (server.jobs.dispatch) enqueue

    def down(*a, **k):
        raise FakeRedisDown("connection refused")

    app.config["PALIMPSEST_ENQUEUE"] = True
    monkeypatch.setattr(q, "connect", down)
    sid = world["b_dev"].id
    assert org.post(f"/organizer/submissions/{sid}/rescore").status_code == 302
    with Session(engine_of(app)) as s:
        assert s.get(Submission, sid).status == "queued"  # the reconciler enqueues it later


def test_queue_page_without_redis_shows_the_database(app, world, org, monkeypatch):
    import server.web.organizer as q  # where the queue page calls the queue

    monkeypatch.setattr(q, "connect", lambda *a, **k: (_ for _ in ()).throw(FakeRedisDown("down")))
    make_submission(
        app,
        team=team_of(app, "alpha"),
        phase=world["dev"],
        status="failed",
        failure_kind="infra",
        errors=[{"message": "worker died"}],
    )
    page = org.get("/organizer/queue").get_data(as_text=True)
    assert (
        "not reachable" in page
        and "worker died" in page
        and "Waiting" in page
        and "Running" in page
    )


def test_rescore_opens_a_new_round_of_attempts(app, world, org):
    """A submission that used every attempt can still be rescored (after a gold fix, say): the
    rescore opens a new round and attempt numbers keep growing, so old Score rows stay apart."""
    from server.jobs.scoring import start_attempt

    sub = make_submission(
        app, team=team_of(app, "alpha"), phase=world["dev"], scores={"all": 0.4}, method="x"
    )
    max_attempts = app.extensions["palimpsest.settings"].max_attempts
    with Session(engine_of(app)) as s:
        row = s.get(Submission, sub.id)
        row.attempts = max_attempts
        s.add(row)
        s.commit()
    r = org.post(f"/organizer/submissions/{sub.id}/rescore", follow_redirects=True)
    assert b"queued for rescoring" in r.data
    with Session(engine_of(app)) as s:
        row = s.get(Submission, sub.id)
        assert row.status == "queued" and row.attempt_ceiling == 2 * max_attempts
    assert start_attempt(engine_of(app), sub.id, max_attempts) == max_attempts + 1


def test_export_of_a_closed_board(app, world, org):
    org.post(f"/organizer/phases/{world['test'].id}/actions/hide-board")
    js = json.loads(org.get(f"/organizer/phases/{world['test'].id}/export.json").data)
    assert [r["team"] for r in js["rows"]] == ["beta", "alpha"]


def test_removed_runs_stay_listed_for_their_team(app, world, org):
    sid = world["a_dev"].id
    org.post(
        f"/organizer/submissions/{sid}/hide",
        {"action": "remove", "reason": "duplicate of #3", "confirm": "yes"},
    )
    team = Browser(app.test_client())
    team.login("a@x.org")
    page = team.get("/submissions").get_data(as_text=True)
    assert f">{sid}<" in page and "removed" in page
    assert "duplicate of #3" in team.get(f"/submissions/{sid}").get_data(as_text=True)


def test_queue_page_never_starts_the_embedded_redis(app, world, org):
    home = app.extensions["palimpsest.settings"].home
    page = org.get("/organizer/queue").get_data(as_text=True)
    assert "not reachable" in page
    assert not (home / "redis").exists() or not list((home / "redis").glob("*.sock"))
