"""Baselines: the systems a task offers, queueing their runs, their runs' states."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import current_app, request
from sqlmodel import select

from baselines.systems import Options
from server import api_models as m
from server.actions.exports import (
    QueueUnreachable,
    queue_baselines,
)
from server.actions.exports import baseline_runs as runs_of
from server.api.common import (
    ApiError,
    body_model,
    bp,
    cursor_id,
    cursor_of,
    find_phase,
    find_task,
    need_admin,
    need_organizer,
    out,
    page_out,
    query_model,
    runs_page,
    task_phases,
)
from server.api.openapi import op
from server.db import db
from server.jobs.queue import connect
from server.models import (
    Submission,
)
from server.settings import get_settings


@bp.get("/tasks/<task_id>/baselines")
@op(
    "A task's baseline entries, newest first (organizers)",
    query=m.BaselinesQuery,
    responses={200: m.Page[m.SubmissionOut]},
    errors=(403,),
    tags=("organizers",),
)
def baselines_list(task_id):
    u = need_organizer(task_id)
    t = find_task(task_id)
    page = query_model(m.BaselinesQuery)
    s = db()
    runs = select(Submission).where(Submission.task_id == t.id, Submission.is_baseline.is_(True))
    if page.phase:
        runs = runs.where(Submission.phase_id == find_phase(s, t.id, page.phase).id)
    return runs_page(s, u, runs, page, task_phases(s, t.id))


@bp.post("/tasks/<task_id>/baselines")
@op(
    "Queue baseline runs of a task (organizers)",
    body=m.BaselineRuns,
    responses={202: m.BaselinesQueued},
    errors=(403, 503),
    tags=("organizers",),
    description="A worker of the baselines queue (`palimpsest worker --queue baselines`) runs each "
    "system and records its file as a baseline entry.",
)
def baselines_queue(task_id):
    u = need_organizer(task_id)
    t = find_task(task_id)
    body = body_model(m.BaselineRuns)
    opts = Options(model=body.model, cross_model=body.cross_model, device=body.device).job_args()
    try:
        jobs = queue_baselines(
            db(),
            t,
            body.systems,
            opts,
            actor=u,
            settings=get_settings(),
            via="api",
        )
    except QueueUnreachable as e:
        raise ApiError(503, "queue_unreachable", str(e)) from None
    return out(m.BaselinesQueued, 202, jobs=jobs, systems=body.systems)


@bp.get("/baselines/runs")
@op(
    "Baseline runs on the baselines queue: waiting, running, finished (what they recorded), failed "
    "(organizers)",
    query=m.PageQuery,
    responses={200: m.Page[m.BaselineRun]},
    errors=(403, 503),
    tags=("organizers",),
)
def baseline_runs():
    need_admin()
    page = query_model(m.PageQuery)
    try:  # only look: never start the embedded Redis for this
        conn = current_app.extensions.get("palimpsest.redis") or connect(
            get_settings(), start_embedded=False
        )
        conn.ping()
        runs = runs_of(conn, get_settings())
    except Exception as e:  # noqa: BLE001 — say plainly that the queue cannot be read
        raise ApiError(
            503,
            "queue_unreachable",
            f"the baselines queue is not reachable ({type(e).__name__}: {e})",
        ) from None
    start = cursor_id(page.cursor) or 0
    links = {"next_cursor": None, "next": None}
    if start + page.limit < len(runs):
        cur = cursor_of(start + page.limit)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return page_out(m.Page[m.BaselineRun], runs[start : start + page.limit], links)
