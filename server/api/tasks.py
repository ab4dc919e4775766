"""Tasks: the list, one task, the public download, the live board."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from flask import request

from server import api_models as m
from server.actions import downloads as download_actions
from server.actions.phases import (
    phase_fields,
)
from server.api.common import (
    ApiError,
    bp,
    cursor_id,
    cursor_of,
    find_task,
    need_user,
    out,
    page_out,
    query_model,
    quota_of,
    task_fields,
    task_phases,
    task_store,
)
from server.api.openapi import op
from server.db import db
from server.domain import download_rule, people
from server.domain.visibility import viewer_of
from server.settings import get_settings
from server.web import downloads
from server.web.leaderboard import serve_board, serve_significance_csv
from tasks import all_tasks

# ----------------------------------------------------------------------------- tasks


@bp.get("/tasks")
@op(
    "Tasks and their phases, with what is left of your quota",
    query=m.PageQuery,
    responses={200: m.Page[m.TaskSummary]},
    tags=("tasks",),
)
def tasks_list():
    u = need_user()
    page = query_model(m.PageQuery)
    s = db()
    ts = [t for t in all_tasks() if people.task_visible(s, u, t.id)]
    start = cursor_id(page.cursor) or 0
    chunk = ts[start : start + page.limit]
    items = []
    for t in chunk:
        d = task_fields(
            t,
            task_store(t.id).exists(),
            [phase_fields(p, quota_of(s, u, p)) for p in task_phases(s, t.id)],
        )
        items.append({k: d[k] for k in ("id", "title", "primary", "imported", "phases")})
    links = {"next_cursor": None, "next": None}
    if start + page.limit < len(ts):
        cur = cursor_of(start + page.limit)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return page_out(m.Page[m.TaskSummary], items, links)


@bp.get("/tasks/<task_id>")
@op("A task: its format, metrics, splits and phases", responses={200: m.TaskOut}, tags=("tasks",))
def task_detail(task_id):
    u = need_user()
    t = find_task(task_id)
    s = db()
    return out(
        m.TaskOut,
        **task_fields(
            t,
            task_store(t.id).exists(),
            [phase_fields(p, quota_of(s, u, p)) for p in task_phases(s, t.id)],
        ),
    )


@bp.get("/tasks/<task_id>/download")
@op(
    "A zip of the task's public inputs",
    query=m.DownloadQuery,
    responses={200: "application/zip", 302: None},
    tags=("tasks",),
    description="200: the zip. 302: on a site with an object store, a redirect to a short-lived "
    "presigned GET of the zip in the store (no authorization header needed there).",
)
def download(task_id):
    u = need_user()
    t = find_task(task_id)
    s = db()
    split = query_model(m.DownloadQuery).split
    try:
        given, withheld = download_actions.released(
            s=s, user=u, task=t, home=get_settings().home, area=split
        )
    except download_rule.DownloadRefused as e:
        raise ApiError(e.status, e.code, e.message) from e
    store = task_store(t.id)
    manifest = store.manifest()
    public_manifest = {k: manifest[k] for k in ("task", "version", "splits") if k in manifest}
    # a hidden split's counts would say how many gold rows it has (a links split's `links`)
    counts = {
        sp: v for sp, v in (manifest.get("counts") or {}).items() if not t.has_private_part(sp)
    }
    if counts:
        public_manifest["counts"] = counts
    # what is not released yet, and when it is (the CLI says so)
    public_manifest["withheld"] = {
        a.name: "blind" if a.blind else (a.release_at.isoformat() + "Z" if a.release_at else None)
        for a in withheld
    }
    members = [("task.json", json.dumps(public_manifest, indent=2).encode())]
    members += download_rule.declaration_member(t, get_settings().home)
    members += [(p.relative_to(store.root).as_posix(), p) for a in given for p in a.files]
    # with an object store: a redirect to a presigned GET of the zip (server.web.downloads)
    return downloads.zip_response(get_settings(), t.id, f"{t.id}-public.zip", members)


@bp.get("/tasks/<task_id>/leaderboard")
@op(
    "A task's leaderboard as your token may see it",
    query=m.LeaderboardQuery,
    responses={200: m.Board, 304: None},
    tags=("leaderboards",),
    description="The same board as /tasks/<id>/leaderboard.json, from the same render cache. "
    "A published phase answers with its final ranking as published (a `Snapshot`).",
)
def leaderboard(task_id):
    u = need_user()
    t = find_task(task_id)
    query_model(m.LeaderboardQuery)
    return serve_board(t.id, "json", who=viewer_of(u, db(), t.id).audience, task=t)


@bp.get("/tasks/<task_id>/leaderboard/significance.csv")
@op(
    "A board's full pairwise p-values as CSV",
    query=m.LeaderboardQuery,
    responses={200: "text/csv", 202: None, 304: None},
    tags=("leaderboards",),
    description="Every pair of the board's ranked rows (`a,team_a,b,team_b,p,p_holm`: positions "
    "on the board, 1 the best; the two-sided p-value of the paired bootstrap difference, raw and "
    "Holm-corrected over every pair), the same file as "
    "/tasks/<id>/leaderboard/significance.csv. A published phase answers with the matrix frozen "
    "with its version; otherwise a worker builds the current version's on the first request: "
    '202 (`{"status": "pending"}`, `Retry-After`) until it is there. Gzipped when the request '
    "accepts gzip.",
)
def leaderboard_significance(task_id):
    u = need_user()
    t = find_task(task_id)
    query_model(m.LeaderboardQuery)
    return serve_significance_csv(t.id, who=viewer_of(u, db(), t.id).audience)
