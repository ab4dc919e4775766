"""The web side of blind runs: a team submits its system, follows its run, and organizers review
runs. Each page translates to one action of server/actions/code_runs.py."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import BooleanField, SelectField, StringField, TextAreaField

from server.actions import code_runs as run_actions
from server.actions import submissions as sub_actions
from server.db import db
from server.domain import people
from server.errors import status_of
from server.exceptions import (
    BundleRefused,
    Forbidden,
    LifecycleRefused,
    NotFound,
    SubmissionRefused,
    UploadFieldsInvalid,
)
from server.settings import get_settings
from server.web.auth import current_user, login_required
from server.web.pages import WEB_CHECKBOXES, fact_sheet, phases_of, task_or_404, user_team

bp = Blueprint("runs", __name__)


class SystemForm(FlaskForm):
    """A team's system: a zip with system.yaml (docs/blind-runs.md) and the upload's fields."""

    class Meta:
        csrf = False  # checked app-wide

    phase = SelectField("Phase", validate_choice=True)
    code = FileField("System (a zip with system.yaml)", validators=[FileRequired("choose a zip")])
    method_name = StringField("Method name", render_kw={"maxlength": 200})
    description = TextAreaField("Short description", render_kw={"maxlength": 5000, "rows": 4})
    url = StringField("Paper or code URL (optional)", render_kw={"maxlength": 500, "type": "url"})
    show_publicly = BooleanField("Show on the public leaderboard", default=True)
    primary = BooleanField("Make its output our primary (ranked) run of the phase")


@bp.route("/tasks/<task_id>/system", methods=["GET", "POST"])
@login_required
def submit(task_id: str):
    t = task_or_404(task_id)
    if user_team(t.id) is None:
        flash("Create or join a team before submitting.", "error")
        return redirect(url_for("teams.mine"))
    phases = [p for p in phases_of(t.id) if p.accepts in ("code", "both")]
    if not phases:
        abort(404)
    form = SystemForm() if request.method == "POST" else SystemForm(formdata=None)
    form.phase.choices = [
        (
            p.name,
            f"{p.name} (split {p.split}{'; its inputs stay on the server' if p.blind else ''})",
        )
        for p in phases
    ]
    sheet = fact_sheet(t.id)

    def page(status=200):
        return render_template(
            "runs/submit.html", task=t, phases=phases, form=form, **sheet
        ), status

    if request.method != "POST":
        return page()
    ok = form.validate()
    try:
        fields = sub_actions.read_upload_fields(request.form, checkboxes=WEB_CHECKBOXES)
    except UploadFieldsInvalid as e:
        ok = False
        for name, message in e.fields.items():
            if name in form:
                form[name].errors = [*form[name].errors, message]
    if not ok:
        return page(400)
    s = db()
    try:
        run, duplicate = run_actions.submit_code(
            s=s,
            user=current_user(),
            task_id=t.id,
            fields=fields,
            stream=form.code.data.stream,
            filename=form.code.data.filename,
            settings=get_settings(),
        )
    except UploadFieldsInvalid as e:
        sheet["fact_errors"] = {
            k.removeprefix("facts."): v for k, v in e.fields.items() if k.startswith("facts.")
        }
        flash("Not submitted: " + e.message, "error")
        return page(422)
    except BundleRefused as e:  # the archive or its system.yaml: every problem
        sheet["problems"] = e.problems
        flash("Not submitted: " + e.message, "error")
        return page(422)
    except (SubmissionRefused, Forbidden, LifecycleRefused) as e:
        flash(str(e), "error")
        return page(status_of(e))
    if duplicate:
        flash(
            f"Your team submitted this very system in this phase before, as run #{run.id}.", "error"
        )
    else:
        flash("Submitted. Your system is queued to run.", "ok")
    return redirect(url_for("runs.show", run_id=run.id))


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
    try:
        run_actions.review_run(s=db(), run_id=run_id, actor=current_user())
    except NotFound:
        abort(404)
    except Forbidden:
        abort(403)
    except LifecycleRefused as e:
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
