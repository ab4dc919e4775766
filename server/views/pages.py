"""What participants see: tasks, their data, phases and quotas, the submit form and their submissions."""

from __future__ import annotations

import io
import zipfile

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
from sqlmodel import select

from server.auth import can_see_submission, current_user, db, login_required
from server.models import Phase, Submission, Team
from server.submissions import phase_state, visible_scores
from tasks import all_tasks, get_task
from tasks.store import TaskStore

bp = Blueprint("pages", __name__)

PHASE_ORDER = {"dev": 0, "test": 1}


def settings():
    return current_app.extensions["palimpsest.settings"]


def task_or_404(task_id: str):
    from scorer.errors import TaskNotFound

    try:
        return get_task(task_id)
    except TaskNotFound:
        abort(404)


def phases_of(task_id: str) -> list[Phase]:
    """The task's phases, created from the task's splits the first time they are asked for."""
    s = db()
    rows = s.exec(select(Phase).where(Phase.task_id == task_id)).all()
    if not rows:
        from server.submissions import ensure_phases

        ensure_phases(s)
        rows = s.exec(select(Phase).where(Phase.task_id == task_id)).all()
    return sorted(rows, key=lambda p: (PHASE_ORDER.get(p.name, 9), p.name))


def quota(team: Team | None, phase: Phase) -> dict | None:
    """What remains of a team's allowance in a phase, as the backbone counts it."""
    if team is None:
        return None
    from server.submissions import quota as backbone_quota

    return backbone_quota(db(), team=team, phase=phase)


def user_team() -> Team | None:
    u = current_user()
    if u is None or u.team_id is None:
        return None
    return db().get(Team, u.team_id)


# ----------------------------------------------------------------------------- tasks


@bp.route("/")
def index():
    home = settings().home
    rows = [(t, TaskStore(t.id, home).exists()) for t in all_tasks()]
    return render_template("tasks/index.html", tasks=rows)


@bp.route("/tasks/<task_id>")
def task(task_id: str):
    t = task_or_404(task_id)
    store = TaskStore(t.id, settings().home)
    imported = store.exists()
    splits = [sp for sp in t.splits if store.public_files(sp)] if imported else []
    team = user_team()
    phases = [(p, phase_state(p), quota(team, p)) for p in phases_of(t.id)]
    from server.lifecycle import RANKED_RUN_RULE

    return render_template(
        "tasks/task.html",
        task=t,
        imported=imported,
        splits=splits,
        phases=phases,
        team=team,
        ranked_run_rule=RANKED_RUN_RULE,
    )


@bp.route("/tasks/<task_id>/data/<split>.zip")
def download(task_id: str, split: str):
    """A zip of a split's public inputs (never anything under gold/)."""
    t = task_or_404(task_id)
    if split not in t.splits:
        abort(404)
    store = TaskStore(t.id, settings().home)
    files = store.public_files(split) if store.exists() else []
    if not files:
        abort(404)
    base = (store.root / "public" / split).resolve()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            rp = p.resolve()
            if base not in rp.parents:  # a symlink pointing out of public/ is never followed
                continue
            z.write(rp, f"{t.id}-{split}/{p.relative_to(store.root / 'public' / split).as_posix()}")
    return Response(
        buf.getvalue(),
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{t.id}-{split}.zip"'},
    )


# ----------------------------------------------------------------------------- submitting


@bp.route("/tasks/<task_id>/submit", methods=["GET", "POST"])
@login_required
def submit(task_id: str):
    t = task_or_404(task_id)
    team = user_team()
    if team is None:
        flash("Create or join a team before submitting.", "error")
        return redirect(url_for("teams.mine"))
    phases = phases_of(t.id)
    if not phases:
        abort(404)
    from server.forms import SubmitForm

    if request.method == "POST":
        form = SubmitForm()
    else:
        form = SubmitForm(formdata=None, phase=request.args.get("phase", ""))
    form.phase.choices = [
        (
            p.name,
            f"{p.name} ({p.split}"
            + (
                f", cross-validated: a row per fold and {' and '.join(t.format.key)})"
                if t.is_cross_validated(p.split)
                else ")"
            ),
        )
        for p in phases
    ]
    if request.method != "POST":
        return render_template("tasks/submit.html", task=t, phases=phases, form=form)
    if not form.validate():
        return render_template("tasks/submit.html", task=t, phases=phases, form=form), 400
    from server.exceptions import SubmissionRefused
    from server.submissions import create_submission

    phase = next(p for p in phases if p.name == form.phase.data)
    upload = form.file.data
    s = db()
    try:
        sub = create_submission(
            s,
            user=current_user(),
            team=team,
            task_id=t.id,
            phase=phase,
            upload_bytes_or_stream=upload.stream,
            filename=upload.filename,
            method_name=form.method_name.data,
            description=form.description.data or "",
            url=form.url.data or "",
            show_publicly=form.show_publicly.data,
            settings=settings(),
            enqueue=current_app.config.get("PALIMPSEST_ENQUEUE", True),
            redis=current_app.extensions.get("palimpsest.redis"),
        )
    except SubmissionRefused as e:
        from server.errors import status_of

        s.rollback()
        when = getattr(e, "next_allowed_at", None)
        msg = str(e)
        if when and "UTC" not in msg:
            msg += f" The next submission is allowed at {when:%Y-%m-%d %H:%M} UTC."
        flash(msg, "error")
        # the same status as the API's (server.errors)
        return render_template("tasks/submit.html", task=t, phases=phases, form=form), status_of(e)
    if form.primary.data:
        from server.lifecycle import set_primary

        set_primary(s, sub, team_id=team.id, actor=current_user())
    flash(
        "Submitted. It is queued for scoring."
        + (" It is your team's primary run of the phase." if form.primary.data else ""),
        "ok",
    )
    return redirect(url_for("pages.submission", submission_id=sub.id))


@bp.route("/submissions")
@login_required
def my_submissions():
    team = user_team()
    subs, older = [], None
    before = request.args.get("before", type=int)
    if team is not None:
        # removed runs stay listed (marked) so that the team can read the organizers' reason
        q = select(Submission).where(Submission.team_id == team.id)
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
        primary=primary_scores(subs, phases),
        older=older,
        newest=url_for("pages.my_submissions") if before else None,
    )


PAGE = 100
FINAL = ("scored", "failed")


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
    statuses = {str(s.id): s.status for s in rows if can_see_submission(u, s)}
    return (
        {
            "statuses": statuses,
            "final": all(st in FINAL for st in statuses.values()),
        },
        200,
        {"Cache-Control": "no-store"},
    )


def primary_scores(subs, phases) -> dict[int, tuple[float | None, str]]:
    """Each scored run's primary score as its team may see it (the whole gold, or its public part;
    the private part once the phase's ranking is published), in one query."""
    from server.models import Score

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
        ph = phases.get(s.phase_id)
        for part in (
            ("private", "all", "public")
            if ph is not None and ph.published_at
            else ("all", "public")
        ):
            if part in parts:
                out[s.id] = (parts[part], "" if part == "all" else f"{part} part")
                break
    return out


class _Shown:
    """A Score row whose result is the participant's view of it."""

    def __init__(self, score, result):
        self.part, self.attempt, self.result, self.created_at = (
            score.part,
            score.attempt,
            result,
            score.created_at,
        )
        self.primary_value = score.primary_value


def submission_or_404(submission_id: int) -> Submission:
    """The submission if who asks may see it; 404 otherwise (not 403: its existence is no one's business)."""
    sub = db().get(Submission, submission_id)
    if sub is None or not can_see_submission(current_user(), sub):
        abort(404)
    return sub


@bp.route("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int):
    sub = submission_or_404(submission_id)
    s = db()
    phase = s.get(Phase, sub.phase_id)
    # private-part scores stay unseen until publication, even by the submitting team
    organizer = current_user().is_organizer
    shown = visible_scores(s, sub, phase, organizer=organizer)
    if not organizer:  # the gold's sha256 is the organizers': participants see its keyed id
        from server.lifecycle import public_result

        secret = settings().secret_key
        shown = [_Shown(sc, public_result(sc.result, secret)) for sc in shown]
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
    return render_template(
        "submissions/show.html",
        sub=sub,
        phase=phase,
        scores=shown,
        team=team,
        task=task,
        others=others,
    )


@bp.route("/submissions/<int:submission_id>/primary", methods=["POST"])
@login_required
def mark_primary(submission_id: int):
    """SemEval's convention: one primary run per team and phase; the others are contrastive."""
    sub = submission_or_404(submission_id)
    u = current_user()
    if u.team_id != sub.team_id:  # an organizer may look, but only the team chooses its run
        abort(403)
    s = db()
    from server.lifecycle import set_primary

    set_primary(s, sub, team_id=u.team_id, actor=u)
    phase = s.get(Phase, sub.phase_id)
    flash(f"Submission #{sub.id} is now your primary run for the {phase.name} phase.", "ok")
    return redirect(url_for("pages.submission", submission_id=sub.id))
