"""Registrations: register, show one's own, list and decide participants; mail preferences."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import request

from server import api_models as m
from server.actions import registrations as reg_actions
from server.api.common import (
    body_model,
    bp,
    cursor_id,
    cursor_of,
    json_out,
    need_user,
    page_out,
    query_model,
)
from server.api.openapi import op
from server.db import db

# ----------------------------------------------------------------------------- registrations


@bp.post("/competitions/<competition_id>/registration")
@op(
    "Register for a competition, or accept its changed terms (`accept_terms: true`)",
    body=m.RegistrationIn,
    responses={200: m.RegistrationOut},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def registration_create(competition_id):
    u = need_user()
    body = body_model(m.RegistrationIn)
    return json_out(
        reg_actions.register(
            s=db(),
            user=u,
            competition=competition_id,
            accept_terms=body.accept_terms,
            terms_version=body.terms_version,
            via="api",
        )
    )


@bp.get("/competitions/<competition_id>/registration")
@op(
    "Your registration for a competition and whether you may download and submit (why not)",
    responses={200: m.RegistrationOut},
    tags=("competitions",),
)
def registration_show(competition_id):
    u = need_user()
    return json_out(reg_actions.my_registration(s=db(), user=u, competition=competition_id))


@bp.get("/competitions/<competition_id>/participants")
@op(
    "The people registered for a competition, newest first (its owners and organizers)",
    query=m.ParticipantsQuery,
    responses={200: m.Page[m.ParticipantOut]},
    errors=(403,),
    tags=("competitions",),
)
def participants_list(competition_id):
    u = need_user()
    q = query_model(m.ParticipantsQuery)
    got = reg_actions.list_participants(
        s=db(),
        actor=u,
        competition=competition_id,
        status=q.status,
        after=cursor_id(q.cursor),
        limit=q.limit,
    )
    links = {"next_cursor": None, "next": None}
    if got.next_after is not None:
        cur = cursor_of(got.next_after)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return page_out(m.Page[m.ParticipantOut], [i.model_dump() for i in got.items], links)


@bp.post("/competitions/<competition_id>/participants/<user_id>/<action>")
@op(
    "Approve, reject, suspend, ban or reinstate a participant (by id or email; its organizers)",
    body=m.ParticipantDecision,
    responses={200: m.ParticipantOut},
    errors=(403, 404, 409),
    tags=("competitions",),
    description="`action` is approve, reject, suspend, ban or reinstate; reject, suspend and ban "
    "need a `reason` (the participant is shown it). A ban takes the person's runs off the live "
    "boards of the competition's tasks (published rankings keep them); reinstating brings them "
    "back.",
)
def participant_decide(competition_id, user_id, action):
    u = need_user()
    body = body_model(m.ParticipantDecision)
    return json_out(
        reg_actions.decide(
            s=db(),
            actor=u,
            competition=competition_id,
            user=user_id,
            action=action,
            reason=body.reason,
            via="api",
        )
    )
