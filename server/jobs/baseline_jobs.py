"""The baselines queue's run job: a worker with the models (a GPU machine: `palimpsest worker
--queue baselines`) writes one baseline's submission file and records it like any team's upload.

The job never writes a score: `record_baseline` goes through the upload's one intake (the action
`submit`), which stores the file, commits the row and enqueues its scoring job on the scoring queue.
"""

from __future__ import annotations

import logging
import tempfile

from baselines.errors import BaselineError
from baselines.run import plan, run_baselines
from baselines.systems import Options
from server import objectstore
from server.actions.baselines import record_baseline
from server.domain.baselines import server_settings
from server.jobs.queue import connect, enqueue_baseline_run
from server.settings import get_settings

log = logging.getLogger(__name__)


def run_baseline(task_id: str, system: str, options: dict, phases: list[str] | None = None) -> dict:
    """Run `system` on `task_id` with `options` (baselines.systems.Options fields) and record it."""
    settings = get_settings()
    opts = Options(**{**options, "progress": False})
    runs = settings.home / "baselines" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    objectstore.ensure_task(settings, task_id)  # a worker on another machine: from the store
    # a directory of its own: two runs of one system with other options never share a file; once
    # recorded, the file lives on in the content-addressed uploads
    with tempfile.TemporaryDirectory(dir=runs) as out_dir:
        (result,) = run_baselines(
            [task_id],
            [system],
            opts,
            out_dir,
            settings.home,
            log=lambda m: log.warning("baseline job: %s", m),
        )
        recorded = record_baseline(result, phases=phases, settings=settings)
    primary = result["scores"]["primary"]
    return {
        "task": task_id,
        "system": system,
        "model": result["model"],
        "seconds": result["seconds"],
        "device": result["device"],
        "test_primary": {k: primary.get(k) for k in ("name", "subset", "value")},
        "recorded": recorded,
    }


def enqueue_baselines(
    task_ids: list[str] | None = None,
    systems: list[str] | None = None,
    options: Options | None = None,
    home=None,
    phases: list[str] | None = None,
) -> list[dict]:
    """Put each asked-for (task, system) run on the baselines queue of the server at `home` (or
    REDIS_URL), for `palimpsest worker --queue baselines` on a machine with the models (as code
    runs of the baselines team instead: server.actions.code_runs.enqueue_baseline_systems)."""
    options = options or Options()
    settings = server_settings(home)
    runs, _notes = plan(
        task_ids, systems, options, settings.home, here=False
    )  # models: the worker's
    opts = options.job_args()
    try:
        conn = connect(settings)
        conn.ping()
    except Exception as e:  # noqa: BLE001 - any failure to reach Redis
        where = (
            settings.redis_url
            or f"the embedded Redis of {settings.home} (is `palimpsest serve` running?)"
        )
        raise BaselineError(f"cannot reach the queue at {where}: {e}") from None
    jobs = []
    for task_id, system in runs:
        job = enqueue_baseline_run(conn, task_id, system, opts, settings, phases)
        status = job.get_status(refresh=False)
        jobs.append(
            {
                "task": task_id,
                "system": system,
                "job": job.id,
                "status": getattr(status, "value", status) or "queued",
            }
        )
    return jobs
