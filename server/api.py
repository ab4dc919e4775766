"""The REST API (`/api/v1`, JSON): token authentication only, JSON errors with every problem.

Every operation is declared with `@op` (server/openapi.py): its request and answer models
(server/api_models.py), from which `/api/v1/openapi.json` is generated and `/api/docs` shows it.
Every error is `{"error": {"code": ..., "message": ..., ...}}` with the status server.errors gives
the failure (the web pages use the same table); validation failures add `problems` (each with
`line`, `id`, `message`) and `total`. Every list is a page: `items`, `next_cursor`, `next`.
State changes go through server.lifecycle (submissions, phases, boards) and server.teams.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import flask_swagger_ui
from flask import Blueprint, Response, current_app, jsonify, request, send_from_directory
from pydantic import BaseModel, ValidationError
from sqlmodel import SQLModel, select
from werkzeug.exceptions import HTTPException

from baselines.systems import SYSTEMS, Options
from scorer.errors import TaskNotFound
from server import api_models as m
from server import auth, downloads, lifecycle, outbox, people, releases, teams, waits
from server.actions import announcements as ann_actions
from server.actions import bundles as bundle_actions
from server.actions import campaign_models as model_actions
from server.actions import campaigns as campaign_actions
from server.actions import code_runs as run_actions
from server.actions import competitions as comp_actions
from server.actions import large_uploads
from server.actions import registrations as reg_actions
from server.actions import roles as role_actions
from server.actions import submissions as sub_actions
from server.actions.common import phase_or_default
from server.actions.phases import (
    PHASE_ACTIONS,
    phase_fields,
    phase_state_fields,
    version_fields,
)
from server.db import db
from server.errors import HANDLED, describe
from server.exceptions import EmptyUpload
from server.inputs import INT_MAX
from server.models import (
    AuditLog,
    Competition,
    Phase,
    RankingVersion,
    Submission,
    Team,
    TeamMember,
    User,
)
from server.openapi import op, spec
from server.organize import (
    QueueUnreachable,
    enqueue_ids,
    export_ranking,
    fit_enqueuer,
    queue_baselines,
)
from server.organize import baseline_runs as runs_of
from server.provenance import public_result
from server.publication import latest_ranking
from server.queue import connect
from server.settings import get_settings
from server.submissions import quota, visible_scores
from server.views.leaderboard import _serve
from server.visibility import shown_part, viewer_of
from tasks import all_tasks, get_task
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


def _named_error(e: Exception):
    """A named failure of the server (server.errors.TABLE): its status and code, as on the web."""
    db().rollback()
    status, code, message, extra = describe(e)
    return error_response(status, code, message, **extra)


for _cls in HANDLED:
    bp.register_error_handler(_cls, _named_error)


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


def _json_out(result: BaseModel, _status: int = 200):
    """An action's declared result as the answer."""
    r = jsonify(result.model_dump(mode="json", exclude_unset=True))
    r.status_code = _status
    return r


def _enqueue(ids: list[int]) -> None:
    """Hand rescored runs to the queue (the reconciler does it if Redis is down)."""
    enqueue_ids(current_app, ids, get_settings())


def _problems(e: ValidationError) -> dict:
    probs = [
        {"line": None, "id": ".".join(str(x) for x in err["loc"]) or None, "message": err["msg"]}
        for err in e.errors()
    ]
    return {"problems": probs, "total": len(probs)}


def _validate(model: type[BaseModel], data: dict):
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        msg = first["msg"]
        if first["type"].startswith(("datetime", "date")):
            msg += " (ISO 8601, e.g. 2026-01-31T23:59:00Z; UTC when no offset is given)"
        raise ApiError(
            422, "invalid_request", f"{where}: {msg}" if where else msg, **_problems(e)
        ) from None


def _query(model: type[BaseModel]):
    return _validate(model, request.args.to_dict())


def _body(model: type[BaseModel]):
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
    return _validate(model, data)


# ----------------------------------------------------------------------------- pages


def _cursor_id(cursor: str | None) -> int | None:
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


def _cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode("ascii").rstrip("=")


def paginate(s, q, id_col, page: m.PageQuery, render) -> tuple[list, dict]:
    """Newest first by id: (items, the page's `next_cursor`/`next` and its Link header)."""
    after = _cursor_id(page.cursor)
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
        cur = _cursor(last_id)
        args = {**request.args.to_dict(), "cursor": cur}
        nxt = f"{request.base_url}?{urlencode(args)}"
    return items, {"next_cursor": cur, "next": nxt}


def _page(model, items, links, status: int = 200, **extra):
    headers = {"Link": f'<{links["next"]}>; rel="next"'} if links["next"] else None
    return out(model, status, headers, items=items, **links, **extra)


# ----------------------------------------------------------------------------- who and what


def _user() -> User:
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


def _organizer(task_id: str | None = None, submission_id: int | None = None) -> User:
    """The signed-in organizer of the task's competition (of the submission's task), or of any
    competition for a route that names none (it filters what it shows); 403 otherwise."""
    u = _user()
    s = db()
    if submission_id is not None:
        sub = s.get(Submission, submission_id)
        task_id = sub.task_id if sub is not None else None
    if task_id is not None:
        ok = people.organizes_task(s, u, task_id)
    else:
        ok = people.organizes_anything(s, u)
    if not ok:
        raise ApiError(403, "not_organizer", "this needs a token of an organizer of this task")
    return u


def _admin() -> User:
    u = _user()
    if not people.is_admin(u):
        raise ApiError(403, "not_admin", "this needs a site administrator's token")
    return u


def _task(task_id: str):
    """The declared task, if the caller may see it (a draft competition's task is its people's
    only: anyone else is told what they would be told of a task that does not exist)."""
    try:
        t = get_task(task_id)
    except TaskNotFound as e:
        raise ApiError(404, "unknown_task", str(e)) from None
    if not people.task_visible(db(), auth.current_user(), t.id):
        raise ApiError(404, "unknown_task", f"no task {task_id!r}")
    return t


def _phases(s, task_id: str) -> list[Phase]:
    return list(s.exec(select(Phase).where(Phase.task_id == task_id).order_by(Phase.id)))


def _phase(s, task_id: str, name: str | None) -> Phase:
    return phase_or_default(s, task_id, name)


def _quota(s, user, phase: Phase) -> dict | None:
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


def _store(task_id: str):
    return TaskStore(task_id, get_settings().home)


def _visible_scores(s, user, sub: Submission, phase: Phase) -> dict | None:
    """The scoring contract of what the caller may see: the public part (or all) while the phase
    runs; after publication the private part too. Participants see the gold's keyed id, never its
    sha256."""
    if sub.score_attempt is None:  # never scored (a rescore keeps the standing scores)
        return None
    secret = get_settings().secret_key
    organizer = people.organizes_task(s, user, sub.task_id)
    parts = {
        sc.part: (sc.result if organizer else public_result(sc.result, secret))
        for sc in visible_scores(s, sub, phase, organizer=organizer)
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
    s, user, sub: Submission, phase: Phase | None = None, team: str | None = None
) -> dict:
    phase = phase or s.get(Phase, sub.phase_id)
    return {
        "id": sub.id,
        "task": sub.task_id,
        "phase": phase.name if phase else None,
        "status": sub.status,
        "created": sub.created_at,
        "started": sub.started_at,
        "finished": sub.finished_at,
        "method_name": sub.method_name,
        "description": sub.description,
        "url": sub.url,
        "facts": sub.facts or None,
        "show_publicly": sub.show_publicly,
        "is_primary": sub.is_primary,
        "is_baseline": sub.is_baseline,
        "file_name": sub.file_name,
        "size": sub.size,
        "sha256": sub.file_sha256,
        "hidden": sub.hidden,
        "hidden_reason": sub.hidden_reason or None,
        "failure_kind": sub.failure_kind,
        "errors": (sub.errors or []) if sub.status == "failed" else [],
        "scores": _visible_scores(s, user, sub, phase) if phase else None,
        "team": team if team is not None else getattr(s.get(Team, sub.team_id), "name", None),
    }


def _sub_out(s, u, sub, status: int = 200, **extra):
    s.refresh(sub)
    standing = waits.live_standing(s, sub, current_app.extensions.get("palimpsest.redis"))
    if standing is not None:
        extra["queue"] = standing
    return out(m.SubmissionOut, status, **submission_fields(s, u, sub), **extra)


def _own_submission(s, user, submission_id: int) -> Submission:
    sub = s.get(Submission, submission_id)
    # the same answer for "not yours" and "does not exist": ids are not an oracle
    if sub is None or sub.removed_at is not None or not auth.can_see_submission(user, sub, s):
        raise ApiError(404, "not_found", f"no submission {submission_id} visible to you")
    return sub


def _any_submission(s, submission_id: int) -> Submission:
    sub = s.get(Submission, submission_id)
    if sub is None:
        raise ApiError(404, "not_found", f"no submission {submission_id}")
    return sub


# ----------------------------------------------------------------------------- you and your team


@bp.get("/me")
@op("Who the token belongs to", responses={200: m.Me}, tags=("team",))
def me():
    u = _user()
    s = db()
    team = people.team_of(s, u, None)
    return out(
        m.Me,
        id=u.id,
        email=u.email,
        is_admin=people.is_admin(u),
        is_organizer=people.organizes_anything(s, u),
        team={"id": team.id, "name": team.name} if team else None,
    )


def _team_out(s, team: Team, status: int = 200, competition: Competition | None = None):
    rows = s.exec(
        select(TeamMember, User)
        .join(User, User.id == TeamMember.user_id)
        .where(TeamMember.team_id == team.id)
        .order_by(TeamMember.id)
    ).all()
    return out(
        m.TeamOut,
        status,
        id=team.id,
        name=team.name,
        competition=competition.slug if competition is not None else None,
        invite_code=team.invite_code,
        members=[
            {"id": x.id, "email": x.email, "role": tm.role, "status": tm.status}
            for tm, x in rows
            if competition is None or tm.competition_id == competition.id
        ],
        created=team.created_at,
    )


def _team_scope(slug: str | None) -> Competition | None:
    """The competition a team route acts in (`competition`), or None for the account-wide team."""
    if not slug:
        return None
    s = db()
    c = s.exec(select(Competition).where(Competition.slug == slug)).first()
    if c is None or (c.state == "draft" and not comp_actions.may_see_draft(s, _viewer(), c)):
        raise ApiError(404, "unknown_competition", f"no competition {slug!r}")
    return c


@bp.get("/team")
@op(
    "Your team (in a competition with `competition=ID`): its members and invite code",
    query=m.TeamQuery,
    responses={200: m.TeamOut},
    errors=(404,),
    tags=("team",),
)
def team_show():
    u = _user()
    c = _team_scope(_query(m.TeamQuery).competition)
    s = db()
    team = teams.team_for(s, u, c)
    if team is None:
        raise ApiError(
            404, "no_team", "you are in no team: create one or join one with its invite code"
        )
    return _team_out(s, team, competition=c)


@bp.post("/team")
@op(
    "Create a team (you become its captain); with `competition`, a team of that competition",
    body=m.TeamCreate,
    responses={201: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_create():
    u = _user()
    body = _body(m.TeamCreate)
    c = _team_scope(body.competition)
    s = db()
    return _team_out(s, teams.create_team(s, u, body.name, c), 201, c)


@bp.post("/team/join")
@op(
    "Join a team by its invite code (in a competition that asks for it, the captain approves)",
    body=m.TeamJoin,
    responses={200: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_join():
    u = _user()
    body = _body(m.TeamJoin)
    c = _team_scope(body.competition)
    s = db()
    return _team_out(s, teams.join_team(s, u, body.invite_code, c), competition=c)


@bp.post("/team/leave")
@op(
    "Leave your team (its submissions stay with it)",
    query=m.TeamQuery,
    responses={200: m.Left},
    errors=(409,),
    tags=("team",),
)
def team_leave():
    u = _user()
    c = _team_scope(_query(m.TeamQuery).competition)
    return out(m.Left, left_team=teams.leave_team(db(), u, c))


@bp.post("/team/invite")
@op(
    "Replace your team's invite code",
    query=m.TeamQuery,
    responses={200: m.TeamOut},
    errors=(409,),
    tags=("team",),
)
def team_rotate():
    u = _user()
    c = _team_scope(_query(m.TeamQuery).competition)
    s = db()
    return _team_out(s, teams.rotate_invite(s, u, c), competition=c)


@bp.post("/team/members/<int:user_id>")
@op(
    "The captain approves (`approve=1`) or turns away (`approve=0`) a person waiting to join",
    query=m.MemberDecision,
    responses={200: m.TeamOut},
    errors=(403, 404, 409),
    tags=("team",),
)
def team_member_decide(user_id):
    u = _user()
    q = _query(m.MemberDecision)
    c = _team_scope(q.competition)
    if c is None:
        raise ApiError(
            422,
            "invalid_fields",
            "name the competition",
            problems=[{"line": None, "id": "competition", "message": "required"}],
            total=1,
        )
    s = db()
    teams.decide_member(s, u, c, user_id, approve=q.approve == "1")
    return _team_out(s, teams.team_for(s, u, c), competition=c)


# ----------------------------------------------------------------------------- competitions


def _viewer() -> User | None:
    """Who asks on a route anonymous visitors may read: None without a token; a token that is
    sent must be valid."""
    u = auth.current_user()
    if u is None and request.headers.get("Authorization", ""):
        raise ApiError(401, "invalid_token", "the API token is invalid or revoked")
    return u


def _competition_organizer(u: User, competition_id: str) -> None:
    """Refuse someone who does not organize the competition (NotFound for a draft they cannot
    see), before the request's body is read."""
    s = db()
    comp_actions.require_organizer(s, u, comp_actions.find(s, competition_id))


@bp.get("/competitions")
@op(
    "The competitions you may see (drafts: site administrators only)",
    responses={200: m.Page[m.CompetitionSummary]},
    public=True,
    errors=(401,),
    tags=("competitions",),
)
def competitions_list():
    items = comp_actions.list_competitions(s=db(), viewer=_viewer())
    return _page(
        m.Page[m.CompetitionSummary],
        [c.model_dump() for c in items],
        {"next_cursor": None, "next": None},
    )


@bp.get("/competitions/<competition_id>")
@op(
    "A competition, its tasks and its pages (Markdown and sanitized HTML)",
    responses={200: m.CompetitionOut},
    public=True,
    errors=(401,),
    tags=("competitions",),
)
def competition_detail(competition_id):
    return _json_out(
        comp_actions.get_competition(s=db(), viewer=_viewer(), competition=competition_id)
    )


@bp.post("/competitions")
@op(
    "Create a competition (site administrators)",
    body=m.CompetitionCreate,
    responses={201: m.CompetitionOut},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def competition_create():
    u = _user()
    body = _body(m.CompetitionCreate)
    result = comp_actions.create_competition(
        s=db(),
        actor=u,
        via="api",
        competition=body.id,
        title=body.title,
        state=body.state,
        tasks=body.tasks,
    )
    return _json_out(result, 201)


@bp.patch("/competitions/<competition_id>")
@op(
    "Change a competition's title, state or settings (its owners and organizers)",
    body=m.CompetitionEdit,
    responses={200: m.CompetitionOut},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_edit(competition_id):
    u = _user()
    _competition_organizer(u, competition_id)  # before the body: no hint to others
    body = _body(m.CompetitionEdit)
    result = comp_actions.edit_competition(
        s=db(),
        actor=u,
        via="api",
        competition=competition_id,
        title=body.title,
        state=body.state,
        settings=body,
    )
    return _json_out(result)


@bp.put("/competitions/<competition_id>/pages/<page>")
@op(
    "Create or replace a page of a competition (its owners and organizers)",
    body=m.CompetitionPageSet,
    responses={200: m.CompetitionPageOut},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_page_set(competition_id, page):
    u = _user()
    _competition_organizer(u, competition_id)  # before the body: no hint to others
    body = _body(m.CompetitionPageSet)
    result = comp_actions.set_page(
        s=db(),
        actor=u,
        via="api",
        competition=competition_id,
        page=page,
        title=body.title,
        body_markdown=body.body_markdown,
        position=body.position,
    )
    return _json_out(result)


# ----------------------------------------------------------------------------- registrations


@bp.post("/competitions/<competition_id>/registration")
@op(
    "Register for a competition, or accept its changed terms (`accept_terms: true`)",
    body=m.RegistrationIn,
    responses={200: m.RegistrationOut},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def registration_create(competition_id):
    u = _user()
    body = _body(m.RegistrationIn)
    return _json_out(
        reg_actions.register(
            s=db(),
            user=u,
            competition=competition_id,
            accept_terms=body.accept_terms,
            terms_version=body.terms_version,
            via="api",
        )
    )


@bp.get("/competitions/<competition_id>/registration")
@op(
    "Your registration for a competition and whether you may download and submit (why not)",
    responses={200: m.RegistrationOut},
    tags=("competitions",),
)
def registration_show(competition_id):
    u = _user()
    return _json_out(reg_actions.my_registration(s=db(), user=u, competition=competition_id))


@bp.get("/competitions/<competition_id>/participants")
@op(
    "The people registered for a competition, newest first (its owners and organizers)",
    query=m.ParticipantsQuery,
    responses={200: m.Page[m.ParticipantOut]},
    errors=(403,),
    tags=("competitions",),
)
def participants_list(competition_id):
    u = _user()
    q = _query(m.ParticipantsQuery)
    got = reg_actions.list_participants(
        s=db(),
        actor=u,
        competition=competition_id,
        status=q.status,
        after=_cursor_id(q.cursor),
        limit=q.limit,
    )
    links = {"next_cursor": None, "next": None}
    if got.next_after is not None:
        cur = _cursor(got.next_after)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return _page(m.Page[m.ParticipantOut], [i.model_dump() for i in got.items], links)


@bp.post("/competitions/<competition_id>/participants/<user_id>/<action>")
@op(
    "Approve, reject, suspend, ban or reinstate a participant (by id or email; its organizers)",
    body=m.ParticipantDecision,
    responses={200: m.ParticipantOut},
    errors=(403, 404, 409),
    tags=("competitions",),
    description="`action` is approve, reject, suspend, ban or reinstate; reject, suspend and ban "
    "need a `reason` (the participant is shown it). A ban takes the person's runs off the live "
    "boards of the competition's tasks (published rankings keep them); reinstating brings them "
    "back.",
)
def participant_decide(competition_id, user_id, action):
    u = _user()
    body = _body(m.ParticipantDecision)
    return _json_out(
        reg_actions.decide(
            s=db(),
            actor=u,
            competition=competition_id,
            user=user_id,
            action=action,
            reason=body.reason,
            via="api",
        )
    )


# ----------------------------------------------------------------------------- announcements, mail


def _deliver_mail() -> None:
    """Ask a worker to deliver queued mail; never blocks the answer (Redis away: the reconciler's
    sweep delivers later)."""
    if current_app.config.get("PALIMPSEST_ENQUEUE", True):
        settings = get_settings()
        outbox.enqueue_delivery(settings, current_app.extensions.get("palimpsest.redis"))


@bp.get("/competitions/<competition_id>/announcements")
@op(
    "The announcements of a competition, newest first",
    responses={200: m.Page[m.AnnouncementOut]},
    public=True,
    errors=(401, 404),
    tags=("competitions",),
)
def announcements_list(competition_id):
    items = ann_actions.list_announcements(s=db(), viewer=_viewer(), competition=competition_id)
    return _page(
        m.Page[m.AnnouncementOut],
        [a.model_dump() for a in items],
        {"next_cursor": None, "next": None},
    )


@bp.post("/competitions/<competition_id>/announcements")
@op(
    "Post an announcement: shown on the competition page and mailed to its approved "
    "participants (its owners and organizers)",
    body=m.AnnouncementCreate,
    responses={201: m.AnnouncementOut},
    errors=(403, 404),
    tags=("competitions",),
)
def announcement_create(competition_id):
    u = _user()
    _competition_organizer(u, competition_id)  # before the body: no hint to others
    body = _body(m.AnnouncementCreate)
    result = ann_actions.announce(
        s=db(),
        actor=u,
        competition=competition_id,
        title=body.title,
        body_markdown=body.body_markdown,
        via="api",
        enqueue=_deliver_mail,
    )
    return _json_out(result, 201)


@bp.get("/competitions/<competition_id>/mail")
@op(
    "What you are mailed in a competition you registered for",
    responses={200: m.MailPreferencesOut},
    errors=(404,),
    tags=("competitions",),
)
def mail_preferences_show(competition_id):
    u = _user()
    return _json_out(ann_actions.get_mail_preferences(s=db(), user=u, competition=competition_id))


@bp.put("/competitions/<competition_id>/mail")
@op(
    "Choose what you are mailed in a competition: announcements (on unless turned off), a notice "
    "of each run scored or failed (off unless turned on)",
    body=m.MailPreferences,
    responses={200: m.MailPreferencesOut},
    errors=(404,),
    tags=("competitions",),
)
def mail_preferences_set(competition_id):
    u = _user()
    body = _body(m.MailPreferences)
    result = ann_actions.set_mail_preferences(
        s=db(),
        user=u,
        competition=competition_id,
        announcements=body.announcements,
        runs=body.runs,
        pending_registrations=body.pending_registrations,
        via="api",
    )
    return _json_out(result)


# ----------------------------------------------------------------------------- bundles


@bp.post("/competitions/bundle")
@op(
    "Create a competition from a bundle (site administrators, who become its owner)",
    form=m.BundleForm,
    responses={201: m.CompetitionOut},
    errors=(403, 413, 422),
    tags=("competitions",),
    description="The bundle is checked in full first: a 422 lists every problem (`problems`, each "
    "with the YAML path or file as `id` and its `line`), and nothing is created.",
)
def competition_from_bundle():
    u = _admin()
    upload = request.files.get("bundle") or request.files.get("file")
    if upload is None or not upload.filename:
        raise ApiError(
            422,
            "invalid_request",
            "send the bundle as the multipart field `bundle` (a .zip)",
            problems=[{"line": None, "id": "bundle", "message": "required"}],
            total=1,
        )
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        path = Path(d) / "bundle.zip"
        upload.save(path)  # bounded by MAX_CONTENT_LENGTH
        result = bundle_actions.create_from_bundle(
            s=db(), actor=u, source=path, via="api", settings=get_settings()
        )
    return _json_out(result, 201)


@bp.get("/competitions/<competition_id>/bundle")
@op(
    "The competition as a bundle, a zip that re-creates it (its owners and organizers)",
    query=m.BundleQuery,
    responses={200: "application/zip"},
    errors=(403, 404),
    tags=("competitions",),
)
def competition_bundle(competition_id):
    u = _user()
    q = _query(m.BundleQuery)
    with tempfile.TemporaryDirectory(prefix="palimpsest-export-") as d:
        path = bundle_actions.export_competition(
            s=db(),
            actor=u,
            competition=competition_id,
            out=Path(d) / "bundle.zip",
            include_gold=q.gold == "1",
            settings=get_settings(),
        )
        data = path.read_bytes()
    return Response(
        data,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{competition_id}.zip"'},
    )


@bp.post("/competitions/<competition_id>/clone")
@op(
    "A new draft competition made from this one, its gold included (site administrators)",
    body=m.CloneIn,
    responses={201: m.CompetitionOut},
    errors=(403, 404, 422),
    tags=("competitions",),
)
def competition_clone(competition_id):
    u = _admin()
    body = _body(m.CloneIn)
    result = bundle_actions.clone_competition(
        s=db(),
        actor=u,
        competition=competition_id,
        new_id=body.id,
        via="api",
        settings=get_settings(),
    )
    return _json_out(result, 201)


# ----------------------------------------------------------------------------- tasks


@bp.get("/tasks")
@op(
    "Tasks and their phases, with what is left of your quota",
    query=m.PageQuery,
    responses={200: m.Page[m.TaskSummary]},
    tags=("tasks",),
)
def tasks_list():
    u = _user()
    page = _query(m.PageQuery)
    s = db()
    ts = [t for t in all_tasks() if people.task_visible(s, u, t.id)]
    start = _cursor_id(page.cursor) or 0
    chunk = ts[start : start + page.limit]
    items = []
    for t in chunk:
        d = task_fields(
            t, _store(t.id).exists(), [phase_fields(p, _quota(s, u, p)) for p in _phases(s, t.id)]
        )
        items.append({k: d[k] for k in ("id", "title", "primary", "imported", "phases")})
    links = {"next_cursor": None, "next": None}
    if start + page.limit < len(ts):
        cur = _cursor(start + page.limit)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return _page(m.Page[m.TaskSummary], items, links)


@bp.get("/tasks/<task_id>")
@op("A task: its format, metrics, splits and phases", responses={200: m.TaskOut}, tags=("tasks",))
def task_detail(task_id):
    u = _user()
    t = _task(task_id)
    s = db()
    return out(
        m.TaskOut,
        **task_fields(
            t, _store(t.id).exists(), [phase_fields(p, _quota(s, u, p)) for p in _phases(s, t.id)]
        ),
    )


@bp.get("/tasks/<task_id>/download")
@op(
    "A zip of the task's public inputs",
    query=m.DownloadQuery,
    responses={200: "application/zip", 302: None},
    tags=("tasks",),
    description="200: the zip. 302: on a site with an object store, a redirect to a short-lived "
    "presigned GET of the zip in the store (no authorization header needed there).",
)
def download(task_id):
    u = _user()
    t = _task(task_id)
    s = db()
    split = _query(m.DownloadQuery).split
    try:
        given, withheld = releases.downloadable(s, u, t, get_settings().home, split)
    except releases.DownloadRefused as e:
        raise ApiError(e.status, e.code, e.message) from e
    store = _store(t.id)
    manifest = store.manifest()
    public_manifest = {k: manifest[k] for k in ("task", "version", "splits") if k in manifest}
    # a hidden split's counts would say how many gold rows it has (a links split's `links`)
    counts = {
        sp: v for sp, v in (manifest.get("counts") or {}).items() if not t.has_private_part(sp)
    }
    if counts:
        public_manifest["counts"] = counts
    # what is not released yet, and when it is (the CLI says so)
    public_manifest["withheld"] = {
        a.name: "blind" if a.blind else (a.release_at.isoformat() + "Z" if a.release_at else None)
        for a in withheld
    }
    members = [("task.json", json.dumps(public_manifest, indent=2).encode())]
    members += [(p.relative_to(store.root).as_posix(), p) for a in given for p in a.files]
    # on a site with an object store: a redirect to a presigned GET of the zip (server.downloads)
    return downloads.zip_response(get_settings(), t.id, f"{t.id}-public.zip", members)


# ----------------------------------------------------------------------------- submissions


def _flag(name: str, default: bool = False) -> bool:
    v = request.form.get(name)
    if v is None:
        return default
    return v.lower() in ("1", "true", "yes", "on")


@bp.post("/tasks/<task_id>/submissions")
@op(
    "Upload a prediction file",
    form=m.UploadForm,
    responses={201: m.SubmissionOut, 200: m.SubmissionOut},
    errors=(400, 403, 409, 413, 422, 429),
    tags=("submissions",),
    description="201: a new submission, queued for scoring. 200: this very file was submitted "
    "before by your team in this phase (`duplicate: true`, counted once). `primary=true` makes "
    "it your team's primary (ranked) run of the phase.",
)
def create(task_id):
    u = _user()
    t = _task(task_id)
    fields = sub_actions.read_upload_fields(request.form)
    f = request.files.get("file")
    if f is None:
        raise ApiError(400, "no_file", "send the prediction file as the multipart field 'file'")
    s = db()
    try:
        sub, duplicate = sub_actions.submit(
            s=s,
            user=u,
            task_id=t.id,
            fields=fields,
            stream=f.stream,
            filename=f.filename or "",
            settings=get_settings(),
            redis=current_app.extensions.get("palimpsest.redis"),
            enqueue=current_app.config.get("PALIMPSEST_ENQUEUE", True),
        )
    except EmptyUpload:
        raise ApiError(
            422,
            "invalid_submission",
            "the file is empty",
            problems=[{"line": None, "id": None, "message": "the file is empty"}],
            total=1,
        ) from None
    return _sub_out(s, u, sub, 200 if duplicate else 201, duplicate=duplicate)


@bp.post("/tasks/<task_id>/uploads")
@op(
    "Start a large upload straight to the object store",
    body=m.LargeUploadIn,
    responses={201: m.LargeUploadOut},
    errors=(403, 404, 409, 413, 503),
    tags=("submissions",),
    description="A site with an object store: one presigned PUT URL per part; send the parts, "
    "then `POST /uploads/complete` (409 `no_store` on a site without one: use the plain upload).",
)
def large_upload_start(task_id):
    body = _body(m.LargeUploadIn)
    out = large_uploads.start(
        s=db(),
        user=_user(),
        task_id=_task(task_id).id,
        phase=body.phase,
        filename=body.filename,
        size=body.size,
        settings=get_settings(),
    )
    return _json_out(out, 201)


@bp.post("/uploads/parts")
@op(
    "The parts of a large upload the store holds, with fresh URLs for the others",
    body=m.LargeUploadTicket,
    responses={200: m.LargeUploadOut},
    errors=(404, 409, 503),
    tags=("submissions",),
)
def large_upload_parts():
    body = _body(m.LargeUploadTicket)
    return _json_out(large_uploads.parts(user=_user(), ticket=body.upload, settings=get_settings()))


@bp.post("/uploads/complete")
@op(
    "Complete a large upload: it becomes a submission, as a plain upload does",
    body=m.LargeUploadComplete,
    responses={201: m.SubmissionOut, 200: m.SubmissionOut},
    errors=(403, 404, 409, 413, 422, 429, 503),
    tags=("submissions",),
)
def large_upload_complete():
    body = _body(m.LargeUploadComplete)
    u = _user()
    s = db()
    sub, duplicate = large_uploads.complete(
        s=s,
        user=u,
        ticket=body.upload,
        fields=m.UploadFields.model_validate(body.model_dump(exclude={"upload"})),
        settings=get_settings(),
        redis=current_app.extensions.get("palimpsest.redis"),
        enqueue=current_app.config.get("PALIMPSEST_ENQUEUE", True),
    )
    return _sub_out(s, u, sub, 200 if duplicate else 201, duplicate=duplicate)


@bp.get("/submissions")
@op(
    "Your team's submissions (organizers: `mine=0` for everyone's)",
    query=m.SubmissionsQuery,
    responses={200: m.Page[m.SubmissionOut]},
    tags=("submissions",),
)
def my_submissions():
    u = _user()
    page = _query(m.SubmissionsQuery)
    s = db()
    q = select(Submission, Team).join(Team, Team.id == Submission.team_id)
    organized = people.organized_tasks(s, u)  # None: every task (an administrator)
    everyone = page.mine == "0" and (organized is None or organized)
    if not everyone:
        q = q.where(Submission.removed_at.is_(None))
        team_ids = people.team_ids_of(s, u)
        if not team_ids:
            return _page(m.Page[m.SubmissionOut], [], {"next_cursor": None, "next": None})
        q = q.where(Submission.team_id.in_(team_ids))
    elif organized is not None:  # everyone's runs of the tasks this organizer organizes
        q = q.where(Submission.task_id.in_(sorted(organized)))
    if page.task:
        q = q.where(Submission.task_id == page.task)
    if page.status:
        q = q.where(Submission.status == page.status)
    phases = {p.id: p for p in s.exec(select(Phase))}
    items, links = paginate(
        s,
        q,
        Submission.id,
        page,
        lambda row: submission_fields(s, u, row[0], phases.get(row[0].phase_id), row[1].name),
    )
    return _page(m.Page[m.SubmissionOut], items, links)


@bp.get("/submissions/<int:submission_id>")
@op(
    "A submission: its status, every problem, the scores you may see",
    responses={200: m.SubmissionOut},
    tags=("submissions",),
)
def submission(submission_id):
    u = _user()
    s = db()
    return _sub_out(s, u, _own_submission(s, u, submission_id))


@bp.post("/submissions/<int:submission_id>/primary")
@op(
    "Make a submission your team's primary (ranked) run of its phase",
    responses={200: m.SubmissionOut},
    errors=(403,),
    tags=("submissions",),
    description="SemEval's convention: one primary run per team and phase, the others "
    "contrastive. Only the team chooses its run.",
)
def primary(submission_id):
    u = _user()
    s = db()
    sub = sub_actions.choose_primary(s=s, submission_id=submission_id, actor=u)
    return _sub_out(s, u, sub)


@bp.post("/submissions/<int:submission_id>/public")
@op(
    "Show your team's run on the public board, or keep it to your team",
    body=m.ShowPublicly,
    responses={200: m.SubmissionOut},
    errors=(403, 404),
    tags=("submissions",),
    description="A ranked run kept to the team is ranked on the board the team and the "
    "organizers see, but has no row on the public board nor in a published final ranking.",
)
def shown_publicly(submission_id):
    u = _user()
    body = _body(m.ShowPublicly)
    s = db()
    sub = sub_actions.set_shown_publicly(
        s=s, submission_id=submission_id, actor=u, show=body.show_publicly
    )
    return _sub_out(s, u, sub)


@bp.delete("/submissions/<int:submission_id>")
@op(
    "Delete your team's run (kept for the organizers, who may restore it)",
    responses={200: m.SubmissionOut},
    errors=(403, 404),
    tags=("submissions",),
    description="The run leaves every board and your lists at once; it still counts against "
    "the phase's quota. An organizer may restore it (`POST .../visibility`, `restore`).",
)
def delete_submission(submission_id):
    u = _user()
    s = db()
    sub = sub_actions.delete_run(s=s, submission_id=submission_id, actor=u)
    return _sub_out(s, u, sub, removed=True)


@bp.get("/tasks/<task_id>/leaderboard")
@op(
    "A task's leaderboard as your token may see it",
    query=m.LeaderboardQuery,
    responses={200: m.Board, 304: None},
    tags=("leaderboards",),
    description="The same board as /tasks/<id>/leaderboard.json, from the same render cache. "
    "A published phase answers with its final ranking as published (a `Snapshot`).",
)
def leaderboard(task_id):
    u = _user()
    t = _task(task_id)
    _query(m.LeaderboardQuery)
    s = db()
    team_id = people.team_id_for_task(s, u, t.id)
    who = (
        "organizer"
        if people.organizes_task(s, u, t.id)
        else (f"team:{team_id}" if team_id else "public")
    )
    return _serve(t.id, "json", who=who)


# ----------------------------------------------------------------------------- organizers: phases


@bp.get("/tasks/<task_id>/phases")
@op(
    "A task's phases with their state (organizers)",
    query=m.PageQuery,
    responses={200: m.Page[m.PhaseState]},
    errors=(403,),
    tags=("organizers",),
)
def phases_list(task_id):
    _organizer(task_id)
    t = _task(task_id)
    page = _query(m.PageQuery)
    s = db()
    items, links = paginate(
        s, select(Phase).where(Phase.task_id == t.id), Phase.id, page, phase_state_fields
    )
    return _page(m.Page[m.PhaseState], items, links)


@bp.post("/tasks/<task_id>/phases")
@op(
    "Create a phase",
    body=m.PhaseCreate,
    responses={201: m.PhaseState},
    errors=(403, 409),
    tags=("organizers",),
)
def phase_create(task_id):
    u = _organizer(task_id)
    t = _task(task_id)
    body = _body(m.PhaseCreate)
    s = db()
    p = lifecycle.create_phase(
        s,
        task=t,
        name=body.name,
        split=body.split,
        actor=u,
        via="api",
        home=get_settings().home,
        public_fraction=body.public_fraction,  # None: the split's (server.partitions)
    )
    changes = {k: getattr(body, k) for k in body.model_fields_set if k not in ("name", "split")}
    if changes:
        changes = m.PhaseEdit.model_validate(changes).model_dump(include=set(changes))
        lifecycle.edit_phase(s, p, changes, actor=u, via="api")
    return out(m.PhaseState, 201, **phase_state_fields(p))


@bp.patch("/tasks/<task_id>/phases/<phase_name>")
@op(
    "Change a phase's window, limits or public fraction",
    body=m.PhaseEdit,
    responses={200: m.PhaseState},
    errors=(403, 409),
    tags=("organizers",),
)
def phase_edit(task_id, phase_name):
    u = _organizer(task_id)
    t = _task(task_id)
    body = _body(m.PhaseEdit)
    s = db()
    p = _phase(s, t.id, phase_name)
    changes = body.model_dump(include=set(body.model_fields_set))
    if "public_fraction" in changes and changes["public_fraction"] is None:
        raise ApiError(422, "invalid_request", "public_fraction: a number in (0, 1]")
    lifecycle.edit_phase(s, p, changes, actor=u, via="api")
    return out(m.PhaseState, **phase_state_fields(p))


@bp.post("/tasks/<task_id>/phases/<phase_name>/<action>")
@op(
    "Close, freeze, unfreeze or publish a phase",
    body=m.PhaseAction,
    responses={200: m.PhaseActionOut, 201: m.PhaseActionOut},
    errors=(403, 409),
    tags=("organizers",),
    description="`action`: close, freeze, unfreeze or publish. Publish answers 201 with the new "
    "version of the final ranking; `close: true` closes an open phase in the same step; a "
    "correction (version 2 on) needs a `reason`.",
)
def phase_action(task_id, phase_name, action):
    u = _organizer(task_id)
    if action not in PHASE_ACTIONS:
        raise ApiError(
            404,
            "unknown_action",
            f"no phase action {action!r} ({', '.join(PHASE_ACTIONS)})",
        )
    body = (
        _body(m.PhaseAction) if (request.get_json(silent=True) or request.form) else m.PhaseAction()
    )
    extra = (
        {"settings": get_settings(), "reason": body.reason, "close_first": body.close}
        if action == "publish"
        else {}
    )
    result = PHASE_ACTIONS[action](
        s=db(), task_id=_task(task_id).id, phase=phase_name, actor=u, via="api", **extra
    )
    return _json_out(result, 201 if result.ranking is not None else 200)


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings")
@op(
    "Every published version of a phase's final ranking (organizers)",
    query=m.PageQuery,
    responses={200: m.RankingsOut},
    errors=(403,),
    tags=("organizers",),
)
def rankings(task_id, phase_name):
    _organizer(task_id)
    t = _task(task_id)
    page = _query(m.PageQuery)
    s = db()
    p = _phase(s, t.id, phase_name)
    items, links = paginate(
        s,
        select(RankingVersion).where(RankingVersion.phase_id == p.id),
        RankingVersion.id,
        page,
        version_fields,
    )
    return _page(m.RankingsOut, items, links, phase=phase_state_fields(p))


@bp.get("/tasks/<task_id>/phases/<phase_name>/rankings/<int:version>")
@op(
    "One published version of the final ranking, byte for byte as published",
    responses={200: m.Snapshot},
    tags=("leaderboards",),
)
def ranking_version(task_id, phase_name, version):
    _user()
    t = _task(task_id)
    s = db()
    p = _phase(s, t.id, phase_name)
    rv = latest_ranking(s, p.id, version)
    if rv is None:
        raise ApiError(404, "not_published", f"{t.id}/{p.name} has no published version {version}")
    return Response(rv.body_json.encode("utf-8"), mimetype="application/json")


@bp.get("/tasks/<task_id>/phases/<phase_name>/export")
@op(
    "The final ranking as CSV, JSON or a LaTeX table (organizers)",
    query=m.ExportQuery,
    responses={200: ("text/csv", "application/json", "application/x-tex")},
    errors=(403, 409),
    tags=("organizers",),
    description="The published snapshot (`version`, default the latest) byte for byte, or a "
    "preview before publication; `format` csv (text/csv), json (application/json) or tex "
    "(application/x-tex). `facts=true`: the fact sheets of the published version's rows (csv or "
    "json; 409 before publication).",
)
def export(task_id, phase_name):
    u = _organizer(task_id)
    t = _task(task_id)
    q = _query(m.ExportQuery)
    s = db()
    p = _phase(s, t.id, phase_name)
    ex = export_ranking(
        s, t, p, q.format, q.version, actor=u, settings=get_settings(), via="api", facts=q.facts
    )
    return Response(
        ex.body,
        content_type=ex.mimetype,
        headers={"Content-Disposition": f'attachment; filename="{ex.filename}"'},
    )


# -------------------------------------------------------------------------- organizers: submissions


@bp.post("/submissions/<int:submission_id>/rescore")
@op(
    "Score a submission again (organizers)",
    body=m.Rescore,
    responses={200: m.Rescored},
    errors=(403, 409),
    tags=("organizers",),
)
def rescore_one(submission_id):
    u = _organizer(submission_id=submission_id)
    body = _body(m.Rescore) if (request.get_json(silent=True) or request.form) else m.Rescore()
    result = sub_actions.rescore_submission(
        s=db(),
        submission_id=submission_id,
        actor=u,
        settings=get_settings(),
        enqueue=_enqueue,
        reason=body.reason,
    )
    return _json_out(result)


@bp.post("/tasks/<task_id>/rescore")
@op(
    "Score every final submission of a task (or of one phase) again (organizers)",
    body=m.TaskRescore,
    responses={200: m.Rescored},
    errors=(403,),
    tags=("organizers",),
)
def rescore_all(task_id):
    u = _organizer(task_id)
    body = (
        _body(m.TaskRescore) if (request.get_json(silent=True) or request.form) else m.TaskRescore()
    )
    result = sub_actions.rescore_selection(
        s=db(),
        task_id=_task(task_id).id,
        actor=u,
        settings=get_settings(),
        enqueue=_enqueue,
        phase=body.phase,
        include_invalid=body.include_invalid,
        reason=body.reason,
        via="api",
    )
    return _json_out(result)


@bp.post("/submissions/<int:submission_id>/visibility")
@op(
    "Hide, unhide, remove or restore a submission (organizers)",
    body=m.Visibility,
    responses={200: m.SubmissionOut},
    errors=(403, 409),
    tags=("organizers",),
    description="Nothing is deleted for real; hide and remove need a reason, which the team is "
    "shown.",
)
def visibility(submission_id):
    u = _organizer(submission_id=submission_id)
    body = _body(m.Visibility)
    s = db()
    sub = sub_actions.set_visibility(
        s=s, submission_id=submission_id, action=body.action, actor=u, reason=body.reason
    )
    return _sub_out(s, u, sub)


# --------------------------------------------------------------------- organizers: audit, baselines


@bp.get("/audit")
@op(
    "The audit log, newest first (organizers)",
    query=m.AuditQuery,
    responses={200: m.Page[m.AuditEntry]},
    errors=(403,),
    tags=("organizers",),
)
def audit_log():
    u = _organizer()
    page = _query(m.AuditQuery)
    s = db()
    q = select(AuditLog)
    mine = people.organized_competitions(s, u)
    if mine is not None:  # an organizer reads the log of their competitions only
        q = q.where(AuditLog.competition_id.in_(sorted(mine)))
    if page.action:
        q = q.where(AuditLog.action == page.action)
    elif page.all != "1":  # the workers' status changes of every submission, on demand only
        q = q.where(AuditLog.action != "submission.status")
    actors: dict[int, str] = {}

    def render(a: AuditLog) -> dict:
        if a.actor_id is not None and a.actor_id not in actors:
            who = s.get(User, a.actor_id)
            actors[a.actor_id] = who.email if who else f"user:{a.actor_id}"
        return {
            "id": a.id,
            "actor": actors.get(a.actor_id),
            "action": a.action,
            "target": a.target,
            "details": a.details,
            "created": a.created_at,
        }

    items, links = paginate(s, q, AuditLog.id, page, render)
    return _page(m.Page[m.AuditEntry], items, links)


@bp.get("/tasks/<task_id>/baselines")
@op(
    "A task's baseline entries, newest first (organizers)",
    query=m.BaselinesQuery,
    responses={200: m.Page[m.SubmissionOut]},
    errors=(403,),
    tags=("organizers",),
)
def baselines_list(task_id):
    u = _organizer(task_id)
    t = _task(task_id)
    page = _query(m.BaselinesQuery)
    s = db()
    q = (
        select(Submission, Team)
        .join(Team, Team.id == Submission.team_id)
        .where(Submission.task_id == t.id, Submission.is_baseline.is_(True))
    )
    if page.phase:
        q = q.where(Submission.phase_id == _phase(s, t.id, page.phase).id)
    phases = {p.id: p for p in _phases(s, t.id)}
    items, links = paginate(
        s,
        q,
        Submission.id,
        page,
        lambda row: submission_fields(s, u, row[0], phases.get(row[0].phase_id), row[1].name),
    )
    return _page(m.Page[m.SubmissionOut], items, links)


@bp.post("/tasks/<task_id>/baselines")
@op(
    "Queue baseline runs of a task (organizers)",
    body=m.BaselineRuns,
    responses={202: m.BaselinesQueued},
    errors=(403, 503),
    tags=("organizers",),
    description="A worker of the baselines queue (`palimpsest worker --queue baselines`) runs each "
    "system and records its file as a baseline entry.",
)
def baselines_queue(task_id):
    u = _organizer(task_id)
    t = _task(task_id)
    body = _body(m.BaselineRuns)
    known = SYSTEMS.get(t.id, ())
    unknown = [x for x in body.systems if x not in known]
    if unknown:
        raise ApiError(
            422,
            "unknown_system",
            f"{t.id} has no baseline system {', '.join(unknown)} (systems: {', '.join(known)})",
        )
    opts = Options(model=body.model, cross_model=body.cross_model, device=body.device).job_args()
    try:
        jobs = queue_baselines(
            current_app,
            db(),
            t,
            body.systems,
            opts,
            actor=u,
            settings=get_settings(),
            via="api",
        )
    except QueueUnreachable as e:
        raise ApiError(503, "queue_unreachable", str(e)) from None
    return out(m.BaselinesQueued, 202, jobs=jobs, systems=body.systems)


@bp.get("/baselines/runs")
@op(
    "Baseline runs on the baselines queue: waiting, running, finished (what they recorded), failed "
    "(organizers)",
    query=m.PageQuery,
    responses={200: m.Page[m.BaselineRun]},
    errors=(403, 503),
    tags=("organizers",),
)
def baseline_runs():
    _admin()
    page = _query(m.PageQuery)
    try:  # only look: never start the embedded Redis for this
        conn = current_app.extensions.get("palimpsest.redis") or connect(
            get_settings(), start_embedded=False
        )
        conn.ping()
        runs = runs_of(conn, get_settings())
    except Exception as e:  # noqa: BLE001 — say plainly that the queue cannot be read
        raise ApiError(
            503,
            "queue_unreachable",
            f"the baselines queue is not reachable ({type(e).__name__}: {e})",
        ) from None
    start = _cursor_id(page.cursor) or 0
    links = {"next_cursor": None, "next": None}
    if start + page.limit < len(runs):
        cur = _cursor(start + page.limit)
        links = {
            "next_cursor": cur,
            "next": f"{request.base_url}?{urlencode({**request.args.to_dict(), 'cursor': cur})}",
        }
    return _page(m.Page[m.BaselineRun], runs[start : start + page.limit], links)


# ---------------------------------------------------------------------------- roles and invitations


@bp.get("/competitions/<competition_id>/roles")
@op(
    "Who has which role in a competition, and its pending invitations (its organizers)",
    responses={200: m.RolesOut},
    errors=(403, 404),
    tags=("organizers",),
)
def competition_roles(competition_id):
    return _json_out(role_actions.list_roles(s=db(), actor=_user(), competition=competition_id))


@bp.post("/competitions/<competition_id>/roles")
@op(
    "Invite a person by email to be an owner, organizer or assessor (its owners)",
    body=m.InviteCreate,
    responses={201: m.InviteOut},
    errors=(403, 404, 409),
    tags=("organizers",),
)
def competition_invite(competition_id):
    u = _user()
    role_actions.require_owner(s=db(), actor=u, competition=competition_id)
    body = _body(m.InviteCreate)
    result = role_actions.invite(
        s=db(), actor=u, competition=competition_id, email=body.email, role=body.role, via="api"
    )
    return _json_out(result, 201)


@bp.delete("/competitions/<competition_id>/roles/<user_id>")
@op(
    "Take a person's role away and cancel their pending invitations (its owners; never the last "
    "owner). `user_id` is the account's id or an email address",
    responses={200: m.RoleRevoked},
    errors=(403, 404, 409),
    tags=("organizers",),
)
def competition_revoke(competition_id, user_id):
    u = _user()
    result = role_actions.revoke(
        s=db(), actor=u, competition=competition_id, user_or_email=user_id, via="api"
    )
    return _json_out(result)


@bp.post("/invites/accept")
@op(
    "Accept an invitation to a role (the token of its link; for the invited address's account)",
    body=m.InviteAccept,
    responses={200: m.InviteAccepted},
    errors=(403, 404, 409),
    tags=("competitions",),
)
def invite_accept():
    u = _user()
    body = _body(m.InviteAccept)
    return _json_out(role_actions.accept(s=db(), user=u, token=body.token, via="api"))


# ----------------------------------------------------------------------------- the description


@bp.get("/openapi.json")
@op(
    "This description (OpenAPI 3.1), generated from the declared models",
    responses={200: "application/json"},
    public=True,
    tags=("api",),
)
def openapi():
    cached = current_app.extensions.get("palimpsest.openapi")
    if cached is None:
        cached = current_app.extensions["palimpsest.openapi"] = spec(current_app)
    return jsonify(cached)


DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'"
)


def _docs_blueprint() -> Blueprint:
    """`/api/docs`: Swagger UI from the assets the flask-swagger-ui package ships (no network), on
    this server's description; the start-up script is a file, so the page's CSP needs no inline
    script."""
    dist = os.path.join(os.path.dirname(flask_swagger_ui.__file__), "dist")
    docs = Blueprint("apidocs", __name__, url_prefix="/api/docs")

    page = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Palimpsest API</title>
<link rel="stylesheet" href="/api/docs/swagger-ui.css">\
<link rel="icon" href="/api/docs/favicon-32x32.png">
</head><body><div id="swagger-ui"></div>
<script src="/api/docs/swagger-ui-bundle.js"></script><script src="/api/docs/init.js"></script>
</body></html>"""
    init = """window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({url: '/api/v1/openapi.json', dom_id: '#swagger-ui', \
deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout'});
});"""

    @docs.get("/")
    def index():
        return Response(page, mimetype="text/html", headers={"Content-Security-Policy": DOCS_CSP})

    @docs.get("/init.js")
    def init_js():
        return Response(init, mimetype="text/javascript")

    @docs.get("/<path:name>")
    def asset(name):
        return send_from_directory(dist, name, max_age=3600)

    return docs


def init_app(app) -> None:
    """Register the API (CSRF does not apply: it takes bearer tokens only, never cookies) and its
    docs page."""
    app.register_blueprint(bp)
    app.register_blueprint(_docs_blueprint())


# ----------------------------------------------------------------------------- assessment campaigns
# (server/actions/campaigns.py: the pool, the assignment, the judgments, the agreement)


@bp.post("/tasks/<task_id>/phases/<phase_name>/campaigns")
@op(
    "Open an assessment campaign: pool the phase's ranked runs and assign the items (organizers)",
    body=m.CampaignOpenIn,
    responses={201: m.CampaignOut},
    errors=(403, 404, 409, 422),
    tags=("assessment",),
    description="Links tasks: the union of each ranked run's top-`depth` links per query, the "
    "gold's links and earlier campaigns' items among them (judged blind); pair tasks: `depth` "
    "instances per stratum. An assessor who takes part in the competition is refused (409) "
    "unless `allow_participants`. "
    "Each item goes to `per_item` of the named assessors (balanced), in an order of its own per "
    "assessor. The answer lists the pooled items.",
)
def campaign_open(task_id, phase_name):
    u = _organizer(task_id)  # before the body: nobody else learns what a valid one is
    body = _body(m.CampaignOpenIn)
    got = campaign_actions.open_campaign(
        s=db(),
        actor=u,
        task=task_id,
        phase=phase_name,
        depth=body.depth,
        assessors=body.assessors,
        per_item=body.per_item,
        labels=body.labels,
        guideline=body.guideline,
        seed=body.seed,
        positive=body.positive,
        allow_participants=body.allow_participants,
        via="api",
    )
    return _json_out(got, 201)


@bp.get("/tasks/<task_id>/phases/<phase_name>/campaigns")
@op(
    "The assessment campaigns of a phase, newest first (organizers)",
    responses={200: m.Page[m.CampaignOut]},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_list(task_id, phase_name):
    u = _user()
    got = campaign_actions.list_campaigns(s=db(), actor=u, task=task_id, phase=phase_name)
    return _page(
        m.Page[m.CampaignOut],
        [c.model_dump(exclude_unset=True) for c in got],
        {"next_cursor": None, "next": None},
    )


@bp.get("/campaigns")
@op(
    "The campaigns that give you items to judge, newest first, with your own progress (assessors)",
    responses={200: m.Page[m.MyCampaignOut]},
    tags=("assessment",),
)
def campaign_mine():
    u = _user()
    got = campaign_actions.my_campaigns(s=db(), user=u)
    return _page(
        m.Page[m.MyCampaignOut],
        [c.model_dump(exclude_unset=True) for c in got],
        {"next_cursor": None, "next": None},
    )


@bp.get("/campaigns/<int:campaign_id>")
@op(
    "A campaign with its pooled items and each assessor's progress (organizers)",
    responses={200: m.CampaignOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_show(campaign_id):
    u = _user()
    return _json_out(campaign_actions.show_campaign(s=db(), actor=u, campaign=campaign_id))


@bp.get("/campaigns/<int:campaign_id>/items")
@op(
    "Your items in a campaign, in your order, with their texts and your judgments (assessors)",
    responses={200: m.AssessOut},
    errors=(404,),
    tags=("assessment",),
)
def campaign_items(campaign_id):
    u = _user()
    return _json_out(campaign_actions.my_items(s=db(), user=u, campaign=campaign_id))


@bp.put("/campaigns/<int:campaign_id>/items/<int:item_id>/judgment")
@op(
    "Judge one of your items (again: the judgment is replaced; audited)",
    body=m.JudgmentIn,
    responses={200: m.JudgmentOut},
    errors=(404, 409, 422),
    tags=("assessment",),
)
def campaign_judge(campaign_id, item_id):
    u = _user()
    body = _body(m.JudgmentIn)
    return _json_out(
        campaign_actions.judge(
            s=db(),
            user=u,
            campaign=campaign_id,
            item=item_id,
            label=body.label,
            comment=body.comment,
            via="api",
        )
    )


@bp.get("/campaigns/<int:campaign_id>/agreement")
@op(
    "The assessors' agreement: multi-kappa with its interval, overall and by a factor (organizers)",
    query=m.AgreementQuery,
    responses={200: m.AgreementOut},
    errors=(403, 404, 422),
    tags=("assessment",),
)
def campaign_agreement(campaign_id):
    u = _user()
    q = _query(m.AgreementQuery)
    return _json_out(campaign_actions.agreement(s=db(), actor=u, campaign=campaign_id, by=q.by))


@bp.get("/campaigns/<int:campaign_id>/disagreements")
@op(
    "The items whose judgments disagree or are not all in, with each label's count (organizers)",
    responses={200: m.DisagreementsOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_disagreements(campaign_id):
    u = _user()
    return _json_out(campaign_actions.disagreements(s=db(), actor=u, campaign=campaign_id))


@bp.post("/campaigns/<int:campaign_id>/adjudicate")
@op(
    "Decide disagreeing items: the majority rule in one step, or one item with a reason "
    "(organizers; audited)",
    body=m.AdjudicateIn,
    responses={200: m.AdjudicateOut},
    errors=(403, 404, 409, 422),
    tags=("assessment",),
    description="`majority`: every fully judged item with a strict majority label that no "
    "organizer decided gets it; ties are listed, left for a person. `item` + `label` + `reason`: "
    "an organizer's decision, which may overrule anything.",
)
def campaign_adjudicate(campaign_id):
    u = _user()
    campaign_actions.check_organizer(s=db(), actor=u, campaign=campaign_id)  # before the body
    body = _body(m.AdjudicateIn)
    return _json_out(
        campaign_actions.adjudicate(
            s=db(),
            actor=u,
            campaign=campaign_id,
            majority=body.majority,
            item=body.item,
            label=body.label,
            reason=body.reason,
            via="api",
        )
    )


@bp.post("/campaigns/<int:campaign_id>/close")
@op(
    "Close a campaign: write a new gold version of its split and rescore every run under it "
    "(organizers)",
    responses={200: m.CloseOut},
    errors=(403, 404, 409),
    tags=("assessment",),
    description="Refused while an item has no decision. A published ranking stays as published; "
    "the answer names the command that publishes a new version under the new gold.",
)
def campaign_close(campaign_id):
    u = _user()
    return _json_out(
        campaign_actions.close_campaign(
            s=db(), actor=u, campaign=campaign_id, enqueue=_enqueue, via="api"
        )
    )


@bp.get("/campaigns/<int:campaign_id>/export")
@op(
    "A campaign's export: pseudonymised judgments, decisions, the gold, TREC qrels, the agreement "
    "(organizers)",
    responses={200: m.ExportOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_export(campaign_id):
    u = _user()
    files = campaign_actions.export_files(s=db(), actor=u, campaign=campaign_id)
    return _json_out(
        m.ExportOut(campaign=campaign_id, files={k: v.decode("utf-8") for k, v in files.items()})
    )


@bp.post("/campaigns/<int:campaign_id>/bayes")
@op(
    "Ask a worker for the Bayesian agreement model of a campaign (organizers; audited)",
    body=m.BayesIn,
    responses={202: m.BayesFitOut},
    errors=(403, 404, 409, 422, 503),
    tags=("assessment",),
    description="Manjavacas et al.'s multilevel model (random intercepts for the assessor pair and "
    "the items' source work or stratum; a link's lexical overlap as a fixed effect) fitted by NUTS "
    "on the items every assigned assessor judged. One fit at a time per campaign; a fit that did "
    "not converge is stored as `not_converged`, without its figures.",
)
def campaign_bayes_request(campaign_id):
    u = _user()
    campaign_actions.check_organizer(s=db(), actor=u, campaign=campaign_id)  # before the body
    body = _body(m.BayesIn)
    got = model_actions.request_bayes(
        s=db(),
        actor=u,
        campaign=campaign_id,
        seed=body.seed,
        chains=body.chains,
        warmup=body.warmup,
        samples=body.samples,
        enqueue=fit_enqueuer(current_app, get_settings()),
        via="api",
    )
    return _json_out(got, 202)


@bp.get("/campaigns/<int:campaign_id>/bayes")
@op(
    "The fits of a campaign's Bayesian agreement model, the newest first (organizers)",
    responses={200: m.BayesFitsOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_bayes_fits(campaign_id):
    u = _user()
    return _json_out(model_actions.show_bayes(s=db(), actor=u, campaign=campaign_id))


# ----------------------------------------------------------------------------- blind runs
# (server/actions/code_runs.py: a team's system run in the sandbox, its stages and log)


@bp.post("/tasks/<task_id>/runs")
@op(
    "Submit a system to run blind on the phase's inputs (phases that take code)",
    form=m.CodeUploadForm,
    responses={201: m.CodeRunOut, 200: m.CodeRunOut},
    errors=(400, 403, 404, 409, 413, 422, 429),
    tags=("runs",),
    description="201: the zip is checked (its members, system.yaml) and queued on the runs "
    "queue; its output becomes an ordinary submission, validated and scored like an uploaded "
    "file. Counts against the phase's limits and the team's compute budget. 200: this very "
    "archive was submitted before by your team in this phase: that run, counted once.",
)
def run_create(task_id):
    u = _user()
    t = _task(task_id)
    fields = sub_actions.read_upload_fields(request.form)
    f = request.files.get("code")
    if f is None:
        raise ApiError(400, "no_file", "send the system's zip as the multipart field 'code'")
    run, duplicate = run_actions.submit_code(
        s=db(),
        user=u,
        task_id=t.id,
        fields=fields,
        stream=f.stream,
        filename=f.filename or "",
        settings=get_settings(),
        redis=current_app.extensions.get("palimpsest.redis"),
        enqueue=current_app.config.get("PALIMPSEST_ENQUEUE", True),
    )
    return _json_out(
        run_actions.get_run(s=db(), run_id=run.id, viewer=u), 200 if duplicate else 201
    )


@bp.get("/runs/<int:run_id>")
@op(
    "A code run: its stage, what it used, its submission and (when allowed) its log",
    responses={200: m.CodeRunOut},
    errors=(404,),
    tags=("runs",),
)
def run_show(run_id):
    return _json_out(run_actions.get_run(s=db(), run_id=run_id, viewer=_user()))


@bp.post("/runs/<int:run_id>/review")
@op(
    "Mark a run reviewed: on a blind phase its team may then read its log (organizers)",
    responses={200: m.CodeRunOut},
    errors=(403, 404, 409),
    tags=("runs",),
)
def run_review(run_id):
    return _json_out(run_actions.review_run(s=db(), run_id=run_id, actor=_user()))


@bp.get("/tasks/<task_id>/runs")
@op(
    "A task's code runs, newest first (organizers)",
    query=m.CodeRunsQuery,
    responses={200: m.CodeRunsOut},
    errors=(403, 404),
    tags=("runs",),
)
def run_list(task_id):
    q = _query(m.CodeRunsQuery)
    got = run_actions.list_runs(
        s=db(), task_id=task_id, actor=_user(), awaiting_review=q.awaiting_review == "1"
    )
    return _json_out(got)
