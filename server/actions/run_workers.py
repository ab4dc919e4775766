"""Actions of attached run workers: an organizer makes a token for their competition (an
administrator for a set of competitions or the site), lists and revokes them; a worker holding a
token claims the next run of its competitions and pools (server.domain.run_queue: round-robin,
under a lease) and renews the lease with its heartbeats. A token never reaches another
competition's run, and every run it claims names it in its audit log."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import BinaryIO

from sqlmodel import Session, select

from server import api_models as m
from server import objectstore
from server.actions import common
from server.actions.common import action
from server.db import lock_row
from server.domain import code_runs, download_rule, people, run_queue
from server.domain.accounts import audit, hash_token, new_token
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs.dispatch import jobs
from server.jobs.execute import limits_for
from server.jobs.run_jobs import submit_output
from server.models import CodeRun, Competition, Phase, RunWorkerToken, User, utcnow
from server.settings import get_settings
from tasks.declared import declaration_path

TASK_FILE = "task/declaration.json"  # a declared task's declaration, among a run's files
TOKEN_PREFIX = "plw_"  # a run worker's token, told apart from a person's at a glance


def holder(tok: RunWorkerToken) -> str:
    """What a token's runs say holds them (`CodeRun.held_by`)."""
    return f"token:{tok.id}"


def token_out(tok: RunWorkerToken, **extra) -> m.RunWorkerTokenOut:
    return m.RunWorkerTokenOut(
        id=tok.id,
        name=tok.name,
        prefix=tok.prefix,
        competitions=list(tok.competition_ids or []),
        pools=list(tok.pools or []),
        created=tok.created_at,
        last_seen=tok.last_seen_at,
        revoked=tok.revoked_at,
        **extra,
    )


def _may_manage(s: Session, actor: User | None, competitions: list[int]) -> None:
    """An organizer manages a token of their one competition; a set or the site's are the
    administrators'."""
    if actor is None or people.is_admin(actor):
        return
    if len(competitions) != 1:
        raise Forbidden(
            "only a site administrator makes or revokes a run worker token for several "
            "competitions or for every competition",
            "admin_only",
        )
    common.require_organizer(actor, s, competition_id=competitions[0])


@action
def create_token(
    *, s: Session, actor: User | None, body: m.RunWorkerTokenIn
) -> m.RunWorkerTokenOut:
    """A run worker's token (its secret shown once)."""
    comps = sorted({int(c) for c in body.competitions})
    for cid in comps:
        if s.get(Competition, cid) is None:
            raise NotFound(f"no competition {cid}")
    _may_manage(s, actor, comps)
    pools = sorted({p.strip() for p in body.pools if p.strip()})
    bad = [p for p in pools if len(p) > 32 or not p.replace("-", "").isalnum()]
    if not pools or bad:
        raise UploadFieldsInvalid({"pools": "one or more pool names (letters, digits, '-')"})
    plaintext, _ = new_token()
    plaintext = TOKEN_PREFIX + plaintext
    tok = RunWorkerToken(
        token_sha256=hash_token(plaintext),
        prefix=plaintext[:12],
        name=body.name.strip()[:120],
        competition_ids=comps,
        pools=pools,
        created_by=actor.id if actor is not None else None,
    )
    s.add(tok)
    s.flush()
    audit(
        s, actor, "run_worker.token.create", f"run-worker-token:{tok.id}",
        competitions=comps, pools=pools, name=tok.name,
    )  # fmt: skip
    return token_out(tok, token=plaintext)


def _visible(s: Session, actor: User | None) -> list[RunWorkerToken]:
    rows = s.exec(select(RunWorkerToken).order_by(RunWorkerToken.id)).all()
    if actor is None or people.is_admin(actor):
        return list(rows)
    mine = people.organized_competitions(s, actor) or set()
    return [t for t in rows if len(t.competition_ids or []) == 1 and t.competition_ids[0] in mine]


@action
def list_tokens(*, s: Session, actor: User | None) -> m.RunWorkerTokensOut:
    """The run worker tokens the actor manages (an organizer: their competitions' own)."""
    common.require_organizer(actor, s)
    return m.RunWorkerTokensOut(tokens=[token_out(t) for t in _visible(s, actor)])


@action
def revoke_token(*, s: Session, actor: User | None, token_id: int) -> m.RunWorkerTokenOut:
    """Revoke a token: it claims nothing more, and the runs it holds go back to their queues at
    once (each attempt kept: a run is started twice at most)."""
    tok = s.get(RunWorkerToken, token_id)
    if tok is None or tok not in _visible(s, actor):
        raise NotFound(f"no run worker token {token_id}")
    _may_manage(s, actor, list(tok.competition_ids or []))
    released: list[int] = []
    if tok.revoked_at is None:
        tok.revoked_at = utcnow()
        s.add(tok)
        released = run_queue.release_held(s, holder(tok))
        for rid in released:
            audit(s, actor, "run.release", f"run:{rid}", token=tok.id, reason="token revoked")
            jobs(s).run_code(s, rid)  # a site worker's job for it, once committed
        audit(s, actor, "run_worker.token.revoke", f"run-worker-token:{tok.id}", released=released)
    return token_out(tok, released=released)


# ----------------------------------------------------------------------------- the worker's side


def worker_token(s: Session, plaintext: str) -> RunWorkerToken | None:
    """The live token a worker presents, or None."""
    if not plaintext.startswith(TOKEN_PREFIX):
        return None
    tok = s.exec(
        select(RunWorkerToken).where(RunWorkerToken.token_sha256 == hash_token(plaintext))
    ).first()
    return None if tok is None or tok.revoked_at is not None else tok


@action
def claim(*, s: Session, token: RunWorkerToken) -> m.WorkerClaimOut:
    """The next run of the token's competitions and pools (round-robin across competitions),
    started and leased to the token; `run` null when none waits."""
    settings = get_settings()
    got = run_queue.claim_in(
        s,
        pools=token.pools or [],
        holder=holder(token),
        lease_seconds=settings.stale_after,
        competitions=token.competition_ids or None,
    )
    tok = s.get(RunWorkerToken, token.id)
    tok.last_seen_at = utcnow()
    s.add(tok)
    if got is None:
        return m.WorkerClaimOut()
    rid, attempt = got
    r = s.get(CodeRun, rid)
    # shown no sooner than its wall limit and the delay after it starts, as a site worker's
    # claim does (`run_jobs.run_system`): when it ends still says nothing
    moment = code_runs.release_moment(dict(r.manifest or {}), settings, utcnow())
    if r.shown_at is None or r.shown_at < moment:
        r.shown_at = moment
        s.add(r)
    audit(
        s, None, "run.claim", f"run:{rid}",
        token=token.id, token_name=token.name, attempt=attempt,
    )  # fmt: skip
    return m.WorkerClaimOut(
        run=rid,
        attempt=attempt,
        lease_seconds=settings.stale_after,
        heartbeat_every=float(settings.heartbeat_every),
        task=r.task_id,
        command=list((r.manifest or {}).get("command", [])),
        limits=asdict(limits_for(dict(r.manifest or {}), settings)),
        # each file's `url` is where it lies under the data directory until the surface signs it
        # into a link (`worker_file` then reads it without computing the run's list again)
        files=[m.WorkerFile(path=p, url=src) for p, src in _file_paths(s, r, settings)],
    )


def _file_paths(s: Session, r: CodeRun, settings) -> list[tuple[str, str]]:
    """The files a run's worker fetches, as (its path in the run's folder, the server's file under
    the data directory; "" for the archive): its archive, a declared task's declaration, and its
    inputs as a site worker stages them (`code_runs.input_files`: the released areas and its
    split's inputs; never gold)."""
    phase = s.get(Phase, r.phase_id)
    home = Path(settings.home)
    areas = code_runs.released_areas(s, r.task_id, home)
    inputs = code_runs.input_files(home, r.task_id, phase.split, areas)
    declared = [(TASK_FILE, "")] if declaration_path(r.task_id, home).is_file() else []
    return [
        ("code.zip", ""),
        *declared,
        *((f"input/{rel}", src.relative_to(home).as_posix()) for rel, src in inputs),
    ]


@action
def worker_file(
    *, s: Session, token: RunWorkerToken, run_id: int, attempt: int, path: str, src: str = ""
) -> Path:
    """The server's file behind one of a claimed run's links (the link, signed by the site with
    the file's place that the claim computed, checked by the surface): only while the token holds
    that attempt of the run, only after its inputs' date, and only a file of the task's public
    part."""
    settings = get_settings()
    r = s.get(CodeRun, run_id)
    if r is None or r.stage != "running" or r.held_by != holder(token) or r.attempts != attempt:
        raise LifecycleRefused(
            f"this worker does not hold attempt {attempt} of code run {run_id}", "not_held"
        )
    if path == "code.zip":
        return objectstore.local_upload(settings, r.storage_key)
    if path == TASK_FILE:  # the task's declaration (its public spec), never its data
        objectstore.ensure_public(settings, r.task_id)
        got = declaration_path(r.task_id, settings.home)
        if got.is_file():
            return got
        raise NotFound(f"task {r.task_id} has no declaration")
    phase = s.get(Phase, r.phase_id)
    if download_rule.inputs_release(s, r.task_id, phase.split) is not None:
        raise LifecycleRefused("the run's inputs are not released yet", "not_released")
    objectstore.ensure_public(settings, r.task_id)
    home = Path(settings.home)
    public = (home / "tasks" / r.task_id / "public").resolve()
    got = (home / src).resolve() if src and path.startswith("input/") else None
    if got is None or not got.is_relative_to(public) or not got.is_file():
        raise NotFound(f"code run {run_id} has no file {path}")
    return got


@action
def heartbeat(*, s: Session, token: RunWorkerToken, run_id: int) -> m.WorkerHeartbeatOut:
    """The worker's heartbeat for a run it holds: its lease renewed. A run it does not hold (never
    claimed, taken back after its lease ran out, its token revoked, ended) is refused."""
    settings = get_settings()
    tok = s.get(RunWorkerToken, token.id)
    tok.last_seen_at = utcnow()
    s.add(tok)
    if not run_queue.renew_in(s, run_id, holder(token), settings.stale_after):
        raise LifecycleRefused(
            f"this worker does not hold code run {run_id} (never claimed by its token, taken back "
            "after its lease ran out, or ended): stop it and claim again",
            "not_held",
        )
    attempt = s.get(CodeRun, run_id).attempts
    return m.WorkerHeartbeatOut(run=run_id, attempt=attempt, lease_seconds=settings.stale_after)


def _held(s: Session, token: RunWorkerToken, run_id: int, attempt: int) -> CodeRun:
    """The run, when the token holds this attempt of it (LifecycleRefused `not_held` otherwise:
    another token's, another competition's, taken back after its lease ran out, ended)."""
    r = s.get(CodeRun, run_id)
    if r is None or r.stage != "running" or r.held_by != holder(token) or r.attempts != attempt:
        raise LifecycleRefused(
            f"this worker does not hold attempt {attempt} of code run {run_id} (another "
            "worker's, taken back after its lease ran out, or ended): its result is not taken",
            "not_held",
        )
    return r


@action
def post_result(
    *,
    s: Session,
    token: RunWorkerToken,
    run_id: int,
    attempt: int,
    result: m.WorkerResultIn,
    output: BinaryIO | None,
) -> m.WorkerResultOut:
    """An attached worker's result for the attempt it holds, recorded as a site worker records
    its own (server.jobs.run_jobs): the sandbox's failure ends the run `infra` (not counted, its
    reserved CPU given back), the system's ends it `failed` with its log and counters, and its
    output becomes its submission through the intake's core (`submit_output`: stored,
    validated, scored, then the same review gate). Recorded once: the run's row is locked and
    the attempt must still be the token's, so a second post (or a post after the lease ran
    out) is refused and nothing is charged twice."""
    settings = get_settings()
    lock_row(s, CodeRun, run_id)
    r = _held(s, token, run_id, attempt)
    now = utcnow()
    end = dict(finished_at=now, reserved_cpu=0.0, lease_until=None)
    audit(
        s, None, "run.result", f"run:{run_id}",
        token=token.id, token_name=token.name, attempt=attempt, kind=result.kind,
    )  # fmt: skip
    if result.kind == "infra":
        for k, v in end.items():
            setattr(r, k, v)
        r.stage, r.failure_kind = "failed", "infra"
        r.reason = (result.reason or "the attached worker's sandbox failed")[:500]
        s.add(r)
        return m.WorkerResultOut(run=run_id, stage=r.stage)
    used = result.counters() | {"attempt": attempt}
    for k, v in end.items():
        setattr(r, k, v)
    r.log, r.outcome, r.cpu_seconds = result.log, used, float(result.cpu_seconds)
    if result.kind == "code":
        r.stage, r.failure_kind, r.reason = "failed", "code", result.reason[:500]
        s.add(r)
        return m.WorkerResultOut(run=run_id, stage=r.stage)
    if output is None:
        raise UploadFieldsInvalid({"output": "a run that ended `ok` posts its output file"})
    cap = limits_for(dict(r.manifest or {}), settings).output_mb * 1024 * 1024
    name = (r.manifest or {}).get("output") or "predictions.jsonl"
    with tempfile.TemporaryDirectory(prefix=f"posted-{run_id}-") as d:
        path = Path(d) / "output"
        size = 0
        with path.open("wb") as f:
            while chunk := output.read(1 << 20):
                size += len(chunk)
                if size > cap:
                    raise UploadFieldsInvalid(
                        {"output": f"larger than the run's output limit ({cap} bytes)"}
                    )
                f.write(chunk)
        if size == 0:
            raise UploadFieldsInvalid({"output": "empty: a run that ended `ok` wrote its file"})
        sid = submit_output(s, settings, r, name, path)
    r.stage, r.submission_id = "ran", sid
    s.add(r)
    return m.WorkerResultOut(run=run_id, stage=r.stage, submission=sid)
