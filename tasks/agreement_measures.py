"""Chance-corrected agreement of several annotators on categorical labels, with missing judgments.

A table is items x annotators, each cell a label or NaN (that annotator did not judge that item).
Items with fewer than two judgments carry no pair and are left out. Every measure is a function of
per-item sums, so each is computed for a vector of item weights: all ones gives the point estimate,
a multinomial draw of item counts gives one percentile-bootstrap replicate (resampling items).

- observed agreement A_o: the mean over items of the share of an item's pairs of judgments that
  agree (Manjavacas et al. 2021, eq. 2, with c the item's own number of judgments);
- multi-kappa exactly as Manjavacas et al. 2021 print it (eq. 7 and 8, the headline
  `multi_kappa`): A_o the mean over annotator pairs, each pair counted once, of the share of the
  items both judged on which the two agree (`observed_pairs`); A_e the mean over the same pairs of
  the chance that the two agree when each draws from their own label distribution (P(i|x): the
  share of x's judgments that are i; `expected_kappa`). Pairs that judged no item together are
  left out of both means;
- its pair-weighted generalisation (Davies & Fleiss 1982; Artstein & Poesio 2008;
  `multi_kappa_weighted`): A_o eq. 2's item mean (`observed`), A_e the same chance of agreement
  averaged over annotator pairs each weighted by its share of the item pairs
  (`expected_kappa_weighted`). It is exactly 0 at chance; the two are equal when every annotator
  judged every item and differ when some pairs share far fewer items than others (the paper's
  form then gives a sparsely crossed pair as much weight as a densely crossed one);
- Fleiss' kappa / Scott's multi-pi: A_e from the pooled label distribution;
- Cohen's kappa of each annotator pair on the items both judged;
- Krippendorff's alpha (nominal, ordinal or interval) from the coincidence matrix.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

LEVELS = ("nominal", "ordinal", "interval")
CHUNK = 250  # bootstrap replicates computed at once (memory: CHUNK x items floats per array)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class Table:
    """An items x annotators table of labels, encoded once for the weighted sums."""

    def __init__(
        self,
        values: np.ndarray,
        annotators: list[str] | None = None,
        labels: list[float] | None = None,
    ):
        """`values`: items x annotators, NaN where an annotator gave no judgment."""
        v = np.asarray(values, dtype=float)
        if v.ndim != 2:
            raise ValueError(f"a table is items x annotators, got shape {v.shape}")
        keep = (~np.isnan(v)).sum(axis=1) >= 2
        v = v[keep]
        self.values = v
        self.annotators = list(annotators) if annotators else [str(a) for a in range(v.shape[1])]
        self.labels = (
            sorted(labels) if labels is not None else sorted(set(v[~np.isnan(v)].tolist()))
        )
        n, a, k = v.shape[0], v.shape[1], len(self.labels)
        judged = ~np.isnan(v)
        lab = np.asarray(self.labels, dtype=float)
        code = np.searchsorted(lab, np.where(judged, v, lab[0] if k else 0.0))
        bad = judged & ((code >= k) | (lab[np.minimum(code, max(k - 1, 0))] != v))
        if bad.any():
            i, x = np.argwhere(bad)[0]
            raise ValueError(f"label {v[i, x]} is not among the declared {self.labels}")
        onehot = np.zeros((n, a, k))
        ii, xx = np.nonzero(judged)
        onehot[ii, xx, code[ii, xx]] = 1.0
        self.onehot = onehot
        self.counts = onehot.sum(axis=1)  # n_ik
        self.m = self.counts.sum(axis=1)  # judgments per item
        pairs = self.m * (self.m - 1) / 2
        agr = (self.counts * (self.counts - 1) / 2).sum(axis=1) / np.where(pairs, pairs, 1)
        jd = judged.astype(float)
        # each item's weight on each annotator pair: 1/pairs_i where both judged it
        share = jd[:, :, None] * jd[:, None, :] / np.where(pairs, pairs, 1)[:, None, None]
        # coincidences within each item (Krippendorff): n_ik n_il - [k=l] n_ik, over m_i - 1
        co = self.counts[:, :, None] * self.counts[:, None, :]
        co -= np.einsum("ik,kl->ikl", self.counts, np.eye(k))
        co /= np.where(self.m > 1, self.m - 1, 1)[:, None, None]
        self.pairs = list(itertools.combinations(range(a), 2))
        # each annotator pair's confusion counts
        conf = [onehot[:, x, :, None] * onehot[:, y, None, :] for x, y in self.pairs]
        # every weighted sum a measure needs is one column of W @ features
        self.features = np.concatenate(
            [agr[:, None], onehot.reshape(n, a * k), share.reshape(n, a * a), co.reshape(n, k * k)]
            + [c.reshape(n, k * k) for c in conf],
            axis=1,
        )

    @property
    def n_items(self) -> int:
        return int(self.values.shape[0])

    def subset(self, items: np.ndarray | None = None, annotators: list[int] | None = None):
        """The same table restricted to some items (a boolean mask) and/or annotators."""
        v = self.values if items is None else self.values[items]
        names = self.annotators
        if annotators is not None:
            v = v[:, annotators]
            names = [self.annotators[j] for j in annotators]
        return Table(v, names, self.labels)


def _delta(labels: list[float], level: str, counts: np.ndarray) -> np.ndarray:
    """Squared distance between labels for Krippendorff's alpha; ordinal uses the pooled counts
    (per replicate: counts is B x k)."""
    k = len(labels)
    if level == "nominal":
        return np.broadcast_to(1.0 - np.eye(k), (counts.shape[0], k, k))
    if level == "interval":
        x = np.asarray(labels, dtype=float)
        return np.broadcast_to((x[:, None] - x[None, :]) ** 2, (counts.shape[0], k, k))
    if level == "ordinal":
        cum = np.cumsum(counts, axis=1)  # B x k
        d = np.zeros((counts.shape[0], k, k))
        for c, e in itertools.product(range(k), repeat=2):
            lo, hi = min(c, e), max(c, e)
            s = cum[:, hi] - (cum[:, lo - 1] if lo else 0)
            d[:, c, e] = (s - (counts[:, c] + counts[:, e]) / 2) ** 2
        return d
    raise ValueError(f"unknown level {level!r} (one of {', '.join(LEVELS)})")


def weighted(table: Table, W: np.ndarray, level: str = "nominal") -> dict[str, np.ndarray]:
    """Every measure for each row of item weights W (B x items): arrays of length B."""
    W = np.atleast_2d(np.asarray(W, dtype=float))
    n, a, k = table.onehot.shape
    total = W.sum(axis=1)
    S = W @ table.features
    cut = np.cumsum([1, a * k, a * a, k * k])
    with np.errstate(invalid="ignore", divide="ignore"):
        a_o = S[:, 0] / total
        # each annotator's own label distribution P(i|x)
        per = S[:, cut[0] : cut[1]].reshape(-1, a, k)
        own = np.nan_to_num(per / per.sum(axis=2, keepdims=True))
        share = S[:, cut[1] : cut[2]].reshape(-1, a, a)
        iu = np.triu_indices(a, 1)
        s = np.einsum("bxk,byk->bxy", own, own)[:, iu[0], iu[1]]  # B x pairs: sum_i P(i|x)P(i|y)
        # the generalisation: pairs weighted by the item pairs they make
        w = share[:, iu[0], iu[1]]
        a_e_weighted = (w * s).sum(axis=1) / w.sum(axis=1)
        # eq. 7-8: each annotator pair that judged an item together counts once
        conf = S[:, cut[3] :].reshape(-1, len(table.pairs), k, k)
        both = conf.sum(axis=(2, 3))  # B x pairs: items both judged
        present = both > 0
        n_present = present.sum(axis=1)
        pair_ao = np.trace(conf, axis1=2, axis2=3) / np.where(present, both, 1)
        a_o_pairs = (pair_ao * present).sum(axis=1) / n_present
        a_e_kappa = (s * present).sum(axis=1) / n_present
        pooled = per.sum(axis=1)
        pooled = pooled / pooled.sum(axis=1, keepdims=True)
        a_e_pi = (pooled**2).sum(axis=1)
        o = S[:, cut[2] : cut[3]].reshape(-1, k, k)
        nc = o.sum(axis=2)
        nn = nc.sum(axis=1)
        d = _delta(table.labels, level, nc)
        d_o = (o * d).sum(axis=(1, 2))
        d_e = (nc[:, :, None] * nc[:, None, :] * d).sum(axis=(1, 2)) / (nn - 1)
        out = {
            "observed": a_o,
            "observed_pairs": a_o_pairs,
            "expected_kappa": a_e_kappa,
            "multi_kappa": (a_o_pairs - a_e_kappa) / (1 - a_e_kappa),
            "expected_kappa_weighted": a_e_weighted,
            "multi_kappa_weighted": (a_o - a_e_weighted) / (1 - a_e_weighted),
            "expected_pi": a_e_pi,
            "fleiss_pi": (a_o - a_e_pi) / (1 - a_e_pi),
            "alpha": 1 - d_o / d_e,
        }
        for j, (x, y) in enumerate(table.pairs):
            c = S[:, cut[3] + j * k * k : cut[3] + (j + 1) * k * k].reshape(-1, k, k)
            t = c.sum(axis=(1, 2))
            po = np.trace(c, axis1=1, axis2=2) / t
            pe = (c.sum(axis=2) * c.sum(axis=1)).sum(axis=1) / t**2
            key = f"cohen:{table.annotators[x]}|{table.annotators[y]}"
            out[key] = (po - pe) / (1 - pe)
            out[key + ":items"] = t
    return out


def resample(rng: np.random.Generator, n: int, b: int) -> np.ndarray:
    """b bootstrap replicates of n items as item counts (b x n): each replicate draws n item
    indices uniformly with replacement."""
    idx = rng.integers(0, n, size=(b, n))
    flat = (idx + np.arange(b)[:, None] * n).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(float)


MEASURES = (
    "multi_kappa",
    "multi_kappa_weighted",
    "fleiss_pi",
    "alpha",
    "observed",
    "observed_pairs",
    "expected_kappa",
    "expected_kappa_weighted",
)
# one sentence beside every figure that shows both (pages, commands, exports)
KAPPA_NOTE = (
    "multi-kappa is Manjavacas et al. (2021)'s eq. 7-8, each annotator pair counted once; the "
    "pair-weighted one weights each pair by the items it judged together: the two are equal "
    "when every annotator judged every item and differ when some pairs share far fewer items "
    "than others"
)
EXPECTED_NOTE = {
    "level": "A_e within the level (each level's own label distributions)",
    "dataset": "A_e of the whole dataset (the paper's Table 3: A_o within the level, A_e constant)",
}


def agreement(
    table: Table,
    level: str = "nominal",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    dataset_expected: float | None = None,
) -> dict:
    """Point estimates with percentile-bootstrap intervals over items (seeded and recorded).

    `dataset_expected`: a whole dataset's eq. 8 A_e; given, `multi_kappa_dataset_expected` is this
    table's eq. 7 A_o against that constant (the kappa of a level of a factor as the paper's
    Table 3 computes it), its interval from the same replicates."""
    n = table.n_items
    out: dict = {
        "items": n,
        "judgments": int(table.m.sum()),
        "annotators": len(table.annotators),
        "labels": table.labels,
        "alpha_level": level,
        "bootstrap": {"replicates": n_boot, "seed": seed, "confidence": confidence},
    }
    if n == 0:
        empty = {m: None for m in MEASURES} | {"cohen": {}}
        if dataset_expected is not None:
            empty["multi_kappa_dataset_expected"] = None
            empty["dataset_expected_kappa"] = float(dataset_expected)
        return out | empty
    point = weighted(table, np.ones((1, n)), level)
    boots: dict[str, list[np.ndarray]] = {key: [] for key in point}
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        b = min(CHUNK, n_boot - done)
        W = resample(rng, n, b)
        for key, v in weighted(table, W, level).items():
            boots[key].append(v)
        done += b
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2

    def summary(key: str) -> dict:
        est = _finite(point[key][0])
        if est is None or not n_boot:
            return {"value": est, "low": None, "high": None}
        draws = np.concatenate(boots[key])
        draws = draws[np.isfinite(draws)]
        if not draws.size:
            return {"value": est, "low": None, "high": None}
        return {
            "value": est,
            "low": float(np.quantile(draws, lo_q)),
            "high": float(np.quantile(draws, hi_q)),
        }

    if dataset_expected is not None:
        c = float(dataset_expected)
        with np.errstate(divide="ignore", invalid="ignore"):  # c = 1: undefined, reported as None
            point["multi_kappa_dataset_expected"] = (point["observed_pairs"] - c) / (1 - c)
            boots["multi_kappa_dataset_expected"] = [
                (v - c) / (1 - c) for v in boots["observed_pairs"]
            ]
    for m in MEASURES:
        out[m] = summary(m)
    if dataset_expected is not None:
        out["multi_kappa_dataset_expected"] = summary("multi_kappa_dataset_expected")
        out["dataset_expected_kappa"] = float(dataset_expected)
    out["cohen"] = {}
    for key in point:
        if key.startswith("cohen:") and not key.endswith(":items"):
            items = int(point[key + ":items"][0])
            if items:
                out["cohen"][key[6:]] = summary(key) | {"items": items}
    return out


def table_from_rows(
    rows: list[tuple[str, str, float]], labels: list[float] | None = None
) -> tuple[Table, list[str]]:
    """A Table from (annotator, item, label) rows, and the item ids in its row order (the items
    judged at least twice)."""
    annotators = sorted({a for a, _, _ in rows})
    items = sorted({i for _, i, _ in rows})
    ai = {a: k for k, a in enumerate(annotators)}
    ii = {x: k for k, x in enumerate(items)}
    M = np.full((len(items), len(annotators)), np.nan)
    for a, i, v in rows:
        M[ii[i], ai[a]] = v
    kept = [x for x, r in zip(items, M, strict=True) if (~np.isnan(r)).sum() >= 2]
    return Table(M, annotators, labels), kept


def dataset_expected_of(table: Table) -> float | None:
    """A whole table's eq. 8 A_e (None when it has no item)."""
    if not table.n_items:
        return None
    return _finite(weighted(table, np.ones((1, table.n_items)))["expected_kappa"][0])


def by_factor(
    table: Table,
    levels: dict[str, np.ndarray],
    level: str = "nominal",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[dict]:
    """The measures within each level of a factor of the items (level name -> boolean mask over
    the table's items), each with its interval; the same seed for every level. `multi_kappa` takes
    A_e within the level; `multi_kappa_dataset_expected` the whole table's (`EXPECTED_NOTE`)."""
    out = []
    a_e = dataset_expected_of(table)
    for name, mask in levels.items():
        got = agreement(
            table.subset(items=np.asarray(mask, dtype=bool)),
            level,
            n_boot,
            seed,
            confidence,
            dataset_expected=a_e,
        )
        got.pop("cohen", None)
        out.append({"level": name} | got)
    return out


def by_annotator_pair(
    table: Table,
    level: str = "nominal",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[dict]:
    """The measures of each annotator pair on the items both judged (multi-kappa of two annotators
    is Cohen's kappa)."""
    out = []
    a_e = dataset_expected_of(table)
    for x, y in itertools.combinations(range(len(table.annotators)), 2):
        sub = table.subset(annotators=[x, y])
        if not sub.n_items:
            continue
        got = agreement(sub, level, n_boot, seed, confidence, dataset_expected=a_e)
        got.pop("cohen", None)
        out.append({"level": f"{table.annotators[x]} | {table.annotators[y]}"} | got)
    return out


def quantile_levels(values: np.ndarray, q: int = 4) -> dict[str, np.ndarray]:
    """Masks of the q quantile bins of a covariate (ties kept in one bin), named by their range."""
    v = np.asarray(values, dtype=float)
    edges = np.unique(np.quantile(v, np.linspace(0, 1, q + 1)))
    out = {}
    for j in range(len(edges) - 1):
        lo, hi = edges[j], edges[j + 1]
        last = j == len(edges) - 2
        mask = (v >= lo) & ((v <= hi) if last else (v < hi))
        if mask.any():
            out[f"Q{j + 1} [{lo:.3f}, {hi:.3f}{']' if last else ')'}"] = mask
    return out


__all__ = [
    "EXPECTED_NOTE",
    "KAPPA_NOTE",
    "LEVELS",
    "MEASURES",
    "Table",
    "agreement",
    "by_annotator_pair",
    "by_factor",
    "dataset_expected_of",
    "quantile_levels",
    "resample",
    "table_from_rows",
    "weighted",
]
