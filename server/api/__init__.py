"""The REST API (`/api/v1`, JSON): token authentication only, JSON errors with every problem.

Every operation is declared with `@op` (server/api/openapi.py): its request and answer models
(server/api_models/), from which `/api/v1/openapi.json` is generated and `/api/docs` shows it.
Every error is `{"error": {"code": ..., "message": ..., ...}}` with the status server.statuses gives
the failure (the web pages use the same table); validation failures add `problems` (each with
`line`, `id`, `message`) and `total`. Every list is a page: `items`, `next_cursor`, `next`.
State changes go through server.domain.lifecycle (submissions, phases, boards) and
server.domain.teams.
"""

from __future__ import annotations

import os

import flask_swagger_ui
from flask import Blueprint, Response, current_app, jsonify, send_from_directory

# each module's routes register on the blueprint when it is imported
from server.api import (  # noqa: F401
    accounts,
    announcements,
    baselines,
    campaigns,
    competitions,
    phases,
    registrations,
    roles,
    run_workers,
    runs,
    submissions,
    task_changes,
    tasks,
    teams,
)
from server.api.common import bp
from server.api.openapi import op, spec
from server.web import throttle

# ----------------------------------------------------------------------------- the description


@bp.get("/openapi.json")
@op(
    "This description (OpenAPI 3.1), generated from the declared models",
    responses={200: "application/json"},
    public=True,
    tags=("api",),
)
def openapi():
    cached = current_app.extensions.get("palimpsest.openapi")
    if cached is None:
        cached = current_app.extensions["palimpsest.openapi"] = spec(current_app)
    return jsonify(cached)


DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'"
)


def _docs_blueprint() -> Blueprint:
    """`/api/docs`: Swagger UI from the assets the flask-swagger-ui package ships (no network), on
    this server's description; the start-up script is a file, so the page's CSP needs no inline
    script."""
    dist = os.path.join(os.path.dirname(flask_swagger_ui.__file__), "dist")
    docs = Blueprint("apidocs", __name__, url_prefix="/api/docs")

    page = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Palimpsest API</title>
<link rel="stylesheet" href="/api/docs/swagger-ui.css">\
<link rel="icon" href="/api/docs/favicon-32x32.png">
</head><body><div id="swagger-ui"></div>
<script src="/api/docs/swagger-ui-bundle.js"></script><script src="/api/docs/init.js"></script>
</body></html>"""
    init = """window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({url: '/api/v1/openapi.json', dom_id: '#swagger-ui', \
deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout'});
});"""

    @docs.get("/")
    def index():
        return Response(page, mimetype="text/html", headers={"Content-Security-Policy": DOCS_CSP})

    @docs.get("/init.js")
    def init_js():
        return Response(init, mimetype="text/javascript")

    @docs.get("/<path:name>")
    def asset(name):
        return send_from_directory(dist, name, max_age=3600)

    return docs


def init_app(app) -> None:
    """Register the API (CSRF does not apply: it takes bearer tokens only, never cookies) and its
    docs page."""
    app.register_blueprint(bp)
    app.register_blueprint(_docs_blueprint())
    # signing up mails an address: throttled as the web's registration, on the same counters
    throttle.limit_account_mail(app, "api.signup")
    # finishing mails nothing: counted per client (its token is the address's proof)
    throttle.limit_account_mail(app, "api.signup_finish", per_mailbox=False)
