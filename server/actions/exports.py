"""Organizer actions shared by the organizer pages (server/web/organizer.py) and the API
(server/api/): exports of the final ranking, queueing baseline runs (rescoring is in
server.actions). Every change of state still goes through server.domain.lifecycle; this module only
chooses
and hands over."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from rq.job import Job
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
from sqlmodel import Session

from baselines.systems import SYSTEMS
from server.actions import common
from server.boards import fact_export
from server.boards import leaderboard as lb
from server.db import transaction
from server.domain import boards, provenance, publication
from server.domain.accounts import audit
from server.exceptions import LifecycleRefused, NotFound, UnknownSystem, UploadFieldsInvalid
from server.jobs.dispatch import jobs
from server.jobs.queue import BASELINES, connect, get_queue
from server.models import Phase

_PREVIEW_CACHES: dict[str, lb.RenderCache] = {}


def _previews(settings) -> lb.RenderCache:
    """The organizers' preview exports, per board version: in this process and, through the
    site's Redis, across its processes (server.boards.leaderboard.SharedRenders)."""
    site = f"{settings.sqlalchemy_url()}|{settings.secret_key}"
    hit = _PREVIEW_CACHES.get(site)
    if hit is None:
        hit = _PREVIEW_CACHES[site] = lb.RenderCache(
            max_entries=64, shared=lb.SharedRenders(lambda: connect(settings), site)
        )
    return hit


EXPORT_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "tex": "application/x-tex; charset=utf-8",
}


@dataclass
class Export:
    body: bytes
    mimetype: str
    filename: str
    version: int | None


def export_ranking(
    s: Session,
    task,
    phase: Phase,
    fmt: str,
    version: int | None,
    *,
    actor,
    settings,
    via: str = "web",
    columns: list[str] | None = None,
    facts: bool = False,
    board: str | None = None,
) -> Export:
    """The final ranking as CSV, JSON or LaTeX: the published snapshot (`version`, default the
    latest) byte for byte, or a live preview before publication; audited. `columns`
    ("subset/metric") picks the LaTeX table's metric columns (the snapshot's stored table has the
    default ones). With `facts`, the fact sheets of the published version's rows instead (CSV or
    JSON; server.boards.fact_export). `board`: one of the phase's declared boards (default: the
    main one); its own published ranking, or its preview."""
    common.require_organizer(actor, s, task_id=task.id)
    if fmt not in EXPORT_TYPES:
        raise NotFound(f"no export format {fmt!r} (csv, json, tex)")
    rv = publication.latest_ranking(s, phase.id, version)
    if rv is None and version is not None:
        raise NotFound(f"{task.id}/{phase.name} has no published version {version}")
    main_rv = rv
    # a published version: its own boards; before publication: the phase's declared ones
    spec = None
    if rv is not None:
        rv = publication.published_board(s, rv, board)
    else:
        spec = boards.resolve(phase, board)
    name_of_board = board if board not in (None, "", "main") else None
    if facts:
        return _export_facts(s, task, phase, fmt, rv, actor=actor, via=via)
    with transaction(s):  # the export is audited, in a transaction of its own
        audit(
            s,
            actor,
            "ranking.export",
            f"phase:{phase.id}",
            format=fmt,
            version=main_rv.version if main_rv else None,
            board=name_of_board or "main",
            via=via,
        )
    on = f"-{name_of_board}" if name_of_board else ""
    name = (
        f"{task.id}-{phase.name}{on}-ranking"
        f"{f'-v{main_rv.version}' if main_rv else '-preview'}.{fmt}"
    )
    if rv is not None and fmt == "tex" and columns:
        body = lb.snapshot_latex(json.loads(rv.body_json), columns=columns).encode("utf-8")
    elif rv is not None:
        body = {"csv": rv.body_csv, "json": rv.body_json, "tex": rv.body_latex}[fmt].encode("utf-8")
    else:
        prov = provenance.current_provenance(task, phase.split, settings.home)

        def render() -> bytes:
            board = lb.build_board(
                s,
                task,
                phase,
                audience="public",
                show_private=True,
                include_closed=True,
                provenance=prov,
                board=spec,
            )
            return {
                "csv": lambda: lb.to_csv(board),
                "json": lambda: lb.to_json(board),
                "tex": lambda: lb.to_latex(board, columns=columns).encode("utf-8"),
            }[fmt]()

        # cached per board version like the pages (the version names every change of the phase,
        # its runs and the provenance of its scores)
        version = next(
            (
                st.version
                for st in lb.phase_states(s.get_bind(), task.id, provenance=lambda _split: prov)
                if st.id == phase.id
            ),
            None,
        )
        if version is None:
            body = render()
        else:
            key = ("export-preview", task.id, phase.name, fmt, tuple(columns or ()))
            if spec is not None:
                key += (spec.name,)
            body = _previews(settings).get(key, version, render)
    return Export(body, EXPORT_TYPES[fmt], name, main_rv.version if main_rv else None)


# ----------------------------------------------------------------------------- fact sheets


def _export_facts(s: Session, task, phase: Phase, fmt: str, rv, *, actor, via: str) -> Export:
    """The fact sheets of a published version (none before publication); audited."""
    if fmt not in fact_export.FORMATS:
        raise UploadFieldsInvalid({"format": "the fact sheets are exported as csv or json"})
    if rv is None:
        raise LifecycleRefused(
            f"the final ranking of {task.id}/{phase.name} is not published: its fact sheets are "
            "exported once it is",
            "not_published",
        )
    body = fact_export.export_facts(s, rv, fmt, actor=actor)
    with transaction(s):
        audit(
            s,
            actor,
            "ranking.export",
            f"phase:{phase.id}",
            format=f"facts.{fmt}",
            version=rv.version,
            via=via,
        )
    name = f"{task.id}-{phase.name}-facts-v{rv.version}.{fmt}"
    return Export(body, fact_export.FORMATS[fmt], name, rv.version)


class QueueUnreachable(Exception):
    pass


def queue_baselines(
    s: Session, task, systems: list[str], options: dict, *, actor, settings, via: str = "web"
) -> list[str]:
    """Put baseline runs of a task on the baselines queue; returns the job ids. Raises
    QueueUnreachable (nothing was queued) when Redis cannot be reached, UnknownSystem for a
    system the task does not have (nothing queued either)."""
    common.require_organizer(actor, s, task_id=task.id)
    known = SYSTEMS.get(task.id, ())
    unknown = [x for x in systems if x not in known]
    if not systems:
        raise UnknownSystem(
            f"choose at least one baseline system of {task.id} ({', '.join(known) or 'none'})"
        )
    if unknown:
        raise UnknownSystem(
            f"{task.id} has no baseline system {', '.join(unknown)} "
            f"(systems: {', '.join(known) or 'none'})"
        )
    try:
        queued = jobs(s, settings).baselines_now(task.id, systems, options)
    except Exception as e:  # noqa: BLE001 — nothing was recorded: say so, plainly
        raise QueueUnreachable(
            f"the baselines queue is not reachable ({type(e).__name__}: {e}); nothing was queued"
        ) from None
    with transaction(s):
        audit(
            s,
            actor,
            "baselines.enqueue",
            f"task:{task.id}",
            systems=systems,
            options=options,
            jobs=queued,
            via=via,
        )
    return queued


def baseline_runs(conn, settings) -> list[dict]:
    """The baseline runs RQ still knows of: waiting, running, finished (what they recorded),
    failed."""
    q = get_queue(BASELINES, conn, settings)
    ids = (
        q.get_job_ids()[:50]
        + StartedJobRegistry(queue=q).get_job_ids()[:50]
        + FinishedJobRegistry(queue=q).get_job_ids()[-50:]
        + FailedJobRegistry(queue=q).get_job_ids()[-50:]
    )
    runs = []
    for job in Job.fetch_many(list(dict.fromkeys(ids)), connection=conn, serializer=q.serializer):
        if job is None:
            continue
        status = job.get_status(refresh=False)
        info = {
            "id": job.id,
            "what": job.description,
            "status": getattr(status, "value", status),
            "enqueued": job.enqueued_at,
            "ended": job.ended_at,
            "recorded": [],
            "error": "",
        }
        if info["status"] == "finished":
            info["recorded"] = (job.return_value() or {}).get("recorded", [])
        elif info["status"] == "failed":
            exc = (job.exc_info or "").strip().splitlines()
            info["error"] = exc[-1] if exc else "failed"
        runs.append(info)
    runs.sort(key=lambda r: r["enqueued"] or datetime.min, reverse=True)
    return runs
