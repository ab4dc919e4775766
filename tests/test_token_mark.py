"""A bearer token's last use is written at most once a minute: a stream of API reads does not
write and commit a row each, and a token used after a pause gets its new mark."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session
from webkit import engine_of, make_user

from server.domain.accounts import TOKEN_MARK_EVERY, create_token, user_for_token
from server.models import ApiToken, User, utcnow


def test_a_tokens_last_use_is_written_at_most_once_a_minute(app):
    make_user(app, "reader@x.org", team="readers")
    eng = engine_of(app)
    with Session(eng) as s:
        from sqlmodel import select

        user = s.exec(select(User).where(User.email == "reader@x.org")).one()
        tok, plaintext = create_token(s, user=user)
        s.commit()
        tid, uid = tok.id, user.id

    def use():  # what every bearer-token request does first
        with Session(eng) as s:
            return user_for_token(s, plaintext).id

    def mark():
        with Session(eng) as s:
            return s.get(ApiToken, tid).last_used_at

    assert mark() is None
    assert use() == uid
    first = mark()
    assert first is not None
    for _ in range(5):  # within the minute: no new mark
        assert use() == uid
    assert mark() == first
    # a minute later: marked again
    with Session(eng) as s:
        t = s.get(ApiToken, tid)
        t.last_used_at = utcnow() - TOKEN_MARK_EVERY - timedelta(seconds=1)
        s.add(t)
        s.commit()
    before = mark()
    assert use() == uid
    assert mark() > before + TOKEN_MARK_EVERY


def test_on_postgresql_the_mark_goes_with_the_requests_commit_or_after_it_ends(pg_app):
    """On PostgreSQL a request that commits (an action: an upload) writes the token's mark in its
    own transaction, one statement and no commit of its own; one that commits nothing (a read, a
    refused action) writes it in a transaction of its own once its transaction has ended."""
    from sqlalchemy import event, text

    from server.db import transaction

    make_user(pg_app, "writer@x.org", team="writers")
    eng = engine_of(pg_app)
    with Session(eng) as s:
        from sqlmodel import select

        user = s.exec(select(User).where(User.email == "writer@x.org")).one()
        tok, plaintext = create_token(s, user=user)
        s.commit()
        tid = tok.id

    def mark():
        with Session(eng) as s:
            return s.get(ApiToken, tid).last_used_at

    def due():
        with eng.begin() as c:
            c.execute(text("UPDATE apitoken SET last_used_at = NULL"))

    commits = []

    def count(conn):
        commits.append(1)

    event.listen(eng, "commit", count)
    try:
        # an action that writes: one commit in all, the mark in it
        with Session(eng) as s:
            user_for_token(s, plaintext)
            with transaction(s):
                s.execute(text("UPDATE team SET name = name"))
        assert mark() is not None and len(commits) == 1, commits
        # a read: the mark once its transaction has ended, in a commit of its own
        due()
        commits.clear()
        with Session(eng) as s:
            user_for_token(s, plaintext)
            s.execute(text("SELECT 1"))
            assert mark() is None  # not while the request's transaction is open
        assert mark() is not None and len(commits) == 1, commits
        # a refused action: rolled back, and the mark kept
        due()
        commits.clear()
        with Session(eng) as s:
            user_for_token(s, plaintext)
            try:
                with transaction(s):
                    s.execute(text("UPDATE team SET name = 'refused'"))
                    raise LookupError("refused")
            except LookupError:
                pass
        assert mark() is not None and len(commits) == 1, commits
        with Session(eng) as s:
            assert s.execute(text("SELECT count(*) FROM team WHERE name = 'refused'")).scalar() == 0
    finally:
        event.remove(eng, "commit", count)
