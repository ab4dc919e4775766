"""The code runs' queues: one per competition and pool, served round-robin, each run held under a
lease while it runs.

A run waits in the queue of its competition (`CodeRun.competition_id`; 0 for a task in none) in its
pool (`CodeRun.pool`: "cpu", "gpu", or the name of an organizer's own pool). A worker claims the
next run of the pools it serves (`claim`): the pool's competition served least recently that has a
queued run (`RunQueueTurn.served`), then that competition's first queued run by id. So a burst in
one competition delays another's runs by one run each, whatever the burst's size; within a
competition runs keep their order (the per-team limits are the intake's). An attached worker's
token names the competitions it may serve: it is never given another's run.

The claim starts the run (running, its attempt counted) and gives its holder a lease of
`lease_seconds`, renewed by its heartbeat (`renew`); a lease that runs out is the reconciler's:
the run goes back to its queue while it has an attempt left (`take_back`). Claimers at the same
moment on PostgreSQL lock a competition's turn and the run with `FOR UPDATE SKIP LOCKED` (two
claimers serve two competitions, or two runs of one); on SQLite a claimer takes the database's
write lock first, so claimers take turns. Nothing walks a queue: a claim reads one turn per
competition of the pool and one run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import and_, exists, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from server.db import lock_row, session_scope
from server.domain import download_rule
from server.models import CodeRun, Phase, RunQueueTurn, utcnow

MAX_ATTEMPTS = 2  # server.domain.code_runs.MAX_ATTEMPTS (imported there from here)
CPU, GPU = "cpu", "gpu"
SITE_POOLS = (CPU, GPU)  # the pools the site's own workers serve by default


def pool_for(manifest: dict, own_pool: str = "") -> str:
    """The pool a system waits in: its competition's own pool when it has one, else "gpu" for a
    system that asks for the GPU, else "cpu"."""
    if own_pool:
        return own_pool
    res = (manifest or {}).get("resources") or {}
    return GPU if res.get("gpu") else CPU


def join_queue(s: Session, run: CodeRun) -> None:
    """Give the run's (pool, competition) a turn in the round-robin if it has none yet (an insert
    that does nothing when the turn exists, so two first runs at once make one). Part of the
    action that queues the run."""
    s.execute(_insert_turn(s, run.pool, run.competition_id))


def _insert_turn(s: Session, pool: str, competition_id: int):
    values = {"pool": pool, "competition_id": int(competition_id), "served": 0}
    dialect = postgresql if s.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(RunQueueTurn.__table__).values(**values).on_conflict_do_nothing()


def held_phases(s: Session, pools: list[str]) -> list[int]:
    """The phases whose queued runs are held until their inputs' date (the downloads' rule,
    `download_rule.inputs_release`): no claim takes them before it, so a held run never stands
    in front of its competition's other runs."""
    phases = s.execute(
        select(Phase).where(
            Phase.id.in_(
                select(CodeRun.phase_id)
                .where(CodeRun.stage == "queued", CodeRun.pool.in_(pools))
                .distinct()
            )
        )
    ).scalars()
    now = utcnow()
    return [
        p.id for p in phases if download_rule.inputs_release(s, p.task_id, p.split, now) is not None
    ]


def _turnless(pools: list[str], comps: list[int] | None, held: list[int] = ()):
    """A queued run's (pool, competition) that has no turn yet."""
    T = RunQueueTurn
    q = (
        select(CodeRun.pool, CodeRun.competition_id)
        .where(CodeRun.stage == "queued", CodeRun.pool.in_(pools))
        .where(CodeRun.attempts < MAX_ATTEMPTS, CodeRun.phase_id.notin_(list(held)))
        .where(~exists().where(T.pool == CodeRun.pool, T.competition_id == CodeRun.competition_id))
        .limit(1)
    )
    return q if comps is None else q.where(CodeRun.competition_id.in_(comps))


def _queued(pool_col, competition_col, held: list[int] = ()):
    return and_(
        CodeRun.stage == "queued",
        CodeRun.pool == pool_col,
        CodeRun.competition_id == competition_col,
        CodeRun.attempts < MAX_ATTEMPTS,
        CodeRun.phase_id.notin_(list(held)),
    )


def claim(
    engine,
    *,
    pools: Iterable[str],
    holder: str,
    lease_seconds: float,
    competitions: Iterable[int] | None = None,
) -> tuple[int, int] | None:
    """Claim the next run for a worker serving `pools` (and only `competitions`, when given: an
    attached worker's token): (its id, its attempt), started and leased to `holder`, or None when
    nothing waits for it. One transaction of its own (a site worker's step; `claim_in` within an
    action's)."""
    with session_scope(engine) as s:  # the worker's own step
        return claim_in(
            s, pools=pools, holder=holder, lease_seconds=lease_seconds, competitions=competitions
        )


def claim_in(
    s: Session,
    *,
    pools: Iterable[str],
    holder: str,
    lease_seconds: float,
    competitions: Iterable[int] | None = None,
) -> tuple[int, int] | None:
    """`claim` on the caller's session (its transaction)."""
    pools = list(pools)
    comps = None if competitions is None else [int(c) for c in competitions]
    if not pools or comps == []:
        return None
    now = utcnow()
    T = RunQueueTurn
    held = held_phases(s, pools)
    turns = (
        select(T.pool, T.competition_id)
        .where(T.pool.in_(pools), exists().where(_queued(T.pool, T.competition_id, held)))
        .order_by(T.served, T.competition_id, T.pool)
        .limit(1)
    )
    if comps is not None:
        turns = turns.where(T.competition_id.in_(comps))
    postgres = s.get_bind().dialect.name == "postgresql"
    if not postgres:  # SQLite: the write lock first, so claimers take turns
        lock_row(s, CodeRun, 0)
    got = None
    # first a turn no other claimer holds (two claimers serve two competitions); when every
    # one is held, the least recently served all the same (its runs are locked one by one)
    tries = (turns.with_for_update(of=T, skip_locked=True), turns) if postgres else (turns,)
    for stmt in tries:
        got = s.execute(stmt).first()
        if got is not None:
            break
    if got is None:  # a run queued without its turn (written outside `add_run`): its turn now
        got = s.execute(_turnless(pools, comps, held)).first()
        if got is None:
            return None
        s.execute(_insert_turn(s, got[0], got[1]))
    pool, cid = got
    rid = s.execute(
        select(CodeRun.id)
        .where(_queued(pool, cid, held))
        .order_by(CodeRun.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).scalar()
    if rid is None:
        return None
    n = s.execute(
        update(CodeRun)
        .where(CodeRun.id == rid, CodeRun.stage == "queued")
        .values(
            stage="running",
            attempts=CodeRun.attempts + 1,
            started_at=now,
            held_by=holder[:64],
            lease_until=now + timedelta(seconds=lease_seconds),
        )
    ).rowcount
    if not n:
        return None
    s.execute(
        update(T).where(T.pool == pool, T.competition_id == cid).values(served=time.time_ns())
    )
    attempt = s.execute(select(CodeRun.attempts).where(CodeRun.id == rid)).scalar()
    return int(rid), int(attempt)


def renew(engine, run_id: int, holder: str, lease_seconds: float) -> bool:
    """The holder's heartbeat: its lease on a running run extended; False when the run is no
    longer its own (taken back, revoked, ended)."""
    with session_scope(engine) as s:  # the worker's own step
        return renew_in(s, run_id, holder, lease_seconds)


def renew_in(s: Session, run_id: int, holder: str, lease_seconds: float) -> bool:
    """`renew` on the caller's session (its transaction)."""
    n = s.execute(
        update(CodeRun)
        .where(CodeRun.id == run_id, CodeRun.stage == "running", CodeRun.held_by == holder)
        .values(lease_until=utcnow() + timedelta(seconds=lease_seconds))
    ).rowcount
    return bool(n)


def release_held(s: Session, holder: str) -> list[int]:
    """Every running run `holder` holds back to its queue at once (its token revoked), each
    attempt kept (counted: a run is started twice at most). Part of the caller's transaction;
    the ids released."""
    ids = held_by(s, holder)
    if ids:
        s.execute(
            update(CodeRun)
            .where(CodeRun.id.in_(ids), CodeRun.stage == "running", CodeRun.held_by == holder)
            .values(stage="queued", held_by="", lease_until=None)
        )
    return ids


def expired(s: Session, now=None) -> list[tuple[int, int]]:
    """The running runs whose lease ran out: (id, attempts)."""
    now = now or utcnow()
    return [
        (int(r), int(a))
        for r, a in s.execute(
            select(CodeRun.id, CodeRun.attempts)
            .where(CodeRun.stage == "running", CodeRun.lease_until.is_not(None))
            .where(CodeRun.lease_until < now)
            .order_by(CodeRun.id)
        ).all()
    ]


def take_back(engine, run_id: int, *, holder: str | None = None, expired_only: bool = True) -> bool:
    """A running run back to its queue (its holder silent past its lease, or revoked: `holder`),
    its attempt kept (counted: a third start is never made). False when it is not running (any
    more), still leased (`expired_only`), or held by another."""
    with session_scope(engine) as s:  # the reconciler's (or a revocation's) own step
        q = update(CodeRun).where(CodeRun.id == run_id, CodeRun.stage == "running")
        if expired_only:
            q = q.where(CodeRun.lease_until < utcnow())
        if holder is not None:
            q = q.where(CodeRun.held_by == holder)
        n = s.execute(q.values(stage="queued", held_by="", lease_until=None)).rowcount
    return bool(n)


def held_by(s: Session, holder: str) -> list[int]:
    """The running runs `holder` holds."""
    return [
        int(r)
        for r in s.execute(
            select(CodeRun.id).where(CodeRun.stage == "running", CodeRun.held_by == holder)
        ).scalars()
    ]


def figures(s: Session, now=None) -> dict[str, dict]:
    """Per pool what an autoscaler reads: the runs waiting (`depth`), the oldest one's age in
    seconds (`oldest_age_seconds`, 0 when none waits), the runs running (`running`), and each
    competition's depth (`competitions`). Grouped queries over the queue's index."""
    now = now or utcnow()
    out: dict[str, dict] = {}
    rows = s.execute(
        select(CodeRun.pool, CodeRun.competition_id, func.count(), func.min(CodeRun.created_at))
        .where(CodeRun.stage == "queued")
        .group_by(CodeRun.pool, CodeRun.competition_id)
    ).all()
    for pool, cid, n, oldest in rows:
        f = out.setdefault(pool, _empty())
        f["depth"] += int(n)
        f["competitions"][str(cid)] = int(n)
        age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
        f["oldest_age_seconds"] = round(max(f["oldest_age_seconds"], age), 3)
    for pool, n in s.execute(
        select(CodeRun.pool, func.count()).where(CodeRun.stage == "running").group_by(CodeRun.pool)
    ).all():
        out.setdefault(pool, _empty())["running"] = int(n)
    return out


def figures_empty() -> dict:
    """A pool's figures when nothing waits or runs in it."""
    return _empty()


def _empty() -> dict:
    return {"depth": 0, "oldest_age_seconds": 0.0, "running": 0, "competitions": {}}
