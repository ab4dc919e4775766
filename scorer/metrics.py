"""Vectorised metrics with the papers' definitions; an undefined value is None with a reason.

Metric names are canonical (`f1`, `recall@10`, `mrr@10`): the same key in result dicts, database
rows, API JSON and CLI arguments.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from tasks.catalogue import COUNT_METRICS, IR_CUTOFFS, METRIC_LIST, METRICS


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else 0.0


def classification(gold: np.ndarray, pred: np.ndarray) -> dict:
    """Weighted F1 and per-label P/R/F1 over labels {0, 1}.

    Identical to scikit-learn's precision_recall_fscore_support with zero_division=0:
    a label never predicted has precision 0, a label absent from gold has recall 0,
    and the weighted F1 weighs each label's F1 by its gold support.
    """
    gold = np.asarray(gold, dtype=np.int8)
    pred = np.asarray(pred, dtype=np.int8)
    n = int(gold.size)
    out: dict = {}
    weighted = 0.0
    for c in (0, 1):
        g, p = gold == c, pred == c
        tp = int(np.count_nonzero(g & p))
        support, predicted = int(np.count_nonzero(g)), int(np.count_nonzero(p))
        precision, recall = _ratio(tp, predicted), _ratio(tp, support)
        f1 = _ratio(2 * precision * recall, precision + recall)
        out[f"precision_{c}"], out[f"recall_{c}"], out[f"f1_{c}"] = precision, recall, f1
        weighted += f1 * support
    out["f1"] = _ratio(weighted, n)
    out["n"] = n
    return {"f1": out.pop("f1"), **out}


def _undefined_reason(gold: np.ndarray, pred: np.ndarray) -> str | None:
    if gold.size < 2:
        return f"undefined for {gold.size} item{'s' if gold.size != 1 else ''}"
    if not np.isfinite(pred).all():
        return "the predictions hold non-finite values"
    if pred.min() == pred.max():  # np.ptp overflows on ±1e308
        return "undefined because the predictions are constant"
    if gold.min() == gold.max():
        return "undefined because the gold labels are constant"
    return None


def correlations(gold, pred, which=("spearman", "pearson")) -> tuple[dict, list[str]]:
    """Spearman (average ranks for ties), Pearson and Kendall tau-b, as scipy computes them.

    Returns the values (None where undefined) and the reasons for each None.
    """
    # heavy: scipy loads only for these statistics (`palimpsest validate` never needs it)
    from scipy import stats

    gold = np.asarray(gold, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    values: dict = {}
    notes: list[str] = []
    reason = _undefined_reason(gold, pred)
    for name in which:
        if reason:
            values[name] = None
            notes.append(f"{name} {reason}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "spearman":
                v = stats.spearmanr(gold, pred).statistic
            elif name == "pearson":
                v = stats.pearsonr(gold, pred).statistic
            elif name == "kendall":
                v = stats.kendalltau(gold, pred, variant="b").statistic
            else:  # pragma: no cover - programming error
                raise ValueError(name)
        v = float(v)
        if not np.isfinite(v):
            values[name] = None
            notes.append(f"{name} is undefined for these values")
        else:
            values[name] = v
    values["n"] = int(gold.size)
    return values, notes


# ---------------------------------------------------------------- Loci Similes (locisimiles 2.1.3)

IR_MEASURES = ("recall", "map", "mrr", "ndcg")


def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b elementwise, 0 where b is 0 (the package's `x / y if y else 0.0`)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape), where=b != 0)


def loci_links(
    gold_q: np.ndarray,
    gold_s: np.ndarray,
    pred_q: np.ndarray,
    pred_s: np.ndarray,
    n_queries: int,
    n_sources: int,
    keep: np.ndarray | None = None,
) -> tuple[dict, list[str]]:
    """Loci Similes' link metrics as locisimiles 2.1.3's `IntertextEvaluator.evaluate()` has them.

    `gold_*` and `pred_*` are unique (query index, source index) pairs; `keep` (a boolean mask over
    the queries) restricts everything to those queries. Precision, recall, F1 and accuracy are
    over the *gold queries* (those with at least one gold link) only: `precision`, `recall`,
    `f1`, `accuracy` are the means of the per-query values (average="macro"; a query with no
    predicted link has precision 0), `*_micro` come from the counts pooled over the same
    queries (average="micro"). SMR, FPR and FNR are over every query, TP/FP/FN/TN over every
    query x source pair (N = queries x sources). The package's macro SMR/FPR/FNR is the mean of
    per-query rates over all queries, which equals the pooled rate (every query faces the same
    sources). No pair is ever enumerated: per-query counts come from bincounts.
    """
    keep = np.ones(n_queries, dtype=bool) if keep is None else keep
    n_gold = np.bincount(gold_q, minlength=n_queries)
    n_pred = np.bincount(pred_q, minlength=n_queries)
    gold_query = (n_gold > 0) & keep
    # only the predictions of gold queries can be hits: a small subset of a large run
    cand = gold_query[pred_q]
    cq, cs = pred_q[cand], pred_s[cand]
    hit = np.isin(cq * np.int64(n_sources) + cs, gold_q * np.int64(n_sources) + gold_s)
    tp_q = np.bincount(cq[hit], minlength=n_queries)
    return link_figures(n_gold, n_pred, tp_q, keep, n_sources)


def link_figures(
    n_gold: np.ndarray, n_pred: np.ndarray, tp_q: np.ndarray, keep: np.ndarray, n_sources: int
) -> tuple[dict, list[str]]:
    """`loci_links`' figures from its per-query counts: gold links, predicted links and hits of
    each query (`tp_q` 0 outside the kept gold queries), over the queries `keep` holds."""
    gold_query = (n_gold > 0) & keep
    tp = int(tp_q[keep].sum())
    fp = int(n_pred[keep].sum()) - tp
    fn = int(n_gold[keep].sum()) - tp
    n = int(keep.sum()) * n_sources
    tn = n - tp - fp - fn
    out: dict = {}
    notes: list[str] = []
    gq = np.flatnonzero(gold_query)
    if gq.size:
        t, p_, g = tp_q[gq], n_pred[gq], n_gold[gq]
        f_p, f_n = p_ - t, g - t
        t_n = n_sources - t - f_p - f_n
        precision, recall = div(t, t + f_p), div(t, t + f_n)
        s = precision + recall
        f1 = np.divide(2 * precision * recall, s, out=np.zeros(s.shape), where=s != 0)
        accuracy = (t + t_n) / n_sources
        out["precision"], out["recall"] = float(precision.mean()), float(recall.mean())
        out["f1"], out["accuracy"] = float(f1.mean()), float(accuracy.mean())
        tp_m, fp_m, fn_m = int(t.sum()), int(f_p.sum()), int(f_n.sum())
        pm, rm = _ratio(tp_m, tp_m + fp_m), _ratio(tp_m, tp_m + fn_m)
        out["precision_micro"], out["recall_micro"] = pm, rm
        out["f1_micro"] = 2 * pm * rm / (pm + rm) if pm + rm else 0.0
    else:
        for k in (
            "precision",
            "recall",
            "f1",
            "accuracy",
            "precision_micro",
            "recall_micro",
            "f1_micro",
        ):
            out[k] = None
        notes.append(
            "precision, recall, f1 and accuracy are undefined: no query here has a gold link"
        )
    out.update(
        {
            "smr": _ratio(fp + fn, n),
            "fpr": _ratio(fp, n),
            "fnr": _ratio(fn, n),
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "tn": tn,
            "n": n,
        }
    )
    return out, notes


def trec_scores(scores: np.ndarray) -> np.ndarray:
    """Scores as trec_eval compares them: rounded to the nearest float32 (its `float sim`), a
    magnitude beyond float32's range becoming an infinity of its sign, as a C cast makes it."""
    with np.errstate(over="ignore"):
        return np.asarray(scores, dtype=np.float64).astype(np.float32)


def ir_names(cutoffs=IR_CUTOFFS) -> list[str]:
    return [f"{m}@{k}" for k in cutoffs for m in IR_MEASURES]


def link_ranking_ir(
    gold_q: np.ndarray,
    gold_s: np.ndarray,
    pred_q: np.ndarray,
    pred_s: np.ndarray,
    pred_score: np.ndarray,
    n_queries: int,
    n_sources: int,
    source_order: np.ndarray,
    keep: np.ndarray | None = None,
    cutoffs=IR_CUTOFFS,
) -> tuple[dict, list[str]]:
    """recall@k, map@k, mrr@k and ndcg@k in the IR convention (trec_eval's `recall_k`,
    `map_cut_k`, `recip_rank` cut at k, `ndcg_cut_k` with binary gain), averaged over the gold
    queries (those with at least one gold link; one with no predicted link counts 0).

    Each query's predicted sources are ranked as trec_eval ranks them (`comp_sim_docno`): by
    descending score compared in single precision (`trec_scores`), so that scores equal as float32
    tie, and ties broken by descending source id in byte order (`source_order[s]` is the position
    of source s among the ids sorted that way, ascending). A cut-off deeper than the run (no query
    ranks that many sources) is reported only when some query ranks at least that many; k = 10
    and 100 are always reported.
    """
    keep = np.ones(n_queries, dtype=bool) if keep is None else keep
    n_gold = np.bincount(gold_q, minlength=n_queries)
    gold_query = (n_gold > 0) & keep
    notes: list[str] = []
    depth = (
        int(np.bincount(pred_q, minlength=n_queries)[keep].max())
        if pred_q.size and keep.any()
        else 0
    )
    shown = [k for k in cutoffs if k <= 100 or depth >= k]
    out: dict = {name: None for name in ir_names(cutoffs)}
    for k in cutoffs:
        if k not in shown:
            notes.append(
                f"@{k} metrics are reported only for a run that ranks at least {k} sources "
                f"for some query (this one ranks at most {depth})"
            )
    gq = np.flatnonzero(gold_query)
    if not gq.size:
        notes.append("ranking metrics are undefined: no query here has a gold link")
        return out, notes
    # relevant predictions only, in ranked order
    rq, rr = ranked_hits(
        gold_q, gold_s, pred_q, pred_s, pred_score, n_sources, source_order, gold_query
    )
    nth = np.arange(rq.size) - np.searchsorted(
        rq, rq, side="left"
    )  # 0-based index among the relevant
    ng = n_gold[gq].astype(np.float64)
    pos = np.searchsorted(gq, rq)  # position of each relevant prediction's query among gq
    for k in shown:
        within = rr < k
        hits = np.bincount(pos[within], minlength=gq.size)
        ap = np.bincount(
            pos[within], weights=(nth[within] + 1) / (rr[within] + 1), minlength=gq.size
        )
        first = within & (nth == 0)
        rr_k = np.zeros(gq.size)
        rr_k[pos[first]] = 1.0 / (rr[first] + 1)
        dcg = np.bincount(pos[within], weights=1.0 / np.log2(rr[within] + 2), minlength=gq.size)
        disc = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(k) + 2))])
        idcg = disc[np.minimum(n_gold[gq], k)]
        out[f"recall@{k}"] = float((hits / ng).mean())
        out[f"map@{k}"] = float((ap / ng).mean())
        out[f"mrr@{k}"] = float(rr_k.mean())
        out[f"ndcg@{k}"] = float((dcg / idcg).mean())
    return out, notes


CUT_COLUMNS = ("predictions", "tp", "fp", "fn", "f1", "f1_micro", "fpr_e4", "smr_e4")
"""The columns of a ranking cut at k (Loci Similes, Table 3's retrieval-only setting)."""


def ranked_hits(
    gold_q: np.ndarray,
    gold_s: np.ndarray,
    pred_q: np.ndarray,
    pred_s: np.ndarray,
    pred_score: np.ndarray,
    n_sources: int,
    source_order: np.ndarray,
    ranked: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(query, rank) of every predicted link that is a gold link, in ranked order: query by
    query, each one's 0-based rank within its query's predictions, ranked as trec_eval ranks them
    (descending score compared in single precision, ties by descending source id in byte order:
    `source_order[s]` is source s's place among the ids so sorted). Only the queries `ranked`
    (a boolean mask over the queries) are ranked: a query's ranks depend on its own predictions
    alone, so the links of every other query, most of a large run, are never sorted."""
    pred_q = np.asarray(pred_q, dtype=np.int64)
    cand = ranked[pred_q]
    cq, cs = pred_q[cand], np.asarray(pred_s, dtype=np.int64)[cand]
    csc = trec_scores(np.asarray(pred_score)[cand])
    order = np.lexsort((-source_order[cs], -csc, cq))
    cq, cs = cq[order], cs[order]
    rel = np.isin(cq * np.int64(n_sources) + cs, gold_q * np.int64(n_sources) + gold_s)
    rank = np.arange(cq.size) - np.searchsorted(cq, cq, side="left")  # 0-based, in its query
    return cq[rel], rank[rel]


def ranking_cuts(
    gold_q: np.ndarray,
    gold_s: np.ndarray,
    pred_q: np.ndarray,
    pred_s: np.ndarray,
    pred_score: np.ndarray,
    n_queries: int,
    n_sources: int,
    source_order: np.ndarray,
    cut_at,
    keep: np.ndarray | None = None,
) -> dict[str, dict]:
    """Set metrics of a ranking cut at each k of `cut_at`: every query's top k sources (ranked as
    `ranked_hits` ranks them; all of them where it ranks fewer) taken as its predicted links,
    then scored as any link file is (`loci_links`): `predictions` (TP + FP), `tp`, `fp`, `fn`
    over every query x source pair, `f1` the mean F1 of the gold queries (the package's macro),
    `f1_micro` from the counts pooled over the same queries, and FPR and SMR times 10^4 (FP / N
    and (FP + FN) / N, N = queries x sources), as Loci Similes' Table 3 scales them. Keys are the
    k as text.

    A cut needs no order of the whole run: a query keeps min(its predictions, k) links, and only
    its hits' ranks decide how many of them are true, so only the gold queries' predictions are
    ranked (`ranked_hits`) and every figure comes from per-query counts (`link_figures`)."""
    pred_q = np.asarray(pred_q, dtype=np.int64)
    keep = np.ones(n_queries, dtype=bool) if keep is None else keep
    n_gold = np.bincount(gold_q, minlength=n_queries)
    n_pred = np.bincount(pred_q, minlength=n_queries)
    rq, rr = ranked_hits(
        gold_q, gold_s, pred_q, pred_s, pred_score, n_sources, source_order, (n_gold > 0) & keep
    )
    out: dict[str, dict] = {}
    for k in sorted({int(k) for k in cut_at}):
        tp_q = np.bincount(rq[rr < k], minlength=n_queries)
        vals, _ = link_figures(n_gold, np.minimum(n_pred, k), tp_q, keep, n_sources)
        out[str(k)] = {
            "predictions": vals["tp"] + vals["fp"],
            "tp": vals["tp"],
            "fp": vals["fp"],
            "fn": vals["fn"],
            "f1": vals["f1"],
            "f1_micro": vals["f1_micro"],
            "fpr_e4": vals["fpr"] * 1e4,
            "smr_e4": vals["smr"] * 1e4,
        }
    return out


# ---------------------------------------------------------------- the implementations
# The names are declared once, in `tasks.catalogue`; the scorer attaches how it computes each:
# "classification" and "correlation" over one value per item (`per_item`), "links" and "ranking"
# over predicted links (`loci_links`, `link_ranking_ir`), "count" the number of units scored. A
# metric's kind follows from the per-unit statistics it declares.

IMPLEMENTATION = {
    "confusion": "classification",
    "moments": "correlation",
    "values": "correlation",
    "link counts": "links",
    "ranked links": "ranking",
    "span counts": "spans",
    "": "count",
}
"""The scorer's function family for each kind of per-unit statistics a metric declares."""


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    greater_is_better: bool | None = True
    description: str = ""


def fold_key(fold: str) -> tuple:
    """Sort key of fold names: numeric folds in numeric order ("2" before "10"), then any other."""
    return (0, int(fold), fold) if fold.isdigit() else (1, 0, fold)


REGISTRY: dict[str, Metric] = {
    m.name: Metric(m.name, IMPLEMENTATION[m.statistics], m.greater_is_better, m.description)
    for m in METRIC_LIST
}
"""Every declared metric with the scorer's implementation (`tasks.catalogue` names them)."""

__all__ = ["COUNT_METRICS", "IR_CUTOFFS", "METRICS", "REGISTRY", "Metric", "fold_key"]


def unknown_metrics(names) -> list[str]:
    """The names that the registry lacks (a declaration naming one is wrong)."""
    return [n for n in names if n not in REGISTRY]


def per_item(names, gold, pred) -> tuple[dict, list[str]]:
    """The metrics `names` (in that order) of aligned gold and predicted values, one per item, and
    the reasons for each None; an empty input gives every metric None and `n` 0."""
    gold = np.asarray(gold, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    if gold.size == 0:
        return {k: (0 if k == "n" else None) for k in names}, []
    values: dict = {}
    notes: list[str] = []
    wanted = {REGISTRY[n].kind for n in names}
    if "classification" in wanted:
        values.update(classification(gold.astype(int), pred.astype(int)))
    corr = [n for n in names if REGISTRY[n].kind == "correlation"]
    if corr:
        vals, notes = correlations(gold, pred, corr)
        values.update(vals)
    values["n"] = int(gold.size)
    other = [n for n in names if n not in values]
    if other:
        raise ValueError(f"metric(s) {', '.join(other)} are not computed from one value per item")
    return {k: values[k] for k in names}, notes


def macro(per_group: dict[str, dict], names) -> dict:
    """The mean of each metric over the groups given (None unless every group has a value);
    `n` is their sum."""
    out: dict = {}
    for k in names:
        if k == "n":
            out[k] = sum(int(v.get("n") or 0) for v in per_group.values())
            continue
        vals = [v.get(k) for v in per_group.values()]
        out[k] = float(np.mean(vals)) if vals and all(x is not None for x in vals) else None
    return out
