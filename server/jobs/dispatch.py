"""What an action asks of the workers, handed to the queues once its transaction has committed.

An action says what must happen after it (score this submission, score these again, deliver the
mail, run this system, fit this model); the session it runs on carries the installation's `Jobs`,
bound once by whatever opened the session (the app for the web and the API, a local command, the
demo, a test), never handed down call by call. A request waits in the session until the commit
and is dropped by a rollback: a refused or failed action queues nothing. Where Redis cannot be
reached the rows still say queued and the reconciler enqueues them later, so only a fit's
request, which records the failure, hears of it.

Nothing here loads Redis or RQ until a job is enqueued: a local command that queues nothing
starts without them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlmodel import Session

from server.db import after_commit
from server.settings import Settings, get_settings

log = logging.getLogger(__name__)

KEY = "palimpsest.jobs"


class Jobs:
    """The queues of one installation as an action sees them.

    `redis`: a connection, a callable returning one (the app's embedded Redis, started after the
    app), or None to connect from the settings; `enabled`: False (or a callable answering it) for
    an installation that enqueues nothing (tests that run the jobs themselves:
    `PALIMPSEST_ENQUEUE=False`); `warn`: where a job left to the reconciler is said (the log by
    default; a local command prints it)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        redis=None,
        enabled: bool | Callable[[], bool] = True,
        warn: Callable[[str], object] | None = None,
    ):
        self._settings = settings
        self._redis = redis
        self._enabled = enabled
        self._warn = warn or log.warning

    @property
    def settings(self) -> Settings:
        return self._settings or get_settings()

    @property
    def enabled(self) -> bool:
        return bool(self._enabled() if callable(self._enabled) else self._enabled)

    def connection(self):
        """The Redis connection jobs go to (raises what Redis raises when it cannot connect)."""
        conn = self._redis() if callable(self._redis) else self._redis
        return conn if conn is not None else _rq().connect(self.settings)

    def reachable(self) -> None:
        """Raise what Redis raises when the queue cannot be reached (nothing where enqueueing is
        off)."""
        if self.enabled:
            self.connection().ping()

    # --- after the commit: never raise (the reconciler enqueues what Redis missed) ---

    def score(self, s: Session, submission_id: int, upload: str | None = None) -> None:
        """Score a new submission once the session commits (`upload`: its storage key, whose
        small file goes to Redis with the job on a site with an object store)."""
        self._later(s, lambda: self.score_now(submission_id, upload, new=True))

    def rescore(self, s: Session, ids: list[int]) -> None:
        """Score these submissions again once the session commits (a job left by a dead worker
        for one of them is replaced), the oldest first: the order the rows were read in is the
        database's own, not the runs'."""
        if ids:
            self._later(s, lambda: self.rescore_now(sorted(ids)))

    def deliver_mail(self, s: Session) -> None:
        """Ask a worker to deliver the queued mail once the session commits."""
        self._later(s, self.deliver_mail_now)

    def run_code(self, s: Session, run_id: int) -> None:
        """Put a code run on the runs queue once the session commits."""
        self._later(s, lambda: self.run_code_now(run_id))

    # --- now, for a step that has committed on its own ---

    def score_now(
        self, submission_id: int, upload: str | None = None, *, new: bool = False
    ) -> bool:
        """Enqueue a submission's scoring; False (said) when Redis is away. `new`: its row was
        inserted by the transaction that just committed (`enqueue_submission`)."""
        if not self.enabled:
            return False
        try:
            _rq().enqueue_submission(
                self.connection(), submission_id, self.settings, new=new, upload=upload
            )
            return True
        except Exception as e:  # noqa: BLE001 — the row says queued: the reconciler enqueues it
            self._warn(
                f"submission {submission_id} committed but not enqueued "
                f"({type(e).__name__}: {e}); the reconciler will enqueue it"
            )
            return False

    def deliver_mail_now(self) -> bool:
        if not self.enabled:
            return False
        try:
            conn = self.connection()
        except Exception as e:  # noqa: BLE001 — the mail stays queued; the sweep delivers it
            self._warn(f"mail delivery not enqueued ({type(e).__name__}: {e})")
            return False
        return _rq(mail=True).enqueue_delivery(self.settings, conn)

    def fit_now(self, fit_id: int) -> bool:
        """Put a Bayesian fit on the agreement queue; raises when Redis cannot be reached (the
        action records the fit as failed). False where enqueueing is off."""
        if not self.enabled:
            return False
        _rq().enqueue_campaign_fit(self.connection(), fit_id, self.settings)
        return True

    def baselines_now(self, task_id: str, systems: list[str], options: dict) -> list[str]:
        """Put baseline runs on the baselines queue; returns their job ids (raises when Redis
        cannot be reached: nothing is recorded before)."""
        conn = self.connection()
        return [
            _rq().enqueue_baseline_run(conn, task_id, system, options, self.settings).id
            for system in systems
        ]

    def rescore_now(self, ids: list[int]) -> None:
        if not self.enabled:
            return
        try:
            conn = self.connection()
            for sid in ids:
                _rq().enqueue_submission(conn, sid, self.settings, replace=True)
        except Exception as e:  # noqa: BLE001 — the rows say queued: the reconciler enqueues them
            self._warn(
                f"{len(ids)} submission(s) queued in the database; the reconciler will enqueue "
                f"them ({type(e).__name__}: {e})"
            )

    def run_code_now(self, run_id: int) -> None:
        if not self.enabled:
            return
        try:
            _rq().enqueue_code_run(self.connection(), run_id, self.settings)
        except Exception as e:  # noqa: BLE001 — the run says queued: the reconciler enqueues it
            self._warn(f"code run {run_id} left to the reconciler ({type(e).__name__}: {e})")

    def _later(self, s: Session, fn: Callable[[], object]) -> None:
        after_commit(s, fn)  # each `*_now` says whether enqueueing is on


def _rq(mail: bool = False):
    """The queue's module (the mail outbox's with `mail`), loaded when a job is first enqueued:
    Redis and RQ are no part of a local command's start-up."""
    from server.jobs import outbox, queue  # here: Redis and RQ load when a job is enqueued

    return outbox if mail else queue


def bind(s: Session, jobs: Jobs | None) -> Session:
    """Make `jobs` the queues of every action run on `s`; returns `s`."""
    if jobs is not None:
        s.info[KEY] = jobs
    return s


def jobs(s: Session, settings: Settings | None = None) -> Jobs:
    """The queues bound to the session; on a session nothing bound them to, the installation's
    own, from `settings` (the environment's when None)."""
    got = s.info.get(KEY)
    if got is None:
        got = s.info[KEY] = Jobs(settings)
    return got
