"""Loci Similes against the references: locisimiles 2.1.3's IntertextEvaluator (precision, recall,
F1, accuracy, SMR, FPR, FNR and the counts, macro and micro) and trec_eval through ir_measures'
pytrec_eval provider (recall@k, map@k, mrr@k, ndcg@k). Each skips, saying why, where its reference
is not installed."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import loci_files
from hypothesis import given, settings
from hypothesis import strategies as st
from locikit import generated_release, ours, read_csv, write_csv

from scorer import metrics, score_file
from tasks.importers import import_task

REPO = Path(__file__).resolve().parent.parent
TOL = 1e-12


@functools.lru_cache(maxsize=1)
def _load():
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks.bench_scorer import _load_locisimiles_evaluator

    return _load_locisimiles_evaluator()


def _evaluator():
    if "locisimiles.evaluator" in sys.modules:
        return sys.modules["locisimiles.evaluator"]
    if (
        importlib.util.find_spec("locisimiles") is None
        or importlib.util.find_spec("pandas") is None
    ):
        pytest.skip(
            "locisimiles is not installed: pip install pandas && "
            "pip install --no-deps locisimiles==2.1.3"
        )
    return _load()


def reference(files: dict, links: list[tuple[str, str]]) -> dict[str, dict]:
    """IntertextEvaluator.evaluate(average=...) for both averages, every link predicted."""
    ev_mod = _evaluator()
    from locisimiles.document import Document
    from locisimiles.pipeline._types import CandidateJudge

    qdoc, sdoc = Document(str(files["query"])), Document(str(files["source"]))
    preds: dict = {}
    for q, s in links:
        preds.setdefault(q, []).append(CandidateJudge(sdoc[s], None, 1.0))

    class Fixed:
        def run(self, *, query, source, top_k):
            return preds

    out = {}
    with contextlib.redirect_stdout(io.StringIO()):
        ev = ev_mod.IntertextEvaluator(
            query_doc=qdoc,
            source_doc=sdoc,
            ground_truth=str(files["gold"]),
            pipeline=Fixed(),
            top_k=len(sdoc.ids()),
            threshold=0.5,
        )
        for avg in ("macro", "micro"):
            out[avg] = ev.evaluate(average=avg).iloc[0].to_dict()
    return out


def check_against_package(got: dict, ref: dict[str, dict]) -> None:
    macro, micro = ref["macro"], ref["micro"]
    for k in ("precision", "recall", "f1", "accuracy", "smr", "fpr", "fnr"):
        assert math.isclose(got[k], macro[k], rel_tol=TOL, abs_tol=TOL), (k, got[k], macro[k])
    for k in ("precision", "recall", "f1"):
        assert math.isclose(got[f"{k}_micro"], micro[k], rel_tol=TOL, abs_tol=TOL), (
            k,
            got[f"{k}_micro"],
            micro[k],
        )
    for k in ("smr", "fpr", "fnr"):
        assert math.isclose(got[k], micro[k], rel_tol=TOL, abs_tol=TOL), (k, got[k], micro[k])
    for k in ("tp", "fp", "fn", "tn"):
        assert got[k] == macro[k] == micro[k], (k, got[k], macro[k], micro[k])


# ---------------------------------------------------------------- locisimiles


def sample_predictions(seed: int, queries, sources, gold) -> list[list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    pairs = [(q, s) for q in queries for s in sources]
    noise = [pairs[i] for i in rng.choice(len(pairs), size=min(len(pairs), 25), replace=False)]
    kept = [g for g in gold if rng.random() < 0.6]
    return [
        [],  # the empty submission: valid, SMR = FNR = gold links / N
        list(gold),  # perfect
        sorted(set(kept) | set(noise)),  # some gold links, false links on gold and other queries
        noise,
        [(q, sources[0]) for q in queries],  # one link per query, gold queries included
    ]


def test_shared_sample_equals_locisimiles(tmp_path):
    files = loci_files()
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    queries = [r[0] for r in read_csv(files["query"])]
    sources = [r[0] for r in read_csv(files["source"])]
    gold = [(r[0], r[1]) for r in read_csv(files["gold"])]
    for i, links in enumerate(sample_predictions(0, queries, sources, gold)):
        sub = write_csv(tmp_path / f"s{i}.csv", ("query_id", "source_id"), links)
        result = ours(home, sub)
        check_against_package(result["metrics"]["all"], reference(files, links))
        assert result["primary"]["value"] == result["metrics"]["all"]["f1"]


@pytest.mark.parametrize("seed", range(4))
def test_generated_corpora_equal_locisimiles(tmp_path, seed):
    _evaluator()
    files, qids, sids, gold = generated_release(tmp_path / "release", seed, 60, 150, 40)
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    rng = np.random.default_rng(seed + 10)
    links = {g for g in gold if rng.random() < 0.5}
    for q in qids:  # a top-k retriever: 0 to 12 sources per query, gold queries or not
        links |= {
            (q, sids[int(j)])
            for j in rng.choice(len(sids), size=int(rng.integers(0, 13)), replace=False)
        }
    links = sorted(links)
    sub = write_csv(
        tmp_path / "sub.csv",
        ("query_id", "source_id", "score"),
        [(q, s, float(rng.random())) for q, s in links],
    )
    check_against_package(ours(home, sub)["metrics"]["all"], reference(files, links))
    # a partition (the public part of a test phase) equals the package on a release of that part
    part = set(qids[::3])
    sub_files = {
        "query": write_csv(
            tmp_path / "p" / "q.csv", ("seg_id", "text"), [(q, "x") for q in qids if q in part]
        ),
        "source": files["source"],
        "gold": write_csv(
            tmp_path / "p" / "g.csv",
            ("query_id", "source_id", "label"),
            [(q, s, 1) for q, s in gold if q in part],
        ),
    }
    got = ours(home, sub, only=part)["metrics"]["all"]
    check_against_package(got, reference(sub_files, [lk for lk in links if lk[0] in part]))


def test_empty_submission_is_valid_and_scored(tmp_path):
    files = loci_files()
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    n_gold = len(read_csv(files["gold"]))
    for name, body in (
        ("header.csv", "query_id,source_id\n"),
        ("scored.csv", "query_id,source_id,score\n"),
        ("no-newline.tsv", "query_id\tsource_id"),
    ):
        (tmp_path / name).write_text(body, encoding="utf-8")
        result = score_file("loci-similes", tmp_path / name, home=home)
        m = result["metrics"]["all"]
        assert (m["tp"], m["fp"], m["fn"]) == (0, 0, n_gold)
        assert m["smr"] == m["fnr"] == n_gold / m["n"] and m["fpr"] == 0.0
        assert m["f1"] == m["precision"] == m["recall"] == 0.0


# ---------------------------------------------------------------- trec_eval (ir_measures)


def trec_reference(qrels: dict, run: dict, gold_queries: list[str], cutoffs) -> dict:
    """Per-query trec_eval values through ir_measures' pytrec_eval provider, averaged over the
    gold queries (a gold query absent from the run counts 0). RR@k is trec_eval's recip_rank
    (which it does not cut) with the cut-off applied: 1/r when r <= k, else 0."""
    ir = pytest.importorskip(
        "ir_measures", reason="ir_measures is not installed: pip install ir_measures"
    )
    from ir_measures import AP, RR, R, nDCG

    measures = [m @ k for k in cutoffs for m in (R, AP, nDCG)] + [RR]
    per: dict = {}
    for m in ir.pytrec_eval.iter_calc(measures, qrels, run):
        per.setdefault(str(m.measure), {})[m.query_id] = m.value
    out = {}
    for k in cutoffs:
        for ours_name, theirs in (("recall", f"R@{k}"), ("map", f"AP@{k}"), ("ndcg", f"nDCG@{k}")):
            out[f"{ours_name}@{k}"] = sum(
                per.get(theirs, {}).get(q, 0.0) for q in gold_queries
            ) / len(gold_queries)
        rr = [per["RR"].get(q, 0.0) for q in gold_queries]
        out[f"mrr@{k}"] = sum(x if x and 1 / x <= k + 1e-9 else 0.0 for x in rr) / len(gold_queries)
    return out


@pytest.mark.parametrize(
    "seed, depth, near",
    [(0, 30, False), (1, 150, False), (2, 150, False), (3, 1200, False)]
    + [(4, 150, True), (5, 1200, True)],
)
def test_ranking_metrics_equal_trec_eval(tmp_path, seed, depth, near):
    """Through the file: every ranking metric equals trec_eval's, on the whole and on a part; with
    `near`, a score is often moved by less than float32's resolution (a tie in trec_eval)."""
    pytest.importorskip(
        "ir_measures", reason="ir_measures is not installed: pip install ir_measures"
    )
    n_q, n_s = 40, 1500
    files, qids, sids, gold = generated_release(tmp_path / "release", seed, n_q, n_s, 60)
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    rng = np.random.default_rng(seed)
    gold_set = set(gold)
    run: dict = {}
    rows = []
    for q in qids:
        k = int(rng.integers(0, depth + 1))
        picked = {sids[int(j)] for j in rng.choice(n_s, size=k, replace=False)}
        picked |= {s for (gq, s) in gold if gq == q and rng.random() < 0.7}
        for s in sorted(picked):
            # few distinct values, so ties are common; gold links score a little higher
            sc = float(np.round(rng.random() + (0.3 if (q, s) in gold_set else 0.0), 1))
            if near:
                sc *= 1.0 + float(rng.choice([0.0, 2.0**-40, -(2.0**-38), 2.0**-20]))
            run.setdefault(q, {})[s] = sc
            rows.append((q, s, sc))
    sub = write_csv(tmp_path / "sub.csv", ("query_id", "source_id", "score"), rows)
    result = ours(home, sub)
    got = result["metrics"]["all"]
    qrels: dict = {}
    for q, s in gold:
        qrels.setdefault(q, {})[s] = 1
    gold_queries = sorted(qrels)
    deepest = max((len(v) for v in run.values()), default=0)
    cutoffs = (10, 100, 1000) if deepest >= 1000 else (10, 100)
    ref = trec_reference(qrels, run, gold_queries, cutoffs)
    for k, v in ref.items():
        assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-9), (k, got[k], v)
    if deepest < 1000:
        assert got["ndcg@1000"] is None and any("@1000" in n for n in result["notes"])
    # a partition: the same reference restricted to the kept queries
    part = set(qids[::2])
    got = ours(home, sub, only=part)["metrics"]["all"]
    gq = [q for q in gold_queries if q in part]
    if gq:
        ref = trec_reference(
            {q: qrels[q] for q in gq}, {q: r for q, r in run.items() if q in part}, gq, (10, 100)
        )
        for k, v in ref.items():
            assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-9), (k, got[k], v)


def test_near_tie_two_rows_as_trec_eval(tmp_path):
    """Two scores equal in single precision tie, as in trec_eval, and the tie goes to the larger
    source id: the gold link s_z ranks first although its float64 score is the smaller."""
    pytest.importorskip(
        "ir_measures", reason="ir_measures is not installed: pip install ir_measures"
    )
    rel = tmp_path / "release"
    files = {
        "query": write_csv(rel / "q.csv", ("seg_id", "text"), [("q1", "arma virumque")]),
        "source": write_csv(
            rel / "s.csv", ("seg_id", "text"), [("s_a", "cano"), ("s_z", "troiae")]
        ),
        "gold": write_csv(rel / "g.csv", ("query_id", "source_id", "label"), [("q1", "s_z", 1)]),
    }
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    run = {"q1": {"s_a": 0.91, "s_z": 0.9099999999999999}}
    assert run["q1"]["s_a"] != run["q1"]["s_z"]
    sub = write_csv(
        tmp_path / "sub.csv",
        ("query_id", "source_id", "score"),
        [(q, s, sc) for q, r in run.items() for s, sc in r.items()],
    )
    got = score_file("loci-similes", sub, home=home)["metrics"]["all"]
    assert got["mrr@10"] == got["map@10"] == got["ndcg@10"] == got["recall@10"] == 1.0
    ref = trec_reference({"q1": {"s_z": 1}}, run, ["q1"], (10, 100))
    for k, v in ref.items():
        assert got[k] == v, (k, got[k], v)


# scores that tie in float32 and differ in float64 (relative steps below 2^-24), exact ties, and
# steps just above float32's resolution; magnitudes beyond float32's range become infinities
BASES = (0.91, 0.5, 1.0, 0.0, 1e-3, -2.5, 123456.789, 1e-40, 3.5e38, -1e39)
STEPS = (0.0, 2.0**-40, -(2.0**-40), 3 * 2.0**-30, 2.0**-26, 2.0**-22, -(2.0**-21))


@st.composite
def near_tie_runs(draw):
    sids = draw(
        st.lists(
            st.text(alphabet="aAzZ09_.é ", min_size=1, max_size=4).map(lambda x: "s" + x),
            min_size=2,
            max_size=25,
            unique=True,
        )
    )
    n_q = draw(st.integers(1, 4))
    run, qrels = {}, {}
    for q in range(n_q):
        qid = f"q{q}"
        picked = draw(st.lists(st.sampled_from(sids), unique=True, max_size=len(sids)))
        for s in picked:
            base = draw(st.sampled_from(BASES))
            step = draw(st.sampled_from(STEPS))
            run.setdefault(qid, {})[s] = base * (1.0 + step) if base else step * 1e-30
        gold = draw(st.lists(st.sampled_from(sids), unique=True, max_size=4))
        if gold:
            qrels[qid] = {s: 1 for s in gold}
    if not qrels:
        qrels["q0"] = {sids[0]: 1}
    return sids, n_q, run, qrels


@given(case=near_tie_runs())
@settings(max_examples=300, deadline=None)
def test_ranking_near_ties_equal_pytrec_eval(case):
    """recall@k, map@k, mrr@k and ndcg@k of `metrics.link_ranking_ir` equal trec_eval's (through
    ir_measures' pytrec_eval) on runs full of float32 ties, exact ties and near misses."""
    pytest.importorskip(
        "ir_measures", reason="ir_measures is not installed: pip install ir_measures"
    )
    sids, n_q, run, qrels = case
    sidx = {s: i for i, s in enumerate(sids)}
    by_bytes = sorted(range(len(sids)), key=lambda i: sids[i].encode("utf-8"))
    source_order = np.empty(len(sids), dtype=np.int64)
    source_order[by_bytes] = np.arange(len(sids))
    pq, ps, psc = [], [], []
    for q, r in run.items():
        for s, sc in r.items():
            pq.append(int(q[1:]))
            ps.append(sidx[s])
            psc.append(sc)
    gq = [int(q[1:]) for q, r in qrels.items() for _ in r]
    gs = [sidx[s] for r in qrels.values() for s in r]
    cutoffs = (1, 3, 10)
    got, _ = metrics.link_ranking_ir(
        np.array(gq, dtype=np.int64),
        np.array(gs, dtype=np.int64),
        np.array(pq, dtype=np.int64),
        np.array(ps, dtype=np.int64),
        np.array(psc, dtype=np.float64),
        n_q,
        len(sids),
        source_order,
        cutoffs=cutoffs,
    )
    ref = trec_reference(qrels, run, sorted(qrels), cutoffs)
    for k, v in ref.items():
        assert math.isclose(got[k], v, rel_tol=1e-12, abs_tol=1e-12), (k, got[k], v)


def test_ranking_tie_rule_by_hand(tmp_path):
    """Equal scores: the larger source id (byte order) ranks first, as in trec_eval."""
    files, _, sids, gold = generated_release(tmp_path / "release", 7, 4, 30, 1)
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    q, s = gold[0]
    other_lo = min(x for x in sids if x != s)
    other_hi = max(x for x in sids if x != s)
    for other, rank in ((other_lo, 1 if other_lo < s else 2), (other_hi, 2 if other_hi > s else 1)):
        sub = write_csv(
            tmp_path / "t.csv", ("query_id", "source_id", "score"), [(q, s, 0.5), (q, other, 0.5)]
        )
        got = score_file("loci-similes", sub, home=home)["metrics"]["all"]
        assert got["mrr@10"] == 1 / rank and got["ndcg@10"] == 1 / math.log2(rank + 1)
