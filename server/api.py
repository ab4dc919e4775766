"""The REST API (`/api/v1`, JSON): token authentication only, JSON errors with every problem.

Every error is `{"error": {"code": ..., "message": ..., ...}}`; validation failures add
`problems` (each with `line`, `id`, `message`) and `total`.
"""

from __future__ import annotations

import io
import json
import zipfile
from datetime import datetime, timezone

from flask import Blueprint, Response, current_app, jsonify, request
from sqlmodel import select
from werkzeug.exceptions import HTTPException

from server import auth
from server.models import Phase, Submission, Team
from server.submissions import phase_state, visible_scores

bp = Blueprint("api", __name__, url_prefix="/api/v1")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def _iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.isoformat().replace("+00:00", "Z")


def error_response(status: int, code: str, message: str, **extra):
    r = jsonify({"error": {"code": code, "message": message, **extra}})
    r.status_code = status
    if status == 401:
        r.headers["WWW-Authenticate"] = 'Bearer realm="palimpsest"'
    return r


@bp.errorhandler(ApiError)
def _api_error(e: ApiError):
    return error_response(e.status, e.code, e.message, **e.extra)


@bp.errorhandler(HTTPException)
def _http_error(e: HTTPException):
    messages = {
        401: "authentication required: send 'Authorization: Bearer <token>' (cookies are not accepted)",
        403: "not allowed",
        404: "not found",
        405: "method not allowed",
        413: f"the upload is over the limit of {current_app.config.get('MAX_CONTENT_LENGTH')} bytes",
    }
    return error_response(e.code or 500, (e.name or "error").lower().replace(" ", "_"),
                          messages.get(e.code, e.description or e.name))


def _user():
    u = auth.current_user()
    if u is None:
        header = request.headers.get("Authorization", "")
        if header:
            raise ApiError(401, "invalid_token", "the API token is invalid or revoked")
        raise ApiError(401, "unauthorized",
                       "authentication required: send 'Authorization: Bearer <token>' (cookies are not accepted)")
    return u


def _task(task_id: str):
    from scorer.errors import TaskNotFound
    from tasks import get_task

    try:
        return get_task(task_id)
    except TaskNotFound as e:
        raise ApiError(404, "unknown_task", str(e)) from None


def _phases(s, task_id: str) -> list[Phase]:
    return list(s.exec(select(Phase).where(Phase.task_id == task_id).order_by(Phase.id)))


def _phase(s, task_id: str, name: str | None) -> Phase:
    phases = _phases(s, task_id)
    if not phases:
        raise ApiError(404, "no_phase", f"task {task_id!r} has no phases")
    if name:
        for p in phases:
            if p.name == name:
                return p
        raise ApiError(404, "unknown_phase", f"task {task_id!r} has no phase {name!r} "
                                             f"(phases: {', '.join(p.name for p in phases)})")
    open_ = [p for p in phases if phase_state(p) == "open"]
    for want in ("test", "dev"):
        for p in open_:
            if p.name == want:
                return p
    return open_[0] if open_ else phases[-1]


def _quota(s, user, phase: Phase) -> dict | None:
    if user is None or user.team_id is None:
        return None
    try:
        from server.submissions import quota
    except ImportError:  # pragma: no cover - the backbone provides it
        return None
    q = quota(s, team_id=user.team_id, phase=phase)
    left = [v for v in (q.get("daily_left"), q.get("total_left")) if v is not None]
    q["next_allowed_at"] = None if not left or min(left) > 0 else (
        q.get("resets_at") if q.get("total_left") != 0 else None)
    return q


def phase_json(p: Phase, quota: dict | None = None) -> dict:
    d = {"name": p.name, "split": p.split, "opens_at": _iso(p.opens_at), "closes_at": _iso(p.closes_at),
         "is_open": phase_state(p) == "open", "published": p.published_at is not None,
         "limits": {"daily": p.daily_limit, "total": p.total_limit, "concurrent": p.concurrent_limit}}
    if quota is not None:
        d["quota"] = {k: (_iso(v) if isinstance(v, datetime) else v) for k, v in quota.items()}
    return d


def task_json(task, store_exists: bool, phases: list[dict]) -> dict:
    f = task.format
    return {
        "id": task.id, "version": task.version, "title": task.title, "description": task.description,
        "citation": task.citation, "licence": task.licence, "source": task.source,
        "primary": {"metric": task.primary[1], "subset": task.primary[0],
                    "greater_is_better": task.greater_is_better},
        "metrics": list(task.metrics), "subsets": list(task.subsets), "splits": list(task.splits),
        "format": {"native": f.native, "also": ["csv", "tsv", "gz", "zip"], "example": f.example,
                   "fields": [{"name": x.name, "kind": x.kind, "description": x.description,
                               "optional": x.name in f.optional} for x in f.fields]},
        "imported": store_exists,
        "phases": phases,
    }


def _store(task_id: str):
    from tasks.store import TaskStore

    return TaskStore(task_id, current_app.extensions["palimpsest.settings"].home)


# ----------------------------------------------------------------------------- routes


@bp.get("/me")
def me():
    u = _user()
    s = auth.db()
    team = s.get(Team, u.team_id) if u.team_id else None
    return jsonify({"id": u.id, "email": u.email, "is_organizer": u.is_organizer,
                    "team": {"id": team.id, "name": team.name} if team else None})


@bp.get("/tasks")
def tasks_list():
    from tasks import all_tasks

    u = _user()
    s = auth.db()
    out = []
    for t in all_tasks():
        phases = [phase_json(p, _quota(s, u, p)) for p in _phases(s, t.id)]
        d = task_json(t, _store(t.id).exists(), phases)
        out.append({k: d[k] for k in ("id", "title", "primary", "imported", "phases")})
    return jsonify(out)


@bp.get("/tasks/<task_id>")
def task_detail(task_id):
    u = _user()
    t = _task(task_id)
    s = auth.db()
    return jsonify(task_json(t, _store(t.id).exists(), [phase_json(p, _quota(s, u, p)) for p in _phases(s, t.id)]))


@bp.get("/tasks/<task_id>/download")
def download(task_id):
    _user()
    t = _task(task_id)
    store = _store(t.id)
    if not store.exists():
        raise ApiError(404, "not_imported", f"task {t.id!r} has no data yet; the organizer imports it with: "
                                            f"{t.import_help}")
    split = request.args.get("split")
    if split is not None and split not in ("train", *t.splits):
        raise ApiError(404, "unknown_split", f"task {t.id!r} has no split {split!r}")
    buf = io.BytesIO()
    manifest = store.manifest()
    public_manifest = {k: manifest[k] for k in ("task", "version", "splits", "counts") if k in manifest}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("task.json", json.dumps(public_manifest, indent=2))
        for p in store.public_files(split):
            zf.write(p, p.relative_to(store.root).as_posix())
    return Response(buf.getvalue(), mimetype="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{t.id}-public.zip"'})


def _visible_scores(s, user, sub: Submission, phase: Phase) -> dict | None:
    """The scoring contract of what the caller may see: the public part (or all) while the phase
    runs; after publication the private part too. Participants see the gold's keyed id, never its
    sha256."""
    from server.lifecycle import public_result

    if sub.score_attempt is None:  # never scored (a rescore keeps the standing scores)
        return None
    secret = current_app.extensions["palimpsest.settings"].secret_key
    parts = {sc.part: (sc.result if user.is_organizer else public_result(sc.result, secret))
             for sc in visible_scores(s, sub, phase, organizer=user.is_organizer)}
    if not parts:
        return None
    main = parts.get("private") if phase.published_at is not None else None
    main = main or parts.get("public") or parts.get("all") or next(iter(parts.values()))
    out = dict(main)
    out["part"] = next(k for k, v in parts.items() if v is main)
    if len(parts) > 1:
        out["parts"] = parts
    return out


def submission_json(s, user, sub: Submission, phase: Phase | None = None) -> dict:
    phase = phase or s.get(Phase, sub.phase_id)
    d = {"id": sub.id, "task": sub.task_id, "phase": phase.name if phase else None, "status": sub.status,
         "created": _iso(sub.created_at), "started": _iso(sub.started_at), "finished": _iso(sub.finished_at),
         "method_name": sub.method_name, "description": sub.description, "url": sub.url,
         "show_publicly": sub.show_publicly, "is_primary": sub.is_primary, "is_baseline": sub.is_baseline,
         "file_name": sub.file_name,
         "size": sub.size, "sha256": sub.file_sha256, "hidden": sub.hidden,
         "hidden_reason": sub.hidden_reason or None, "failure_kind": sub.failure_kind,
         "errors": (sub.errors or []) if sub.status == "failed" else [],
         "scores": _visible_scores(s, user, sub, phase) if phase else None}
    return d


def _own_submission(s, user, submission_id: int) -> Submission:
    sub = s.get(Submission, submission_id)
    # the same answer for "not yours" and "does not exist": ids are not an oracle
    if sub is None or sub.removed_at is not None or not auth.can_see_submission(user, sub):
        raise ApiError(404, "not_found", f"no submission {submission_id} visible to you")
    return sub


@bp.post("/tasks/<task_id>/submissions")
def create(task_id):
    from server.exceptions import DuplicateSubmission, LimitReached, PhaseClosed, SubmissionRefused
    from server.submissions import create_submission

    u = _user()
    t = _task(task_id)
    s = auth.db()
    as_baseline = (request.form.get("baseline") or "").lower() in ("1", "true", "yes")
    if as_baseline and not u.is_organizer:
        raise ApiError(403, "not_organizer", "only an organizer's token may record baseline entries")
    if u.team_id is None and not as_baseline:
        raise ApiError(403, "no_team", "join or create a team before submitting")
    if not _store(t.id).exists():
        raise ApiError(409, "not_imported", f"task {t.id!r} has no data yet")
    phase = _phase(s, t.id, request.form.get("phase") or None)
    f = request.files.get("file")
    if f is None:
        raise ApiError(400, "no_file", "send the prediction file as the multipart field 'file'")
    data = f.read()
    if not data:
        raise ApiError(422, "invalid_submission", "the file is empty",
                       problems=[{"line": None, "id": None, "message": "the file is empty"}], total=1)
    if as_baseline:
        from server.baselines import baseline_team

        team = baseline_team(s)
    else:
        team = s.get(Team, u.team_id)
    try:
        sub = create_submission(
            s, user=u, team=team, task_id=t.id, phase=phase, upload=data, filename=f.filename or "",
            method_name=(request.form.get("method_name") or "")[:200],
            description=request.form.get("description") or "",
            url=(request.form.get("url") or "")[:500],
            show_publicly=(request.form.get("show_publicly", "true").lower() not in ("0", "false", "no")),
            is_baseline=as_baseline, settings=current_app.extensions["palimpsest.settings"], dedupe=True,
        )
    except DuplicateSubmission as e:  # a retried upload: the same answer, counted once
        body = submission_json(s, u, s.get(Submission, e.submission_id), phase)
        body["duplicate"] = True
        return jsonify(body), 200
    except LimitReached as e:
        raise ApiError(429, "limit_reached", e.message, limit=getattr(e, "limit", None),
                       next_allowed_at=_iso(e.next_allowed_at)) from None
    except PhaseClosed as e:
        raise ApiError(403, "phase_closed", e.message, next_allowed_at=_iso(e.next_allowed_at)) from None
    except SubmissionRefused as e:
        raise ApiError(422, "refused", e.message, next_allowed_at=_iso(e.next_allowed_at)) from None
    body = submission_json(s, u, sub, phase)
    body["duplicate"] = False
    return jsonify(body), 201


@bp.get("/submissions")
def my_submissions():
    u = _user()
    s = auth.db()
    q = select(Submission).where(Submission.removed_at.is_(None))
    if not u.is_organizer or request.args.get("mine", "1") != "0":
        if u.team_id is None:
            return jsonify([])
        q = q.where(Submission.team_id == u.team_id)
    if request.args.get("task"):
        q = q.where(Submission.task_id == request.args["task"])
    phases = {p.id: p for p in s.exec(select(Phase))}
    subs = list(s.exec(q.order_by(Submission.id.desc()).limit(1000)))
    return jsonify([submission_json(s, u, x, phases.get(x.phase_id)) for x in subs])


@bp.get("/submissions/<int:submission_id>")
def submission(submission_id):
    u = _user()
    s = auth.db()
    return jsonify(submission_json(s, u, _own_submission(s, u, submission_id)))


@bp.get("/tasks/<task_id>/leaderboard")
def leaderboard(task_id):
    """The same board as /tasks/<id>/leaderboard.json, from the same render cache, as the token
    holder may see it."""
    from server.views.leaderboard import _serve

    u = _user()
    t = _task(task_id)
    who = "organizer" if u.is_organizer else (f"team:{u.team_id}" if u.team_id else "public")
    return _serve(t.id, "json", who=who)


# ----------------------------------------------------------------------------- organizers: the lifecycle


def _organizer():
    u = _user()
    if not u.is_organizer:
        raise ApiError(403, "not_organizer", "this needs an organizer's token")
    return u


def _lifecycle_call(fn):
    from server.exceptions import LifecycleRefused

    try:
        return fn()
    except LifecycleRefused as e:
        auth.db().rollback()
        raise ApiError(409, e.code, e.message) from None


def _phase_state_json(p: Phase) -> dict:
    from server.lifecycle import phase_labels

    d = phase_json(p)
    d.update({"state": phase_labels(p), "frozen": bool(p.frozen), "leaderboard_open": bool(p.leaderboard_open),
              "published_at": _iso(p.published_at), "public_fraction": p.public_fraction})
    return d


@bp.post("/tasks/<task_id>/phases/<phase_name>/<action>")
def phase_action(task_id, phase_name, action):
    """close, freeze, unfreeze or publish a phase (publish: `reason` for a correction, `close=true`
    to close an open phase in the same step)."""
    from server import lifecycle

    u = _organizer()
    t = _task(task_id)
    s = auth.db()
    p = _phase(s, t.id, phase_name)
    body = request.get_json(silent=True) or request.form
    if action == "close":
        _lifecycle_call(lambda: lifecycle.close(s, p, actor=u, via="api"))
    elif action in ("freeze", "unfreeze"):
        _lifecycle_call(lambda: lifecycle.set_frozen(s, p, action == "freeze", actor=u, via="api"))
    elif action == "publish":
        close_first = str(body.get("close", "false")).lower() in ("1", "true", "yes")
        rv = _lifecycle_call(lambda: lifecycle.publish(
            s, p, task=t, actor=u, settings=current_app.extensions["palimpsest.settings"],
            reason=str(body.get("reason") or ""), via="api", close_first=close_first))
        return jsonify({"phase": _phase_state_json(p), "ranking": _version_json(rv)}), 201
    else:
        raise ApiError(404, "unknown_action", f"no phase action {action!r} (close, freeze, unfreeze, publish)")
    return jsonify({"phase": _phase_state_json(p)})


def _version_json(rv) -> dict:
    return {"version": rv.version, "published_at": _iso(rv.published_at), "reason": rv.reason,
            "sha256": rv.sha256}


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings")
def rankings(task_id, phase_name):
    """Every published version of a phase's final ranking (organizers)."""
    from server.lifecycle import ranking_versions

    _organizer()
    t = _task(task_id)
    s = auth.db()
    p = _phase(s, t.id, phase_name)
    return jsonify({"phase": _phase_state_json(p), "versions": [_version_json(v) for v in ranking_versions(s, p.id)]})


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings/<int:version>")
def ranking_version(task_id, phase_name, version):
    """One published version of the final ranking, byte for byte as published."""
    from server.lifecycle import latest_ranking

    _user()
    t = _task(task_id)
    s = auth.db()
    p = _phase(s, t.id, phase_name)
    rv = latest_ranking(s, p.id, version)
    if rv is None:
        raise ApiError(404, "not_published", f"{t.id}/{p.name} has no published version {version}")
    return Response(rv.body_json.encode("utf-8"), mimetype="application/json")


@bp.get("/openapi.json")
def openapi():
    from server.openapi import spec

    return jsonify(spec())


def init_app(app) -> None:
    """Register the API (CSRF does not apply: it takes bearer tokens only, never cookies)."""
    app.register_blueprint(bp)
