"""The Redis connection and the RQ queues; every job is JSON-serialized (never pickle).

One job per submission: its id is `submission-<id>`, so enqueuing twice cannot run two
different jobs, and the reconciler can ask Redis about a submission by its id alone.

The queues: `boards` renders the boards a view found due for their next render (at most one
per board and audience per `board_refresh_seconds`: server.jobs.board_jobs), taken first;
`scoring` scores every submission (a team's or a baseline entry's: cheap CPU work any worker
does); `stats` computes the boards' statistics (server.boards.stats: a burst of scores
coalesces into one or two jobs per phase, and scoring never waits behind them); `baselines` holds
baseline runs (`baselines run --enqueue`), which need the models and want the GPU machine:
`palimpsest worker --queue baselines` there, `--queue scoring` elsewhere; `agreement` holds the
fits of a campaign's Bayesian agreement model (minutes of CPU each, on a worker with the
`[agreement]` extra); `runs` holds participants' systems, run in the sandbox by a worker that needs
the inputs only (`palimpsest worker --queue runs` on a machine that holds no gold). A worker takes
its queues in that order.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import time

import redis
from rq import Callback, Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from server.jobs.embedded import EmbeddedRedis
from server.settings import Settings
from server.storage import path_for

SCORING = "scoring"
BASELINES = "baselines"  # baseline runs (server.jobs.baseline_jobs), not the scoring of their files
AGREEMENT = (
    "agreement"  # the Bayesian agreement model of a campaign (server.jobs.campaign_fit_jobs)
)
RUNS = "runs"  # participants' systems run blind in the sandbox (server.jobs.run_jobs)
STATS = "stats"  # the boards' statistics (server.boards.stats.board_stats_job)
BOARDS = "boards"  # the boards' renders a view found due (server.jobs.board_jobs.render_board_job)
# a worker takes its queues in this order: the renders first (at most one per board and audience
# per interval, under a second each: a deadline's scoring queue never starves the boards)
QUEUES = (BOARDS, SCORING, STATS, BASELINES, AGREEMENT, RUNS)
JOB_FUNC = "server.jobs.scoring.score_submission"
FAILURE_CALLBACK = "server.jobs.scoring.on_job_failure"

log = logging.getLogger(__name__)
_connections: dict[str, redis.Redis] = {}


def redis_url(settings: Settings) -> str:
    """REDIS_URL, else the embedded server's unix socket in the data directory."""
    if settings.redis_url:
        return settings.redis_url

    return EmbeddedRedis(settings.home).url


def connect(settings: Settings, *, start_embedded: bool = False) -> redis.Redis:
    """A Redis client (one per URL per process); `start_embedded` starts the embedded server when it
    is the default and not running (workers do; the web app never spawns one)."""
    url = redis_url(settings)
    if settings.embedded_redis() and start_embedded:
        EmbeddedRedis(settings.home).ensure()
    conn = _connections.get(url)
    if conn is None:
        conn = redis.Redis.from_url(
            url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=15
        )
        _connections[url] = conn
    return conn


def job_id(submission_id: int) -> str:
    return f"submission-{int(submission_id)}"


def submission_id_of(job_id_: str) -> int:
    return int(job_id_.rsplit("-", 1)[1])


def get_queue(name: str, conn: redis.Redis, settings: Settings | None = None) -> Queue:
    timeout = settings.job_timeout if settings else 600
    return Queue(name, connection=conn, serializer=JSONSerializer, default_timeout=timeout)


def _fetch(conn: redis.Redis, jid: str) -> Job | None:
    try:
        return Job.fetch(jid, connection=conn, serializer=JSONSerializer)
    except NoSuchJobError:
        return None


def job_by_id(conn: redis.Redis, jid: str) -> Job | None:
    """Any job by its id (None when Redis has none)."""
    return _fetch(conn, jid)


def fetch_job(conn: redis.Redis, submission_id: int) -> Job | None:
    return _fetch(conn, job_id(submission_id))


LIVE = (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED)


def _live_or_cleared(conn: redis.Redis, jid: str, replace: bool = False) -> Job | None:
    """The job holding `jid` if it still waits or runs (and `replace` is off); otherwise that job,
    finished, failed or stale, is deleted so the id can be enqueued afresh, and None is returned."""
    if not conn.exists(Job.key_for(jid)):  # the common case (a new run): one EXISTS, no job read
        return None
    old = _fetch(conn, jid)
    if old is None:
        return None
    if not replace and old.get_status(refresh=False) in LIVE:
        return old
    try:
        old.delete(remove_from_queue=True)
    except Exception:  # a half-written job hash: drop the key itself
        conn.delete(old.key)
    return None


WAITING = (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED)


def enqueue_once(
    conn: redis.Redis,
    settings: Settings,
    func: str,
    job_id_: str,
    *,
    args: tuple = (),
    description: str = "",
    queue: str = SCORING,
) -> None:
    """Enqueue `func(*args)` unless one is waiting: a job that waits will read the latest state
    anyway, so nothing is added; while one runs (it may have read an earlier state) one follow-up,
    `<job_id>-again`, is queued. For jobs that recompute from what the database holds (a board's
    statistics, the mail queue's delivery). Callers at the same moment take turns
    (`_one_at_a_time`): the first enqueues, the others find its job waiting, so simultaneous
    requests queue one job.
    Raises what Redis raises; callers that may go on without it catch.
    The usual case at a busy moment, a job already waiting, costs one round trip: both jobs'
    statuses read first, without the turn (what the turn would find, since only a waiting job
    stops it)."""
    if _waiting(conn, job_id_):
        return
    with _one_at_a_time(conn, f"{ENQUEUE_GUARD}{job_id_}"):
        for jid in (job_id_, f"{job_id_}-again"):
            job = _fetch(conn, jid)
            status = job.get_status(refresh=False) if job is not None else None
            if status in WAITING:
                return
            if status == JobStatus.STARTED:
                continue
            _live_or_cleared(conn, jid)  # a finished or failed one: its id is free again
            get_queue(queue, conn, settings).enqueue_call(
                func,
                args=args,
                job_id=jid,
                timeout=settings.job_timeout,
                result_ttl=60,
                failure_ttl=24 * 3600,
                description=description,
            )
            return


def _waiting(conn: redis.Redis, job_id_: str) -> bool:
    """Whether `enqueue_once` would find a job of `job_id_` waiting: the job itself, or, while it
    runs, its follow-up (one pipeline of two HGETs)."""
    with conn.pipeline(transaction=False) as p:
        for jid in (job_id_, f"{job_id_}-again"):
            p.hget(Job.key_for(jid), "status")
        first, again = (x.decode() if isinstance(x, bytes) else x for x in p.execute())
    waiting = {str(x.value) for x in WAITING}
    return first in waiting or (first == JobStatus.STARTED.value and again in waiting)


ENQUEUE_GUARD = "palimpsest:enqueue-guard:"
GUARD_MS = 10_000  # a guard left by a caller that died frees itself after this
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"


@contextlib.contextmanager
def _one_at_a_time(conn: redis.Redis, key: str):
    """Hold `key` (SET NX with an expiry, released only by its holder) while the block runs;
    a second caller waits its turn (a few milliseconds: the holder checks and enqueues). After
    `GUARD_MS` without a turn (a holder stuck or gone) it goes on: a job too many, never none."""
    token = secrets.token_hex(8)
    deadline = time.monotonic() + GUARD_MS / 1000
    held = bool(conn.set(key, token, nx=True, px=GUARD_MS))
    while not held and time.monotonic() < deadline:
        time.sleep(0.002)
        held = bool(conn.set(key, token, nx=True, px=GUARD_MS))
    try:
        yield
    finally:
        if held:
            conn.eval(_RELEASE, 1, key, token)


def enqueue_submission(
    conn: redis.Redis,
    submission_id: int,
    settings: Settings,
    *,
    replace: bool = False,
    new: bool = False,
    upload: str | None = None,
) -> Job:
    """Enqueue the scoring job of a submission, unless a job for it already waits or runs.

    `replace=True` (the reconciler) first deletes whatever job holds the id, e.g. one left
    "started" by a dead worker. `new=True`: the submission's row was just inserted, so no job of
    its own can wait or run; whatever hash holds its id (another database's, before a restore)
    is deleted in the same MULTI/EXEC as the job is written: one round trip, not two. RQ retries
    only what the job lets through: validation failures never raise, so only the server's own
    errors are retried. `upload`: the run's storage key, as the intake enqueues it: on a site
    with an object store, a small file's bytes go to Redis with the job (`upload_copy`), so that
    a worker on a data directory of its own reads them there instead of fetching them from the
    store.
    """
    q = get_queue(SCORING, conn, settings)  # every submission, a baseline entry's too
    if not new:
        live = _live_or_cleared(conn, job_id(submission_id), replace)
        if live is not None:
            return live
    retries = max(0, settings.max_attempts - 1)
    data = _small_upload(settings, upload) if upload else None
    with conn.pipeline() as pipe:  # the queue's set, the job and its place: one MULTI/EXEC
        if new:
            pipe.multi()  # RQ's own call to it comes after its watches; it has none here
            pipe.delete(Job.key_for(job_id(submission_id)))
        job = q.enqueue_call(
            JOB_FUNC,
            args=(int(submission_id),),
            job_id=job_id(submission_id),
            timeout=settings.job_timeout,
            result_ttl=3600,
            failure_ttl=7 * 24 * 3600,
            retry=Retry(max=retries) if retries else None,
            on_failure=_failure_callback(),
            description=f"score submission {submission_id}",
            pipeline=pipe,
        )
        if data is not None:  # in the same MULTI (RQ's WATCH, if any, came first)
            hour = int(time.time() // 3600)
            pipe.eval(
                _PUT_COPY,
                2,
                UPLOAD_COPY + upload,
                f"{UPLOAD_COPY_SPENT}{hour}",
                data,
                UPLOAD_COPY_SECONDS,
                UPLOAD_COPY_BUDGET,
                2 * UPLOAD_COPY_SECONDS,
            )
        pipe.execute()
    return job


# ----------------------------------------------------------------------------- uploads' copies
# On a site with an object store, a worker on a data directory of its own fetches each run's
# upload from the store (one GET: a sixth of a one-run job's CPU, profiled). The intake has the
# file at hand: a small one's bytes go into Redis beside its job, under the upload's storage key,
# for an hour; the worker takes them (and deletes them) in one round trip, checks them against
# the sha256 the key is named by, and falls back to the store when they are missing, expired or
# do not match. The store stays the upload's durable copy; Redis only saves a request.

UPLOAD_COPY = "palimpsest:upload:"
UPLOAD_COPY_BYTES = 64 * 1024  # files above this size are fetched from the store
UPLOAD_COPY_SECONDS = 3600
# Redis's memory is bounded, whatever the queue's depth: the copies put in one clock hour add up
# to at most this many bytes (counted under UPLOAD_COPY_SPENT<hour>, never given back), so the
# copies alive (an hour each) hold at most twice as much; past it, the workers fetch the files
# from the store as they would without copies. 128 MiB is some 6,500 files of TRoTR's test length.
UPLOAD_COPY_BUDGET = 128 * 2**20
UPLOAD_COPY_SPENT = "palimpsest:upload-copies-spent:"
# put the copy (KEYS[1]) only while this hour's count (KEYS[2]) leaves room for it
_PUT_COPY = """
local n = string.len(ARGV[1])
if tonumber(redis.call('get', KEYS[2]) or '0') + n > tonumber(ARGV[3]) then return 0 end
redis.call('incrby', KEYS[2], n)
redis.call('expire', KEYS[2], ARGV[4])
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""


def _small_upload(settings: Settings, key: str) -> bytes | None:
    """The bytes of a stored upload to put beside its job: on a site with an object store only,
    for a file of at most UPLOAD_COPY_BYTES in this machine's data directory; else None."""
    if not settings.s3_bucket:
        return None
    try:
        with path_for(settings.home, key).open("rb") as f:
            data = f.read(UPLOAD_COPY_BYTES + 1)
    except (OSError, ValueError):
        return None
    return data if len(data) <= UPLOAD_COPY_BYTES else None


def take_upload_copy(conn: redis.Redis, key: str) -> bytes | None:
    """The bytes the intake put beside a run's job (`enqueue_submission`), taken out of Redis in
    one round trip, if they are there and their sha256 is the one the storage key names; else
    None (the caller fetches the file from the store)."""
    with conn.pipeline(transaction=False) as pipe:
        pipe.get(UPLOAD_COPY + key)
        pipe.delete(UPLOAD_COPY + key)
        data = pipe.execute()[0]
    if data is None:
        return None
    name = key.rsplit("/", 1)[-1]
    if hashlib.sha256(data).hexdigest() != name[:64]:
        log.warning("upload %s: the copy in Redis does not match its sha256; not used", key)
        return None
    return data


# ----------------------------------------------------------------------------- claimed runs
# A scoring job scores more queued runs of its phase by claiming them in the database
# (server.domain.lifecycle.claim_queued). Each claimed run's own job is dropped through RQ's
# API, and a claim key says who scores the run, for the reconciler.

CLAIM = "palimpsest:scoring:claim:"


def claim_key(submission_id: int) -> str:
    return f"{CLAIM}{int(submission_id)}"


def hold_claim(conn: redis.Redis, submission_id: int, holder: str, seconds: int) -> None:
    """Say that `holder` (the RQ job scoring it; "" outside a job) scores this claimed run, for
    at most `seconds` (a holder that dies without a word frees it then)."""
    conn.set(claim_key(submission_id), holder, ex=max(1, int(seconds)))


def claim_holder(conn: redis.Redis, submission_id: int) -> str | None:
    """Who scores this claimed run ("" outside a job), or None when nobody claims it."""
    got = conn.get(claim_key(submission_id))
    return None if got is None else got.decode()


def drop_claim(conn: redis.Redis, submission_id: int) -> None:
    conn.delete(claim_key(submission_id))


def drop_waiting_job(conn: redis.Redis, submission_id: int) -> None:
    """Delete a claimed run's own job if it still waits (`Job.delete(remove_from_queue=False)`:
    no walk of the queue's list). Its id stays in the list, where a worker that pops it finds no
    job and takes the next (RQ passes over ids whose job is gone); a job a worker has started
    already is left to finish: it starts nothing, the run being no longer queued."""
    job = fetch_job(conn, submission_id)
    if job is not None and job.get_status(refresh=False) == JobStatus.QUEUED:
        job.delete(remove_from_queue=False)


BASELINE_JOB_FUNC = "server.jobs.baseline_jobs.run_baseline"


def baseline_job_id(task_id: str, system: str, options: dict, phases: list[str] | None) -> str:
    """One job per (task, system, options, phases): asking twice while it waits adds nothing."""
    digest = hashlib.sha256(json.dumps([options, phases], sort_keys=True).encode()).hexdigest()[:12]
    return f"baseline-{task_id}-{system}-{digest}"


def enqueue_baseline_run(
    conn: redis.Redis,
    task_id: str,
    system: str,
    options: dict,
    settings: Settings,
    phases: list[str] | None = None,
) -> Job:
    """Put one baseline run on the baselines queue, for a worker with the models (and the GPU):
    `palimpsest worker --queue baselines`. The job writes the file and records it as a baseline
    entry through the upload's one intake, which enqueues its scoring on the scoring queue."""
    jid = baseline_job_id(task_id, system, options, phases)
    live = _live_or_cleared(conn, jid)
    if live is not None:
        return live
    return get_queue(BASELINES, conn, settings).enqueue_call(
        BASELINE_JOB_FUNC,
        args=(task_id, system, options, phases),
        job_id=jid,
        timeout=settings.baseline_timeout,
        result_ttl=7 * 24 * 3600,
        failure_ttl=7 * 24 * 3600,
        description=f"baseline {system} on {task_id}",
    )


FIT_JOB_FUNC = "server.jobs.campaign_fit_jobs.fit_campaign_model"
FIT_FAILURE_CALLBACK = "server.jobs.campaign_fit_jobs.on_fit_failure"


def enqueue_campaign_fit(conn: redis.Redis, fit_id: int, settings: Settings) -> Job:
    """Put one requested fit of a campaign's Bayesian agreement model on the agreement queue
    (one job per fit row: asking twice adds nothing while it waits or runs)."""
    jid = f"campaign-fit-{int(fit_id)}"
    live = _live_or_cleared(conn, jid)
    if live is not None:
        return live
    return get_queue(AGREEMENT, conn, settings).enqueue_call(
        FIT_JOB_FUNC,
        args=(int(fit_id),),
        job_id=jid,
        timeout=settings.baseline_timeout,
        result_ttl=24 * 3600,
        failure_ttl=7 * 24 * 3600,
        on_failure=Callback(FIT_FAILURE_CALLBACK, timeout=30),
        description=f"Bayesian agreement model, fit {fit_id}",
    )


RUN_JOB_FUNC = "server.jobs.run_jobs.run_system"
RUN_FAILURE_CALLBACK = "server.jobs.run_jobs.on_run_failure"


def run_job_id(run_id: int) -> str:
    return f"code-run-{int(run_id)}"


def fetch_run_job(conn: redis.Redis, run_id: int) -> Job | None:
    return _fetch(conn, run_job_id(run_id))


def enqueue_code_run(
    conn: redis.Redis, run_id: int, settings: Settings, *, replace: bool = False
) -> Job:
    """Put one code run on the runs queue (one job per run; `replace` after a dead worker)."""
    live = _live_or_cleared(conn, run_job_id(run_id), replace)
    if live is not None:
        return live
    return get_queue(RUNS, conn, settings).enqueue_call(
        RUN_JOB_FUNC,
        args=(int(run_id),),
        job_id=run_job_id(run_id),
        # the sandbox's own wall clock comes first; this is the second layer
        timeout=int(settings.run_wall_seconds) + 120,
        result_ttl=24 * 3600,
        failure_ttl=7 * 24 * 3600,
        on_failure=Callback(RUN_FAILURE_CALLBACK, timeout=30),
        description=f"run the system of code run {run_id}",
    )


def _failure_callback():
    return Callback(FAILURE_CALLBACK, timeout=30)
