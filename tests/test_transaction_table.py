"""Every way a helper below an action might end the action's transaction is refused, on SQLite,
on PostgreSQL and with PALIMPSEST_ENV=production alike: the session's `commit()`, `rollback()` and
`close()`, its connection's `commit()`, `rollback()` and `close()`, and `COMMIT`, `ROLLBACK`,
`END` or `BEGIN` sent as SQL. Each raises `ForeignTransactionControl` inside the action, the
action rolls back, and the row it wrote before is not there; the same helper outside an action
does what it says (the guard refuses nothing else)."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from conftest import build_schema, fresh_pg_database
from sqlalchemy import select, text
from sqlmodel import Session

from server.db import ForeignTransactionControl, savepoint, transaction
from server.models import Team

# (the way, what it does to the session `s`)
TABLE = {
    "the session's commit()": lambda s: s.commit(),
    "the session's rollback()": lambda s: s.rollback(),
    "the session's close()": lambda s: s.close(),
    "the connection's commit()": lambda s: s.connection().commit(),
    "the connection's rollback()": lambda s: s.connection().rollback(),
    "the connection's close()": lambda s: s.connection().close(),
    "COMMIT as SQL": lambda s: s.execute(text("COMMIT")),
    "ROLLBACK as SQL": lambda s: s.execute(text("ROLLBACK")),
    "END as SQL": lambda s: s.execute(text("END")),
    "BEGIN as SQL": lambda s: s.execute(text("BEGIN")),
}


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def engine(request, tmp_path_factory):
    """An engine of its own (the guard listens on every engine) on a fresh database."""
    from sqlmodel import create_engine

    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path_factory.mktemp('tx') / 'db.sqlite'}"
        else:
            _name, url = stack.enter_context(fresh_pg_database("palimpsest_tx_"))
        eng = create_engine(url)
        stack.callback(eng.dispose)
        build_schema(eng)
        yield eng


def _there(engine, name: str) -> bool:
    with Session(engine) as s:
        return s.execute(select(Team.id).where(Team.name == name)).first() is not None


@pytest.mark.parametrize("env", ["development", "production"])
def test_every_way_to_end_the_actions_transaction_from_below_is_refused(engine, env, monkeypatch):
    monkeypatch.setenv("PALIMPSEST_ENV", env)
    refused = {}
    for way, end in TABLE.items():
        name = f"tx-{uuid.uuid4().hex[:10]}"
        with Session(engine) as s:
            try:
                with transaction(s):
                    s.add(Team(name=name, invite_code=name))
                    s.flush()
                    end(s)  # a helper below the action
            except ForeignTransactionControl as e:
                refused[way] = str(e)
        assert not _there(engine, name), f"{way}: the action's row stayed ({env})"
    assert set(refused) == set(TABLE), f"not refused: {set(TABLE) - set(refused)}"
    assert all("not issued by it" in why for why in refused.values())


def test_the_action_itself_and_its_savepoints_are_not_refused(engine):
    """The action's own commit, a race loser's savepoint rolled back, a failed flush that the
    action lets go up, and a helper's commit outside any action."""
    from sqlalchemy.exc import IntegrityError

    kept, lost = f"tx-{uuid.uuid4().hex[:10]}", f"tx-{uuid.uuid4().hex[:10]}"
    with Session(engine) as s:
        with transaction(s):
            s.add(Team(name=kept, invite_code=kept))
            s.flush()
            with pytest.raises(IntegrityError):
                with savepoint(s):
                    s.add(Team(name=kept, invite_code=lost))  # the name is taken
                    s.flush()
    assert _there(engine, kept)
    with Session(engine) as s:
        with pytest.raises(IntegrityError):  # not ForeignTransactionControl: the flush's own
            with transaction(s):
                s.add(Team(name=kept, invite_code=lost))
                s.flush()
    with Session(engine) as s:  # outside an action, a commit is a commit
        s.add(Team(name=lost, invite_code=lost))
        s.commit()
    assert _there(engine, lost)


def test_a_failed_sign_up_leaves_no_account(engine, monkeypatch):
    """The account is made in a savepoint (the race for its address), inside the sign-up's
    transaction: when the action fails after it, the account goes with it (a bare savepoint on
    SQLite began and committed a transaction of its own, and the account stayed)."""
    from server.actions import accounts
    from server.models import User

    def fails(*_args, **_kwargs):
        raise RuntimeError("the audit entry could not be written")

    monkeypatch.setattr(accounts, "audit", fails)
    email = f"{uuid.uuid4().hex[:10]}@example.org"
    with Session(engine) as s:
        with pytest.raises(RuntimeError, match="audit entry"):
            accounts.register(s=s, email=email, password="correct horse battery staple")
    with Session(engine) as s:
        assert s.execute(select(User.id).where(User.email == email)).first() is None
