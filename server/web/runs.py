"""The web side of blind runs: a team submits its system, follows its run, and organizers review
runs. Each page translates to one action of server/actions/code_runs.py."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from server.actions import code_runs as run_actions
from server.db import db
from server.domain import people
from server.exceptions import (
    Forbidden,
    LifecycleRefused,
    NotFound,
    UploadFieldsInvalid,
)
from server.web.auth import current_user, login_required
from server.web.pages import task_or_404, upload_page

bp = Blueprint("runs", __name__)


@bp.route("/tasks/<task_id>/system", methods=["GET", "POST"])
@login_required
def submit(task_id: str):
    return upload_page(task_id, system=True)


@bp.route("/systems")
def systems_help():
    """How systems run: the archive, what a run sees, its limits."""
    return render_template("runs/help.html")


@bp.route("/runs/<int:run_id>")
@login_required
def show(run_id: int):
    u = current_user()
    try:
        run = run_actions.get_run(s=db(), run_id=run_id, viewer=u)
    except NotFound:
        abort(404)
    organizer = people.is_admin(u) or people.organizes_task(db(), u, run.task)
    return render_template("runs/show.html", run=run, organizer=organizer)


@bp.post("/runs/<int:run_id>/review")
@login_required
def review(run_id: int):
    f = request.form
    try:
        run_actions.review_run(
            s=db(),
            run_id=run_id,
            actor=current_user(),
            decision=f.get("decision"),  # always named: nothing is released by default
            log=f.get("log") if f.get("decision") == "redact" else None,
            note=f.get("note", ""),
        )
    except NotFound:
        abort(404)
    except Forbidden:
        abort(403)
    except (LifecycleRefused, UploadFieldsInvalid) as e:
        flash(str(e), "error")
    return redirect(request.form.get("next") or url_for("runs.show", run_id=run_id))


@bp.route("/tasks/<task_id>/runs")
@login_required
def listing(task_id: str):
    t = task_or_404(task_id)
    waiting = request.args.get("awaiting_review") == "1"
    try:
        got = run_actions.list_runs(
            s=db(), task_id=t.id, actor=current_user(), awaiting_review=waiting
        )
    except Forbidden:
        abort(403)
    return render_template("runs/list.html", task=t, runs=got.runs, waiting=waiting)
