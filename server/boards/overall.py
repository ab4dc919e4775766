"""An overall board: each of its boards built as the audience sees it, and the overall rule
(scorer.overall) applied to each team's ranked values there."""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session

from scorer.overall import combine
from server.boards.board_model import Board, Column, Row
from server.boards.columns import _board_fields, _declared_of, _overall_columns
from server.boards.ranking import _rank
from server.boards.request import BoardRequest
from server.models import Phase


def _overall_board(s: Session, task, phase: Phase, req: BoardRequest, build) -> Board:
    """An overall board: each of its boards built as the audience sees it (`build`: the board
    builder, given the request with that board and every team's rows), each team's ranked row
    there read, and the rule applied to their values (scorer.overall). A team's row names the
    run of the first board it is on; its values are the boards' (each board's ranked run)."""
    board = req.board
    declared = _declared_of(phase)
    cols = _overall_columns(task, board, declared)
    comps = [
        build(s, task, phase, replace(req, board=declared.get(name), team=None))
        for name in board.overall.boards
    ]
    out = Board(
        task_id=task.id,
        phase=phase.name,
        split=phase.split,
        part=comps[0].part,
        published=comps[0].published,
        frozen=comps[0].frozen,
        gold=comps[0].gold,
        columns=cols,
        closed=any(c.closed for c in comps),
        # the boards' released values under the phase's release rule: its statistics withheld too
        release_rule=comps[0].release_rule,
        **_board_fields(board),
    )
    out._components = comps
    if not out.closed:
        out.rows = overall_rows(board, cols, comps)
    return out


def overall_rows(board, cols: list[Column], comps: list[Board]) -> list[Row]:
    """An overall board's rows, ranked and in order: each team ranked on any of its boards, its
    value the rule over its values there (the public part's beside it on a final ranking)."""
    prim = cols[0]
    teams, first = overall_teams(comps)
    K, n = len(comps), len(teams)
    present = [[t in rows for t in teams] for rows in (_ranked_rows(c) for c in comps)]
    vals = [
        [rows[t].values[c.primary.key] if t in rows else float("nan") for t in teams]
        for c, rows in ((c, _ranked_rows(c)) for c in comps)
    ]
    gib = [c.greater_is_better for c in cols[1:]]
    o = board.overall
    points = combine(vals, present, gib, o.rule, o.missing) if n else []
    pub_points = None
    if n and any(r.public_value is not None for c in comps for r in c.rows):
        # the final ranking (published, or its preview): the public part's beside it
        pub = [
            [
                rows[t].public_value
                if t in rows and rows[t].public_value is not None
                else float("nan")
                for t in teams
            ]
            for rows in (_ranked_rows(c) for c in comps)
        ]
        pub_present = [
            [p and v == v for p, v in zip(pr, pv, strict=True)]
            for pr, pv in zip(present, pub, strict=True)
        ]
        pub_points = combine(pub, pub_present, gib, o.rule, o.missing)
    rows = []
    for i, t in enumerate(teams):
        r0 = first[t]
        missing = [board.overall.boards[k] for k in range(K) if not present[k][i]]
        if missing and o.missing == "leave-out":
            continue
        v = float(points[i])
        values = {prim.key: None if v != v else v}
        for k, c in enumerate(cols[1:]):
            values[c.key] = vals[k][i] if present[k][i] else None
        row = Row(
            rank=None,
            row_type="team",
            team=r0.team,
            team_id=r0.team_id,
            submission_id=r0.submission_id,
            method_name=r0.method_name,
            url=r0.url,
            submitted_at=r0.submitted_at,
            is_primary=r0.is_primary,
            values=values,
            note=r0.note if r0.note == "not public" else "",
            chosen_by=f"{o.rule} over {K} boards",
            attempt=r0.attempt,
        )
        if pub_points is not None and pub_points[i] == pub_points[i]:
            row.public_value = float(pub_points[i])
        if missing:
            how = {"last": "ranked last there", "unranked": "unranked"}[o.missing]
            row.why_empty = f"not on {', '.join(missing)}: {how}"
        rows.append(row)
    ranks = _rank([r.values[prim.key] for r in rows], prim.greater_is_better)
    for r, rk in zip(rows, ranks, strict=True):
        r.rank = rk
    if pub_points is not None:
        for r, rk in zip(
            rows, _rank([r.public_value for r in rows], prim.greater_is_better), strict=True
        ):
            r.public_rank = rk
    gb = prim.greater_is_better
    rows.sort(
        key=lambda r: (
            r.values[prim.key] is None,
            -(r.values[prim.key] or 0.0) if gb else (r.values[prim.key] or 0.0),
            r.team,
        )
    )
    return rows


def _ranked_rows(board: Board) -> dict[int, Row]:
    """A board's ranked team rows, by team."""
    return {r.team_id: r for r in board.rows if r.row_type == "team" and r.rank is not None}


def overall_teams(comps: list[Board]) -> tuple[list[int], dict[int, Row]]:
    """The teams ranked on any of an overall board's boards, in a fixed order, and each one's row
    on the first board it is on."""
    first: dict[int, Row] = {}
    for c in comps:
        for t, r in _ranked_rows(c).items():
            first.setdefault(t, r)
    return sorted(first), first
