"""Throttling of sign-in, registration and reset requests with Flask-Limiter.

The counters live in the Redis the server already has (REDIS_URL, or the embedded server's unix
socket), so every gunicorn worker and every process behind one address shares them. Where no
Redis is configured or running, and while the configured one is away, they are kept in the
database (`DatabaseStorage`, the `throttlecount` table), which every process shares too: a
worker's memory would let each gunicorn worker count apart.
"""

from __future__ import annotations

import hashlib
import logging
import random
from datetime import datetime, timedelta

from flask import Flask, current_app, request
from flask_limiter import Limiter
from limits.storage import Storage
from limits.strategies import FixedWindowRateLimiter
from sqlalchemy import case, delete, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from werkzeug.middleware.proxy_fix import ProxyFix

from server.db import get_engine
from server.domain.emails import lookup_form
from server.jobs.embedded import EmbeddedRedis
from server.models import ThrottleCount, utcnow
from server.web.auth import current_user

log = logging.getLogger("palimpsest.throttle")


def storage_uri(settings) -> str:
    """PALIMPSEST_RATELIMIT_STORAGE, else REDIS_URL, else the embedded Redis when it answers, else
    memory."""
    if settings.ratelimit_storage:
        return settings.ratelimit_storage
    if settings.redis_url:
        url = settings.redis_url
        return "redis+unix://" + url[len("unix://") :] if url.startswith("unix://") else url

    embedded = EmbeddedRedis(settings.home)
    if embedded.alive():
        return f"redis+unix://{embedded.socket}"
    log.warning("no Redis configured or running: sign-in throttling counts in the database")
    return DB_SCHEME + "://"


DB_SCHEME = "palimpsest-db"
_EPOCH = datetime(1970, 1, 1)


class DatabaseStorage(Storage):
    """Fixed-window counters in the database (one row per limit, key and window), shared by every
    process that uses the database: what the throttle counts in while no Redis answers. An
    increment is one atomic upsert (`INSERT ... ON CONFLICT DO UPDATE ... RETURNING`); a window
    that ran out starts again at the increment."""

    STORAGE_SCHEME = [DB_SCHEME]

    def __init__(self, uri: str | None = None, database_url: str = "", **options):
        super().__init__(uri, **options)
        self.engine = get_engine(database_url)

    @property
    def base_exceptions(self):
        return ()

    def _insert(self):
        return pg_insert if self.engine.dialect.name == "postgresql" else sqlite_insert

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        now = utcnow()
        ends = now + timedelta(seconds=expiry)
        ins = self._insert()(ThrottleCount).values(key=key[:255], count=amount, expires_at=ends)
        table = ThrottleCount.__table__
        over = table.c.expires_at <= now
        stmt = ins.on_conflict_do_update(
            index_elements=["key"],
            set_={
                "count": text_case(over, amount, table.c.count + amount),
                "expires_at": text_case(over, ends, table.c.expires_at),
            },
        ).returning(table.c.count)
        with self.engine.begin() as c:
            n = c.execute(stmt).scalar_one()
            if random.random() < 0.01:  # now and then the windows that ran out go
                c.execute(delete(ThrottleCount).where(ThrottleCount.expires_at < now))
        return int(n)

    def _row(self, key: str):
        with self.engine.connect() as c:
            return c.execute(
                select(ThrottleCount.count, ThrottleCount.expires_at).where(
                    ThrottleCount.key == key[:255], ThrottleCount.expires_at > utcnow()
                )
            ).first()

    def get(self, key: str) -> int:
        row = self._row(key)
        return 0 if row is None else int(row[0])

    def get_expiry(self, key: str) -> float:
        row = self._row(key)
        ends = utcnow() if row is None else row[1]
        return (ends - _EPOCH).total_seconds()

    def check(self) -> bool:
        try:
            with self.engine.connect() as c:
                c.execute(text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001
            return False

    def reset(self) -> int | None:
        with self.engine.begin() as c:
            return c.execute(delete(ThrottleCount)).rowcount

    def clear(self, key: str) -> None:
        with self.engine.begin() as c:
            c.execute(delete(ThrottleCount).where(ThrottleCount.key == key[:255]))


def text_case(cond, then, otherwise):
    return case((cond, then), else_=otherwise)


def address() -> str:
    return "addr:" + (request.remote_addr or "unknown")


def _digest(text: str) -> str:  # the counters' keys name no email in clear
    # the address's one form: `ann@x.org.` and `ANN@x.org` count against ann@x.org's limit
    return hashlib.sha256(lookup_form(text).encode("utf-8")).hexdigest()[:32]


def account() -> str:
    """The account a sign-in attempt is for: the form's email, or the signed-in user for a password
    change."""
    email = request.form.get("email")
    if email is None and current_user() is not None:
        email = current_user().email
    return "acct:" + _digest(email or "")


def mailbox() -> str:
    """The address an account mail would go to: the form's, or the API's JSON body's."""
    email = request.form.get("email")
    if email is None:
        body = request.get_json(silent=True)
        email = body.get("email") if isinstance(body, dict) else None
    return "mail:" + _digest(email if isinstance(email, str) else "")


def _setting(name: str):
    return lambda: getattr(current_app.extensions["palimpsest.settings"], name)


def init_app(app: Flask) -> None:
    """One Limiter per app, on the settings' storage; limits on the account routes' POSTs."""
    settings = app.extensions["palimpsest.settings"]
    if settings.proxy_hops:
        app.wsgi_app = ProxyFix(
            app.wsgi_app, x_for=settings.proxy_hops, x_proto=settings.proxy_hops
        )
    uri = storage_uri(settings)
    app.config.setdefault("RATELIMIT_STORAGE_URI", uri)
    if app.config["RATELIMIT_STORAGE_URI"].startswith(DB_SCHEME):
        app.config.setdefault(
            "RATELIMIT_STORAGE_OPTIONS", {"database_url": settings.sqlalchemy_url()}
        )
    app.config.setdefault("RATELIMIT_KEY_PREFIX", "palimpsest")
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", True)
    limiter = Limiter(
        key_func=address,
        strategy="fixed-window",
        in_memory_fallback_enabled=True,
        swallow_errors=True,
    )
    limiter.init_app(app)
    # while the Redis is away the counts go on in the database, shared by every process, not in
    # each process's memory (Flask-Limiter's own fallback); it tries the Redis again now and then
    fallback = DatabaseStorage(database_url=settings.sqlalchemy_url())
    limiter._fallback_storage = fallback
    limiter._fallback_limiter = FixedWindowRateLimiter(fallback)
    app.extensions["palimpsest.limiter"] = limiter
    post = ["POST"]
    views = app.view_functions
    # sign-in: per email and per address; every attempt counts (an atomic increment before the
    # password is checked, so a parallel flood is held to the limit too)
    views["auth.login"] = limiter.limit(
        _setting("login_limit_account"), key_func=account, methods=post, scope="login-account"
    )(
        limiter.limit(
            _setting("login_limit_address"), key_func=address, methods=post, scope="login-address"
        )(views["auth.login"])
    )
    views["auth.password"] = limiter.limit(
        _setting("login_limit_account"), key_func=account, methods=post, scope="login-account"
    )(views["auth.password"])
    for endpoint in ("auth.register", "auth.reset_request"):
        limit_account_mail(app, endpoint)


def limit_account_mail(app: Flask, endpoint: str, per_mailbox: bool = True) -> None:
    """Throttle a view that mails an account's address (register, reset, the API's sign-up) per
    address mailed (`per_mailbox`) and per client, sharing the web's counters: a sign-up over the
    API counts as one on the web does."""
    limiter = app.extensions["palimpsest.limiter"]
    views = app.view_functions
    view = limiter.limit(
        _setting("account_limit_address"),
        key_func=address,
        methods=["POST"],
        scope="account-address",
    )(views[endpoint])
    if per_mailbox:  # one counter per address over every view that mails it
        view = limiter.shared_limit(
            _setting("account_limit_email"), "mailbox", key_func=mailbox, methods=["POST"]
        )(view)
    views[endpoint] = view
