"""Submissions: upload (plain and large, through the store), list one's own, show, choose the
primary run, show or hide, delete; organizers rescore and set visibility.
"""

from __future__ import annotations

from flask import request
from sqlmodel import select

from server import api_models as m
from server.actions import large_uploads, reads
from server.actions import submissions as sub_actions
from server.api.common import (
    ApiError,
    body_model,
    bp,
    find_task,
    json_out,
    need_organizer,
    need_user,
    own_submission,
    page_out,
    query_model,
    runs_page,
    submission_out,
)
from server.api.openapi import op
from server.db import db
from server.domain import people, submissions
from server.exceptions import EmptyUpload
from server.models import (
    Phase,
)
from server.settings import get_settings

# ----------------------------------------------------------------------------- submissions


def flag(name: str, default: bool = False) -> bool:
    v = request.form.get(name)
    if v is None:
        return default
    return v.lower() in ("1", "true", "yes", "on")


@bp.post("/tasks/<task_id>/submissions")
@op(
    "Upload a prediction file",
    form=m.UploadForm,
    responses={201: m.SubmissionOut, 200: m.SubmissionOut},
    errors=(400, 403, 409, 413, 422, 429),
    tags=("submissions",),
    description="201: a new submission, queued for scoring. 200: this very file was submitted "
    "before by your team in this phase (`duplicate: true`, counted once). `primary=true` makes "
    "it your team's primary (ranked) run of the phase.",
)
def create(task_id):
    try:
        sub, duplicate, s, u = take_upload(task_id, system=False)
    except EmptyUpload:
        raise ApiError(
            422,
            "invalid_submission",
            "the file is empty",
            problems=[{"line": None, "id": None, "message": "the file is empty"}],
            total=1,
        ) from None
    if duplicate:
        return submission_out(s, u, sub, 200, duplicate=True)
    return submission_out(s, u, sub, 201, uploaded=True, duplicate=False)


def take_upload(task_id: str, *, system: bool):
    """The API's one upload: the multipart form (the file as `file`, a system as `code`) into one
    call of the intake (`server.actions.submissions.submit`); returns what it returns, the
    session and the user."""
    u = need_user()
    t = find_task(task_id)
    fields = sub_actions.read_upload_fields(request.form)
    name = "code" if system else "file"
    f = request.files.get(name)
    if f is None:
        what = "the system's zip" if system else "the prediction file"
        raise ApiError(400, "no_file", f"send {what} as the multipart field {name!r}")
    s = db()
    got, duplicate = sub_actions.submit(
        s=s,
        user=u,
        task_id=t.id,
        fields=fields,
        stream=f.stream,
        filename=f.filename or "",
        settings=get_settings(),
        system=system,
    )
    return got, duplicate, s, u


@bp.post("/tasks/<task_id>/uploads")
@op(
    "Start a large upload straight to the object store",
    body=m.LargeUploadIn,
    responses={201: m.LargeUploadOut},
    errors=(403, 404, 409, 413, 503),
    tags=("submissions",),
    description="A site with an object store: one presigned PUT URL per part; send the parts, "
    "then `POST /uploads/complete` (409 `no_store` on a site without one: use the plain upload).",
)
def large_upload_start(task_id):
    body = body_model(m.LargeUploadIn)
    out = large_uploads.start(
        s=db(),
        user=need_user(),
        task_id=find_task(task_id).id,
        phase=body.phase,
        filename=body.filename,
        size=body.size,
        settings=get_settings(),
    )
    return json_out(out, 201)


@bp.post("/uploads/parts")
@op(
    "The parts of a large upload the store holds, with fresh URLs for the others",
    body=m.LargeUploadTicket,
    responses={200: m.LargeUploadOut},
    errors=(404, 409, 503),
    tags=("submissions",),
)
def large_upload_parts():
    body = body_model(m.LargeUploadTicket)
    return json_out(
        large_uploads.parts(user=need_user(), ticket=body.upload, settings=get_settings())
    )


@bp.post("/uploads/complete")
@op(
    "Complete a large upload: it becomes a submission, as a plain upload does",
    body=m.LargeUploadComplete,
    responses={201: m.SubmissionOut, 200: m.SubmissionOut},
    errors=(403, 404, 409, 413, 422, 429, 503),
    tags=("submissions",),
)
def large_upload_complete():
    body = body_model(m.LargeUploadComplete)
    u = need_user()
    s = db()
    sub, duplicate = large_uploads.complete(
        s=s,
        user=u,
        ticket=body.upload,
        fields=m.UploadFields.model_validate(body.model_dump(exclude={"upload"})),
        settings=get_settings(),
    )
    if duplicate:
        return submission_out(s, u, sub, 200, duplicate=True)
    return submission_out(s, u, sub, 201, uploaded=True, duplicate=False)


@bp.get("/submissions")
@op(
    "Your team's submissions (organizers: `mine=0` for everyone's)",
    query=m.SubmissionsQuery,
    responses={200: m.Page[m.SubmissionOut]},
    tags=("submissions",),
)
def my_submissions():
    u = need_user()
    page = query_model(m.SubmissionsQuery)
    s = db()
    organized = people.organized_tasks(s, u)  # None: every task (an administrator)
    if page.mine == "0" and (organized is None or organized):
        # everyone's runs of the tasks this organizer organizes
        runs = reads.organizer_runs(s, u, task=page.task, status=page.status)
    else:
        team_ids = people.team_ids_of(s, u)
        if not team_ids:
            return page_out(m.Page[m.SubmissionOut], [], {"next_cursor": None, "next": None})
        runs = submissions.team_runs(team_ids, task=page.task, status=page.status)
    return runs_page(s, u, runs, page, list(s.exec(select(Phase))))


@bp.get("/submissions/<int:submission_id>")
@op(
    "A submission: its status, every problem, the scores you may see",
    responses={200: m.SubmissionOut},
    tags=("submissions",),
)
def submission(submission_id):
    u = need_user()
    s = db()
    return submission_out(s, u, own_submission(s, u, submission_id))


@bp.post("/submissions/<int:submission_id>/primary")
@op(
    "Make a submission your team's primary (ranked) run of its phase",
    responses={200: m.SubmissionOut},
    errors=(403,),
    tags=("submissions",),
    body=m.PrimaryChoice,
    description="SemEval's convention: one primary run per team and phase, the others "
    'contrastive. With `{"board": NAME}`, the run becomes the team\'s ranked run on that '
    "declared board of the phase (a track's), whatever its primary run; no score is read. The "
    'team chooses its run; an organizer of the task may choose for the team with `{"reason": '
    "...}` (kept in the audit log), under the same checks.",
)
def primary(submission_id):
    u = need_user()
    raw = request.get_data(cache=True)
    body = body_model(m.PrimaryChoice) if raw or request.form else m.PrimaryChoice()
    s = db()
    sub = sub_actions.choose_primary(
        s=s, submission_id=submission_id, actor=u, board=body.board, reason=body.reason
    )
    return submission_out(s, u, sub)


@bp.post("/submissions/<int:submission_id>/public")
@op(
    "Show your team's run on the public board, or keep it to your team",
    body=m.ShowPublicly,
    responses={200: m.SubmissionOut},
    errors=(403, 404),
    tags=("submissions",),
    description="A ranked run kept to the team is ranked on the board the team and the "
    "organizers see, but has no row on the public board nor in a published final ranking.",
)
def shown_publicly(submission_id):
    u = need_user()
    body = body_model(m.ShowPublicly)
    s = db()
    sub = sub_actions.set_shown_publicly(
        s=s, submission_id=submission_id, actor=u, show=body.show_publicly
    )
    return submission_out(s, u, sub)


@bp.delete("/submissions/<int:submission_id>")
@op(
    "Delete your team's run (kept for the organizers, who may restore it)",
    responses={200: m.SubmissionOut},
    errors=(403, 404),
    tags=("submissions",),
    description="The run leaves every board at once and stays in your list, marked `removed`; "
    "it still counts against the phase's quota. An organizer may restore it "
    "(`POST .../visibility`, `restore`).",
)
def delete_submission(submission_id):
    u = need_user()
    s = db()
    sub = sub_actions.delete_run(s=s, submission_id=submission_id, actor=u)
    return submission_out(s, u, sub)


# -------------------------------------------------------------------------- organizers: submissions


@bp.post("/submissions/<int:submission_id>/rescore")
@op(
    "Score a submission again (organizers)",
    body=m.Rescore,
    responses={200: m.Rescored},
    errors=(403, 409),
    tags=("organizers",),
)
def rescore_one(submission_id):
    u = need_organizer(submission_id=submission_id)
    body = body_model(m.Rescore) if (request.get_json(silent=True) or request.form) else m.Rescore()
    result = sub_actions.rescore_submission(
        s=db(),
        submission_id=submission_id,
        actor=u,
        settings=get_settings(),
        reason=body.reason,
    )
    return json_out(result)


@bp.post("/tasks/<task_id>/rescore")
@op(
    "Score every final submission of a task (or of one phase) again (organizers)",
    body=m.TaskRescore,
    responses={200: m.Rescored},
    errors=(403,),
    tags=("organizers",),
)
def rescore_all(task_id):
    u = need_organizer(task_id)
    body = (
        body_model(m.TaskRescore)
        if (request.get_json(silent=True) or request.form)
        else m.TaskRescore()
    )
    result = sub_actions.rescore_selection(
        s=db(),
        task_id=find_task(task_id).id,
        actor=u,
        settings=get_settings(),
        phase=body.phase,
        include_invalid=body.include_invalid,
        reason=body.reason,
        via="api",
    )
    return json_out(result)


@bp.post("/submissions/<int:submission_id>/visibility")
@op(
    "Hide, unhide, remove or restore a submission (organizers)",
    body=m.Visibility,
    responses={200: m.SubmissionOut},
    errors=(403, 409),
    tags=("organizers",),
    description="Nothing is deleted for real; hide and remove need a reason, which the team is "
    "shown.",
)
def visibility(submission_id):
    u = need_organizer(submission_id=submission_id)
    body = body_model(m.Visibility)
    s = db()
    sub = sub_actions.set_visibility(
        s=s, submission_id=submission_id, action=body.action, actor=u, reason=body.reason
    )
    return submission_out(s, u, sub)


@bp.post("/submissions/<int:submission_id>/track")
@op(
    "Move a run to another track (organizers)",
    body=m.TrackMove,
    responses={200: m.SubmissionOut},
    errors=(403, 409, 422),
    tags=("organizers",),
    description="The run's fact sheet answers the new track (one of the track field's choices, "
    "within its rules); the move and its reason are audited and the phase's boards built again. "
    "A team cannot move its own run.",
)
def move_track(submission_id):
    u = need_organizer(submission_id=submission_id)
    body = body_model(m.TrackMove)
    s = db()
    sub = sub_actions.move_track(
        s=s,
        submission_id=submission_id,
        track=body.track,
        reason=body.reason,
        field=body.field,
        actor=u,
        settings=get_settings(),
        via="api",
    )
    return submission_out(s, u, sub)
