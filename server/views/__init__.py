"""The web side: pages, teams, leaderboards and organizer controls, with CSRF and error pages."""

from __future__ import annotations

from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect

csrf = CSRFProtect()


def init_web(app: Flask) -> None:
    """Register the blueprints, CSRF protection (every form; not the token-only API) and the caches."""
    from server import auth
    from server.leaderboard import RenderCache
    from server.views import leaderboard, organizer, pages, teams

    # CSRF is checked here for everything but /api: the API accepts only bearer tokens, never
    # cookies, so a cross-site page cannot borrow a session there.
    app.config.setdefault("WTF_CSRF_CHECK_DEFAULT", False)
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # the token lives as long as the session
    csrf.init_app(app)

    @app.before_request
    def _csrf():
        if request.method in ("POST", "PUT", "PATCH", "DELETE") and not auth.is_api_request() \
                and app.config.get("WTF_CSRF_ENABLED", True):
            csrf.protect()

    auth.init_app(app)
    app.extensions["palimpsest.lbcache"] = RenderCache()
    app.register_blueprint(auth.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(teams.bp)
    app.register_blueprint(leaderboard.bp)
    app.register_blueprint(organizer.bp)

    @app.errorhandler(413)
    def _too_large(e):
        limit = app.config.get("MAX_CONTENT_LENGTH") or 0
        msg = (f"The upload is too large: the limit is {limit} bytes ({limit / 2**20:.1f} MiB). "
               "Compress the file (.gz or .zip) or ask the organizers.")
        if auth.is_api_request() or not request.accept_mimetypes.accept_html:
            return {"error": {"code": "too_large", "message": msg}}, 413
        return render_template("error.html", code=413, message=msg), 413

    @app.errorhandler(CSRFError)
    def _csrf_error(e):
        return render_template("error.html", code=400,
                               message="The form expired or did not come from this site; reload the page "
                                       "and try again."), 400

    for code, message in ((403, "You may not do that."), (404, "Nothing here (or nothing you may see)."),
                          (405, "Method not allowed.")):
        def handler(e, code=code, message=message):
            if auth.is_api_request():
                return {"error": {"code": code, "message": message}}, code
            return render_template("error.html", code=code, message=message), code

        app.register_error_handler(code, handler)

    from server.errors import HANDLED, describe

    def _named_error(e):
        """A named failure no page caught: its status from the table the API uses (server.errors)."""
        status, code, message, _ = describe(e)
        if auth.is_api_request():
            return {"error": {"code": code, "message": message}}, status
        return render_template("error.html", code=status, message=message), status

    for cls in HANDLED:
        app.register_error_handler(cls, _named_error)

    security_headers = [
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    ]

    @app.after_request
    def _headers(resp):
        if "Content-Security-Policy" not in resp.headers:
            resp.headers.extend(security_headers)
        return resp
