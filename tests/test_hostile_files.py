"""Hostile files cost bounded work and bounded reports, and are the file's fault, never the
server's: deep nesting, huge integers, huge ids, a file too costly to validate, a flood of invalid
uploads, and invalid uploads kept forever."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from backbone import burst, get, make_team, set_phase, submit

from scorer.errors import Problem, SubmissionInvalid


def _dev_ids(b, task="tric-binary"):
    from scorer import partition_units

    return partition_units(task, "dev", b.settings.home)


def test_a_problem_never_echoes_a_value_without_bound():
    p = Problem("unknown id", line=1, id="A" * 10_000_000)
    assert len(p.id) == 80 and p.id.endswith("…")
    assert len(Problem("x" * 100_000).message) <= 400


def test_a_stored_report_is_capped_in_problems_and_bytes():
    from server.jobs.scoring import REPORT_BYTES, report

    e = SubmissionInvalid(
        [Problem("bad label " + "é" * 300, line=i, id="x" * 70) for i in range(200)], total=5000
    )
    errors = report(e)
    assert len(json.dumps(errors, ensure_ascii=False).encode()) <= REPORT_BYTES
    assert errors[-1]["message"] == f"... and {5000 - (len(errors) - 1)} more problems"
    assert len(errors) - 1 < 200


def test_broken_json_is_the_files_fault_naming_the_line(backend):
    b = backend
    team, user = make_team(b)
    ids = _dev_ids(b)
    lines = [json.dumps({"instanceID": i, "label": 1}) for i in ids]
    lines[3] = '{"instanceID": ' + "[" * 5000 + "]" * 5000 + ', "label": 1}'  # nested 5,000 deep
    lines[5] = '{"instanceID": "x", "label": ' + "9" * 5000 + "}"  # a 5,000-digit integer
    lines[7] = json.dumps({"instanceID": "B" * 1_000_000, "label": 1})  # a 1 MB id
    sid = submit(b, team, user, "tric-binary", "dev", data=("\n".join(lines) + "\n").encode()).id
    burst(b)
    sub = get(b, sid)
    assert sub.status == "failed" and sub.failure_kind == "invalid", sub.errors
    by_line = {p["line"]: p for p in sub.errors}
    assert "nested too deeply" in by_line[4]["message"]
    assert by_line[6]["message"].startswith("not valid JSON here")
    assert len(by_line[8]["id"] or "") <= 80 and len(json.dumps(sub.errors)) < 64 * 1024
    assert sub.attempts == 1  # no retries: nothing of the server's failed


def test_a_file_too_costly_to_validate_is_refused_as_invalid(backend, monkeypatch):
    b = backend
    b.settings.file_memory_bytes = 1024 * 1024  # 1 MiB beyond what the worker holds: nothing fits
    monkeypatch.setenv("PALIMPSEST_FILE_MEMORY_BYTES", str(1024 * 1024))
    team, user = make_team(b)
    import gzip

    lines = [json.dumps({"instanceID": i, "label": 1}) for i in _dev_ids(b)]
    # 60 MB to hold once decompressed (small on the wire): more than 32 MB, so malloc maps it anew
    padded = gzip.compress(("\n".join(lines) + "\n" + " " * (60 * 1024 * 1024) + "\n").encode())
    sid = submit(b, team, user, "tric-binary", "dev", data=padded, filename="p.jsonl.gz").id
    burst(b)
    sub = get(b, sid)
    assert sub.status == "failed" and sub.failure_kind == "invalid", sub.errors
    assert "too costly to validate" in sub.errors[0]["message"]
    # the worker itself goes on unbounded: the next file (with the limit lifted) is scored
    monkeypatch.setenv("PALIMPSEST_FILE_MEMORY_BYTES", str(3 * 1024**3))
    ok = submit(b, team, user, "tric-binary", "dev", noise=0.2).id
    burst(b)
    assert get(b, ok).status == "scored"


def test_invalid_uploads_are_limited_per_day(backend, monkeypatch):
    from server.exceptions import LimitReached

    b = backend
    monkeypatch.setenv("PALIMPSEST_INVALID_DAILY_LIMIT", "2")
    b.settings.invalid_daily_limit = 2
    set_phase(b, "tric-binary", "dev", concurrent_limit=None)
    team, user = make_team(b)
    for n in range(2):
        submit(b, team, user, "tric-binary", "dev", data=f'{{"nope": {n}}}\n'.encode())
    burst(b)
    with pytest.raises(LimitReached) as e:
        submit(b, team, user, "tric-binary", "dev", data=b'{"nope": 3}\n')
    assert e.value.limit == "invalid" and "palimpsest validate tric-binary" in e.value.message
    # a valid file is refused too until the reset: the team is told to check offline first
    assert e.value.next_allowed_at is not None


def test_invalid_uploads_are_deleted_after_the_retention_period(backend):
    from sqlalchemy import update

    from server.jobs.retention import purge_invalid_uploads
    from server.models import Submission, utcnow
    from server.storage import path_for

    b = backend
    team, user = make_team(b)
    bad = submit(b, team, user, "tric-binary", "dev", data=b'{"nope": 1}\n').id
    shared = submit(b, team, user, "tric-binary", "dev", data=b'{"nope": 2}\n').id
    burst(b)
    other, ouser = make_team(b)
    # the same bytes as `shared`, uploaded by another team whose run is still waiting
    keep = submit(b, other, ouser, "tric-binary", "dev", data=b'{"nope": 2}\n', enqueue=False).id
    assert purge_invalid_uploads(b.engine, b.settings) == 0  # not old enough yet
    with b.session() as s:
        s.execute(
            update(Submission)
            .where(Submission.id.in_([bad, shared]))
            .values(finished_at=utcnow() - timedelta(days=b.settings.invalid_retention_days + 1))
        )
        s.commit()
    assert purge_invalid_uploads(b.engine, b.settings) == 2
    assert not path_for(b.settings.home, get(b, bad).storage_key).exists()
    assert path_for(b.settings.home, get(b, keep).storage_key).exists()
    assert get(b, bad).errors and get(b, bad).file_purged_at is not None  # the report stays
    assert purge_invalid_uploads(b.engine, b.settings) == 0


def test_my_submissions_is_a_page_at_a_time(app):
    from webkit import Browser, make_phase, make_submission, make_user, team_of

    from server.web.pages import PAGE

    make_user(app, "many@x.org", team="many")
    team = team_of(app, "many")
    dev = make_phase(app, "tric-binary", "dev")
    ids = [make_submission(app, team=team, phase=dev, method=f"m{i}").id for i in range(PAGE + 5)]
    b = Browser(app.test_client())
    b.login("many@x.org")
    first = b.get("/submissions").get_data(as_text=True)
    assert f"/submissions/{ids[-1]}" in first and f'/submissions/{ids[4]}"' not in first
    assert f"before={ids[5]}" in first
    second = b.get(f"/submissions?before={ids[5]}").get_data(as_text=True)
    assert f"/submissions/{ids[4]}" in second and f'/submissions/{ids[-1]}"' not in second
