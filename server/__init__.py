"""The Palimpsest web server. `create_app()` is the factory (gunicorn: "server:create_app()").

Importing this package stays light: Flask and the database load when an app is built.
"""

from __future__ import annotations

import gc


def create_app(test_config: dict | None = None):
    """Build the Flask app from the environment, then `test_config` overrides."""
    # Flask and the database load when an app is built: `import server` stays light
    from server.app import build_app

    app = build_app(test_config)
    if app.extensions["palimpsest.settings"].env != "testing":
        # a served process builds one app and keeps it (and the modules it loaded) for good: the
        # objects alive now move to the collector's permanent generation, so that each full
        # collection no longer walks them (a quarter of a cold 2,000-row board's CPU measured
        # there; docs/benchmarks.md). Tests build many apps in one process: not there
        gc.freeze()
    return app
