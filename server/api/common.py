"""The API's plumbing, shared by every route module: the blueprint, the error envelope (one table
from named failures to status and code, `server.statuses`), request models read from the query or
the body, cursor pagination, who asks (a bearer token) and the lookups of a task, a phase and a
submission, and the dict builders a task and a submission answer with.
"""

from __future__ import annotations

import base64
from urllib.parse import urlencode

from flask import Blueprint, current_app, jsonify, request
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import DBAPIError
from sqlmodel import SQLModel, select
from werkzeug.exceptions import HTTPException

from server import api_models as m
from server.actions import common as action_common
from server.actions.common import phase_or_default
from server.actions.submissions import UPLOAD_READ
from server.db import db
from server.domain import code_runs, people
from server.domain.bounds import INT_MAX
from server.domain.submissions import quota, shown_scores
from server.domain.visibility import shown_part, viewer_of
from server.exceptions import NotFound
from server.jobs import waits
from server.models import (
    Phase,
    Submission,
    Team,
    User,
)
from server.settings import get_settings
from server.statuses import HANDLED, MAYBE_DISK_FULL, as_disk_full, describe
from server.web import auth
from tasks.store import TaskStore

bp = Blueprint("api", __name__, url_prefix="/api/v1")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def error_response(status: int, code: str, message: str, **extra):
    r = jsonify({"error": {"code": code, "message": message, **extra}})
    r.status_code = status
    if status == 401:
        r.headers["WWW-Authenticate"] = 'Bearer realm="palimpsest"'
    return r


@bp.errorhandler(ApiError)
def _api_error(e: ApiError):
    return error_response(e.status, e.code, e.message, **e.extra)


def named_error(e: Exception):
    """A named failure of the server (server.statuses.TABLE): its status and code, as on the web."""
    status, code, message, extra = describe(e)
    return error_response(status, code, message, **extra)


for _cls in HANDLED:
    bp.register_error_handler(_cls, named_error)


def _maybe_disk_full(e: Exception):
    """An OSError or a database error that is the disk being full: 507 naming it; any other
    is the server's failure (500, logged)."""
    full = as_disk_full(e)
    if full is None:
        raise e
    return named_error(full)


for _cls in (*MAYBE_DISK_FULL, DBAPIError):
    bp.register_error_handler(_cls, _maybe_disk_full)


@bp.errorhandler(HTTPException)
def _http_error(e: HTTPException):
    messages = {
        401: (
            "authentication required: send 'Authorization: Bearer <token>' "
            "(cookies are not accepted)"
        ),
        403: "not allowed",
        404: "not found",
        405: "method not allowed",
        413: (
            f"the upload is over the limit of {current_app.config.get('MAX_CONTENT_LENGTH')} bytes"
        ),
    }
    return error_response(
        e.code or 500,
        (e.name or "error").lower().replace(" ", "_"),
        messages.get(e.code, e.description or e.name),
    )


def out(model: type[BaseModel], _status: int = 200, _headers: dict | None = None, /, **fields):
    """An answer validated into its declared model."""
    r = jsonify(model.model_validate(fields).model_dump(mode="json", exclude_unset=True))
    r.status_code = _status
    r.headers.update(_headers or {})
    return r


def json_out(result: BaseModel, _status: int = 200):
    """An action's declared result as the answer."""
    r = jsonify(result.model_dump(mode="json", exclude_unset=True))
    r.status_code = _status
    return r


def problems_of(e: ValidationError) -> dict:
    probs = [
        {"line": None, "id": ".".join(str(x) for x in err["loc"]) or None, "message": err["msg"]}
        for err in e.errors()
    ]
    return {"problems": probs, "total": len(probs)}


def validate(model: type[BaseModel], data: dict):
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        msg = first["msg"]
        if first["type"].startswith(("datetime", "date")):
            msg += " (ISO 8601, e.g. 2026-01-31T23:59:00Z; UTC when no offset is given)"
        raise ApiError(
            422, "invalid_request", f"{where}: {msg}" if where else msg, **problems_of(e)
        ) from None


def query_model(model: type[BaseModel]):
    return validate(model, request.args.to_dict())


def body_model(model: type[BaseModel]):
    """The JSON body (or, for scripts with curl -F, the form) validated into its model."""
    data = request.get_json(silent=True)
    if data is None:
        data = {k: v for k, v in request.form.items()}
        for k, v in list(data.items()):
            if (
                v.lower() in ("true", "false")
                and model.model_fields.get(k) is not None
                and model.model_fields[k].annotation is bool
            ):
                data[k] = v.lower() == "true"
        for k in request.form:
            if len(request.form.getlist(k)) > 1:
                data[k] = request.form.getlist(k)
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_request", "send a JSON object")
    return validate(model, data)


# ----------------------------------------------------------------------------- pages


def cursor_id(cursor: str | None) -> int | None:
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        kind, _, n = raw.partition(":")
        if kind != "id":
            raise ValueError(kind)
        got = int(n)
        if not 0 <= got <= INT_MAX:
            raise ValueError(n)
        return got
    except (ValueError, UnicodeDecodeError):
        raise ApiError(
            422, "bad_cursor", "the cursor is not one this server gave (pass `next_cursor` as is)"
        ) from None


def cursor_of(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode("ascii").rstrip("=")


def paginate(s, q, id_col, page: m.PageQuery, render) -> tuple[list, dict]:
    """Newest first by id: (items, the page's `next_cursor`/`next` and its Link header)."""
    after = cursor_id(page.cursor)
    if after is not None:
        q = q.where(id_col < after)
    rows = list(s.exec(q.order_by(id_col.desc()).limit(page.limit + 1)))
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    items = [render(r) for r in rows]
    nxt = cur = None
    if more and rows:
        last = rows[-1]
        last_id = last.id if isinstance(last, SQLModel) else last[0].id
        cur = cursor_of(last_id)
        args = {**request.args.to_dict(), "cursor": cur}
        nxt = f"{request.base_url}?{urlencode(args)}"
    return items, {"next_cursor": cur, "next": nxt}


def page_out(model, items, links, status: int = 200, **extra):
    headers = {"Link": f'<{links["next"]}>; rel="next"'} if links["next"] else None
    return out(model, status, headers, items=items, **links, **extra)


# ----------------------------------------------------------------------------- who and what


def need_user() -> User:
    u = auth.current_user()
    if u is None:
        header = request.headers.get("Authorization", "")
        if header:
            raise ApiError(401, "invalid_token", "the API token is invalid or revoked")
        raise ApiError(
            401,
            "unauthorized",
            "authentication required: send 'Authorization: Bearer <token>' "
            "(cookies are not accepted)",
        )
    return u


def need_organizer(task_id: str | None = None, submission_id: int | None = None) -> User:
    """The signed-in organizer of the task's competition (of the submission's task), or of any
    competition for a route that names none (it filters what it shows): the one check,
    `server.actions.common.require_organizer`, its refusal answered as every action's."""
    u = need_user()
    action_common.require_organizer(u, db(), task_id=task_id, submission_id=submission_id)
    return u


def need_admin() -> User:
    u = need_user()
    if not people.is_admin(u):
        raise ApiError(403, "not_admin", "this needs a site administrator's token")
    return u


def find_task(task_id: str):
    """The declared task, if the caller may see it (a draft competition's task is its people's
    only: anyone else is told what they would be told of a task that does not exist)."""
    try:
        return action_common.visible_task(db(), auth.current_user(), task_id)
    except NotFound as e:
        raise ApiError(404, "unknown_task", e.message) from None


def task_phases(s, task_id: str) -> list[Phase]:
    return list(s.exec(select(Phase).where(Phase.task_id == task_id).order_by(Phase.id)))


def find_phase(s, task_id: str, name: str | None) -> Phase:
    return phase_or_default(s, task_id, name)


def quota_of(s, user, phase: Phase) -> dict | None:
    team_id = people.team_id_for_task(s, user, phase.task_id)
    if team_id is None:
        return None

    q = quota(s, team_id=team_id, phase=phase)
    left = [v for v in (q.get("daily_left"), q.get("total_left")) if v is not None]
    q["next_allowed_at"] = (
        None
        if not left or min(left) > 0
        else (q.get("resets_at") if q.get("total_left") != 0 else None)
    )
    return q


def task_fields(task, store_exists: bool, phases: list[dict]) -> dict:
    f = task.format
    return {
        "id": task.id,
        "version": task.version,
        "title": task.title,
        "description": task.description,
        "citation": task.citation,
        "licence": task.licence,
        "source": task.source,
        "primary": {
            "metric": task.primary[1],
            "subset": task.primary[0],
            "greater_is_better": task.greater_is_better,
        },
        "metrics": list(task.metrics),
        "subsets": list(task.subsets),
        "splits": list(task.splits),
        "format": {
            "native": f.native,
            "also": ["csv", "tsv", "gz", "zip"],
            "example": f.example,
            "fields": [
                {
                    "name": x.name,
                    "kind": x.kind,
                    "description": x.description,
                    "optional": x.name in f.optional,
                }
                for x in f.fields
            ],
        },
        "imported": store_exists,
        "phases": phases,
    }


def task_store(task_id: str):
    return TaskStore(task_id, get_settings().home)


def visible_scores_of(s, user, sub: Submission, phase: Phase) -> dict | None:
    """The scoring contract of what the caller may see: the public part (or all) while the phase
    runs; after publication the private part too. Participants see the gold's keyed id, never its
    sha256."""
    if sub.score_attempt is None:  # never scored (a rescore keeps the standing scores)
        return None
    parts = {
        sc.part: sc.result for sc in shown_scores(s, user, sub, phase, get_settings().secret_key)
    }
    if not parts:
        return None
    viewer = viewer_of(user, s, sub.task_id)
    part = shown_part(viewer, phase, sub.created_at, parts) or next(iter(parts))
    d = dict(parts[part])
    d["part"] = part
    if len(parts) > 1:
        d["parts"] = parts
    return d


def submission_fields(
    s,
    user,
    sub: Submission,
    phase: Phase | None = None,
    team: str | None = None,
    *,
    uploaded: bool = False,
) -> dict:
    """`uploaded`: a file its team has just uploaded (never a blind run's output)."""
    phase = phase or s.get(Phase, sub.phase_id)
    if not uploaded and code_runs.gated_for(s, user, sub):  # a blind run's output, gated
        return _gated_fields(s, sub, phase, team)
    return {
        "id": sub.id,
        "task": sub.task_id,
        "phase": phase.name if phase else None,
        "status": sub.status,
        "created": sub.created_at,
        "started": sub.started_at,
        "finished": sub.finished_at,
        # what the run keeps of its upload, each declared field (m.UploadFields.row)
        **{k: getattr(sub, k) for k in m.UploadFields.carried()},
        "facts": sub.facts or None,
        "is_primary": sub.is_primary,
        "is_baseline": sub.is_baseline,
        "file_name": sub.file_name,
        "size": sub.size,
        "sha256": sub.file_sha256,
        "hidden": sub.hidden,
        "hidden_reason": sub.hidden_reason or None,
        "failure_kind": sub.failure_kind,
        "errors": [] if sub.status != "failed" else (sub.errors or []),
        "scores": visible_scores_of(s, user, sub, phase) if phase else None,
        "team": team if team is not None else getattr(s.get(Team, sub.team_id), "name", None),
        "removed": sub.removed_at is not None,
    }


def _gated_fields(s, sub: Submission, phase: Phase, team: str | None) -> dict:
    """A gated blind run's output as its team reads it: `code_runs.team_view` and what its
    team uploaded with the system, nothing the run computed (no size, checksum, time, problem)."""
    view = code_runs.team_view(s, code_runs.gating_run(s, sub.id), phase, get_settings())
    state = view["state"]
    scores = view["scores"]
    return {
        "id": sub.id,
        "task": sub.task_id,
        "phase": phase.name if phase else None,
        "status": "submitted"
        if state == code_runs.SUBMITTED
        else "scored"
        if state == "valid and scored"
        else "failed",
        "created": view["submitted"],
        "started": None,
        "finished": None,
        **{k: getattr(sub, k) for k in m.UploadFields.carried()},
        "facts": sub.facts or None,
        "is_primary": sub.is_primary,
        "is_baseline": sub.is_baseline,
        "file_name": sub.file_name,
        "size": None,
        "sha256": None,
        "hidden": sub.hidden,
        "hidden_reason": sub.hidden_reason or None,
        "failure_kind": None,
        "errors": [{"line": None, "id": None, "message": state}]
        if state not in (code_runs.SUBMITTED, "valid and scored")
        else [],
        "scores": {"part": next(iter(scores)), **next(iter(scores.values()))} if scores else None,
        "team": team if team is not None else getattr(s.get(Team, sub.team_id), "name", None),
        "removed": sub.removed_at is not None,
    }


def runs_page(s, u, runs, page, phases: list[Phase]):
    """A page of runs (`runs`: a query of submissions, whatever it selects), each with its team's
    name, as the API lists them (`SubmissionOut`, newest first)."""
    q = select(Submission, Team).join(Team, Team.id == Submission.team_id)
    if runs.whereclause is not None:
        q = q.where(runs.whereclause)
    by_id = {p.id: p for p in phases}
    items, links = paginate(
        s,
        q,
        Submission.id,
        page,
        lambda row: submission_fields(s, u, row[0], by_id.get(row[0].phase_id), row[1].name),
    )
    return page_out(m.Page[m.SubmissionOut], items, links)


def submission_out(s, u, sub, status: int = 200, *, uploaded: bool = False, **extra):
    """A run as the API shows it, with its place in the queue while it waits (its estimate from
    the inputs this process read in the last seconds: `waits.live_standing`). `uploaded`: the
    answer to the upload of a new file: the run as its transaction committed it (the session
    keeps what it wrote; its status checked against the queue, read for its place, and the run
    read again only if a worker took it since), its phase and team as the intake read them, no
    check of the blind runs' gate."""
    phase = team = None
    if uploaded:
        held = s.info.pop(UPLOAD_READ, None)  # noqa: F841 — alive: found by `get` in the session
        phase = s.get(Phase, sub.phase_id)
        team = getattr(s.get(Team, sub.team_id), "name", None)
    else:
        s.refresh(sub)
    standing = waits.live_standing(
        s, sub, current_app.extensions.get("palimpsest.redis"), recent=True, recheck=uploaded
    )
    if standing is not None:
        extra["queue"] = standing
    fields = submission_fields(s, u, sub, phase, team, uploaded=uploaded)
    return out(m.SubmissionOut, status, **fields, **extra)


def own_submission(s, user, submission_id: int) -> Submission:
    try:
        return action_common.visible_submission(s, user, submission_id)
    except NotFound as e:
        raise ApiError(404, "not_found", e.message) from None


def any_submission(s, submission_id: int) -> Submission:
    try:
        return action_common.submission(s, submission_id)
    except NotFound as e:
        raise ApiError(404, "not_found", e.message) from None


# ----------------------------------------------------------------------------- competitions


def current_viewer() -> User | None:
    """Who asks on a route anonymous visitors may read: None without a token; a token that is
    sent must be valid."""
    u = auth.current_user()
    if u is None and request.headers.get("Authorization", ""):
        raise ApiError(401, "invalid_token", "the API token is invalid or revoked")
    return u


def need_competition_organizer(u: User, competition_id: str) -> None:
    """Refuse someone who does not organize the competition (NotFound for a draft they cannot
    see), before the request's body is read."""
    s = db()
    action_common.require_organizer(u, s, slug=competition_id)
