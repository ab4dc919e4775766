"""The campaign pages' world: an organizer, assessors and runs on a served app."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_token, make_user

from server.actions import campaigns as campaign_actions
from server.actions import competitions as comp
from server.domain import people
from server.models import Registration, Team, TeamMember, User, utcnow

MARK = "method-of-the-pooled-run-5e1"  # the participant's run: an assessor never reads it


SCORE = 0.8765


SECRET = {"a2": "comment-of-a2-qx7", "org": "comment-of-org-zz3"}


@pytest.fixture
def world(app):
    admin = make_user(app, "admin@x.org", organizer=True)
    users = {
        "participant": make_user(app, "participant@x.org", team="team-a"),
        "a1": make_user(app, "a1@x.org"),
        "a2": make_user(app, "a2@x.org"),
        "a3": make_user(app, "a3@x.org"),  # an assessor of A with no items in the campaign
        "org_b": make_user(app, "org-b@x.org"),
        "org": make_user(app, "org@x.org"),
    }
    with Session(engine_of(app), expire_on_commit=False) as s:
        for slug, task in (("comp-a", "tric-binary"), ("comp-b", "swissgov-rsd")):
            comp.create_competition(
                s=s,
                actor=s.get(User, admin.id),
                via="cli",
                competition=slug,
                title=f"Competition {slug}",
                state="visible",
                tasks=[task],
            )
        a, b = comp.find(s, "comp-a"), comp.find(s, "comp-b")
        for who, cid, role in (
            ("a1", a.id, people.ASSESSOR),
            ("a2", a.id, people.ASSESSOR),
            ("a3", a.id, people.ASSESSOR),
            ("org_b", b.id, people.ORGANIZER),
            ("org", a.id, people.ORGANIZER),
        ):
            people.grant(s, cid, s.get(User, users[who].id), role)
        s.add(
            Registration(
                competition_id=a.id,
                user_id=users["participant"].id,
                status="approved",
                terms_accepted_at=utcnow(),
            )
        )
        team = s.exec(select(Team).where(Team.name == "team-a")).one()
        team.competition_id = a.id
        for mem in s.exec(select(TeamMember).where(TeamMember.team_id == team.id)):
            mem.competition_id = a.id
            s.add(mem)
        s.add(team)
        s.commit()
    phase = make_phase(app, "tric-binary", "dev")
    sub = make_submission(app, team=team, phase=phase, scores={"all": SCORE}, method=MARK)
    with Session(engine_of(app), expire_on_commit=False) as s:
        got = campaign_actions.open_campaign(
            s=s,
            actor=s.get(User, users["org"].id),
            task="tric-binary",
            phase="dev",
            depth=3,
            assessors=["a1@x.org", "a2@x.org", "org@x.org"],
            per_item=2,
            labels=["related", "unrelated"],
            guideline="Judge **the topic**.",
            seed=7,
            via="cli",
        )
        # the other assessors judge first: their labels and comments must not reach a1
        for who in ("a2", "org"):
            u = s.get(User, users[who].id)
            for it in campaign_actions.my_items(s=s, user=u, campaign=got.id).items:
                campaign_actions.judge(
                    s=s,
                    user=u,
                    campaign=got.id,
                    item=it.item,
                    label="unrelated",
                    comment=SECRET[who],
                    via="cli",
                )
    browsers = {"anonymous": Browser(app.test_client())}
    tokens = {"anonymous": None}
    for who, u in users.items():
        browsers[who] = Browser(app.test_client())
        browsers[who].login(u.email)
        tokens[who] = make_token(app, u)
    a1_items = [
        i.item
        for i in campaign_actions.my_items(
            s=Session(engine_of(app)), user=users["a1"], campaign=got.id
        ).items
    ]
    return {
        "app": app,
        "users": users,
        "browsers": browsers,
        "tokens": tokens,
        "campaign": got.id,
        "phase": phase,
        "sub": sub,
        "a1_items": a1_items,
    }
