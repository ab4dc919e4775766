"""Attached run workers: their tokens (organizers and administrators), and the worker's side of
the pull API (a run worker's token, never a person's): claim the next run of its competitions,
renew its lease (server/actions/run_workers.py)."""

from __future__ import annotations

from flask import current_app, request, send_file, url_for
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pydantic import ValidationError

from server import api_models as m
from server.actions import run_workers as actions
from server.api.common import ApiError, body_model, bp, json_out, need_user
from server.api.openapi import op
from server.db import db


def need_worker():
    """The run worker's live token this request presents (401 otherwise)."""
    header = request.headers.get("Authorization", "")
    plaintext = header[7:].strip() if header.lower().startswith("bearer ") else ""
    tok = actions.worker_token(db(), plaintext) if plaintext else None
    if tok is None:
        raise ApiError(
            401,
            "invalid_token",
            "send a run worker's token ('Authorization: Bearer plw_...'); this one is missing, "
            "invalid or revoked",
        )
    return tok


@bp.post("/run-workers/tokens")
@op(
    "Make a run worker's token: for one competition (its organizers), a set or the site "
    "(administrators)",
    body=m.RunWorkerTokenIn,
    responses={201: m.RunWorkerTokenOut},
    errors=(401, 403, 404, 422),
    tags=("run workers",),
    description="The secret is in this answer alone. A worker started with it "
    "(`palimpsest worker --attach URL --token T`) claims the code runs of those competitions in "
    "those pools, nothing else.",
)
def run_worker_token_create():
    u = need_user()
    got = actions.create_token(s=db(), actor=u, body=body_model(m.RunWorkerTokenIn))
    return json_out(got, 201)


@bp.get("/run-workers/tokens")
@op(
    "The run worker tokens you manage (organizers: their competitions' own)",
    responses={200: m.RunWorkerTokensOut},
    errors=(401, 403),
    tags=("run workers",),
)
def run_worker_token_list():
    return json_out(actions.list_tokens(s=db(), actor=need_user()))


@bp.delete("/run-workers/tokens/<int:token_id>")
@op(
    "Revoke a run worker's token: it claims nothing more, and its runs go back to their queues "
    "at once",
    responses={200: m.RunWorkerTokenOut},
    errors=(401, 403, 404),
    tags=("run workers",),
)
def run_worker_token_revoke(token_id):
    return json_out(actions.revoke_token(s=db(), actor=need_user(), token_id=token_id))


@bp.post("/worker/claim")
@op(
    "Claim the next code run of the token's competitions and pools (a run worker's token)",
    responses={200: m.WorkerClaimOut},
    errors=(401,),
    tags=("run workers",),
    description="Round-robin across the competitions: the one served least recently with a run "
    "waiting gives its first run, started and leased to the token for `lease_seconds`; renew it "
    "with a heartbeat every `heartbeat_every` seconds, or it goes back to its queue. `run` null: "
    "nothing waits.",
)
def worker_claim():
    tok = need_worker()
    got = actions.claim(s=db(), token=tok)
    for f in got.files:  # each file a link of its own, for a few minutes
        signed = _links().dumps([got.run, got.attempt, tok.id, f.path, f.url])
        f.url = url_for("api.worker_file", signed=signed, _external=True)
    if got.run is not None:
        got.result_url = _result_url(got.run, got.attempt, tok.id)
    return json_out(got)


def _result_url(run_id: int, attempt: int, token_id: int) -> str:
    """The link an attached worker posts one attempt's result to (the run's one output object),
    for the token that holds it, for `LINK_SECONDS`."""
    signed = _links().dumps([run_id, attempt, token_id, RESULT, ""])
    return url_for("api.worker_result", signed=signed, _external=True)


RESULT = "result"  # the one object a result link names: the run's output, with its counters


LINK_SECONDS = 300  # a claimed run's file links expire after this


def _links() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key, salt="palimpsest-run-file")


@bp.get("/worker/files/<signed>")
@op(
    "One file of a claimed run, by the link its claim gave (a run worker's token)",
    responses={200: "application/octet-stream"},
    errors=(401, 403, 404, 409),
    tags=("run workers",),
    description="The link names one file of one attempt of one run, for the token that claimed "
    "it, and expires after five minutes (403). 409 `not_held`: the token holds that attempt no "
    "more.",
)
def worker_file(signed):
    tok = need_worker()
    try:
        run_id, attempt, token_id, path, src = _links().loads(signed, max_age=LINK_SECONDS)
    except (BadSignature, ValueError, TypeError):
        raise ApiError(403, "bad_link", "this link is invalid or expired: claim again") from None
    if token_id != tok.id or path == RESULT:
        raise ApiError(403, "bad_link", "this link was given to another worker or use")
    got = actions.worker_file(s=db(), token=tok, run_id=run_id, attempt=attempt, path=path, src=src)
    return send_file(got, mimetype="application/octet-stream", as_attachment=True,
                     download_name=path.rsplit("/", 1)[-1])  # fmt: skip


@bp.post("/worker/runs/<int:run_id>/heartbeat")
@op(
    "Renew the lease on a run the token holds (a run worker's token)",
    responses={200: m.WorkerHeartbeatOut},
    errors=(401, 409),
    tags=("run workers",),
    description="409 `not_held`: the token does not hold this run (another competition's, never "
    "claimed, taken back after its lease ran out, its token revoked, or ended).",
)
def worker_heartbeat(run_id):
    tok = need_worker()
    got = actions.heartbeat(s=db(), token=tok, run_id=run_id)
    got.result_url = _result_url(run_id, got.attempt, tok.id)
    return json_out(got)


@bp.post("/worker/results/<signed>")
@op(
    "Post a claimed run's result: its output file and the kernel's counters (a run worker's token)",
    form=m.WorkerResultForm,
    responses={200: m.WorkerResultOut},
    errors=(401, 403, 409, 413, 422),
    tags=("run workers",),
    description="The link (from the claim or a heartbeat) names one attempt of one run, for the "
    "token that holds it, and expires after five minutes (403). The site records the result as "
    "its own worker's: the output becomes the run's submission (validated, scored, and on a "
    "blind phase shown to its team only after review), the counters and the log the run's "
    "record. 409 `not_held`: the token holds that attempt no more (its lease ran out, revoked, "
    "or its result already taken): nothing is recorded, nothing charged twice.",
)
def worker_result(signed):
    tok = need_worker()
    try:
        run_id, attempt, token_id, what, _src = _links().loads(signed, max_age=LINK_SECONDS)
    except (BadSignature, ValueError, TypeError):
        raise ApiError(
            403, "bad_link", "this link is invalid or expired: heartbeat for a fresh one"
        ) from None
    if token_id != tok.id or what != RESULT:
        raise ApiError(403, "bad_link", "this link was given to another worker or use")
    try:
        result = m.WorkerResultIn.model_validate_json(request.form.get("result") or "")
    except ValidationError as e:
        raise ApiError(422, "invalid_result", f"result: {_first(e)}") from None
    upload = request.files.get("output")
    got = actions.post_result(
        s=db(), token=tok, run_id=run_id, attempt=attempt, result=result,
        output=upload.stream if upload is not None else None,
    )  # fmt: skip
    return json_out(got)


def _first(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ())) or "(the JSON)"
    return f"{where}: {err.get('msg', 'invalid')}"
