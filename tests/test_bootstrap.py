"""The paired bootstrap: every resampled statistic equals a naive loop over explicitly resampled
arrays (scipy's own functions) to 1e-12; the point estimate is the scorer's value; resamples are
reproducible from the seed and paired across systems."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import _parsed

from scorer import bootstrap as bs
from scorer import metrics


def _with_ties(rng, n, levels):
    return rng.integers(0, levels, n).astype(np.float64) / levels


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_weighted_spearman_equals_scipy_on_each_resample(seed):
    rng = np.random.default_rng(seed)
    n = 37
    gold = _with_ties(rng, n, 4)
    pred = _with_ties(rng, n, 6) if seed % 2 else rng.random(n)
    W = bs.draw_weights(["all"] * n, 60, seed)
    got = bs.weighted_spearman(gold, pred, W)
    want = np.array([bs.naive_spearman(gold, pred, w) for w in W])
    assert np.allclose(got, want, rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("seed", range(8))
def test_the_closed_form_spearman_is_the_ranks_written_out_bit_for_bit(seed, monkeypatch):
    """The predictions' side in their own order (covariance and sum of squares in closed form,
    tie groups corrected apart), with the gold's side given or not, equals the same sums over the
    predictions' midranks written out as B x n, exactly: integers and quarters in float64."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    gold = _with_ties(rng, n, 5) if seed % 2 else rng.random(n)
    pred = _with_ties(rng, n, 1 + seed) if seed % 3 else rng.random(n)
    W = bs.draw_weights(["a", "b"] * (n // 2) + ["a"] * (n % 2), 97, seed)
    fast = [
        bs.weighted_spearman(gold, pred, W),
        bs.weighted_spearman(gold, pred, W, gold_ranks=bs.gold_side(gold, W)),
        bs.weighted_spearman(gold, pred, W, gold_ranks=bs.centred_ranks(gold, W)),
    ]
    monkeypatch.setattr(bs, "_EXACT_N", 0)  # every resample the long way: ranks written out
    written = bs.weighted_spearman(gold, pred, W)
    for got in fast:
        assert np.array_equal(got, written, equal_nan=True)


def test_weighted_spearman_undefined_resample_is_nan():
    gold = np.array([0.0, 1.0, 2.0])
    pred = np.array([1.0, 1.0, 5.0])
    W = np.array([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0], [2.0, 1.0, 0.0]])
    got = bs.weighted_spearman(gold, pred, W)
    assert np.isnan(got[0]) and np.isnan(got[2]) and not np.isnan(got[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_cluster_spearman_equals_scipy_on_each_resample(seed):
    """Documents move with their tokens: the polynomial form (ranks as functions of the document
    multiplicities) equals scipy on the resampled token arrays, ties in gold and predictions."""
    rng = np.random.default_rng(seed)
    D = 7
    sizes = rng.integers(1, 30, D)
    doc = np.repeat(np.arange(D), sizes)
    gold = rng.integers(0, 6, doc.size) / 5.0
    pred = np.round(rng.random(doc.size), 1 if seed == 0 else 3)
    if seed == 2:
        pred = rng.random(doc.size)
    tp = bs.TokenPair(doc, gold, D)
    W = bs.draw_weights(["p"] * D, 80, seed)
    got = tp.spearman(pred, W)
    want = np.array([bs.naive_spearman(gold, pred, w, doc) for w in W])
    assert np.allclose(got, want, rtol=0, atol=1e-12, equal_nan=True)


def test_dominance_equals_pairwise_counts():
    rng = np.random.default_rng(5)
    D, K = 4, 3
    doc = rng.integers(0, D, 50)
    gk = rng.integers(0, K, 50)
    pred = np.round(rng.random(50), 1)
    S, _ = bs._dominance(pred, doc, doc * K + gk, D, D * K)
    want = np.zeros((D * K, D))
    for t in range(50):
        for u in range(50):
            want[doc[t] * K + gk[t], doc[u]] += (pred[u] < pred[t]) + 0.5 * (pred[u] == pred[t])
    assert np.array_equal(S, want)


def test_weighted_f1_equals_the_scorers_f1_on_each_resample():
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 41)
    pred = rng.integers(0, 2, 41)
    W = bs.draw_weights(["all"] * 41, 50, 9)
    got = bs.weighted_f1(gold, pred, W)
    for b, w in enumerate(W):
        reps = w.astype(int)
        want = metrics.classification(np.repeat(gold, reps), np.repeat(pred, reps))["f1"]
        assert abs(got[b] - want) <= 1e-12


def test_weights_are_reproducible_and_stratified():
    strata = ["a"] * 5 + ["b"] * 3 + ["a"] * 2
    W1 = bs.draw_weights(strata, 100, 42)
    W2 = bs.draw_weights(strata, 100, 42)
    assert np.array_equal(W1, W2)
    assert not np.array_equal(W1, bs.draw_weights(strata, 100, 43))
    a = np.array([s == "a" for s in strata])
    assert (W1[:, a].sum(axis=1) == 7).all() and (W1[:, ~a].sum(axis=1) == 3).all()


def test_cluster_weights_draw_each_cluster_once_with_its_units():
    """With clusters, the draw is over distinct clusters (the ordinary draw of that many units,
    from the same seed) and every unit of a cluster carries the cluster's multiplicity."""
    clusters = ["a", "b", "a", "c", "b", "a", "d"]
    W = bs.draw_weights(["all"] * 7, 200, 3, clusters)
    Wc = bs.draw_weights(["all"] * 4, 200, 3)  # a, b, c, d in order of first appearance
    assert np.array_equal(W, Wc[:, [0, 1, 0, 2, 1, 0, 3]])
    assert (Wc.sum(axis=1) == 4).all()
    with pytest.raises(ValueError, match="different strata"):
        bs.draw_weights(["x", "y", "x"], 5, 0, ["a", "a", "b"])
    with pytest.raises(ValueError, match="2 cluster names for 3 units"):
        bs.draw_weights(["x"] * 3, 5, 0, ["a", "b"])


def test_holm_matches_the_step_down_procedure():
    p = np.array(
        [[1, 0.01, 0.04, 0.03], [0.01, 1, 0.005, 0.5], [0.04, 0.005, 1, 0.2], [0.03, 0.5, 0.2, 1.0]]
    )
    adj = bs.holm(p)
    raw = sorted([(p[i, j], (i, j)) for i in range(4) for j in range(i + 1, 4)])
    m, running = len(raw), 0.0
    for k, (v, (i, j)) in enumerate(raw):
        running = max(running, min(1.0, (m - k) * v))
        assert adj[i, j] == pytest.approx(running) and adj[j, i] == adj[i, j]


def test_board_statistics_clusters_and_rank_ranges():
    rng = np.random.default_rng(0)
    B = 1000
    base = rng.normal(0, 0.01, B)
    # two systems nearly equal on top, one far below
    samples = np.vstack(
        [
            0.80 + base + rng.normal(0, 0.002, B),
            0.799 + base + rng.normal(0, 0.002, B),
            0.50 + base + rng.normal(0, 0.002, B),
        ]
    )
    points = np.array([0.80, 0.799, 0.50])
    st = bs.board_statistics(samples, points, True)
    assert st["cluster"] == [1, 1, 2]
    assert (
        st["rank_range"][0][0] == 1
        and st["rank_range"][1][1] == 2
        and st["rank_range"][2] == [3, 3]
    )
    lo, hi = st["ci"][2]
    assert lo < 0.50 < hi
    assert st["p_holm"][0][2] < 0.05 and st["p_holm"][0][1] > 0.05
    # lower is better: the order flips
    st2 = bs.board_statistics(samples, points, False)
    assert st2["cluster"] == [2, 2, 1] and st2["rank_range"][2] == [1, 1]


# ----------------------------------------------------------------------------- on the releases


@pytest.mark.parametrize(
    "task_id", ["tric-binary", "tric-ranking", "trac", "swissgov-rsd", "loci-similes", "str"]
)
def test_point_is_the_scorers_value_on_the_whole_and_on_a_part(home, task_id):
    from scorer.kinds import family
    from tasks import get_task
    from tasks.store import TaskStore

    task, store = get_task(task_id), TaskStore(task_id, home)
    parsed = _parsed(task, store, "test", np.random.default_rng(1))
    arrays = bs.unit_arrays(task, store, "test", parsed)
    fam = family(task, store, "test")
    units = fam.units()
    for only in (None, frozenset(units[::3])):
        want = fam.score(parsed, only).metrics[task.primary[0]][task.primary[1]]
        b = bs.Bootstrap(task, store, "test", only)
        assert b.point(arrays) == pytest.approx(want, abs=1e-12)
        # a resample that draws each unit of a subset once is the scorer's value on that subset
        keep = frozenset(b.units[::2])
        w = np.array([[1.0 if u in keep else 0.0 for u in b.units]])
        if task.kind == "tokens":  # the cluster bootstrap keeps every pair
            continue
        sub = fam.score(parsed, keep).metrics[task.primary[0]][task.primary[1]]
        assert b.samples(arrays, w)[0] == pytest.approx(
            sub if sub is not None else np.nan, abs=1e-12, nan_ok=True
        )


def test_swissgov_resamples_equal_scipy_per_pair(home):
    from tasks import get_task
    from tasks.store import TaskStore

    task, store = get_task("swissgov-rsd"), TaskStore("swissgov-rsd", home)
    arrays = bs.unit_arrays(
        task, store, "test", _parsed(task, store, "test", np.random.default_rng(2))
    )
    b = bs.Bootstrap(task, store, "test")
    W = b.weights(6, 11)
    got = b.samples(arrays, W)
    for i, w in enumerate(W):
        per = []
        for pair, (cols, tok, tp) in b.pairs.items():
            per.append(bs.naive_spearman(tp.gold, arrays[f"pred:{pair}"][tok], w[cols], tp.doc))
        assert abs(got[i] - np.mean(per)) <= 1e-12
    # resampled within each language pair: every resample keeps each pair's document count
    for cols, _tok, _tp in b.pairs.values():
        assert (W[:, cols].sum(axis=1) == len(cols)).all()


def test_loci_counts_path_equals_the_scorers_metric_functions(home):
    """The vectorised TP/FP/FN path gives what `metrics.loci_links` gives on each relabelled
    resample (duplicated queries included): the per-query means over the queries with a gold
    link, the pooled counts over them, and the rates and counts over every query."""
    from tasks import get_task
    from tasks.store import TaskStore

    task, store = get_task("loci-similes"), TaskStore("loci-similes", home)
    arrays = bs.unit_arrays(
        task, store, "test", _parsed(task, store, "test", np.random.default_rng(4))
    )
    b = bs.Bootstrap(task, store, "test")
    W = b.weights(40, 3)
    for metric in bs.LINK_COUNT_METRICS:
        b.metric = metric
        fast = b.samples(arrays, W)
        ref = np.array([b._links_once(arrays, w) for w in W])
        assert np.allclose(fast, ref, rtol=0, atol=1e-12), metric


def test_loci_on_a_part_every_metric_is_the_scorers(home):
    """On a part of the queries: the point of every Loci metric (the ranking ones through
    `metrics.link_ranking_ir`) is the scorer's value, and the vectorised path equals the scorer's
    functions on each relabelled resample."""
    from scorer.kinds import family
    from tasks import get_task
    from tasks.store import TaskStore

    task, store = get_task("loci-similes"), TaskStore("loci-similes", home)
    parsed = _parsed(task, store, "test", np.random.default_rng(4))
    arrays = bs.unit_arrays(task, store, "test", parsed)
    fam = family(task, store, "test")
    only = frozenset(fam.units()[::2])
    want = fam.score(parsed, only).metrics["all"]
    b = bs.Bootstrap(task, store, "test", only)
    W = b.weights(30, 7)
    for metric in bs.LINK_COUNT_METRICS + ("recall@10", "map@10", "mrr@10", "ndcg@100"):
        b.metric = metric
        v = want[metric]
        assert b.point(arrays) == pytest.approx(
            np.nan if v is None else v, abs=1e-12, nan_ok=True
        ), metric
        ref = np.array([b._links_once(arrays, w) for w in W])
        assert np.allclose(b.samples(arrays, W), ref, rtol=0, atol=1e-12, equal_nan=True), metric


def test_macro_is_over_the_groups_a_resample_holds_and_needs_each():
    per = {"a": np.array([0.2, 0.4, np.nan]), "b": np.array([0.6, np.nan, 0.1])}
    held = {"a": np.array([3.0, 2.0, 0.0]), "b": np.array([1.0, 0.0, 2.0])}
    got = bs._group_mean(per, held, 3)
    assert (
        got[0] == pytest.approx(0.4)
        and got[1] == pytest.approx(0.4)
        and got[2] == pytest.approx(0.1)
    )
    held["a"][2] = 1.0  # a held group without a value: undefined
    assert np.isnan(bs._group_mean(per, held, 3)[2])


def test_paired_pvalues_see_a_consistent_difference():
    rng = np.random.default_rng(1)
    base = rng.normal(0, 0.05, 1000)
    a, c = 0.70 + base, 0.70 + base + rng.normal(0, 0.01, 1000)
    p = bs.paired_pvalues(np.vstack([a, a + 0.01, c]), np.array([0.70, 0.71, 0.70]))
    assert p[0, 1] < 1e-6 and p[0, 2] > 0.05  # a constant shift is significant whatever the spread


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_kendall_equals_scipy_on_each_resample(seed):
    from scipy import stats

    rng = np.random.default_rng(seed)
    n = 31
    gold = _with_ties(rng, n, 4)
    pred = _with_ties(rng, n, 5) if seed else rng.random(n)
    W = bs.draw_weights(["all"] * n, 50, seed)
    got = bs.weighted_kendall(gold, pred, W)
    for b, w in enumerate(W):
        reps = w.astype(int)
        want = stats.kendalltau(np.repeat(gold, reps), np.repeat(pred, reps), variant="b").statistic
        assert abs(got[b] - want) <= 1e-12 or (np.isnan(got[b]) and np.isnan(want))


def test_the_gold_ranks_a_board_shares_follow_the_matrix(home):
    """Every row of a board reuses the gold's ranks on the board's matrix; another matrix (another
    board, or the point beside the resamples) gets its own, and each result equals a fresh
    Bootstrap's, which computes them anew."""
    from tasks import get_task
    from tasks.store import TaskStore

    task, store = get_task("tric-ranking"), TaskStore("tric-ranking", home)
    rng = np.random.default_rng(4)
    runs = [
        bs.unit_arrays(task, store, "test", _parsed(task, store, "test", rng)) for _ in range(3)
    ]
    shared = bs.Bootstrap(task, store, "test")
    W1, W2 = shared.weights(50, 1), shared.weights(50, 2)
    for W in (W1, W2, W1, np.vstack([np.ones(W1.shape[1]), W1])):
        for arrays in runs:
            fresh = bs.Bootstrap(task, store, "test").samples(arrays, W.copy())
            assert np.array_equal(shared.samples(arrays, W), fresh, equal_nan=True)
    want = np.array([bs.naive_spearman(shared.gold, runs[0]["pred"][shared.rows], w) for w in W2])
    assert np.allclose(shared.samples(runs[0], W2), want, rtol=0, atol=1e-12, equal_nan=True)


def _pairwise(pred, doc, label, D, G):
    """The dominance counts one pair of tokens at a time (O(n^2)), and each tie group's count per
    document (the groups in ascending order of value)."""
    want = np.zeros((G, D))
    for t in range(pred.size):
        for u in range(pred.size):
            want[label[t], doc[u]] += (pred[u] < pred[t]) + 0.5 * (pred[u] == pred[t])
    values = np.unique(pred)
    groups = np.zeros((values.size, D))
    for t in range(pred.size):
        groups[np.searchsorted(values, pred[t]), doc[t]] += 1
    return want, groups


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("case", ["distinct", "decimals1", "decimals2", "one value", "one token"])
@pytest.mark.parametrize("seed", [0, 1])
def test_compiled_dominance_equals_pairwise_counts(monkeypatch, seed, case, wide):
    """The compiled sweep's counts equal the pairwise ones, with ties and without, labels and
    documents without a token included, in 32-bit counts and in 64-bit ones (`wide`); the tie
    groups equal a naive count, and their cubes the sum over the groups on each resample."""
    from scorer import sweep

    if wide:  # the 64-bit counts a board with very long documents would take
        monkeypatch.setattr(sweep, "_INT32_BELOW", 0)
    rng = np.random.default_rng(seed)
    D, K = 7, 3
    n = 1 if case == "one token" else int(rng.integers(40, 160))
    doc = rng.integers(0, D - 1, n)  # document D-1 has no token
    label = doc * K + rng.integers(0, K - 1, n)  # nor has any label of gold value K-1
    pred = {
        "distinct": rng.normal(size=n),
        "decimals1": np.round(rng.random(n), 1),
        "decimals2": np.round(rng.random(n), 2),
        "one value": np.full(n, 0.25),
        "one token": rng.random(n),
    }[case]
    S, ties = bs._dominance(pred, doc, label, D, D * K)
    want, groups = _pairwise(pred, doc, label, D, D * K)
    assert S.dtype == np.float64 and S.flags.c_contiguous
    assert np.array_equal(S, want)
    W = bs.draw_weights(["p"] * D, 40, seed)
    G = W @ groups.T  # each group's size on each resample
    cubes = (G**3 - G).sum(axis=1)
    if isinstance(ties, np.ndarray):  # no two tokens tie: each document's token count
        assert np.unique(pred).size == n
        assert np.array_equal(ties, np.bincount(doc, minlength=D))
    else:
        assert ties.has_canonical_format
        assert np.array_equal(ties.toarray(), groups)
    assert np.allclose(bs._tie_cubes(ties, W), cubes, rtol=1e-12, atol=0)
    assert np.array_equal(bs._tie_cubes(ties, W, W**3), bs._tie_cubes(ties, W))


def test_a_worker_warms_the_sweep_its_horses_use():
    """`warm()` (a worker, before it forks its work horses) loads the machine code a board's
    counts take: 32-bit counts over float64 predictions."""
    from scorer import sweep

    sweep.warm()
    assert any(
        sig[0].dtype.name == "float64" and sig[3].dtype.name == "int32"
        for sig in sweep._sweep.signatures
    )
