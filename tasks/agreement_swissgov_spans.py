"""SwissGov-RSD's span-level agreement (the paper's Table 2) by the authors' protocol.

A span is one annotation of the raw release (`annotations/annotations_raw/annotations{1,2}/<lang>/
<page>.jsonl`, one JSON object a line): the positions it marks on the other-language side
(`text1_positions`) and on the English side (`text2_positions`), either of them possibly empty, and
one `score` (1-5). The authors compute Table 2 with `annotations/scripts/evaluate_annotations.py`
(ZurichNLP/SwissGov-RSD); re-implemented here from its text (not copied), per language pair, on
the documents (file names) both annotators' folders hold:

* `spans_1`, `spans_2`: the annotations of each annotator; `tokens_1`, `tokens_2`: the tokens
  they mark, both sides, counted per annotation (a token two annotations share counts twice);
* `iou_a` / `iou_b` (English / other language): per document and side, |P1 ∩ P2| / |P1 ∪ P2|, P
  the set of positions an annotator marked on that side, averaged over the documents (a side
  neither annotator marked in a document, where the ratio is undefined, is left out of that side's
  mean; the authors' script stops there, and the release has none); `f1_a` / `f1_b`: the same
  sets' F1 (precision |P1 ∩ P2| / |P1|, recall |P1 ∩ P2| / |P2|; 0 where either is 0);
* `matched@50`, `@75`, `@90`: every pair (an annotation of annotator 1, one of annotator 2, of
  the same document pair) that overlaps on a side and whose IoU, the mean of the two sides' IoU of
  positions (a side both leave empty counting 1), is at least the threshold; `spearman@...`:
  Spearman's rho (scipy, ties averaged) of the two scores over those pairs;
* `matched@exact`: annotator 1's annotations whose positions on both sides equal those of an
  annotation of annotator 2 on the same document pair; `spearman@exact`: rho of the scores of
  annotator 1's exactly matched annotations, in the order they come (document by document, each
  file's order), against annotator 2's exactly matched ones in theirs, as the authors' script
  pairs them: where the two files list their matches in different orders, a score is paired with
  another annotation's (`paired_by_key` says whether every one met its own match). On the release
  they do not for EN-FR (3 of 23) and EN-IT (2 of 64), so Table 2's 91.09 and 82.76 pair some
  scores with another annotation's; `spearman@exact_by_key`, each annotation against its own
  match, gives 98.90 and 91.70 (EN-DE's first run: 83.17 both ways). Positions are compared as
  the annotation lists them: the same tokens listed in another order are no exact match (the
  authors' script compares the lists).

A document with no annotation in one of the folders (an empty file) is left out, as the authors'
script leaves it out. The token-run variant of the same rows (`tasks.agreement_swissgov.
token_run_agreement`: spans re-derived as runs of one label on the gold's tokens) is a different
protocol, not the paper's; it is kept beside these rows under its own name.
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.errors import ReleaseError

THRESHOLDS = (("50", 0.5), ("75", 0.75), ("90", 0.9))
# Table 2 of the paper as printed (EN-FR and EN-IT; EN-DE's are of the run the paper's note 5
# says replaced the release's first one); rates x 100
PAPER_SPANS = {
    "en-de": {
        "spans_1": 348, "spans_2": 139, "tokens_1": 2543, "tokens_2": 1699,
        "matched@50": 145, "matched@75": 52, "matched@90": 37, "matched@exact": 27,
        "iou_a": 23.98, "iou_b": 39.95, "f1_a": 34.61, "f1_b": 51.14,
        "spearman@50": 76.47, "spearman@75": 78.36, "spearman@90": 79.50, "spearman@exact": 73.27,
    },
    "en-fr": {
        "spans_1": 148, "spans_2": 192, "tokens_1": 1167, "tokens_2": 1453,
        "matched@50": 54, "matched@75": 36, "matched@90": 28, "matched@exact": 23,
        "iou_a": 24.06, "iou_b": 29.65, "f1_a": 33.34, "f1_b": 40.04,
        "spearman@50": 90.21, "spearman@75": 98.05, "spearman@90": 97.66, "spearman@exact": 91.09,
    },
    "en-it": {
        "spans_1": 276, "spans_2": 382, "tokens_1": 4451, "tokens_2": 3420,
        "matched@50": 222, "matched@75": 85, "matched@90": 73, "matched@exact": 64,
        "iou_a": 32.10, "iou_b": 43.52, "f1_a": 44.15, "f1_b": 55.60,
        "spearman@50": 88.12, "spearman@75": 93.71, "spearman@90": 92.89, "spearman@exact": 82.76,
    },
}  # fmt: skip
RATES = (
    "iou_a", "iou_b", "f1_a", "f1_b", "spearman@50", "spearman@75", "spearman@90", "spearman@exact"
)  # fmt: skip


def read_annotations(path: Path) -> list[dict]:
    """The annotations of one raw file, each checked: both position lists (pairs of integers),
    `score` and `pair`; a bad line is a ReleaseError naming the file and line."""
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                a = json.loads(line)
                listed = {
                    k: tuple(tuple(map(int, p)) for p in a[k])
                    for k in ("text1_positions", "text2_positions")
                }
                item = {
                    **{k: frozenset(v) for k, v in listed.items()},
                    "listed": (listed["text1_positions"], listed["text2_positions"]),
                    "tokens": len(a["text1"]) + len(a["text2"]),
                    "score": float(a["score"]),
                    "pair": str(a["pair"]),
                }
            except (ValueError, KeyError, TypeError) as e:
                raise ReleaseError(
                    path, f"not an annotation ({type(e).__name__}: {e})", n
                ) from None
            out.append(item)
    return out


def _rho(x: list[float], y: list[float]) -> float | None:
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    from scipy import stats  # on first use: scipy.stats costs an importing process 0.7 s of CPU

    return float(stats.spearmanr(x, y).statistic)


def _set_iou(a: frozenset, b: frozenset) -> float | None:
    union = len(a | b)
    return len(a & b) / union if union else None


def _set_f1(a: frozenset, b: frozenset) -> float:
    tp = len(a & b)
    p = tp / len(a) if a else 0.0
    r = tp / len(b) if b else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


SIDES = (("a", "text2_positions"), ("b", "text1_positions"))  # a: English, b: the other language


def annotation_agreement(docs: list[tuple[list[dict], list[dict]]]) -> dict:
    """Table 2's span rows for one language pair from `docs`: per document, the two annotators'
    annotations (`read_annotations`). See the module for each row."""
    out: dict = {"spans_1": 0, "spans_2": 0, "tokens_1": 0, "tokens_2": 0}
    per_side: dict[str, list[tuple[float | None, float]]] = {"a": [], "b": []}
    all1: list[dict] = []
    all2: list[dict] = []
    used = 0
    for a1, a2 in docs:
        if not a1 or not a2:
            continue  # an empty file: left out, as the authors leave it out
        used += 1
        out["spans_1"] += len(a1)
        out["spans_2"] += len(a2)
        out["tokens_1"] += sum(a["tokens"] for a in a1)
        out["tokens_2"] += sum(a["tokens"] for a in a2)
        for side, key in SIDES:
            p1 = frozenset().union(*(a[key] for a in a1))
            p2 = frozenset().union(*(a[key] for a in a2))
            per_side[side].append((_set_iou(p1, p2), _set_f1(p1, p2)))
        all1.extend(a1)
        all2.extend(a2)

    # exact matches: both sides' positions and the document pair equal
    def key(a):
        return (a["listed"], a["pair"])

    keys1, keys2 = {key(a) for a in all1}, {key(a) for a in all2}
    x = [a for a in all1 if key(a) in keys2]
    y = [a for a in all2 if key(a) in keys1]
    out["matched@exact"] = len(x)
    out["spearman@exact"] = (
        _rho([a["score"] for a in x], [a["score"] for a in y]) if len(x) == len(y) else None
    )
    out["paired_by_key"] = len(x) == len(y) and all(
        key(a) == key(b) for a, b in zip(x, y, strict=True)
    )
    # beside it, each exactly matched annotation of annotator 1 with its own match's score (the
    # first of annotator 2's with that key): not the paper's figure where the orders differ
    first: dict = {}
    for b in all2:
        first.setdefault(key(b), b["score"])
    out["spearman@exact_by_key"] = _rho([a["score"] for a in x], [first[key(a)] for a in x])
    # fuzzy matches: every pair of one document pair overlapping on a side
    by_pair: dict[str, list[dict]] = {}
    for a in all2:
        by_pair.setdefault(a["pair"], []).append(a)
    got: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k, _ in THRESHOLDS}
    for a in all1:
        for b in by_pair.get(a["pair"], ()):
            overlap = False
            ious = []
            for _, k in SIDES:
                inter = len(a[k] & b[k])
                overlap |= inter > 0
                union = len(a[k] | b[k])
                ious.append(inter / union if union else 1.0)
            if not overlap:
                continue
            iou = (ious[0] + ious[1]) / 2
            for name, t in THRESHOLDS:
                if iou >= t:
                    got[name][0].append(a["score"])
                    got[name][1].append(b["score"])
    for name, (s1, s2) in got.items():
        out[f"matched@{name}"] = len(s1)
        out[f"spearman@{name}"] = _rho(s1, s2)
    for side, vals in per_side.items():
        ious = [v[0] for v in vals if v[0] is not None]
        out[f"iou_{side}"] = sum(ious) / len(ious) if ious else None
        out[f"f1_{side}"] = sum(v[1] for v in vals) / len(vals) if vals else None
    out["documents"] = used
    return out


def annotation_spans(raw: Path, lang: str) -> dict:
    """Table 2's span rows of one language pair (`lang`: de, fr or it) from the raw annotations
    under `raw` (`annotations/annotations_raw`), on the files both annotators' folders hold."""
    d1, d2 = raw / "annotations1" / lang, raw / "annotations2" / lang
    for d in (d1, d2):
        if not d.is_dir():
            raise ReleaseError(d, "missing: the span agreement needs both annotators' raw files")
    shared = sorted({p.name for p in d1.glob("*.jsonl")} & {p.name for p in d2.glob("*.jsonl")})
    docs = [(read_annotations(d1 / f), read_annotations(d2 / f)) for f in shared]
    got = annotation_agreement(docs)
    got["overlapping"] = len(shared)
    got["protocol"] = "annotations"
    return got


def compare(got: dict, paper: dict) -> dict:
    """Each row of ours against the paper's printed figure: {row: [ours, paper, equal]}, rates x 100
    rounded to the hundredth as Table 2 prints them."""
    out = {}
    for row, want in paper.items():
        v = got.get(row)
        if v is not None and row in RATES:
            v = round(v * 100, 2)
        out[row] = [v, want, v == want]
    return out


__all__ = [
    "PAPER_SPANS",
    "THRESHOLDS",
    "annotation_agreement",
    "annotation_spans",
    "compare",
    "read_annotations",
]
