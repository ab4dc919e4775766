"""STR's human agreement: split-half reliability (SHR) of the raw Best-Worst-Scaling annotations.

The task repository keeps, beside `Track A/`, the raw BWS annotations of some languages in
`BWS_annotations/` (at commit 3c5941d: arq_bws.csv, esp_bws.csv, marathi.csv, telugu_*.csv for
Track A's arq, esp, mar and tel; arb_bws.csv, hi_dev.csv and hindi_test.csv for Tracks B and C's
arb and hin, whose gold is in `Track B/` and `Track C/`). One row per annotated 4-tuple: four
item cells, each a Python list literal `['sentence 1', 'sentence 2']`, then the position (1-4) of
the most and of the least related item. There is no annotator column: a tuple annotated twice
appears on two rows.

The procedure is Kiritchenko and Mohammad's (2016/2017; their SHR-BWS.pl, re-implemented here, not
copied): for each split, every tuple's annotations are shuffled and cut in two, the first half
taking int(N/2) of them, or one more with probability 1/2 when N is odd (a tuple annotated once goes
to either half); each half gives every item its counting score, (#best - #worst) / #appearances;
the two halves' scores are correlated, Spearman (ties averaged) and Pearson, over the items scored
in both halves; the figure is the mean over the splits (with the standard deviation beside it).

An item is the sentence pair with every whitespace character removed: the annotation files spell
some pairs in several ways (a space lost between two words, spaces around the sentences), and it is
by that key that items are matched with the release's pairs.

The gold check: scores from all the annotations, put on [0, 1] as (score + 1) / 2, against the
release's Score (train, dev and test together) of the same pairs.
"""

from __future__ import annotations

import ast
import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse, stats
from scipy.stats import rankdata

from tasks.str_release import LANGUAGES, read_pairs, track_bases

SEED = 1234  # SHR-BWS.pl's seed
SPLITS = 1000
FOLDER = "BWS_annotations"
ALIASES = {
    "algerian": "arq",
    "amharic": "amh",
    "moroccan": "ary",
    "english": "eng",
    "spanish": "esp",
    "hausa": "hau",
    "kinyarwanda": "kin",
    "marathi": "mar",
    "telugu": "tel",
    "hindi": "hin",
    "hi_": "hin",
    "afrikaans": "afr",
    "indonesian": "ind",
    "punjabi": "pan",
}
"""File-name prefixes the repository uses besides the language codes (marathi.csv,
telugu_test.csv)."""


@dataclass
class Annotations:
    """A language's BWS annotations: one entry per annotation (a row of the files)."""

    items: list[str]  # item keys (whitespace-free sentence pairs), indexed by the arrays below
    tuples: np.ndarray  # (T, k) item indices of each annotation's tuple
    best: np.ndarray  # (T,) item index chosen most related
    worst: np.ndarray  # (T,) item index chosen least related
    group: np.ndarray  # (T,) the tuple (as a set of items) each annotation belongs to
    files: list[str] = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    spellings: int = 0  # distinct spellings of the items before whitespace was taken out


def item_key(s1: str, s2: str) -> str:
    return "".join(s1.split()) + "\n" + "".join(s2.split())


def _cell(cell: str) -> tuple[str, str] | None:
    """The two sentences of an item cell; None when it is no `['...', '...']` literal. Some cells
    carry a character after the closing bracket, and one lacks it."""
    c = cell.strip()
    j = c.rfind("]")
    try:
        v = ast.literal_eval(c[: j + 1] if j >= 0 else c + "]")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(s, str) for s in v)):
        return None
    return v[0], v[1]


def read_annotations(paths: list[Path]) -> Annotations:
    """Every annotation of `paths` (one language's files), keyed as the module says. A row whose
    last two cells are not positions is a header (the files repeat theirs mid-file) or a cut row
    (a file's last); a row whose item cells do not parse is left out; each is counted."""
    index: dict[str, int] = {}
    spellings: set = set()
    rows, groups = [], {}
    skipped = {"headers": 0, "short": 0, "unparsed": 0, "bad_positions": 0}
    for path in paths:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                continue
            k = len(header) - 2
            for r in reader:
                if len(r) != k + 2:
                    skipped["short"] += 1
                    continue
                try:
                    b, w = int(r[k]), int(r[k + 1])
                except ValueError:
                    skipped["headers"] += 1
                    continue
                if not (1 <= b <= k and 1 <= w <= k) or b == w:
                    skipped["bad_positions"] += 1
                    continue
                cells = [_cell(c) for c in r[:k]]
                if any(c is None for c in cells):
                    skipped["unparsed"] += 1
                    continue
                keys = [item_key(*c) for c in cells]
                if len(set(keys)) != k:
                    skipped["bad_positions"] += 1  # an item twice in a tuple
                    continue
                spellings.update((c[0].strip(), c[1].strip()) for c in cells)
                ids = [index.setdefault(x, len(index)) for x in keys]
                g = groups.setdefault(frozenset(ids), len(groups))
                rows.append((ids, ids[b - 1], ids[w - 1], g))
    if not rows:
        raise ValueError(f"no annotation could be read from {', '.join(p.name for p in paths)}")
    tuples = np.array([r[0] for r in rows], dtype=np.int64)
    return Annotations(
        items=list(index),
        tuples=tuples,
        best=np.array([r[1] for r in rows], dtype=np.int64),
        worst=np.array([r[2] for r in rows], dtype=np.int64),
        group=np.array([r[3] for r in rows], dtype=np.int64),
        files=[p.name for p in paths],
        skipped=skipped,
        spellings=len(spellings),
    )


def bws_scores(ann: Annotations, take: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Counting scores (#best - #worst) / #appearances of every item from the annotations `take`
    selects (a boolean mask; all by default), and the appearances; NaN where an item has none."""
    m = len(ann.items)
    wt = np.ones(len(ann.best)) if take is None else np.asarray(take, dtype=float)
    n = np.bincount(ann.tuples.ravel(), weights=np.repeat(wt, ann.tuples.shape[1]), minlength=m)
    d = np.bincount(ann.best, weights=wt, minlength=m) - np.bincount(
        ann.worst, weights=wt, minlength=m
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, d / np.where(n > 0, n, 1), np.nan), n


def split_halves(group: np.ndarray, n_splits: int, seed: int) -> np.ndarray:
    """(n_splits, T) booleans, True for the annotations in the first half: each tuple's annotations
    in the order of one uniform draw each, the first int(N/2) of them, or int(N/2) + 1 when N is odd
    and the tuple's coin (a second draw, one per tuple) is below 1/2. Draws:
    `u = rng.random((n_splits, T))`, then `coin = rng.random((n_splits, G))`, with
    `rng = np.random.default_rng(seed)`."""
    rng = np.random.default_rng(seed)
    g = np.asarray(group)
    n_groups = int(g.max()) + 1 if len(g) else 0
    u = rng.random((n_splits, len(g)))
    coin = rng.random((n_splits, n_groups))
    size = np.bincount(g, minlength=n_groups)
    order = np.argsort(g[None, :] + u, axis=1, kind="stable")  # by tuple, then by draw
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    sorted_g = g[order]  # (R, T)
    position = np.arange(len(g))[None, :] - start[sorted_g]
    first = size // 2 + ((size % 2 == 1) & (coin < 0.5))  # (R, G)
    in_first = position < np.take_along_axis(first, sorted_g, axis=1)
    out = np.empty_like(in_first)
    np.put_along_axis(out, order, in_first, axis=1)
    return out


def _rank_rows(x: np.ndarray) -> np.ndarray:
    return rankdata(x, axis=1)


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))


def split_correlations(
    ann: Annotations, halves: np.ndarray, items: np.ndarray | None = None, block: int = 250
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per split: Spearman and Pearson between the two halves' scores over the items (of `items`, a
    boolean mask over ann.items; all by default) scored in both, and how many those are."""
    m, t = len(ann.items), len(ann.best)
    k = ann.tuples.shape[1]
    rows = np.repeat(np.arange(t), k)
    incidence = sparse.csr_matrix((np.ones(t * k), (rows, ann.tuples.ravel())), shape=(t, m))
    diff = sparse.csr_matrix(
        (
            np.r_[np.ones(t), -np.ones(t)],
            (np.r_[np.arange(t), np.arange(t)], np.r_[ann.best, ann.worst]),
        ),
        shape=(t, m),
    )
    n_all = np.asarray(incidence.sum(axis=0)).ravel()
    d_all = np.asarray(diff.sum(axis=0)).ravel()
    keep = np.ones(m, bool) if items is None else np.asarray(items, bool)
    rho, r, used = [], [], []
    for s in range(0, len(halves), block):
        h = halves[s : s + block].astype(float)
        n1 = np.asarray((incidence.T @ h.T).T)
        d1 = np.asarray((diff.T @ h.T).T)
        n2, d2 = n_all[None, :] - n1, d_all[None, :] - d1
        ok = (n1 > 0) & (n2 > 0) & keep[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            s1, s2 = d1 / n1, d2 / n2
        full = ok[:, keep].all(axis=1)
        rho_b, r_b = np.empty(len(h)), np.empty(len(h))
        if full.any():
            a, b = s1[full][:, keep], s2[full][:, keep]
            r_b[full] = _pearson_rows(a, b)
            rho_b[full] = _pearson_rows(_rank_rows(a), _rank_rows(b))
        for i in np.flatnonzero(~full):  # some item absent from one half: its own item set
            a, b = s1[i, ok[i]][None, :], s2[i, ok[i]][None, :]
            r_b[i] = _pearson_rows(a, b)[0]
            rho_b[i] = _pearson_rows(_rank_rows(a), _rank_rows(b))[0]
        rho.append(rho_b)
        r.append(r_b)
        used.append(ok.sum(axis=1))
    return np.concatenate(rho), np.concatenate(r), np.concatenate(used)


def split_half_reliability(
    ann: Annotations, n_splits: int = SPLITS, seed: int = SEED, items: np.ndarray | None = None
) -> dict:
    halves = split_halves(ann.group, n_splits, seed)
    rho, r, used = split_correlations(ann, halves, items)
    return {
        "spearman": round(float(np.nanmean(rho)), 6),
        "spearman_sd": round(float(np.nanstd(rho)), 6),
        "pearson": round(float(np.nanmean(r)), 6),
        "pearson_sd": round(float(np.nanstd(r)), 6),
        "splits": n_splits,
        "seed": seed,
        "items_compared_mean": round(float(used.mean()), 1),
        "items_compared_min": int(used.min()),
    }


def gold_check(ann: Annotations, gold: dict[str, float]) -> dict:
    """How well the scores of all the annotations reproduce the release's Score (`gold`: item key ->
    Score): matched items, correlations, the largest difference and the share within rounding to two
    decimals; `cannot_be_counts` is how many gold values no (#best - #worst) / n with n up to the
    item's appearances in the file rounds to (they need annotations the file does not hold)."""
    s, n = bws_scores(ann)
    idx = {x: i for i, x in enumerate(ann.items)}
    common = [x for x in gold if x in idx]
    out = {
        "release_pairs": len(gold),
        "matched": len(common),
        "release_pairs_not_annotated": len(gold) - len(common),
        "annotated_items_not_in_release": len(ann.items) - len(common),
    }
    if len(common) < 3:
        return out
    g = np.array([gold[x] for x in common])
    p = (s[[idx[x] for x in common]] + 1) / 2
    counts = n[[idx[x] for x in common]].astype(int)
    diff = np.abs(g - p)
    impossible = 0
    for gv, c in zip(g, counts, strict=True):
        ks = np.arange(1, c + 1)
        # nearest (k/m + 1)/2 to gv for every m <= c: k = round((2 gv - 1) m), clipped to [-m, m]
        kk = np.clip(np.round((2 * gv - 1) * ks), -ks, ks)
        if not (np.abs((kk / ks + 1) / 2 - gv) <= 0.005 + 1e-9).any():
            impossible += 1
    out.update(
        {
            "spearman": round(float(stats.spearmanr(g, p).statistic), 6),
            "pearson": round(float(stats.pearsonr(g, p).statistic), 6),
            "max_abs_diff": round(float(diff.max()), 6),
            "median_abs_diff": round(float(np.median(diff)), 6),
            "within_rounding": round(float((diff <= 0.005 + 1e-9).mean()), 6),
            "cannot_be_counts": impossible,
            "reproduced": bool((diff <= 0.005 + 1e-9).all()),
        }
    )
    return out


def annotation_files(folder: Path, languages) -> tuple[dict[str, list[Path]], list[str]]:
    """The files of `folder` by str language (`<code>_*.csv` or a known full name), and the names of
    those that belong to none of `languages`."""
    by_lang: dict[str, list[Path]] = {}
    other = []
    for p in sorted(folder.glob("*.csv")):
        stem = p.name.lower()
        lang = next((c for c in languages if stem.startswith(c + "_") or stem == c + ".csv"), None)
        if lang is None:
            lang = next(
                (c for a, c in ALIASES.items() if stem.startswith(a) and c in languages), None
            )
        if lang is None:
            other.append(p.name)
        else:
            by_lang.setdefault(lang, []).append(p)
    return by_lang, other


def _release_gold(base: Path, lang: str) -> dict[str, float]:
    gold: dict[str, float] = {}
    d = base / lang
    for name in (
        f"{lang}_train.csv",
        f"{lang}_dev_with_labels.csv",
        f"{lang}_test_with_labels.csv",
    ):
        if (d / name).is_file():
            for r in read_pairs(d / name, True, lang):
                gold[item_key(r["sentence1"], r["sentence2"])] = r["score"]
    return gold


def find_folder(source: Path) -> Path | None:
    for d in (source / FOLDER, source.parent / FOLDER):
        if d.is_dir():
            return d
    return None


def str_agreement(
    source: Path, languages=None, n_splits: int = SPLITS, seed: int = SEED
) -> dict | None:
    """The SHR of every str language whose raw annotations the checkout `source` (or its `Track A`)
    holds, with the gold check; None when it holds none."""
    source = Path(source)
    folder = find_folder(source)
    if folder is None:
        return None
    langs = list(languages) if languages else list(LANGUAGES)
    by_lang, other = annotation_files(folder, langs)
    try:
        bases = list(track_bases(source).values())
    except Exception:  # noqa: BLE001 - the annotations can be measured without the release's gold
        bases = []
    out = {
        "source": FOLDER,
        "procedure": "split-half reliability (Kiritchenko and Mohammad's SHR-BWS)",
        "splits": n_splits,
        "seed": seed,
        "languages": {},
        "other_files": other,
    }
    for lang, paths in sorted(by_lang.items()):
        ann = read_annotations(paths)
        sizes = np.bincount(np.bincount(ann.group))
        a = {
            "files": ann.files,
            "annotations": len(ann.best),
            "tuples": int(ann.group.max()) + 1,
            "items": len(ann.items),
            "spellings": ann.spellings,
            "skipped_rows": ann.skipped,
            "tuples_by_annotations": {str(i): int(c) for i, c in enumerate(sizes) if c},
            **split_half_reliability(ann, n_splits, seed),
        }
        # the first track that holds the language (its dev and test gold are the same in each)
        base = next((b for b in bases if (b / lang).is_dir()), None)
        gold = _release_gold(base, lang) if base is not None else {}
        if gold:
            a["gold_check"] = gold_check(ann, gold)
            released = np.array([x in gold for x in ann.items])
            if released.sum() >= 3 and not released.all():
                only = split_half_reliability(ann, n_splits, seed, released)
                a["release_items_only"] = {
                    k: v for k, v in only.items() if k not in ("splits", "seed")
                }
        out["languages"][lang] = a
    return out


def str_release(source: Path) -> dict:
    """`palimpsest agreement str --from CHECKOUT`; a checkout without raw annotations gives
    nothing to measure (said in `nothing_to_measure`), which is no error."""
    got = str_agreement(Path(source))
    if got is None:
        return {
            "source": FOLDER,
            "languages": {},
            "nothing_to_measure": f"{Path(source)} has no {FOLDER}/ folder: it holds no raw "
            "annotations, so there is no human agreement to measure",
        }
    return got


__all__ = [
    "Annotations",
    "SEED",
    "SPLITS",
    "bws_scores",
    "gold_check",
    "read_annotations",
    "split_correlations",
    "split_half_reliability",
    "split_halves",
    "str_agreement",
    "str_release",
]
