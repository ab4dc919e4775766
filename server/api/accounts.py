"""The token's owner, and the site's audit log (administrators)."""

from __future__ import annotations

from server import api_models as m
from server.actions import reads
from server.actions import signup as signup_actions
from server.api.common import (
    body_model,
    bp,
    need_organizer,
    need_user,
    out,
    page_out,
    paginate,
    query_model,
)
from server.api.openapi import op
from server.db import db
from server.domain import people
from server.models import (
    AuditLog,
)
from server.settings import get_settings

# ----------------------------------------------------------------------------- you and your team


@bp.get("/me")
@op("Who the token belongs to", responses={200: m.Me}, tags=("team",))
def me():
    u = need_user()
    s = db()
    team = people.team_of(s, u, None)
    return out(
        m.Me,
        id=u.id,
        email=u.email,
        is_admin=people.is_admin(u),
        is_organizer=people.organizes_anything(s, u),
        team={"id": team.id, "name": team.name} if team else None,
    )


# ----------------------------------------------------------------------------- signing up


@bp.post("/signup")
@op(
    "Sign up: mail the address a token to finish with (no token needed)",
    body=m.SignupIn,
    responses={202: m.SignupStarted},
    errors=(403, 404, 409, 422, 429),
    tags=("team",),
    public=True,
    description="The same answer whether or not the address has an account (one that has gets "
    "a note with a reset link instead). 409 `no_mail`: the site sends no mail. 403 "
    "`domain_not_allowed`: the competition takes other addresses. Throttled per address and "
    "per client, as the web's registration.",
)
def signup():
    body = body_model(m.SignupIn)
    settings = get_settings()
    email = signup_actions.start(
        s=db(), settings=settings, email=body.email, competition=body.competition
    )
    minutes = settings.reset_minutes
    return out(
        m.SignupStarted,
        202,
        email=email,
        message=f"we sent a message to {email}: finish within {minutes} minutes with the token "
        "in it (`palimpsest signup --finish TOKEN`)",
    )


@bp.post("/signup/finish")
@op(
    "Finish signing up with the mailed token and a password; answers an API token",
    body=m.SignupFinishIn,
    responses={201: m.SignupDone},
    errors=(409, 422, 429),
    tags=("team",),
    public=True,
)
def signup_finish():
    body = body_model(m.SignupFinishIn)
    user, token, competition = signup_actions.finish(
        s=db(), settings=get_settings(), token=body.token, password=body.password
    )
    return out(m.SignupDone, 201, email=user.email, token=token, competition=competition)


# --------------------------------------------------------------------- organizers: audit, baselines


@bp.get("/audit")
@op(
    "The audit log, newest first (organizers)",
    query=m.AuditQuery,
    responses={200: m.Page[m.AuditEntry]},
    errors=(403,),
    tags=("organizers",),
)
def audit_log():
    u = need_organizer()
    page = query_model(m.AuditQuery)
    s = db()
    q = reads.audit_entries(s, u, action=page.action, everything=page.all == "1")
    actors: dict[int, str] = {}

    def render(a: AuditLog) -> dict:
        if a.actor_id is not None and a.actor_id not in actors:
            actors.update(reads.audit_actors(s, [a]))
            actors.setdefault(a.actor_id, f"user:{a.actor_id}")
        return {
            "id": a.id,
            "actor": actors.get(a.actor_id),
            "action": a.action,
            "target": a.target,
            "details": a.details,
            "created": a.created_at,
        }

    items, links = paginate(s, q, AuditLog.id, page, render)
    return page_out(m.Page[m.AuditEntry], items, links)
