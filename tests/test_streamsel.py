"""Statistics whose memory is linear in rows: Holm's correction over every pair read from passes
over the pairs (`scorer.streamsel`), holding no value per pair, equals the full computation bit for
bit: the adjusted p-values against `holm` on the whole vector, the clusters, the neighbours' and
heads' p-values against the walk over the full matrices, the simultaneous rank sets against the
positive statistics held in memory. Small budgets force every level (splits down to single
values, read-outs of a few)."""

from __future__ import annotations

import numpy as np
import pytest
from boardkit import paired_board as _board

from scorer import bootstrap as bs
from scorer import ranksets as rs
from scorer import streamsel


def _streams(vals, piece=7):
    def stream():
        for a in range(0, vals.size, piece):
            yield vals[a : a + piece]

    return stream


def _naive_holm(vals):
    """`holm` on the values as the upper triangle of a matrix (the reference)."""
    m = vals.size
    R = int(round((1 + np.sqrt(1 + 8 * m)) / 2))
    P = np.ones((R, R))
    P[np.triu_indices(R, 1)] = vals
    P.T[np.triu_indices(R, 1)] = vals
    return bs.holm(P)[np.triu_indices(R, 1)]


def _value_sets():
    rng = np.random.default_rng(3)
    yield rng.uniform(0, 1, 45)  # 10 rows' pairs
    yield np.round(rng.uniform(0, 0.05, 66), 3)  # ties
    v = 10.0 ** rng.uniform(-300, -1, 105)
    v[::5] = 0.0
    v[::7] = 1.0
    yield v
    yield np.full(28, 0.01)
    yield np.concatenate([rng.uniform(0, 1e-4, 150), rng.uniform(0.01, 1, 40)])


@pytest.mark.parametrize("budget", [0, 5, 1 << 20])
def test_holm_queries_equal_holm_on_every_value(budget):
    for vals in _value_sets():
        want = _naive_holm(vals)
        for alpha in (0.05, 0.5, 1e-6):
            got, cut, _ = streamsel.holm_queries(_streams(vals), vals.size, vals, alpha, budget)
            assert got.tolist() == want.tolist()
            # a value is rejected at alpha exactly when it lies below the cut
            assert ((vals < cut) == (want < alpha)).all()


def _shown(samples, points, alpha):
    """The clusters and shown p-values from the full matrices of the same p-values (`clusters`
    on `holm` of the whole matrix: the naive walk)."""
    R = len(points)
    P = np.ones((R, R))
    iu = np.triu_indices(R, 1)
    cond = bs.condensed_pvalues(samples, points)
    P[iu] = cond
    P.T[iu] = cond
    H = bs.holm(P)
    order = bs.point_order(points, True)
    cluster = bs.clusters(H, order, alpha)
    head = {}
    for r in order:
        head.setdefault(cluster[r], r)
    nxt = dict(zip(order, order[1:], strict=False))
    return {
        "cluster": cluster,
        "p_next": [float(P[r, nxt[r]]) if r in nxt else None for r in range(R)],
        "p_holm_next": [float(H[r, nxt[r]]) if r in nxt else None for r in range(R)],
        "p_head": [
            None if head[cluster[r]] == r else float(P[head[cluster[r]], r]) for r in range(R)
        ],
        "p_holm_head": [
            None if head[cluster[r]] == r else float(H[head[cluster[r]], r]) for r in range(R)
        ],
    }


@pytest.mark.parametrize(
    "case",
    [
        dict(seed=2, R=12, B=300, ties=True),
        dict(seed=3, R=25, B=400, rounded=True),
        dict(seed=7, R=41, B=200),
    ],
    ids=str,
)
@pytest.mark.parametrize("budget", [0, 9])
def test_streamed_rank_statistics_equal_the_full_matrix(case, budget, monkeypatch):
    samples, points = _board(**case)
    monkeypatch.setattr(bs, "FULL_MATRIX_ROWS", 0)
    monkeypatch.setattr(bs, "PAIR_BUDGET", 0)
    monkeypatch.setattr(bs, "streamsel_budget", lambda: budget)
    for alpha in (0.05, 0.3):
        got = bs.rank_statistics(samples, points, True, alpha)
        want = _shown(samples, points, alpha)
        assert {k: got[k] for k in want} == want
        assert "p" not in got
    assert max(want["cluster"]) > 1 and min(v for v in want["p_holm_next"] if v) < 1


@pytest.mark.parametrize("budget", [0, 4])
def test_streamed_simultaneous_sets_equal_the_held_statistics(budget, monkeypatch):
    for seed, R in ((1, 9), (4, 30)):
        samples, points = _board(seed=seed, R=R, B=150, ties=True)
        for alpha in (0.05, 0.3):
            want = rs.rank_sets(samples, points, True, alpha, max_t_rows=0)
            with monkeypatch.context() as mp:
                mp.setattr(rs, "PAIR_BUDGET", 0)
                mp.setattr(rs, "streamsel_budget", lambda: budget)
                got = rs.rank_sets(samples, points, True, alpha, max_t_rows=0)
            assert got == want
            assert any(lo > 1 for lo, _ in want["simultaneous"])
