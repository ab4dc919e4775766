"""Accounts without the web: passwords (argon2), API tokens, invite codes, password-reset links,
sessions ended by an epoch, and whose runs a person may see in detail. The web's sign-in pages
(server/web/auth.py), the API's bearer tokens and the local CLI all use these."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from itsdangerous import BadData, URLSafeTimedSerializer
from sqlalchemy import bindparam, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server import models  # other subjects' tables: models.X, loaded when first used
from server.db import before_commit, db, on_rollback, savepoint
from server.domain import audit as audit_log
from server.domain import people
from server.domain.emails import normalize_email
from server.models import ApiToken, User, utcnow

# argon2id at OWASP's recommended minimum (Password Storage Cheat Sheet: 19 MiB, two passes, one
# lane): 22 ms of CPU per hash on the 2-core machine of docs/benchmarks.md, against 166 ms for
# argon2-cffi's default (RFC 9106's low-memory profile: 64 MiB, three passes, four lanes). A hash
# carries its own parameters, so hashes made with the earlier ones still verify; a password set
# from now on gets these.
HASH_PARAMETERS = {"time_cost": 2, "memory_cost": 19456, "parallelism": 1}
hasher = PasswordHasher(**HASH_PARAMETERS)


TOKEN_PREFIX = "pal_"


MIN_PASSWORD = 8


def hash_password(password: str) -> str:
    """An argon2id hash of a password."""
    return hasher.hash(password)


def dummy_hash() -> str:
    """A hash of a random password with the same parameters as real ones: a sign-in for an unknown
    email is checked against it, so that it costs the same time as one for a known email."""
    key = id(hasher)
    if key not in _dummy:
        _dummy.clear()
        _dummy[key] = hasher.hash(secrets.token_urlsafe(16))
    return _dummy[key]


def verify_password(password_hash: str, password: str) -> bool:
    """True when the password matches the stored hash; never raises for a wrong one."""
    try:
        return hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A new API token: (plaintext shown once, its sha256 to store)."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return plaintext, hash_token(plaintext)


def new_invite_code() -> str:
    """A random code; never starting with "-", which a command line would read as an option."""
    while (code := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return code


class EmailTaken(ValueError):
    """create_user's refusal of an email that has an account (never shown on a public page)."""


def create_user(s: Session, *, email: str, password: str, is_admin: bool = False) -> User:
    """A new account; raises ValueError with a message for a bad email, a short password or a
    taken email."""
    email = normalize_email(email)  # BadEmail (a ValueError) says why
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"the password must have at least {MIN_PASSWORD} characters")
    password_hash = hash_password(password)  # before the look-up: a taken email answers as slowly
    if s.exec(select(User).where(User.email == email)).first():
        raise EmailTaken("an account with this email exists already")
    u = User(email=email, password_hash=password_hash, is_admin=is_admin)
    try:
        # the loser of a race for the address (parallel sign-ups): a savepoint rolls back its
        # insert only, and it is told the address is taken, as the look-up above would
        with savepoint(s):
            s.add(u)
            s.flush()
    except IntegrityError:
        raise EmailTaken("an account with this email exists already") from None
    return u


def create_token(s: Session, *, user: User, name: str = "") -> tuple[ApiToken, str]:
    """Store a new token for a user; returns the row and the plaintext (shown once, never
    stored)."""
    plaintext, digest = new_token()
    tok = ApiToken(user_id=user.id, token_sha256=digest, prefix=plaintext[:10], name=name[:120])
    s.add(tok)
    s.flush()
    return tok, plaintext


def user_for_token(s: Session, plaintext: str) -> User | None:
    """The user a live (unrevoked) token belongs to, or None."""
    digest = hash_token(plaintext)
    row = s.exec(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_sha256 == digest)
    ).first()
    tok, user = (None, None) if row is None else row
    if (
        tok is None
        or tok.revoked_at is not None
        or not hmac.compare_digest(tok.token_sha256, digest)
    ):
        return None
    # when it was last used, written at most once a minute (TOKEN_MARK_EVERY), so a stream of
    # reads does not write a row each; not part of what the request does: a request that changes
    # nothing commits nothing for it, and one refused keeps the mark (`_mark_later`)
    now = utcnow()
    if tok.last_used_at is None or now - tok.last_used_at >= TOKEN_MARK_EVERY:
        _mark_later(s, tok.id, now)
    return user


TOKEN_MARK_EVERY = timedelta(minutes=1)


def _mark_later(s: Session, token_id: int, now) -> None:
    """The token's mark, one statement. On PostgreSQL it is written with what the request itself
    commits where it commits (an upload, any action), in its transaction: an upload pays one
    statement for it instead of a transaction of its own (a connection's check, its BEGIN, the
    setting and the COMMIT: four round trips, some 0.8 ms of an upload's CPU, docs/benchmarks.md);
    where the request's transaction ends without a commit (a request that reads only, one
    refused), once it has ended, in a transaction of its own. On SQLite, in a transaction of its
    own at once (a write in the request's transaction would take the database's lock until it
    ends). A transaction of its own is on a connection of the engine, and on PostgreSQL its commit
    is not waited to disk (`synchronous_commit` off for it alone: a crash may lose a mark of the
    last moment, a use's time and nothing else). In the request's transaction the mark is the
    last row it locks (at its commit), so it waits for no other lock while it holds one."""
    args = {"tid": token_id, "now": now, "cut": now - TOKEN_MARK_EVERY}
    bind = s.get_bind()

    def on_its_own() -> None:
        with bind.begin() as own:
            if own.dialect.name == "postgresql":
                own.exec_driver_sql("SET LOCAL synchronous_commit TO off")
            own.execute(_mark_statement(), args)

    if bind.dialect.name != "postgresql":
        on_its_own()
        return

    def with_the_commit() -> None:
        s.flush()  # what the action changed, locked first: the token's row is the last lock
        s.execute(_mark_statement(), args)

    before_commit(s, with_the_commit)
    on_rollback(s, on_its_own)  # the request's transaction ended without a commit


@functools.cache
def _mark_statement():
    """The token's mark: its last use set to `now` unless it was marked after `cut` (by a request
    in parallel)."""
    return (
        update(ApiToken)
        .where(
            ApiToken.id == bindparam("tid"),
            or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at <= bindparam("cut")),
        )
        .values(last_used_at=bindparam("now"))
    )


def audit(s: Session, actor: User | None, action: str, target: str = "", **details) -> None:
    """Record an action in the audit log (in the caller's transaction):
    `server.domain.audit.record`."""
    audit_log.record(s, actor, action, target, **details)


def pw_stamp(user: User) -> str:
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def submission_filter(user: User | None, s: Session | None = None):
    """`can_see_submission` for many submissions: who the user is in each task (organizer, or the
    team's id) is looked up once per task, not once per submission."""
    s = s if s is not None else db()
    per_task: dict[str, tuple[bool, int | None]] = {}

    def sees(sub: models.Submission) -> bool:
        if user is None:
            return False
        if sub.task_id not in per_task:
            per_task[sub.task_id] = (
                people.organizes_task(s, user, sub.task_id),
                people.team_id_for_task(s, user, sub.task_id),
            )
        organizer, team_id = per_task[sub.task_id]
        return organizer or (team_id is not None and team_id == sub.team_id)

    return sees


def can_see_submission(user: User | None, sub: models.Submission, s: Session | None = None) -> bool:
    """A team sees its own submissions' details; the task's organizers see everything; others
    nothing."""
    return submission_filter(user, s)(sub)


def end_sessions(s: Session, user: User) -> None:
    """End every session of this user (the caller commits): cookies carry the old epoch."""
    user.session_epoch = (user.session_epoch or 0) + 1
    s.add(user)


def set_password(s: Session, user: User, password: str) -> None:
    """A new password (checked for length by the caller); ends every earlier session."""
    user.password_hash = hash_password(password)
    end_sessions(s, user)


def signer(secret_key: str, purpose: str):
    return URLSafeTimedSerializer(secret_key, salt=f"palimpsest.{purpose}")


def reset_token(secret_key: str, user: User) -> str:
    return signer(secret_key, "reset").dumps({"u": user.id, "p": pw_stamp(user)})


def user_for_reset_token(s: Session, secret_key: str, token: str, max_age: int) -> User | None:
    try:
        data = signer(secret_key, "reset").loads(token, max_age=max_age)
        user = s.get(User, int(data["u"]))
    except (BadData, KeyError, TypeError, ValueError):
        return None
    if user is None or not hmac.compare_digest(str(data.get("p", "")), pw_stamp(user)):
        return None  # used already (the password changed since), or forged
    return user


def reset_link(settings_, user: User, base_url: str | None = None) -> str:
    base = (base_url or settings_.base_url or "http://127.0.0.1:5000").rstrip("/")
    return f"{base}/auth/reset/{reset_token(settings_.secret_key, user)}"


_dummy: dict[int, str] = {}
