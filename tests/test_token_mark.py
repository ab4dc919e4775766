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
