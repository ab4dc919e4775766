"""The API of tasks that change (server/actions/tasks.py): a task's versions, its texts edited in
place, a new version from an edited bundle, archiving. Registered on the API's blueprint by
the API package like every route module."""

from __future__ import annotations

import tempfile
from pathlib import Path

from flask import request

from server import task_models as tm
from server.actions import tasks as task_actions
from server.api.common import body_model, bp, json_out, need_organizer, need_user
from server.api.openapi import op
from server.db import db
from server.exceptions import BundleRefused
from server.settings import get_settings


def saved_bundle(d: str) -> Path:
    """The request's bundle (the multipart field `bundle`), saved under `d`."""
    upload = request.files.get("bundle") or request.files.get("file")
    if upload is None or not upload.filename:
        raise BundleRefused(
            [{"line": None, "id": "bundle", "message": "required: the bundle as a .zip"}]
        )
    path = Path(d) / "bundle.zip"
    upload.save(path)  # bounded by MAX_CONTENT_LENGTH
    return path


def update_competition(u) -> object:
    """`POST /competitions/bundle` with `update`: an edited bundle of an existing competition."""
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        return task_actions.update_from_bundle(
            s=db(),
            actor=u,
            source=saved_bundle(d),
            via="api",
            settings=get_settings(),
            reason=request.form.get("reason", ""),
        )


@bp.get("/tasks/<task_id>/versions")
@op(
    "A task's version, its recorded versions and whether it is archived (organizers)",
    responses={200: tm.TaskStateOut},
    errors=(403, 404),
    tags=("organizers",),
)
def task_versions(task_id):
    return json_out(task_actions.task_state(s=db(), actor=need_user(), task=task_id))


@bp.patch("/tasks/<task_id>")
@op(
    "Change a task's texts in place: no new version, nothing rescored (organizers)",
    body=tm.TaskTextsIn,
    responses={200: tm.TaskStateOut},
    errors=(403, 404, 409, 422),
    tags=("organizers",),
    description="A task created from a bundle; each text is checked as a bundle's is (a 422 "
    "names the key). Its metrics, primary, files or gold change as a new version "
    "(`POST /tasks/{task_id}/versions`).",
)
def task_edit(task_id):
    u = need_user()
    body = body_model(tm.TaskTextsIn)
    return json_out(
        task_actions.edit_texts(
            s=db(),
            actor=u,
            task=task_id,
            texts=body.model_dump(exclude_unset=True),
            via="api",
            settings=get_settings(),
        )
    )


@bp.post("/tasks/<task_id>/versions")
@op(
    "A new version of a task from its competition's edited bundle (organizers)",
    form=tm.TaskVersionForm,
    responses={200: tm.BundleUpdateOut},
    errors=(403, 404, 409, 413, 422),
    tags=("organizers",),
    description="The bundle is checked in full as a new one is (a 422 lists every problem, "
    "nothing changed); only this task of it is applied. Its runs scored under the earlier "
    "version are marked stale and queued for rescoring; published rankings stay as "
    "published.",
)
def task_new_version(task_id):
    u = need_organizer(task_id)  # who asks, before the upload is read: a participant gets 403
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        got = task_actions.update_from_bundle(
            s=db(),
            actor=u,
            source=saved_bundle(d),
            via="api",
            settings=get_settings(),
            only=task_id,
            reason=request.form.get("reason", ""),
        )
    return json_out(got)


@bp.post("/tasks/<task_id>/archive")
@op(
    "Archive a task: its phases closed for good, its files and runs kept (organizers)",
    body=tm.TaskArchiveIn,
    responses={200: tm.TaskStateOut},
    errors=(403, 404),
    tags=("organizers",),
    description="Archiving an archived task changes nothing (`phases_closed` is empty).",
)
def task_archive(task_id):
    u = need_user()
    body = (
        body_model(tm.TaskArchiveIn)
        if (request.get_json(silent=True) or request.form)
        else tm.TaskArchiveIn()
    )
    return json_out(
        task_actions.archive_task(s=db(), actor=u, task=task_id, via="api", reason=body.reason)
    )
