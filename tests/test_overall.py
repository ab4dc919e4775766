"""Overall rankings over a phase's boards (issue 61): each rule's value, on point values and on
every resample, equals a direct loop over teams and boards; a team missing a board is placed as
declared."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scorer.overall import MISSING, RULES, combine, naive_combine


def _world(seed=0, K=3, n=7, B=40):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 0.1, size=(K, n, B)).round(2)  # rounded: ties happen
    present = rng.random((K, n)) > 0.25
    present[:, 0] = True  # one team on every board
    present[:, 1] = True
    return x, present, [True, True, False][:K]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("missing", MISSING)
def test_each_rule_equals_a_direct_loop_on_every_resample(rule, missing):
    x, present, dirs = _world()
    if rule == "mean":
        dirs = [True] * len(dirs)
    got = combine(x, present, dirs, rule, missing)
    assert got.shape == x.shape[1:]
    for b in range(x.shape[2]):
        want = naive_combine(x[:, :, b].tolist(), present.tolist(), dirs, rule, missing)
        for i, w in enumerate(want):
            if math.isnan(w):
                assert np.isnan(got[i, b]), (rule, missing, i, b)
            else:
                assert got[i, b] == pytest.approx(w, abs=1e-12), (rule, missing, i, b)
    # point values: the same function on a (K, n) array
    pts = combine(x[:, :, 0], present, dirs, rule, missing)
    assert np.array_equal(np.isnan(pts), np.isnan(got[:, 0]))
    np.testing.assert_allclose(pts[~np.isnan(pts)], got[~np.isnan(pts), 0])


def test_a_team_missing_a_board_is_placed_as_declared():
    # three teams, two boards; team 2 is not on board 1
    x = np.array([[0.9, 0.5, 0.7], [0.8, 0.6, np.nan]])
    present = np.array([[True, True, True], [True, True, False]])
    for rule in RULES:
        for missing in ("leave-out", "unranked"):
            got = combine(x, present, [True, True], rule, missing)
            assert np.isnan(got[2]) and not np.isnan(got[:2]).any()
        last = combine(x, present, [True, True], rule, "last")
        assert not np.isnan(last).any()
    # ranked last on the board it misses: its mean takes that board's worst value
    assert combine(x, present, [True, True], "mean", "last")[2] == pytest.approx((0.7 + 0.6) / 2)
    # mean rank: 2nd on board 0, 3rd (last) on board 1
    assert combine(x, present, [True, True], "mean-rank", "last")[2] == pytest.approx(2.5)
    # Borda: a point for each team beaten on a board, none where absent (team 0 beats two teams
    # on board 0 and the one other team board 1 has)
    assert combine(x, present, [True, True], "borda", "last").tolist() == [3.0, 0.0, 1.0]


def test_a_mean_over_boards_of_opposite_directions_is_refused():
    with pytest.raises(ValueError, match="opposite"):
        combine(np.zeros((2, 3)), np.ones((2, 3)), [True, False], "mean", "last")
