"""A board's rank statistics at scale (one sort per resample for the rank ranges, one Gram product
for the pairwise p-values) equal the quadratic computation they replace, kept here as the naive
reference: the R x R x B comparison for the ranks and the pairwise loop for the p-values. Rank
ranges, intervals and clusters bit for bit; the p-values to 1e-12 (the reference is itself a
floating-point computation, in another order of summation)."""

from __future__ import annotations

import numpy as np
import pytest
from boardkit import naive_board_statistics
from boardkit import paired_board as _board

from scorer import bootstrap as bs

CASES = [
    dict(seed=0, R=2, B=50),
    dict(seed=1, R=3, B=200),
    dict(seed=2, R=12, B=300, ties=True),
    dict(seed=3, R=25, B=400, rounded=True),
    dict(seed=4, R=40, B=1000, ties=True, undefined=True),
    dict(seed=5, R=17, B=101, rounded=True, ties=True, undefined=True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("greater", [True, False])
def test_rank_statistics_equal_the_quadratic_reference(case, greater):
    samples, points = _board(**case)
    want = naive_board_statistics(samples, points, greater)
    got = bs.rank_statistics(samples, points, greater, full=True)
    # exact where the reference is exact: intervals, rank ranges (integers), clusters
    assert got["ci"] == want["ci"]
    assert got["rank_range"] == want["rank_range"]
    assert got["cluster"] == want["cluster"]
    P, H = np.array(got["p"]), np.array(got["p_holm"])
    assert np.array_equal(P, P.T) and np.array_equal(H, H.T)
    np.testing.assert_allclose(P, want["p"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H, want["p_holm"], rtol=1e-12, atol=1e-12)
    # the neighbours' and the cluster heads' p-values are the matrix's entries
    order = got["order"]
    for a, b in zip(order, order[1:], strict=False):
        assert got["p_next"][a] == P[a, b] and got["p_holm_next"][a] == H[a, b]
    assert got["p_next"][order[-1]] is None
    heads = {}
    for r in order:
        heads.setdefault(got["cluster"][r], r)
    for r in range(len(order)):
        h = heads[got["cluster"][r]]
        assert got["p_head"][r] == (None if h == r else P[h, r])


def test_the_full_matrix_only_on_request_beyond_a_small_board():
    samples, points = _board(seed=6, R=bs.FULL_MATRIX_ROWS + 5, B=200)
    st = bs.rank_statistics(samples, points, True)
    assert "p" not in st and "p_holm" not in st
    assert len(st["cluster"]) == len(st["rank_range"]) == bs.FULL_MATRIX_ROWS + 5
    full = bs.rank_statistics(samples, points, True, full=True)
    pk = ("p_next", "p_holm_next", "p_head", "p_holm_head")
    assert {k: v for k, v in full.items() if k not in ("p", "p_holm", *pk)} == {
        k: v for k, v in st.items() if k not in pk
    }
    for k in pk:  # computed without the matrix: the same to the rounding of the product
        np.testing.assert_allclose(
            [np.nan if v is None else v for v in st[k]],
            [np.nan if v is None else v for v in full[k]],
            rtol=1e-12,
        )
    small = bs.rank_statistics(*_board(seed=7, R=5, B=100), True)
    assert np.array(small["p"]).shape == (5, 5)


def test_one_resampling_feeds_several_rankings():
    """A subset of the phase's rows (another board of the same phase) ranks on the same resamples:
    its statistics are those of the subset's rows alone."""
    samples, points = _board(seed=8, R=20, B=300, ties=True)
    rows = [0, 2, 3, 7, 11, 19]
    sub = bs.rank_statistics(samples[rows], points[rows], True, full=True)
    want = naive_board_statistics(samples[rows], points[rows], True)
    assert sub["rank_range"] == want["rank_range"] and sub["cluster"] == want["cluster"]
    assert max(r[1] for r in sub["rank_range"]) <= len(rows)


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("undefined")], ids=str)
def test_the_pairs_p_values_without_a_matrix_are_the_matrixs(case, monkeypatch):
    """A large board's statistics hold no R x R array: the pairs' p-values are computed a block of
    rows at a time into one vector, and Holm's correction read from it one pair at a time; both
    equal the matrices' entries (small blocks and chunks here, to cross their edges)."""
    samples, points = _board(**case)
    R = len(points)
    P = bs.paired_pvalues(samples, points)
    H = bs.holm(P)
    cond = bs.condensed_pvalues(samples, points, block=3)
    iu = np.triu_indices(R, 1)
    np.testing.assert_allclose(cond, P[iu], rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(bs.HolmOf, "CHUNK", 4)
    holm_of = bs.HolmOf(P[iu])
    assert [holm_of(p) for p in P[iu]] == H[iu].tolist()
    full = bs.rank_statistics(samples, points, True, full=True)
    lean = bs.rank_statistics(samples, points, True, full=False)
    assert lean["cluster"] == full["cluster"] and "p" not in lean
    for k in ("p_next", "p_holm_next", "p_head", "p_holm_head"):
        want = np.array([np.nan if v is None else v for v in full[k]])
        got = np.array([np.nan if v is None else v for v in lean[k]])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("greater", [True, False])
def test_each_resamples_ranks_are_one_plus_the_rows_strictly_better(case, greater):
    """The ranks read from each resample's sort (the end of a score's run of ties) are the
    competition ranks: 1 + the rows strictly better, an undefined score last (chunks of 7
    resamples here, to cross their edges)."""
    samples, _ = _board(**case)
    s = np.where(np.isfinite(samples), samples if greater else -samples, -np.inf)
    want = 1 + (s[None, :, :] > s[:, None, :]).sum(axis=1)
    got = bs._resample_ranks(samples, greater, np.int32, chunk=7)
    assert got.dtype == np.int32 and (got == want).all()
