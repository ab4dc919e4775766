"""Organizer controls: phases and limits, leaderboard state, hiding, rescoring, publication,
exports and the queue. Every change of state goes through server.domain.lifecycle, which audits it;
nothing is deleted for real."""

from __future__ import annotations

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from pydantic import ValidationError
from rq.registry import FailedJobRegistry, StartedJobRegistry
from sqlmodel import func, select

from baselines.systems import SYSTEMS, Options
from server import api_models as m
from server.actions import common as action_common
from server.actions import phases as phase_actions
from server.actions import reads
from server.actions import submissions as sub_actions
from server.actions import tasks as task_actions
from server.actions.exports import QueueUnreachable, baseline_runs, export_ranking
from server.actions.exports import queue_baselines as enqueue_runs
from server.actions.phases import PHASE_ACTIONS, phase_action_options
from server.boards import leaderboard as lb
from server.db import db
from server.domain import lifecycle, people, publication
from server.domain.submissions import phase_state
from server.exceptions import (
    Forbidden,
    LifecycleRefused,
    NotFound,
    SubmissionRefused,
    UnknownSystem,
    UploadFieldsInvalid,
)
from server.jobs.queue import QUEUES, connect, get_queue
from server.models import (
    AuditLog,
    Competition,
    GoldPartition,
    Phase,
    Score,
    Submission,
    Team,
    User,
    utcnow,
)
from server.settings import get_settings
from server.statuses import status_of
from server.web.auth import admin_required, current_user, organizer_required, safe_next
from server.web.forms import HideForm, NewPhaseForm, PhaseForm, RescoreAllForm, TrackForm
from server.web.pages import PHASE_ORDER, phase_or_404, phases_of, task_or_404
from server.web.refusals import refusal
from tasks import all_tasks
from tasks.store import TaskStore

bp = Blueprint("organizer", __name__, url_prefix="/organizer")

STATUSES = lifecycle.STATUSES


def _sub_or_404(submission_id: int) -> Submission:
    try:
        return action_common.submission(db(), submission_id)
    except NotFound:
        abort(404)


def _back(default: str):
    return redirect(safe_next(request.form.get("next", ""), default))


def _by_competition(s, organized: set[int] | None) -> list[tuple]:
    """The dashboard's groups: each competition the person organizes (every one for an
    administrator), newest first and placeholders last, with its tasks and their phases; then, for
    administrators, the imported tasks in no competition (competition None). Only what exists: a
    placeholder made for a task whose data was never imported is left out, and so is a task not
    imported there."""
    home = get_settings().home
    declared = {t.id: t for t in all_tasks()}
    # the competitions made by people first; the placeholders of lone tasks after them
    q = select(Competition).order_by(Competition.placeholder, Competition.id.desc())
    if organized is not None:
        q = q.where(Competition.id.in_(sorted(organized)))
    out, placed = [], set()
    for c in s.exec(q).all():
        ids = [t for t in people.task_ids(s, c.id) if t in declared]
        placed.update(ids)
        if c.placeholder:
            ids = [t for t in ids if TaskStore(t, home).exists()]
            if not ids:
                continue
        phases = [(declared[t], phases_of(t)) for t in ids]
        campaigns = next(
            (p for t, ps in phases if t.kind in ("links", "instances") for p in ps), None
        )
        out.append((c, phases, campaigns))
    if organized is None:
        loose = [
            (t, phases_of(t.id))
            for t in declared.values()
            if t.id not in placed and TaskStore(t.id, home).exists()
        ]
        if loose:
            out.append((None, loose, None))
    return out


@bp.route("/")
@organizer_required
def dashboard():
    s = db()
    mine = people.organized_tasks(s, current_user())  # None: every task (an administrator)
    groups = _by_competition(s, people.organized_competitions(s, current_user()))
    cq = select(Submission.status, func.count())
    lq = select(AuditLog).where(AuditLog.action != "submission.status")
    if mine is not None:
        cq = cq.where(Submission.task_id.in_(sorted(mine)))
        lq = lq.where(
            AuditLog.competition_id.in_(sorted(people.organized_competitions(s, current_user())))
        )
    counts = dict(s.exec(cq.group_by(Submission.status)).all())
    log = s.exec(lq.order_by(AuditLog.id.desc()).limit(30)).all()
    # every account that acted (teams act too: joining, marking a primary run), not organizers only
    ids = {a.actor_id for a in log if a.actor_id is not None}
    actors = {u.id: u.email for u in s.exec(select(User).where(User.id.in_(ids))).all()}

    return render_template(
        "organizer/dashboard.html",
        groups=groups,
        counts=counts,
        log=log,
        actors=actors,
        phase_state=phase_state,
        systems=SYSTEMS,
    )


# ----------------------------------------------------------------------------- phases


@bp.route("/tasks/<task_id>/phases", methods=["POST"])
@organizer_required
def create_phase(task_id: str):
    t = task_or_404(task_id)
    form = NewPhaseForm()
    if not form.validate():
        flash(
            "Not added: "
            + "; ".join(
                f"{form[k].label.text.lower()}: {' '.join(v)}" for k, v in form.errors.items() if k
            )
            + ".",
            "error",
        )
        return redirect(url_for("organizer.dashboard"))
    try:
        got = phase_actions.create_phase(
            s=db(),
            task_id=t.id,
            name=form.name.data.strip(),
            split=form.split.data.strip(),
            actor=current_user(),
            home=get_settings().home,
            via="web",
        )
    except LifecycleRefused as e:
        flash(f"Not added: {e.message}.", "error")
        return redirect(url_for("organizer.dashboard"))
    return redirect(
        url_for("organizer.edit_phase", phase_id=action_common.phase(db(), t.id, got.name).id)
    )


def _phase_page(p: Phase, form, code: int = 200):
    s = db()
    partition = s.get(GoldPartition, p.partition_id) if p.partition_id else None
    return render_template(
        "organizer/phase.html",
        phase=p,
        task=task_or_404(p.task_id),
        partition=partition,
        labels=lifecycle.phase_labels(p),
        versions=publication.ranking_versions(s, p.id),
        change=task_actions.phase_change(s, p, get_settings()),
        form=form,
        field_errors=any(f.errors for f in form),
        now_utc=utcnow().strftime("%Y-%m-%d %H:%M"),
    ), code


@bp.route("/phases/<int:phase_id>", methods=["GET", "POST"])
@organizer_required
def edit_phase(phase_id: int):
    """The phase form (server.web.forms.PhaseForm): what was typed stays, and each field says what
    is
    wrong with it; the lifecycle's refusals are shown on the form."""
    p = phase_or_404(phase_id)
    s = db()
    if request.method != "POST":
        return _phase_page(p, PhaseForm(formdata=None, obj=p).with_release_rule(p))
    form = PhaseForm()
    if not form.validate():
        return _phase_page(p, form, 400)
    try:
        phase_actions.edit_phase(
            s=s,
            task_id=p.task_id,
            phase=p.name,
            changes=form.changes(p),
            actor=current_user(),
            via="web",
        )
    except LifecycleRefused as e:
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _phase_page(phase_or_404(phase_id), form, 400)
    flash("Phase saved.", "ok")
    return redirect(url_for("organizer.edit_phase", phase_id=p.id))


@bp.route("/phases/<int:phase_id>/partition", methods=["POST"])
@organizer_required
def redraw_partition(phase_id: int):
    """Move a phase onto its split's shared, stratified partition (before its first scoring)."""
    p = phase_or_404(phase_id)
    try:
        phase_actions.redraw_partition(
            s=db(), task_id=p.task_id, phase=p.name, actor=current_user(), via="web"
        )
        flash("The phase now scores with its split's shared partition.", "ok")
    except LifecycleRefused as e:
        flash(f"Not re-drawn: {e.message}.", "error")
    return redirect(url_for("organizer.edit_phase", phase_id=p.id))


def _act(fn, done: str):
    """Run an action; flash what happened or why it was refused."""
    try:
        fn()
        flash(done, "ok")
        return True
    except (LifecycleRefused, NotFound, Forbidden, UploadFieldsInvalid, SubmissionRefused) as e:
        msg = getattr(e, "message", None) or str(e)
        flash(f"Refused. {msg[:1].upper()}{msg[1:]}.", "error")
        return False


@bp.route("/phases/<int:phase_id>/actions/<name>", methods=["POST"])
@organizer_required
def phase_action(phase_id: int, name: str):
    """Any phase action by the name every surface uses (`PHASE_ACTIONS`), with the form's fields
    its own signature declares: a new phase action needs no route of its own here."""
    p = phase_or_404(phase_id)
    if name not in PHASE_ACTIONS:
        abort(404)
    # the form's fields named as the declared options' public names (m.PhaseAction's aliases)
    fields = {f.alias or k: k for k, f in m.PhaseAction.model_fields.items()}
    try:
        options = m.PhaseAction.model_validate(
            {k: v for k, v in request.form.items() if k in fields}
        ).model_dump()
    except ValidationError as e:  # a field too long, a flag not a yes or no
        return refusal(
            400, "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        )
    _act(
        lambda: PHASE_ACTIONS[name](
            s=db(),
            task_id=p.task_id,
            phase=p.name,
            actor=current_user(),
            via="web",
            **phase_action_options(name, options, get_settings()),
        ),
        DONE.get(name, "{name}: done on {task}/{phase}.").format(
            name=name.capitalize().replace("-", " "), task=p.task_id, phase=p.name
        ),
    )
    return _back(url_for("organizer.dashboard"))


# what the web says once a phase action is done (wording only: the actions are PHASE_ACTIONS')
DONE = {
    "close": "The {phase} phase of {task} is closed.",
    "show-board": "The board of {task}/{phase} is shown.",
    "hide-board": "The board of {task}/{phase} is hidden.",
    "freeze": "The board of {task}/{phase} is frozen.",
    "unfreeze": "The board of {task}/{phase} is unfrozen.",
    "publish": "Final ranking of {task}/{phase} published.",
    "rerun": "The archived systems are queued to run on {task}/{phase}: their rows join its board "
    "once scored.",
}


@bp.route("/phases/<int:phase_id>/publish")
@organizer_required
def publish(phase_id: int):
    """The confirmation before publishing the final ranking (or a correction, with a reason):
    the board as it will be published; its form posts to the phase action `publish` through
    `phase_action` (`close` with `action=close_and_publish`: an open phase closed in the same
    step)."""
    p = phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    s = db()
    action = request.values.get("action", "publish")
    if action not in ("publish", "close_and_publish"):
        abort(400)
    board = lb.final_board(s, t, p, get_settings().home)
    return render_template(
        "organizer/publish.html",
        phase=p,
        task=t,
        board=board,
        action=action,
        state=lifecycle.phase_state(p),
        versions=publication.ranking_versions(s, p.id),
    )


@bp.route("/phases/<int:phase_id>/ranking")
@organizer_required
def ranking(phase_id: int):
    """The final ranking as it is or will be published (a live preview on the private part), with
    every published version."""
    p = phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    s = db()
    board = lb.final_board(s, t, p, get_settings().home)
    return render_template(
        "leaderboard/board.html",
        task=t,
        board=board,
        phases=[],
        audience="organizer",
        preview=True,
        versions=[
            (v.version, v.published_at, v.reason) for v in publication.ranking_versions(s, p.id)
        ],
        phase_id=p.id,
    )


@bp.route("/phases/<int:phase_id>/export.<fmt>")
@organizer_required
def export(phase_id: int, fmt: str):
    """The final ranking as CSV, JSON or a LaTeX table for the task-overview paper: the published
    snapshot (`?version=N`, default the latest) byte for byte, or a preview before publication."""
    p = phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    if fmt not in ("csv", "json", "tex"):
        abort(404)

    try:
        ex = export_ranking(
            db(),
            t,
            p,
            fmt,
            request.args.get("version", type=int),
            actor=current_user(),
            settings=get_settings(),
            columns=request.args.getlist("column") or None,
            facts=request.args.get("facts") in ("1", "true", "yes"),
        )
    except NotFound:
        abort(404)
    except (LifecycleRefused, UploadFieldsInvalid) as e:  # fact sheets: csv or json, once published
        # a refusal answers a refusal's status, never the ranking page's 200
        return refusal(status_of(e), str(e), url_for("organizer.ranking", phase_id=p.id))
    return Response(
        ex.body,
        content_type=ex.mimetype,
        headers={"Content-Disposition": f'attachment; filename="{ex.filename}"'},
    )


# ----------------------------------------------------------------------------- submissions


PAGE = 100


def _counted_scores(s, subs: list[Submission]) -> dict[int, dict[str, float | None]]:
    """Submission id -> part -> primary value of its counted scoring (organizers see every part)."""
    want = [(x.id, x.score_attempt) for x in subs if x.score_attempt is not None]
    if not want:
        return {}
    out: dict[int, dict[str, float | None]] = {}
    rows = s.exec(
        select(Score.submission_id, Score.attempt, Score.part, Score.primary_value).where(
            Score.submission_id.in_([i for i, _ in want])
        )
    ).all()
    attempt = dict(want)
    for sid, att, part, value in rows:
        if attempt.get(sid) == att:
            out.setdefault(sid, {})[part] = value
    return out


@bp.route("/submissions")
@organizer_required
def submissions():
    """Every submission, newest first, a page at a time (`before`: the id the page starts below),
    with its score and times."""
    s = db()
    mine = people.organized_tasks(s, current_user())  # None: every task (an administrator)
    task = request.args.get("task") or None
    status = request.args.get("status") or None
    before = request.args.get("before", type=int)
    q = reads.organizer_runs(
        s, current_user(), task=task, status=status if status in STATUSES else None
    )
    total = s.exec(select(func.count()).select_from(q.subquery())).one()
    if before:
        q = q.where(Submission.id < before)
    rows = s.exec(q.order_by(Submission.id.desc()).limit(PAGE + 1)).all()
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    phases = {p.id: p for p in s.exec(select(Phase)).all()}
    args = {k: v for k, v in (("task", task), ("status", status)) if v}
    older = (
        url_for("organizer.submissions", **args, before=rows[-1][0].id) if more and rows else None
    )
    newest = url_for("organizer.submissions", **args) if before else None
    return render_template(
        "organizer/submissions.html",
        rows=rows,
        phases=phases,
        task=task,
        status=status,
        statuses=STATUSES,
        tasks=[t for t in all_tasks() if mine is None or t.id in mine],
        scores=_counted_scores(s, [r[0] for r in rows]),
        total=total,
        older=older,
        newest=newest,
        page_size=PAGE,
    )


@bp.route("/submissions/<int:submission_id>/hide", methods=["POST"])
@organizer_required
def hide(submission_id: int):
    """Hide or remove a run after a confirmation page that shows it and the reason the team will
    read; unhide and restore at once."""
    sub = _sub_or_404(submission_id)
    form = HideForm()
    action = form.action.data or "hide"
    if action not in lifecycle.VISIBILITY:
        abort(400)
    if action in ("hide", "remove") and not form.confirm.data:
        s = db()
        return render_template(
            "organizer/confirm_hide.html",
            sub=sub,
            form=form,
            action=action,
            team=s.get(Team, sub.team_id),
            phase=s.get(Phase, sub.phase_id),
        )
    _act(
        lambda: sub_actions.set_visibility(
            s=db(),
            submission_id=sub.id,
            action=action,
            actor=current_user(),
            reason=form.reason.data or "",
        ),
        f"Submission #{sub.id}: {action}.",
    )
    return _back(url_for("organizer.submissions"))


@bp.route("/submissions/<int:submission_id>/track", methods=["POST"])
@organizer_required
def move_track(submission_id: int):
    """Move a run to another track, with a reason (from the run's page)."""
    sub = _sub_or_404(submission_id)
    form = TrackForm()
    _act(
        lambda: sub_actions.move_track(
            s=db(),
            submission_id=sub.id,
            track=form.track.data or "",
            reason=form.reason.data or "",
            field=form.field.data or None,
            actor=current_user(),
            settings=get_settings(),
            via="web",
        ),
        f"Submission #{sub.id} moved to track {form.track.data}.",
    )
    return _back(url_for("pages.submission", submission_id=sub.id))


@bp.route("/submissions/<int:submission_id>/rescore", methods=["POST"])
@organizer_required
def rescore(submission_id: int):
    sub = _sub_or_404(submission_id)
    _act(
        lambda: sub_actions.rescore_submission(
            s=db(),
            submission_id=sub.id,
            actor=current_user(),
            settings=get_settings(),
        ),
        f"Submission #{sub.id} queued for rescoring.",
    )
    return _back(url_for("organizer.submissions"))


@bp.route("/tasks/<task_id>/rescore", methods=["POST"])
@organizer_required
def rescore_task(task_id: str):
    """Rescore every final submission of a task (or of a phase), after a confirmation page that
    says how many it queues."""
    t = task_or_404(task_id)
    form = RescoreAllForm()
    s = db()
    phase_name = form.phase.data or None
    p = None
    if phase_name:
        p = s.exec(select(Phase).where(Phase.task_id == t.id, Phase.name == phase_name)).first()
        if p is None:
            abort(404)
    if not form.confirm.data:
        runs, invalid = sub_actions.rescore_candidates(s, t.id, current_user(), phase_name)
        return render_template(
            "organizer/confirm_rescore.html",
            task=t,
            phase=p,
            form=form,
            count=len(runs),
            invalid=len(invalid),
            phases=[x.name for x in phases_of(t.id)],
        )
    result = sub_actions.rescore_selection(
        s=s,
        task_id=t.id,
        actor=current_user(),
        settings=get_settings(),
        phase=p.name if p is not None else None,
        include_invalid=bool(form.include_invalid.data),
        via="web",
    )
    flash(f"{len(result.queued)} submissions of {t.id} queued for rescoring.", "ok")
    return _back(url_for("organizer.dashboard"))


# ----------------------------------------------------------------------------- baselines


@bp.route("/tasks/<task_id>/baselines", methods=["POST"])
@organizer_required
def queue_baselines(task_id: str):
    """Put baseline runs of a task on the baselines queue (a GPU worker's, or serve's own
    worker)."""
    t = task_or_404(task_id)
    systems = request.form.getlist("system")
    device = request.form.get("device", "auto")
    opts = Options(
        model=(request.form.get("model") or "").strip() or None,
        cross_model=(request.form.get("cross_model") or "").strip() or None,
        device=device if device in ("auto", "cpu", "cuda") else "auto",
    )

    try:
        jobs = enqueue_runs(
            db(),
            t,
            systems,
            opts.job_args(),
            actor=current_user(),
            settings=get_settings(),
        )
    except (QueueUnreachable, UnknownSystem) as e:
        flash(f"Not queued: {e}.", "error")
        return _back(url_for("organizer.dashboard"))
    flash(
        f"Queued {len(jobs)} baseline run(s) of {t.id}: {', '.join(systems)}. A worker of the "
        "baselines queue runs them and records each file as a baseline entry; see the queue page.",
        "ok",
    )
    return _back(url_for("organizer.dashboard"))


def _baseline_runs(conn, settings) -> list[dict]:
    return baseline_runs(conn, settings)


# ----------------------------------------------------------------------------- queue and log


@bp.route("/queue")
@admin_required
def queue():
    """Waiting, running and failed jobs, from the database (the record of truth) and from RQ."""
    s = db()
    by_status = {
        st: s.exec(
            select(Submission)
            .where(Submission.status == st)
            .order_by(Submission.id.desc())
            .limit(100)
        ).all()
        for st in ("queued", "running", "failed")
    }
    rq_info, rq_error, runs = {}, None, []
    try:
        settings = current_app.extensions["palimpsest.settings"]
        # only look: the queue page never starts the embedded Redis itself
        conn = current_app.extensions.get("palimpsest.redis") or connect(
            settings, start_embedded=False
        )
        conn.ping()
        for name in QUEUES:
            q = get_queue(name, conn, settings)
            rq_info[name] = {
                "waiting": q.count,
                "running": len(StartedJobRegistry(queue=q)),
                "failed": len(FailedJobRegistry(queue=q)),
                "failed_ids": FailedJobRegistry(queue=q).get_job_ids()[:20],
            }
        runs = _baseline_runs(conn, settings)
    except Exception as e:  # noqa: BLE001 — the page still shows the database's view
        rq_error = f"{type(e).__name__}: {e}"
    return render_template(
        "organizer/queue.html", by_status=by_status, rq_info=rq_info, rq_error=rq_error, runs=runs
    )


@bp.route("/audit")
@organizer_required
def audit_log():
    s = db()
    everything = request.args.get("all") == "1"
    q = reads.audit_entries(s, current_user(), everything=everything)
    before = request.args.get("before", type=int)
    if before:
        q = q.where(AuditLog.id < before)
    rows = s.exec(q.order_by(AuditLog.id.desc()).limit(PAGE + 1)).all()
    more, rows = len(rows) > PAGE, rows[:PAGE]
    args = {"all": 1} if everything else {}
    older = url_for("organizer.audit_log", **args, before=rows[-1].id) if more and rows else None
    newest = url_for("organizer.audit_log", **args) if before else None
    actors = reads.audit_actors(s, rows)
    return render_template(
        "organizer/audit.html",
        rows=rows,
        actors=actors,
        everything=everything,
        older=older,
        newest=newest,
    )


__all__ = ["bp", "PHASE_ORDER"]
