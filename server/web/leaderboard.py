"""`/tasks/<id>/leaderboard` (.json, .csv) with `?phase=`; rendered once per change of the scores.

A request costs one small SQL statement (the version of every phase of the task) and, unless
something changed since the last render in this process, no rendering at all. A phase whose final
ranking is published is served from its snapshot, byte for byte (`?version=N` for an earlier one).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import threading
import time

from flask import Blueprint, Response, abort, current_app, g, render_template, request, session
from markupsafe import Markup, escape
from sqlmodel import Session

from server.boards import blind, pairwise, plots, stats
from server.boards import leaderboard as lb
from server.db import db
from server.domain import boards
from server.domain.provenance import current_provenance
from server.domain.publication import board_ranking, latest_ranking, ranking_versions
from server.domain.visibility import viewer_of
from server.jobs.queue import BOARDS, connect, enqueue_once
from server.models import Phase, utcnow
from server.web.auth import current_user, is_api_request
from server.web.pages import PHASE_ORDER, task_or_404
from tasks.agreement import BAYES_FILE, load_agreement, reference_rows
from tasks.bundle_models import BoardSpec
from tasks.store import TaskStore

bp = Blueprint("leaderboard", __name__)
log = logging.getLogger(__name__)

MIMETYPES = {
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
}


def cache() -> lb.RenderCache:
    return current_app.extensions["palimpsest.lbcache"]


def audience(task_id: str | None = None) -> str:
    """Whose view of the task's board: "public", "team:<id>" (its own not-public runs too) or
    "organizer" (of the task's competition)."""
    if "uid" not in session:  # no cookie: no database look-up
        return "public"
    return viewer_of(current_user(), db(), task_id).audience


def choose_phase(states: list[lb.PhaseState], name: str | None, task=None) -> lb.PhaseState | None:
    """The named phase, or the board a visitor means by the task's leaderboard: its main phase
    (test once it opens, dev before), never a cross-validated one while another exists."""
    if name:
        return next((p for p in states if p.name == name), None)
    if task is not None:
        main = [p for p in states if not task.is_cross_validated(p.split)]
        states = main or states
    if not states:
        return None
    now = utcnow()
    ordered = sorted(states, key=lambda p: (PHASE_ORDER.get(p.name, 9), p.name))
    opened = [p for p in ordered if p.opens_at is None or p.opens_at <= now]
    return (opened or ordered)[-1]


_PROV: dict[tuple, tuple] = {}


def provenance_of(task, split: str):
    """The current gold/task/scorer versions of a split, re-read only when its manifest changes."""
    home = current_app.extensions["palimpsest.settings"].home
    try:
        st = os.stat(TaskStore(task.id, home).manifest_path)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        stamp = None
    key = (str(home), task.id, split)
    hit = _PROV.get(key)
    if hit is None or hit[0] != stamp:
        hit = (stamp, current_provenance(task, split, home))
        _PROV[key] = hit
    return hit[1]


def serve_board(task_id: str, fmt: str, who: str | None = None, task=None):
    """The board as HTML, JSON or CSV from the render cache; `who` overrides the cookie's audience
    (the API passes the token holder's, and the task it found). A board whose interval has passed
    is served its last render while a worker renders the next (`enqueue_render`); only a board
    never rendered is rendered in the request."""
    task = task if task is not None and task.id == task_id else task_or_404(task_id)
    engine = current_app.extensions["palimpsest.engine"]
    states = lb.phase_states(engine, task.id, provenance=lambda split: provenance_of(task, split))
    want = request.args.get("phase") or None
    state = choose_phase(states, want, task)
    if state is None:
        if fmt == "html":
            return render_template("leaderboard/none.html", task=task, phase=want), 404
        abort(404)
    who = who or audience(task.id)
    if not state.leaderboard_open and who != "organizer":
        if fmt == "html":
            return render_template(
                "leaderboard/none.html", task=task, phase=state.name, closed=True
            ), 404
        abort(404)
    version = request.args.get("version", type=int) if state.published else None
    # `?board=NAME`: one of the phase's declared boards (absent or "main": the default one)
    asked = request.args.get("board") or None
    spec = board_of(engine, state.id, asked)[0] if asked not in (None, "main") else None
    bname = spec.name if spec is not None else "main"
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "")
    settings = current_app.extensions["palimpsest.settings"]
    # the board's statistics arrive from a worker: a render without them is replaced once they do
    # (from the board built before: the statistics are attached, the board not built again)
    stats_ready = stats.ready(settings, state.id, state.version)
    board_version = f"{state.version}{'s' if stats_ready else 'p'}"
    # a page for a signed-in visitor (or one with messages waiting) gets its own navigation
    personal = fmt == "html" and ("uid" in session or "_flashes" in session)

    names = [
        p.name
        for p in sorted(states, key=lambda p: (PHASE_ORDER.get(p.name, 9), p.name))
        if p.leaderboard_open or who == "organizer"
    ]

    # a team whose view of the board (the default one or a declared one) is the public board's
    # shares its render; where it differs (its ranked run not shown publicly, its own name on an
    # anonymous board) its view is the public board built once plus its own row
    view, team_id = who, None
    if who.startswith("team:"):
        view = "public"
        if not _sees_public(task, state, int(who[5:]), spec):
            view, team_id = who, int(who[5:])

    def render() -> bytes:
        board_names = board_of(engine, state.id, None)[1] if fmt == "html" else []
        if state.published:
            out = render_published(
                task, state.id, fmt, version, names, view, board=bname, board_list=board_names
            )
            if out is not None:
                return out
        built = built_board(task, state, "public" if team_id is not None else view, spec)
        own = None
        if team_id is not None:
            with Session(engine, expire_on_commit=False) as s:
                mine = lb.build_board(
                    s,
                    task,
                    s.get(Phase, state.id),
                    audience=who,
                    provenance=provenance_of(task, state.split),
                    board=spec,
                    team=team_id,
                )
            ours = (r for r in mine.rows if r.row_type == "team" and r.team_id == team_id)
            own = next(ours, None)
        board = shown(built, own)
        if own is not None and fmt == "html" and current_app.config.get("PALIMPSEST_SPLICE", True):
            # the team's page: the public render with its own row put in, where the rows allow
            spliced = splice_row(board, own, public_template, lambda: public_shown(built), task)
            if spliced is not None:
                return spliced
        if view == "public" and fmt == "html":  # the rows its page shows, for a team's splice
            shown_boards = current_app.extensions.setdefault("palimpsest.shown", {})
            if len(shown_boards) >= 16:
                shown_boards.clear()
            shown_boards[public_key] = (board_version, board)
        if fmt == "json":
            return lb.to_json(board)
        if fmt == "csv":
            return lb.to_csv(board)
        return render_template(
            "leaderboard/board.html",
            task=task,
            board=board,
            phases=names,
            boards=board_names,
            audience=view,
            current_user=None,
            deferred_nav=True,
        ).encode("utf-8")

    def shown(built: lb.Board, own) -> lb.Board:
        """The board as the page shows it: a copy of `built` (with `own`, a hidden team's row, put
        in), its statistics attached, a blind phase's rows as its module says."""
        board = lb.overlay(built, own) if own is not None else lb.for_stats(built)
        attach_stats(board, state)
        if view != "organizer":  # a blind phase's: no submission ids, times or notes of a run
            with Session(engine) as s:
                phase = s.get(Phase, state.id)
                frozen_at = phase.frozen_at if phase.frozen else None
                blind.team_rows(s, phase, board, frozen_at=frozen_at)
        return board

    public_key = (task.id, state.name, "public", fmt, version)
    public_key += (bname,) if spec is not None else ()

    def public_template() -> bytes:
        """The public render of this version (its template: no one's navigation), rendered here
        for every process when none holds it yet."""
        got = cache().peek(public_key, board_version, shape=state.shape)
        if got is None:
            got = cache().render_now(public_key, board_version, public_both, shape=state.shape)
        return got[0]

    def public_shown(built: lb.Board) -> lb.Board:
        """The public page's rows at this version: those of its render in this process, else
        shown again from the built board."""
        hit = current_app.extensions.get("palimpsest.shown", {}).get(public_key)
        return hit[1] if hit is not None and hit[0] == board_version else shown(built, None)

    def both(page: bytes) -> tuple[bytes, bytes, bytes]:
        raw = splice(page, anonymous=True) if fmt == "html" else page
        return page, raw, gzip.compress(raw, compresslevel=6, mtime=0)

    def public_both() -> tuple[bytes, bytes, bytes]:
        nonlocal view, team_id
        saved, (view, team_id) = (view, team_id), ("public", None)
        try:
            return both(render())
        finally:
            view, team_id = saved

    def render_both() -> tuple[bytes, bytes, bytes]:
        return both(render())

    def refresh() -> bool:
        return enqueue_render(task.id, fmt, view, state.name, asked, version)

    try:
        key = (task.id, state.name, view, fmt, version)
        if spec is not None:
            key += (bname,)
        if g.get("palimpsest_render_now"):  # the job `enqueue_render` asked for
            cache().render_now(key, board_version, render_both, shape=state.shape)
            return None
        served, (template, raw, gz) = cache().lookup(
            key,
            board_version,
            render_both,
            shape=state.shape,
            # a worker renders the next version where its render reaches every process
            refresh=refresh if cache().shared is not None else None,
        )
    except LookupError:
        abort(404)
    # the ETag names the render served (while the next is built: the last one)
    etag = (
        f'"{served}-{who}-{fmt}{f"-b{bname}" if spec is not None else ""}'
        f'{f"-v{version}" if version else ""}{"-gz" if gzipped else ""}"'
    )
    if not personal and request.if_none_match and etag.strip('"') in request.if_none_match:
        return Response(status=304, headers={"ETag": etag})
    headers = {
        "ETag": etag,
        "Vary": "Accept-Encoding, Cookie",
        "Cache-Control": "no-cache" if who == "public" else "private, no-cache",
    }
    if personal:
        raw = splice(template, anonymous=False)
        gz = gzip.compress(raw, compresslevel=6, mtime=0) if gzipped else b""
        del headers["ETag"]
    body = raw
    if gzipped:
        body = gz
        headers["Content-Encoding"] = "gzip"
    if fmt == "csv":
        on = f"-{bname}" if spec is not None else ""
        headers["Content-Disposition"] = (
            f'inline; filename="{task.id}-{state.name}{on}-leaderboard.csv"'
        )
    return Response(body, content_type=MIMETYPES[fmt], headers=headers)


RENDER_JOB = "server.jobs.board_jobs.render_board_job"


def enqueue_render(
    task_id: str, fmt: str, view: str, phase: str, board: str | None, version: int | None
) -> bool:
    """Ask a worker (the boards queue) to render a board for every process of the site; asked
    again while one waits, nothing is added. False where nothing can be queued (then the request
    renders it)."""
    if not current_app.config.get("PALIMPSEST_ENQUEUE", True):
        return False
    settings = current_app.extensions["palimpsest.settings"]
    args = (task_id, fmt, view, phase, board, version)
    ident = hashlib.sha1(json.dumps(args).encode()).hexdigest()[:20]
    try:
        enqueue_once(
            connect(settings),
            settings,
            RENDER_JOB,
            f"board-render-{ident}",
            args=args,
            description=f"the {fmt} board of {task_id}/{phase} for {view}",
            queue=BOARDS,
        )
        return True
    except Exception as e:  # noqa: BLE001 — rendered in the request instead
        log.warning("board render of %s/%s not enqueued (%s)", task_id, phase, type(e).__name__)
        return False


def _sees_public(task, state: lb.PhaseState, team_id: int, spec) -> bool:
    """Whether a team's view of the board is the public one (its ranked run shown publicly, no
    anonymous labels): one look-up per team and board per interval (`board_refresh_seconds`),
    never across a change of the phase's shape."""
    engine = current_app.extensions["palimpsest.engine"]
    interval = cache().interval
    # (task, phase, team, declared board) -> (the phase's shape, when decided, the answer)
    seen = current_app.extensions.setdefault("palimpsest.sees_public", {})
    key = (task.id, state.id, team_id, spec.name if spec is not None else None)
    hit = seen.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] == state.shape and now - hit[1] < interval:
        return hit[2]
    with Session(engine) as s:
        phase = s.get(Phase, state.id)
        sees = lb.team_sees_the_public_board(
            s,
            task,
            phase,
            team_id,
            board=spec,
            provenance=provenance_of(task, phase.split) if spec is not None else None,
        )
    if interval > 0:
        if len(seen) > 4096:
            seen.clear()
        seen[key] = (state.shape, now, sees)
    return sees


class BuiltBoards:
    """The boards built from the database, per (task, phase, audience, declared board) at one
    version, kept in this process: the board's formats, its statistics arriving later and the
    teams whose view is the public board plus their own row are all made from one build (one at a
    time per board: the others wait for it)."""

    def __init__(self, max_entries: int = 64):
        self._d: dict[tuple, tuple[str, lb.Board]] = {}
        self._lock = threading.Lock()
        self._busy: dict[tuple, threading.Lock] = {}
        self.max_entries = max_entries
        self.builds = 0

    def get(self, key: tuple, version: str, build) -> lb.Board:
        hit = self._d.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        with self._lock:
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            hit = self._d.get(key)
            if hit is not None and hit[0] == version:
                return hit[1]
            board = build()
            with self._lock:
                self.builds += 1
                if len(self._d) >= self.max_entries and key not in self._d:
                    self._d.clear()
                self._d[key] = (version, board)
            return board


def built_board(task, state: lb.PhaseState, view: str, spec) -> lb.Board:
    """The board of `state` as `view` sees it, without its statistics, built once per version in
    this process (`BuiltBoards`); never changed by its callers (they put statistics on a copy)."""
    engine = current_app.extensions["palimpsest.engine"]
    boards_ = current_app.extensions["palimpsest.lbbuilt"]
    bname = spec.name if spec is not None else "main"

    def build() -> lb.Board:
        with Session(engine, expire_on_commit=False) as s:
            phase = s.get(Phase, state.id)
            board = lb.build_board(
                s,
                task,
                phase,
                audience=view,
                provenance=provenance_of(task, phase.split),
                board=spec,
            )
        board.version = state.version
        if spec is None or spec.filter is None:  # the annotators and published systems: no track
            lb.add_reference_rows(board, task, current_app.extensions["palimpsest.settings"].home)
        return board

    return boards_.get((task.id, state.id, view, bname), state.version, build)


def board_of(engine, phase_id: int, name: str | None) -> tuple[BoardSpec | None, list[tuple]]:
    """The declared board `name` of the phase (None: the default one) and every board of the
    phase as (name, title) pairs, "main" first; NotFound (404) naming the boards that exist."""
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        spec = boards.resolve(phase, name)
        listed = [("main", "Main")] + [(b.name, b.title) for b in boards.of_phase(phase)]
    return spec, listed


NAV, FLASH = b"<!--pal:nav-->", b"<!--pal:flash-->"
ROWS, END_ROWS, ROW = b"<!--pal:rows-->", b"<!--pal:/rows-->", b'<tr class="'


def splice_row(board: lb.Board, own, template, public_board, task) -> bytes | None:
    """A hidden team's page (`board`: the public board with its own row `own` put in) made from
    the public page of the same version (`template()`: its render; `public_board()`: its rows): the
    public rows' HTML kept, the team's own row rendered alone and put in its place. None (the page
    is rendered whole) where the other rows are not the public ones as they are, or the page says
    something of the rows as a whole that the team's row changes (re-runs, an empty board)."""
    if own.rerun_of:  # the page says whether any row is a re-run
        return None
    page = template()
    public = public_board()
    at = next((i for i, r in enumerate(board.rows) if r is own), None)
    others = [r for r in board.rows if r is not own]
    theirs = [r for r in public.rows if not (r.row_type == "team" and r.team_id == own.team_id)]
    if at is None or not public.rows or others != theirs:
        return None
    head, found, rest = page.partition(ROWS)
    body, found_end, tail = rest.partition(END_ROWS)
    chunks = body.split(ROW)
    if not found or not found_end or chunks[0] or len(chunks) != len(public.rows) + 1:
        return None
    kept = [
        c
        for c, r in zip(chunks[1:], public.rows, strict=True)
        if not (r.row_type == "team" and r.team_id == own.team_id)
    ]
    mine = render_template("leaderboard/_row.html", row=own, board=board, task=task).encode()
    kept.insert(at, mine.removeprefix(ROW))
    return b"".join((head, ROWS, ROW, ROW.join(kept), END_ROWS, tail))


def splice(page: bytes, *, anonymous: bool) -> bytes:
    """A cached page with the visitor's navigation and messages put in: rendered per request for a
    signed-in visitor, once for everyone else (the cached part never holds anyone's)."""
    if NAV not in page:
        return page
    page = page.replace(ROWS, b"", 1).replace(END_ROWS, b"", 1)  # where a team's row goes in
    if anonymous:
        nav = current_app.extensions.get("palimpsest.anonymous_nav")
        if nav is None:
            nav = render_template("_nav.html", current_user=None).encode("utf-8")
            current_app.extensions["palimpsest.anonymous_nav"] = nav
        return page.replace(NAV, nav).replace(FLASH, b"")
    return page.replace(NAV, render_template("_nav.html").encode("utf-8")).replace(
        FLASH, render_template("_flash.html").encode("utf-8")
    )


def attach_stats(board: lb.Board, state: lb.PhaseState) -> None:
    """The statistics of the board's version, computed by a worker; while there are none, ask for
    them (a request never computes them)."""
    settings = current_app.extensions["palimpsest.settings"]
    body = stats.board_body(stats.read_board_stats(settings, state.id, state.version), board.board)
    if body is None:
        if current_app.config.get("PALIMPSEST_ENQUEUE", True) and any(
            r.rank is not None for r in board.rows
        ):
            stats.enqueue(settings, state.id)
        stats.attach(board, None, reason="interval being computed")
        return
    stats.attach(board, body)


def render_published(
    task,
    phase_id: int,
    fmt: str,
    version: int | None,
    names: list[str],
    who: str,
    *,
    board: str = "main",
    board_list: list[tuple] = (),
) -> bytes | None:
    """A published final ranking from its snapshot: JSON and CSV byte for byte as published. None
    for a phase published before snapshots existed (its board is built live), or a declared board
    its published version did not have (the board is built live)."""
    engine = current_app.extensions["palimpsest.engine"]
    with Session(engine, expire_on_commit=False) as s:
        rv = latest_ranking(s, phase_id, version)
        if rv is None:
            if version is None:
                return None
            raise LookupError(f"no published version {version}")
        versions = [(v.version, v.published_at, v.reason) for v in ranking_versions(s, phase_id)]
        if board != "main":
            rv = board_ranking(s, rv, board)
            if rv is None:
                return None
    if fmt == "json":
        return rv.body_json.encode("utf-8")
    if fmt == "csv":
        return rv.body_csv.encode("utf-8")
    body = json.loads(rv.body_json)
    board = lb.board_from_dict(body)
    return render_template(
        "leaderboard/board.html",
        task=task,
        board=board,
        phases=names,
        boards=list(board_list),
        audience=who,
        current_user=None,
        deferred_nav=True,
        ranking=body.get("ranking") or {},
        versions=versions,
    ).encode("utf-8")


@bp.app_template_global()
def fmt_value(metric: str, v: float) -> str:
    return lb.format_value(metric, v)


@bp.app_template_global()
def empty_reason(row, col) -> str:
    return lb.empty_reason(row, col)


@bp.app_template_global()
def board_cols(board, task) -> tuple[list, list, bool, str]:
    """A board's columns as its rows are written: the task's key columns, the others (the primary
    apart), whether it is cross-validated, and the key of the primary's standard deviation."""
    keys = set(task.key_columns)
    key_cols = [c for c in board.columns if c.key in keys]
    extra_cols = [c for c in board.columns if not c.primary and c.key not in keys]
    cross_validated = any(c.stat for c in board.columns)
    return key_cols, extra_cols, cross_validated, f"{board.primary.key}@std"


@bp.app_template_global()
def metric_cells(row, cols, cls: str = "") -> Markup:
    """A board row's metric cells, one `<td>` each: the value, or why it is empty. Written here
    rather than by a macro per cell: a board of 2,000 teams has 40,000 such cells, and a macro
    call each cost the page most of its render."""
    open_ = f"<td class={escape(cls)}>" if cls else "<td>"
    out = []
    values = row.values
    for c in cols:
        v = values[c.key]
        if v is not None:
            out.append(f"{open_}{lb.format_value(c.metric, v)}</td>")  # digits: nothing to escape
        else:
            why = escape(lb.empty_reason(row, c))
            out.append(f'{open_}<span class="why" title="{why}">— <small>{why}</small></span></td>')
    return Markup("".join(out))


@bp.route("/tasks/<task_id>/leaderboard")
def board(task_id: str):
    return serve_board(task_id, "html")


@bp.route("/tasks/<task_id>/leaderboard.json")
def board_json(task_id: str):
    return serve_board(task_id, "json")


@bp.route("/tasks/<task_id>/leaderboard.csv")
def board_csv(task_id: str):
    return serve_board(task_id, "csv")


def significance_of(
    task, state: lb.PhaseState, board: str = "main", version: int | None = None
) -> tuple[dict, dict | None]:
    """The pairwise statistics of one board of a phase (`board`: "main" or a declared board's
    name, already resolved): the board-wide summary (`lb.stats_summary`'s shape) and, on a
    published snapshot, the public part's beside it. A published phase's come from its snapshot
    (version `version`, else the newest: the default board's `RankingVersion`, a declared board's
    `BoardRanking`); a live board's, or a declared board its published version did not have, from
    the statistics a worker computed for the board's version (the public audience's board: an
    anonymous board's teams by their labels)."""
    engine = current_app.extensions["palimpsest.engine"]
    if state.published:
        with Session(engine) as s:
            rv = latest_ranking(s, state.id, version)
            if rv is None and version is not None:
                raise LookupError(f"no published version {version}")
            if rv is not None and board != "main":
                rv = board_ranking(s, rv, board)
            snap = json.loads(rv.body_json) if rv is not None else None
        if snap is not None and snap.get("statistics") is not None:
            rows = {str(r.get("submission_id")): r for r in snap.get("rows") or ()}
            return _with_rank_sets(dict(snap["statistics"]), rows), snap.get("public_statistics")
    settings = current_app.extensions["palimpsest.settings"]
    body = stats.board_body(stats.read_board_stats(settings, state.id, state.version), board)
    out = lb.stats_summary(body)
    if body is not None and body.get("unavailable"):
        out["unavailable"] = body["unavailable"]
    return _with_rank_sets(out, (body or {}).get("rows") or {}), None


def _with_rank_sets(summary: dict, rows: dict) -> dict:
    """The summary with each ranked row's rank sets in the order of `order` (`rank_sets`: [low,
    high] marginal and simultaneous, or None) and the top sets' teams (`top_teams`: tau -> the
    labels of the rows that may be among the tau best)."""
    order = summary.get("order") or []
    teams = summary.get("teams") or []
    label = {sid: teams[i] for i, sid in enumerate(order) if i < len(teams)}
    sets = []
    for sid in order:
        r = rows.get(str(sid)) or {}
        m, a = r.get("rank_set"), r.get("rank_set_simultaneous")
        sets.append([[m["low"], m["high"]] if m else None, [a["low"], a["high"]] if a else None])
    summary["rank_sets"] = sets if any(x[0] or x[1] for x in sets) else None
    summary["top_teams"] = {
        k: [label.get(sid, sid) for sid in ids]
        for k, ids in (summary.get("top_sets") or {}).items()
    }
    return summary


def _board_and_state(task, *, closed_to_organizers: bool = True):
    """The phase a request names (`?phase=`) and its board (`?board=`: a declared board's spec,
    None for the default one; NotFound naming the boards that exist). A closed board is a 404,
    except to the competition's organizers where `closed_to_organizers`."""
    engine = current_app.extensions["palimpsest.engine"]
    states = lb.phase_states(engine, task.id, provenance=lambda split: provenance_of(task, split))
    state = choose_phase(states, request.args.get("phase") or None, task)
    if state is None:
        abort(404)
    if not state.leaderboard_open and not (
        closed_to_organizers and audience(task.id) == "organizer"
    ):
        abort(404)
    asked = request.args.get("board") or None
    spec = board_of(engine, state.id, asked)[0] if asked not in (None, "main") else None
    return state, spec


def withheld(state) -> Response | None:
    """A live board's p-values and figures are withheld where its phase has a release rule (they
    would tell the exact public scores): the answer saying so, or None."""
    if state.published:
        return None
    with Session(current_app.extensions["palimpsest.engine"]) as s:
        if lb.release_rule_of(s.get(Phase, state.id)) is None:
            return None
    return Response(
        "Withheld until publication: this phase's release rule shows released public scores "
        "only, and the pairwise statistics and figures would tell the exact ones.\n",
        status=404,
        content_type="text/plain; charset=utf-8",
    )


@bp.route("/tasks/<task_id>/leaderboard/significance")
def significance(task_id: str):
    """The pairwise paired-bootstrap p-values (Holm-corrected) behind a board's clusters
    (`?board=`: any board of the phase): from the published snapshot, or from the statistics of
    the board's current version."""
    task = task_or_404(task_id)
    state, spec = _board_and_state(task)
    if (no := withheld(state)) is not None:
        return no
    bname = spec.name if spec is not None else "main"
    settings = current_app.extensions["palimpsest.settings"]
    version = request.args.get("version", type=int) if state.published else None
    ready = stats.ready(settings, state.id, state.version)
    board_version = f"{state.version}{'s' if ready else 'p'}"

    def render() -> bytes:
        body, public = significance_of(task, state, bname, version)
        return render_template(
            "leaderboard/significance.html",
            task=task,
            phase=state.name,
            board=bname,
            title=spec.title if spec is not None else "",
            version=version,
            st=body,
            public=public,
            current_user=None,
            deferred_nav=True,
        ).encode("utf-8")

    # the same for every visitor: cached per board version like the board (its navigation put in
    # per request)
    key = (task.id, state.name, "public", "significance", version)
    if spec is not None:
        key += (bname,)
    try:
        page = cache().get(key, board_version, render)
    except LookupError:
        abort(404)
    personal = "uid" in session or "_flashes" in session
    return Response(splice(page, anonymous=not personal), content_type="text/html; charset=utf-8")


@bp.route("/tasks/<task_id>/leaderboard/significance.csv")
def significance_csv(task_id: str):
    return serve_significance_csv(task_id)


def serve_significance_csv(task_id: str, who: str | None = None):
    """A board's full pairwise matrix as CSV (`server.boards.pairwise`: every pair of ranked rows,
    the raw and Holm-corrected p-values), streamed from its file: a published version's as frozen
    at publication, the current version's once a worker has written it (until then 202, the job
    asked for). `?phase=`, `?board=`, `?version=` as the board's; `who` overrides the cookie's
    audience (the API passes the token holder's). Every visitor gets the public board's matrix
    (on an anonymous board, its labels)."""
    task = task_or_404(task_id)
    engine = current_app.extensions["palimpsest.engine"]
    states = lb.phase_states(engine, task.id, provenance=lambda split: provenance_of(task, split))
    state = choose_phase(states, request.args.get("phase") or None, task)
    who = who or audience(task.id)
    if state is None or (not state.leaderboard_open and who != "organizer"):
        abort(404)
    if (no := withheld(state)) is not None:
        return no
    settings = current_app.extensions["palimpsest.settings"]
    asked = request.args.get("board") or None
    spec = board_of(engine, state.id, asked)[0] if asked not in (None, "main") else None
    bname = spec.name if spec is not None else "main"
    version = request.args.get("version", type=int) if state.published else None
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "")
    on = f"-{bname}" if spec is not None else ""
    headers = {
        "Content-Disposition": (
            f'attachment; filename="{task.id}-{state.name}{on}-significance.csv"'
        ),
        "Vary": "Accept-Encoding",
        "Cache-Control": "no-cache",
    }
    path, pieces, tag = None, None, None
    rv = None
    if state.published:
        with Session(engine, expire_on_commit=False) as s:
            rv = latest_ranking(s, state.id, version)
            if rv is None and version is not None:
                abort(404, f"{task.id}/{state.name} has no published version {version}")
            got = rv if rv is None or spec is None else board_ranking(s, rv, bname)
        if rv is not None and got is None:
            abort(404, f"version {rv.version} of the final ranking has no board {bname!r}")
        if rv is not None:
            tag = f"v{rv.version}-{got.sha256[:16]}"
            path = pairwise.find(
                settings,
                pairwise.published_path(settings.home, state.id, rv.version, got.sha256, bname),
            )
            if path is None:
                # published before the matrix files: a small board's snapshot carries its matrix
                body = json.loads(got.body_json).get("statistics") or {}
                if body.get("p_holm") is None:
                    abort(
                        404,
                        f"version {rv.version} of the final ranking was published without its "
                        "full pairwise matrix; the significance page shows each row against the "
                        "next and against its cluster's best",
                    )
                pieces = pairwise.from_body(body)
    if rv is None:
        tag = state.version
        path = pairwise.find(
            settings, pairwise.current_path(settings.home, state.id, state.version, bname)
        )
        if path is None:
            body = stats.board_body(
                stats.read_board_stats(settings, state.id, state.version), bname
            )
            if body is not None and body.get("unavailable"):
                abort(404, f"no p-values on this board: {body['unavailable']}")
            if current_app.config.get("PALIMPSEST_ENQUEUE", True):
                pairwise.enqueue(settings, state.id, None if spec is None else bname)
            said = (
                "The full pairwise matrix of this board is being computed by a worker; "
                "ask again in a moment."
            )
            if is_api_request():
                out = Response(
                    json.dumps({"status": "pending", "message": said}),
                    status=202,
                    content_type="application/json",
                )
            else:
                out = Response(said + "\n", status=202, content_type="text/plain; charset=utf-8")
            out.headers["Retry-After"] = "10"
            out.headers["Cache-Control"] = "no-store"
            return out
    etag = f'"pairwise-{tag}-{pairwise._board_tag(bname)}{"-gz" if gzipped and path else ""}"'
    if request.if_none_match and etag.strip('"') in request.if_none_match:
        return Response(status=304, headers={"ETag": etag})
    headers["ETag"] = etag
    if path is not None:
        if gzipped:
            headers["Content-Encoding"] = "gzip"
            headers["Content-Length"] = str(path.stat().st_size)
        pieces = pairwise.read(path, gzipped)
    return Response(pieces, content_type=MIMETYPES["csv"], headers=headers, direct_passthrough=True)


PLOT_TYPES = {"svg": "image/svg+xml", "pdf": "application/pdf"}


@bp.route("/tasks/<task_id>/leaderboard/plot.<fmt>")
def plot(task_id: str, fmt: str):
    """The board as figures (`?phase=`, `?board=`, `?kind=ci,time,subsets,folds`): rendered once
    per board version; a published phase's from its snapshot (`?version=`, else the newest)."""
    if fmt not in PLOT_TYPES:
        abort(404)
    task = task_or_404(task_id)
    engine = current_app.extensions["palimpsest.engine"]
    state, spec = _board_and_state(task, closed_to_organizers=False)
    if (no := withheld(state)) is not None:
        return no
    bname = spec.name if spec is not None else "main"
    version = request.args.get("version", type=int) if state.published else None
    kinds = (
        tuple(k for k in (request.args.get("kind") or "").split(",") if k in plots.KINDS)
        or plots.KINDS
    )
    settings = current_app.extensions["palimpsest.settings"]
    ready = stats.ready(settings, state.id, state.version)
    board_version = f"{state.version}{'s' if ready else 'p'}"

    def render() -> bytes:
        with Session(engine, expire_on_commit=False) as s:
            phase = s.get(Phase, state.id)
            if state.published:
                rv = latest_ranking(s, state.id, version)
                if rv is None and version is not None:
                    raise LookupError(f"no published version {version}")
                if rv is not None and spec is not None:
                    rv = board_ranking(s, rv, bname)
                if rv is not None:  # the snapshot alone: a published figure never moves
                    board = lb.board_from_dict(json.loads(rv.body_json))
                    return plots.render(board, plots.snapshot_history(board), fmt, kinds)
            board = lb.build_board(
                s,
                task,
                phase,
                audience="public",
                provenance=provenance_of(task, phase.split),
                board=spec,
            )
            attach_stats(board, state)
            hist = plots.history(
                s, board, phase, labels=lb.anonymous_labels(s, task.id, phase), spec=spec
            )
        return plots.render(board, hist, fmt, kinds)

    key = (task.id, state.name, "public", f"plot.{fmt}", ",".join(kinds), version)
    if spec is not None:
        key += (bname,)
    try:
        body = cache().get(key, board_version, render)
    except LookupError:
        abort(404)
    on = f"-{bname}" if spec is not None else ""
    at = f"-v{version}" if version else ""
    headers = {
        "ETag": f'"{board_version}-plot-{fmt}-{",".join(kinds)}{on}{at}"',
        "Cache-Control": "no-cache",
        # matplotlib's SVG styles its elements inline; it runs no script and loads nothing
        "Content-Security-Policy": (
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
        ),
    }
    if fmt == "pdf":
        headers["Content-Disposition"] = (
            f'inline; filename="{task.id}-{state.name}{on}-leaderboard.pdf"'
        )
    return Response(body, mimetype=PLOT_TYPES[fmt], headers=headers)


def _agreement_of(task) -> tuple[dict | None, dict | None, float]:
    """The agreement an import cached for a task (factors included where it has them), the last
    converged Bayesian fit `palimpsest agreement --bayes` cached, and their files' mtime."""
    store = TaskStore(task.id, current_app.extensions["palimpsest.settings"].home)
    try:
        got = load_agreement(store.root) or store.manifest().get("agreement")
        fitted = store.root / BAYES_FILE
        bayes = json.loads(fitted.read_text(encoding="utf-8")) if fitted.is_file() else None
        stamp = max(
            (p.stat().st_mtime for p in (store.manifest_path, fitted) if p.is_file()), default=0.0
        )
    except (OSError, ValueError):
        return None, None, 0.0
    return got, bayes, stamp


@bp.route("/tasks/<task_id>/agreement")
def agreement(task_id: str):
    """How far the annotators of a task's release agree: the figures its import computed (never
    computed in a request), by contextual factor with forest plots, and a cached Bayesian fit."""
    task = task_or_404(task_id)
    got, bayes, _ = _agreement_of(task)
    if not got or got.get("nothing_to_measure"):
        abort(404)
    factors = got.get("factors") or {}
    return render_template(
        "leaderboard/agreement.html",
        task=task,
        got=got,
        rows=reference_rows(task, got),
        factors=sorted(factors.get("binary", {})),
        bayes=bayes,
    )


_SVG: dict[tuple, bytes] = {}  # (task, figure, file stamp) -> rendered SVG, per process


@bp.route("/tasks/<task_id>/agreement/<figure>.svg")
def agreement_plot(task_id: str, figure: str):
    """A forest plot of the multi-kappa by one factor (`?scale=binary|labels`), or the Bayesian
    fit's curve over lexical overlap (`curve`), rendered once per cached result."""
    task = task_or_404(task_id)
    got, bayes, stamp = _agreement_of(task)
    if not got:
        abort(404)
    scale = "labels" if request.args.get("scale") == "labels" else "binary"
    key = (task.id, figure, scale, stamp)
    if key not in _SVG:
        if figure == "curve":
            if not bayes or not bayes.get("curve"):
                abort(404)
            body = plots.kappa_curve(bayes["curve"], f"{task.id}: posterior multi-kappa")
        else:
            rows = (got.get("factors") or {}).get(scale, {}).get(figure)
            if not rows:
                abort(404)
            body = plots.forest(rows, f"{task.id}: multi-kappa by {figure} ({scale})")
        _SVG[key] = body
    return Response(_SVG[key], mimetype="image/svg+xml")
