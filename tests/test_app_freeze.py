"""A served process's app: the objects alive once `create_app` has built it are frozen out of the
collector's full collections (`gc.freeze`), where tests, which build many apps in one process,
keep the collector as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import gc, json, sys
from server import create_app
from server.migrate import upgrade
from server.settings import Settings
home, env = sys.argv[1], sys.argv[2]
upgrade(Settings.from_env(home=home, env=env))
before = gc.get_freeze_count()
create_app({"home": home, "env": env})
print(json.dumps({"before": before, "after": gc.get_freeze_count()}))
"""


def _freeze_counts(tmp_path, env: str) -> dict:
    home = tmp_path / env
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    environ["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(home), env],
        env=environ,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_served_app_freezes_what_it_built_and_a_test_app_does_not(tmp_path):
    served = _freeze_counts(tmp_path, "development")
    assert served["before"] == 0
    # the modules, the app, its blueprints and templates' environment: many thousands of objects
    assert served["after"] > 10_000, served
    testing = _freeze_counts(tmp_path, "testing")
    assert testing == {"before": 0, "after": 0}, testing
