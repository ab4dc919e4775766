"""The whole path through the web side: a form upload -> stored file -> RQ job -> worker ->
Score rows -> the leaderboard page, on the embedded default and on PostgreSQL + Redis."""

from __future__ import annotations

import io

from backbone import burst, get
from webkit import Browser, make_user

from server.domain import accounts


def test_web_upload_to_leaderboard(backend, monkeypatch):
    from argon2 import PasswordHasher

    from server import create_app
    from server.demo import predictions

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    s = backend.settings
    app = create_app(
        {"home": s.home, "env": "testing", "database_url": s.database_url, "redis_url": s.redis_url}
    )
    app.extensions["palimpsest.redis"] = backend.conn
    make_user(app, "a@x.org", team="Readers")
    b = Browser(app.test_client())
    b.login("a@x.org")
    data, name = predictions("tric-binary", "dev", s.home, 0.0, 1)
    r = b.post(
        "/tasks/tric-binary/submit",
        {
            "phase": "dev",
            "method_name": "oracle",
            "show_publicly": "on",
            "file": (io.BytesIO(data), name),
        },
        content_type="multipart/form-data",
    )
    assert r.status_code == 302, r.get_data(as_text=True)[:1000]
    sid = int(r.headers["Location"].rsplit("/", 1)[1])
    assert get(backend, sid).status == "queued"
    assert b"queued" in b.get(f"/submissions/{sid}").data
    burst(backend)
    assert get(backend, sid).status == "scored"
    assert b"scored" in b.get(f"/submissions/{sid}").data
    rows = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [(x["team"], x["method_name"], x["rank"]) for x in rows] == [("Readers", "oracle", 1)]
    assert rows[0]["metrics"]["all/f1"] == 1.0
    # an organizer rescores it through the queue: a second attempt, the board keeps its row
    # meanwhile
    make_user(app, "o@x.org", organizer=True)
    o = Browser(app.test_client())
    o.login("o@x.org")
    o.post(f"/organizer/submissions/{sid}/rescore")
    assert get(backend, sid).status == "queued"
    assert (
        len(
            app.test_client()
            .get("/tasks/tric-binary/leaderboard.json?phase=dev")
            .get_json()["rows"]
        )
        == 1
    )
    burst(backend)
    sub = get(backend, sid)
    assert (sub.status, sub.score_attempt) == ("scored", 2)
    queue_page = o.get("/organizer/queue").get_data(as_text=True)
    assert "scoring" in queue_page and "not reachable" not in queue_page
