"""The parameter-free ladder (`ladder-paired`, scorer.release) on a live board.

A team row shows what its ranked run releases given the team's runs before it on the board, in the
order made: a run is released (rounded to 1/n, n the public part's units) only when it beats the
team's best released run by more than the standard error of their paired difference over the
phase's resamples; otherwise the best is repeated. The resamples are the statistics job's (one
matrix per phase, each run's kept once computed), so the released value is written by that job
into the board's statistics body (`released`, per row) and put on the row when the body is
attached (server.boards.stats); until then the row shows no value.

The board builder (server.boards.leaderboard) keeps each team row's runs on the row (`hold`); the
statistics job turns them into the released value (`release`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from scorer.release import Rule, released

KIND = "ladder-paired"
PENDING = (
    "shown once the board's statistics have compared it with the team's best run (the "
    "parameter-free ladder)"
)


def is_paired(rule) -> bool:
    """Whether a board's release rule (as its JSON names it) is the parameter-free ladder."""
    return rule is not None and Rule.parse(rule).kind == KIND


def hold(rows, by_team: dict[int, list], attempts: dict[int, int]) -> None:
    """Keep on each team row the team's runs on the board up to its ranked run, in the order
    made: (submission id, score attempt, value with greater better, or None). `by_team`: each
    team's (submission id, signed value) in the order made; the rows' values stay as built (the
    statistics job needs them; `server.boards.stats` withholds them when it attaches)."""
    for r in rows:
        if r.row_type != "team":
            continue
        seq = by_team.get(r.team_id, [])
        at = next((i for i, (sid, _) in enumerate(seq) if sid == r.submission_id), None)
        r.ladder_runs = (
            []
            if at is None
            else [(sid, int(attempts.get(sid) or 0), v) for sid, v in seq[: at + 1]]
        )


def release(
    runs: list[tuple[int, int, float | None]],
    samples_of: Callable[[int, int], np.ndarray],
    n_units: int,
) -> float | None:
    """What the last of a team's runs (`hold`'s list) releases under the parameter-free ladder,
    greater better: `samples_of(submission id, attempt)` gives a run's B resampled values on the
    board's part (the phase's one matrix, so the runs' resamples are paired), read only for the
    runs with a value. None: the last run has no value."""
    if not runs or runs[-1][2] is None:
        return None
    scores = [v if v is not None and math.isfinite(v) else None for _, _, v in runs]
    samples = [
        None if v is None else samples_of(sid, att)
        for (sid, att, _), v in zip(runs, scores, strict=True)
    ]
    return released(scores, Rule(KIND), samples=samples, n_units=n_units)[-1]


__all__ = ["KIND", "PENDING", "hold", "is_paired", "release"]
