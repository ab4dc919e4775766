"""The agreement measures of tasks/agreement_measures.py against naive loops and libraries.

Each measure is recomputed here by a plain loop over items, annotators and pairs of judgments
(hand-checkable tables, then hypothesis-generated ones with missing judgments), and compared with
`krippendorff.alpha`, `sklearn.metrics.cohen_kappa_score` and statsmodels' `fleiss_kappa` (complete
tables only: it takes no missing judgments)."""

from __future__ import annotations

import itertools
import math

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.agreement_measures import Table, agreement, table_from_rows, weighted

NAN = float("nan")


def _judged(row):
    return [(x, v) for x, v in enumerate(row) if not math.isnan(v)]


def naive(values: list[list[float]]) -> dict:
    """Observed agreement, multi-kappa, Fleiss' pi and Cohen's kappa per pair, by plain loops."""
    rows = [r for r in values if len(_judged(r)) >= 2]
    labels = sorted({v for r in rows for _, v in _judged(r)})
    a = len(values[0])
    agr = []
    pair_weight = {p: 0.0 for p in itertools.combinations(range(a), 2)}
    for r in rows:
        js = _judged(r)
        pairs = list(itertools.combinations(js, 2))
        agr.append(sum(1 for (_, u), (_, v) in pairs if u == v) / len(pairs))
        for (x, _), (y, _) in pairs:
            pair_weight[(x, y)] += 1 / len(pairs)
    a_o = sum(agr) / len(agr)
    own = {}
    for x in range(a):
        mine = [r[x] for r in rows if not math.isnan(r[x])]
        own[x] = {lab: (mine.count(lab) / len(mine) if mine else 0.0) for lab in labels}
    a_e = sum(
        w * sum(own[x][lab] * own[y][lab] for lab in labels) for (x, y), w in pair_weight.items()
    ) / sum(pair_weight.values())
    # eq. 7-8 as printed: every annotator pair that judged an item together counts once
    ao_pairs, ae_pairs = [], []
    for x, y in itertools.combinations(range(a), 2):
        both = [(r[x], r[y]) for r in rows if not math.isnan(r[x]) and not math.isnan(r[y])]
        if both:
            ao_pairs.append(sum(1 for u, v in both if u == v) / len(both))
            ae_pairs.append(sum(own[x][lab] * own[y][lab] for lab in labels))
    a_o_eq7 = sum(ao_pairs) / len(ao_pairs)
    a_e_eq8 = sum(ae_pairs) / len(ae_pairs)
    every = [v for r in rows for _, v in _judged(r)]
    a_e_pi = sum((every.count(lab) / len(every)) ** 2 for lab in labels)
    cohen = {}
    for x, y in itertools.combinations(range(a), 2):
        both = [(r[x], r[y]) for r in rows if not math.isnan(r[x]) and not math.isnan(r[y])]
        if not both:
            continue
        po = sum(1 for u, v in both if u == v) / len(both)
        pe = sum(
            (sum(1 for u, _ in both if u == lab) / len(both))
            * (sum(1 for _, v in both if v == lab) / len(both))
            for lab in labels
        )
        cohen[(x, y)] = (po - pe) / (1 - pe) if pe < 1 else NAN
    return {
        "observed": a_o,
        "observed_pairs": a_o_eq7,
        "expected_kappa": a_e_eq8,
        "multi_kappa": (a_o_eq7 - a_e_eq8) / (1 - a_e_eq8) if a_e_eq8 < 1 else NAN,
        "expected_kappa_weighted": a_e,
        "multi_kappa_weighted": (a_o - a_e) / (1 - a_e) if a_e < 1 else NAN,
        "fleiss_pi": (a_o - a_e_pi) / (1 - a_e_pi) if a_e_pi < 1 else NAN,
        "cohen": cohen,
    }


def point(values, level="nominal"):
    t = Table(np.array(values, dtype=float))
    return t, {k: float(v[0]) for k, v in weighted(t, np.ones((1, t.n_items)), level).items()}


def close(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-9)


def test_a_hand_checked_table():
    # 3 annotators, 4 items: the 12 pairs of judgments, 7 of them in agreement per item share
    values = [[0, 0, 0], [0, 1, 1], [1, 1, 1], [1, 0, NAN]]
    _, got = point(values)
    # per item: 1, 1/3, 1, 0 -> A_o = 7/12
    assert got["observed"] == pytest.approx(7 / 12)
    # annotators' own distributions: a0 (2/4 zeros), a1 (2/4), a2 (1/3); pair weights: (0,1)
    # 1/3*3 + 1 = 2, (0,2) 1, (1,2) 1
    p = {0: 0.5, 1: 0.5, 2: 1 / 3}
    s = {(x, y): p[x] * p[y] + (1 - p[x]) * (1 - p[y]) for x, y in [(0, 1), (0, 2), (1, 2)]}
    a_e = (2 * s[(0, 1)] + s[(0, 2)] + s[(1, 2)]) / 4
    assert got["multi_kappa_weighted"] == pytest.approx((7 / 12 - a_e) / (1 - a_e))
    # eq. 7-8: pair (0,1) agrees on 2 of 4 items, (0,2) on 2 of 3, (1,2) on 3 of 3; uniform
    a_o7 = (2 / 4 + 2 / 3 + 3 / 3) / 3
    a_e8 = (s[(0, 1)] + s[(0, 2)] + s[(1, 2)]) / 3
    assert got["observed_pairs"] == pytest.approx(a_o7)
    assert got["multi_kappa"] == pytest.approx((a_o7 - a_e8) / (1 - a_e8))
    # pooled: 5 zeros of 11 judgments
    a_e_pi = (5 / 11) ** 2 + (6 / 11) ** 2
    assert got["fleiss_pi"] == pytest.approx((7 / 12 - a_e_pi) / (1 - a_e_pi))
    # annotators 0 and 1 agree on 2 of their 4 items and each gives two zeros: chance level
    assert got["cohen:0|1"] == pytest.approx(0.0)
    # annotators 1 and 2 agree on the three items both judged, with both labels: 1
    assert got["cohen:1|2"] == pytest.approx(1.0)


def test_complete_data_gives_the_papers_uniform_average_over_pairs():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 3, size=(40, 3)).astype(float)
    _, got = point(values)
    own = [np.bincount(values[:, x].astype(int), minlength=3) / 40 for x in range(3)]
    a_e = np.mean([own[x] @ own[y] for x, y in itertools.combinations(range(3), 2)])
    assert got["expected_kappa"] == pytest.approx(a_e)
    # on a complete table the generalisation reduces to eq. 7-8
    assert got["expected_kappa_weighted"] == pytest.approx(a_e)
    assert got["multi_kappa_weighted"] == pytest.approx(got["multi_kappa"], abs=1e-12)


tables = st.integers(2, 5).flatmap(
    lambda a: st.lists(
        st.lists(st.one_of(st.just(NAN), st.integers(1, 4).map(float)), min_size=a, max_size=a),
        min_size=2,
        max_size=30,
    )
)


@settings(max_examples=150, deadline=None)
@given(tables)
def test_equal_to_naive_loops_and_libraries(values):
    from sklearn.metrics import (
        cohen_kappa_score,
    )

    if sum(1 for r in values if len(_judged(r)) >= 2) == 0:
        return
    t, got = point(values)
    want = naive(values)
    for key in (
        "observed",
        "observed_pairs",
        "expected_kappa",
        "multi_kappa",
        "expected_kappa_weighted",
        "multi_kappa_weighted",
        "fleiss_pi",
    ):
        assert close(got[key], want[key]), key
    for (x, y), k in want["cohen"].items():
        assert close(got[f"cohen:{x}|{y}"], k)
        rows = [r for r in values if len(_judged(r)) >= 2]
        u = [r[x] for r in rows if not math.isnan(r[x]) and not math.isnan(r[y])]
        v = [r[y] for r in rows if not math.isnan(r[x]) and not math.isnan(r[y])]
        if len(set(u) | set(v)) > 1:
            with np.errstate(invalid="ignore", divide="ignore"):
                sk = cohen_kappa_score(u, v)
            assert close(got[f"cohen:{x}|{y}"], float(sk))
    data = np.array(values, dtype=float).T
    if len(set(t.labels)) > 1:
        for level in ("nominal", "ordinal", "interval"):
            _, lv = point(values, level)
            want_alpha = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
            assert close(lv["alpha"], float(want_alpha)), level


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 5).flatmap(
        lambda a: st.lists(
            st.lists(st.integers(0, 2).map(float), min_size=a, max_size=a), min_size=2, max_size=25
        )
    )
)
def test_fleiss_pi_equals_statsmodels_on_complete_tables(values):
    sm = pytest.importorskip("statsmodels.stats.inter_rater")
    _, got = point(values)
    counts = np.array([[r.count(float(c)) for c in range(3)] for r in values])
    with np.errstate(invalid="ignore", divide="ignore"):
        want = float(sm.fleiss_kappa(counts, method="fleiss"))
    assert close(got["fleiss_pi"], want)


def test_bootstrap_is_seeded_recorded_and_equal_to_a_naive_resampling():
    rng = np.random.default_rng(2)
    values = rng.integers(0, 2, size=(30, 3)).astype(float)
    values[rng.random(values.shape) < 0.2] = NAN
    t = Table(values)
    got = agreement(t, n_boot=200, seed=11)
    assert got["bootstrap"] == {"replicates": 200, "seed": 11, "confidence": 0.95}
    assert agreement(t, n_boot=200, seed=11) == got
    # the same draws (n item indices with replacement, 250 replicates at a time from the seeded
    # generator), each resampled table recomputed by the naive loop
    n = t.n_items
    rng = np.random.default_rng(11)
    kappas = []
    for idx in rng.integers(0, n, size=(200, n)):
        kappas.append(naive([t.values[i].tolist() for i in idx])["multi_kappa"])
    kappas = np.array(kappas)
    kappas = kappas[np.isfinite(kappas)]
    assert got["multi_kappa"]["low"] == pytest.approx(np.quantile(kappas, 0.025))
    assert got["multi_kappa"]["high"] == pytest.approx(np.quantile(kappas, 0.975))
    assert got["multi_kappa"]["low"] <= got["multi_kappa"]["value"] <= got["multi_kappa"]["high"]


def test_rows_with_missing_judgments_and_single_judgments():
    rows = [("a", "i1", 1), ("b", "i1", 1), ("a", "i2", 2), ("c", "i3", 1), ("b", "i3", 2)]
    rows.append(("c", "i4", 1))  # judged once: no pair, left out
    t, ids = table_from_rows(rows)
    assert ids == ["i1", "i3"]
    assert t.n_items == 2
    with pytest.raises(ValueError, match="label 5.0 is not among"):
        Table(np.array([[5.0, 5.0]]), labels=[1.0, 2.0])


def test_a_factor_level_with_the_datasets_expected_agreement():
    """Table 3's form: a level's eq. 7 A_o against the whole table's eq. 8 A_e, beside the level's
    own A_e; the interval from the same replicates as the level's A_o."""
    from tasks.agreement_measures import by_factor

    rng = np.random.default_rng(4)
    values = rng.integers(0, 2, size=(40, 3)).astype(float)
    values[rng.random(values.shape) < 0.25] = NAN
    t = Table(values)
    mask = np.arange(t.n_items) % 2 == 0
    whole = naive(t.values.tolist())
    part = naive(t.values[mask].tolist())
    got = by_factor(t, {"even": mask, "odd": ~mask}, n_boot=100, seed=3)[0]
    assert got["level"] == "even"
    assert got["multi_kappa"]["value"] == pytest.approx(part["multi_kappa"], abs=1e-12)
    a_e = whole["expected_kappa"]
    assert got["dataset_expected_kappa"] == pytest.approx(a_e, abs=1e-12)
    want = (part["observed_pairs"] - a_e) / (1 - a_e)
    assert got["multi_kappa_dataset_expected"]["value"] == pytest.approx(want, abs=1e-12)
    lo, hi = got["observed_pairs"]["low"], got["observed_pairs"]["high"]
    assert got["multi_kappa_dataset_expected"]["low"] == pytest.approx((lo - a_e) / (1 - a_e))
    assert got["multi_kappa_dataset_expected"]["high"] == pytest.approx((hi - a_e) / (1 - a_e))


def test_a_dataset_of_one_label_leaves_the_levels_kappa_undefined_without_a_warning():
    """Every judgment the same label: the dataset's A_e is 1, eq. 7's kappa against it 0/0; the
    level reports no value and no interval (and numpy no division warning)."""
    import warnings

    from tasks.agreement_measures import by_factor

    t = Table(np.ones((12, 3)))
    mask = np.arange(t.n_items) < 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = by_factor(t, {"first": mask, "last": ~mask}, n_boot=50, seed=1)
    for level in got:
        assert level["dataset_expected_kappa"] == 1.0
        assert level["multi_kappa_dataset_expected"] == {"value": None, "low": None, "high": None}
