"""Teams of a task or a competition: show, create, join, leave, a new invite code, decide a
member."""

from __future__ import annotations

from sqlmodel import select

from server import api_models as m
from server.actions import competitions as comp_actions
from server.actions import reads
from server.actions import teams as team_actions
from server.api.common import ApiError, body_model, bp, current_viewer, need_user, out, query_model
from server.api.openapi import op
from server.db import db
from server.domain import teams
from server.models import (
    Competition,
    Team,
)


def _team_out(s, team: Team, status: int = 200, competition: Competition | None = None):
    rows = reads.team_roster(s, team)
    return out(
        m.TeamOut,
        status,
        id=team.id,
        name=team.name,
        competition=competition.slug if competition is not None else None,
        invite_code=team.invite_code,
        members=[
            {"id": x.id, "email": x.email, "role": tm.role, "status": tm.status} for tm, x in rows
        ],
        created=team.created_at,
    )


def _team_scope(slug: str | None) -> Competition | None:
    """The competition a team route acts in (`competition`), or None for the account-wide team."""
    if not slug:
        return None
    s = db()
    c = s.exec(select(Competition).where(Competition.slug == slug)).first()
    if c is None or (c.state == "draft" and not comp_actions.may_see_draft(s, current_viewer(), c)):
        raise ApiError(404, "unknown_competition", f"no competition {slug!r}")
    return c


@bp.get("/team")
@op(
    "Your team (in a competition with `competition=ID`): its members and invite code",
    query=m.TeamQuery,
    responses={200: m.TeamOut},
    errors=(404,),
    tags=("team",),
)
def team_show():
    u = need_user()
    c = _team_scope(query_model(m.TeamQuery).competition)
    s = db()
    team = teams.team_for(s, u, c)
    if team is None:
        raise ApiError(
            404, "no_team", "you are in no team: create one or join one with its invite code"
        )
    return _team_out(s, team, competition=c)


@bp.post("/team")
@op(
    "Create a team (you become its captain); with `competition`, a team of that competition",
    body=m.TeamCreate,
    responses={201: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_create():
    u = need_user()
    body = body_model(m.TeamCreate)
    c = _team_scope(body.competition)
    s = db()
    return _team_out(
        s, team_actions.create_team(s=s, user=u, name=body.name, competition=c), 201, c
    )


@bp.post("/team/join")
@op(
    "Join a team by its invite code (in a competition that asks for it, the captain approves)",
    body=m.TeamJoin,
    responses={200: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_join():
    u = need_user()
    body = body_model(m.TeamJoin)
    c = _team_scope(body.competition)
    s = db()
    return _team_out(
        s,
        team_actions.join_team(s=s, user=u, invite_code=body.invite_code, competition=c),
        competition=c,
    )


@bp.post("/team/leave")
@op(
    "Leave your team (its submissions stay with it)",
    query=m.TeamQuery,
    responses={200: m.Left},
    errors=(409,),
    tags=("team",),
)
def team_leave():
    u = need_user()
    c = _team_scope(query_model(m.TeamQuery).competition)
    return out(m.Left, left_team=team_actions.leave_team(s=db(), user=u, competition=c))


@bp.post("/team/invite")
@op(
    "Replace your team's invite code",
    query=m.TeamQuery,
    responses={200: m.TeamOut},
    errors=(409,),
    tags=("team",),
)
def team_rotate():
    u = need_user()
    c = _team_scope(query_model(m.TeamQuery).competition)
    s = db()
    return _team_out(s, team_actions.rotate_invite(s=s, user=u, competition=c), competition=c)


@bp.post("/team/members/<int:user_id>")
@op(
    "The captain approves (`approve=1`) or turns away (`approve=0`) a person waiting to join",
    query=m.MemberDecision,
    responses={200: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_member_decide(user_id):
    u = need_user()
    q = query_model(m.MemberDecision)
    c = _team_scope(q.competition)
    if c is None:
        raise ApiError(
            422,
            "invalid_fields",
            "name the competition",
            problems=[{"line": None, "id": "competition", "message": "required"}],
            total=1,
        )
    s = db()
    team_actions.decide_member(
        s=s, captain=u, competition=c, user_id=user_id, approve=q.approve == "1"
    )
    return _team_out(s, teams.team_for(s, u, c), competition=c)
