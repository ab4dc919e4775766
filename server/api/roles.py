"""Roles in a competition: list, invite, revoke; accept an invitation."""

from __future__ import annotations

from server import api_models as m
from server.actions import roles as role_actions
from server.api.common import body_model, bp, json_out, need_user
from server.api.openapi import op
from server.db import db

# ---------------------------------------------------------------------------- roles and invitations


@bp.get("/competitions/<competition_id>/roles")
@op(
    "Who has which role in a competition, and its pending invitations (its organizers)",
    responses={200: m.RolesOut},
    errors=(403, 404),
    tags=("organizers",),
)
def competition_roles(competition_id):
    return json_out(role_actions.list_roles(s=db(), actor=need_user(), competition=competition_id))


@bp.post("/competitions/<competition_id>/roles")
@op(
    "Invite a person by email to be an owner, organizer or assessor (its owners)",
    body=m.InviteCreate,
    responses={201: m.InviteOut},
    errors=(403, 404, 409),
    tags=("organizers",),
)
def competition_invite(competition_id):
    u = need_user()
    role_actions.require_owner(s=db(), actor=u, competition=competition_id)
    body = body_model(m.InviteCreate)
    result = role_actions.invite(
        s=db(), actor=u, competition=competition_id, email=body.email, role=body.role, via="api"
    )
    return json_out(result, 201)


@bp.delete("/competitions/<competition_id>/roles/<user_id>")
@op(
    "Take a person's role away and cancel their pending invitations (its owners; never the last "
    "owner). `user_id` is the account's id or an email address",
    responses={200: m.RoleRevoked},
    errors=(403, 404, 409),
    tags=("organizers",),
)
def competition_revoke(competition_id, user_id):
    u = need_user()
    result = role_actions.revoke(
        s=db(), actor=u, competition=competition_id, user_or_email=user_id, via="api"
    )
    return json_out(result)


@bp.post("/invites/accept")
@op(
    "Accept an invitation to a role (the token of its link; for the invited address's account)",
    body=m.InviteAccept,
    responses={200: m.InviteAccepted},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def invite_accept():
    u = need_user()
    body = body_model(m.InviteAccept)
    return json_out(role_actions.accept(s=db(), user=u, token=body.token, via="api"))
