"""Phases: list, create, edit, the named phase actions, published rankings and exports."""

from __future__ import annotations

from flask import Response, request
from sqlmodel import select

from server import api_models as m
from server.actions import phases as phase_actions
from server.actions.exports import (
    export_ranking,
)
from server.actions.phase_help import PHASE_ACTION_HELP, phase_action_list
from server.actions.phases import (
    PHASE_ACTIONS,
    phase_action_options,
    phase_state_fields,
    version_fields,
)
from server.api.common import (
    ApiError,
    body_model,
    bp,
    find_phase,
    find_task,
    json_out,
    need_organizer,
    need_user,
    page_out,
    paginate,
    query_model,
)
from server.api.openapi import op
from server.db import db
from server.domain.publication import latest_ranking, published_board
from server.models import (
    Phase,
    RankingVersion,
)
from server.settings import get_settings

# ----------------------------------------------------------------------------- organizers: phases


@bp.get("/tasks/<task_id>/phases")
@op(
    "A task's phases with their state (organizers)",
    query=m.PageQuery,
    responses={200: m.Page[m.PhaseState]},
    errors=(403,),
    tags=("organizers",),
)
def phases_list(task_id):
    need_organizer(task_id)
    t = find_task(task_id)
    page = query_model(m.PageQuery)
    s = db()
    items, links = paginate(
        s, select(Phase).where(Phase.task_id == t.id), Phase.id, page, phase_state_fields
    )
    return page_out(m.Page[m.PhaseState], items, links)


@bp.post("/tasks/<task_id>/phases")
@op(
    "Create a phase",
    body=m.PhaseCreate,
    responses={201: m.PhaseState},
    errors=(403, 409),
    tags=("organizers",),
)
def phase_create(task_id):
    u = need_organizer(task_id)
    t = find_task(task_id)
    body = body_model(m.PhaseCreate)
    changes = {k: getattr(body, k) for k in body.model_fields_set if k not in ("name", "split")}
    if changes:
        changes = m.PhaseEdit.model_validate(changes).model_dump(include=set(changes))
    got = phase_actions.create_phase(
        s=db(),
        task_id=t.id,
        name=body.name,
        split=body.split,
        actor=u,
        home=get_settings().home,
        via="api",
        changes=changes,
    )
    return json_out(got, 201)


@bp.patch("/tasks/<task_id>/phases/<phase_name>")
@op(
    "Change a phase's window, limits or public fraction",
    body=m.PhaseEdit,
    responses={200: m.PhaseState},
    errors=(403, 409),
    tags=("organizers",),
)
def phase_edit(task_id, phase_name):
    u = need_organizer(task_id)
    t = find_task(task_id)
    body = body_model(m.PhaseEdit)
    changes = body.model_dump(include=set(body.model_fields_set))
    if "public_fraction" in changes and changes["public_fraction"] is None:
        raise ApiError(422, "invalid_request", "public_fraction: a number in (0, 1]")
    return json_out(
        phase_actions.edit_phase(
            s=db(), task_id=t.id, phase=phase_name, changes=changes, actor=u, via="api"
        )
    )


@bp.post("/tasks/<task_id>/phases/<phase_name>/<action>")
@op(
    f"{phase_action_list().capitalize()} a phase",
    body=m.PhaseAction,
    path_enums={"action": list(PHASE_ACTIONS)},
    responses={200: m.PhaseActionOut, 201: m.PhaseActionOut},
    errors=(403, 409),
    tags=("organizers",),
    description="`action`, one of:\n\n"
    + "".join(f"- `{k}`: {v}\n" for k, v in PHASE_ACTION_HELP.items())
    + "\nPublish answers 201 with the new version of the final ranking; `close: true` closes an "
    "open phase in the same step; a correction (version 2 on) needs a `reason`.",
)
def phase_action(task_id, phase_name, action):
    u = need_organizer(task_id)
    if action not in PHASE_ACTIONS:
        raise ApiError(
            404,
            "unknown_action",
            f"no phase action {action!r} ({', '.join(PHASE_ACTIONS)})",
        )
    body = (
        body_model(m.PhaseAction)
        if (request.get_json(silent=True) or request.form)
        else m.PhaseAction()
    )
    extra = phase_action_options(action, body.model_dump(), get_settings())
    result = PHASE_ACTIONS[action](
        s=db(), task_id=find_task(task_id).id, phase=phase_name, actor=u, via="api", **extra
    )
    return json_out(result, 201 if result.ranking is not None else 200)


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings")
@op(
    "Every published version of a phase's final ranking (organizers)",
    query=m.PageQuery,
    responses={200: m.RankingsOut},
    errors=(403,),
    tags=("organizers",),
)
def rankings(task_id, phase_name):
    need_organizer(task_id)
    t = find_task(task_id)
    page = query_model(m.PageQuery)
    s = db()
    p = find_phase(s, t.id, phase_name)
    items, links = paginate(
        s,
        select(RankingVersion).where(RankingVersion.phase_id == p.id),
        RankingVersion.id,
        page,
        version_fields,
    )
    return page_out(m.RankingsOut, items, links, phase=phase_state_fields(p))


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings/<int:version>")
@op(
    "One published version of the final ranking, byte for byte as published",
    query=m.BoardQuery,
    responses={200: m.Snapshot},
    tags=("leaderboards",),
    description="`?board=NAME`: that board's ranking in the version (default: the main board).",
)
def ranking_version(task_id, phase_name, version):
    need_user()
    t = find_task(task_id)
    s = db()
    p = find_phase(s, t.id, phase_name)
    board = query_model(m.BoardQuery).board
    rv = latest_ranking(s, p.id, version)
    if rv is None:
        raise ApiError(404, "not_published", f"{t.id}/{p.name} has no published version {version}")
    rv = published_board(s, rv, board)
    return Response(rv.body_json.encode("utf-8"), mimetype="application/json")


@bp.get("/tasks/<task_id>/phases/<phase_name>/export")
@op(
    "The final ranking as CSV, JSON or a LaTeX table (organizers)",
    query=m.ExportQuery,
    responses={200: ("text/csv", "application/json", "application/x-tex")},
    errors=(403, 409),
    tags=("organizers",),
    description="The published snapshot (`version`, default the latest) byte for byte, or a "
    "preview before publication; `format` csv (text/csv), json (application/json) or tex "
    "(application/x-tex). `facts=true`: the fact sheets of the published version's rows (csv or "
    "json; 409 before publication).",
)
def export(task_id, phase_name):
    u = need_organizer(task_id)
    t = find_task(task_id)
    q = query_model(m.ExportQuery)
    s = db()
    p = find_phase(s, t.id, phase_name)
    ex = export_ranking(
        s,
        t,
        p,
        q.format,
        q.version,
        actor=u,
        settings=get_settings(),
        via="api",
        facts=q.facts,
        board=q.board,
    )
    return Response(
        ex.body,
        content_type=ex.mimetype,
        headers={"Content-Disposition": f'attachment; filename="{ex.filename}"'},
    )
