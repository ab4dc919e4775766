"""Each action is one transaction: refused, or failing at its very last step (the commit), it
leaves the database and the data directory as they were. A phase create (refused for a field it is
given with), a phase edit, a publication, a registration, a team change and a campaign close, on
the embedded default (SQLite) and on PostgreSQL. The failure is injected into the session's commit
(the one step after which nothing may fail), so every write an action made before it must go."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

import pytest
from backbone import burst, make_team, set_phase, submit
from conftest import _make_backend, own_tasks
from sqlalchemy import select
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

from server import models
from server.exceptions import LifecycleRefused
from server.jobs.dispatch import KEY, Jobs, bind
from server.models import Phase

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])
TASK = "tric-binary"


class Injected(RuntimeError):
    """The failure put into the commit."""


@pytest.fixture(params=["embedded", SERVICES])
def site(request, tmp_path, demo_home, monkeypatch):
    b = _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    own_tasks(b.settings.home)  # the close writes gold: this site's own copy of the tasks
    for name in ("dev", "test"):
        set_phase(b, TASK, name, concurrent_limit=None, daily_limit=None)
    return b


def _db_state(engine) -> dict:
    """Every row of every table, as text: what a change would alter."""
    with Session(engine) as s:
        return {
            t.name: sorted(repr(tuple(r)) for r in s.execute(select(t)).all())
            for t in models.schema().sorted_tables
        }


def _dir_state(home) -> dict:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.is_symlink() and "redis" not in p.name
    }


def _fail_commit(monkeypatch, target):
    """The next commit of the action's session `target` raises (once); other sessions (a step of
    its own, such as a statistics seed) commit as they would."""
    real = OrmSession.commit
    state = {"armed": True}

    def commit(self):
        if state["armed"] and self is target:
            state["armed"] = False
            raise Injected("the commit failed")
        return real(self)

    monkeypatch.setattr(OrmSession, "commit", commit)
    state["restore"] = lambda: setattr(OrmSession, "commit", real)
    return state


def _unchanged(b, act, expect=Injected, monkeypatch=None):
    """`act(session)` raises `expect` and nothing of it stays; returns the states compared."""
    before = (_db_state(b.engine), _dir_state(b.settings.home))
    with Session(b.engine, expire_on_commit=False) as s:
        armed = _fail_commit(monkeypatch, s) if monkeypatch is not None else None
        with pytest.raises(expect):
            act(s)
    if armed is not None:
        armed["restore"]()  # the site's own settings (also set by monkeypatch) stay
        assert not armed["armed"], "the action never reached its commit"
    after = (_db_state(b.engine), _dir_state(b.settings.home))
    assert after[0] == before[0], [t for t in before[0] if before[0][t] != after[0][t]]
    assert after[1] == before[1]


def test_a_phase_refused_for_its_window_is_not_created(site):
    """The observed half-made change: the phase existed after the 409, and a retry said `exists`."""
    from server.actions import phases

    now = datetime.now().replace(microsecond=0)

    def act(s):
        phases.create_phase(
            s=s,
            task_id=TASK,
            name="final",
            actor=None,
            home=site.settings.home,
            via="api",
            split="test",
            changes={"opens_at": now + timedelta(days=2), "closes_at": now + timedelta(days=1)},
        )

    _unchanged(site, act, LifecycleRefused)
    with Session(site.engine) as s:  # and the same create, without the bad window, goes through
        got = phases.create_phase(
            s=s, task_id=TASK, name="final", actor=None, home=site.settings.home, via="api"
        )
        assert got.name == "final" and got.split == "test"


def test_a_phase_edit_failing_at_its_commit_leaves_nothing(site, monkeypatch):
    from server.actions import phases

    def act(s):
        phases.edit_phase(
            s=s, task_id=TASK, phase="test", changes={"daily_limit": 7}, actor=None, via="api"
        )

    _unchanged(site, act, monkeypatch=monkeypatch)


def test_a_publication_failing_at_its_commit_leaves_nothing(site, monkeypatch):
    """Closed and published in one step: neither the close nor the snapshot stays."""
    from server.actions import phases
    from server.domain import partitions

    team, user = make_team(site, "alpha")
    submit(site, team, user, TASK, "test", noise=0.1)
    burst(site)
    with Session(site.engine) as s:  # drawn once, before: each in a transaction of its own
        partitions.bootstrap_seed(site.engine, s.execute(select(Phase.id)).scalars().first())

    def act(s):
        phases.publish_ranking(
            s=s,
            task_id=TASK,
            phase="test",
            actor=None,
            settings=site.settings,
            via="cli",
            close_first=True,
        )

    _unchanged(site, act, monkeypatch=monkeypatch)


def test_a_registration_failing_at_its_commit_leaves_nothing(site, monkeypatch):
    from server.actions import registrations
    from server.domain import people

    with site.session() as s:
        comp = people.ensure_competition(s, TASK)
        comp.approval = "auto"
        s.add(comp)
        slug = comp.slug
    _, user = make_team(site, "beta")

    def act(s):
        registrations.register(
            s=s, user=s.merge(user), competition=slug, accept_terms=True, via="api"
        )

    _unchanged(site, act, monkeypatch=monkeypatch)


def test_a_team_change_failing_at_its_commit_leaves_nothing(site, monkeypatch):
    from server.actions import teams

    _, user = make_team(site, "gamma")

    def act(s):
        teams.leave_team(s=s, user=s.merge(user), competition=None)

    _unchanged(site, act, monkeypatch=monkeypatch)

    def rotate(s):
        teams.rotate_invite(s=s, user=s.merge(user), competition=None)

    _unchanged(site, rotate, monkeypatch=monkeypatch)


def test_a_campaign_close_failing_at_its_commit_leaves_the_gold_as_it_was(site, monkeypatch):
    """The close writes the new gold files before its commit: a failed commit puts them back, and
    no gold version, decision or stale mark stays; closed again, it goes through."""
    from server.actions import adjudication, campaigns
    from server.domain import lifecycle, people

    for i, noise in enumerate((0.05, 0.3)):
        team, user = make_team(site, f"team-{i}")
        submit(site, team, user, TASK, "test", noise=noise)
    burst(site)
    assessors = [make_team(site, f"assessor-{k}")[1] for k in range(2)]
    with site.session() as s:
        comp = people.ensure_competition(s, TASK)
        for u in assessors:
            people.grant(s, comp.id, s.merge(u), people.ASSESSOR)
        lifecycle.close(
            s,
            s.execute(
                select(Phase).where(Phase.task_id == TASK, Phase.name == "test")
            ).scalar_one(),
            actor=None,
        )
    with site.session() as s:
        opened = campaigns.open_campaign(
            s=s,
            actor=None,
            task=TASK,
            phase="test",
            depth=2,
            assessors=[u.email for u in assessors],
            per_item=2,
            labels=["0", "1"],
            positive=["1"],
            seed=3,
            via="cli",
            allow_participants=True,
        )
        for u in assessors:
            for it in campaigns.my_items(s=s, user=s.merge(u), campaign=opened.id).items:
                campaigns.judge(
                    s=s, user=s.merge(u), campaign=opened.id, item=it.item, label="1", via="cli"
                )
        adjudication.adjudicate(s=s, actor=None, campaign=opened.id, majority=True, via="cli")

    queued = []

    class Recorder(Jobs):  # the session's queues, recording what the action hands them
        def rescore_now(self, ids):
            queued.extend(ids)

    def act(s):
        bind(s, Recorder(enabled=False))
        adjudication.close_campaign(s=s, actor=None, campaign=opened.id, via="cli")

    _unchanged(site, act, monkeypatch=monkeypatch)
    assert queued == []  # nothing is enqueued for a change that did not happen
    with Session(site.engine, info={KEY: Recorder(enabled=False)}) as s:
        got = adjudication.close_campaign(s=s, actor=None, campaign=opened.id, via="cli")
    assert got.gold.version == 2 and queued == got.rescoring


def test_a_phase_command_refuses_an_option_its_action_does_not_take(site):
    """`phases freeze T P --close` was accepted and ignored; the options are the action's own."""
    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(main, ["phases", "freeze", TASK, "test", "--close"])
    assert r.exit_code == 1 and "phases freeze takes no --close" in r.output
    # and a value is read as the declaration reads the API's body: at most 2,000 characters
    r = CliRunner().invoke(main, ["phases", "publish", TASK, "test", "--reason", "x" * 2001])
    assert r.exit_code == 1 and "--reason: String should have at most 2000" in r.output, r.output
    with Session(site.engine) as s:  # and nothing happened
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == "test")).scalar_one()
        assert not p.frozen
    r = CliRunner().invoke(main, ["phases", "freeze", TASK, "test", "--json"])
    assert r.exit_code == 0, r.output


def test_the_web_dispatches_a_phase_action_by_its_name(site, monkeypatch):
    """`/organizer/phases/<id>/actions/<name>`: any of PHASE_ACTIONS, the form's fields its own
    signature takes (one it does not take is refused); an unknown name is a 404."""
    from argon2 import PasswordHasher
    from webkit import Browser

    from server import create_app
    from server.domain import accounts

    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    with Session(site.engine) as s:
        accounts.create_user(s, email="org@example.org", password="organizer-pw", is_admin=True)
        s.commit()
        pid = s.execute(
            select(Phase.id).where(Phase.task_id == TASK, Phase.name == "test")
        ).scalar_one()
    org = Browser(app.test_client())
    org.login("org@example.org", "organizer-pw")
    assert org.post(f"/organizer/phases/{pid}/actions/no-such").status_code == 404
    # an option the action does not take is refused, as the CLI and the API refuse it
    r = org.post(f"/organizer/phases/{pid}/actions/freeze", {"close": "1"}, follow_redirects=True)
    assert "the freeze action takes no close" in r.get_data(as_text=True)
    with Session(site.engine) as s:
        assert not s.get(Phase, pid).frozen
    assert org.post(f"/organizer/phases/{pid}/actions/freeze").status_code == 302
    with Session(site.engine) as s:
        assert s.get(Phase, pid).frozen
