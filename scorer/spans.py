"""PAN's text alignment measures, vectorised: detections of reused text as pairs of character
spans, scored as PAN's evaluator scores them.

A case (gold) and a detection (a run's) are each a pair of spans: `this_offset`, `this_length` in
the suspicious document and `source_offset`, `source_length` in the source document, of one
document pair. The measures are those of Potthast, Stein, Barrón-Cedeño and Rosso, "An evaluation
framework for plagiarism detection" (COLING 2010), as `pan-code`'s evaluator computes them
(`sepln09/pan09-plagiarism-detection-performance-measures.py`, kept in
`clef15/text-alignment/pan15_text_alignment_evaluator_character_level.py`, with the case and
document level of PAN 2014 and 2015 in `..._case_level.py` and `..._document_level.py`):

- a detection *overlaps* a case when both are of the same pair and their spans overlap in the
  suspicious document and in the source document;
- a case's recall: the characters of the case (suspicious and source side, each counted once)
  covered by the detections that overlap it, over its length (`this_length + source_length`);
  `recall` is the mean over every case (a case no detection overlaps counts 0); a detection's
  precision likewise against the cases, `precision` the mean over the detections;
- `granularity`: the mean number of detections overlapping a detected case (1 when nothing is
  detected); `plagdet` = F1(precision, recall) / log2(1 + granularity), 0 where both are 0;
- `recall_micro`, `precision_micro`: characters pooled: each document's characters covered by
  the cases (by the detections, by the detections cut to the cases they overlap) counted once per
  document, suspicious and source side added;
- case level (PAN 2014): a case is detected when its recall is at least tau_recall (0.5) and some
  detection overlaps it (the evaluator's precision condition: the part of a detection inside a
  case is wholly inside it, so it always holds at tau_precision <= 1); a detection is correct when
  its precision is at least tau_precision (0.5) and its part inside some case covers at least
  tau_recall of that case; `case_recall` = detected cases / cases, `case_precision` = correct
  detections / detections;
- document level (PAN 2015): a pair is detected when one of its cases is, correctly answered when
  one of its detections is correct; `document_recall` = detected pairs / pairs with a case,
  `document_precision` = correctly answered pairs / pairs with a detection.

Every measure is a function of sums over the document pairs of per-pair statistics (`pair_stats`),
so the bootstrap resamples pairs by weighting those sums. The pooled character counts of the
micro measures are unions per document: a character covered in two pairs of the same document
counts once, with the first of them in (document, start, end) order, so that the sums over all
pairs are exactly the evaluator's counts; on a part of the pairs (a subset, the public part)
where two pairs share characters, the statistics are recomputed over that part's pairs alone
(`restrict`), the evaluator's counts on that part.

Like PAN's evaluator, identical detections count once (it reads them into a set), and the
character level ignores detections of pairs not in the corpus while the case and document level
count them (`outside`). Zero-length spans make PAN's evaluator divide by zero; the reader
refuses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TAU_RECALL = 0.5
TAU_PRECISION = 0.5

STAT_NAMES = (
    "cases",  # cases of the pair
    "case_recall_sum",  # sum of the cases' recall
    "detections",  # (distinct) detections of the pair
    "det_precision_sum",  # sum of the detections' precision
    "detected_cases",  # cases some detection overlaps
    "detections_per_case_sum",  # sum over cases of the detections overlapping it
    "plagiarized_chars",  # micro: characters of the cases (each document's union, attributed)
    "detected_chars",  # micro: characters of the detections
    "plagiarized_detected_chars",  # micro: characters of the detections cut to the cases
    "cases_found",  # case level: detected cases (S')
    "detections_correct",  # case level: correct detections (R')
    "has_case",  # document level: the pair has a case
    "has_detection",  # the pair has a detection
    "pair_found",  # the pair has a detected case
    "pair_correct",  # the pair has a correct detection
)


@dataclass
class Spans:
    """Spans of one split as index arrays: the pair of each span (an index into the split's pairs;
    -1 for a pair not in the corpus, with its own `outside` key) and its offsets and lengths."""

    pair: np.ndarray
    this_offset: np.ndarray
    this_length: np.ndarray
    source_offset: np.ndarray
    source_length: np.ndarray
    outside: np.ndarray | None = None  # for pair -1: an id of the (unknown) pair, else -1

    @classmethod
    def empty(cls) -> Spans:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, z)

    def __len__(self) -> int:
        return int(self.pair.size)

    def matrix(self) -> np.ndarray:
        out = self.outside if self.outside is not None else np.full(len(self), -1, np.int64)
        return np.stack(
            [
                self.pair,
                out,
                self.this_offset,
                self.this_length,
                self.source_offset,
                self.source_length,
            ],
            axis=1,
        ).astype(np.int64)

    @classmethod
    def from_matrix(cls, m: np.ndarray) -> Spans:
        m = np.asarray(m, dtype=np.int64).reshape(-1, 6)
        return cls(m[:, 0], m[:, 2], m[:, 3], m[:, 4], m[:, 5], m[:, 1])

    def distinct(self) -> Spans:
        """The spans without repeats (PAN's evaluator reads them into a set), in a fixed order."""
        if len(self) == 0:
            return self
        return Spans.from_matrix(np.unique(self.matrix(), axis=0))


def _union_contrib(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's share of its group's union: the characters it adds to those of the
    intervals before it in (group, start, end) order. Summed per group, the union's length."""
    n = group.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((end, start, group))
    g, s, e = group[order], start[order], end[order]
    # groups made monotone: group g's positions lifted by g * big (big past every end), so one
    # running maximum serves all groups, a group's first interval seeing only smaller values
    big = int(max(int(e.max()), int(s.max()), 0)) + 1
    gs = g.astype(np.int64) - int(g.min())
    es = gs * big + e
    ss = gs * big + s
    prev = np.empty(n, dtype=np.int64)
    prev[0] = np.iinfo(np.int64).min
    if n > 1:
        prev[1:] = np.maximum.accumulate(es)[:-1]
    contrib = np.maximum(es - np.maximum(ss, prev), 0)
    out = np.empty(n, dtype=np.int64)
    out[order] = contrib
    return out


def _links(cases: Spans, dets: Spans, chunk: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Every (case, detection) of the same pair whose spans overlap on both sides, as index
    arrays; candidates built pair by pair (each case against its pair's detections), in chunks."""
    nc, nd = len(cases), len(dets)
    if nc == 0 or nd == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    dorder = np.argsort(dets.pair, kind="stable")
    dpair = dets.pair[dorder]
    npairs = int(max(cases.pair.max(), dpair.max())) + 1
    dcount = np.bincount(dpair[dpair >= 0], minlength=npairs)
    dstart = np.concatenate([[0], np.cumsum(dcount)[:-1]]) + int((dpair < 0).sum())
    reps = dcount[cases.pair]
    ci_all, dj_all = [], []
    cum = np.cumsum(reps)
    lo = 0
    while lo < nc:
        base = cum[lo - 1] if lo else 0
        hi = int(np.searchsorted(cum, base + chunk, side="right"))
        hi = max(hi, lo + 1)
        r = reps[lo:hi]
        ci = np.repeat(np.arange(lo, hi), r)
        total = int(r.sum())
        within = np.arange(total) - np.repeat(np.cumsum(r) - r, r)
        dj = dorder[np.repeat(dstart[cases.pair[lo:hi]], r) + within]
        ok = (
            (dets.this_offset[dj] + dets.this_length[dj] > cases.this_offset[ci])
            & (dets.this_offset[dj] < cases.this_offset[ci] + cases.this_length[ci])
            & (dets.source_offset[dj] + dets.source_length[dj] > cases.source_offset[ci])
            & (dets.source_offset[dj] < cases.source_offset[ci] + cases.source_length[ci])
        )
        ci_all.append(ci[ok])
        dj_all.append(dj[ok])
        lo = hi
    return np.concatenate(ci_all), np.concatenate(dj_all)


def pair_stats(
    n_pairs: int,
    susp_doc: np.ndarray,
    src_doc: np.ndarray,
    cases: Spans,
    dets: Spans,
    tau_recall: float = TAU_RECALL,
    tau_precision: float = TAU_PRECISION,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Per pair, the statistics every measure is a function of (`STAT_NAMES`), and the counts
    of detections outside the corpus (`outside_detections`, `outside_pairs`) with
    `shared_chars`: whether two pairs share characters of a document (then the micro counts of
    some of the pairs are not their sum over those pairs alone: `restrict` recomputes them).
    `susp_doc`, `src_doc`: each pair's suspicious and source document as an index."""
    cases = cases.distinct()
    dets = dets.distinct()
    inside = dets.pair >= 0
    outside = {
        "outside_detections": int((~inside).sum()),
        "outside_pairs": int(np.unique(dets.outside[~inside]).size)
        if dets.outside is not None and (~inside).any()
        else 0,
    }
    if not inside.all():
        keep = np.flatnonzero(inside)
        dets = Spans(
            dets.pair[keep],
            dets.this_offset[keep],
            dets.this_length[keep],
            dets.source_offset[keep],
            dets.source_length[keep],
        )
    nc, nd = len(cases), len(dets)
    ci, dj = _links(cases, dets)
    # the overlap of each linked (case, detection), on each side
    t0 = np.maximum(cases.this_offset[ci], dets.this_offset[dj])
    t1 = np.minimum(
        cases.this_offset[ci] + cases.this_length[ci], dets.this_offset[dj] + dets.this_length[dj]
    )
    s0 = np.maximum(cases.source_offset[ci], dets.source_offset[dj])
    s1 = np.minimum(
        cases.source_offset[ci] + cases.source_length[ci],
        dets.source_offset[dj] + dets.source_length[dj],
    )
    case_len = (cases.this_length + cases.source_length).astype(np.float64)
    det_len = (dets.this_length + dets.source_length).astype(np.float64)
    # a case's covered characters: the union of its overlaps, per side
    cov_c = np.bincount(ci, _union_contrib(ci, t0, t1), minlength=nc) + np.bincount(
        ci, _union_contrib(ci, s0, s1), minlength=nc
    )
    cov_d = np.bincount(dj, _union_contrib(dj, t0, t1), minlength=nd) + np.bincount(
        dj, _union_contrib(dj, s0, s1), minlength=nd
    )
    case_rec = cov_c / case_len if nc else np.zeros(0)
    det_prec = cov_d / det_len if nd else np.zeros(0)
    per_case_dets = np.bincount(ci, minlength=nc)
    # case level: a case detected (S'); a detection correct (R'): precise enough, and its part
    # inside one case covers enough of that case
    link_rec = ((t1 - t0) + (s1 - s0)) / case_len[ci] if ci.size else np.zeros(0)
    found = (case_rec >= tau_recall) & (per_case_dets > 0) & (1.0 >= tau_precision)
    best = np.full(nd, -np.inf)
    if nd and nc:
        best[:] = 0.0  # a case no part of the detection overlaps: recall 0
        np.maximum.at(best, dj, link_rec)
    correct = (det_prec >= tau_precision) & (best >= tau_recall)

    def per_pair(idx, w=None):
        return np.bincount(idx, w, minlength=n_pairs)[:n_pairs].astype(np.float64)

    # micro: characters of each document's union, each attributed to one pair
    shared = [False]

    def chars(pair, toff, tlen, soff, slen):
        if pair.size == 0:
            return np.zeros(n_pairs)
        this = _union_contrib(susp_doc[pair], toff, toff + tlen)
        src = _union_contrib(src_doc[pair], soff, soff + slen)
        got = per_pair(pair, (this + src).astype(np.float64))
        # each pair's own union: where it differs, two pairs share characters of a document
        own = _union_contrib(pair, toff, toff + tlen) + _union_contrib(pair, soff, soff + slen)
        shared[0] |= bool((per_pair(pair, own.astype(np.float64)) != got).any())
        return got

    stats = {
        "cases": per_pair(cases.pair),
        "case_recall_sum": per_pair(cases.pair, case_rec),
        "detections": per_pair(dets.pair),
        "det_precision_sum": per_pair(dets.pair, det_prec),
        "detected_cases": per_pair(cases.pair, (per_case_dets > 0).astype(np.float64)),
        "detections_per_case_sum": per_pair(cases.pair, per_case_dets.astype(np.float64)),
        "plagiarized_chars": chars(
            cases.pair,
            cases.this_offset,
            cases.this_length,
            cases.source_offset,
            cases.source_length,
        ),
        "detected_chars": chars(
            dets.pair, dets.this_offset, dets.this_length, dets.source_offset, dets.source_length
        ),
        "plagiarized_detected_chars": chars(cases.pair[ci], t0, t1 - t0, s0, s1 - s0),
        "cases_found": per_pair(cases.pair, found.astype(np.float64)),
        "detections_correct": per_pair(dets.pair, correct.astype(np.float64)),
    }
    stats["has_case"] = (stats["cases"] > 0).astype(np.float64)
    stats["has_detection"] = (stats["detections"] > 0).astype(np.float64)
    stats["pair_found"] = (stats["cases_found"] > 0).astype(np.float64)
    stats["pair_correct"] = (stats["detections_correct"] > 0).astype(np.float64)
    outside["shared_chars"] = shared[0]
    return stats, outside


def restrict(spans_: Spans, keep: np.ndarray) -> Spans:
    """The spans of the pairs `keep` (a boolean mask over the pairs) alone."""
    sel = np.flatnonzero(keep[spans_.pair])
    return Spans(
        spans_.pair[sel],
        spans_.this_offset[sel],
        spans_.this_length[sel],
        spans_.source_offset[sel],
        spans_.source_length[sel],
    )


def plagdet_score(rec, prec, gran):
    """F1 of recall and precision over log2(1 + granularity); 0 where both are 0 (elementwise)."""
    rec, prec, gran = (np.asarray(x, dtype=np.float64) for x in (rec, prec, gran))
    with np.errstate(invalid="ignore", divide="ignore"):
        f = (2 * rec * prec) / (rec + prec) / np.log2(1 + gran)
    bad = ((rec == 0) & (prec == 0)) | (rec < 0) | (prec < 0) | (gran < 1)
    return np.where(bad, 0.0, f)


def _f1(p, r):
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 2 * p * r / (p + r)
    return np.where(p + r == 0, 0.0, f)


MEASURES = (
    "precision",
    "recall",
    "granularity",
    "plagdet",
    "precision_micro",
    "recall_micro",
    "plagdet_micro",
    "case_precision",
    "case_recall",
    "case_f1",
    "document_precision",
    "document_recall",
    "document_f1",
    "cases",
    "detections",
)
"""The measures this module computes (`measures`), in the order the docs list them."""


def measures(sums: dict, names=MEASURES, outside: dict | None = None) -> dict[str, np.ndarray]:
    """The measures from the sums over pairs of `pair_stats` (each a scalar, or an array: one
    value per resample); NaN where a measure is undefined (no case: case and document recall)."""
    o = outside or {}
    S = {k: np.asarray(sums[k], dtype=np.float64) for k in STAT_NAMES}
    nc, nd = S["cases"], S["detections"]
    both0, one0 = (nc == 0) & (nd == 0), (nc == 0) | (nd == 0)
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        rec = np.where(both0, 1.0, np.where(one0, 0.0, S["case_recall_sum"] / nc))
        prec = np.where(both0, 1.0, np.where(one0, 0.0, S["det_precision_sum"] / nd))
        dc = S["detected_cases"]
        gran = np.where((nd == 0) | (dc == 0), 1.0, S["detections_per_case_sum"] / dc)
        pd = S["plagiarized_detected_chars"]
        rec_mi = np.where(
            both0,
            1.0,
            np.where(one0 | (S["plagiarized_chars"] == 0), 0.0, pd / S["plagiarized_chars"]),
        )
        prec_mi = np.where(
            both0, 1.0, np.where(one0 | (S["detected_chars"] == 0), 0.0, pd / S["detected_chars"])
        )
        n_r = nd + o.get("outside_detections", 0)
        c_rec = np.where(nc == 0, np.nan, S["cases_found"] / nc)
        c_prec = np.where(n_r == 0, 0.0, S["detections_correct"] / n_r)
        n_dr = S["has_detection"] + o.get("outside_pairs", 0)
        d_rec = np.where(S["has_case"] == 0, np.nan, S["pair_found"] / S["has_case"])
        d_prec = np.where(n_dr == 0, 0.0, S["pair_correct"] / n_dr)
    values = {
        "precision": prec,
        "recall": rec,
        "granularity": gran,
        "plagdet": plagdet_score(rec, prec, gran),
        "precision_micro": prec_mi,
        "recall_micro": rec_mi,
        "plagdet_micro": plagdet_score(rec_mi, prec_mi, gran),
        "case_precision": c_prec,
        "case_recall": c_rec,
        "case_f1": np.where(np.isnan(c_rec), np.nan, _f1(c_prec, np.nan_to_num(c_rec))),
        "document_precision": d_prec,
        "document_recall": d_rec,
        "document_f1": np.where(np.isnan(d_rec), np.nan, _f1(d_prec, np.nan_to_num(d_rec))),
        "cases": nc,
        "detections": nd,
    }
    for k in names:
        out[k] = values[k]
    return out


def point(stats: dict, names=MEASURES, keep: np.ndarray | None = None, outside=None) -> dict:
    """The measures over the pairs `keep` (a boolean mask; every pair when None) as floats (None
    where undefined)."""
    sums = {k: (v[keep] if keep is not None else v).sum() for k, v in stats.items()}
    vals = measures(sums, names, outside)
    out = {}
    for k, v in vals.items():
        x = float(v)
        out[k] = None if math.isnan(x) else (int(x) if k in ("cases", "detections") else x)
    return out


def weighted(stats: dict, W: np.ndarray, name: str, cols: np.ndarray | None = None) -> np.ndarray:
    """`name` on each resample: the per-pair statistics summed with the multiplicities `W`
    (B x pairs; `cols`: the pairs of W's columns, in order, when not every pair)."""
    keys = list(STAT_NAMES)
    M = np.stack([stats[k] if cols is None else stats[k][cols] for k in keys], axis=1)
    S = W @ M  # one product for every statistic: B x statistics
    return measures({k: S[:, i] for i, k in enumerate(keys)}, (name,))[name]
