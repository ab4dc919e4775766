"""Competitions: list, show, create, edit, pages, bundles in and out, clone."""

from __future__ import annotations

import tempfile
from pathlib import Path

from flask import Response, request

from server import api_models as m
from server import task_models as tm
from server.actions import bundles as bundle_actions
from server.actions import competitions as comp_actions
from server.api import task_changes
from server.api.common import (
    ApiError,
    body_model,
    bp,
    current_viewer,
    json_out,
    need_admin,
    need_competition_organizer,
    need_user,
    page_out,
    query_model,
)
from server.api.openapi import op
from server.db import db
from server.settings import get_settings


@bp.get("/competitions")
@op(
    "The competitions you may see (drafts: site administrators only)",
    responses={200: m.Page[m.CompetitionSummary]},
    public=True,
    errors=(401,),
    tags=("competitions",),
)
def competitions_list():
    items = comp_actions.list_competitions(s=db(), viewer=current_viewer())
    return page_out(
        m.Page[m.CompetitionSummary],
        [c.model_dump() for c in items],
        {"next_cursor": None, "next": None},
    )


@bp.get("/competitions/<competition_id>")
@op(
    "A competition, its tasks and its pages (Markdown and sanitized HTML)",
    responses={200: m.CompetitionOut},
    public=True,
    errors=(401,),
    tags=("competitions",),
)
def competition_detail(competition_id):
    return json_out(
        comp_actions.get_competition(s=db(), viewer=current_viewer(), competition=competition_id)
    )


@bp.post("/competitions")
@op(
    "Create a competition (site administrators)",
    body=m.CompetitionCreate,
    responses={201: m.CompetitionOut},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def competition_create():
    u = need_user()
    body = body_model(m.CompetitionCreate)
    result = comp_actions.create_competition(
        s=db(),
        actor=u,
        via="api",
        competition=body.id,
        title=body.title,
        state=body.state,
        tasks=body.tasks,
    )
    return json_out(result, 201)


@bp.patch("/competitions/<competition_id>")
@op(
    "Change a competition's title, state or settings (its owners and organizers)",
    body=m.CompetitionEdit,
    responses={200: m.CompetitionOut},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_edit(competition_id):
    u = need_user()
    need_competition_organizer(u, competition_id)  # before the body: no hint to others
    body = body_model(m.CompetitionEdit)
    result = comp_actions.edit_competition(
        s=db(),
        actor=u,
        via="api",
        competition=competition_id,
        title=body.title,
        state=body.state,
        settings=body,
    )
    return json_out(result)


@bp.put("/competitions/<competition_id>/pages/<page>")
@op(
    "Create or replace a page of a competition (its owners and organizers)",
    body=m.CompetitionPageSet,
    responses={200: m.CompetitionPageOut},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_page_set(competition_id, page):
    u = need_user()
    need_competition_organizer(u, competition_id)  # before the body: no hint to others
    body = body_model(m.CompetitionPageSet)
    result = comp_actions.set_page(
        s=db(),
        actor=u,
        via="api",
        competition=competition_id,
        page=page,
        title=body.title,
        body_markdown=body.body_markdown,
        position=body.position,
    )
    return json_out(result)


# ----------------------------------------------------------------------------- bundles


@bp.post("/competitions/bundle")
@op(
    "Create a competition from a bundle (site administrators, who become its owner)",
    form=m.BundleForm,
    responses={201: m.CompetitionOut, 200: tm.BundleUpdateOut},
    errors=(403, 413, 422),
    tags=("competitions",),
    description="The bundle is checked in full first: a 422 lists every problem (`problems`, each "
    "with the YAML path or file as `id` and its `line`), and nothing is created. With `update=1`, "
    "an edited bundle of an existing competition changes its tasks (200).",
)
def competition_from_bundle():
    if request.form.get("update", "").lower() in ("1", "true"):  # an edited bundle: its changes
        return json_out(task_changes.update_competition(need_user()))
    u = need_admin()
    upload = request.files.get("bundle") or request.files.get("file")
    if upload is None or not upload.filename:
        raise ApiError(
            422,
            "invalid_request",
            "send the bundle as the multipart field `bundle` (a .zip)",
            problems=[{"line": None, "id": "bundle", "message": "required"}],
            total=1,
        )
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        path = Path(d) / "bundle.zip"
        upload.save(path)  # bounded by MAX_CONTENT_LENGTH
        result = bundle_actions.create_from_bundle(
            s=db(), actor=u, source=path, via="api", settings=get_settings()
        )
    return json_out(result, 201)


@bp.get("/competitions/<competition_id>/bundle")
@op(
    "The competition as a bundle, a zip that re-creates it (its owners and organizers)",
    query=m.BundleQuery,
    responses={200: "application/zip"},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_bundle(competition_id):
    u = need_user()
    q = query_model(m.BundleQuery)
    with tempfile.TemporaryDirectory(prefix="palimpsest-export-") as d:
        path = bundle_actions.export_competition(
            s=db(),
            actor=u,
            competition=competition_id,
            out=Path(d) / "bundle.zip",
            include_gold=q.gold == "1",
            settings=get_settings(),
        )
        data = path.read_bytes()
    return Response(
        data,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{competition_id}.zip"'},
    )


@bp.post("/competitions/<competition_id>/clone")
@op(
    "A new draft competition made from this one, its gold included (site administrators)",
    body=m.CloneIn,
    responses={201: m.CompetitionOut},
    errors=(403, 404, 422),
    tags=("competitions",),
)
def competition_clone(competition_id):
    u = need_admin()
    body = body_model(m.CloneIn)
    result = bundle_actions.clone_competition(
        s=db(),
        actor=u,
        competition=competition_id,
        new_id=body.id,
        via="api",
        settings=get_settings(),
    )
    return json_out(result, 201)
