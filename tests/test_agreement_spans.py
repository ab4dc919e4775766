"""SwissGov-RSD's span-level agreement rows (the paper's Table 2): spans per annotator, span pairs
matched at IoU >= 50/75/90 % and exactly, mean IoU and F1 per side, the correlations over matched
spans; against a naive loop written here (spans by itertools.groupby, IoU from sets)."""

from __future__ import annotations

import itertools
import random

import pytest
from scipy.stats import spearmanr

from tasks.agreement_swissgov import token_run_agreement as span_agreement
from tasks.agreement_swissgov import token_runs as spans


def naive_spans(labels) -> list[tuple[set, int]]:
    out, pos = [], 0
    for label, run in itertools.groupby(labels):
        n = len(list(run))
        if label > 0:
            out.append((set(range(pos, pos + n)), label))
        pos += n
    return out


def naive(docs) -> dict:
    got = {"spans_1": 0, "spans_2": 0, "tokens_1": 0, "tokens_2": 0}
    matched = {"50": [], "75": [], "90": [], "exact": []}
    side_vals = {"a": [], "b": []}
    for doc in docs:
        for side, (l1, l2) in doc.items():
            s1, s2 = naive_spans(l1), naive_spans(l2)
            got["spans_1"] += len(s1)
            got["spans_2"] += len(s2)
            d1 = {i for i, v in enumerate(l1) if v > 0}
            d2 = {i for i, v in enumerate(l2) if v > 0}
            got["tokens_1"] += len(d1)
            got["tokens_2"] += len(d2)
            if d1 | d2:
                side_vals[side].append(
                    (len(d1 & d2) / len(d1 | d2), 2 * len(d1 & d2) / (len(d1) + len(d2)))
                )
            for (t1, v1), (t2, v2) in itertools.product(s1, s2):
                iou = len(t1 & t2) / len(t1 | t2)
                for key, t in (("50", 0.5), ("75", 0.75), ("90", 0.9)):
                    if iou >= t:
                        matched[key].append((v1, v2))
                if t1 == t2:
                    matched["exact"].append((v1, v2))
    for key, pairs in matched.items():
        got[f"matched@{key}"] = len(pairs)
        x = [p[0] for p in pairs]
        y = [p[1] for p in pairs]
        ok = len(pairs) > 1 and len(set(x)) > 1 and len(set(y)) > 1
        got[f"spearman@{key}"] = spearmanr(x, y).statistic if ok else None
    for side, vals in side_vals.items():
        got[f"iou_{side}"] = sum(v[0] for v in vals) / len(vals) if vals else None
        got[f"f1_{side}"] = sum(v[1] for v in vals) / len(vals) if vals else None
    got["documents"] = len(docs)
    return got


def test_spans_by_hand():
    assert spans([0, 2, 2, 0, 3, 3, 3, 5, 0]) == [(1, 3, 2), (4, 7, 3), (7, 8, 5)]
    assert spans([]) == [] and spans([0, 0]) == []
    one = span_agreement([{"a": ([0, 2, 2, 2, 0], [0, 2, 2, 0, 0]), "b": ([1, 0], [0, 0])}])
    # the two spans of side a: IoU 2/3, so matched at 50 only; side b: annotator 2 marked nothing
    assert one["matched@50"] == 1 and one["matched@75"] == 0 and one["matched@exact"] == 0
    assert one["iou_a"] == pytest.approx(2 / 3) and one["f1_a"] == pytest.approx(0.8)
    assert one["iou_b"] == 0.0 and one["f1_b"] == 0.0
    assert (one["spans_1"], one["spans_2"], one["tokens_1"], one["tokens_2"]) == (2, 1, 4, 2)


def _labels(rng: random.Random, n: int) -> list[int]:
    out, i = [], 0
    while i < n:
        k = rng.randint(1, 6)
        v = rng.choice([0, 0, 0, 1, 2, 3, 4, 5])
        out += [v] * k
        i += k
    return out[:n]


def _noisy(rng: random.Random, labels: list[int]) -> list[int]:
    """Annotator 2: annotator 1's spans, often shifted by a token or relabelled."""
    out = list(labels)
    for i in range(len(out)):
        r = rng.random()
        if r < 0.08:
            out[i] = 0
        elif r < 0.16 and i + 1 < len(out):
            out[i] = labels[i + 1]
        elif r < 0.22 and out[i]:
            out[i] = rng.randint(1, 5)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_rows_equal_a_naive_loop(seed):
    rng = random.Random(seed)
    docs = []
    for _ in range(rng.randint(1, 8)):
        doc = {}
        for side in ("a", "b"):
            l1 = _labels(rng, rng.randint(0, 60))
            doc[side] = (l1, _noisy(rng, l1))
        docs.append(doc)
    got, want = span_agreement(docs), naive(docs)
    assert got.keys() == want.keys()
    for k, v in want.items():
        if v is None or isinstance(v, int):
            assert got[k] == v, k
        else:
            assert got[k] == pytest.approx(v, abs=1e-12), k
