"""An overall ranking over several boards of a phase: a rule that turns each team's values on the
boards into one value, applied alike to the point values and to each bootstrap resample, so that
the overall value has an interval, a rank range and rank sets like any board's.

The boards of one phase resample the same units with one matrix of multiplicities (a board never
draws its own), so resample b of every board is one draw of the gold: the rule applied to the
boards' resample b is the overall value on that draw. This is the item-level uncertainty carried
through the rule; the boards themselves are fixed (the declared set, not a sample of possible
boards).

Rules (each board's values read in its own direction):

- `mean`: the mean of the boards' values (boards ranked in one direction; higher or lower is
  better as they are). Colombo et al. (NeurIPS 2022) call it the mean aggregation.
- `borda`: on each board a team scores the number of teams on that board it beats (a tie half a
  point); the overall value is the sum (higher is better), as MTEB ranks and Vote'n'Rank (Rofin et
  al., EACL 2023) define it. A team absent from a board scores nothing there.
- `mean-rank`: the mean over the boards of the team's rank among the board's teams (ties share
  the mean of their places; lower is better). With every team on every board it orders teams as
  `borda` does (a team's Borda points on a board are the number of teams less its rank); they
  differ when teams are missing: Borda counts only the teams a board has.

A team missing a board (`missing`):

- `leave-out`: no row; the rule is taken over the teams that have every board.
- `unranked`: the same ranking, the team shown without an overall value or rank, naming what it
  misses.
- `last`: ranked, and placed last on each board it misses: tied with the other absent teams below
  every present one (`mean-rank`), no points (`borda`), the board's worst value among the teams
  (`mean`; on each resample the worst resampled value).

A resample on which a present team's value is undefined (NaN) makes its overall value undefined
on that resample (`mean`), or places it last on that board (the rank rules).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

RULES = ("mean", "borda", "mean-rank")
MISSING = ("leave-out", "unranked", "last")


def rule_direction(rule: str, directions) -> bool:
    """Whether a higher overall value is better under `rule`, the boards' directions given."""
    if rule == "mean":
        directions = set(bool(d) for d in directions)
        if len(directions) != 1:
            raise ValueError("a mean over boards ranked in opposite directions is undefined")
        return directions.pop()
    if rule == "borda":
        return True
    if rule == "mean-rank":
        return False
    raise ValueError(f"unknown overall rule {rule!r} ({', '.join(RULES)})")


def combine(values, present, directions, rule: str, missing: str) -> np.ndarray:
    """The overall values of n teams over K boards.

    `values`: (K, n) or (K, n, B) array, each board's value of each team (its point values or its
    B resampled ones); `present`: (K, n) booleans, whether the team is on the board (its value
    there then is what `values` says, NaN only on an undefined resample); `directions`: the K
    boards' greater_is_better. Returns (n,) or (n, B): NaN for a team with no overall value (one
    missing a board under `leave-out` or `unranked`)."""
    if rule not in RULES:
        raise ValueError(f"unknown overall rule {rule!r} ({', '.join(RULES)})")
    if missing not in MISSING:
        raise ValueError(f"unknown treatment of a missing board {missing!r} ({', '.join(MISSING)})")
    x = np.asarray(values, dtype=np.float64)
    squeeze = x.ndim == 2
    if squeeze:
        x = x[:, :, None]
    K, n, B = x.shape
    present = np.asarray(present, dtype=bool).reshape(K, n)
    complete = present.all(axis=0)
    # the teams the rule is taken over
    part = np.ones(n, dtype=bool) if missing == "last" else complete
    out = np.full((n, B), np.nan)
    if part.any():
        # each board in turn (a view when every team takes part: no copy of the K boards)
        sub = x if part.all() else x[:, part, :]
        pres = present[:, part]
        if rule == "mean":
            rule_direction(rule, directions)
            total = np.zeros(sub.shape[1:])
            for k in range(K):
                v = sub[k]
                if (~pres[k]).any():
                    # the worst value among the present teams, on each resample
                    here = v[pres[k]]
                    if here.size:
                        with warnings.catch_warnings():  # an all-NaN resample: NaN
                            warnings.simplefilter("ignore", RuntimeWarning)
                            pick = np.nanmin if directions[k] else np.nanmax
                            worst = pick(here, axis=0)
                    else:
                        worst = np.full(B, np.nan)
                    v = np.where(pres[k][:, None], v, worst[None, :])
                total += v
            out[part] = total / K
        else:
            m = int(part.sum())
            total = np.zeros((m, B))
            for k in range(K):
                sgn = 1.0 if directions[k] else -1.0
                s = np.where(pres[k][:, None] & np.isfinite(sub[k]), sgn * sub[k], -np.inf)
                rank = _average_ranks(s)  # 1: the best; absent: tied last
                if rule == "borda":
                    here = pres[k][:, None] & np.isfinite(sub[k])
                    total += np.where(here, here.sum(axis=0)[None, :] - rank, 0.0)
                else:
                    total += rank
            out[part] = total if rule == "borda" else total / K
    return out[:, 0] if squeeze else out


def _average_ranks(s: np.ndarray) -> np.ndarray:
    """Each column's ranks, the largest first (1), equal values sharing the mean of their places
    (-inf, the absent, tied last)."""
    m = s.shape[0]
    order = np.argsort(-s, axis=0, kind="stable")
    srt = np.take_along_axis(s, order, axis=0)
    pos = np.broadcast_to(np.arange(1, m + 1)[:, None], srt.shape)
    first = np.ones(srt.shape, dtype=bool)
    first[1:] = srt[1:] != srt[:-1]
    last = np.ones(srt.shape, dtype=bool)
    last[:-1] = srt[:-1] != srt[1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=0)
    end = np.flip(
        np.minimum.accumulate(np.flip(np.where(last, pos, m + 1), axis=0), axis=0), axis=0
    )
    out = np.empty(srt.shape)
    np.put_along_axis(out, order, (start + end) / 2.0, axis=0)
    return out


def naive_combine(values, present, directions, rule: str, missing: str) -> list:
    """The same for point values, one team and one board at a time (the tests' reference)."""
    K, n = len(values), len(values[0])
    if missing == "last":
        part = list(range(n))
    else:
        part = [i for i in range(n) if all(present[k][i] for k in range(K))]
    out = [float("nan")] * n
    for i in part:
        acc = 0.0
        for k in range(K):
            sgn = 1.0 if directions[k] else -1.0
            on = [j for j in part if present[k][j] and values[k][j] == values[k][j]]
            if rule == "mean":
                if present[k][i]:
                    acc += values[k][i]
                else:
                    acc += (min if directions[k] else max)(values[k][j] for j in on)
                continue
            if i in on:
                better = sum(1 for j in part if j in on and sgn * values[k][j] > sgn * values[k][i])
                tied = sum(1 for j in part if j != i and j in on and values[k][j] == values[k][i])
            else:  # absent: below every present team, tied with the other absent ones
                better = len(on)
                tied = len(part) - len(on) - 1
            rank = 1 + better + tied / 2
            if rule == "borda":
                acc += (len(on) - rank) if i in on else 0.0
            else:
                acc += rank
        out[i] = acc if rule == "borda" else acc / K
    return out


def boards_won(values, samples, present, directions, alpha: float = 0.05) -> np.ndarray:
    """For each ordered pair of teams (i, j): on how many of their common boards i is better than
    j, claimed with family-wise control (Dror, Baumer, Bogomolov and Reichart, "Replicability
    Analysis for Natural Language Processing: Testing Significance with Multiple Datasets", TACL
    2017: the partial conjunction tests with Bonferroni's combination, stopped at the first count
    not rejected).

    On board k, p_k is the one-sided p-value of "i is not better than j": the paired difference's
    standardised value against the standard deviation of its resamples (the normal approximation
    the board's p-values use). For u = 1, 2, ...: "i is better on at least u of the K boards" is
    rejected when (K - u + 1) p_(u) <= alpha', p_(u) the u-th smallest; the count is the largest u
    reached. alpha' = alpha / (n (n - 1)): Bonferroni over every ordered pair, so that every count
    of the matrix holds at once with probability 1 - alpha. `values`: (K, n) point values;
    `samples`: (K, n, B); `present`: (K, n). Returns an (n, n) integer array (0 on the diagonal)."""
    v = np.asarray(values, dtype=np.float64)
    x = np.asarray(samples, dtype=np.float64)
    present = np.asarray(present, dtype=bool)
    K, n = v.shape
    out = np.zeros((n, n), dtype=np.int64)
    if n < 2:
        return out
    a = alpha / (n * (n - 1))
    sgn = np.where(np.asarray(directions, dtype=bool), 1.0, -1.0)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            ps = []
            for k in range(K):
                if not (present[k, i] and present[k, j]):
                    continue
                d = sgn[k] * (x[k, i] - x[k, j])
                d = d[np.isfinite(d)]
                obs = sgn[k] * (v[k, i] - v[k, j])
                se = float(np.std(d, ddof=1)) if d.size >= 2 else 0.0
                if se > 0:
                    ps.append(0.5 * math.erfc(obs / se / math.sqrt(2.0)))
                else:
                    ps.append(0.0 if obs > 0 else 1.0)
            ps.sort()
            m = len(ps)
            won = 0
            for u in range(1, m + 1):
                if (m - u + 1) * ps[u - 1] <= a:
                    won = u
                else:
                    break
            out[i, j] = won
    return out
