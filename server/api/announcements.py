"""Announcements of a competition: list and post (mailed through the outbox)."""

from __future__ import annotations

from server import api_models as m
from server.actions import announcements as ann_actions
from server.api.common import (
    body_model,
    bp,
    current_viewer,
    json_out,
    need_competition_organizer,
    need_user,
    page_out,
)
from server.api.openapi import op
from server.db import db

# ----------------------------------------------------------------------------- announcements, mail


@bp.get("/competitions/<competition_id>/announcements")
@op(
    "The announcements of a competition, newest first",
    responses={200: m.Page[m.AnnouncementOut]},
    public=True,
    errors=(401, 404),
    tags=("competitions",),
)
def announcements_list(competition_id):
    items = ann_actions.list_announcements(
        s=db(), viewer=current_viewer(), competition=competition_id
    )
    return page_out(
        m.Page[m.AnnouncementOut],
        [a.model_dump() for a in items],
        {"next_cursor": None, "next": None},
    )


@bp.post("/competitions/<competition_id>/announcements")
@op(
    "Post an announcement: shown on the competition page and mailed to its approved "
    "participants (its owners and organizers)",
    body=m.AnnouncementCreate,
    responses={201: m.AnnouncementOut},
    errors=(403, 404),
    tags=("competitions",),
)
def announcement_create(competition_id):
    u = need_user()
    need_competition_organizer(u, competition_id)  # before the body: no hint to others
    body = body_model(m.AnnouncementCreate)
    result = ann_actions.announce(
        s=db(),
        actor=u,
        competition=competition_id,
        title=body.title,
        body_markdown=body.body_markdown,
        via="api",
    )
    return json_out(result, 201)


@bp.get("/competitions/<competition_id>/mail")
@op(
    "What you are mailed in a competition you registered for",
    responses={200: m.MailPreferencesOut},
    errors=(404,),
    tags=("competitions",),
)
def mail_preferences_show(competition_id):
    u = need_user()
    return json_out(ann_actions.get_mail_preferences(s=db(), user=u, competition=competition_id))


@bp.put("/competitions/<competition_id>/mail")
@op(
    "Choose what you are mailed in a competition: announcements (on unless turned off), a notice "
    "of each run scored or failed (off unless turned on)",
    body=m.MailPreferences,
    responses={200: m.MailPreferencesOut},
    errors=(404,),
    tags=("competitions",),
)
def mail_preferences_set(competition_id):
    u = need_user()
    body = body_model(m.MailPreferences)
    result = ann_actions.set_mail_preferences(
        s=db(),
        user=u,
        competition=competition_id,
        announcements=body.announcements,
        runs=body.runs,
        pending_registrations=body.pending_registrations,
        via="api",
    )
    return json_out(result)
