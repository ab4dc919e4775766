"""The boards' renders off the request path: a view that finds its board due for the next render
(`board_refresh_seconds` passed since the last) serves the last one and queues this job on the
`boards` queue (one waiting per board, format and audience); a worker renders the board as the
view would have and puts it in the site's shared renders (`server.boards.render_cache`), where
every web process finds it.

The job runs in the worker's own process, not a forked horse (`server.jobs.worker`), with a web
app built once there (`warm_app`): the boards it built at a version serve that version's other
formats and audiences, as in a web process."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
_APP = None


def web_app():
    """The worker's own web app (the site's settings from the environment, as the web's)."""
    global _APP
    if _APP is None:
        from server import create_app  # the web layer: only a worker that renders loads it

        _APP = create_app()
        # no connection of the parent's pool may be shared with a forked horse
        _APP.extensions["palimpsest.engine"].dispose()
    return _APP


def forked_safe() -> None:
    """Close the web app's database connections after a render in the worker's own process: a
    horse forked for the next job must not inherit one."""
    if _APP is not None:
        _APP.extensions["palimpsest.engine"].dispose()


def warm_app() -> None:
    try:
        web_app()
    except Exception as e:  # noqa: BLE001 — each job builds it then, and reports the problem
        log.warning("worker: could not build the web app for the boards' renders (%s)", e)


def render_board_job(
    task_id: str, fmt: str, view: str, phase: str, board: str | None, version: int | None
) -> dict:
    """Render the board `view` ("public", "organizer", "team:<id>") sees of `task_id`'s `phase`
    (`board`: a declared board's name, `version`: a published version) as `fmt`, at the version
    the database holds now, into the site's shared renders."""
    # the web layer on first use: a worker that never takes the boards queue never loads it
    from flask import g
    from werkzeug.exceptions import HTTPException

    from server.actions import common  # the layers above the jobs, on first use (as flask)
    from server.exceptions import NotFound  # beside the action it comes from
    from server.web.leaderboard import serve_board  # the web layer, on first use

    app = web_app()
    try:  # the view that asked for it could see the task (a draft's: its people)
        task = common.task(task_id)
    except NotFound:
        return {"rendered": False, "status": 404}
    args = {"phase": phase}
    if board:
        args["board"] = board
    if version:
        args["version"] = str(version)
    path = f"/tasks/{task_id}/leaderboard.{fmt}"
    with app.test_request_context(path, query_string=args):
        g.palimpsest_render_now = True
        try:
            serve_board(task_id, fmt, who=view, task=task)
        except HTTPException as e:  # the board closed or went since: nothing to render
            return {"rendered": False, "status": e.code}
    return {"rendered": True}
