"""PAN text alignment's measures (scorer/spans.py) against PAN's own evaluator (pan-code's PAN 2015
character, case and document level, loaded from where `fetch` put it; skipped, saying why, where it
is absent) and, always, against a naive implementation written from the definitions; on generated
PAN-format corpora and adversarial runs (overlapping and repeated detections, one detection
covering two cases, a case detected in ten pieces, an empty run, detections of pairs not in the
corpus). The bootstrap's weighted sums against the measures on a resampled corpus built pair by
pair."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from pankit import (
    adversarial_runs,
    corpus_arrays,
    naive,
    ours,
    pan_evaluate,
    pan_reference,
    write_run,
)

from scorer import spans
from tasks import pan

TOL = 1e-12
CHARACTER = ("precision", "recall", "granularity", "plagdet")


@functools.lru_cache(maxsize=1)
def _reference():
    return pan_reference()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("pan-big") / "corpus"
    pan.generate(root, seed=3, n_susp=36, n_src=30, pairs_per_susp=2)
    corpus = pan.read_corpus(root)
    return root, corpus, adversarial_runs(corpus, seed=3)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("pan-small") / "corpus"
    pan.generate(root, seed=5, n_susp=8, n_src=8, pairs_per_susp=2)
    corpus = pan.read_corpus(root)
    return root, corpus, adversarial_runs(corpus, seed=5)


def test_the_measures_equal_pans_evaluator(big, tmp_path):
    ref = _reference()
    if ref is None:
        pytest.skip("PAN's evaluator is not fetched (pan-webis-de/pan-code; PAN_CODE_GIT)")
    root, corpus, runs = big
    n_dets, compared, worst = 0, 0, 0.0
    for name, run in runs.items():
        n_dets += len(run)
        theirs = pan_evaluate(ref, root, write_run(run, tmp_path / name))
        mine = ours(corpus, run)
        for k, v in theirs.items():
            assert abs(mine[k] - v) <= TOL, (name, k, mine[k], v)
            worst = max(worst, abs(mine[k] - v))
            compared += 1
    assert n_dets >= 2000 and compared == 13 * len(runs)
    print(f"{n_dets} detections, {compared} values, largest difference {worst:.3g}")
    # the runs are not trivial: each awkward case moves the measures it is about
    perfect = ours(corpus, runs["perfect"])
    assert perfect["plagdet"] == 1.0
    assert ours(corpus, runs["ten-pieces"])["granularity"] > 9
    assert ours(corpus, runs["covering-two"])["precision"] < 1
    assert (
        ours(corpus, runs["outside-pairs"])["case_precision"]
        < ours(corpus, runs["outside-pairs"])["precision"]
    )


def test_the_measures_equal_a_naive_computation(small):
    _root, corpus, runs = small
    for name, run in runs.items():
        mine, theirs = ours(corpus, run), naive(corpus, run)
        for k, v in theirs.items():
            if v is None:
                assert mine[k] is None, (name, k)
            else:
                assert abs(mine[k] - v) <= TOL, (name, k, mine[k], v)


def test_measures_where_the_evaluator_divides_by_nothing():
    # no case and no detection: PAN's recall and precision 1; a case and no detection: 0;
    # granularity 1 with nothing detected; plagdet 0 where recall and precision are 0
    z = np.zeros(1)
    one = {k: z for k in spans.STAT_NAMES}
    v = spans.measures(one)
    assert v["recall"] == 1 and v["precision"] == 1 and v["granularity"] == 1
    assert np.isnan(v["case_recall"]) and v["case_precision"] == 0
    one = dict(one, cases=np.ones(1), has_case=np.ones(1))
    v = spans.measures(one)
    assert v["recall"] == 0 and v["plagdet"] == 0 and v["case_recall"] == 0
    assert spans.plagdet_score(1.0, 1.0, 2.0) == pytest.approx(0.63092975, abs=1e-8)
    assert spans.plagdet_score(0.25, 0.75, 2.0) == pytest.approx(0.23659865, abs=1e-8)


def test_the_union_counts_each_character_once():
    g = np.array([0, 0, 0, 1, 1])
    s = np.array([0, 5, 2, 0, 100])
    e = np.array([10, 8, 3, 4, 101])
    c = spans._union_contrib(g, s, e)
    assert c.sum() == 10 + 5 and (c >= 0).all()
    assert np.bincount(g, c).tolist() == [10, 5]


def test_resampled_sums_equal_the_measures_on_a_resampled_corpus(small):
    """A resample's value from the weighted per-pair sums equals the measures of a corpus in
    which each drawn pair is copied as often as it is drawn (each copy a pair of its own, with
    documents of its own)."""
    _root, corpus, runs = small
    index, susp, src, cases = corpus_arrays(corpus)
    run = runs["noisy"]
    m = np.array([r[2:] for r in run], dtype=np.int64)
    dets = spans.Spans(np.array([index[(r[0], r[1])] for r in run]), *m.T)
    stats, _ = spans.pair_stats(len(index), susp, src, cases, dets)
    rng = np.random.default_rng(0)
    n = len(index)
    W = rng.multinomial(n, np.full(n, 1 / n), size=5).astype(float)
    for name in ("plagdet", "recall", "precision", "granularity", "case_f1", "document_f1"):
        got = spans.weighted(stats, W, name)
        for b, w in enumerate(W.astype(int)):
            # the resampled corpus: pair p copied w[p] times, each copy's documents its own
            new_pair = np.repeat(np.arange(n), w)
            copy_of = {p: np.flatnonzero(new_pair == p) for p in range(n)}
            cp, dp = [], []
            for arr, out in ((cases, cp), (dets, dp)):
                for i in range(len(arr)):
                    for k in copy_of[int(arr.pair[i])]:
                        out.append(
                            (
                                k,
                                arr.this_offset[i],
                                arr.this_length[i],
                                arr.source_offset[i],
                                arr.source_length[i],
                            )
                        )
            C = spans.Spans(*np.array(cp, dtype=np.int64).reshape(-1, 5).T)
            D = spans.Spans(*np.array(dp, dtype=np.int64).reshape(-1, 5).T)
            k = new_pair.size
            st, _ = spans.pair_stats(k, np.arange(k), np.arange(k) + k, C, D)
            want = spans.point(st, (name,))[name]
            assert abs(got[b] - want) <= TOL, (name, b)
