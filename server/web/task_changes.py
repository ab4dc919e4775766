"""The organizer's controls of a task that changes (server/actions/tasks.py), on its phase pages:
its texts edited in place, a new version from its competition's edited bundle, archiving."""

from __future__ import annotations

import tempfile
from pathlib import Path

from flask import Blueprint, flash, redirect, request, url_for

from server.actions import tasks as task_actions
from server.db import db
from server.exceptions import BundleRefused, Forbidden, LifecycleRefused, NotFound
from server.settings import get_settings
from server.task_models import change_line
from server.web.auth import current_user, organizer_required, safe_next
from tasks.taskversions import EDITABLE_TEXTS

bp = Blueprint("task_changes", __name__, url_prefix="/organizer/tasks")
SHOWN_PROBLEMS = 10


def _back():
    return redirect(safe_next(request.form.get("next"), url_for("organizer.dashboard")))


def _refused(e: Exception) -> None:
    flash(f"Refused: {getattr(e, 'message', None) or e}.", "error")
    for p in getattr(e, "problems", [])[:SHOWN_PROBLEMS]:
        line = f" (line {p['line']})" if p.get("line") else ""
        flash(f"{p['id']}{line}: {p['message']}", "error")


REFUSALS = (BundleRefused, LifecycleRefused, NotFound, Forbidden)


@bp.route("/<task_id>/texts", methods=["POST"])
@organizer_required
def texts(task_id: str):
    """The task's texts, changed in place (nothing rescored)."""
    given = {k: request.form[k].strip() for k in EDITABLE_TEXTS if k in request.form}
    try:
        task_actions.edit_texts(
            s=db(), actor=current_user(), task=task_id, texts=given, via="web",
            settings=get_settings(),
        )  # fmt: skip
        flash(f"The texts of {task_id} are saved; nothing is rescored.", "ok")
    except REFUSALS as e:
        _refused(e)
    return _back()


@bp.route("/<task_id>/version", methods=["POST"])
@organizer_required
def version(task_id: str):
    """A new version of the task from its competition's edited bundle (a .zip)."""
    upload = request.files.get("bundle")
    if upload is None or not upload.filename:
        flash("Choose the competition's edited bundle (a .zip) to upload.", "error")
        return _back()
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        path = Path(d) / "bundle.zip"
        upload.save(path)
        try:
            got = task_actions.update_from_bundle(
                s=db(),
                actor=current_user(),
                source=path,
                via="web",
                settings=get_settings(),
                only=task_id,
                reason=request.form.get("reason", ""),
            )
        except REFUSALS as e:
            _refused(e)
            return _back()
    for t in got.tasks:
        flash(change_line(t.model_dump(mode="json")) + ".", "ok")
    return _back()


@bp.route("/<task_id>/archive", methods=["POST"])
@organizer_required
def archive(task_id: str):
    """Archive the task: its phases closed for good, its files and runs kept."""
    try:
        got = task_actions.archive_task(
            s=db(), actor=current_user(), task=task_id, via="web",
            reason=request.form.get("reason", ""),
        )  # fmt: skip
        closed = ", ".join(got.phases_closed) or "none was open"
        flash(f"{task_id} is archived; phases closed: {closed}.", "ok")
    except REFUSALS as e:
        _refused(e)
    return _back()
