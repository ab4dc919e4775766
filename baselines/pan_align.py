"""A text aligner for PAN's text alignment, built as the PAN overview papers describe the task's
systems (Potthast et al., PAN 2013 and 2014 overviews): seeding, extension, filtering.

- seeding: the word 2-grams the two documents share, each taken with its words sorted (so that
  words shuffled within a short window still match), as seeds (suspicious word, source word);
- extension: seeds sorted by their place in the suspicious document are joined into one passage
  while the next seed lies within `gap` words of the passage in both documents;
- filtering: a passage needs `min_seeds` seeds and `min_chars` characters on each side;
  passages that overlap in the suspicious document are merged.

The defaults (n = 2, gap = 20, 5 seeds) were chosen on `tasks.pan.generate`'s seed 0, not on the
corpora the docs report on.

The output is one detection per passage: character offset and length in each document.
"""

from __future__ import annotations

import re
from pathlib import Path

from tasks.pan import jsonl_detections

_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> tuple[list[str], list[int], list[int]]:
    toks, starts, ends = [], [], []
    for m in _WORD.finditer(text):
        toks.append(m.group().lower())
        starts.append(m.start())
        ends.append(m.end())
    return toks, starts, ends


def _grams(toks: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(sorted(toks[i : i + n])) for i in range(len(toks) - n + 1)]


def align(
    susp: str,
    src: str,
    n: int = 2,
    gap: int = 20,
    min_seeds: int = 5,
    min_chars: int = 80,
) -> list[tuple[int, int, int, int]]:
    """The passages of `susp` that reuse `src`: (this_offset, this_length, source_offset,
    source_length)."""
    st, ss, se = _words(susp)
    rt, rs, re_ = _words(src)
    where: dict[tuple, list[int]] = {}
    for j, g in enumerate(_grams(rt, n)):
        where.setdefault(g, []).append(j)
    seeds = [(i, j) for i, g in enumerate(_grams(st, n)) for j in where.get(g, ())]
    if not seeds:
        return []
    seeds.sort()
    passages = []
    cur = None  # [susp lo, susp hi, src lo, src hi, seeds]
    for i, j in seeds:
        if cur is not None and i - cur[1] <= gap and cur[2] - gap <= j <= cur[3] + gap:
            cur[1] = max(cur[1], i)
            cur[2], cur[3] = min(cur[2], j), max(cur[3], j)
            cur[4] += 1
            continue
        if cur is not None:
            passages.append(cur)
        cur = [i, i, j, j, 1]
    passages.append(cur)
    out = []
    for a, b, c, d, k in passages:
        if k < min_seeds:
            continue
        to, te = ss[a], se[b + n - 1]
        so, sx = rs[c], re_[d + n - 1]
        if te - to >= min_chars and sx - so >= min_chars:
            out.append([to, te, so, sx])
    out.sort()
    merged: list[list[int]] = []
    for p in out:  # passages overlapping in the suspicious document become one
        if merged and p[0] < merged[-1][1]:
            m = merged[-1]
            m[1], m[2], m[3] = max(m[1], p[1]), min(m[2], p[2]), max(m[3], p[3])
        else:
            merged.append(list(p))
    return [(a, b - a, c, d - c) for a, b, c, d in merged]


def run(pairs: list[dict], texts: dict[str, str], out: Path, **params) -> Path:
    """Align every pair; write the detections as the spans family's JSON Lines."""
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = (
        (p["suspicious"], p["source"], *d)
        for p in pairs
        for d in align(texts[p["suspicious"]], texts[p["source"]], **params)
    )
    out.write_text(jsonl_detections(rows), encoding="utf-8")
    return out
