"""Mail the site sends on its own (server.jobs.reminders), through the mail queue to a real SMTP
server:
the organizers' hourly digest of pending registrations (opt-out), the participants' notice of new
terms, the reminder before a phase closes."""

from __future__ import annotations

from datetime import timedelta

from mailkit import (  # noqa: F401
    _deliver,
    _h,
    _people,
    _rows,
    _settings,
    box,
    mapp,
    smtp,  # noqa: F401  (the fixture test_announcements' uses)
)
from sqlmodel import Session
from webkit import engine_of, make_phase, make_token, make_user

from server.actions import competitions as comp
from server.jobs import reminders
from server.models import Registration, User, utcnow


def _due(app, now):
    return reminders.queue_due(engine_of(app), _settings(app), now)


def _kind(app, kind):
    return [r for r in _rows(app) if r.kind == kind]


def test_pending_registrations_reach_the_organizers_at_most_hourly(mapp, box):  # noqa: F811
    u = _people(mapp)
    now = utcnow() + timedelta(seconds=1)
    assert _due(mapp, now)["pending"] == 1
    (row,) = _kind(mapp, "pending")
    assert row.to_addr == "admin@example.org" and "pen@example.org" in row.body
    assert "1 registration(s)" in row.subject
    assert _due(mapp, now)["pending"] == 0  # the same hour, nothing new
    with Session(engine_of(mapp)) as s:
        shared = comp.find(s, "shared")
        s.add(
            Registration(
                competition_id=shared.id,
                user_id=u["out"].id,
                status="pending",
                created_at=now + timedelta(minutes=10),
            )
        )
        s.commit()
    assert _due(mapp, now + timedelta(minutes=30))["pending"] == 0  # within the hour
    assert _due(mapp, now + timedelta(minutes=61))["pending"] == 1
    latest = _kind(mapp, "pending")[-1]
    assert "out@example.org" in latest.body and "pen@example.org" in latest.body
    # nothing arrived since: no digest the next hour, however long they wait
    assert _due(mapp, now + timedelta(hours=3))["pending"] == 0
    _deliver(mapp)
    assert [m["to"] for m in box.messages] == [["admin@example.org"]] * 2

    c = mapp.test_client()
    ann = make_token(mapp, u["ann"])
    r = c.put(
        "/api/v1/competitions/shared/mail", headers=_h(ann), json={"pending_registrations": False}
    )
    assert r.status_code == 403
    admin = make_token(mapp, u["admin"])
    r = c.get("/api/v1/competitions/shared/mail", headers=_h(admin))
    assert r.status_code == 200 and r.get_json()["pending_registrations"] is True
    r = c.put(
        "/api/v1/competitions/shared/mail", headers=_h(admin), json={"pending_registrations": False}
    )
    assert r.status_code == 200 and r.get_json()["pending_registrations"] is False
    with Session(engine_of(mapp)) as s:
        s.add(
            Registration(
                competition_id=comp.find(s, "shared").id,
                user_id=make_user(mapp, "late@example.org").id,
                status="pending",
                created_at=now + timedelta(hours=4),
            )
        )
        s.commit()
    assert _due(mapp, now + timedelta(hours=5))["pending"] == 0  # opted out


def test_new_terms_are_told_to_every_registered_participant(mapp, box):  # noqa: F811
    u = _people(mapp)
    with Session(engine_of(mapp), expire_on_commit=False) as s:
        admin = s.get(User, u["admin"].id)
        comp.set_page(
            s=s,
            actor=admin,
            via="test",
            competition="shared",
            page="terms",
            title="Terms",
            body_markdown="Cite the task paper.",
        )
        comp.set_page(  # the same text: not a change
            s=s,
            actor=admin,
            via="test",
            competition="shared",
            page="terms",
            title="Terms",
            body_markdown="Cite the task paper.",
        )
    rows = _kind(mapp, "terms")
    # approved (opted out of announcements or not) and pending; never the banned
    assert sorted(r.to_addr for r in rows) == [
        f"{n}@example.org" for n in ("ann", "bob", "cyd", "dee", "pen")
    ]
    assert all("/competitions/shared/terms" in r.body and "version 1" in r.body for r in rows)


def test_a_reminder_before_a_phase_closes_once_per_deadline(mapp, box):  # noqa: F811
    _people(mapp)
    now = utcnow()
    p = make_phase(mapp, "tric-binary", "test", closes_at=now + timedelta(hours=72))
    assert _settings(mapp).closing_reminder_hours == 48
    assert _due(mapp, now)["closing"] == 0  # not yet within 48 h
    assert _due(mapp, now + timedelta(hours=25))["closing"] == 3
    rows = _kind(mapp, "closing")
    # approved and taking announcements: not dee (opted out), pen (pending), ban (banned)
    assert sorted(r.to_addr for r in rows) == [f"{n}@example.org" for n in ("ann", "bob", "cyd")]
    assert "closes at" in rows[0].body and "/tasks/tric-binary/submit" in rows[0].body
    assert _due(mapp, now + timedelta(hours=30))["closing"] == 0  # once
    make_phase(mapp, "tric-binary", "test", closes_at=now + timedelta(hours=96))  # moved
    assert _due(mapp, now + timedelta(hours=50))["closing"] == 3
    assert _due(mapp, now + timedelta(hours=97))["closing"] == 0  # closed
    _deliver(mapp)
    closing = [m for m in box.messages if "closes" in m["subject"]]
    assert len(closing) == 6 and p.id  # (and the pending registration's digest)
    assert [m["to"] for m in box.messages if m not in closing] == [["admin@example.org"]]
