"""PAN text alignment for the tests: PAN's own evaluator loaded from where `fetch` put
pan-webis-de/pan-code (never committed; None when absent), a naive implementation of the measures
written from their definitions (sets of characters, loops), and adversarial runs on a generated
corpus."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

from scorer import spans
from tasks import pan

PAN_GIT = Path(os.environ.get("PAN_CODE_GIT", "/work/.mirror/pan-webis-de+pan-code/repo"))
EVALUATOR = "clef15/text-alignment/pan15_text_alignment_evaluator_{}_level.py"


def _source(rel: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "--git-dir", str(PAN_GIT), "show", f"HEAD:{rel}"],
            capture_output=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8")


def _py3(src: str) -> str:
    """PAN's Python 2 made to run on Python 3 without touching a formula: `print x` statements
    become calls, `file(...)` becomes `open(...)`."""
    src = re.sub(r"^(\s*)print (?!\()(.+)$", r"\1print(\2)", src, flags=re.M)
    return src.replace("file(pairs_file)", "open(pairs_file)")


def pan_reference() -> dict | None:
    """PAN 2015's evaluator modules (character, case and document level), or None."""
    mods = {}
    for level in ("character", "case", "document"):
        src = _source(EVALUATOR.format(level))
        if src is None:
            return None
        name = f"pan15_text_alignment_evaluator_{level}_level"
        mod = types.ModuleType(name)
        mod.__file__ = f"<pan-code:{EVALUATOR.format(level)}>"
        sys.modules[name] = mod  # the case and document level import the character level
        exec(compile(_py3(src), mod.__file__, "exec"), mod.__dict__)
        mods[level] = mod
    return mods


def pan_evaluate(ref: dict, truth: Path, run: Path) -> dict:
    """The evaluator's figures for a detection directory against a corpus directory."""
    ch = ref["character"]
    out = {}
    with contextlib.redirect_stdout(io.StringIO()):
        plag, rec, prec, gran, _n = ch.character_level_performance(
            False, str(truth), "plagiarism", str(run), "detected-plagiarism"
        )
        out.update(plagdet=plag, recall=rec, precision=prec, granularity=gran)
        try:
            plag, rec, prec, _g, _n = ch.character_level_performance(
                True, str(truth), "plagiarism", str(run), "detected-plagiarism"
            )
            out.update(plagdet_micro=plag, recall_micro=rec, precision_micro=prec)
        except ValueError:  # no detection overlaps a case: max() of nothing, PAN reports 0
            out.update(plagdet_micro=0.0, recall_micro=0.0, precision_micro=0.0)
        pairs = str(truth / "pairs")
        p, r, f = ref["case"].case_level_performance(str(truth), str(run), pairs, 0.5, 0.5)
        out.update(case_precision=p, case_recall=r, case_f1=f)
        p, r, f = ref["document"].document_level_performance(str(truth), str(run), pairs, 0.5, 0.5)
        out.update(document_precision=p, document_recall=r, document_f1=f)
    return out


# ----------------------------------------------------------------------------- ours


def corpus_arrays(corpus: dict):
    """(pair index, susp doc index, src doc index, cases) of `tasks.pan.read_corpus`'s result."""
    pairs = corpus["pairs"]
    index = {p: i for i, p in enumerate(pairs)}
    docs = {d: i for i, d in enumerate(corpus["docs"])}
    susp = np.array([docs[s] for s, _ in pairs])
    src = np.array([docs[t] for _, t in pairs])
    rows = [(index[p], *(c[k] for k in pan.SPAN_KEYS)) for p in pairs for c in corpus["cases"][p]]
    m = np.array(rows, dtype=np.int64).reshape(-1, 5)
    cases = spans.Spans(m[:, 0], m[:, 1], m[:, 2], m[:, 3], m[:, 4])
    return index, susp, src, cases


def ours(corpus: dict, run: list[tuple]) -> dict:
    """Our measures of `run` (rows susp, src, to, tl, so, sl; pairs outside the corpus too)."""
    index, susp, src, cases = corpus_arrays(corpus)
    unknown: dict = {}
    pair, out = [], []
    for t, s, *_ in run:
        p = index.get((t, s), -1)
        pair.append(p)
        out.append(-1 if p >= 0 else unknown.setdefault((t, s), len(unknown)))
    m = np.array([r[2:] for r in run], dtype=np.int64).reshape(-1, 4)
    dets = spans.Spans(
        np.array(pair, dtype=np.int64), m[:, 0], m[:, 1], m[:, 2], m[:, 3], np.array(out)
    )
    stats, outside = spans.pair_stats(len(index), susp, src, cases, dets)
    return spans.point(stats, outside=outside)


# ----------------------------------------------------------------------------- naive


def naive(corpus: dict, run: list[tuple], tau_r: float = 0.5, tau_p: float = 0.5) -> dict:
    """The measures from their definitions: every annotation a set of (document, character) on
    each side, every quantity a loop."""
    pairs = set(corpus["pairs"])
    S = sorted(
        {
            (t, s, *(c[k] for k in pan.SPAN_KEYS))
            for (t, s) in pairs
            for c in corpus["cases"][(t, s)]
        }
    )
    R_all = sorted(set(run))
    R = [r for r in R_all if (r[0], r[1]) in pairs]

    memo: dict = {}

    def sides(a):
        if a not in memo:
            t, s, to, tl, so, sl = a
            memo[a] = ({(t, i) for i in range(to, to + tl)}, {(s, i) for i in range(so, so + sl)})
        return memo[a]

    def over(a, b):
        if (a[0], a[1]) != (b[0], b[1]):
            return False
        ta, sa = sides(a)
        tb, sb = sides(b)
        return not ta.isdisjoint(tb) and not sa.isdisjoint(sb)

    by_pair: dict = {}
    for a in (*S, *R):
        by_pair.setdefault((a[0], a[1]), []).append(a)

    def same_pair(a, anns):  # the annotations a may overlap (the loops below test every one)
        return [b for b in by_pair.get((a[0], a[1]), []) if b in anns]

    def covered(a, others):
        ta, sa = sides(a)
        ct, cs = set(), set()
        for b in others:
            if over(a, b):
                tb, sb = sides(b)
                ct |= ta & tb
                cs |= sa & sb
        return (len(ct) + len(cs)) / (len(ta) + len(sa))

    Rs, Ss = set(R), set(S)
    out = {}
    if not S and not R:
        rec = prec = 1.0
    elif not S or not R:
        rec = prec = 0.0
    else:
        rec = sum(covered(c, same_pair(c, Rs)) for c in S) / len(S)
        prec = sum(covered(d, same_pair(d, Ss)) for d in R) / len(R)
    per_case = [sum(over(c, d) for d in R) for c in S]
    det = [k for k in per_case if k]
    gran = sum(det) / len(det) if R and det else 1.0

    def plagdet(r, p, g):
        return 0.0 if r == 0 and p == 0 else 2 * r * p / (r + p) / np.log2(1 + g)

    out.update(recall=rec, precision=prec, granularity=gran, plagdet=plagdet(rec, prec, gran))

    def chars(anns):
        t, s = set(), set()
        for a in anns:
            ta, sa = sides(a)
            t |= ta
            s |= sa
        return len(t) + len(s)

    pieces_t, pieces_s = set(), set()
    for c in S:
        for d in R:
            if over(c, d):
                tc, sc = sides(c)
                td, sd = sides(d)
                pieces_t |= tc & td
                pieces_s |= sc & sd
    if not S and not R:
        rm = pm = 1.0
    elif not S or not R:
        rm = pm = 0.0
    else:
        pd = len(pieces_t) + len(pieces_s)
        rm, pm = pd / chars(S), pd / chars(R)
    out.update(recall_micro=rm, precision_micro=pm, plagdet_micro=plagdet(rm, pm, gran))

    found = [
        c
        for c in S
        if covered(c, same_pair(c, Rs)) >= tau_r and any(over(c, d) for d in R) and tau_p <= 1
    ]

    def part_recall(c, d):  # the part of d inside c, over c
        tc, sc = sides(c)
        td, sd = sides(d)
        return (len(tc & td) + len(sc & sd)) / (len(tc) + len(sc))

    correct = [
        d
        for d in R
        if covered(d, same_pair(d, Ss)) >= tau_p
        and any((part_recall(c, d) if over(c, d) else 0.0) >= tau_r for c in S)
    ]
    cr = len(found) / len(S) if S else None
    cp = len(correct) / len(R_all) if R_all else 0.0

    def f1(p, r):
        return 0.0 if r is None or p + r == 0 else 2 * p * r / (p + r)

    out.update(case_precision=cp, case_recall=cr, case_f1=f1(cp, cr) if cr is not None else None)
    with_case = {(c[0], c[1]) for c in S}
    with_det = {(d[0], d[1]) for d in R_all}
    dr = len({(c[0], c[1]) for c in found}) / len(with_case) if with_case else None
    dp = len({(d[0], d[1]) for d in correct}) / len(with_det) if with_det else 0.0
    out.update(
        document_precision=dp,
        document_recall=dr,
        document_f1=f1(dp, dr) if dr is not None else None,
    )
    out.update(cases=len(S), detections=len(R))
    return out


# ----------------------------------------------------------------------------- runs


def adversarial_runs(corpus: dict, seed: int = 0) -> dict[str, list[tuple]]:
    """Runs of every awkward kind on `corpus`: rows (susp, src, to, tl, so, sl)."""
    rng = random.Random(seed)
    docs = corpus["docs"]
    cases = [(t, s, c) for (t, s) in corpus["pairs"] for c in corpus["cases"][(t, s)]]
    runs: dict[str, list[tuple]] = {}

    def row(t, s, c):
        return (t, s, c["this_offset"], c["this_length"], c["source_offset"], c["source_length"])

    runs["perfect"] = [row(*x) for x in cases]
    runs["empty"] = []
    ten = []
    for t, s, c in cases:  # each case detected in ten pieces (both sides cut alike)
        tl, sl = c["this_length"], c["source_length"]
        for k in range(10):
            a, b = k * tl // 10, (k + 1) * tl // 10
            x, y = k * sl // 10, (k + 1) * sl // 10
            if b > a and y > x:
                ten.append((t, s, c["this_offset"] + a, b - a, c["source_offset"] + x, y - x))
    runs["ten-pieces"] = ten
    two = []
    for (t, s), cs in corpus["cases"].items():  # one detection covering two cases
        if len(cs) >= 2:
            a, b = cs[0], cs[1]
            to = min(a["this_offset"], b["this_offset"])
            te = max(a["this_offset"] + a["this_length"], b["this_offset"] + b["this_length"])
            so = min(a["source_offset"], b["source_offset"])
            se = max(
                a["source_offset"] + a["source_length"], b["source_offset"] + b["source_length"]
            )
            two.append((t, s, to, te - to, so, se - so))
        else:
            two += [row(t, s, c) for c in cs]
    runs["covering-two"] = two
    overlapping = []
    for t, s, c in cases:  # overlapping detections, a repeated one, one side only overlapping
        r = row(t, s, c)
        overlapping += [r, r]
        h = max(1, c["this_length"] // 2)
        overlapping.append(
            (t, s, c["this_offset"] + h // 2, h, c["source_offset"], c["source_length"])
        )
        end_t = min(len(docs[t]), c["this_offset"] + c["this_length"] + 40)
        overlapping.append((t, s, c["this_offset"], end_t - c["this_offset"], 0, 1))
    runs["overlapping"] = overlapping
    noisy = []
    for t, s in corpus["pairs"]:  # shifted, cut and random detections
        for c in corpus["cases"][(t, s)]:
            if rng.random() < 0.8:
                sh = rng.randint(-30, 30)
                to = max(0, c["this_offset"] + sh)
                tl = max(1, min(len(docs[t]) - to, c["this_length"] + rng.randint(-60, 60)))
                so = max(0, c["source_offset"] + rng.randint(-30, 30))
                sl = max(1, min(len(docs[s]) - so, c["source_length"] + rng.randint(-60, 60)))
                noisy.append((t, s, to, tl, so, sl))
        for _ in range(rng.randint(0, 12)):
            to = rng.randrange(len(docs[t]))
            so = rng.randrange(len(docs[s]))
            noisy.append(
                (t, s, to, rng.randint(1, len(docs[t]) - to), so, rng.randint(1, len(docs[s]) - so))
            )
    runs["noisy"] = noisy
    pairs = corpus["pairs"]
    outside = list(runs["perfect"][: len(cases) // 2])  # pairs not in the corpus
    for k in range(12):
        t = pairs[k % len(pairs)][0]
        outside.append((t, f"source-document9{k:04d}.txt", 0, 10, 0, 10))
        outside.append((t, f"source-document9{k:04d}.txt", 20, 10, 20, 10))
    runs["outside-pairs"] = outside
    return runs


def write_run(run: list[tuple], folder: Path) -> Path:
    """A run as PAN's output: one XML file per pair."""
    folder.mkdir(parents=True, exist_ok=True)
    by_pair: dict = {}
    for t, s, *v in run:
        by_pair.setdefault((t, s), []).append(v)
    for (t, s), rows in by_pair.items():
        (folder / f"{pan.pair_id(t, s)}.xml").write_text(
            pan.detection_xml(t, s, rows), encoding="utf-8"
        )
    return folder
