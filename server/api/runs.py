"""Blind runs: submit a system, show a run, review its log (organizers), list a task's runs."""

from __future__ import annotations

from server import api_models as m
from server.actions import code_runs as run_actions
from server.api.common import body_model, bp, json_out, need_user, query_model
from server.api.openapi import op
from server.api.submissions import take_upload
from server.db import db

# ----------------------------------------------------------------------------- blind runs
# (server/actions/code_runs.py: a team's system run in the sandbox, its stages and log)


@bp.post("/tasks/<task_id>/runs")
@op(
    "Submit a system to run blind on the phase's inputs (phases that take code)",
    form=m.CodeUploadForm,
    responses={201: m.CodeRunOut, 200: m.CodeRunOut},
    errors=(400, 403, 404, 409, 413, 422, 429),
    tags=("runs",),
    description="201: the zip is checked (its members, system.yaml) and queued on the runs "
    "queue; its output becomes an ordinary submission, validated and scored like an uploaded "
    "file. Counts against the phase's limits and the team's compute budget. 200: this very "
    "archive was submitted before by your team in this phase: that run, counted once.",
)
def run_create(task_id):
    run, duplicate, s, u = take_upload(task_id, system=True)
    return json_out(run_actions.get_run(s=s, run_id=run.id, viewer=u), 200 if duplicate else 201)


@bp.get("/runs/<int:run_id>")
@op(
    "A code run: its stage, what it used, its submission and (when allowed) its log",
    responses={200: m.CodeRunOut},
    errors=(404,),
    tags=("runs",),
)
def run_show(run_id):
    return json_out(run_actions.get_run(s=db(), run_id=run_id, viewer=need_user()))


@bp.post("/runs/<int:run_id>/review")
@op(
    "Review an ended run: release its log as it is, redacted, or withhold it (organizers)",
    body=m.CodeRunReviewIn,
    responses={200: m.CodeRunOut},
    errors=(403, 404, 409, 422),
    tags=("runs",),
    description="On a blind phase its team reads nothing computed from the hidden inputs but its "
    "result's category and scores until this review: `release` shows what the review shows (the "
    "log, the output's problems line by line, the figures) as it is, `redact` the organizer's "
    "edited copy of that text (`log`) alone, `withhold` the note alone. The decision is always "
    "named; the audit log records what was released (its sha256 and size).",
)
def run_review(run_id):
    u = need_user()
    body = body_model(m.CodeRunReviewIn)
    got = run_actions.review_run(
        s=db(), run_id=run_id, actor=u, decision=body.decision, log=body.log, note=body.note
    )
    return json_out(got)


@bp.get("/tasks/<task_id>/runs")
@op(
    "A task's code runs, newest first (organizers)",
    query=m.CodeRunsQuery,
    responses={200: m.CodeRunsOut},
    errors=(403, 404),
    tags=("runs",),
)
def run_list(task_id):
    q = query_model(m.CodeRunsQuery)
    got = run_actions.list_runs(
        s=db(), task_id=task_id, actor=need_user(), awaiting_review=q.awaiting_review == "1"
    )
    return json_out(got)
