"""The ranking: competition ranks on the primary value (the public part's beside it on a final
ranking), the order of a board's rows, and a team's own row put onto the public board."""

from __future__ import annotations

from typing import Optional

from server.boards.board_model import Board, Row


def _rank(values: list[Optional[float]], greater_is_better: bool) -> list[Optional[int]]:
    """Competition ranking (1, 2, 2, 4): equal values share a rank; a missing value has none."""
    order = sorted((v for v in values if v is not None), reverse=greater_is_better)
    first: dict[float, int] = {}
    for i, v in enumerate(order):
        first.setdefault(v, i + 1)
    return [first[v] if v is not None else None for v in values]


def for_stats(board: Board) -> Board:
    """A copy of a built board to put statistics (or a team's row) on: the rows copied, their
    values shared; the built board stays as it was, for the next version of its statistics."""
    return board.model_copy(update={"rows": [r.model_copy() for r in board.rows]})


def overlay(public: Board, own: Row) -> Board:
    """A team's view of a board whose public view hides its row (its ranked run not shown
    publicly, or its name on an anonymous board): the public board (a copy) with the team's own
    row put in its place. The other rows keep their public ranks; the team's row is ranked where
    its value stands among them (equal values sharing the rank)."""
    out = for_stats(public)
    rows = [r for r in out.rows if not (r.row_type == "team" and r.team_id == own.team_id)]
    key, gib = out.primary.key, out.primary.greater_is_better
    v = own.values.get(key)
    if own.rank is not None and v is not None:
        own.rank = 1 + sum(
            1
            for r in rows
            if r.rank is not None
            and r.values.get(key) is not None
            and (r.values[key] > v if gib else r.values[key] < v)
        )

    def order(r: Row) -> tuple:
        x = r.values.get(key)
        return (x is None, -(x or 0.0) if gib else (x or 0.0), r.row_type != "team")

    mine = order(own)
    at = next((i for i, r in enumerate(rows) if order(r) > mine), len(rows))
    rows.insert(at, own)
    out.rows = rows
    return out


def rank_rows(rows: list[Row], prim, use_private: bool) -> None:
    """Rank a board's team rows that rank (those shown as they are, or marked "not public" to
    their own team and the organizers) by the primary value, the public part's rank beside it on a
    final ranking; then put every row in the board's order: by value, a team before a baseline on
    a tie, then by when it was made."""
    ranked = [r for r in rows if r.row_type == "team" and r.note in ("", "not public")]
    ranks = _rank([r.values[prim.key] for r in ranked], prim.greater_is_better)
    for r, rk in zip(ranked, ranks, strict=True):
        r.rank = rk
    if use_private:
        public_ranks = _rank([r.public_value for r in ranked], prim.greater_is_better)
        for r, rk in zip(ranked, public_ranks, strict=True):
            r.public_rank = rk

    gib = prim.greater_is_better

    def sort_key(r: Row):
        v = r.values[prim.key]
        missing = v is None
        return (
            missing,
            -(v or 0.0) if gib else (v or 0.0),
            r.row_type != "team",
            r.submitted_at,
            r.submission_id,
        )

    rows.sort(key=sort_key)
