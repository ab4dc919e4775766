"""A fresh site shows only what exists: no placeholder competition for a built-in task never
imported (pages, API); the organizer dashboard grouped by competition, linking its settings,
participants, people, phases and campaigns."""

from __future__ import annotations

from sqlmodel import Session
from webkit import Browser, engine_of, make_user

from server.actions import competitions as comp
from server.domain import accounts
from server.models import User


def test_a_fresh_site_lists_no_placeholder_competition(tmp_path, monkeypatch):
    from argon2 import PasswordHasher
    from conftest import build_schema

    from server import create_app

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    empty = tmp_path / "empty"
    monkeypatch.setenv("PALIMPSEST_HOME", str(empty))
    build_schema(empty)
    app = create_app(
        {"home": empty, "env": "testing", "database_url": None, "PALIMPSEST_ENQUEUE": False}
    )
    c = app.test_client()
    assert c.get("/tasks/trac").status_code == 200  # makes the tasks' default phases
    assert "/competitions/trac" not in c.get("/").get_data(as_text=True)
    assert c.get("/api/v1/competitions").get_json()["items"] == []
    make_user(app, "root@x.org", organizer=True)
    b = Browser(c)
    b.login("root@x.org")
    page = b.get("/organizer/").get_data(as_text=True)
    assert "No competition yet" in page and "<h3" not in page


def test_the_dashboard_is_grouped_by_competition_with_its_links(app):
    admin = make_user(app, "root@x.org", organizer=True)
    with Session(engine_of(app), expire_on_commit=False) as s:
        comp.create_competition(
            s=s,
            actor=s.get(User, admin.id),
            via="test",
            competition="loci-2027",
            title="Loci 2027",
            state="visible",
            tasks=["loci-similes"],
        )
    b = Browser(app.test_client())
    b.login("root@x.org")
    page = b.get("/organizer/").get_data(as_text=True)
    head = page.index("Loci 2027")
    for link in ("settings", "participants", "people"):
        assert f'href="/competitions/loci-2027/{link}"' in page
    assert 'href="#phases-loci-2027"' in page and 'id="phases-loci-2027"' in page
    assert "/campaigns" in page[head : head + 1500]
    # the other imported tasks: in no competition, after the competitions
    assert page.index("Tasks in no competition") > head
    assert page.index('<h3 id="task-tric-binary">') > page.index("Tasks in no competition")
