"""Mail the site sends on its own (server.jobs.reminders), through the mail queue to a real SMTP
server:
the organizers' hourly digest of pending registrations (opt-out), the participants' notice of new
terms, the reminder before a phase closes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mailkit import (  # noqa: F401
    _deliver,
    _h,
    _people,
    _rows,
    _settings,
    box,
    mapp,
    pg_mapp,
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


# ----------------------------------------------------------------------------- the reconciler


def _reconcile_once(app, box, redis_url):  # noqa: F811
    """`palimpsest reconcile --once` on the app's database and home, mailing to `box`."""
    import json

    from click.testing import CliRunner

    from cli.main import main

    st = _settings(app)
    env = {
        "PALIMPSEST_HOME": str(st.home),
        "DATABASE_URL": st.database_url or "",
        "REDIS_URL": redis_url,
        "PALIMPSEST_SECRET_KEY": st.secret_key,
        "PALIMPSEST_SMTP_HOST": "127.0.0.1",
        "PALIMPSEST_SMTP_PORT": str(box.port),
        "PALIMPSEST_SMTP_SECURITY": "none",
        "PALIMPSEST_BASE_URL": st.base_url,
        "PALIMPSEST_MAIL_FROM": st.mail_from,
    }
    r = CliRunner().invoke(main, ["reconcile", "--once"], env=env, catch_exceptions=False)
    return r.exit_code, json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.postgres
@pytest.mark.redis
def test_reconcile_once_on_postgresql_mails_the_digest_the_reminder_and_retries(
    pg_mapp,  # noqa: F811
    box,  # noqa: F811
    redis_tcp_url,
):
    """On PostgreSQL (where a DISTINCT over the competitions' json columns failed every pass):
    one `reconcile --once` with a pending registration and a phase closing within 48 hours
    queues the organizers' digest and the participants' reminders; they reach the SMTP server,
    a refused one is retried and delivered after a later pass."""
    from sqlalchemy import update

    from server.models import OutgoingMail

    _people(pg_mapp)
    make_phase(pg_mapp, "tric-binary", "test", closes_at=utcnow() + timedelta(hours=24))
    box.refuse["bob@example.org"] = 1
    code, stats = _reconcile_once(pg_mapp, box, redis_tcp_url)
    assert code == 0 and "errors" not in stats, stats
    assert stats["reminders"] == {"pending": 1, "closing": 3}
    got = _deliver(pg_mapp)
    assert got["sent"] == 3 and got["retry"] == 1, got
    with Session(engine_of(pg_mapp)) as s:  # the retry is due now
        s.exec(update(OutgoingMail).values(next_try_at=utcnow() - timedelta(seconds=1)))
        s.commit()
    code, stats = _reconcile_once(pg_mapp, box, redis_tcp_url)
    assert (
        code == 0
        and stats["mail_due"] == 1
        and stats["reminders"]
        == {
            "pending": 0,
            "closing": 0,
        }
    )
    assert _deliver(pg_mapp)["sent"] == 1
    to = sorted(m["to"][0] for m in box.messages)
    assert to == [f"{n}@example.org" for n in ("admin", "ann", "bob", "cyd")]
    digest = next(m for m in box.messages if m["to"] == ["admin@example.org"])
    assert "pen@example.org" in digest["body"]


def test_a_failing_step_of_the_reconciler_is_an_error_an_operator_sees(
    mapp,  # noqa: F811
    box,  # noqa: F811
    redis_tcp_url,
):
    """A step that fails (here the reminders, their table gone) makes `reconcile --once` exit 1
    naming it and shows on the status page for administrators until a pass succeeds."""
    from sqlalchemy import text

    from server import create_app

    _people(mapp)
    eng = engine_of(mapp)
    with eng.begin() as c:
        c.execute(text("ALTER TABLE registration RENAME TO registration_away"))
    code, stats = _reconcile_once(mapp, box, redis_tcp_url)
    assert code == 1 and "registration" in stats["errors"]["reminders"], stats
    assert "mail_due" in stats  # the other steps ran
    st = _settings(mapp)
    app = create_app(
        {
            "home": st.home,
            "env": "testing",
            "database_url": st.database_url,
            "redis_url": redis_tcp_url,
            "PALIMPSEST_ENQUEUE": False,
        }
    )
    from webkit import Browser

    admin = Browser(app.test_client())
    with eng.begin() as c:  # (signing in reads registrations too)
        c.execute(text("ALTER TABLE registration_away RENAME TO registration"))
    admin.login("admin@example.org")
    with eng.begin() as c:
        c.execute(text("ALTER TABLE registration RENAME TO registration_away"))
    page = admin.get("/status").get_data(as_text=True)
    assert "Queueing the pending-registration digests" in page and "registration" in page
    anon = app.test_client().get("/status").get_data(as_text=True)
    assert "pending-registration digests" not in anon
    with eng.begin() as c:
        c.execute(text("ALTER TABLE registration_away RENAME TO registration"))
    code, stats = _reconcile_once(mapp, box, redis_tcp_url)
    assert code == 0 and "errors" not in stats
    assert "pending-registration digests" not in admin.get("/status").get_data(as_text=True)
