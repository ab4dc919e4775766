"""The web side: pages, teams, leaderboards and organizer controls, with CSRF and error pages."""

from __future__ import annotations

from flask import Flask, current_app, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect
from sqlalchemy.exc import DBAPIError

from server.boards.leaderboard import RenderCache, SharedRenders
from server.jobs.queue import connect as redis_connect
from server.statuses import HANDLED, MAYBE_DISK_FULL, as_disk_full, describe
from server.web import (
    auth,
    campaigns,
    competitions,
    input_guard,
    leaderboard,
    multipart,
    organizer,
    pages,
    roles,
    runs,
    task_changes,
    teams,
    throttle,
)
from server.web.refusals import refusal

csrf = CSRFProtect()


def _size(n: int) -> str:
    return f"{n} bytes ({n / 2**20:.1f} MiB)" if n >= 2**20 else f"{n} bytes ({n / 1000:.0f} kB)"


def too_large_message() -> str:
    """Why a request got a 413, naming the limit it hit: the whole upload (MAX_CONTENT_LENGTH), one
    form field such as a description (MAX_FORM_MEMORY_SIZE) or the number of form parts."""
    cfg = current_app.config
    upload = cfg.get("MAX_CONTENT_LENGTH")
    field = cfg.get("MAX_FORM_MEMORY_SIZE")
    parts = cfg.get("MAX_FORM_PARTS")
    length = request.content_length
    if upload and (length is None or length > upload):
        return (
            "The upload is too large: the limit for a whole request, its file included, is "
            f"{_size(upload)}. Compress the file (.gz or .zip) or ask the organizers."
        )
    said = []
    if field:
        said.append(
            f"a text field (such as the description) is over the limit of {_size(field)} for one "
            "field; descriptions are meant to be a few paragraphs"
        )
    if parts:
        said.append(f"the form has more than {parts:,} parts")
    return "The form is too large: " + (" or ".join(said) or "it is over a limit") + "."


def _shared_renders(app: Flask) -> SharedRenders | None:
    """The boards' renders shared by every process and machine of the site through its Redis
    (`PALIMPSEST_SHARED_RENDERS`: False keeps them per process)."""
    if not app.config.get("PALIMPSEST_SHARED_RENDERS", True):
        return None
    settings = app.extensions["palimpsest.settings"]

    def connect():
        return redis_connect(settings)

    return SharedRenders(connect, f"{settings.sqlalchemy_url()}|{settings.secret_key}")


def init_web(app: Flask) -> None:
    """Register the blueprints, CSRF protection (every form; not the token-only API) and the
    caches."""
    # CSRF is checked here for everything but /api: the API accepts only bearer tokens, never
    # cookies, so a cross-site page cannot borrow a session there.
    input_guard.init_app(app, auth.is_api_request)
    multipart.install()  # an upload's boundaries found without a pattern compiled per request
    app.config.setdefault("WTF_CSRF_CHECK_DEFAULT", False)
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # the token lives as long as the session
    csrf.init_app(app)

    @app.before_request
    def _csrf():
        if (
            request.method in ("POST", "PUT", "PATCH", "DELETE")
            and not auth.is_api_request()
            and app.config.get("WTF_CSRF_ENABLED", True)
        ):
            csrf.protect()

    auth.init_app(app)
    app.extensions["palimpsest.lbcache"] = RenderCache(
        shared=_shared_renders(app),
        interval=app.extensions["palimpsest.settings"].board_refresh_seconds,
    )
    app.extensions["palimpsest.lbbuilt"] = leaderboard.BuiltBoards()
    app.register_blueprint(auth.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(competitions.bp)
    app.register_blueprint(teams.bp)
    app.register_blueprint(leaderboard.bp)
    app.register_blueprint(organizer.bp)
    app.register_blueprint(roles.bp)  # roles and invitations
    app.register_blueprint(campaigns.bp)  # assessment campaigns
    app.register_blueprint(runs.bp)  # systems run blind
    app.register_blueprint(task_changes.bp)  # tasks that change: texts, versions, archiving

    @app.route("/favicon.ico")
    def _favicon():
        # browsers ask for /favicon.ico whatever the page links; answer it rather than 404
        return app.send_static_file("favicon.ico"), 200, {"Cache-Control": "public, max-age=86400"}

    throttle.init_app(app)  # after the blueprints: it wraps the account views

    @app.errorhandler(429)
    def _too_many(e):
        msg = (
            "Too many attempts from here or for this account: wait a while (the Retry-After header "
            "says how long) and try again, or reset your password."
        )
        if auth.is_api_request() or not request.accept_mimetypes.accept_html:
            return {"error": {"code": "too_many_requests", "message": msg}}, 429
        return render_template("error.html", code=429, message=msg), 429

    @app.errorhandler(413)
    def _too_large(e):
        msg = too_large_message()
        if auth.is_api_request() or not request.accept_mimetypes.accept_html:
            return {"error": {"code": "too_large", "message": msg}}, 413
        return render_template("error.html", code=413, message=msg), 413

    @app.errorhandler(CSRFError)
    def _csrf_error(e):
        return render_template(
            "error.html",
            code=400,
            message="The form expired or did not come from this site; reload the page "
            "and try again.",
        ), 400

    for code, name, message in (
        (403, "forbidden", "You may not do that."),
        (404, "not_found", "Nothing here (or nothing you may see)."),
        (405, "method_not_allowed", "Method not allowed."),
    ):

        def handler(e, code=code, name=name, message=message):
            # a view's own words (abort(403, "...")) win over the generic ones
            said = getattr(e, "description", None)
            if said and said != type(e).description:
                message = said
            if auth.is_api_request():
                return {"error": {"code": name, "message": message}}, code
            return refusal(code, message)

        app.register_error_handler(code, handler)

    def _named_error(e):
        """A named failure no page caught: its status from the table the API uses
        (server.statuses)."""
        status, code, message, _ = describe(e)
        if auth.is_api_request():
            return {"error": {"code": code, "message": message}}, status
        return refusal(status, message)

    for cls in HANDLED:
        app.register_error_handler(cls, _named_error)

    def _maybe_disk_full(e: Exception):
        """A full disk (an OSError or a database error saying so): 507 naming it; any other is
        the server's failure (500, logged)."""
        full = as_disk_full(e)
        if full is None:
            raise e
        return _named_error(full)

    for cls in (*MAYBE_DISK_FULL, DBAPIError):
        app.register_error_handler(cls, _maybe_disk_full)

    security_headers = [
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        (
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    ]

    @app.after_request
    def _headers(resp):
        # a page with a policy of its own (the API docs) keeps it, and gets the other headers
        for k, v in security_headers:
            resp.headers.setdefault(k, v)
        return resp
