"""The organizer's forms through WTForms: a wrong date-time keeps what was typed and says what is
wrong next to the field; the timezone is shown; rescore-all and hide ask for a confirmation; the
submission list is paginated, with score and time columns."""

from __future__ import annotations

import html

from organizer_world import org, world  # noqa: F401 — the fixtures
from sqlmodel import Session, select
from webkit import engine_of, make_submission, team_of

from server.models import AuditLog, Phase, Submission


def test_a_wrong_time_keeps_what_was_typed_and_says_why(app, world, org):  # noqa: F811
    pid = world["dev"].id
    page = org.get(f"/organizer/phases/{pid}").get_data(as_text=True)
    assert "Times are in UTC" in page and '<span class="tz">UTC</span>' in page
    r = org.post(
        f"/organizer/phases/{pid}",
        {
            "opens_at": "2030-01-01 00:00",
            "closes_at": "nextTfriday",
            "daily_limit": "-1",
            "public_fraction": "1",
        },
    )
    assert r.status_code == 400
    page = html.unescape(r.get_data(as_text=True))
    assert 'value="nextTfriday"' in page and 'value="2030-01-01 00:00"' in page  # nothing emptied
    assert "'nextTfriday' is not a date and time: write it as YYYY-MM-DD HH:MM (UTC)" in page
    assert "a limit is 0 or more" in page and 'value="-1"' in page
    assert "Invalid isoformat" not in page
    with Session(engine_of(app)) as s:
        assert s.get(Phase, pid).opens_at is None  # nothing saved
    # the lifecycle's refusal is shown on the form, with what was typed kept
    r = org.post(
        f"/organizer/phases/{world['test'].id}",
        {"public_fraction": "0.3", "opens_at": "2030-01-01"},
    )
    page = html.unescape(r.get_data(as_text=True))
    assert r.status_code == 400 and "cannot change" in page and 'value="0.3"' in page
    # an offset is converted to UTC
    assert (
        org.post(
            f"/organizer/phases/{pid}",
            {"opens_at": "2030-01-01T02:00+02:00", "public_fraction": "1"},
        ).status_code
        == 302
    )
    with Session(engine_of(app)) as s:
        assert s.get(Phase, pid).opens_at.isoformat() == "2030-01-01T00:00:00"


def test_rescore_all_asks_first(app, world, org):  # noqa: F811
    r = org.post("/organizer/tasks/tric-binary/rescore", {"phase": "test"})
    page = r.get_data(as_text=True)
    assert (
        r.status_code == 200
        and "This queues <strong>2</strong> scored or failed submissions" in page
    )
    with Session(engine_of(app)) as s:
        assert s.get(Submission, world["a_test"].id).status == "scored"  # nothing happened yet
    org.post("/organizer/tasks/tric-binary/rescore", {"phase": "test", "confirm": "yes"})
    with Session(engine_of(app)) as s:
        assert s.get(Submission, world["a_test"].id).status == "queued"


def test_hide_asks_first_and_shows_the_reason(app, world, org):  # noqa: F811
    sid = world["a_dev"].id
    r = org.post(
        f"/organizer/submissions/{sid}/hide", {"action": "hide", "reason": "copied labels"}
    )
    page = r.get_data(as_text=True)
    assert (
        r.status_code == 200
        and f"Hide submission #{sid}?" in page
        and 'value="copied labels"' in page
    )
    with Session(engine_of(app)) as s:
        assert not s.get(Submission, sid).hidden
    org.post(
        f"/organizer/submissions/{sid}/hide",
        {"action": "hide", "reason": "copied labels", "confirm": "yes"},
    )
    with Session(engine_of(app)) as s:
        assert s.get(Submission, sid).hidden
        assert (
            s.exec(select(AuditLog).where(AuditLog.action == "submission.hide")).first() is not None
        )
    # unhiding needs no confirmation
    org.post(f"/organizer/submissions/{sid}/hide", {"action": "unhide"})
    with Session(engine_of(app)) as s:
        assert not s.get(Submission, sid).hidden


def test_submission_list_pages_with_score_and_times(app, world, org):  # noqa: F811
    import server.web.organizer as views

    a = team_of(app, "alpha")
    for _ in range(5):
        make_submission(app, team=a, phase=world["dev"], scores={"all": 0.42})
    old = views.PAGE
    views.PAGE = 4
    try:
        first = org.get("/organizer/submissions").get_data(as_text=True)
        assert (
            "9 submissions, newest first" in first
            and "Submitted (UTC)" in first
            and "0.4200" in first
        )
        assert first.count('<tr id="sub-') == 4 and "Older »" in first
        seen = first.count('<tr id="sub-')
        url = html.unescape(first.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0])
        while url:
            page = org.get(url).get_data(as_text=True)
            seen += page.count('<tr id="sub-')
            url = (
                html.unescape(page.split('" rel="next"')[0].rsplit('href="', 1)[1])
                if 'rel="next"' in page
                else None
            )
        assert seen == 9
    finally:
        views.PAGE = old
    test_page = org.get("/organizer/submissions?task=tric-binary&status=scored").get_data(
        as_text=True
    )
    assert (
        "0.3456" in test_page and "0.9000" in test_page
    )  # the private part, beside the public one


def test_a_closed_phase_is_409_on_the_page_and_on_the_api(app, world, tmp_path):  # noqa: F811
    """One error table (server.statuses): the same status for the same failure on both sides."""
    import io

    from webkit import Browser, make_token, make_user, update_phase

    from server.models import utcnow

    user = make_user(app, "c@x.org", team="gamma")
    update_phase(app, world["dev"].id, closes_at=utcnow())
    page = Browser(app.test_client())
    page.login("c@x.org")
    data = b'{"instanceID": "x", "label": 1}\n'
    r = page.post(
        "/tasks/tric-binary/submit",
        {"phase": "dev", "method_name": "m", "file": (io.BytesIO(data), "p.jsonl")},
    )
    assert r.status_code == 409 and "closed" in r.get_data(as_text=True)
    api = app.test_client().post(
        "/api/v1/tasks/tric-binary/submissions",
        headers={"Authorization": f"Bearer {make_token(app, user)}"},
        data={"phase": "dev", "file": (io.BytesIO(data), "p.jsonl")},
        content_type="multipart/form-data",
    )
    assert api.status_code == 409 and api.json["error"]["code"] == "phase_closed"
