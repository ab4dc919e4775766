"""Throttling of sign-in, registration and reset requests with Flask-Limiter.

The counters live in the Redis the server already has (REDIS_URL, or the embedded server's unix
socket), so every gunicorn worker and every process behind one address shares them. Only where no
Redis is configured or running (a bare development app, the unit tests) are they kept in the
process's memory, which the log says; if the Redis goes away, Flask-Limiter falls back to memory
instead of failing the request.
"""

from __future__ import annotations

import hashlib
import logging

from flask import Flask, current_app, request
from flask_limiter import Limiter
from werkzeug.middleware.proxy_fix import ProxyFix

from server.auth import current_user
from server.embedded import EmbeddedRedis

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
    log.warning(
        "no Redis configured or running: sign-in throttling counts in this process's memory only"
    )
    return "memory://"


def address() -> str:
    return "addr:" + (request.remote_addr or "unknown")


def _digest(text: str) -> str:  # the counters' keys name no email in clear
    return hashlib.sha256(text.strip().lower().encode("utf-8")).hexdigest()[:32]


def account() -> str:
    """The account a sign-in attempt is for: the form's email, or the signed-in user for a password
    change."""
    email = request.form.get("email")
    if email is None and current_user() is not None:
        email = current_user().email
    return "acct:" + _digest(email or "")


def mailbox() -> str:
    return "mail:" + _digest(request.form.get("email", ""))


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
    app.config.setdefault("RATELIMIT_KEY_PREFIX", "palimpsest")
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", True)
    limiter = Limiter(
        key_func=address,
        strategy="fixed-window",
        in_memory_fallback_enabled=True,
        swallow_errors=True,
    )
    limiter.init_app(app)
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
        views[endpoint] = limiter.limit(
            _setting("account_limit_email"), key_func=mailbox, methods=post, scope="mailbox"
        )(
            limiter.limit(
                _setting("account_limit_address"),
                key_func=address,
                methods=post,
                scope="account-address",
            )(views[endpoint])
        )
