"""The runs queue's job: run one participant's system blind, then hand its output to scoring.

`run_system(run_id)` unpacks the stored archive, copies the split's inputs (never the gold) into a
folder of the run, and runs the manifest's command in the sandbox (server.jobs.sandbox) under the
smaller of what the system asks for and what the site allows: the step an attached worker runs
too (server.jobs.execute). Its output file is then submitted
exactly as an uploaded prediction file is (`take_file`, the intake's core: stored, validated and
scored on the scoring queue), so that the same predictions score the same whichever way they
came. A system that breaks a limit, exits non-zero or writes no output fails "code" with its log;
a worker that dies mid-run leaves the run `running`, and the job (retried once by the reconciler
or RQ) starts it again; the submission is made once (deduplicated under the team lock). A
sandbox that fails before the system starts (its cgroup, its /output, bwrap or setpriv) fails the
run "infra": not counted, its reserved CPU given back, the same archive welcome again.

An object store that does not answer (fetching the archive or the inputs, storing the output) is
the server's outage, never the system's: each step is tried again with back-off (`STORE_WAITS`,
about two minutes in all) and, if the store is still away, the run goes back to `queued` with its
attempt given back, for the reconciler to enqueue again: an outage never counts toward the two
attempts after which an archive is refused (`failed_twice`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

from rq import get_current_job
from sqlmodel import Session

from server import objectstore
from server.db import get_engine, session_scope
from server.domain import code_runs, download_rule, lifecycle, run_queue
from server.domain.submissions import take_file
from server.exceptions import DuplicateSubmission, StoreUnreachable
from server.jobs.dispatch import KEY, Jobs, jobs
from server.jobs.execute import execute, limits_for
from server.models import CodeRun, Phase, Team, User, utcnow
from server.settings import get_settings

log = logging.getLogger(__name__)

# seconds between the tries of a step the object store did not answer (then the run is queued
# again, its attempt given back): 127 s in all, longer than a store's restart
STORE_WAITS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


class StoreOutage(Exception):
    """The object store did not answer any try of a step: the run is the server's to try again."""


def _with_store(run_id: int, what: str, fn):
    """`fn()`, tried again with back-off while the object store does not answer."""
    for wait in (*STORE_WAITS, None):
        try:
            return fn()
        except StoreUnreachable as e:
            if wait is None:
                raise StoreOutage(f"{what}: {e.message}") from None
            log.warning(
                "code run %s: %s: no answer from the store; again in %s s", run_id, what, wait
            )
            time.sleep(wait)


def holder_of_job() -> str:
    """Who holds the runs this process claims: its RQ job ("job:<id>"), else this process."""
    job = get_current_job()
    return f"job:{job.id}" if job is not None else f"process:{socket.gethostname()}:{os.getpid()}"


def run_system(run_id: int) -> dict:
    """Run the next code run of the queues (`run_queue.claim`: round-robin across competitions,
    within the pools this worker serves) in the sandbox and submit its output (see the module).
    Each queued run has a job of its own (`code-run-<id>`), so there are as many jobs as runs
    waiting, but a job runs the run the claim gives it, which is `run_id` only when no other
    competition's turn comes first. The run is held under a lease its heartbeat renews."""
    settings = get_settings()
    engine = get_engine(settings.sqlalchemy_url())
    holder = holder_of_job()
    lease = settings.stale_after
    got = run_queue.claim(engine, pools=settings.pools(), holder=holder, lease_seconds=lease)
    if got is None:
        return {"run": run_id, "skipped": True}
    run_id, attempt = got
    with Session(engine) as s:  # shown no sooner than its wall limit and the delay after it starts
        manifest = dict(s.get(CodeRun, run_id).manifest or {})
    code_runs.postpone_shown(engine, run_id, code_runs.release_moment(manifest, settings, utcnow()))
    try:
        with heartbeat(engine, run_id, holder, lease, settings.heartbeat_every):
            return _run_system(settings, engine, run_id, attempt)
    except StoreOutage as e:
        log.error("code run %s: %s; queued again, its attempt given back", run_id, e)
        code_runs.requeue_for_store(engine, run_id)
        return {"run": run_id, "stage": "queued", "status": "store_unreachable"}


@contextlib.contextmanager
def heartbeat(engine, run_id: int, holder: str, lease: float, every: float):
    """Renew the holder's lease on the run every `every` seconds while the block runs."""
    stop = threading.Event()

    def beat():
        while not stop.wait(max(0.2, float(every))):
            try:
                if not run_queue.renew(engine, run_id, holder, lease):
                    return  # taken back or ended: nothing more to hold
            except Exception as e:  # noqa: BLE001 - the database away: try again next beat
                log.warning("code run %s: lease not renewed (%s)", run_id, e)

    t = threading.Thread(target=beat, name=f"lease-{run_id}", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)


def _run_system(settings, engine, run_id: int, attempt: int) -> dict:
    with Session(engine) as s:
        r = s.get(CodeRun, run_id)
        phase = s.get(Phase, r.phase_id)
        task_id, split, key = r.task_id, phase.split, r.storage_key
        manifest = dict(r.manifest)
    models = [Path(p) for p in settings.run_models.split(":") if p]
    with tempfile.TemporaryDirectory(prefix=f"run-{run_id}-") as work:
        work = Path(work)
        os.chmod(work, 0o755)
        archive = _with_store(
            run_id, "fetching the archive", lambda: objectstore.local_upload(settings, key)
        )
        with Session(engine) as s:  # never before its inputs' date (the downloads' rule)
            at = download_rule.inputs_release(s, task_id, split)
        if at is not None:  # the date moved later as it started: held again, its attempt back
            code_runs.requeue_for_store(engine, run_id)
            return {"run": run_id, "stage": "queued", "status": "held", "until": at.isoformat()}
        # inputs from the store, never the gold
        _with_store(
            run_id, "fetching the inputs", lambda: objectstore.ensure_public(settings, task_id)
        )
        with Session(engine) as s:  # what the download rule releases now, and its own split
            areas = code_runs.released_areas(s, task_id, settings.home)
        code_runs.stage_inputs(settings.home, task_id, split, work / "input", areas)
        ran = execute(
            archive,
            work / "input",
            work,
            limits=limits_for(manifest, settings),
            attempt=attempt,
            models=models,
            runtime=settings.sandbox,
        )
        if ran.kind in ("unreadable", "infra"):
            if ran.kind == "infra":
                log.error("code run %s: %s\n%s", run_id, ran.reason, ran.log)
            code_runs.fail_infra(engine, run_id, ran.reason)
            return {"run": run_id, "stage": "failed", "status": ran.kind}
        common = dict(log=ran.log, outcome=ran.used, cpu_seconds=ran.cpu_seconds)
        if ran.kind == "code":
            code_runs.finish(
                engine, run_id, stage="failed", failure_kind="code", reason=ran.reason, **common
            )
            return {"run": run_id, "stage": "failed", "status": ran.status}
        # the job's own step: the run's output becomes its submission (its team's primary run
        # if asked), queued for scoring once committed; stored first (tried again while the
        # store does not answer: nothing is recorded until it takes the file)
        output = ran.manifest.output

        def submit():
            with session_scope(engine, {KEY: Jobs(settings)}) as s:
                return submit_output(s, settings, s.get(CodeRun, run_id), output, ran.output)

        sid = _with_store(run_id, "storing the output", submit)
        code_runs.finish(engine, run_id, stage="ran", submission_id=sid, **common)
        return {"run": run_id, "stage": "ran", "submission": sid}


def submit_output(s: Session, settings, r: CodeRun, output_name: str, path: Path) -> int:
    """The run's output file as its submission, on the caller's session (a site worker's own
    step, or an attached worker's posted result): stored, validated and scored as an uploaded
    file is (`take_file`), its scoring queued once this commits; its id. A second submission of
    the same output (a second run of the job) is the first's."""
    phase = s.get(Phase, r.phase_id)
    fields = dict(r.fields or {})
    team = s.get(Team, r.team_id)
    user = s.get(User, r.user_id) if r.user_id else None
    try:
        with path.open("rb") as f:
            sub = take_file(
                s,
                user=user,
                team=team,
                task_id=r.task_id,
                phase=phase.id,
                stream=f,
                filename=output_name,
                baseline=r.is_baseline,
                settings=settings,
                exempt=True,  # counted once, when the system was uploaded
                dedupe=True,
                facts=fields.get("facts") or None,
                # what the row keeps of the upload: every field it carried but these two
                **{k: v for k, v in fields.items() if k not in ("primary", "facts")},
            )
        if phase.blind:  # its time is the system's: when the run ended would tell
            sub.created_at = r.created_at  # its team how long it ran (the gate)
        sid = sub.id
        # linked in the same transaction: its scoring, queued once this commits, knows it
        # is a blind run's output (`server.domain.shown`) from its first step
        r.submission_id = sid
        s.add(r)
        if fields.get("primary") and not r.is_baseline:
            lifecycle.set_primary(s, sub, team_id=team.id, actor=user)
        jobs(s).score(s, sid)
    except DuplicateSubmission as e:  # a second run of this job: the first's submission
        sid = e.submission_id
    return sid


def on_run_failure(job, connection, exc_type=None, exc_value=None, tb=None) -> None:
    """RQ calls this when the job raised (the server's failure, never the system's): the run goes
    back to queued while it has an attempt left, for the reconciler to enqueue again; else it
    fails "infra", which does not count against the team."""
    settings = get_settings()
    engine = get_engine(settings.sqlalchemy_url())
    with Session(engine) as s:  # the run the job held (its claim's), else the job's own
        held = run_queue.held_by(s, f"job:{job.id}")
    run_id = held[0] if held else int(job.id.rsplit("-", 1)[1])
    # the organizers' reason names the error's type alone: its message may quote what the run
    # chose (a file's name); the whole of it goes to the worker's log
    log.error("code run %s raised %s: %s", run_id, exc_type, exc_value)
    reason = exc_type.__name__ if exc_type else "error"
    with session_scope(engine) as s:  # the job's own step
        r = s.get(CodeRun, run_id)
        if r is None or r.stage not in ("queued", "running"):
            return
        if r.attempts < code_runs.MAX_ATTEMPTS:
            r.stage, r.held_by, r.lease_until = "queued", "", None
            s.add(r)
            log.warning(
                "code run %s failed on attempt %s (%s): queued again", run_id, r.attempts, reason
            )
            return
    code_runs.fail_infra(engine, run_id, f"the server failed this run twice ({reason})")
