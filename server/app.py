"""The application factory: settings, database, queue, then one blueprint per surface."""

from __future__ import annotations

from flask import Flask

from server import api, models
from server.db import close_db, get_engine
from server.domain.task_sync import TaskSync
from server.jobs import dispatch
from server.migrate import check_at_head
from server.settings import Settings
from server.web.setup import init_web


def build_app(test_config: dict | None = None) -> Flask:
    app = Flask(__name__, template_folder="web/templates", static_folder="web/static")
    overrides = dict(test_config or {})
    names = set(Settings.model_fields)
    settings = Settings.from_env(**{k: v for k, v in overrides.items() if k in names})
    settings.check()
    app.config.update(
        SECRET_KEY=settings.secret_key,
        MAX_CONTENT_LENGTH=settings.max_upload_bytes,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.env == "production",
        TESTING=settings.env == "testing",
    )
    app.config.update({k: v for k, v in overrides.items() if k.isupper()})
    app.extensions["palimpsest.settings"] = settings
    models.load_all()  # the app serves every table: each loads now, not in a first request
    engine = get_engine(settings.sqlalchemy_url())
    check_at_head(engine)  # the schema is Alembic's: `palimpsest db upgrade` (serve runs it itself)
    app.extensions["palimpsest.engine"] = engine
    app.teardown_appcontext(close_db)
    # every request's actions enqueue through the app's queues, after their commit (the embedded
    # Redis, or a test's, when one is set; none where PALIMPSEST_ENQUEUE is off)
    jobs = dispatch.Jobs(
        settings,
        redis=lambda: app.extensions.get("palimpsest.redis"),
        enabled=lambda: app.config.get("PALIMPSEST_ENQUEUE", True),
    )
    app.extensions["palimpsest.session_info"] = {dispatch.KEY: jobs}

    # a web process on a data directory of its own knows the tasks other processes created or
    # changed: their files from the object store (a site without one: nothing to do)
    sync = TaskSync(settings, engine)
    app.extensions["palimpsest.task_sync"] = sync

    @app.before_request
    def know_every_task() -> None:
        sync()

    init_web(app)

    api.init_app(app)
    return app
