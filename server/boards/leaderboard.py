"""Leaderboards: one row per team, ranked by the task's primary metric, rendered once per change;
and the published final rankings, served from their immutable snapshots.

Ranking code reads only `task.primary` and `task.greater_is_better` (no per-task cases).
Before a phase's final ranking is published only public-part scores are read at all;
after publication the private ranking is shown with the public one beside it.

The builder in parts: `request` (the board asked for, one value), `query` (what the viewer may
see: the runs, their scores, each team's ranked run), `columns` (the columns and the values their
cells read), `release` (the phase's release rule), `ranking`, `overall` (overall boards),
`stats` (the statistics put on a built board), `formats` (JSON, CSV, LaTeX, the published
snapshot) and `render_cache`. This module puts them together and keeps their public names.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from server.boards import ladder
from server.boards.board_model import (  # noqa: F401 - the shapes, re-exported
    STATS_FIELDS,
    Board,
    Column,
    Row,
    clean_name,
    json_value,
    stats_summary,
)
from server.boards.columns import (  # noqa: F401 - re-exported
    RERUN,
    STALE_NOTE,
    _board_fields,
    _declared_of,
    _macro_groups,
    _overall_columns,
    _value,
    board_columns,
    columns_for,
    in_gold,
    mean_over,
    result_folds,
    why_empty,
)
from server.boards.formats import (  # noqa: F401 - re-exported
    _csv_safe,
    _csv_value,
    board_from_dict,
    empty_reason,
    format_value,
    latex_escape,
    snapshot_csv,
    snapshot_dict,
    snapshot_latex,
    to_csv,
    to_dict,
    to_json,
    to_latex,
)
from server.boards.overall import _overall_board, _ranked_rows, overall_teams  # noqa: F401
from server.boards.query import (  # noqa: F401 - re-exported
    Scope,
    Seen,
    _choice_key,
    _enters,
    _latest_scores,
    _listed,
    _marked_runs,
    _ranked_runs,
    _rule,
    anonymous_labels,
    board_choices,
    passes,
    rank_parts_of,
    row_sources,
    run_counts,
    scope_of,
    team_sees_the_public_board,
    visible,
)
from server.boards.ranking import _rank, for_stats, overlay, rank_rows  # noqa: F401
from server.boards.release import RELEASE_NOTE, _release_ladder, release_rule_of  # noqa: F401
from server.boards.render_cache import (  # noqa: F401 - re-exported
    PhaseState,
    RenderCache,
    SharedRenders,
    phase_states,
)
from server.boards.request import BoardRequest
from server.domain import code_runs, goldversions
from server.domain.partitions import ranked_part
from server.domain.provenance import current_provenance, is_current
from server.models import Phase
from tasks.agreement import reference_rows
from tasks.store import TaskStore

# ----------------------------------------------------------------------------- building


def final_board(s: Session, task, phase: Phase, home, **more) -> Board:
    """The final ranking as it is (or will be) published: the public audience's board ranked on
    the private part, a closed board shown, scores of the current gold, task and scorer only
    (`home`: the site's data); `more`: the request's other fields (`with_parts`, `board`). The
    one place the publication, its preview and the exports build it."""
    req = BoardRequest.final(current_provenance(task, phase.split, home), **more)
    return build(s, task, phase, req)


def build_board(s: Session, task, phase: Phase, request: BoardRequest | None = None, **kw) -> Board:
    """The leaderboard of a phase as `request` (a BoardRequest, or its fields as keywords:
    `audience`, `show_private`, `include_closed`, `provenance`, `with_parts`, `board`, `team`)
    asks for it.

    `board`: one of the phase's declared boards (tasks.bundle_models.BoardSpec; None: the default
    board, ranked by the task's primary value). A declared board ranks by its own value, over the
    runs that pass its filter and have that value; each team's ranked run is chosen among those by
    the same rule (its marked primary run when it enters, else its latest one that does).

    Each team has one row (and one more for each of its archived systems the organizers re-ran on
    the phase, `rerun_of`): its ranked run, chosen by `lifecycle.RANKED_RUN_RULE` (the marked
    primary run, else the latest scored one) among its runs that are neither hidden nor removed;
    the choice never reads a score. Each baseline method has one unranked row (its newest entry).
    Scores whose provenance differs from the request's are never ranked: their row says they are
    stale.
    """
    return build(s, task, phase, request if request is not None else BoardRequest(**kw))


def build(s: Session, task, phase: Phase, req: BoardRequest) -> Board:
    """The board `req` asks for (see `build_board`)."""
    if req.overall:
        return _overall_board(s, task, phase, req, build)
    if not phase.leaderboard_open and not req.organizer and not req.include_closed:
        # every caller (pages, API, exports) gets nothing from a closed board
        return _closed_board(task, phase, req.board)
    scope = scope_of(s, task, phase, req)
    seen = visible(s, task, phase, req, scope)
    sources = row_sources(s, phase, req, seen)
    rerun_of = code_runs.reruns_of(s, [x[0].id for x in sources if x[0].rerun_of is not None])
    rows = [_row(task, req, seen, src, rerun_of) for src in sources]
    rule = _live_rules(s, task, phase, req, seen, rows)
    rank_rows(rows, seen.prim, scope.use_private)
    # the part ranked on, as named in the JSON: a phase without a hidden part ranks on all of its
    # gold
    part = ranked_part(phase) if scope.use_private else "all"
    if phase.public_fraction < 1.0 and not scope.use_private:
        part = "public"
    return Board(
        task_id=task.id,
        phase=phase.name,
        split=phase.split,
        part=part,
        published=phase.published_at is not None,
        frozen=bool(phase.frozen),
        gold=goldversions.label(s, task.id, phase.split),
        columns=seen.cols,
        rows=rows,
        release_rule=None if rule is None else rule.to_json(),
        **_board_fields(req.board),
    )


def _closed_board(task, phase: Phase, board) -> Board:
    return Board(
        task_id=task.id,
        phase=phase.name,
        split=phase.split,
        part="public",
        published=False,
        frozen=bool(phase.frozen),
        columns=columns_for(task, phase.split) if board is None else board_columns(task, board),
        closed=True,
        **_board_fields(board),
    )


def _row(task, req: BoardRequest, seen: Seen, src: tuple, rerun_of: dict) -> Row:
    """A row of the board: its run's values as the viewer sees them (none, and marked stale, for
    a score of an earlier gold or scorer), and why its ranking value is empty where it is."""
    sub, team, note, kind, rule = src
    cols, prim, scores = seen.cols, seen.prim, seen.scores
    part, result = seen.pick(sub.id)
    values = {c.key: _value(result, c.subset, c.metric, c) for c in cols}
    pub = (
        _value(scores.get((sub.id, "public")), prim.subset, prim.metric, prim)
        if seen.scope.use_private
        else None
    )
    if not is_current(result, req.provenance):
        values = {c.key: None for c in cols}
        pub, note = None, STALE_NOTE
    row = Row(
        rank=None,
        row_type=kind,
        team=team.name,
        team_id=team.id,
        submission_id=sub.id,
        method_name=sub.method_name,
        url=sub.url,
        submitted_at=sub.created_at,
        is_primary=sub.is_primary,
        values=values,
        public_value=pub,
        note=note,
        chosen_by=rule,
        attempt=sub.score_attempt,
        notes=list((result or {}).get("notes") or []),
        rerun_of=rerun_of.get(sub.id),
    )
    if values[prim.key] is None and note != STALE_NOTE:
        row.why_empty = why_empty(result, prim.subset)
        _partial_macro(task, prim, result, row)
    if req.with_parts and note != STALE_NOTE:
        row.parts = {p: scores[(sub.id, p)] for p in seen.scope.parts if (sub.id, p) in scores}
    return row


def _partial_macro(task, prim: Column, result: dict | None, row: Row) -> None:
    """On a board ranked by a mean over groups, a run covering some of them only: its row says
    which, and its own mean over those, as such (a partial macro is never shown as the macro)."""
    groups = _macro_groups(task, prim)
    if not groups:
        return
    covered = [g for g in groups if _value(result, g, prim.metric) is not None]
    if not covered:
        return
    # the groups the gold holds and the run leaves out (not those the gold lacks: STR's
    # languages without test gold)
    said = set((result or {}).get("notes") or ())
    rest = [g for g in groups if g not in covered and f"{g}: not in the submission" in said] or [
        g for g in groups if g not in covered and in_gold(result, g)
    ]
    # its own macro, over what it covers, said as such (STR's teams by language)
    mine = sum(_value(result, g, prim.metric) for g in covered) / len(covered)
    every = f"every {task.group_name}" + (" of this board" if prim.over else "")
    row.why_empty = (
        f"covers {', '.join(covered)} only, not {', '.join(rest)}: no macro "
        f"over {every}; its macro over the {len(covered)} it "
        f"covers is {mine:.4f}" + (f"; {row.why_empty}" if row.why_empty else "")
    )


def _live_rules(s: Session, task, phase: Phase, req: BoardRequest, seen: Seen, rows: list[Row]):
    """What a live board adds before publication: each team's run count, the phase's release
    rule (returned; None where none applies) and the anonymous labels (the team sees its own
    name, no one else's)."""
    sc = seen.scope
    if not sc.use_private:
        # each team's runs in the phase (one query, a count per team)
        made_runs = run_counts(s, phase, sc.frozen_at)
        for r in rows:
            if r.row_type == "team":
                r.runs = made_runs.get(r.team_id, 0)
    rule = None if (req.organizer or sc.use_private) else release_rule_of(phase)
    if rule is not None and rule.kind in ("ladder", ladder.KIND):
        _release_ladder(
            s, phase, rows, seen.cols, rule, sc.rank_parts, sc.banned, sc.frozen_at, req.board,
            sc.fields, seen.pick, req.provenance,
        )  # fmt: skip
    own_only = req.organizer or sc.use_private or req.team is not None
    labels = None if own_only else anonymous_labels(s, task.id, phase)
    if labels is not None:  # an anonymous board: the team sees its own name, no one else's
        for r in rows:
            if r.row_type == "team" and r.team_id != req.own_team:
                r.team, r.method_name, r.url = labels.get(r.team_id, "Team ?"), "", ""
                if r.rerun_of:  # its first run's id would name the team
                    r.rerun_of = {k: v for k, v in r.rerun_of.items() if k != "run"}
    return rule


# ----------------------------------------------------------------------------- reference rows


def add_reference_rows(board: Board, task, home) -> None:
    """The human-agreement rows the task's import recorded (`tasks/agreement.py`), unranked, in
    their place by the primary score (none on an overall board: they have no value there)."""
    if board.overall is not None:
        return
    store = TaskStore(task.id, home)
    try:
        manifest = store.manifest()
        at = datetime.utcfromtimestamp(store.manifest_path.stat().st_mtime).replace(microsecond=0)
    except (OSError, ValueError):
        return
    refs = reference_rows(task, manifest.get("agreement"))
    # published results stand beside runs on the same data: every fold a row names must be a fold of
    # the imported split (the synthetic demo release has three, the paper's ten)
    folds = {str(f) for f in (manifest.get("cross_validation") or {}).get("folds") or ()}
    papers = [
        p
        for p in getattr(task, "paper_rows", ())
        if p.split == board.split
        and {k.rsplit("@fold", 1)[1] for k, _ in p.values if "@fold" in k} <= folds
    ]
    if not (refs or papers) or board.closed:
        return
    for ref in refs:
        values = {c.key: ref["values"].get(c.key) for c in board.columns}
        board.rows.append(
            Row(
                rank=None,
                row_type="human",
                team=ref["team"],
                team_id=0,
                submission_id=None,
                method_name=ref["method_name"],
                url="",
                submitted_at=at,
                is_primary=False,
                values=values,
                note=ref["note"],
            )
        )
    for p in papers:  # published results, as declared by the task
        given = dict(p.values)
        board.rows.append(
            Row(
                rank=None,
                row_type="paper",
                team=p.team,
                team_id=0,
                submission_id=None,
                method_name=p.method,
                url="",
                submitted_at=at,
                is_primary=False,
                values={c.key: given.get(c.key) for c in board.columns},
                note=f"{p.source}{'; ' + p.note if p.note else ''}; not ranked",
            )
        )
    key, gib = board.primary.key, board.primary.greater_is_better
    board.rows.sort(
        key=lambda r: (
            r.values[key] is None,
            -(r.values[key] or 0.0) if gib else (r.values[key] or 0.0),
            r.row_type != "team",
        )
    )
