"""The Palimpsest web server. `create_app()` is the factory (gunicorn: "server:create_app()").

Importing this package stays light: Flask and the database load when an app is built.
"""

from __future__ import annotations


def create_app(test_config: dict | None = None):
    """Build the Flask app from the environment, then `test_config` overrides."""
    # Flask and the database load when an app is built: `import server` stays light
    from server.app import build_app

    return build_app(test_config)
