"""Vectorised metrics with the papers' definitions; an undefined value is None with a reason.

Metric names are canonical (`f1`, `recall@10`, `mrr`): the same key in result dicts, database
rows, API JSON and CLI arguments.
"""

from __future__ import annotations

import warnings

import numpy as np

METRIC_NAMES = (
    "f1", "precision_0", "recall_0", "f1_0", "precision_1", "recall_1", "f1_1",
    "spearman", "pearson", "kendall", "precision", "recall", "smr", "fpr", "fnr",
    "recall@1", "recall@5", "recall@10", "recall@100", "mrr", "n",
    "tp", "fp", "fn", "tn",
)

RECALL_AT = (1, 5, 10, 100)


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
    if np.ptp(pred) == 0:
        return "undefined because the predictions are constant"
    if np.ptp(gold) == 0:
        return "undefined because the gold labels are constant"
    return None


def correlations(gold, pred, which=("spearman", "pearson")) -> tuple[dict, list[str]]:
    """Spearman (average ranks for ties), Pearson and Kendall tau-b, as scipy computes them.

    Returns the values (None where undefined) and the reasons for each None.
    """
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


def link_counts(gold_keys: np.ndarray, pred_keys: np.ndarray, n_pairs: int) -> dict:
    """P/R/F1 and the error rates over all query x source pairs; TN is derived, never enumerated.

    `gold_keys` and `pred_keys` are unique int64 pair codes (query * n_sources + source).
    SMR = (FP + FN) / N, FPR = FP / N, FNR = FN / N: the global rates, which equal the paper's
    per-query means when every query faces the same sources.
    """
    tp = int(np.count_nonzero(np.isin(pred_keys, gold_keys, assume_unique=True)))
    fp = int(pred_keys.size) - tp
    fn = int(gold_keys.size) - tp
    tn = n_pairs - tp - fp - fn
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return {
        "f1": _ratio(2 * precision * recall, precision + recall),
        "precision": precision,
        "recall": recall,
        "smr": _ratio(fp + fn, n_pairs),
        "fpr": _ratio(fp, n_pairs),
        "fnr": _ratio(fn, n_pairs),
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "n": n_pairs,
    }


def link_ranking(gold_q: np.ndarray, gold_s: np.ndarray, pred_q: np.ndarray, pred_s: np.ndarray,
                 pred_score: np.ndarray, ks=RECALL_AT) -> dict:
    """Recall@k and MRR of the gold links, each query's predicted sources ranked by score.

    A gold link's rank is the number of the query's predicted sources scoring at least as high
    as it (ties count against the submission, so a constant score earns nothing); a gold link
    that was not predicted has no rank (reciprocal rank 0). MRR is the mean reciprocal rank
    over gold links.
    """
    n_gold = int(gold_q.size)
    if n_gold == 0:
        return {f"recall@{k}": None for k in ks} | {"mrr": None}
    # Only the predictions of queries that have a gold link can rank one: sort just those.
    keep = np.isin(pred_q, gold_q)
    pred_q, pred_s, pred_score = pred_q[keep], pred_s[keep], pred_score[keep]
    order = np.lexsort((pred_s, pred_q))
    q_sorted, s_sorted = pred_q[order], pred_s[order]
    sc_sorted = pred_score[order]
    # locate every gold link among the predictions by (query, source)
    starts = np.searchsorted(q_sorted, gold_q, side="left")
    ends = np.searchsorted(q_sorted, gold_q, side="right")
    ranks = np.zeros(n_gold, dtype=np.int64)  # 0 = not predicted
    for i in range(n_gold):
        a, b = starts[i], ends[i]
        if a == b:
            continue
        block_s = s_sorted[a:b]
        j = np.searchsorted(block_s, gold_s[i])
        if j < block_s.size and block_s[j] == gold_s[i]:
            block_scores = sc_sorted[a:b]
            ranks[i] = int(np.count_nonzero(block_scores >= block_scores[j]))
    found = ranks > 0
    out = {f"recall@{k}": float(np.count_nonzero(found & (ranks <= k))) / n_gold for k in ks}
    rr = np.zeros(n_gold)
    rr[found] = 1.0 / ranks[found]
    out["mrr"] = float(rr.mean())
    return out


# ---------------------------------------------------------------- the registry declarations name
# A task declares its metrics by these names (`Task.metrics`); a family computes the ones a task
# declares and nothing else. `kind` says how: "classification" and "correlation" over one value
# per item (`per_item`), "links" over predicted links, "count" the number of items scored.


from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    greater_is_better: bool = True
    description: str = ""


REGISTRY: dict[str, Metric] = {m.name: m for m in (
    Metric("f1", "classification", description="F1 weighted by gold support (links: F1 of the links)"),
    *(Metric(f"{what}_{c}", "classification", description=f"{what} of label {c}")
      for c in (0, 1) for what in ("precision", "recall", "f1")),
    Metric("spearman", "correlation", description="Spearman's rank correlation"),
    Metric("pearson", "correlation", description="Pearson's correlation"),
    Metric("kendall", "correlation", description="Kendall's tau-b"),
    Metric("precision", "links"), Metric("recall", "links"),
    Metric("smr", "links", greater_is_better=False, description="(FP + FN) / N"),
    Metric("fpr", "links", greater_is_better=False, description="FP / N"),
    Metric("fnr", "links", greater_is_better=False, description="FN / N"),
    *(Metric(f"recall@{k}", "links") for k in RECALL_AT),
    Metric("mrr", "links", description="mean reciprocal rank of the gold links"),
    *(Metric(c, "links", greater_is_better=None) for c in ("tp", "fp", "fn", "tn")),
    Metric("n", "count", greater_is_better=None, description="items scored"),
)}


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
