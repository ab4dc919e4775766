"""Metrics on the real gold with perturbed predictions, checked against scipy and scikit-learn,
and Loci Similes' link metrics against a brute force over every query x source pair."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import SWISSGOV, TROTR, need
from helpers import LANGS, swissgov_docs, trac_gold, trotr_pairs, write_submission
from scipy import stats

from scorer import partition_units, score_file, score_validated, validate_file
from scorer.metrics import classification, correlations
from tasks.importers import import_task

SEEDS_NOISE = [(0, 0.1), (1, 0.3), (2, 0.6), (3, 1.5)]
ALL_PAIRS = tuple(LANGS.values())


def close(a, b, tol=1e-9):
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def check_subset(got: dict, expected: dict):
    for k, v in expected.items():
        assert close(got[k], v), (k, got[k], v)


# ---------------------------------------------------------------- tric-binary


def sk_classification(gold, pred) -> dict:
    from sklearn.metrics import (
        f1_score,
        precision_recall_fscore_support,
    )

    p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=[0, 1], zero_division=0)
    out = {
        "f1": f1_score(gold, pred, labels=[0, 1], average="weighted", zero_division=0),
        "n": len(gold),
    }
    for c in (0, 1):
        out[f"precision_{c}"], out[f"recall_{c}"], out[f"f1_{c}"] = p[c], r[c], f[c]
    return out


def tric_subsets(kind: str) -> dict[str, set]:
    return {
        sub: {r["instanceID"] for r in trotr_pairs(kind, "test", sub)} for sub in ("oov", "iov")
    }


@pytest.mark.parametrize("seed, flip", [(0, 0.05), (1, 0.2), (2, 0.5), (3, 0.9)])
def test_tric_binary_against_sklearn(home, tmp_path, seed, flip):
    raw = trotr_pairs("binary", "test")
    gold = {r["instanceID"]: int(r["label"]) for r in raw}
    rng = np.random.default_rng(seed)
    pred = {k: (1 - g if rng.random() < flip else g) for k, g in gold.items()}
    rows = [
        {"instanceID": k, "label": v} for k, v in reversed(list(pred.items()))
    ]  # order is irrelevant
    result = score_file("tric-binary", write_submission(tmp_path, rows, "jsonl"), home=home)
    subsets = {"all": set(gold), **tric_subsets("binary")}
    for name, ids in subsets.items():
        g = [gold[k] for k in gold if k in ids]
        p = [pred[k] for k in gold if k in ids]
        check_subset(result["metrics"][name], sk_classification(g, p))
    assert (
        result["primary"]["name"] == "f1"
        and result["primary"]["value"] == result["metrics"]["all"]["f1"]
    )


@pytest.mark.parametrize("constant", [0, 1])
def test_tric_binary_constant_predictions_use_zero_division_0(home, tmp_path, constant):
    gold = {r["instanceID"]: int(r["label"]) for r in trotr_pairs("binary", "test")}
    rows = [{"instanceID": k, "label": constant} for k in gold]
    result = score_file("tric-binary", write_submission(tmp_path, rows, "csv"), home=home)
    check_subset(
        result["metrics"]["all"], sk_classification(list(gold.values()), [constant] * len(gold))
    )
    assert result["metrics"]["all"][f"precision_{1 - constant}"] == 0.0


@pytest.mark.parametrize(
    "gold, pred",
    [
        ([0, 0, 0], [0, 0, 0]),
        ([1, 1], [0, 0]),
        ([0, 1, 1, 0, 1], [1, 1, 0, 0, 1]),
        ([1], [1]),
    ],
)
def test_classification_edge_cases(gold, pred):
    check_subset(classification(np.array(gold), np.array(pred)), sk_classification(gold, pred))


# ---------------------------------------------------------------- tric-ranking and trac


def perturbed(gold: np.ndarray, seed: int, noise: float, ties: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = gold + noise * rng.standard_normal(gold.size) * (gold.std() or 1)
    return np.round(p, 1) if ties else p


@pytest.mark.parametrize("seed, noise", SEEDS_NOISE)
@pytest.mark.parametrize("ties", [False, True])
def test_tric_ranking_against_scipy(home, tmp_path, seed, noise, ties):
    raw = trotr_pairs("ranking", "test")
    ids = [r["instanceID"] for r in raw]
    gold = np.array([float(r["label"]) for r in raw])
    pred = perturbed(gold, seed, noise, ties)
    rows = [{"instanceID": k, "score": float(v)} for k, v in zip(ids, pred, strict=True)]
    result = score_file("tric-ranking", write_submission(tmp_path, rows, "tsv"), home=home)
    subsets = {"all": set(ids), **tric_subsets("ranking")}
    for name, keep in subsets.items():
        m = np.array([k in keep for k in ids])
        check_subset(
            result["metrics"][name],
            {
                "spearman": stats.spearmanr(gold[m], pred[m]).statistic,
                "pearson": stats.pearsonr(gold[m], pred[m]).statistic,
                "n": int(m.sum()),
            },
        )


@pytest.mark.parametrize("seed, noise", SEEDS_NOISE)
def test_trac_against_scipy(home, tmp_path, seed, noise):
    g = trac_gold()
    targets = sorted(g)
    gold = np.array([g[t] for t in targets])
    pred = perturbed(gold, seed, noise, ties=seed % 2 == 1)
    rows = [{"target": t, "score": float(v)} for t, v in zip(targets, pred, strict=True)]
    result = score_file("trac", write_submission(tmp_path, rows, "jsonl.gz"), home=home)
    assert close(result["metrics"]["all"]["spearman"], stats.spearmanr(gold, pred).statistic)
    assert close(result["metrics"]["all"]["pearson"], stats.pearsonr(gold, pred).statistic)
    assert result["metrics"]["all"]["n"] == 40


def test_constant_predictions_give_null_with_a_note(home, tmp_path):
    ids = [r["instanceID"] for r in trotr_pairs("ranking", "test")]
    rows = [{"instanceID": k, "score": 2.5} for k in ids]
    result = score_file("tric-ranking", write_submission(tmp_path, rows, "jsonl"), home=home)
    for sub in ("all", "oov", "iov"):
        assert (
            result["metrics"][sub]["spearman"] is None and result["metrics"][sub]["pearson"] is None
        )
    assert result["primary"]["value"] is None
    assert any(n.startswith("all: spearman") and "constant" in n for n in result["notes"])


@pytest.mark.parametrize(
    "gold, pred, reason",
    [
        ([1.0], [2.0], "1 item"),
        ([1, 2, 3], [5, 5, 5], "constant"),
        ([2, 2, 2], [1, 2, 3], "gold labels are constant"),
    ],
)
def test_undefined_correlations(gold, pred, reason):
    values, notes = correlations(gold, pred, ("spearman", "pearson", "kendall"))
    assert values["spearman"] is values["pearson"] is values["kendall"] is None
    assert len(notes) == 3 and all(reason in n for n in notes)


def test_predictions_at_the_ends_of_float64_are_ranked_without_a_warning():
    """The constant check compares the extremes: their difference (np.ptp) overflows at +-1e308."""
    import warnings

    gold = np.array([0.0, 1.0, 2.0, 3.0])
    pred = np.array([0.0, 1.7976931348623157e308, -9.98e291, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values, notes = correlations(gold, pred, ("spearman", "kendall"))
    assert not notes
    assert close(values["spearman"], stats.spearmanr(gold, pred).statistic)
    assert close(values["kendall"], stats.kendalltau(gold, pred).statistic)


@pytest.mark.parametrize("seed", range(5))
def test_ties_as_scipy_ranks_them(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 4, 60).astype(float)
    pred = rng.integers(0, 3, 60).astype(float)
    values, _ = correlations(gold, pred, ("spearman", "pearson", "kendall"))
    # Spearman is Pearson on average ranks
    expected = np.corrcoef(stats.rankdata(gold), stats.rankdata(pred))[0, 1]
    assert close(values["spearman"], expected)
    assert close(values["kendall"], stats.kendalltau(gold, pred, variant="b").statistic)


# ---------------------------------------------------------------- swissgov-rsd


def swissgov_prediction(docs: list[dict], seed: int, noise: float) -> list[dict]:
    """Perturbed gold with ties; tokens whose gold is -1 get wild values, which must not count."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in docs:
        row = {"id": d["id"]}
        for side in ("a", "b"):
            g = np.asarray(d[f"labels_{side}"], dtype=float)
            p = np.round(g + noise * rng.standard_normal(g.size), 1)
            p[g == -1] = rng.choice([-50.0, 50.0], size=int((g == -1).sum()))
            row[f"labels_{side}"] = [float(x) for x in p]
        rows.append(row)
    return rows


def swissgov_expected(docs: list[dict], rows: list[dict], pairs=ALL_PAIRS) -> dict:
    """Per-pair Spearman and Kendall tau-b recomputed from the raw release."""
    pred = {r["id"]: r for r in rows}
    out = {}
    for pair in pairs:
        g, p = [], []
        for d in docs:
            if d["pair"] != pair:
                continue
            for side in ("a", "b"):
                gs = d[f"labels_{side}"]
                if all(x == -1 for x in gs):
                    continue
                for gv, pv in zip(gs, pred[d["id"]][f"labels_{side}"], strict=True):
                    if gv != -1:
                        g.append(gv)
                        p.append(pv)
        out[pair] = {
            "spearman": stats.spearmanr(g, p).statistic,
            "kendall": stats.kendalltau(g, p, variant="b").statistic,
            "n": len(g),
        }
    return out


@pytest.mark.parametrize("seed, noise", SEEDS_NOISE[:3])
def test_swissgov_against_scipy_from_the_raw_release(home, tmp_path, seed, noise):
    docs = swissgov_docs("test")
    rows = swissgov_prediction(docs, seed, noise)
    result = score_file("swissgov-rsd", write_submission(tmp_path, rows, "jsonl"), home=home)
    expected = swissgov_expected(docs, rows)
    for pair, vals in expected.items():
        check_subset(result["metrics"][pair], vals)
    macro = result["metrics"]["macro"]
    assert close(macro["spearman"], np.mean([v["spearman"] for v in expected.values()]))
    assert close(macro["kendall"], np.mean([v["kendall"] for v in expected.values()]))
    assert result["primary"] == {
        "name": "spearman",
        "subset": "macro",
        "value": macro["spearman"],
        "greater_is_better": True,
    }


def test_swissgov_missing_language_pair_gives_null(home, tmp_path):
    docs = [d for d in swissgov_docs("test") if d["pair"] != "en-it"]
    rows = swissgov_prediction(docs, 7, 0.3)
    result = score_file("swissgov-rsd", write_submission(tmp_path, rows, "jsonl"), home=home)
    expected = swissgov_expected(docs, rows, ("en-de", "en-fr"))
    for pair, vals in expected.items():
        check_subset(result["metrics"][pair], vals)
    assert (
        result["metrics"]["en-it"]["spearman"] is None
        and result["metrics"]["en-it"]["kendall"] is None
    )
    assert (
        result["metrics"]["macro"]["spearman"] is None
        and result["metrics"]["macro"]["kendall"] is None
    )
    assert result["primary"]["value"] is None
    assert any("en-it" in n for n in result["notes"]) and any(
        n.startswith("macro") for n in result["notes"]
    )
    assert "en-it: not in the submission" in result["notes"]
    assert any(n.startswith("macro: undefined unless every language pair") for n in result["notes"])


def test_swissgov_constant_predictions(home, tmp_path):
    docs = swissgov_docs("test")
    rows = [
        {
            "id": d["id"],
            "labels_a": [0.5] * len(d["labels_a"]),
            "labels_b": [0.5] * len(d["labels_b"]),
        }
        for d in docs
    ]
    result = score_file("swissgov-rsd", write_submission(tmp_path, rows, "csv"), home=home)
    for pair in ("en-de", "en-fr", "en-it", "macro"):
        assert result["metrics"][pair]["spearman"] is None
    assert any("constant" in n for n in result["notes"])


# ---------------------------------------------------------------- loci-similes, brute force


def write_loci(dir: Path, n_q: int, n_s: int, links: set, negatives: set = frozenset()) -> dict:
    dir.mkdir(parents=True, exist_ok=True)
    qids = [f"q. {i}" for i in range(n_q)]
    sids = [f"s, {j}" for j in range(n_s)]  # a comma, to exercise CSV quoting

    def table(name, header, rows):
        with open(dir / name, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        return dir / name

    gold_rows = [(qids[q], sids[s], 1) for q, s in sorted(links)] + [
        (qids[q], sids[s], 0) for q, s in sorted(negatives)
    ]
    return {
        "query": table("q.csv", ["seg_id", "text"], [(q, f"text {q}") for q in qids]),
        "source": table("s.csv", ["seg_id", "text"], [(s, f"text {s}") for s in sids]),
        "gold": table("g.csv", ["query_id", "source_id", "label"], gold_rows),
    }


def brute_force(n_q, n_s, gold: set, pred: dict, queries=None) -> dict:
    """Every metric by enumerating all query x source pairs (pred maps (q, s) to a score or None):
    locisimiles' per-query rule for P/R/F1/accuracy (means over the queries with a gold link),
    pooled counts for *_micro and the rates, trec_eval's ranking (ties: larger source id first)."""
    queries = range(n_q) if queries is None else queries
    tp = fp = fn = tn = 0
    per_query, per_gold_query = [], []
    for q in queries:
        c = dict(tp=0, fp=0, fn=0, tn=0)
        for s in range(n_s):
            g, p = (q, s) in gold, (q, s) in pred
            c["tp"] += g and p
            c["fp"] += p and not g
            c["fn"] += g and not p
            c["tn"] += not g and not p
        tp, fp, fn, tn = tp + c["tp"], fp + c["fp"], fn + c["fn"], tn + c["tn"]
        per_query.append(((c["fp"] + c["fn"]) / n_s, c["fp"] / n_s, c["fn"] / n_s))
        if c["tp"] + c["fn"]:
            per_gold_query.append(c)
    n = len(queries) * n_s

    def prf(c):
        p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else 0.0
        r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else 0.0
        return p, r, 2 * p * r / (p + r) if p + r else 0.0

    out = {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "n": n,
        "smr": (fp + fn) / n,
        "fpr": fp / n,
        "fnr": fn / n,
    }
    if per_gold_query:
        vals = [prf(c) for c in per_gold_query]
        for i, name in enumerate(("precision", "recall", "f1")):
            out[name] = sum(v[i] for v in vals) / len(vals)
        out["accuracy"] = sum((c["tp"] + c["tn"]) / n_s for c in per_gold_query) / len(
            per_gold_query
        )
        pooled = {k: sum(c[k] for c in per_gold_query) for k in ("tp", "fp", "fn")}
        out["precision_micro"], out["recall_micro"], out["f1_micro"] = prf(pooled)
    else:
        for name in (
            "precision",
            "recall",
            "f1",
            "accuracy",
            "precision_micro",
            "recall_micro",
            "f1_micro",
        ):
            out[name] = None
    # the paper's per-query means equal the global rates when every query faces every source
    for i, name in enumerate(("smr", "fpr", "fnr")):
        assert close(out[name], float(np.mean([x[i] for x in per_query])))
    scored = all(v is not None for v in pred.values()) and pred
    gold_queries = sorted({q for q, _ in gold if q in set(queries)})
    if not scored or not gold_queries:
        return out
    for k in (10, 100):
        vals = {"recall": [], "map": [], "mrr": [], "ndcg": []}
        for q in gold_queries:
            rel = {s for q2, s in gold if q2 == q}
            # descending score, ties by descending source id (byte order), as trec_eval
            mine = sorted(
                ((s2, sc) for (q2, s2), sc in pred.items() if q2 == q),
                key=lambda t: f"s, {t[0]}".encode(),
                reverse=True,
            )
            ranked = [
                s2 for s2, _ in sorted(mine, key=lambda t: -t[1])
            ]  # stable: ties keep that order
            top = ranked[:k]
            hits = [i for i, s2 in enumerate(top) if s2 in rel]
            vals["recall"].append(len(hits) / len(rel))
            vals["map"].append(sum((j + 1) / (i + 1) for j, i in enumerate(hits)) / len(rel))
            vals["mrr"].append(1 / (hits[0] + 1) if hits else 0.0)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(k, len(rel))))
            vals["ndcg"].append(sum(1 / math.log2(i + 2) for i in hits) / idcg)
        for m, v in vals.items():
            out[f"{m}@{k}"] = sum(v) / len(v)
    return out


def random_loci(seed: int):
    rng = np.random.default_rng(seed)
    n_q, n_s = int(rng.integers(2, 9)), int(rng.integers(3, 25))
    all_pairs = [(q, s) for q in range(n_q) for s in range(n_s)]
    gold = {
        all_pairs[i]
        for i in rng.choice(len(all_pairs), size=int(rng.integers(1, n_q * 2 + 1)), replace=False)
    }
    # predictions: most gold links and some noise, scores with ties
    pred = {}
    for pair in all_pairs:
        if (pair in gold and rng.random() < 0.7) or rng.random() < 0.3:
            pred[pair] = float(np.round(rng.random() + (0.3 if pair in gold else 0), 1))
    if not pred:
        pred[all_pairs[0]] = 0.5
    return n_q, n_s, gold, pred


def loci_submission(dir: Path, pred: dict, n_s: int, with_score: bool, fmt="csv") -> Path:
    rows = [
        {"query_id": f"q. {q}", "source_id": f"s, {s}", "score": sc} for (q, s), sc in pred.items()
    ]
    cols = ["query_id", "source_id"] + (["score"] if with_score else [])
    if fmt == "jsonl":
        rows = [{k: r[k] for k in cols} for r in rows]
    return write_submission(dir, rows, fmt, columns=cols)


@pytest.mark.parametrize("seed", range(8))
def test_loci_metrics_against_brute_force(tmp_path, seed):
    n_q, n_s, gold, pred = random_loci(seed)
    negatives = {(0, n_s - 1)} - gold  # label-0 rows of the gold file are not links
    home = tmp_path / "home"
    import_task("loci-similes", home, **write_loci(tmp_path / "release", n_q, n_s, gold, negatives))
    expected = brute_force(n_q, n_s, gold, pred)
    for with_score, fmt in ((True, "csv"), (False, "csv"), (True, "jsonl")):
        result = score_file(
            "loci-similes",
            loci_submission(tmp_path / f"{with_score}{fmt}", pred, n_s, with_score, fmt),
            home=home,
        )
        got = result["metrics"]["all"]
        for k, v in expected.items():
            if "@" in k:
                assert close(got[k], v if with_score else None), (k, got[k], v)
            else:
                assert close(got[k], v), (k, got[k], v)
        if not with_score:
            assert got["mrr@10"] is None and any("score" in n for n in result["notes"])


def test_loci_real_release_perfect_and_empty_ish(home, tmp_path):
    import csv as _csv

    from helpers import loci_files

    with open(loci_files()["gold"], encoding="utf-8", newline="") as f:
        links = [(r["query_id"], r["source_id"]) for r in _csv.DictReader(f)]
    rows = [{"query_id": q, "source_id": s, "score": 1.0} for q, s in links]
    got = score_file("loci-similes", write_submission(tmp_path, rows, "csv"), home=home)["metrics"][
        "all"
    ]
    assert (got["tp"], got["fp"], got["fn"]) == (len(links), 0, 0)
    assert (
        got["f1"] == 1.0 and got["smr"] == 0.0 and got["recall@10"] == 1.0 and got["mrr@10"] == 1.0
    )
    assert got["ndcg@10"] == 1.0 and got["map@10"] == 1.0
    assert got["tn"] == got["n"] - len(links)


# ---------------------------------------------------------------- partitions


@pytest.mark.parametrize("seed", range(4))
def test_loci_partition_equals_a_task_of_that_part(tmp_path, seed):
    n_q, n_s, gold, pred = random_loci(seed + 100)
    rng = np.random.default_rng(seed)
    part = sorted(int(q) for q in rng.choice(n_q, size=max(1, n_q // 2), replace=False))
    full_home, part_home = tmp_path / "full", tmp_path / "part"
    import_task("loci-similes", full_home, **write_loci(tmp_path / "r1", n_q, n_s, gold))
    v = validate_file(
        "loci-similes", loci_submission(tmp_path / "s1", pred, n_s, True), home=full_home
    )
    units = partition_units("loci-similes", home=full_home)
    assert units == [f"q. {q}" for q in range(n_q)]
    restricted = score_validated(v, home=full_home, only={units[q] for q in part})["metrics"]["all"]
    # the same numbers from brute force and from a task that holds only those queries
    expected = brute_force(n_q, n_s, gold, pred, queries=part)
    for k, val in expected.items():
        assert close(restricted[k], val), (k, restricted[k], val)
    remap = {q: i for i, q in enumerate(part)}
    part_gold = {(remap[q], s) for q, s in gold if q in remap}
    part_pred = {(remap[q], s): sc for (q, s), sc in pred.items() if q in remap}
    if not part_pred:
        return
    import_task("loci-similes", part_home, **write_loci(tmp_path / "r2", len(part), n_s, part_gold))
    sub = tmp_path / "s2.csv"
    with open(sub, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query_id", "source_id", "score"])
        for (q, s), sc in part_pred.items():
            w.writerow([f"q. {q}", f"s, {s}", sc])
    alone = score_file("loci-similes", sub, home=part_home)["metrics"]["all"]
    for k in expected:
        assert close(alone[k], restricted[k]), (k, alone[k], restricted[k])


def trotr_release_of_part(tmp_path: Path, kind: str, keep: set) -> Path:
    """A TRoTR tree whose fold 1 test files hold only the instances in `keep`."""
    need(TROTR)
    root = tmp_path / "TRoTR"
    fold = root / "datasets" / "FOLD_1" / "pair-by-line"
    fold.mkdir(parents=True)
    src = TROTR / "datasets" / "FOLD_1" / "pair-by-line"
    for p in src.glob(f"*.{kind}.jsonl"):
        if p.name.startswith("test."):
            lines = [
                line
                for line in p.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line)["instanceID"] in keep
            ]
            (fold / p.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            (fold / p.name).symlink_to(p)
    return root


@pytest.mark.parametrize("task_id, kind", [("tric-binary", "binary"), ("tric-ranking", "ranking")])
def test_tric_partition_equals_a_task_of_that_part(home, tmp_path, task_id, kind):
    raw = trotr_pairs(kind, "test")
    ids = [r["instanceID"] for r in raw]
    rng = np.random.default_rng(5)
    part = {ids[i] for i in rng.choice(len(ids), size=len(ids) // 3, replace=False)}
    value = "label" if kind == "binary" else "score"
    rows = [
        {
            "instanceID": r["instanceID"],
            value: (1 - int(r["label"]) if rng.random() < 0.3 else int(r["label"]))
            if kind == "binary"
            else float(r["label"]) + rng.standard_normal(),
        }
        for r in raw
    ]
    v = validate_file(task_id, write_submission(tmp_path / "full", rows, "jsonl"), home=home)
    restricted = score_validated(v, home=home, only=part)
    part_home = tmp_path / "home"
    import_task(task_id, part_home, source=trotr_release_of_part(tmp_path, kind, part))
    alone = score_file(
        task_id,
        write_submission(tmp_path / "part", [r for r in rows if r["instanceID"] in part], "jsonl"),
        home=part_home,
    )
    assert restricted["metrics"] == alone["metrics"]


def test_swissgov_partition_equals_a_task_of_that_part(home, tmp_path):
    need(SWISSGOV)
    docs = swissgov_docs("test")
    part = {d["id"] for i, d in enumerate(docs) if i % 3 == 0}
    rows = swissgov_prediction(docs, 11, 0.4)
    v = validate_file("swissgov-rsd", write_submission(tmp_path / "full", rows, "jsonl"), home=home)
    restricted = score_validated(v, home=home, only=part)
    root = tmp_path / "SwissGov-RSD" / "data" / "evaluation" / "gold_labels"
    (root / "test").mkdir(parents=True)
    (root / "dev").symlink_to(SWISSGOV / "data" / "evaluation" / "gold_labels" / "dev")
    # the documents' annotators (the annotators' subsets) come from the full gold
    (root / "full").symlink_to(SWISSGOV / "data" / "evaluation" / "gold_labels" / "full")
    for lang in LANGS:
        src = SWISSGOV / "data" / "evaluation" / "gold_labels" / "test" / f"gold_admin_{lang}.jsonl"
        lines = [
            line
            for line in src.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["id"] in part
        ]
        (root / "test" / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    part_home = tmp_path / "home"
    import_task("swissgov-rsd", part_home, source=tmp_path / "SwissGov-RSD")
    alone = score_file(
        "swissgov-rsd",
        write_submission(tmp_path / "part", [r for r in rows if r["id"] in part], "jsonl"),
        home=part_home,
    )
    assert restricted["metrics"].keys() == alone["metrics"].keys()
    for pair in alone["metrics"]:
        check_subset(restricted["metrics"][pair], alone["metrics"][pair])
    expected = swissgov_expected([d for d in docs if d["id"] in part], rows)
    for pair, vals in expected.items():
        check_subset(restricted["metrics"][pair], vals)
