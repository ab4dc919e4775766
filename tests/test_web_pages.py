"""Task pages, downloads, the submit form and the submission pages, through the real backbone."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_user

from server.models import Submission
from tasks import all_tasks, get_task
from tasks.store import TaskStore


def tric_rows(app, split="test", label=lambda i: i % 2):
    """Valid TRiC-binary predictions for every instance of the imported inputs."""
    store = TaskStore("tric-binary", app.extensions["palimpsest.settings"].home)
    ids = []
    for p in store.public_files(split):
        if p.suffix == ".jsonl":
            for line in p.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    if "instanceID" in rec and rec["instanceID"] not in ids:
                        ids.append(rec["instanceID"])
    assert ids
    return "".join(
        json.dumps({"instanceID": x, "label": label(i)}) + "\n" for i, x in enumerate(ids)
    ).encode()


def submit(b: Browser, data: bytes, *, phase="dev", method="my method", name="pred.jsonl", **extra):
    form = {
        "phase": phase,
        "method_name": method,
        "description": "d",
        "url": "",
        "show_publicly": "on",
        "file": (io.BytesIO(data), name),
        **extra,
    }
    return b.post("/tasks/tric-binary/submit", form, content_type="multipart/form-data")


def run_jobs(app):
    """Score every queued submission in-process, as a worker would."""
    from server.jobs.scoring import score_submission

    with Session(engine_of(app)) as s:
        ids = [x.id for x in s.exec(select(Submission).where(Submission.status == "queued")).all()]
    for i in ids:
        score_submission(i)


@pytest.mark.parametrize("task", [t.id for t in all_tasks()])
def test_every_task_page(app, client, task):
    t = get_task(task)
    page = client.get(f"/tasks/{task}").get_data(as_text=True)
    assert t.title.split(":")[0] in page
    for f in t.format.fields:
        assert f.name in page
    assert t.citation.splitlines()[0].replace("{", "") in page.replace("{", "")
    assert "dev" in page or "test" in page  # its phases
    assert "import" not in page or t.import_help not in page  # data is imported here
    assert task in client.get("/").get_data(as_text=True)


def test_task_without_data_says_how_to_import(app, tmp_path, monkeypatch):
    from server import create_app

    empty = tmp_path / "empty"
    from conftest import build_schema

    monkeypatch.setenv("PALIMPSEST_HOME", str(empty))
    build_schema(empty)
    app2 = create_app(
        {"home": empty, "env": "testing", "database_url": None, "PALIMPSEST_ENQUEUE": False}
    )
    page = app2.test_client().get("/tasks/trac").get_data(as_text=True)
    assert "No data has been imported" in page and get_task("trac").import_help in page
    assert app2.test_client().get("/tasks/trac/data/test.zip").status_code == 404


def test_download_is_public_files_only(app, client):
    home = app.extensions["palimpsest.settings"].home
    store = TaskStore("tric-binary", home)
    r = client.get("/tasks/tric-binary/data/test.zip")
    assert r.status_code == 200 and r.mimetype == "application/zip"
    z = zipfile.ZipFile(io.BytesIO(r.data))
    names = z.namelist()
    assert len(names) == len(store.public_files("test"))
    gold = b"".join(p.read_bytes() for p in (store.root / "gold").rglob("*") if p.is_file())
    assert all(not n.startswith("gold") and "gold" not in n.split("/")[1:2] for n in names)
    for n in names:
        assert z.read(n) != gold
    assert client.get("/tasks/tric-binary/data/gold.zip").status_code == 404
    assert client.get("/tasks/tric-binary/data/..%2Fgold%2Ftest.zip").status_code == 404


def test_submit_score_and_see_it_on_the_leaderboard(app):
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    b.login("a@x.org")
    page = b.get("/tasks/tric-binary").get_data(as_text=True)
    assert "left today" in page and "resets" in page  # the quota and its reset time
    r = submit(b, tric_rows(app, "dev"), method="Label <b>alternation</b>")
    assert r.status_code == 302, r.get_data(as_text=True)[:2000]
    sid = int(r.headers["Location"].rsplit("/", 1)[1])
    assert b"queued" in b.get(f"/submissions/{sid}").data
    with Session(engine_of(app)) as s:
        sub = s.get(Submission, sid)
        assert sub.file_name == "pred.jsonl" and "pred" not in sub.storage_key  # stored by content
    run_jobs(app)
    page = b.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "scored" in page and "f1" in page
    rows = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [(r["team"], r["method_name"], r["rank"]) for r in rows] == [
        ("Readers", "Label <b>alternation</b>", 1)
    ]
    html = app.test_client().get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    assert "Label &lt;b&gt;alternation&lt;/b&gt;" in html
    assert b"Primary runs" in b.get("/submissions").data


def test_failed_submission_shows_every_problem(app):
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    b.login("a@x.org")
    bad = b'{"instanceID": "nope-1", "label": 7}\n{"instanceID": "nope-2", "label": 1}\nnot json\n'
    sid = int(submit(b, bad).headers["Location"].rsplit("/", 1)[1])
    run_jobs(app)
    with Session(engine_of(app)) as s:
        sub = s.get(Submission, sid)
        assert sub.status == "failed" and sub.failure_kind == "invalid"
        errors = sub.errors
    page = b.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "did not pass validation" in page and "nope-1" in page
    assert len(errors) >= 3
    for e in errors:
        msg = e["message"] if isinstance(e, dict) else str(e)
        from markupsafe import escape

        assert str(escape(msg)) in page


def test_limits_refuse_with_reason_and_time(app):
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    make_phase(app, "tric-binary", "dev", daily_limit=1, concurrent_limit=5)
    b.login("a@x.org")
    assert submit(b, tric_rows(app, "dev")).status_code == 302
    # another file (the very same one would be answered as the earlier submission, counted once)
    r = submit(b, tric_rows(app, "dev", label=lambda i: 1 - i % 2))
    assert r.status_code == 429
    text = r.get_data(as_text=True)
    assert "daily" in text and "UTC" in text


def test_submit_form_checks_its_fields(app):
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    b.login("a@x.org")
    r = submit(b, b"x", method="", url="javascript:alert(1)")
    assert r.status_code == 400
    # the method name is optional on the web as on the API (one declared upload form)
    assert b"must start with https://" in r.data


def test_submit_needs_a_team_and_a_login(app, client):
    assert client.get("/tasks/tric-binary/submit").status_code == 302
    b = Browser(app.test_client())
    make_user(app, "solo@x.org")
    b.login("solo@x.org")
    r = b.get("/tasks/tric-binary/submit")
    assert r.status_code == 302 and r.headers["Location"].endswith("/team/")


def test_upload_over_the_limit_is_refused_before_reading(app):
    app.config["MAX_CONTENT_LENGTH"] = 1000
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    b.login("a@x.org")
    r = submit(b, b"x" * 5000)
    assert r.status_code == 413 and b"too large" in r.data and b"1000 bytes" in r.data
    with Session(engine_of(app)) as s:
        assert s.exec(select(Submission)).all() == []
    # the body is never read: werkzeug refuses on Content-Length alone
    env_read = {"n": 0}

    class Body(io.BytesIO):
        def read(self, *a):
            env_read["n"] += 1
            return super().read(*a)

    with app.test_request_context(
        "/tasks/tric-binary/submit",
        method="POST",
        input_stream=Body(b"x" * 5000),
        headers={"Content-Type": "multipart/form-data; boundary=x", "Content-Length": "5000"},
    ):
        from flask import request
        from werkzeug.exceptions import RequestEntityTooLarge

        with pytest.raises(RequestEntityTooLarge):
            _ = request.form  # parsing the form reads the body
    assert env_read["n"] == 0


def test_mark_primary_run(app):
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    b.login("a@x.org")
    s1 = int(
        submit(b, tric_rows(app, "dev", lambda i: 1), method="ones")
        .headers["Location"]
        .rsplit("/", 1)[1]
    )
    s2 = int(
        submit(b, tric_rows(app, "dev", lambda i: i % 2), method="alt")
        .headers["Location"]
        .rsplit("/", 1)[1]
    )
    run_jobs(app)
    assert b.post(f"/submissions/{s1}/primary").status_code == 302
    rows = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [r["submission_id"] for r in rows] == [s1] and rows[0]["primary_run"]
    b.post(f"/submissions/{s2}/primary")
    rows = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=dev").get_json()["rows"]
    assert [r["submission_id"] for r in rows] == [s2]
    with Session(engine_of(app)) as s:
        assert [x.is_primary for x in s.exec(select(Submission).order_by(Submission.id)).all()] == [
            False,
            True,
        ]
    page = b.get("/submissions").get_data(as_text=True)
    assert page.index("Primary runs") < page.index(f">{s2}<") < page.index("Contrastive")


def test_phases_show_windows_and_limits(app, client):
    from datetime import datetime

    make_phase(
        app,
        "tric-binary",
        "test",
        opens_at=datetime(2031, 1, 2, 3, 4),
        closes_at=datetime(2031, 2, 1),
        daily_limit=3,
        total_limit=9,
        concurrent_limit=1,
    )
    page = client.get("/tasks/tric-binary").get_data(as_text=True)
    assert "2031-01-02 03:04" in page and "2031-02-01 00:00" in page and "not open yet" in page
    assert "3 a day" in page and "9 in all" in page and "1 at once" in page


def test_an_identical_file_is_answered_as_the_earlier_submission(app):
    """The web form dedups as the API does: the same file in the same phase is not counted twice."""
    b = Browser(app.test_client())
    make_user(app, "a@x.org", team="Readers")
    make_phase(app, "tric-binary", "dev", daily_limit=5, concurrent_limit=5)
    b.login("a@x.org")
    first = submit(b, tric_rows(app, "dev"))
    assert first.status_code == 302
    again = submit(b, tric_rows(app, "dev"))
    assert again.status_code == 302 and again.headers["Location"] == first.headers["Location"]
    page = b.get(again.headers["Location"]).get_data(as_text=True)
    assert "submitted this very file in this phase before" in page
