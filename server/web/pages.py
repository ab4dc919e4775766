"""What participants see: tasks, their data, phases and quotas, the submit form and their
submissions."""

from __future__ import annotations

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlmodel import select

from server.actions import campaigns as campaign_actions
from server.actions import common as action_common
from server.actions import competitions as comp_actions
from server.actions import downloads as download_actions
from server.actions import phases as phase_actions
from server.actions import submissions as sub_actions
from server.actions.common import phase_or_default
from server.api_models import YES, UploadFields
from server.db import db
from server.domain import boards, code_runs, download_rule, facts, people, submissions
from server.domain.accounts import submission_filter
from server.domain.lifecycle import RANKED_RUN_RULE
from server.domain.sanitize import render_markdown
from server.domain.submissions import phase_state, shown_scores
from server.domain.submissions import quota as backbone_quota
from server.domain.visibility import shown_part, viewer_of
from server.exceptions import (
    BundleRefused,
    Forbidden,
    LifecycleRefused,
    NotFound,
    SubmissionRefused,
    UploadFieldsInvalid,
)
from server.jobs import waits
from server.models import BoardChoice, Phase, Score, Submission, Team
from server.settings import get_settings
from server.statuses import status_of
from server.web import downloads
from server.web.auth import current_user, login_required
from server.web.forms import SubmitForm, SystemForm, UploadForm
from server.web.refusals import refusal
from tasks import all_tasks, starting_kit
from tasks.bundle_models import board_lets_in
from tasks.store import TaskStore

bp = Blueprint("pages", __name__)

PHASE_ORDER = {"dev": 0, "test": 1}


def task_or_404(task_id: str):
    """The declared task, if the visitor may see it (a draft competition's task is its people's
    only); 404 otherwise."""
    try:
        return action_common.visible_task(db(), current_user(), task_id)
    except NotFound:
        abort(404)


def phase_or_404(phase_id: int) -> Phase:
    """The phase with this id; 404 otherwise."""
    try:
        return action_common.phase_by_id(db(), phase_id)
    except NotFound:
        abort(404)


def phases_of(task_id: str) -> list[Phase]:
    """The task's phases, created from the task's splits the first time they are asked for."""
    s = db()
    rows = s.exec(select(Phase).where(Phase.task_id == task_id)).all()
    if not rows:
        phase_actions.ensure_phases(s=s)
        rows = s.exec(select(Phase).where(Phase.task_id == task_id)).all()
    return sorted(rows, key=lambda p: (PHASE_ORDER.get(p.name, 9), p.name))


def quota(team: Team | None, phase: Phase) -> dict | None:
    """What remains of a team's allowance in a phase, as the backbone counts it."""
    if team is None:
        return None

    return backbone_quota(db(), team=team, phase=phase)


def user_team(task_id: str | None = None) -> Team | None:
    """The signed-in person's team in the task's competition (or their account-wide team)."""
    u = current_user()
    if u is None:
        return None
    s = db()
    c = people.competition_of_task(s, task_id) if task_id else None
    return people.team_of(s, u, None if c is None else c.id)


# ----------------------------------------------------------------------------- tasks


@bp.route("/")
def index():
    home = get_settings().home
    u = current_user()
    s = db()
    # a draft competition's tasks are its people's; a task with no data only the administrators'
    rows = [
        (t, imported)
        for t in all_tasks()
        if people.task_visible(s, u, t.id)
        and ((imported := TaskStore(t.id, home).exists()) or people.is_admin(u))
    ]
    competitions = [
        c
        for c in comp_actions.list_competitions(s=db(), viewer=current_user())
        if c.state == "visible"
    ]
    in_team = u is not None and bool(people.team_ids_of(db(), u))
    return render_template(
        "tasks/index.html",
        tasks=rows,
        competitions=competitions,
        in_team=in_team,
        assessments=campaign_actions.my_campaigns(s=s, user=u),
    )


@bp.route("/tasks/<task_id>")
def task(task_id: str):
    t = task_or_404(task_id)
    store = TaskStore(t.id, get_settings().home)
    imported = store.exists()
    team = user_team(t.id)
    phases = [(p, phase_state(p), quota(team, p)) for p in phases_of(t.id)]
    # every public folder of the task (splits, training data), released now or with its date
    areas = [a for a in download_rule.areas(db(), t, get_settings().home) if a.files]
    kit = next((a for a in areas if a.name == download_rule.KIT), None)
    if kit is not None:  # the bundle's own kit: its README, sanitized like every organizer text
        readmes = [p for p in kit.files if p.name.lower() == "readme.md"]
        readme = min(readmes, key=lambda p: len(p.parts), default=None)  # the kit's own
        kit_text = readme.read_text(encoding="utf-8", errors="replace") if readme else ""
        kit_url = url_for("pages.download", task_id=t.id, split=download_rule.KIT)
    else:
        kit_text = starting_kit.readme(t, _systems(t.id), _site(), _phase_splits(t.id))
        kit_url = url_for("pages.kit", task_id=t.id)

    return render_template(
        "tasks/task.html",
        task=t,
        imported=imported,
        areas=[a for a in areas if a is not kit],
        kit_html=render_markdown(kit_text) if kit_text else "",
        kit_url=kit_url,
        phases=phases,
        team=team,
        ranked_run_rule=RANKED_RUN_RULE,
    )


def _site() -> str:
    """The site's address for a kit's login line: its base URL, else the address asked."""
    return (get_settings().base_url or request.host_url).rstrip("/")


def _phase_splits(task_id: str) -> dict[str, str]:
    """The task's phases, name: split (the kit's submit step names the phase of its file)."""
    return {p.name: p.split for p in phases_of(task_id)}


def _systems(task_id: str) -> tuple[str, ...]:
    """The reference systems that apply to a task (loaded when a kit is asked for)."""
    from baselines.systems import SYSTEMS  # the baselines' module loads when a kit is asked for

    return SYSTEMS.get(task_id, ())


@bp.route("/tasks/<task_id>/starting-kit.zip")
def kit(task_id: str):
    """The starting kit generated from the task's declaration (no data in it)."""
    t = task_or_404(task_id)
    files = starting_kit.kit_files(t, _systems(t.id), _site(), _phase_splits(t.id))
    return Response(
        starting_kit.kit_zip(t, files),
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{t.id}-starting-kit.zip"'},
    )


@bp.route("/tasks/<task_id>/data/<split>.zip")
def download(task_id: str, split: str):
    """A zip of one public area of a task (a split's inputs, training data, a starting kit) when
    server.domain.download_rule allows it; never anything under gold/."""
    t = task_or_404(task_id)
    try:
        given, _ = download_actions.released(
            s=db(), user=current_user(), task=t, home=get_settings().home, area=split
        )
    except download_rule.DownloadRefused as e:
        return refusal(e.status, e.message, url_for("pages.task", task_id=t.id))
    base = TaskStore(t.id, get_settings().home).root / "public" / split
    members = [(f"{t.id}-{split}/{p.relative_to(base).as_posix()}", p) for p in given[0].files]
    # with an object store: a redirect to a presigned GET of the zip (server.web.downloads)
    return downloads.zip_response(get_settings(), t.id, f"{t.id}-{split}.zip", members)


# ----------------------------------------------------------------------------- submitting


# the form's yes/no fields, shown as checkboxes: posted only when ticked
WEB_CHECKBOXES = tuple(
    k for k in UploadForm.DECLARED if UploadFields.model_fields[k].annotation is bool
)


@bp.route("/tasks/<task_id>/submit", methods=["GET", "POST"])
@login_required
def submit(task_id: str):
    return upload_page(task_id, system=False)


def upload_page(task_id: str, *, system: bool):
    """The one upload page of a task: a prediction file, or with `system` a system to run blind
    (the runs blueprint's page). It translates the form into one call of the intake
    (`server.actions.submissions.submit`) and its answer or refusal into the page."""
    t = task_or_404(task_id)
    team = user_team(t.id)
    if team is None:
        flash("Create or join a team before submitting.", "error")
        return redirect(url_for("teams.mine"))
    phases = [p for p in phases_of(t.id) if not system or p.accepts in ("code", "both")]
    if not phases:
        abort(404)
    Form, upload = (SystemForm, "code") if system else (SubmitForm, "file")
    if request.method == "POST":
        form = Form()
    else:  # the phase the API takes when none is named: the open test phase, else dev, ...
        default = (
            request.args.get("phase")
            or phase_or_default(db(), t.id, None, accepts="code" if system else "predictions").name
        )
        form = Form(formdata=None, phase=default)
    form.phase.choices = [(p.name, _phase_label(t, p, system)) for p in phases]
    sheet = fact_sheet(t.id)
    # each phase's window and what is left of the team's quota, beside the form
    sheet["windows"] = [(p, phase_state(p), quota(team, p)) for p in phases]
    template = "runs/submit.html" if system else "tasks/submit.html"

    def page(status=200):
        button = "Submit the system" if system else "Submit"
        context = dict(task=t, phases=phases, form=form, upload=upload, button=button, **sheet)
        return render_template(template, **context), status

    if request.method != "POST":
        return page()
    ok = form.validate()  # the phase and the file; the fields by the one declared form:
    try:
        fields = sub_actions.read_upload_fields(request.form, checkboxes=WEB_CHECKBOXES)
    except UploadFieldsInvalid as e:
        ok = False
        for name, message in e.fields.items():
            if name in form:
                form[name].errors = [*form[name].errors, message]
    if not ok:
        return page(400)
    data = form[upload].data
    try:
        got, duplicate = sub_actions.submit(
            s=db(),
            user=current_user(),
            task_id=t.id,
            fields=fields,
            stream=data.stream,
            filename=data.filename,
            settings=get_settings(),
            system=system,
        )
    except UploadFieldsInvalid as e:  # the fact sheet: each problem beside its field
        sheet["fact_errors"] = {
            k.removeprefix("facts."): v for k, v in e.fields.items() if k.startswith("facts.")
        }
        flash("Not submitted: " + e.message, "error")
        return page(422)
    except BundleRefused as e:  # a system's archive or its system.yaml: every problem
        sheet["problems"] = e.problems
        flash("Not submitted: " + e.message, "error")
        return page(422)
    except (SubmissionRefused, Forbidden, LifecycleRefused) as e:
        when = getattr(e, "next_allowed_at", None)
        msg = str(e)
        if when and "UTC" not in msg:
            msg += f" The next submission is allowed at {when:%Y-%m-%d %H:%M} UTC."
        flash(msg, "error")
        return page(status_of(e))  # the same status as the API's (server.statuses)
    if system:
        if duplicate:
            flash(
                f"Your team submitted this very system in this phase before, as run #{got.id}.",
                "error",
            )
        else:
            flash("Submitted. Your system is queued to run.", "ok")
        return redirect(url_for("runs.show", run_id=got.id))
    if duplicate:
        flash(
            f"Your team submitted this very file in this phase before, as submission #{got.id} "
            f"({got.status}); it was not submitted again.",
            "error",
        )
    else:
        flash(
            "Submitted. It is queued for scoring."
            + (" It is your team's primary run of the phase." if fields.primary else ""),
            "ok",
        )
    return redirect(url_for("pages.submission", submission_id=got.id))


def _phase_label(t, p: Phase, system: bool) -> str:
    if system:
        return f"{p.name} (split {p.split}{'; its inputs stay on the server' if p.blind else ''})"
    if t.is_cross_validated(p.split):
        if not t.cross_validation.field:  # folds of the queries: one ordinary file
            return f"{p.name} ({p.split}, cross-validated: folds of the units, one file for all)"
        key = " and ".join(t.format.key)
        return f"{p.name} ({p.split}, cross-validated: a row per fold and {key})"
    return f"{p.name} ({p.split})"


# ----------------------------------------------------------------------------- fact sheets


def fact_sheet(task_id: str) -> dict:
    """What the submit form shows of the competition's fact sheet: its declared fields, the
    answers posted (kept after a refusal) and, once refused, the problem of each field."""
    c = people.competition_of_task(db(), task_id)
    posted = facts.form_facts(request.form) if request.method == "POST" else {}
    return {
        "fact_fields": [] if c is None else list(c.fact_fields or []),
        "fact_values": posted,
        "fact_errors": {},
    }


@bp.route("/submissions")
@login_required
def my_submissions():
    u = current_user()
    team_ids = people.team_ids_of(db(), u)
    team = db().get(Team, team_ids[0]) if len(team_ids) == 1 else None
    subs, older = [], None
    before = request.args.get("before", type=int)
    if team_ids:
        q = submissions.team_runs(team_ids)
        if before:
            q = q.where(Submission.id < before)
        subs = db().exec(q.order_by(Submission.id.desc()).limit(PAGE + 1)).all()
        if len(subs) > PAGE:  # a page at a time, newest first
            subs = subs[:PAGE]
            older = url_for("pages.my_submissions", before=subs[-1].id)
    phases = {p.id: p for p in db().exec(select(Phase)).all()} if subs else {}
    return render_template(
        "submissions/list.html",
        subs=subs,
        phases=phases,
        team=team,
        in_teams=bool(team_ids),
        primary=primary_scores(subs, phases, lambda task_id: viewer_of(u, db(), task_id)),
        older=older,
        newest=url_for("pages.my_submissions") if before else None,
    )


PAGE = 100
FINAL = ("scored", "failed")


@bp.route("/status")
def status():
    """The queues: each one's depth and the workers alive for everyone; each worker's name, host,
    state and current job for administrators."""
    s = db()
    conn = waits.redis_or_none(current_app.extensions.get("palimpsest.redis"))
    found = waits.workers(conn)
    known = waits.durations(s)
    return render_template(
        "status.html",
        depths=waits.queue_depths(s, conn),
        pools=waits.run_pools(s, conn),
        workers=found,
        n_scoring=waits.scoring_workers(found),
        median=known.get("*"),
        duration=waits.duration,
        admin=people.is_admin(current_user()),
        reconciler=waits.reconciler_problems(conn),
    )


@bp.route("/status.json")
def status_json():
    """The queues' figures as JSON, for an operator's autoscaler: each queue's depth, the workers
    alive, and per pool of code runs its depth, oldest waiting run's age, runs running and live
    workers (`waits.status_document`)."""
    conn = waits.redis_or_none(current_app.extensions.get("palimpsest.redis"))
    return waits.status_document(db(), conn)


@bp.route("/metrics")
def metrics():
    """The same figures in Prometheus' text format (`waits.prometheus`), for a scraper."""
    conn = waits.redis_or_none(current_app.extensions.get("palimpsest.redis"))
    body = waits.prometheus(waits.status_document(db(), conn))
    return Response(body, mimetype="text/plain", content_type=PROMETHEUS)


PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


@bp.route("/submissions/status.json")
@login_required
def submissions_status():
    """The status of the asked submissions (`?ids=1,2`, at most PAGE) that the visitor may see,
    for the pages' live status: no scores, nothing the submission page does not show."""
    raw = request.args.get("ids", "")
    try:
        ids = sorted({int(x) for x in raw.split(",") if x.strip()})
    except ValueError:
        return {"error": f"ids must be submission numbers separated by commas, not {raw!r}"}, 400
    if len(ids) > PAGE:
        return {"error": f"at most {PAGE} ids at once, not {len(ids)}"}, 400
    u = current_user()
    rows = db().exec(select(Submission).where(Submission.id.in_(ids))).all() if ids else []
    sees = submission_filter(u)
    statuses = {str(s.id): s.status for s in rows if sees(s)}
    return (
        {
            "statuses": statuses,
            "final": all(st in FINAL for st in statuses.values()),
        },
        200,
        {"Cache-Control": "no-store"},
    )


def primary_scores(subs, phases, viewer) -> dict[int, tuple[float | None, str]]:
    """Each scored run's primary score as `viewer` may see it (server.domain.visibility), in one
    query; `viewer` is a Viewer, or a function of a task id giving one."""
    counted = {s.id: s.score_attempt for s in subs if s.score_attempt is not None}
    got: dict[int, dict[str, float | None]] = {}
    ids = list(counted)
    for i in range(0, len(ids), 900):
        for sid, attempt, part, value in db().exec(
            select(Score.submission_id, Score.attempt, Score.part, Score.primary_value).where(
                Score.submission_id.in_(ids[i : i + 900])
            )
        ):
            if attempt == counted[sid]:
                got.setdefault(sid, {})[part] = value
    out = {}
    for s in subs:
        parts = got.get(s.id, {})
        who = viewer(s.task_id) if callable(viewer) else viewer
        part = shown_part(who, phases.get(s.phase_id), s.created_at, parts)
        if part is not None:
            out[s.id] = (
                parts[part],
                {"all": "", "whole": "whole split"}.get(part, f"{part} part"),
            )
    return out


def submission_or_404(submission_id: int) -> Submission:
    """The submission if who asks may see it; 404 otherwise (not 403: its existence is no one's
    business)."""
    try:
        return action_common.visible_submission(db(), current_user(), submission_id)
    except NotFound:
        abort(404)


@bp.route("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int):
    sub = submission_or_404(submission_id)
    s = db()
    if code_runs.gated_for(s, current_user(), sub):  # a gated blind run's output: the run's view
        return redirect(url_for("runs.show", run_id=code_runs.gating_run(s, sub.id).id))
    phase = s.get(Phase, sub.phase_id)
    # private-part scores stay unseen until publication, even by the submitting team; the gold's
    # sha256 is the organizers': participants see its keyed id
    shown = shown_scores(s, current_user(), sub, phase, get_settings().secret_key)
    team = s.get(Team, sub.team_id)
    others = s.exec(
        select(Submission)
        .where(
            Submission.team_id == sub.team_id,
            Submission.phase_id == sub.phase_id,
            Submission.removed_at.is_(None),
        )
        .order_by(Submission.id.desc())
    ).all()
    task = task_or_404(sub.task_id)
    standing = waits.live_standing(
        s, sub, current_app.extensions.get("palimpsest.redis"), recent=True
    )
    comp = people.competition_of_task(s, sub.task_id)
    track = next(
        (
            f
            for f in (comp.fact_fields or [] if comp is not None else [])
            if f.get("key") == "track" and f.get("kind") == "choice"
        ),
        None,
    )
    return render_template(
        "submissions/show.html",
        run_boards=_run_boards(s, sub, phase),
        track=track,
        organizes=people.is_admin(current_user())
        or people.organizes_task(s, current_user(), sub.task_id),
        sub=sub,
        gated=False,
        problems=sub.errors or [],
        waiting=waits.words(standing) if standing else "",
        own_team=people.team_id_for_task(s, current_user(), sub.task_id) == sub.team_id,
        phase=phase,
        scores=shown,
        team=team,
        task=task,
        others=others,
    )


def _run_action(submission_id: int, fn, **kw):
    """One of the team's own-run actions, its refusal flashed on the run's page."""
    s = db()
    try:
        return fn(s=s, submission_id=submission_id, actor=current_user(), **kw)
    except (Forbidden, LifecycleRefused) as e:
        back = url_for("pages.submission", submission_id=submission_id)
        abort(make_response(refusal(status_of(e), str(e), back)))
    except NotFound:
        abort(404)


def _run_boards(s, sub, phase) -> list[dict]:
    """The declared boards a run may be chosen for (those whose filter lets it in; not an overall
    board, not once the phase is published), each saying whether it is the team's choice there."""
    if phase is None or not phase.boards or phase.published_at is not None:
        return []
    comp = people.competition_of_task(s, sub.task_id)
    fields = list(comp.fact_fields or ()) if comp is not None else []
    q = select(BoardChoice.board, BoardChoice.submission_id).where(
        BoardChoice.phase_id == phase.id, BoardChoice.team_id == sub.team_id
    )
    mine = dict(s.exec(q).all())
    return [
        {"name": b.name, "title": b.title, "chosen": mine.get(b.name) == sub.id}
        for b in boards.of_phase(phase)
        if b.overall is None and board_lets_in(b, sub.facts, fields)
    ]


@bp.route("/submissions/<int:submission_id>/primary", methods=["POST"])
@login_required
def mark_primary(submission_id: int):
    """SemEval's convention: one primary run per team and phase; the others are contrastive. With
    a board (`board` in the form), the team's ranked run on that declared board."""
    board = (request.form.get("board") or "").strip() or None
    sub = _run_action(submission_id, sub_actions.choose_primary, board=board)
    phase = db().get(Phase, sub.phase_id)
    if board not in (None, "main"):
        flash(f"Submission #{sub.id} is now your ranked run on the {board} board.", "ok")
    else:
        flash(f"Submission #{sub.id} is now your primary run for the {phase.name} phase.", "ok")
    return redirect(url_for("pages.submission", submission_id=sub.id))


@bp.route("/submissions/<int:submission_id>/public", methods=["POST"])
@login_required
def set_public(submission_id: int):
    """Show a run on the public board, or keep it to the team."""
    show = request.form.get("show_publicly", "").strip().lower() in YES
    sub = _run_action(submission_id, sub_actions.set_shown_publicly, show=show)
    flash(
        f"Submission #{sub.id} is "
        + ("shown on the public board." if show else "kept off the public board."),
        "ok",
    )
    return redirect(url_for("pages.submission", submission_id=sub.id))


@bp.route("/submissions/<int:submission_id>/delete", methods=["POST"])
@login_required
def delete_run(submission_id: int):
    """Delete a run of the team's (kept for the organizers, who may restore it)."""
    if request.form.get("confirm", "").strip().lower() not in YES:
        flash("Not deleted: tick the box to confirm.", "error")
        return redirect(url_for("pages.submission", submission_id=submission_id))
    sub = _run_action(submission_id, sub_actions.delete_run)
    flash(
        f"Submission #{sub.id} is deleted: it is on no board. The organizers can restore it.",
        "ok",
    )
    return redirect(url_for("pages.my_submissions"))
