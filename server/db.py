"""Engine and sessions; SQLite gets WAL and a busy timeout so web and worker can share it."""

from __future__ import annotations

import os
from contextlib import contextmanager

from sqlalchemy import event, select, text
from sqlmodel import Session, create_engine

from server import models  # noqa: F401  (registers the tables)

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
            eng = create_engine(url, pool_pre_ping=True)
        _engines[url] = eng
        _engine_pid[url] = os.getpid()
    return eng


def lock_row(session: Session, model, row_id) -> None:
    """Serialize the actions that check and change what hangs on one row (a team's members, a
    competition's owners) until the session's transaction ends: `SELECT ... FOR UPDATE` of the row
    on PostgreSQL; on SQLite the database's write lock, taken with `BEGIN IMMEDIATE` before the
    action reads what it checks (a transaction that wrote already holds it). Take it before the
    reads the action's rule depends on."""
    if session.get_bind().dialect.name == "sqlite":
        session.flush()
        dbapi = session.connection().connection.dbapi_connection
        if not dbapi.in_transaction:  # pysqlite began none: no write yet, only reads
            session.execute(text("BEGIN IMMEDIATE"))
        return
    session.execute(select(model.id).where(model.id == row_id).with_for_update())


@contextmanager
def session_scope(engine):
    """A session that commits on success and rolls back on error."""
    with Session(engine, expire_on_commit=False) as s:
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
        g.db = Session(current_app.extensions["palimpsest.engine"], expire_on_commit=False)
    return g.db


def close_db(_exc: BaseException | None = None) -> None:
    """Close the request's session, if it opened one (registered on the app's teardown)."""
    from flask import g  # here: the local commands open the database without Flask

    s = g.pop("db", None)
    if s is not None:
        s.close()
