"""Organizer controls: phases and limits, leaderboard state, hiding, rescoring, publication,
exports and the queue. Every change of state goes through server.lifecycle, which audits it;
nothing is deleted for real."""

from __future__ import annotations

import json
from datetime import datetime

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
from sqlmodel import func, select

from server import leaderboard as lb
from server import lifecycle
from server.auth import audit, current_user, db, organizer_required
from server.exceptions import LifecycleRefused
from server.models import AuditLog, GoldPartition, Phase, Submission, Team, User
from server.submissions import phase_state
from server.views.pages import PHASE_ORDER, phases_of, task_or_404
from tasks import all_tasks

bp = Blueprint("organizer", __name__, url_prefix="/organizer")

STATUSES = lifecycle.STATUSES


def _phase_or_404(phase_id: int) -> Phase:
    p = db().get(Phase, phase_id)
    if p is None:
        abort(404)
    return p


def _sub_or_404(submission_id: int) -> Submission:
    sub = db().get(Submission, submission_id)
    if sub is None:
        abort(404)
    return sub


def _back(default: str):
    target = request.form.get("next", "")
    if target.startswith("/") and not target.startswith("//"):
        return redirect(target)
    return redirect(default)


@bp.route("/")
@organizer_required
def dashboard():
    s = db()
    tasks = [(t, phases_of(t.id)) for t in all_tasks()]
    counts = dict(s.exec(select(Submission.status, func.count()).group_by(Submission.status)).all())
    log = s.exec(select(AuditLog).where(AuditLog.action != "submission.status")
                 .order_by(AuditLog.id.desc()).limit(30)).all()
    actors = {u.id: u.email for u in s.exec(select(User).where(User.is_organizer)).all()}
    from baselines.systems import SYSTEMS

    return render_template("organizer/dashboard.html", tasks=tasks, counts=counts, log=log, actors=actors,
                           phase_state=phase_state, systems=SYSTEMS)


# ----------------------------------------------------------------------------- phases


def _parse_dt(v: str) -> datetime | None:
    v = (v or "").strip()
    if not v:
        return None
    return datetime.fromisoformat(v.replace("Z", "").replace(" ", "T"))


def _parse_limit(v: str) -> int | None:
    v = (v or "").strip()
    if not v:
        return None
    n = int(v)
    if n < 0:
        raise ValueError("a limit is 0 or more (empty: no limit)")
    return n


@bp.route("/tasks/<task_id>/phases", methods=["POST"])
@organizer_required
def create_phase(task_id: str):
    t = task_or_404(task_id)
    try:
        p = lifecycle.create_phase(db(), task=t, name=request.form.get("name", "").strip(),
                                   split=request.form.get("split", "").strip(), actor=current_user())
    except LifecycleRefused as e:
        db().rollback()
        flash(f"Not added: {e.message}.", "error")
        return redirect(url_for("organizer.dashboard"))
    return redirect(url_for("organizer.edit_phase", phase_id=p.id))


def _phase_page(p: Phase, code: int = 200):
    s = db()
    partition = s.get(GoldPartition, p.partition_id) if p.partition_id else None
    return render_template("organizer/phase.html", phase=p, task=task_or_404(p.task_id), partition=partition,
                           labels=lifecycle.phase_labels(p), versions=lifecycle.ranking_versions(s, p.id)), code


@bp.route("/phases/<int:phase_id>", methods=["GET", "POST"])
@organizer_required
def edit_phase(phase_id: int):
    p = _phase_or_404(phase_id)
    s = db()
    if request.method == "POST":
        f = request.form
        try:
            changes = {
                "opens_at": _parse_dt(f.get("opens_at", "")),
                "closes_at": _parse_dt(f.get("closes_at", "")),
                "daily_limit": _parse_limit(f.get("daily_limit", "")),
                "total_limit": _parse_limit(f.get("total_limit", "")),
                "concurrent_limit": _parse_limit(f.get("concurrent_limit", "")),
            }
            frac = float(f.get("public_fraction", p.public_fraction))
            if frac != p.public_fraction:
                changes["public_fraction"] = frac
            lifecycle.edit_phase(s, p, changes, actor=current_user())
        except (ValueError, LifecycleRefused) as e:
            s.rollback()
            flash(f"Not saved: {getattr(e, 'message', e)}", "error")
            return _phase_page(_phase_or_404(phase_id), 400)
        flash("Phase saved.", "ok")
        return redirect(url_for("organizer.edit_phase", phase_id=p.id))
    return _phase_page(p)


@bp.route("/phases/<int:phase_id>/partition", methods=["POST"])
@organizer_required
def redraw_partition(phase_id: int):
    """Move a phase onto its split's shared, stratified partition (before its first scoring)."""
    p = _phase_or_404(phase_id)
    try:
        part = lifecycle.redraw_partition(db(), p, actor=current_user())
        flash(f"The phase now scores with the shared partition of {part.key}.", "ok")
    except LifecycleRefused as e:
        db().rollback()
        flash(f"Not re-drawn: {e.message}.", "error")
    return redirect(url_for("organizer.edit_phase", phase_id=p.id))


def _act(fn, done: str):
    """Run a lifecycle action; flash what happened or why it was refused."""
    try:
        fn()
        flash(done, "ok")
        return True
    except LifecycleRefused as e:
        db().rollback()
        flash(f"Refused. {e.message[:1].upper()}{e.message[1:]}.", "error")
        return False


@bp.route("/phases/<int:phase_id>/leaderboard", methods=["POST"])
@organizer_required
def leaderboard_state(phase_id: int):
    """Open, close, freeze or unfreeze a phase's leaderboard."""
    p = _phase_or_404(phase_id)
    s, who = db(), current_user()
    action = request.form.get("action", "")
    actions = {"open": lambda: lifecycle.set_board_open(s, p, True, actor=who),
               "close": lambda: lifecycle.set_board_open(s, p, False, actor=who),
               "freeze": lambda: lifecycle.set_frozen(s, p, True, actor=who),
               "unfreeze": lambda: lifecycle.set_frozen(s, p, False, actor=who)}
    if action not in actions:
        abort(400)
    _act(actions[action], f"Leaderboard of {p.task_id}/{p.name}: {action}.")
    return _back(url_for("organizer.dashboard"))


@bp.route("/phases/<int:phase_id>/close", methods=["POST"])
@organizer_required
def close_phase(phase_id: int):
    """Close a phase now: no further submissions are accepted."""
    p = _phase_or_404(phase_id)
    _act(lambda: lifecycle.close(db(), p, actor=current_user()),
         f"The {p.name} phase of {p.task_id} is closed.")
    return _back(url_for("organizer.dashboard"))


@bp.route("/phases/<int:phase_id>/publish", methods=["GET", "POST"])
@organizer_required
def publish(phase_id: int):
    """Publish the final ranking (or a correction, with a reason): a confirmed action that writes
    an immutable snapshot. `action=close_and_publish` closes an open phase in the same step."""
    p = _phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    s = db()
    action = request.values.get("action", "publish")
    if action not in ("publish", "close_and_publish"):
        abort(400)
    if request.method == "GET" or request.form.get("confirm") != "yes":
        board = lb.build_board(s, t, p, audience="public", show_private=True, include_closed=True,
                               provenance=lifecycle.current_provenance(t, p.split, _settings().home))
        return render_template("organizer/publish.html", phase=p, task=t, board=board, action=action,
                               state=lifecycle.phase_state(p), versions=lifecycle.ranking_versions(s, p.id))
    reason = request.form.get("reason", "")
    ok = _act(lambda: lifecycle.publish(s, p, task=t, actor=current_user(), settings=_settings(),
                                        reason=reason, close_first=action == "close_and_publish"),
              f"Final ranking of {p.task_id}/{p.name} published.")
    if not ok:
        return redirect(url_for("organizer.publish", phase_id=p.id, action=action))
    return redirect(url_for("organizer.ranking", phase_id=p.id))


def _settings():
    return current_app.extensions["palimpsest.settings"]


@bp.route("/phases/<int:phase_id>/ranking")
@organizer_required
def ranking(phase_id: int):
    """The final ranking as it is or will be published (a live preview on the private part), with
    every published version."""
    p = _phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    s = db()
    board = lb.build_board(s, t, p, audience="public", show_private=True, include_closed=True,
                           provenance=lifecycle.current_provenance(t, p.split, _settings().home))
    return render_template("leaderboard/board.html", task=t, board=board, phases=[], audience="organizer",
                           preview=True, versions=[(v.version, v.published_at, v.reason)
                                                   for v in lifecycle.ranking_versions(s, p.id)],
                           phase_id=p.id)


@bp.route("/phases/<int:phase_id>/export.<fmt>")
@organizer_required
def export(phase_id: int, fmt: str):
    """The final ranking as CSV, JSON or a LaTeX table for the task-overview paper: the published
    snapshot (`?version=N`, default the latest) byte for byte, or a preview before publication."""
    p = _phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    if fmt not in ("csv", "json", "tex"):
        abort(404)
    s = db()
    version = request.args.get("version", type=int)
    rv = lifecycle.latest_ranking(s, p.id, version)
    if rv is None and version is not None:
        abort(404)
    audit(s, current_user(), "ranking.export", f"phase:{p.id}", format=fmt,
          version=rv.version if rv else None)
    s.commit()
    name = f"{t.id}-{p.name}-ranking{f'-v{rv.version}' if rv else '-preview'}.{fmt}"
    columns = request.args.getlist("column") or None  # LaTeX: the metric columns picked ("subset/metric")
    if rv is not None and fmt == "tex" and columns:
        body = lb.snapshot_latex(json.loads(rv.body_json), columns=columns).encode("utf-8")
    elif rv is not None:
        body = {"csv": rv.body_csv, "json": rv.body_json, "tex": rv.body_latex}[fmt].encode("utf-8")
    else:
        board = lb.build_board(s, t, p, audience="public", show_private=True, include_closed=True,
                               provenance=lifecycle.current_provenance(t, p.split, _settings().home))
        body = {"csv": lambda: lb.to_csv(board), "json": lambda: lb.to_json(board),
                "tex": lambda: lb.to_latex(board, columns=columns).encode("utf-8")}[fmt]()
    mt = {"csv": "text/csv; charset=utf-8", "json": "application/json",
          "tex": "application/x-tex; charset=utf-8"}[fmt]
    return Response(body, mimetype=mt, headers={"Content-Disposition": f'attachment; filename="{name}"'})


# ----------------------------------------------------------------------------- submissions


@bp.route("/submissions")
@organizer_required
def submissions():
    s = db()
    q = select(Submission, Team).join(Team, Team.id == Submission.team_id)
    task = request.args.get("task") or None
    status = request.args.get("status") or None
    if task:
        q = q.where(Submission.task_id == task)
    if status in STATUSES:
        q = q.where(Submission.status == status)
    rows = s.exec(q.order_by(Submission.id.desc()).limit(500)).all()
    phases = {p.id: p for p in s.exec(select(Phase)).all()}
    return render_template("organizer/submissions.html", rows=rows, phases=phases, task=task, status=status,
                           statuses=STATUSES, tasks=all_tasks())


@bp.route("/submissions/<int:submission_id>/hide", methods=["POST"])
@organizer_required
def hide(submission_id: int):
    sub = _sub_or_404(submission_id)
    action = request.form.get("action", "hide")
    if action not in lifecycle.VISIBILITY:
        abort(400)
    _act(lambda: lifecycle.set_visibility(db(), sub, action, actor=current_user(),
                                          reason=request.form.get("reason", "")),
         f"Submission #{sub.id}: {action}.")
    return _back(url_for("organizer.submissions"))


def _enqueue_ids(ids: list[int]) -> None:
    """Put rescored submissions on the queue (the database already says queued: if Redis is down,
    the reconciler enqueues them later)."""
    from server.queue import connect, enqueue_submission

    if not ids or not current_app.config.get("PALIMPSEST_ENQUEUE", True):
        return
    try:
        conn = current_app.extensions.get("palimpsest.redis") or connect(_settings())
        for sid in ids:
            enqueue_submission(conn, sid, _settings(), replace=True)
    except Exception as e:  # noqa: BLE001 — the rows say queued; the reconciler will pick them up
        current_app.logger.warning("rescore of %s submission(s) left to the reconciler: %s", len(ids), e)


@bp.route("/submissions/<int:submission_id>/rescore", methods=["POST"])
@organizer_required
def rescore(submission_id: int):
    sub = _sub_or_404(submission_id)
    if sub.removed_at is not None:
        flash(f"Submission #{sub.id} is removed; restore it first.", "error")
        return _back(url_for("organizer.submissions"))
    ids = lifecycle.rescore(db(), [sub], actor=current_user(), max_attempts=_settings().max_attempts)
    _enqueue_ids(ids)
    if ids:
        flash(f"Submission #{sub.id} queued for rescoring.", "ok")
    else:
        flash(f"Submission #{sub.id} is {sub.status}: only a scored or failed submission is rescored.", "error")
    return _back(url_for("organizer.submissions"))


@bp.route("/tasks/<task_id>/rescore", methods=["POST"])
@organizer_required
def rescore_task(task_id: str):
    t = task_or_404(task_id)
    s = db()
    q = select(Submission).where(Submission.task_id == t.id, Submission.status.in_(lifecycle.FINAL),
                                 Submission.removed_at.is_(None))
    phase_name = request.form.get("phase") or None
    if phase_name:
        p = s.exec(select(Phase).where(Phase.task_id == t.id, Phase.name == phase_name)).first()
        if p is None:
            abort(404)
        q = q.where(Submission.phase_id == p.id)
    # a file that failed validation is not rescored unless asked: it would fail again
    subs = [x for x in s.exec(q).all() if x.status == "scored" or x.failure_kind != "invalid"
            or request.form.get("include_invalid")]
    audit(s, current_user(), "task.rescore", f"task:{t.id}", phase=phase_name, count=len(subs))
    ids = lifecycle.rescore(s, subs, actor=current_user(), max_attempts=_settings().max_attempts)
    _enqueue_ids(ids)
    flash(f"{len(ids)} submissions of {t.id} queued for rescoring.", "ok")
    return _back(url_for("organizer.dashboard"))


# ----------------------------------------------------------------------------- baselines


@bp.route("/tasks/<task_id>/baselines", methods=["POST"])
@organizer_required
def queue_baselines(task_id: str):
    """Put baseline runs of a task on the baselines queue (a GPU worker's, or serve's own worker)."""
    from baselines.systems import SYSTEMS, Options
    from server.queue import connect, enqueue_baseline_run

    t = task_or_404(task_id)
    systems = [x for x in request.form.getlist("system") if x in SYSTEMS.get(t.id, ())]
    if not systems:
        flash(f"Choose at least one system of {t.id} ({', '.join(SYSTEMS.get(t.id, ()))}).", "error")
        return _back(url_for("organizer.dashboard"))
    device = request.form.get("device", "auto")
    opts = Options(model=(request.form.get("model") or "").strip() or None,
                   cross_model=(request.form.get("cross_model") or "").strip() or None,
                   device=device if device in ("auto", "cpu", "cuda") else "auto")
    options = opts.job_args()
    settings = current_app.extensions["palimpsest.settings"]
    s = db()
    try:
        conn = current_app.extensions.get("palimpsest.redis") or connect(settings)
        jobs = [enqueue_baseline_run(conn, t.id, system, options, settings).id for system in systems]
    except Exception as e:  # noqa: BLE001 — nothing was recorded: say so, plainly
        flash(f"The baselines queue is not reachable ({type(e).__name__}: {e}); nothing was queued.", "error")
        return _back(url_for("organizer.dashboard"))
    audit(s, current_user(), "baselines.enqueue", f"task:{t.id}", systems=systems, options=options, jobs=jobs)
    s.commit()
    flash(f"Queued {len(jobs)} baseline run(s) of {t.id}: {', '.join(systems)}. A worker of the baselines "
          "queue runs them and records each file as a baseline entry; see the queue page.", "ok")
    return _back(url_for("organizer.dashboard"))


def _baseline_runs(conn, settings) -> list[dict]:
    """The baseline runs RQ still knows of: waiting, running, finished (what they recorded), failed."""
    from rq.job import Job
    from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry

    from server.queue import BASELINES, get_queue

    q = get_queue(BASELINES, conn, settings)
    ids = (q.get_job_ids()[:50] + StartedJobRegistry(queue=q).get_job_ids()[:50]
           + FinishedJobRegistry(queue=q).get_job_ids()[-50:] + FailedJobRegistry(queue=q).get_job_ids()[-50:])
    runs = []
    for job in Job.fetch_many(list(dict.fromkeys(ids)), connection=conn, serializer=q.serializer):
        if job is None:
            continue
        status = job.get_status(refresh=False)
        info = {"id": job.id, "what": job.description, "status": getattr(status, "value", status),
                "enqueued": job.enqueued_at, "ended": job.ended_at, "recorded": [], "error": ""}
        if info["status"] == "finished":
            info["recorded"] = (job.return_value() or {}).get("recorded", [])
        elif info["status"] == "failed":
            exc = (job.exc_info or "").strip().splitlines()
            info["error"] = exc[-1] if exc else "failed"
        runs.append(info)
    runs.sort(key=lambda r: r["enqueued"] or datetime.min, reverse=True)
    return runs


# ----------------------------------------------------------------------------- queue and log


@bp.route("/queue")
@organizer_required
def queue():
    """Waiting, running and failed jobs, from the database (the record of truth) and from RQ."""
    s = db()
    by_status = {st: s.exec(select(Submission).where(Submission.status == st).order_by(Submission.id.desc())
                            .limit(100)).all() for st in ("queued", "running", "failed")}
    rq_info, rq_error, runs = {}, None, []
    try:
        from rq.registry import FailedJobRegistry, StartedJobRegistry

        from server.queue import QUEUES, connect, get_queue

        settings = current_app.extensions["palimpsest.settings"]
        # only look: the queue page never starts the embedded Redis itself
        conn = current_app.extensions.get("palimpsest.redis") or connect(settings, start_embedded=False)
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
    return render_template("organizer/queue.html", by_status=by_status, rq_info=rq_info, rq_error=rq_error,
                           runs=runs)


@bp.route("/audit")
@organizer_required
def audit_log():
    s = db()
    q = select(AuditLog)
    everything = request.args.get("all") == "1"
    if not everything:  # the workers' status changes of every submission, on demand only
        q = q.where(AuditLog.action != "submission.status")
    rows = s.exec(q.order_by(AuditLog.id.desc()).limit(500)).all()
    actors = {u.id: u.email for u in s.exec(select(User)).all()}
    return render_template("organizer/audit.html", rows=rows, actors=actors, everything=everything)


__all__ = ["bp", "PHASE_ORDER"]
