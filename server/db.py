"""Engine and sessions; SQLite gets WAL and a busy timeout so web and worker can share it.

Transactions: an action opens the one transaction of its change (`transaction`) and commits it;
nothing below the actions commits. What must follow a commit (enqueueing a job, mail, removing a
file) is registered on the session with `after_commit` and runs only once the commit succeeded;
what must undo a change outside the database (a file written for the action) is registered with
`on_rollback` and runs when the transaction rolls back instead. So a refused or failed action
leaves nothing behind, in the database or on disk.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import weakref
from collections.abc import Callable
from contextlib import contextmanager

from sqlalchemy import bindparam, event, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool
from sqlmodel import Session, create_engine

log = logging.getLogger(__name__)
_AFTER = "palimpsest.after_commit"
_UNDO = "palimpsest.on_rollback"
_BEFORE = "palimpsest.before_commit"

_engines: dict[str, object] = {}
_engine_pid: dict[str, int] = {}


def get_engine(url: str):
    """One engine per URL per process. A forked work horse keeps its parent's engine (and its
    compiled-statement cache) but never its parent's connections."""
    eng = _engines.get(url)
    if eng is not None and _engine_pid.get(url) != os.getpid():
        eng.dispose(
            close=False
        )  # SQLAlchemy's recipe for a fork: drop, don't close, inherited connections
        _engine_pid[url] = os.getpid()
    if eng is None:
        if url.startswith("sqlite"):
            eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

            @event.listens_for(eng, "connect")
            def _pragmas(dbapi_conn, _):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()
        else:
            # a threaded server's requests that queue on one row lock (a team's uploads, one
            # phase's publication) each hold a connection while they wait: SQLAlchemy's default
            # of 5 + 10 made the 16th wait for a connection and fail after 30 s (a 500) under 20
            # parallel uploads of one team; the extra connections are opened only when needed
            # and closed when returned
            eng = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=45)
        _engines[url] = eng
        _engine_pid[url] = os.getpid()
    return eng


def lock_row(session: Session, model, row_id) -> None:
    """Serialize the actions that check and change what hangs on one row (a team's members, a
    competition's owners) until the session's transaction ends: `SELECT ... FOR UPDATE` of the row
    on PostgreSQL; on SQLite the database's write lock, taken with `BEGIN IMMEDIATE` before the
    action reads what it checks (a transaction that wrote already holds it). Take it before the
    reads the action's rule depends on. Nothing is committed."""
    if session.get_bind().dialect.name == "sqlite":
        _sqlite_begin(session)
        return
    key = (model.__tablename__, row_id)
    if key in session.info.get(_LOCKED, ()):  # locked already in this transaction
        return
    session.execute(_lock_statement(model), {"row_id": row_id})
    row_locked(session, model, row_id)


_LOCKED = "palimpsest.locked"


def row_locked(session: Session, model, row_id) -> None:
    """Say that the session's transaction holds the row's lock (a read that took it, `SELECT ...
    FOR UPDATE`, or `lock_row`), so that `lock_row` of the same row does not ask again: a row lock
    is held until the transaction ends. Not within a savepoint, whose rollback may release it."""
    if not session.in_nested_transaction():
        session.info.setdefault(_LOCKED, set()).add((model.__tablename__, row_id))


@functools.cache
def _lock_statement(model):
    """`lock_row`'s statement for a table, built once (the row's id bound at each call)."""
    return select(model.id).where(model.id == bindparam("row_id")).with_for_update()


def _sqlite_begin(session: Session) -> None:
    """On SQLite, open the session's transaction with the write lock unless one is open: pysqlite
    opens one only before a write, so a lock (or a savepoint) taken after reads alone would
    otherwise stand outside any transaction."""
    session.flush()
    dbapi = session.connection().connection.dbapi_connection
    if not dbapi.in_transaction:  # pysqlite began none: no write yet, only reads
        with _issuing(session):  # the action's own BEGIN, not a helper's
            session.execute(text("BEGIN IMMEDIATE"))


@contextmanager
def savepoint(session: Session):
    """A part of the action's transaction that may fail alone: a race's loser (first writer wins)
    catches the error outside this block and reads the winner's row, and the action keeps what it
    did before, its row locks and its hooks (`Session.begin_nested()`). On SQLite the action's
    transaction is opened first (`_sqlite_begin`): pysqlite's outermost SAVEPOINT would otherwise
    begin a transaction of its own, and its release commit it."""
    if session.get_bind().dialect.name == "sqlite":
        _sqlite_begin(session)
    with session.begin_nested():  # the one nested form (tests/test_transaction_guard.py)
        yield session


def after_commit(s: Session, fn: Callable[[], object]) -> None:
    """Run `fn()` once the session's transaction has committed (in the order registered); dropped
    if it rolls back. `fn` must not use the session: it runs between transactions."""
    s.info.setdefault(_AFTER, []).append(fn)


def before_commit(s: Session, fn: Callable[[], object]) -> None:
    """Run `fn()` when the session's outermost transaction is about to commit (in the order
    registered): what must be done before it commits, such as waiting until a file a row names is
    durable. What `fn` raises stops the commit (the transaction then rolls back). Dropped if it
    rolls back."""
    s.info.setdefault(_BEFORE, []).append(fn)


def on_rollback(s: Session, fn: Callable[[], object]) -> None:
    """Run `fn()` if the session's transaction rolls back (in reverse order): the undo of what the
    action did outside the database, such as a file it wrote. Dropped once it commits."""
    s.info.setdefault(_UNDO, []).append(fn)


def _run(fns, what: str) -> None:
    for fn in fns:
        try:
            fn()
        except Exception:  # noqa: BLE001 — the commit (or the rollback) stands; the rest still runs
            log.exception("%s hook %r failed", what, fn)


@event.listens_for(Session, "before_commit")
def _before_commit(s: Session) -> None:
    if s.in_nested_transaction():  # a savepoint's release: not the commit
        return
    for fn in s.info.pop(_BEFORE, []):
        fn()


@event.listens_for(Session, "after_commit")
def _after_commit(s: Session) -> None:
    s.info.pop(_UNDO, None)
    _run(s.info.pop(_AFTER, []), "after-commit")


@event.listens_for(Session, "after_transaction_end")
def _after_transaction_end(s: Session, trans) -> None:
    """The session's outermost transaction ended without a commit (a rollback, or a close with the
    transaction open): nothing of it happens, so its after-commit hooks go and its undo runs."""
    if trans.parent is not None or trans.nested:
        return
    s.info.pop(_LOCKED, None)  # its row locks went with it
    s.info.pop(_AFTER, None)
    s.info.pop(_BEFORE, None)
    _run(reversed(s.info.pop(_UNDO, [])), "rollback")


_ACTIVE = "palimpsest.transaction"
_ISSUING = "palimpsest.transaction.issuing"


class ForeignTransactionControl(RuntimeError):
    """Code inside an action committed, rolled back or closed the action's transaction itself:
    only the action (`transaction`) ends it; a race's loser undoes its own part with a savepoint
    (`savepoint(s)`), a worker's own step runs in a session of its own (`session_scope`)."""


def _refuse(s: Session, what: str) -> None:
    """A commit, rollback or close inside an action that the action did not issue: raised in every
    environment, production included (the action then rolls back: nothing of it stays)."""
    msg = (
        f"{what} inside an action's transaction, not issued by it: only the action ends its "
        "transaction (use a savepoint, server.db.savepoint(s), to undo a part of it)"
    )
    log.error("%s", msg, stack_info=True)
    raise ForeignTransactionControl(msg)


@event.listens_for(Session, "before_commit")
def _guard_commit(s: Session) -> None:
    if s.in_nested_transaction():  # a savepoint's release: the action's own
        return
    if s.info.get(_ACTIVE) and not s.info.get(_ISSUING):
        _refuse(s, "a commit")


@event.listens_for(Session, "after_soft_rollback")
def _guard_rollback(s: Session, previous) -> None:
    # a savepoint's rollback (the race loser's) and a failed flush's inner one are the action's own
    if previous.nested or previous.parent is not None:
        return
    if s.info.get(_ACTIVE) and not s.info.get(_ISSUING):
        _refuse(s, "a rollback")


# The same guard at the connection, for what passes the session by: the connection's own
# `commit()`, `rollback()` or `close()`, and a `COMMIT`, `ROLLBACK`, `END`, `ABORT` or `BEGIN`
# sent as SQL. The connection an action's session uses carries a weak reference to that session
# from its transaction's start until it goes back to the pool.
_OWNER = "palimpsest.session"
_ENDS = re.compile(r"\s*(COMMIT|END|ABORT|BEGIN|START\s+TRANSACTION|ROLLBACK(?!\s+TO\b))\b", re.I)


@event.listens_for(Session, "after_begin")
def _own_connection(s: Session, _trans, connection) -> None:
    connection.info[_OWNER] = weakref.ref(s)


@event.listens_for(Pool, "checkin")
def _release_connection(_dbapi, record) -> None:
    if record is not None:
        record.info.pop(_OWNER, None)


def _acting(conn) -> Session | None:
    """The session whose open action's transaction the connection carries, unless the action (or
    a failed flush of it, which rolls back the transaction it raises from) is the one acting."""
    ref = conn.info.get(_OWNER)
    s = ref() if ref is not None else None
    if s is None or not s.info.get(_ACTIVE) or s.info.get(_ISSUING):
        return None
    return None if getattr(s, "_flushing", False) else s


@event.listens_for(Engine, "commit")
def _guard_connection_commit(conn) -> None:
    if (s := _acting(conn)) is not None:
        _refuse(s, "a commit of the connection")


@event.listens_for(Engine, "rollback")
def _guard_connection_rollback(conn) -> None:
    # the connection's rollback(), and its close() or the session's close(), which roll back
    if (s := _acting(conn)) is not None:
        _refuse(s, "a rollback or close of the connection")


@event.listens_for(Engine, "before_cursor_execute")
def _guard_sql(conn, _cursor, statement, _params, _context, _many) -> None:
    if _ENDS.match(statement) and (s := _acting(conn)) is not None:
        _refuse(s, f"{statement.strip().split()[0].upper()} sent as SQL")


@contextmanager
def _issuing(s: Session):
    s.info[_ISSUING] = True
    try:
        yield
    finally:
        s.info.pop(_ISSUING, None)


@contextmanager
def transaction(s: Session):
    """The one transaction of an action on the session `s`: committed when the block ends, rolled
    back (with its rollback hooks) on any error, the refusals included. Inside another (an action
    that calls another) it joins the outer one, which alone commits. An error that says it
    `keeps_record` (a queue found unreachable, recorded as such) commits what the action wrote,
    then goes up. While it is open, a commit or rollback on `s` that it did not issue is refused
    (`ForeignTransactionControl`)."""
    if s.info.get(_ACTIVE):
        yield s
        return
    s.info[_ACTIVE] = True
    try:
        yield s
        with _issuing(s):
            s.commit()
    except BaseException as e:
        with _issuing(s):
            if getattr(e, "keeps_record", False):  # a failure the action recorded: kept
                try:
                    s.commit()
                except BaseException:
                    s.rollback()
                    raise
            else:
                s.rollback()
        raise
    finally:
        s.info.pop(_ACTIVE, None)


@contextmanager
def session_scope(engine, info: dict | None = None):
    """A session that commits on success and rolls back on error (`info`: what it carries, such
    as its queues: server.jobs.dispatch)."""
    with Session(engine, expire_on_commit=False, info=dict(info or {})) as s:
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


def db() -> Session:
    """The request's database session, opened on first use and closed at teardown."""
    from flask import current_app, g  # here: the local commands open the database without Flask

    if "db" not in g:
        g.db = Session(
            current_app.extensions["palimpsest.engine"],
            expire_on_commit=False,
            # what the app binds to every session: its queues (server.jobs.dispatch)
            info=dict(current_app.extensions.get("palimpsest.session_info", {})),
        )
    return g.db


def close_db(_exc: BaseException | None = None) -> None:
    """Close the request's session, if it opened one (registered on the app's teardown)."""
    from flask import g  # here: the local commands open the database without Flask

    s = g.pop("db", None)
    if s is not None:
        s.close()
