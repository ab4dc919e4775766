"""Organizer controls: phases and limits, leaderboard state, hiding, rescoring, publication,
exports and the queue. Every action is written to the audit log; nothing is deleted for real."""

from __future__ import annotations

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
from server.auth import audit, current_user, db, organizer_required, safe_next
from server.models import AuditLog, Phase, Submission, Team, User, utcnow
from server.submissions import phase_state
from server.views.pages import PHASE_ORDER, phases_of, task_or_404
from tasks import all_tasks

bp = Blueprint("organizer", __name__, url_prefix="/organizer")

STATUSES = ("queued", "running", "scored", "failed")


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
    return redirect(safe_next(request.form.get("next", ""), default))


@bp.route("/")
@organizer_required
def dashboard():
    s = db()
    tasks = [(t, phases_of(t.id)) for t in all_tasks()]
    counts = dict(s.exec(select(Submission.status, func.count()).group_by(Submission.status)).all())
    log = s.exec(select(AuditLog).order_by(AuditLog.id.desc()).limit(30)).all()
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
    s = db()
    name = request.form.get("name", "").strip()
    split = request.form.get("split", "").strip()
    if not name or len(name) > 32 or split not in t.splits:
        flash(f"A phase needs a name (at most 32 characters) and a split of the task ({', '.join(t.splits)}).",
              "error")
        return redirect(url_for("organizer.dashboard"))
    if s.exec(select(Phase).where(Phase.task_id == t.id, Phase.name == name)).first():
        flash(f"{t.id} has a phase {name} already.", "error")
        return redirect(url_for("organizer.dashboard"))
    p = Phase(task_id=t.id, name=name, split=split, public_fraction=1.0 if split != "test" else 0.5)
    s.add(p)
    s.flush()
    audit(s, current_user(), "phase.create", f"phase:{p.id}", task=t.id, name=name, split=split)
    s.commit()
    return redirect(url_for("organizer.edit_phase", phase_id=p.id))


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
            if not 0.0 < frac <= 1.0:
                raise ValueError("the public fraction is in (0, 1]")
            if changes["opens_at"] and changes["closes_at"] and changes["closes_at"] <= changes["opens_at"]:
                raise ValueError("a phase closes after it opens")
        except ValueError as e:
            flash(f"Not saved: {e}", "error")
            return render_template("organizer/phase.html", phase=p, task=task_or_404(p.task_id)), 400
        if frac != p.public_fraction:
            if s.exec(select(Submission.id).where(Submission.phase_id == p.id,
                                                  Submission.status == "scored")).first():
                flash("Not saved: the public fraction cannot change once submissions are scored "
                      "(the public/private split is drawn once).", "error")
                return render_template("organizer/phase.html", phase=p, task=task_or_404(p.task_id)), 400
            changes["public_fraction"] = frac
        before = {k: _jsonable(getattr(p, k)) for k in changes}
        for k, v in changes.items():
            setattr(p, k, v)
        lb.bump_revision(s, p)
        audit(s, current_user(), "phase.edit", f"phase:{p.id}", before=before,
              after={k: _jsonable(v) for k, v in changes.items()})
        s.commit()
        flash("Phase saved.", "ok")
        return redirect(url_for("organizer.edit_phase", phase_id=p.id))
    return render_template("organizer/phase.html", phase=p, task=task_or_404(p.task_id))


def _jsonable(v):
    return v.isoformat() if isinstance(v, datetime) else v


@bp.route("/phases/<int:phase_id>/leaderboard", methods=["POST"])
@organizer_required
def leaderboard_state(phase_id: int):
    """Open, close, freeze or unfreeze a phase's leaderboard."""
    p = _phase_or_404(phase_id)
    s = db()
    action = request.form.get("action", "")
    if action == "open":
        p.leaderboard_open = True
    elif action == "close":
        p.leaderboard_open = False
    elif action == "freeze":
        p.frozen, p.frozen_at = True, utcnow()
    elif action == "unfreeze":
        p.frozen, p.frozen_at = False, None
    else:
        abort(400)
    lb.bump_revision(s, p)
    audit(s, current_user(), f"leaderboard.{action}", f"phase:{p.id}", task=p.task_id, phase=p.name)
    s.commit()
    flash(f"Leaderboard of {p.task_id}/{p.name}: {action}.", "ok")
    return _back(url_for("organizer.dashboard"))


@bp.route("/phases/<int:phase_id>/publish", methods=["POST"])
@organizer_required
def publish(phase_id: int):
    """Publish the final ranking: private-part scores become visible to everyone."""
    p = _phase_or_404(phase_id)
    s = db()
    action = request.form.get("action", "publish")
    if action == "publish":
        if p.published_at is None:
            p.published_at = utcnow()
    elif action == "retract":
        p.published_at = None
    else:
        abort(400)
    lb.bump_revision(s, p)
    audit(s, current_user(), f"ranking.{action}", f"phase:{p.id}", task=p.task_id, phase=p.name)
    s.commit()
    flash(f"Final ranking of {p.task_id}/{p.name}: {action}ed.", "ok")
    return _back(url_for("organizer.dashboard"))


@bp.route("/phases/<int:phase_id>/ranking")
@organizer_required
def ranking(phase_id: int):
    """The final ranking as it is or will be published (organizers may preview it)."""
    p = _phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    board = lb.build_board(db(), t, p, audience="public", show_private=True, include_closed=True)
    return render_template("leaderboard/board.html", task=t, board=board, phases=[], audience="organizer",
                           preview=True)


@bp.route("/phases/<int:phase_id>/export.<fmt>")
@organizer_required
def export(phase_id: int, fmt: str):
    """The final ranking as CSV, JSON or a LaTeX table for the task-overview paper."""
    p = _phase_or_404(phase_id)
    t = task_or_404(p.task_id)
    if fmt not in ("csv", "json", "tex"):
        abort(404)
    s = db()
    board = lb.build_board(s, t, p, audience="public", show_private=True, include_closed=True)
    audit(s, current_user(), "ranking.export", f"phase:{p.id}", format=fmt)
    s.commit()
    name = f"{t.id}-{p.name}-ranking.{fmt}"
    if fmt == "csv":
        body, mt = lb.to_csv(board), "text/csv; charset=utf-8"
    elif fmt == "json":
        body, mt = lb.to_json(board), "application/json"
    else:
        body, mt = lb.to_latex(board).encode("utf-8"), "application/x-tex; charset=utf-8"
    return Response(body, content_type=mt, headers={"Content-Disposition": f'attachment; filename="{name}"'})


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
    s = db()
    action = request.form.get("action", "hide")
    reason = " ".join(request.form.get("reason", "").split())[:500]
    if action == "hide":
        if not reason:
            flash("Say why: the reason is shown to the team.", "error")
            return _back(url_for("organizer.submissions"))
        sub.hidden, sub.hidden_reason = True, reason
    elif action == "unhide":
        sub.hidden = False  # the reason stays, for the record
    elif action == "remove":
        if not reason:
            flash("Say why: the reason is shown to the team.", "error")
            return _back(url_for("organizer.submissions"))
        sub.removed_at, sub.hidden_reason = utcnow(), reason
    elif action == "restore":
        sub.removed_at = None
    else:
        abort(400)
    s.add(sub)
    lb.bump_revision(s, s.get(Phase, sub.phase_id))
    audit(s, current_user(), f"submission.{action}", f"submission:{sub.id}", reason=reason)
    s.commit()
    flash(f"Submission #{sub.id}: {action}.", "ok")
    return _back(url_for("organizer.submissions"))


def _enqueue(sub: Submission) -> bool:
    """Put a submission back in the queue to be scored again (a new attempt; old scores stay).

    A rescore opens a new round of `max_attempts` attempts after those already used: attempt
    numbers keep growing (they keep each scoring's Score rows apart) and are never reset.
    """
    from server.queue import connect, enqueue_submission

    settings = current_app.extensions["palimpsest.settings"]
    s = db()
    sub.attempt_ceiling = (sub.attempts or 0) + settings.max_attempts
    sub.status = "queued"
    sub.failure_kind = None
    sub.errors = None
    sub.finished_at = None
    s.add(sub)
    s.commit()  # the database first: if Redis is down, the reconciler enqueues it later
    if not current_app.config.get("PALIMPSEST_ENQUEUE", True):
        return True
    try:
        conn = current_app.extensions.get("palimpsest.redis") or connect(settings)
        enqueue_submission(conn, sub.id, settings, replace=True)
    except Exception as e:  # noqa: BLE001 — the row says queued; the reconciler will pick it up
        current_app.logger.warning("rescore of submission %s left to the reconciler: %s", sub.id, e)
    return True


@bp.route("/submissions/<int:submission_id>/rescore", methods=["POST"])
@organizer_required
def rescore(submission_id: int):
    sub = _sub_or_404(submission_id)
    s = db()
    if sub.removed_at is not None:
        flash(f"Submission #{sub.id} is removed; restore it first.", "error")
        return _back(url_for("organizer.submissions"))
    audit(s, current_user(), "submission.rescore", f"submission:{sub.id}")
    s.commit()
    _enqueue(sub)
    flash(f"Submission #{sub.id} queued for rescoring.", "ok")
    return _back(url_for("organizer.submissions"))


@bp.route("/tasks/<task_id>/rescore", methods=["POST"])
@organizer_required
def rescore_task(task_id: str):
    t = task_or_404(task_id)
    s = db()
    q = select(Submission).where(Submission.task_id == t.id, Submission.status.in_(("scored", "failed")),
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
    s.commit()
    done = sum(1 for sub in subs if _enqueue(sub))
    flash(f"{done} submissions of {t.id} queued for rescoring"
          + (f"; {len(subs) - done} have used every scoring attempt." if done < len(subs) else "."), "ok")
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
    rows = s.exec(select(AuditLog).order_by(AuditLog.id.desc()).limit(500)).all()
    actors = {u.id: u.email for u in s.exec(select(User)).all()}
    return render_template("organizer/audit.html", rows=rows, actors=actors)


__all__ = ["bp", "PHASE_ORDER"]
