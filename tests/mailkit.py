"""Mail in the tests: a real SMTP server (aiosmtpd on a local port), its mailbox, an app that
sends to it, and the announcements' world."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import pytest
from sqlmodel import Session, select
from webkit import engine_of, make_user

from server.actions import competitions as comp
from server.domain import accounts, people
from server.jobs import outbox
from server.models import OutgoingMail, Registration, User

LINK = re.compile(r"https?://[^\s/]+(/auth/(?:reset|register)/[A-Za-z0-9._-]+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mailbox:
    """What a real SMTP server (aiosmtpd on a local port) received."""

    def __init__(self):
        self.messages: list[dict] = []
        self.cond = threading.Condition()

    async def handle_DATA(self, server, session, envelope):
        from email import message_from_bytes, policy

        msg = message_from_bytes(envelope.content, policy=policy.default)
        with self.cond:
            self.messages.append(
                {
                    "to": envelope.rcpt_tos,
                    "subject": msg["subject"],
                    "body": msg.get_body(("plain",)).get_content(),
                }
            )
            self.cond.notify_all()
        return "250 OK"

    def wait(self, n: int, timeout: float = 15.0) -> list[dict]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.messages) >= n, timeout)
            return list(self.messages)

    def link(self, i: int = -1) -> str:
        return LINK.search(self.messages[i]["body"]).group(1)


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    box = Mailbox()
    ctl = Controller(box, hostname="127.0.0.1", port=_free_port())
    ctl.start()
    box.port = ctl.port
    yield box
    ctl.stop()


def _app(web_home, monkeypatch, **settings):
    from argon2 import PasswordHasher

    from server import create_app

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    monkeypatch.setenv("PALIMPSEST_HOME", str(web_home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    from conftest import build_schema

    build_schema(Path(web_home))
    return create_app(
        {
            "home": web_home,
            "env": "testing",
            "database_url": None,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
            **settings,
        }
    )


BASE = "http://palimpsest.test"


def _h(token):
    return {"Authorization": f"Bearer {token}"}


class RefusingMailbox(Mailbox):
    """Refuses, with a temporary failure at DATA, the first `refuse[address]` messages to it."""

    def __init__(self):
        super().__init__()
        self.refuse: dict[str, int] = {}

    async def handle_DATA(self, server, session, envelope):
        for rcpt in envelope.rcpt_tos:
            if self.refuse.get(rcpt, 0) > 0:
                self.refuse[rcpt] -= 1
                return "451 4.3.0 try again later"
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def box():
    from aiosmtpd.controller import Controller

    b = RefusingMailbox()
    ctl = Controller(b, hostname="127.0.0.1", port=_free_port())
    ctl.start()
    b.port = ctl.port
    yield b
    ctl.stop()


def _mail_settings(port: int) -> dict:
    return dict(
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_security="none",
        base_url=BASE,
        mail_from="org@palimpsest.test",
        mail_max_attempts=3,
    )


@pytest.fixture
def mapp(web_home, monkeypatch, box):
    return _app(web_home, monkeypatch, **_mail_settings(box.port))


@pytest.fixture
def pg_mapp(pg_app, box):
    """The app on PostgreSQL (pg_app's fresh tables), with mail to the local SMTP server."""
    from server import create_app

    return create_app(
        {
            "home": pg_app.extensions["palimpsest.settings"].home,
            "env": "testing",
            "database_url": pg_app.extensions["palimpsest.settings"].database_url,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
            **_mail_settings(box.port),
        }
    )


def _settings(app):
    return app.extensions["palimpsest.settings"]


def _people(app, state: str = "visible") -> dict:
    """A competition `shared` (tric-binary) with an owner, approved participants (one opted out),
    a pending and a banned one; a competition `other` with its own organizer. Returns users."""
    admin = make_user(app, "admin@example.org", organizer=True)
    u = {"admin": admin}
    for name in ("ann", "bob", "cyd", "dee", "pen", "ban", "org2", "out"):
        u[name] = make_user(app, f"{name}@example.org")
    with Session(engine_of(app), expire_on_commit=False) as s:
        comp.create_competition(
            s=s,
            actor=s.get(User, admin.id),
            via="test",
            competition="shared",
            title="Shared Task",
            state=state,
            tasks=["tric-binary"],
        )
        comp.create_competition(
            s=s,
            actor=s.get(User, admin.id),
            via="test",
            competition="other",
            title="Other",
            state="visible",
        )
        shared = comp.find(s, "shared")
        other = comp.find(s, "other")
        for name, status in (
            ("ann", "approved"),
            ("bob", "approved"),
            ("cyd", "approved"),
            ("dee", "approved"),
            ("pen", "pending"),
            ("ban", "banned"),
        ):
            s.add(
                Registration(
                    competition_id=shared.id,
                    user_id=u[name].id,
                    status=status,
                    mail_announcements=name != "dee",  # dee opted out
                )
            )
        people.grant(s, other.id, s.get(User, u["org2"].id), people.ORGANIZER)
        s.commit()
    return u


def _rows(app) -> list[OutgoingMail]:
    with Session(engine_of(app)) as s:
        return list(s.exec(select(OutgoingMail).order_by(OutgoingMail.id)))


def _deliver(app, **kw) -> dict:
    return outbox.deliver_all(engine_of(app), _settings(app), **kw)
