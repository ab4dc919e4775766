"""Paired bootstrap of a task's primary score: resample the task's natural unit, recompute exactly.

The unit is what the scorer scores: TRiC instances, TRaC targets, SwissGov-RSD documents (a
cluster bootstrap within each language pair: a document's tokens move together) and Loci Similes
queries. On a cross-validated split the rows are (fold, instance) pairs and the unit is the
distinct instance: its copies in every fold's test set move together, each fold's score and the
mean over the folds recomputed on the resample. A resample is a vector of multiplicities (how
often each unit is drawn); one matrix `W` (B resamples x units), drawn from a recorded seed, is
shared by every system of a board, so the resamples are paired and a recomputation is identical.

Every statistic is recomputed on each resample as the scorer would compute it on the resampled
file (duplicated units included): weighted F1 from the resample's confusion counts; Spearman on
the resample's own average ranks (ties included), never on fixed global ranks; a `macro` over
the declared groups (SwissGov-RSD's language pairs, STR's languages) as the scorer takes it, the
mean over the groups the resample holds, undefined unless each has a value; the Loci metrics
through the scorer's own metric functions (`metrics.loci_links`, `metrics.link_ranking_ir`) on the
relabelled links (each drawn copy of a query a query of its own), or, for the metrics of
`metrics.loci_links`, from each query's TP/FP/FN with the same formulas (tested equal): the
per-query means over the queries with a gold link (precision, recall, F1, accuracy), the counts
pooled over them (`*_micro`), and over every query (SMR, FPR, FNR, TP/FP/FN/TN). `naive_*` helpers
build the resampled arrays explicitly and call scipy: the tests compare them to 1e-12.

No Flask, no database: the server stores `unit_arrays(...)` per scored submission and calls
`Bootstrap` on them.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from scorer import metrics, spans, streamsel
from scorer.families import cache_key, link_gold, read_jsonl, source_order_of, token_gold
from scorer.kinds import family
from scorer.lazy import sparse, special
from tasks import catalogue
from tasks.base import unit_id

# ----------------------------------------------------------------------------- resamples


def draw_weights(
    strata: Sequence[str], B: int, seed: int, clusters: Sequence[str] | None = None
) -> np.ndarray:
    """B x len(strata) multiplicities: each resample draws, within each stratum, as many units
    as the stratum has, with replacement (one stratum: the ordinary bootstrap). With `clusters`
    (one name per unit; a cluster's units share a stratum) the draw is of distinct clusters,
    in order of first appearance, and every unit of a cluster gets the cluster's multiplicity."""
    if clusters is not None:
        clusters = list(clusters)
        if len(clusters) != len(strata):
            raise ValueError(f"{len(clusters)} cluster names for {len(strata)} units")
        first: dict[str, int] = {}
        of = np.array([first.setdefault(c, len(first)) for c in clusters], dtype=np.int64)
        cstrata = [""] * len(first)
        for c, st in zip(of, strata, strict=True):
            cstrata[c] = st
        if any(cstrata[c] != st for c, st in zip(of, strata, strict=True)):
            raise ValueError("the units of a cluster lie in different strata")
        return draw_weights(cstrata, B, seed)[:, of]
    strata = list(strata)
    n = len(strata)
    W = np.zeros((B, n), dtype=np.float64)
    rng = np.random.default_rng(seed)
    for s in dict.fromkeys(strata):  # in order of first appearance: reproducible
        cols = np.array([i for i, x in enumerate(strata) if x == s], dtype=np.int64)
        m = cols.size
        draws = rng.integers(0, m, size=(B, m))
        flat = (draws + np.arange(B)[:, None] * m).ravel()
        W[:, cols] = np.bincount(flat, minlength=B * m).reshape(B, m)
    return W


# ----------------------------------------------------------------------------- weighted statistics


def _midranks(values: np.ndarray, W: np.ndarray) -> np.ndarray:
    """B x n: each unit's average rank in the resample (unit i repeated W[b, i] times), ties
    (equal values, duplicates included) sharing their mean rank. Columns are moved with
    `np.take` (a gather, several times faster than fancy indexing or a scatter on B x n), and
    values without ties (the usual predictions) skip the tie groups; every figure is the same,
    bit for bit: integers and halves, exact in float64."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    Ws = np.take(W, order, axis=1)
    cum = np.cumsum(Ws, axis=1)
    new = np.r_[True, v[1:] != v[:-1]]
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    if new.all():  # no ties: (cum - Ws + cum + 1) / 2, i.e. cum - (Ws - 1) / 2
        Ws -= 1.0
        Ws *= 0.5
        cum -= Ws
        return np.take(cum, inverse, axis=1)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], v.size] - 1
    before = np.take(cum, starts, axis=1) - np.take(Ws, starts, axis=1)
    through = np.take(cum, ends, axis=1)
    mid = (before + through + 1.0) / 2.0  # B x groups
    group = np.cumsum(new) - 1
    return np.take(np.take(mid, group, axis=1), inverse, axis=1)


def _weighted_sum(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(w * a * b).sum(axis=1), with one temporary: the same products, summed alike."""
    tmp = w * a
    tmp *= b
    return tmp.sum(axis=1)


def centred_ranks(values: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """B x n: each unit's average rank in each resample less the resample's mean rank, and per
    resample the weighted sum of their squares (what `weighted_spearman` needs of one side)."""
    r = _midranks(values, W)
    r -= (W.sum(axis=1)[:, None] + 1.0) / 2.0
    return r, _weighted_sum(W, r, r)


def gold_side(gold: np.ndarray, W: np.ndarray) -> tuple:
    """What `weighted_spearman` needs of the gold on the resamples `W`, computed once for every
    row of a board: its centred ranks and their weighted sum of squares (`centred_ranks`), and,
    for the predictions' side, the weighted ranks `W * ranks`, their sum against `W` again and
    the sum of the multiplicities' cubes (per resample)."""
    rg, vg = centred_ranks(gold, W)
    wrg = W * rg
    return rg, vg, wrg, np.einsum("ij,ij->i", wrg, W), np.einsum("ij,ij,ij->i", W, W, W)


# below this many units in a resample the sums of the fast path below are exact in float64
# (integers and quarters: N^3 and the products' sums well under 2^50)
_EXACT_N = 50_000


def weighted_spearman(
    gold: np.ndarray,
    pred: np.ndarray,
    W: np.ndarray,
    chunk: int = 256,
    gold_ranks: tuple | None = None,
) -> np.ndarray:
    """Spearman's rho per resample, each on its own average ranks: exactly scipy's spearmanr of
    the resampled arrays. NaN where a resample has constant values or fewer than 2 items.
    `gold_ranks` (`gold_side(gold, W)`, or `centred_ranks(gold, W)`) spares recomputing the
    gold's side: every row of a board shares it.

    On fewer than `_EXACT_N` units a resample, the predictions' side is taken in their order
    without a B x n matrix of their ranks, with the same figures (integers and quarters, exact
    in float64): a unit drawn w times with c drawn up to it holds the ranks c - w + 1 .. c, its
    midrank c - (w - 1) / 2, so the covariance is sum(w rg c) - sum(w^2 rg) / 2 (the gold's
    centred ranks weigh to 0) and the predictions' sum of squares (N^3 - N - sum(w^3 - w)) / 12,
    whatever the order; a group of tied predictions (W_g drawn in all, C_g before it) shares the
    midrank C_g + (W_g + 1) / 2 instead, corrected on its own units only (ties are few)."""
    out = np.empty(W.shape[0])
    order = np.argsort(pred, kind="stable")
    v = pred[order]
    new = np.r_[True, v[1:] != v[:-1]]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.r_[starts, v.size])
    tied = np.flatnonzero(sizes > 1)  # the groups of tied predictions
    t_starts, t_sizes = starts[tied], sizes[tied]
    t_ends = t_starts + t_sizes - 1
    t_units = np.repeat(t_starts, t_sizes) + _ranges(t_sizes)  # their positions, in order
    t_group = np.repeat(np.arange(tied.size), t_sizes)
    fast = v.size > 0 and not np.isnan(v).any()
    for a in range(0, W.shape[0], chunk):
        w = W[a : a + chunk]
        if gold_ranks is None:
            rg, vg = centred_ranks(gold, w)
            side = None
        else:
            rg, vg = gold_ranks[0][a : a + chunk], gold_ranks[1][a : a + chunk]
            side = gold_ranks[2:] if len(gold_ranks) > 2 else None
        N = w.sum(axis=1)
        if fast and N.max() < _EXACT_N:
            if side is None:
                wrg = w * rg
                s2 = np.einsum("ij,ij->i", wrg, w)
                cubes = np.einsum("ij,ij,ij->i", w, w, w)
            else:
                wrg, s2, cubes = (x[a : a + chunk] for x in side)
                cubes = cubes.copy()
            ws = np.take(w, order, axis=1)
            cum = np.cumsum(ws, axis=1)
            wr = np.take(wrg, order, axis=1)
            cov = np.einsum("ij,ij->i", wr, cum) - 0.5 * s2
            if tied.size:
                through = np.take(cum, t_ends, axis=1)
                before = np.take(cum, t_starts, axis=1) - np.take(ws, t_starts, axis=1)
                held = through - before
                mid = (before + through + 1.0) / 2.0
                wt = np.take(ws, t_units, axis=1)
                shift = np.take(mid, t_group, axis=1) - np.take(cum, t_units, axis=1)
                shift += (wt - 1.0) / 2.0
                cov += np.einsum("ij,ij->i", np.take(wr, t_units, axis=1), shift)
                cubes += np.einsum("ij,ij,ij->i", held, held, held)
                cubes -= np.einsum("ij,ij,ij->i", wt, wt, wt)
            vp = (N * N * N - N - (cubes - N)) / 12.0
        else:
            rp, vp = centred_ranks(pred, w)
            cov = _weighted_sum(w, rg, rp)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = cov / np.sqrt(vg * vp)
        rho[(vg <= 0) | (vp <= 0) | (N < 2)] = np.nan
        out[a : a + chunk] = np.clip(rho, -1.0, 1.0)
    return out


def weighted_kendall(gold: np.ndarray, pred: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Kendall's tau-b per resample, exactly scipy's kendalltau of the resampled arrays: the copies
    of a unit tie with each other in both variables, so concordance comes from pairs of distinct
    units (weighted by their multiplicities) and the ties from each tie group's total weight.
    O(units^2) per resample: for the tasks whose unit is one item (TRiC, TRaC)."""
    sg = np.sign(gold[:, None] - gold[None, :])
    sp = np.sign(pred[:, None] - pred[None, :])
    M = sg * sp  # +1 concordant, -1 discordant, 0 tied in either
    s = np.einsum("bi,ij,bj->b", W, M, W) / 2.0  # C - D over unordered pairs
    N = W.sum(axis=1)
    n0 = N * (N - 1) / 2.0

    def ties(v):
        _, inv = np.unique(v, return_inverse=True)
        onehot = np.zeros((v.size, inv.max() + 1))
        onehot[np.arange(v.size), inv] = 1.0
        G = W @ onehot
        return (G * (G - 1) / 2.0).sum(axis=1)

    denom = (n0 - ties(gold)) * (n0 - ties(pred))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt(denom)
    tau[(denom <= 0) | (N < 2)] = np.nan
    return np.clip(tau, -1.0, 1.0)


# ----------------------------------------------------------------------------- clusters of tokens


@dataclass
class TokenPair:
    """One language pair's scored tokens, grouped by document, with the gold's ranks precomputed
    as linear functions of the document multiplicities (the gold has few distinct values)."""

    doc: np.ndarray  # token -> document index (0..D-1, in the pair's unit order)
    gold: np.ndarray
    D: int

    def __post_init__(self):
        gv, gk = np.unique(self.gold, return_inverse=True)
        self.K = gv.size
        self.gk = gk
        self.n_d = np.bincount(self.doc, minlength=self.D).astype(np.float64)
        # count of each gold value per document: D x K
        self.cnt_dk = np.bincount(self.doc * self.K + gk, minlength=self.D * self.K).reshape(
            self.D, self.K
        )
        self.cnt_dk = self.cnt_dk.astype(np.float64)
        below = (
            np.cumsum(self.cnt_dk, axis=1) - self.cnt_dk
        )  # tokens of d' with a smaller gold value
        # centred gold midrank of value k: sum_d' w_d' * Ag[k, d']
        self.Ag = (below + 0.5 * self.cnt_dk - 0.5 * self.n_d[:, None]).T  # K x D
        # the (document, gold value) labels some token has, numbered compactly: the others add
        # nothing to the covariance, and leaving them out spares a third of its products
        flat = self.cnt_dk.reshape(-1)
        held = np.flatnonzero(flat > 0)
        compact = np.full(flat.size, -1, dtype=np.int64)
        compact[held] = np.arange(held.size)
        self.label = compact[self.doc * self.K + gk]  # token -> its label
        self.label_doc, self.label_value = held // self.K, held % self.K
        self.label_count = flat[held]

    def gold_side(self, W: np.ndarray) -> tuple[np.ndarray, ...]:
        """What the gold contributes on the resamples W (B x D), the same for every prediction:
        each (document, gold value) label's weight in the covariance (the document's multiplicity
        times the value's centred gold rank, B x D*K), the resampled token counts, the gold's
        rank variance, and the cubes of the multiplicities (for the prediction's ties)."""
        Rg = W @ self.Ag.T  # B x K: centred gold rank of each value
        N = W @ self.n_d
        Gg = W @ self.cnt_dk  # B x K: weight of each gold tie group
        vg = (N**3 - N - (Gg**3 - Gg).sum(axis=1)) / 12.0
        # each (document, gold value) label's weight in the covariance: w_d * Rg_k
        WR = W[:, self.label_doc] * Rg[:, self.label_value]
        return WR, N, vg, W**3

    def spearman(self, pred: np.ndarray, W: np.ndarray, gold: tuple | None = None) -> np.ndarray:
        """Spearman's rho of the pair's tokens on each resample of its documents (W: B x D);
        `gold` (`gold_side(W)`) spares recomputing the gold's side for every row of a board."""
        D, K = self.D, self.K
        n = pred.size
        if n == 0 or pred.min() == pred.max() or K < 2:
            return np.full(W.shape[0], np.nan)
        G = self.label_count.size
        S, ties = _dominance(pred, self.doc, self.label, D, G)  # labels x D
        S -= (self.label_count[:, None] * self.n_d[None, :]) / 2.0  # centre: L - n_d''/2
        WR, N, vg, W3 = self.gold_side(W) if gold is None else gold
        Q = W @ S.T  # B x labels: sum_d'' w_d'' S[(d,k), d'']
        cov = np.einsum("bg,bg->b", WR, Q)
        vp = (N**3 - N - _tie_cubes(ties, W, W3)) / 12.0
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = cov / np.sqrt(vg * vp)
        tiny = 1e-9 * N**3
        rho[(vg <= tiny) | (vp <= tiny) | (N < 2)] = np.nan
        return np.clip(rho, -1.0, 1.0)


def _dominance(pred: np.ndarray, doc: np.ndarray, label: np.ndarray, D: int, G: int):
    """S[g, d''] = sum over tokens t with label g of L_t(d''), where L_t(d'') counts the tokens of
    document d'' with a smaller prediction than t's plus half those with an equal one (t itself
    included): G x D, exact (integers and halves), from one compiled sweep in the sorted order
    (`scorer.sweep`); and the prediction's tie groups for `_tie_cubes`: each group's count per
    document (sparse), or, where no two tokens tie, each document's token count."""
    from scorer.sweep import dominance  # numba loads with the first token statistics, not before

    n = pred.size
    # any order of the values will do: a tie group is counted from its start, whatever the
    # order of its members (and a SIMD quicksort is several times a stable sort's speed)
    order = np.argsort(pred)
    S = dominance(order, pred, doc, label, D, G)
    v = pred[order]
    new = np.r_[True, v[1:] != v[:-1]]
    if new.all():  # every tie group: one token
        return S, np.bincount(doc, minlength=D).astype(np.float64)
    # each group's count per document, as a canonical CSR matrix (rows by group, columns sorted):
    # one sort of the (group, document) keys
    grp = np.cumsum(new) - 1
    ng = int(grp[-1]) + 1
    key = np.sort(grp * D + doc[order])
    first = np.r_[True, key[1:] != key[:-1]]
    at = np.flatnonzero(first)
    count = np.diff(np.r_[at, n]).astype(np.float64)
    key = key[at]
    indptr = np.searchsorted(key, np.arange(ng + 1) * D)
    return S, sparse().csr_matrix((count, key % D, indptr), shape=(ng, D))


def _tie_cubes(Dm, W: np.ndarray, W3: np.ndarray | None = None) -> np.ndarray:
    """Per resample, the sum over the tie groups of the resampled predictions of G^3 - G, from
    each group's count per document (Dm: groups x D, sparse; or, when no two tokens tie, each
    document's token count); `W3` (`W**3`) spares recomputing the cubes for every row."""
    W3 = W**3 if W3 is None else W3
    if isinstance(Dm, np.ndarray):  # a group of one token from document d weighs w_d
        return (W3 - W) @ Dm
    per_row = np.diff(Dm.indptr)
    single = per_row == 1
    D = Dm.shape[1]
    first = Dm.indptr[:-1][single]
    docs, cnt = Dm.indices[first], Dm.data[first]
    # a group within one document: G = w_d * c
    out = W3 @ np.bincount(docs, weights=cnt**3, minlength=D) - W @ np.bincount(
        docs, weights=cnt, minlength=D
    )
    rows = np.flatnonzero(~single)
    for lo in range(0, rows.size, 4096):
        Gm = W @ Dm[rows[lo : lo + 4096]].T.toarray()
        out += (Gm**3 - Gm).sum(axis=1)
    return out


# --------------------------------------------------------------------------- a task's primary score
# One resampler: the task's family (its declaration in `tasks.catalogue`) names the unit drawn and
# the per-unit statistics offered; the primary metric's declaration names the statistics it is
# computed from and the form (sums, exact, rerun). The implementations are attached here: one
# `_Units` per family (what a submission keeps, the units and their strata), and per statistics the
# functions from resampled statistics to each metric's score.


class Bootstrap:
    """The resampling of one task's split (restricted to a part of the gold): its units, their
    strata, and the primary score of any submission on a matrix of multiplicities."""

    def __init__(
        self,
        task,
        store,
        split: str,
        only: frozenset | None = None,
        value: tuple[str, str] | None = None,
    ):
        self.task, self.store, self.split = task, store, split
        # the value resampled: the task's primary, or another (subset, metric) a board ranks by
        # (resampled with the primary's matrix: one resampling per phase feeds every board)
        self.subset, self.metric = value or task.primary
        self.family = catalogue.FAMILIES[task.kind]
        # the units' clusters (drawn whole) where a unit is not drawn on its own, and the name of
        # that scheme (a part of the key of the resamples kept by the server)
        self.clusters: list[str] | None = None
        self.resampling = "units"
        # a macro's groups' own resampled values, left by the last `samples` (keyed units)
        self.group_samples: dict | None = None
        self._impl = UNITS[self.family.name]
        self._impl.setup(self, task, store, split, only)

    # -------------------------------------------------------------------------------------------

    def weights(self, B: int, seed: int) -> np.ndarray:
        """The B x units multiplicities drawn from `seed` (by cluster where units have one)."""
        return draw_weights(self.strata, B, seed, self.clusters)

    def _held(self, key, make):
        """A value that depends on the matrix only (the gold's side), computed once per matrix:
        every row of a board is resampled by the same `W` (the cache holds `W` itself, so it is
        never mistaken for another matrix)."""
        W = self._W_current
        held = getattr(self, "_ranks", None)
        if held is None or held[0] is not W:
            held = self._ranks = (W, {})
        if key not in held[1]:
            held[1][key] = make()
        return held[1][key]

    def _gold_ranks(self, name: str, w: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gold's centred ranks on the columns `w` of `W` for the subset (or fold) `name`."""
        self._W_current = W
        return self._held(("ranks", name), lambda: gold_side(self.gold[self.masks[name]], w))

    def _columns(self, name: str, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns of `W` for the subset (or fold) `name`, their sum per resample and the
        gold's values there: once per matrix, not once per row (a one-row matrix, a point
        value, is not kept)."""

        def make():
            mask = self.masks[name]
            w = np.take(W, np.flatnonzero(mask), axis=1)
            return w, w.sum(axis=1), self.gold[mask]

        if W.shape[0] == 1:
            return make()
        self._W_current = W
        return self._held(("columns", name), make)

    def point(self, arrays: dict) -> float:
        """The primary score on the part itself (every unit once): the scorer's value."""
        return float(self.samples(arrays, np.ones((1, len(self.units))))[0])

    def samples(self, arrays: dict, W: np.ndarray) -> np.ndarray:
        """The primary score of one submission on each resample (NaN where undefined)."""
        decl = catalogue.METRICS.get(self.metric)
        if decl is None or not decl.resamples_on(self.family.name):
            raise ValueError(f"no bootstrap for {self.metric} on the {self.family.name} family")
        self._W_current = W
        return self._impl.samples(self, decl, arrays, W)

    # the Loci Similes paths, kept as methods (tests compare them)
    def _links_counts(self, arrays: dict, W: np.ndarray) -> np.ndarray:
        return _LinkUnits.counts(self, arrays, W)

    def source_order(self) -> np.ndarray:
        """Each source's position in trec_eval's tie order, as the scorer reads it."""
        if self._source_order is None:
            self._source_order = source_order_of(
                cache_key(self.store.root / "index" / self.split / "source_ids.txt")
            )
        return self._source_order

    def _links_once(self, arrays: dict, w: np.ndarray) -> float:
        return _LinkUnits.once(self, arrays, w)


class _Units:
    """A family's resampler: what a submission keeps (`arrays`), the units and strata of a split
    (`setup`) and the primary score on a matrix of multiplicities (`samples`)."""

    @staticmethod
    def arrays(task, store, split: str, parsed) -> dict[str, np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def setup(boot: Bootstrap, task, store, split: str, only) -> None:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def samples(
        boot: Bootstrap, decl, arrays: dict, W: np.ndarray
    ) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


# ----------------------------------------------------------------- one value per item (keyed)


def _confusion_sums(gold: np.ndarray, pred: np.ndarray, W: np.ndarray) -> np.ndarray:
    """B x 4: the resampled confusion counts (g0p0, g0p1, g1p0, g1p1), per unit a one-hot row."""
    code = gold.astype(np.int64) * 2 + pred.astype(np.int64)
    onehot = np.zeros((code.size, 4))
    onehot[np.arange(code.size), code] = 1.0
    return W @ onehot


def _per_label(c: np.ndarray, label: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 of `label` from the confusion sums (0 where undefined)."""
    tp, fp, fn = (c[:, 0], c[:, 2], c[:, 1]) if label == 0 else (c[:, 3], c[:, 1], c[:, 2])
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        rec = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    return prec, rec, f1


def _weighted_f1_of(c: np.ndarray) -> np.ndarray:
    n = c.sum(axis=1)
    out = np.zeros(c.shape[0])
    for lab in (0, 1):
        tp, fn = (c[:, 0], c[:, 1]) if lab == 0 else (c[:, 3], c[:, 2])
        out += _per_label(c, lab)[2] * (tp + fn)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, out / n, 0.0)


def _label_metric(what: int, label: int):
    return lambda c: _per_label(c, label)[what]


FROM_CONFUSION = {
    "f1": _weighted_f1_of,
    **{
        f"{name}_{lab}": _label_metric(i, lab)
        for lab in (0, 1)
        for i, name in enumerate(("precision", "recall", "f1"))
    },
}
"""The metrics computed from the resampled confusion counts (B x 4)."""


def _moment_sums(gold: np.ndarray, pred: np.ndarray, unit: np.ndarray | None, W: np.ndarray):
    """B x 6: the resampled sums of 1, x, y, x^2, y^2, xy (x the gold, y the prediction, each
    centred on its plain mean so that the sums lose no precision), per unit (`unit` maps items to
    units; None: one item per unit)."""
    x = gold - gold.mean() if gold.size else gold
    y = pred - pred.mean() if pred.size else pred
    M = np.stack([np.ones_like(x), x, y, x * x, y * y, x * y], axis=1)
    if unit is not None:
        U = W.shape[1]
        M = np.stack([np.bincount(unit, weights=M[:, j], minlength=U) for j in range(6)], axis=1)
    return W @ M


def _spread(values: np.ndarray, unit: np.ndarray | None, W: np.ndarray) -> np.ndarray:
    """Per resample, whether the drawn items' values are not all equal (scipy's constant test)."""
    if unit is None:
        # one item per unit: the values sorted once, each resample's smallest and largest drawn
        # value are those of its first and last drawn unit in that order (no B x n float copies)
        order = np.argsort(values, kind="stable")
        n = order.size
        if n == 0:
            return np.zeros(W.shape[0], dtype=bool)
        # the columns in reverse order too, each gathered once (a reversed view's argmax copies)
        drawn = np.take(W, order, axis=1) > 0
        first = drawn.argmax(axis=1)
        last = n - 1 - (np.take(W, order[::-1], axis=1) > 0).argmax(axis=1)
        v = values[order]
        with np.errstate(invalid="ignore"):
            return drawn[np.arange(drawn.shape[0]), first] & (v[last] > v[first])
    else:
        U = W.shape[1]
        lo_u = np.full(U, np.inf)
        hi_u = np.full(U, -np.inf)
        np.minimum.at(lo_u, unit, values)
        np.maximum.at(hi_u, unit, values)
    drawn = W > 0
    lo = np.where(drawn, lo_u, np.inf).min(axis=1)
    hi = np.where(drawn, hi_u, -np.inf).max(axis=1)
    return hi > lo


def _pearson_of(s: np.ndarray) -> np.ndarray:
    n, sx, sy, sxx, syy, sxy = s.T
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = sx / n, sy / n
        cxx, cyy, cxy = sxx - n * mx * mx, syy - n * my * my, sxy - n * mx * my
        r = cxy / np.sqrt(cxx * cyy)
    r[(n < 2) | ~(cxx > 0) | ~(cyy > 0)] = np.nan
    return np.clip(r, -1.0, 1.0)


def weighted_pearson(
    gold: np.ndarray,
    pred: np.ndarray,
    W: np.ndarray,
    unit: np.ndarray | None = None,
    gold_spread: np.ndarray | None = None,
) -> np.ndarray:
    """Pearson's r per resample from the weighted sums of each unit's moments (items of unit u
    repeated W[b, u] times); NaN where a resample's values are constant or fewer than 2.
    `gold_spread` (`_spread(gold, unit, W)`) spares recomputing the gold's side: every row of a
    board shares it."""
    r = _pearson_of(_moment_sums(gold, pred, unit, W))
    if gold_spread is None:
        gold_spread = _spread(gold, unit, W)
    r[~(gold_spread & _spread(pred, unit, W))] = np.nan
    return r


def weighted_f1(gold: np.ndarray, pred: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Support-weighted F1 over labels {0, 1} (as `metrics.classification`) per resample."""
    return _weighted_f1_of(_confusion_sums(gold, pred, W))


def _keyed_stat(boot: Bootstrap, decl, name: str, gold, pred, w, W) -> np.ndarray:
    """One subset's (or fold's) value of the metric `decl` on the resamples `w`."""
    if decl.statistics == "confusion":
        return FROM_CONFUSION[decl.name](_confusion_sums(gold, pred, w))
    if decl.statistics == "moments":
        boot._W_current = W
        spread = boot._held(("spread", name), lambda: _spread(gold, None, w))
        return weighted_pearson(gold, pred, w, gold_spread=spread)
    if decl.name == "spearman":
        return weighted_spearman(gold, pred, w, gold_ranks=boot._gold_ranks(name, w, W))
    return EXACT[decl.name](gold, pred, w)


EXACT = {"spearman": weighted_spearman, "kendall": weighted_kendall}
"""The metrics with an exact weighted form over one value per item."""


class _KeyedUnits(_Units):
    """Instances and targets: the unit is the item (its gold value and prediction); `macro` over
    the groups (each resampled within itself), a cross-validated split's mean over the folds."""

    @staticmethod
    def arrays(task, store, split, parsed):
        keys = task.for_split(split).format.key
        gold = read_jsonl(store.gold(split, catalogue.FAMILIES[task.kind].gold))
        # a group left out (partial_groups) is NaN: the scorer has no value for it
        return {
            "pred": np.array([parsed.get(unit_id(r, keys), np.nan) for r in gold], dtype=np.float64)
        }

    @staticmethod
    def setup(boot, task, store, split, only):
        keys, gf = task.for_split(split).format.key, task.group_field
        gold = read_jsonl(store.gold(split, boot.family.gold))
        ids = [unit_id(r, keys) for r in gold]
        keep = [i for i, u in enumerate(ids) if only is None or u in only]
        boot.rows = np.array(keep, dtype=np.int64)
        boot.units = [ids[i] for i in keep]
        group = [gold[i].get(gf) for i in keep]
        boot.gold = np.array([gold[i][task.gold_field] for i in keep], dtype=np.float64)
        # the subsets the primary value is taken over: `all`, one group, or (macro) every
        # declared group, each resampled within itself so that a resample holds the same groups
        sl = task.slice_of(boot.subset)
        if sl is not None:  # a source, an annotator: a field of the gold beside the group
            boot.masks = {boot.subset: np.array([sl.holds(gold[i], gf) for i in keep], dtype=bool)}
        elif boot.subset == "all":
            boot.masks = {"all": np.ones(len(keep), dtype=bool)}
        elif boot.subset == "macro":
            boot.masks = {g: np.array([x == g for x in group], dtype=bool) for g in task.groups}
        else:
            boot.masks = {boot.subset: np.array([x == boot.subset for x in group], dtype=bool)}
        boot.strata = [str(x) for x in group] if boot.subset == "macro" else ["all"] * len(keep)
        boot.folds = None
        if task.is_cross_validated(split):
            # the mean over folds as the scorer takes it (`Keyed._score_folds`), each fold
            # scored on the resample: the folds play the part of macro's groups. The unit
            # drawn is the instance: one instance is in the test sets of several folds, and
            # its copies move together (drawn apart, they would pass for independent units
            # and narrow the intervals)
            fold = [str(gold[i][task.cross_validation.field]) for i in keep]
            boot.fold_groups = None
            if boot.subset == "macro":
                # each fold's macro over the groups it holds, then the mean over the folds
                # (STR-2022's folds of one language: the fold's value is that language's)
                boot.fold_groups = {}
                masks = {}
                for f in dict.fromkeys(fold):
                    in_f = np.array([x == f for x in fold], dtype=bool)
                    names = [f"{f}/{g}" for g in boot.masks]
                    for g, name in zip(boot.masks, names, strict=True):
                        masks[name] = boot.masks[g] & in_f
                    boot.fold_groups[f] = names
                boot.masks = masks
            else:
                sub = boot.masks[boot.subset]
                boot.masks = {
                    f: sub & np.array([x == f for x in fold], dtype=bool)
                    for f in dict.fromkeys(fold)
                }
            boot.strata = ["all"] * len(keep)
            boot.clusters = [unit_id(gold[i], task.format.key) for i in keep]
            boot.resampling = "instances across folds"
            boot.folds = list(boot.fold_groups or boot.masks)

    @staticmethod
    def samples(boot, decl, arrays, W):
        B = W.shape[0]
        pred = np.asarray(arrays["pred"], dtype=np.float64)[boot.rows]
        per = {}
        held = {}
        for name, mask in boot.masks.items():
            # the subset's columns of W and their sums: the same for every row of a board
            w, held[name], gold = boot._columns(name, W)
            # no unit of the subset in this part of the gold, or a group the submission leaves out
            if not mask.any() or not np.isfinite(pred[mask]).all():
                v = np.full(B, np.nan)
            else:
                v = _keyed_stat(boot, decl, name, gold, pred[mask], w, W)
            # a resample without a unit of the subset: the scorer has no value for it
            per[name] = np.where(held[name] > 0, v, np.nan)
        if boot.subset != "macro" and boot.folds is None:
            return per[boot.subset]
        if boot.folds is not None and getattr(boot, "fold_groups", None):
            fold_values = {
                f: _group_mean({n: per[n] for n in names}, {n: held[n] for n in names}, B)
                for f, names in boot.fold_groups.items()
            }
            fold_held = {f: sum(held[n] for n in names) for f, names in boot.fold_groups.items()}
            return _group_mean(fold_values, fold_held, B)
        # each group's own resampled values, on the way to their mean: what a board ranked by
        # one group (a language's board) would compute again from the same matrix
        boot.group_samples = per
        return _group_mean(per, held, B)


# ----------------------------------------------------------------- tokens, clustered by document


class _TokenUnits(_Units):
    """SwissGov-RSD: the unit is the document (its tokens move together), resampled within each
    language pair; the metric is taken over each pair's tokens, `macro` over the pairs."""

    @staticmethod
    def arrays(task, store, split, parsed):
        gold = token_gold(
            cache_key(store.gold(split, catalogue.FAMILIES[task.kind].gold)),
            None,
            task.groups,
            task.group_field,
        )
        out = {}
        for pair, (ids, _g, mask) in gold.items():
            if all(i in parsed for i in ids):
                out[f"pred:{pair}"] = np.concatenate([np.concatenate(parsed[i]) for i in ids])[mask]
        return out

    @staticmethod
    def setup(boot, task, store, split, only):
        path = store.gold(split, boot.family.gold)
        full = token_gold(cache_key(path), None, task.groups, task.group_field)
        rows = read_jsonl(path)
        # a slice (one annotator's documents of a pair) is its pair's documents of the slice: the
        # same units and columns as the pair's (one matrix feeds every board), fewer of them used
        sl = task.slice_of(boot.subset)
        boot.pairs, boot.slices, boot.slice_pair = {}, {}, {}
        boot.units, boot.strata = [], []
        for pair in task.groups:
            if pair not in full:
                continue
            ids, gvec, mask = full[pair]
            by_id = {r["id"]: r for r in rows if r[task.group_field] == pair}
            lens = np.array([len(by_id[i]["labels_a"]) + len(by_id[i]["labels_b"]) for i in ids])
            doc_all = np.repeat(np.arange(len(ids)), lens)[mask]  # document of each scored token
            keep_doc = np.array([only is None or i in only for i in ids])
            kept = [i for i, k in zip(ids, keep_doc, strict=True) if k]
            if not kept:
                continue
            col0 = len(boot.units)
            boot.units += kept
            boot.strata += [pair] * len(kept)
            cols = np.arange(col0, col0 + len(kept))
            boot.pairs[pair] = _token_entry(keep_doc, doc_all, gvec, cols)
            if sl is not None and sl.group == pair:
                mine = keep_doc & np.array([sl.holds(by_id[i], task.group_field) for i in ids])
                in_slice = np.array([sl.holds(by_id[i], task.group_field) for i in kept])
                if mine.any():
                    boot.slices[sl.subset] = _token_entry(mine, doc_all, gvec, cols[in_slice])
                    boot.slice_pair[sl.subset] = pair

    @staticmethod
    def samples(boot, decl, arrays, W):
        B = W.shape[0]
        per, held, jobs = {}, {}, {}
        sliced = boot.task.slice_of(boot.subset) is not None
        entries = boot.slices if sliced else boot.pairs
        for name, (cols, tok, tp) in entries.items():
            if not sliced and boot.subset not in ("macro", name):
                continue
            # the columns of the matrix and their sums, copied once per matrix
            w = boot._held(("columns", name), lambda cols=cols: W[:, cols])
            held[name] = boot._held(("held", name), lambda w=w: w.sum(axis=1))
            p = arrays.get(f"pred:{boot.slice_pair.get(name, name)}")
            if p is None:  # a pair the submission leaves out
                per[name] = np.full(B, np.nan)
                continue
            p = np.asarray(p, dtype=np.float64)[tok]
            if decl.statistics == "moments":
                jobs[name] = (weighted_pearson, (tp.gold, p, w, tp.doc), {})
            else:  # spearman, the one exact form over clusters
                gold = boot._held(("pair", name), lambda tp=tp, w=w: tp.gold_side(w))
                jobs[name] = (tp.spearman, (p, w), {"gold": gold})
        # the pairs are independent, and numpy's sorts, products and sums and the compiled sweep
        # release the GIL: on several cores they run side by side (the same operations, so the
        # same values), each with one BLAS thread; BLAS's own threads on top of the pairs' would
        # compete with them for the cores (twice the CPU time for the same products on two). A
        # thread for every pair even where they outnumber the cores: SwissGov-RSD's three pairs
        # of about the same size share two cores in 1.5 pairs' time, not 2 (one after two)
        workers = len(jobs) if (os.cpu_count() or 1) > 1 else 1
        if workers > 1:
            with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
                done = {k: pool.submit(f, *a, **kw) for k, (f, a, kw) in jobs.items()}
                per.update({k: d.result() for k, d in done.items()})
        else:
            per.update({k: f(*a, **kw) for k, (f, a, kw) in jobs.items()})
        per = {name: per[name] for name in held}  # the pairs' order, as the mean takes them
        if boot.subset != "macro":
            return per.get(boot.subset, np.full(B, np.nan))
        return _group_mean(per, held, B)


def _token_entry(keep_doc, doc_all, gvec, cols):
    """(the matrix's columns, the scored tokens kept, their TokenPair) of the documents `keep_doc`
    of one language pair (`doc_all`: each scored token's document)."""
    tok = keep_doc[doc_all]
    newidx = np.cumsum(keep_doc) - 1
    return cols, tok, TokenPair(newidx[doc_all[tok]], gvec[tok], int(keep_doc.sum()))


# ----------------------------------------------------------------- links, by query


def _links_from_counts(name: str, q: dict, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Loci metric from the per-query counts `q` weighted by `W`, and where it is undefined."""
    isgold, n_s = q["isgold"], q["n_s"]
    ng = W @ isgold  # gold queries in each resample
    undefined = ng <= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        if name in ("precision", "recall", "f1", "accuracy"):
            return (W @ (q[name] * isgold)) / ng, undefined
        if name in ("precision_micro", "recall_micro", "f1_micro"):
            tp_m, fp_m, fn_m = W @ (q["t"] * isgold), W @ (q["fp"] * isgold), W @ (q["fn"] * isgold)
            pm = np.where(tp_m + fp_m > 0, tp_m / (tp_m + fp_m), 0.0)
            rm = np.where(tp_m + fn_m > 0, tp_m / (tp_m + fn_m), 0.0)
            out = {
                "precision_micro": pm,
                "recall_micro": rm,
                "f1_micro": np.where(pm + rm > 0, 2 * pm * rm / (pm + rm), 0.0),
            }[name]
            return out, undefined
        # over every query and every query x source pair
        tp = W @ q["t"].astype(np.float64)
        fp = W @ q["p"].astype(np.float64) - tp
        fn = W @ q["g"].astype(np.float64) - tp
        n = W.sum(axis=1) * n_s
        out = {
            "smr": lambda: np.where(n > 0, (fp + fn) / n, 0.0),
            "fpr": lambda: np.where(n > 0, fp / n, 0.0),
            "fnr": lambda: np.where(n > 0, fn / n, 0.0),
            "tp": lambda: tp,
            "fp": lambda: fp,
            "fn": lambda: fn,
            "tn": lambda: n - tp - fp - fn,
        }[name]()
    return out, np.zeros(W.shape[0], dtype=bool)


FROM_LINK_COUNTS = frozenset(
    ("precision", "recall", "f1", "accuracy", "precision_micro", "recall_micro", "f1_micro")
    + ("smr", "fpr", "fnr", "tp", "fp", "fn", "tn")
)
"""The metrics `_links_from_counts` computes (a test checks they are the declared ones)."""


class _LinkUnits(_Units):
    """Loci Similes: the unit is the query (its links move with it)."""

    @staticmethod
    def arrays(task, store, split, parsed):
        out = {"q": parsed.q, "s": parsed.s}
        if parsed.score is not None:
            out["score"] = parsed.score
        return out

    @staticmethod
    def setup(boot, task, store, split, only):
        fam = family(task, store, split)
        qidx, sidx = fam.ids()
        boot.n_sources = len(sidx)
        root = store.root / "index" / split
        gq, gs = link_gold(
            cache_key(store.gold(split, boot.family.gold)),
            cache_key(root / "query_ids.txt"),
            cache_key(root / "source_ids.txt"),
        )
        boot.units = [q for q in qidx if only is None or q in only]
        boot.strata = ["all"] * len(boot.units)
        boot.qcols = np.full(len(qidx), -1, dtype=np.int64)
        boot.qcols[[qidx[q] for q in boot.units]] = np.arange(len(boot.units))
        boot.gold_links = (gq, gs)
        boot._source_order = None
        boot.fold_cols = None
        if task.is_cross_validated(split):
            # folds of the queries: each resampled within itself (a fold keeps its size), scored
            # on its own, and the mean over the folds taken as the scorer takes it
            fold_of = fam.folds()
            boot.strata = [fold_of[q] for q in boot.units]
            boot.fold_cols = {}
            for i, f in enumerate(boot.strata):
                boot.fold_cols.setdefault(f, []).append(i)
            boot.fold_cols = {
                f: np.asarray(boot.fold_cols[f], dtype=np.int64)
                for f in sorted(boot.fold_cols, key=metrics.fold_key)
            }
            boot.folds = list(boot.fold_cols)
            boot.resampling = "queries within each fold"

    @staticmethod
    def samples(boot, decl, arrays, W):
        if getattr(boot, "fold_cols", None):
            return _LinkUnits.fold_mean(boot, decl, arrays, W)
        if decl.resample == "sums":
            return _LinkUnits.counts(boot, arrays, W)
        return np.array([_LinkUnits.once(boot, arrays, w) for w in W])

    @staticmethod
    def fold_mean(boot, decl, arrays, W):
        """The mean over the folds of each fold's value, each on its own queries' columns."""
        per, held = {}, {}
        mapped = boot.qcols >= 0
        for f, cols in boot.fold_cols.items():
            sub = copy.copy(boot)
            sub.fold_cols = None
            sub.units = [boot.units[i] for i in cols]
            pos = np.full(len(boot.units), -1, dtype=np.int64)
            pos[cols] = np.arange(len(cols))
            sub.qcols = np.full(len(boot.qcols), -1, dtype=np.int64)
            sub.qcols[mapped] = pos[boot.qcols[mapped]]
            per[f] = _LinkUnits.samples(sub, decl, arrays, W[:, cols])
            held[f] = W[:, cols].sum(axis=1)
        return _group_mean(per, held, W.shape[0])

    @staticmethod
    def counts(boot, arrays: dict, W: np.ndarray) -> np.ndarray:
        """The metrics of `metrics.loci_links` on every resample at once, from each query's own
        TP, FP and FN (the same formulas and operation order; `once` is the reference): a drawn
        copy of a query is a query of its own, so the per-query values of a gold query (one with a
        gold link) are averaged with its multiplicity as weight, and the counts pooled with it."""
        gq, gs = boot.gold_links
        pq, ps = np.asarray(arrays["q"]), np.asarray(arrays["s"])
        n_s = boot.n_sources
        U = len(boot.units)
        cg = boot.qcols[gq]
        g_u = np.bincount(cg[cg >= 0], minlength=U)
        hit = np.isin(pq * np.int64(n_s) + ps, gq * np.int64(n_s) + gs)
        cp = boot.qcols[pq]
        t_u = np.bincount(cp[(cp >= 0) & hit], minlength=U)
        p_u = np.bincount(cp[cp >= 0], minlength=U)
        # per query, as `metrics.loci_links` computes it for a gold query
        f_p, f_n = p_u - t_u, g_u - t_u
        t_n = n_s - t_u - f_p - f_n
        precision, recall = metrics.div(t_u, t_u + f_p), metrics.div(t_u, t_u + f_n)
        s = precision + recall
        f1 = np.divide(2 * precision * recall, s, out=np.zeros(s.shape), where=s != 0)
        q = {
            "isgold": (g_u > 0).astype(np.float64),
            "n_s": n_s,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "accuracy": (t_u + t_n) / n_s,
            "t": t_u,
            "p": p_u,
            "g": g_u,
            "fp": f_p,
            "fn": f_n,
        }
        out, undefined = _links_from_counts(boot.metric, q, W)
        return np.where(undefined, np.nan, out)

    @staticmethod
    def once(boot, arrays: dict, w: np.ndarray) -> float:
        """The primary metric on one resample of queries, through the scorer's own metric
        functions (`metrics.loci_links`, `metrics.link_ranking_ir`): each drawn copy of a query
        becomes a query of its own (its links copied with it)."""
        gq, gs = boot.gold_links
        pq, ps = np.asarray(arrays["q"]), np.asarray(arrays["s"])
        psc = arrays.get("score")
        reps = w.astype(np.int64)
        n_q = int(reps.sum())  # new query j is a copy of a drawn unit
        n_s = boot.n_sources
        start = np.r_[0, np.cumsum(reps)][:-1]

        def expand(q, *cols):
            c = boot.qcols[q]
            keep = c >= 0
            c = c[keep]
            cols = [x[keep] for x in cols]
            # each link repeats once per copy of its query; copy numbers by cumulative offsets
            k = reps[c]
            newq = np.repeat(start[c], k) + _ranges(k)
            return (newq,) + tuple(np.repeat(x, k) for x in cols)

        nq_g, ns_g = expand(gq, gs)
        if catalogue.METRICS[boot.metric].statistics_on("links") == "link counts":
            nq_p, ns_p = expand(pq, ps)
            vals, _ = metrics.loci_links(nq_g, ns_g, nq_p, ns_p, n_q, n_s)
        else:
            if psc is None:
                return np.nan
            nq_p, ns_p, nsc = expand(pq, ps, np.asarray(psc, dtype=np.float64))
            vals, _ = metrics.link_ranking_ir(
                nq_g, ns_g, nq_p, ns_p, nsc, n_q, n_s, boot.source_order()
            )
        v = vals.get(boot.metric)
        return np.nan if v is None else float(v)


class _SpanUnits(_Units):
    """PAN's text alignment: the unit is the document pair (its cases and detections move with
    it); every measure is a function of sums of per-pair statistics (`scorer.spans`), weighted by
    the multiplicities."""

    @staticmethod
    def arrays(task, store, split, parsed):
        return {"spans": parsed.matrix()}

    @staticmethod
    def setup(boot, task, store, split, only):
        fam = family(task, store, split)
        ids = fam.units()
        keep = np.array([only is None or p in only for p in ids], dtype=bool)
        boot.fam = fam
        boot.units = [p for p, k in zip(ids, keep, strict=True) if k]
        boot.strata = ["all"] * len(boot.units)
        boot.pair_cols = np.flatnonzero(keep)
        boot.subset_cols = np.flatnonzero(fam.subset_masks(None)[boot.subset][keep])
        boot.span_keep = np.zeros(len(ids), dtype=bool)
        boot.span_keep[boot.pair_cols[boot.subset_cols]] = True
        boot.resampling = "document pairs"

    @staticmethod
    def samples(boot, decl, arrays, W):
        held = getattr(boot, "_span_stats", None)
        if held is None or held[0] is not arrays:
            parsed = spans.Spans.from_matrix(arrays["spans"])
            held = boot._span_stats = (arrays, boot.fam.stats(parsed, boot.span_keep))
        # W's columns are the pairs of the part (`pair_cols`); a pair outside the subset adds
        # nothing to any sum: its statistics are zero, and W is used as it is (neither its
        # subset's columns nor a float copy of it made for each row: 80 MB at 10,000 pairs)
        out = boot.subset_cols.size < boot.pair_cols.size
        if out:
            inside = np.zeros(boot.pair_cols.size, dtype=bool)
            inside[boot.subset_cols] = True
        stats = {
            k: np.where(inside, v[boot.pair_cols], 0) if out else v[boot.pair_cols]
            for k, v in held[1].items()
        }
        return spans.weighted(stats, np.asarray(W, dtype=np.float64), boot.metric)


UNITS: dict[str, type[_Units]] = {
    "instances": _KeyedUnits,
    "targets": _KeyedUnits,
    "tokens": _TokenUnits,
    "links": _LinkUnits,
    "spans": _SpanUnits,
}
"""Each declared family's resampler (a test checks every family has one and no other)."""


def unit_arrays(task, store, split: str, parsed) -> dict[str, np.ndarray]:
    """What the bootstrap needs of a validated submission, as plain arrays (saved by the server as
    .npz): Keyed tasks a prediction per gold unit in the gold's order; SwissGov-RSD the scored
    (gold != -1) token predictions of each language pair in the gold's document order; Loci Similes
    the predicted links as query/source indices (and scores)."""
    if task.kind not in UNITS:
        raise ValueError(f"no bootstrap for task kind {task.kind!r}")
    return UNITS[task.kind].arrays(task, store, split, parsed)


LINK_COUNT_METRICS = tuple(
    m.name
    for m in catalogue.METRIC_LIST
    if "links" in m.families and m.statistics_on("links") == "link counts" and m.resample == "sums"
)
"""The Loci metrics resampled from per-query counts (from the declarations)."""


def _group_mean(per: dict, held: dict, B: int) -> np.ndarray:
    """`macro` as the scorer takes it (`scorer.families._group_scores`) on each resample: the mean
    over the groups the resample holds (a positive weight in `held`), NaN unless each of them has a
    value, NaN where it holds none."""
    if not per:
        return np.full(B, np.nan)
    V = np.vstack([per[g] for g in per])
    H = np.vstack([held[g] > 0 for g in per])
    k = H.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tot = np.where(H, V, 0.0).sum(axis=0)
        out = tot / k
    bad = (H & ~np.isfinite(V)).any(axis=0) | (k == 0)
    return np.where(bad, np.nan, out)


def _ranges(k: np.ndarray) -> np.ndarray:
    """0..k0-1, 0..k1-1, ... concatenated."""
    total = int(k.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(k)
    return np.arange(total) - np.repeat(ends - k, k)


# ----------------------------------------------------------------------------- board statistics
# One resampling per phase (an R x B matrix of paired resampled scores, one row per run) feeds any
# number of rankings: `rank_statistics` takes the rows of one ranking and returns its order, the
# rows' intervals, rank ranges, clusters and the p-values between neighbours and against each
# cluster's head; the full pairwise matrix only when asked (`full=True`). Cost: one sort per
# resample for the ranks (O(R B log R)), one R x R Gram product for the p-values, no R x R x B
# array.

FULL_MATRIX_ROWS = 60  # up to this many ranked rows a board keeps the full pairwise matrix


def intervals(samples: np.ndarray, alpha: float = 0.05) -> list:
    """Each row's percentile interval over its finite resampled scores ([None, None] if none)."""
    lo_q, hi_q = 100 * alpha / 2, 100 * (1 - alpha / 2)
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim == 2 and samples.size and np.isfinite(samples).all():
        # every resample defined (the usual board): one call a block of rows, the same figures
        out = []
        for a in range(0, samples.shape[0], 256):
            q = np.percentile(samples[a : a + 256], [lo_q, hi_q], axis=1)
            out += [[float(x), float(y)] for x, y in zip(q[0], q[1], strict=True)]
        return out
    out = []
    for x in samples:
        x = x[np.isfinite(x)]
        out.append(
            [float(np.percentile(x, lo_q)), float(np.percentile(x, hi_q))]
            if x.size
            else [None, None]
        )
    return out


def resample_ranks(samples: np.ndarray, greater_is_better: bool) -> np.ndarray:
    """R x B competition ranks on each resample (1 + the rows strictly better; an undefined score
    ranks last), from one sort per resample."""
    return _resample_ranks(samples, greater_is_better, np.int64)


def _resample_ranks(samples, greater_is_better: bool, dtype, chunk: int = 64) -> np.ndarray:
    """`resample_ranks` in `dtype`, a chunk of resamples at a time (chunk x R pieces, not R x B
    copies): each resample's scores sorted once, and each row's rank read from where its run of
    equal scores ends in that order (no search per row)."""
    R, B = samples.shape
    sgn = 1.0 if greater_is_better else -1.0
    ranks = np.empty((R, B), dtype=dtype)
    past = np.arange(1, R + 1)
    for c in range(0, B, chunk):
        piece = samples[:, c : c + chunk]
        s = np.ascontiguousarray(np.where(np.isfinite(piece), sgn * piece, -np.inf).T)
        o = np.argsort(s, axis=1)  # ascending, one resample a row
        srt = np.take_along_axis(s, o, axis=1)
        # the end of each score's run of ties: the scores at or below it (searchsorted's "right")
        last = np.ones(srt.shape, dtype=bool)
        np.not_equal(srt[:, 1:], srt[:, :-1], out=last[:, :-1])
        end = np.where(last, past, R + 1)
        end = np.minimum.accumulate(end[:, ::-1], axis=1)[:, ::-1]
        r = np.empty(s.shape, dtype=dtype)
        np.put_along_axis(r, o, (R + 1 - end).astype(dtype), axis=1)
        ranks[:, c : c + s.shape[0]] = r.T
    return ranks


def rank_ranges(ranks: np.ndarray, alpha: float = 0.05) -> list:
    lo_q, hi_q = 100 * alpha / 2, 100 * (1 - alpha / 2)
    if ranks.shape[0] == 0:
        return []
    out = []
    for a in range(0, ranks.shape[0], 256):  # a block of rows at a time: no R x B float copy
        piece = ranks[a : a + 256]
        lo = np.floor(np.percentile(piece, lo_q, axis=1))
        hi = np.ceil(np.percentile(piece, hi_q, axis=1))
        out += [[int(x), int(y)] for x, y in zip(lo, hi, strict=True)]
    return out


def _pair_p(d: np.ndarray, obs: float) -> float:
    """The two-sided p-value of one pair from its paired differences (finite ones only)."""
    d = d[np.isfinite(d)]
    if d.size < 2 or not np.isfinite(obs):
        return 1.0
    se = float(np.std(d, ddof=1))
    if se == 0.0:
        return 1.0 if obs == 0 else 0.0
    return min(1.0, float(2.0 * special().ndtr(-abs(obs) / se)))


def paired_pvalues(samples: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Two-sided p-values of the paired differences: the observed difference of two systems over
    the standard error of their difference across the same resamples (the bootstrap's normal
    approximation). Counting the resamples on the wrong side of zero instead cannot go below
    2/(B+1), which Holm's correction over a 50-row board's 1,225 pairs multiplies past 1.

    Vectorised: the variance of a difference is var_i + var_j - 2 cov_ij, from one Gram product of
    the centred rows; a pair whose difference is small beside its rows' spread (where that
    cancellation loses digits) and every pair of a row with an undefined resample are computed
    directly, as the pairwise loop does."""
    samples = np.asarray(samples, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    R, B = samples.shape
    p = np.ones((R, R))
    if R < 2 or B < 2:
        return p
    finite = np.isfinite(samples).all(axis=1)
    good = np.flatnonzero(finite)
    if good.size >= 2:
        X = samples[good]
        C = X - X.mean(axis=1, keepdims=True)
        G = C @ C.T
        sq = np.diag(G).copy()
        ss = np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0)  # sum of squared deviations
        se = np.sqrt(ss / (B - 1))
        obs = points[good][:, None] - points[good][None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            pv = np.minimum(1.0, 2.0 * special().ndtr(-np.abs(obs) / se))
        pv = np.where(se == 0.0, np.where(obs == 0, 1.0, 0.0), pv)
        pv = np.where(np.isfinite(obs), pv, 1.0)
        # where the difference's spread is small beside the rows' own, recompute exactly
        shaky = ss < 1e-6 * (sq[:, None] + sq[None, :])
        np.fill_diagonal(shaky, False)
        for i, j in zip(*np.nonzero(np.triu(shaky, 1)), strict=True):
            gi, gj = good[i], good[j]
            pv[i, j] = pv[j, i] = _pair_p(samples[gi] - samples[gj], points[gi] - points[gj])
        lower = np.tril_indices(good.size, -1)
        pv[lower] = pv.T[lower]  # symmetric, whatever the rounding of the product
        np.fill_diagonal(pv, 1.0)
        p[np.ix_(good, good)] = pv
    for i in np.flatnonzero(~finite):
        for j in range(R):
            if j != i:
                p[i, j] = p[j, i] = _pair_p(samples[i] - samples[j], points[i] - points[j])
    return p


def point_order(points: np.ndarray, greater_is_better: bool) -> list[int]:
    """The rows by point score, best first (undefined last; ties in row order)."""
    sgn = 1.0 if greater_is_better else -1.0
    return sorted(
        range(len(points)),
        key=lambda r: (-sgn * points[r]) if np.isfinite(points[r]) else np.inf,
    )


def clusters(adj: np.ndarray, order: list[int], alpha: float = 0.05) -> list[int]:
    """Walking down the ranking: a row joins its predecessor's cluster unless it differs
    significantly (corrected p < alpha) from that cluster's best."""
    cluster = [0] * len(order)
    c, head = 0, None
    for r in order:
        if head is None or adj[head, r] < alpha:
            c += 1
            head = r
        cluster[r] = c
    return cluster


def _pair_index(i: int, j: int, R: int) -> int:
    """The index of the pair (i, j), i < j, in the upper triangle of an R x R matrix read row by
    row (`condensed_pvalues`' order)."""
    return i * (2 * R - i - 1) // 2 + (j - i - 1)


def _pvalue_blocks(samples: np.ndarray, points: np.ndarray, block: int = 128):
    """`paired_pvalues` of the pairs i < j a block of rows at a time: (lo, hi, pv) with pv[a, t]
    the p-value of the rows lo + a and lo + t for t > a (the upper triangle; the rest is not set).
    The same figures on every call (the canonical p-value of a pair is its block's). Every row's
    resamples must be finite."""
    R, B = samples.shape
    C = samples - samples.mean(axis=1, keepdims=True)
    sq = np.einsum("ij,ij->i", C, C)
    for lo in range(0, R - 1, block):
        hi = min(R - 1, lo + block)
        # the block's rows against the rows after the block's first (the upper triangle)
        G = C[lo:hi] @ C[lo:].T
        both = sq[lo:hi, None] + sq[None, lo:]
        ss = np.maximum(both - 2.0 * G, 0.0)
        del G
        se = np.sqrt(ss / (B - 1))
        obs = points[lo:hi, None] - points[None, lo:]
        with np.errstate(divide="ignore", invalid="ignore"):
            pv = np.minimum(1.0, 2.0 * special().ndtr(-np.abs(obs) / se))
        pv = np.where(se == 0.0, np.where(obs == 0, 1.0, 0.0), pv)
        pv = np.where(np.isfinite(obs), pv, 1.0)
        shaky = ss < 1e-6 * both
        for a in range(hi - lo):
            i = lo + a
            row = pv[a, a + 1 :]
            for t in np.flatnonzero(shaky[a, a + 1 :]):
                j = i + 1 + int(t)
                row[t] = _pair_p(samples[i] - samples[j], points[i] - points[j])
        yield lo, hi, pv


def condensed_pvalues(samples: np.ndarray, points: np.ndarray, block: int = 128) -> np.ndarray:
    """`paired_pvalues` of every pair i < j, row by row, computed a block of rows at a time: one
    vector of R(R-1)/2 values and a block's R-wide pieces in memory, never an R x R array (the
    same figures, to the rounding of the product). Every row's resamples must be finite."""
    samples = np.asarray(samples, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    R, B = samples.shape
    out = np.ones(R * (R - 1) // 2)
    if R < 2 or B < 2:
        return out
    for lo, hi, pv in _pvalue_blocks(samples, points, block):
        for a in range(hi - lo):
            i = lo + a
            at = _pair_index(i, i + 1, R)
            out[at : at + R - i - 1] = pv[a, a + 1 :]
    return out


class HolmOf:
    """Holm's step-down correction over every pair of a condensed vector of p-values (`holm`'s
    figures), read one value at a time: the sorted p-values and, beside them, the running maximum
    of (m - k) p_(k) (filled a chunk at a time), so that a value's correction is one binary search
    and one read, never an m-sized array of ranks or an R x R one."""

    CHUNK = 1 << 14

    def __init__(self, condensed: np.ndarray):
        self.s = np.sort(condensed)
        m = self.m = self.s.size
        run = self.run = np.empty(m)
        for lo in range(0, m, self.CHUNK):
            hi = min(m, lo + self.CHUNK)
            np.multiply(self.s[lo:hi], m - np.arange(lo, hi), out=run[lo:hi])
        np.maximum.accumulate(run, out=run)  # the maximum over 0..k

    def __call__(self, p: float) -> float:
        # tied p-values share the value of the first of them (the step-down's maximum)
        k = min(int(np.searchsorted(self.s, p, side="left")), self.m - 1)
        return min(1.0, float(self.run[k]))


def _lean_pairs(samples, points, order, alpha):
    """The clusters and the p-values a board shows (each row against the next and against its
    cluster's head), raw and Holm-corrected over every pair, without an R x R matrix."""
    R = samples.shape[0]
    cond = condensed_pvalues(samples, points)
    holm_of = HolmOf(cond)

    def raw(i: int, j: int) -> float:
        if i == j:
            return 1.0
        return float(cond[_pair_index(min(i, j), max(i, j), R)])

    cluster = [0] * R
    c, head = 0, None
    for r in order:
        if head is None or holm_of(raw(head, r)) < alpha:
            c += 1
            head = r
        cluster[r] = c
    head_of: dict[int, int] = {}
    for r in order:
        head_of.setdefault(cluster[r], r)
    p_next, ph_next = [None] * R, [None] * R
    for a, b in zip(order, order[1:], strict=False):
        p_next[a] = raw(a, b)
        ph_next[a] = holm_of(p_next[a])
    p_head, ph_head = [None] * R, [None] * R
    for r in range(R):
        h = head_of[cluster[r]]
        if h != r:
            p_head[r] = raw(h, r)
            ph_head[r] = holm_of(p_head[r])
    return cluster, p_next, ph_next, p_head, ph_head


PAIR_BUDGET = 1 << 21
"""Up to this many pairs (R(R-1)/2; 2,000 rows are 1,999,000) the p-values are held in one
vector (8 bytes a pair, and its sorted copy); beyond, they are recomputed in passes and only the
pairs the board shows are kept (`_streamed_pairs`): memory linear in rows."""


def _streamed_pairs(samples, points, order, alpha, budget=None, block: int = 128):
    """`_lean_pairs`' figures, bit for bit, holding no value per pair: the p-values are recomputed
    by blocks of rows on each pass (`_pvalue_blocks`, the same figures every time) and Holm's
    correction is read from them by `scorer.streamsel`. What each consumer needs:

    - the clusters: the smallest p-value Holm does not reject at alpha (v*; a pair is
      significant exactly when its p-value is below it), then one pass for each row's first row
      after it in `order` that differs from it (a head's cluster ends there);
    - the neighbours' and heads' p-values (at most 2R pairs): one pass that keeps them, and their
      Holm-corrected values from the ranges of the p-values Holm's maximum can reach."""
    R = samples.shape[0]
    m = R * (R - 1) // 2
    budget = streamsel_budget() if budget is None else budget

    def stream():
        for lo, hi, pv in _pvalue_blocks(samples, points, block):
            upper = np.arange(R - lo)[None, :] > np.arange(hi - lo)[:, None]
            yield pv[upper]

    if alpha > 1.0:  # nothing reaches it: every pair is significant
        _, _, segs = streamsel.holm_queries(stream, m, np.zeros(0), None, budget)
        cut = np.inf
    else:
        _, cut, segs = streamsel.holm_queries(stream, m, np.zeros(0), alpha, budget)
    pos = np.empty(R, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(R)
    # each row's first row after it in the order that differs from it (R: none)
    nxt = np.full(R, R, dtype=np.int64)
    for lo, hi, pv in _pvalue_blocks(samples, points, block):
        upper = np.arange(R - lo)[None, :] > np.arange(hi - lo)[:, None]
        sig = upper & (pv < cut)
        pi, pj = pos[lo:hi, None], pos[None, lo:]
        ahead = np.where(sig & (pj > pi), pj, R).min(axis=1)
        np.minimum(nxt[lo:hi], ahead, out=nxt[lo:hi])
        behind = np.where(sig & (pi > pj), pi, R).min(axis=0)
        np.minimum(nxt[lo:], behind, out=nxt[lo:])
    cluster = [0] * R
    heads = []
    at, c = 0, 0
    while at < R:
        h = order[at]
        c += 1
        heads.append(h)
        end = int(nxt[h])
        for r in order[at:end]:
            cluster[r] = c
        at = end
    head_of = {cluster[h]: h for h in heads}
    # the pairs shown: each row and the next, each row and its cluster's head
    pairs = [(a, b) for a, b in zip(order, order[1:], strict=False)]
    pairs += [(head_of[cluster[r]], r) for r in range(R) if head_of[cluster[r]] != r]
    lo_row = np.array([min(a, b) for a, b in pairs], dtype=np.int64)
    hi_row = np.array([max(a, b) for a, b in pairs], dtype=np.int64)
    raw = np.ones(len(pairs))
    if pairs:
        for lo, hi, pv in _pvalue_blocks(samples, points, block):
            here = np.flatnonzero((lo_row >= lo) & (lo_row < hi))
            raw[here] = pv[lo_row[here] - lo, hi_row[here] - lo]
    adj, _, _ = streamsel.holm_queries(stream, m, raw, None, budget, segs)
    p_next, ph_next = [None] * R, [None] * R
    p_head, ph_head = [None] * R, [None] * R
    n = R - 1
    for t, (a, b) in enumerate(pairs):
        if t < n:
            p_next[a], ph_next[a] = float(raw[t]), float(adj[t])
        else:
            p_head[b], ph_head[b] = float(raw[t]), float(adj[t])
    return cluster, p_next, ph_next, p_head, ph_head


def streamsel_budget() -> int:
    """The values a pass over the pairs may hold at once (`scorer.streamsel`'s read-out)."""
    return 1 << 20


def rank_statistics(
    samples: np.ndarray,
    points: np.ndarray,
    greater_is_better: bool,
    alpha: float = 0.05,
    *,
    full: bool | None = None,
    arrays: bool = False,
) -> dict:
    """One ranking's statistics from the rows of a phase's resampling (R x B) and the R point
    scores: `order` (rows best first), per row (in the rows' order) `ci`, `rank_range`, `cluster`,
    and the p-values (raw and Holm-corrected over every pair) with the next row in `order`
    (`p_next`, `p_holm_next`; None for the last) and with the head of the row's cluster
    (`p_head`, `p_holm_head`; None for a head). `p` and `p_holm`, the full R x R matrices, are
    there with `full=True`, or by default while R <= FULL_MATRIX_ROWS; with `arrays=True` the same
    two as numpy arrays (`p_array`, `p_holm_array`), for a caller that writes them out in pieces."""
    samples = np.asarray(samples, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    R = samples.shape[0]
    # ranks fit 32 bits (4 bytes a resample, not 8): the same ranges
    ranks = _resample_ranks(samples, greater_is_better, np.int32)
    order = point_order(points, greater_is_better)
    matrix = full or arrays or (full is None and R <= FULL_MATRIX_ROWS)
    if not matrix and R >= 2 and np.isfinite(samples).all():
        # the pairs the board shows only, from one vector of the pairs' p-values (linear pieces
        # of R x R at a time): the full matrices are asked for apart (the pairwise job's file)
        ranges = rank_ranges(ranks, alpha)
        del ranks
        lean = _lean_pairs if R * (R - 1) // 2 <= PAIR_BUDGET else _streamed_pairs
        cluster, p_next, ph_next, p_head, ph_head = lean(samples, points, order, alpha)
        return {
            "order": order,
            "ci": intervals(samples, alpha),
            "rank_range": ranges,
            "cluster": cluster,
            "p_next": p_next,
            "p_holm_next": ph_next,
            "p_head": p_head,
            "p_holm_head": ph_head,
        }
    p = paired_pvalues(samples, points)
    adj = holm(p)
    cluster = clusters(adj, order, alpha)
    head_of: dict[int, int] = {}
    for r in order:
        head_of.setdefault(cluster[r], r)
    p_next, ph_next = [None] * R, [None] * R
    for a, b in zip(order, order[1:], strict=False):
        p_next[a], ph_next[a] = float(p[a, b]), float(adj[a, b])
    p_head, ph_head = [None] * R, [None] * R
    for r in range(R):
        h = head_of[cluster[r]]
        if h != r:
            p_head[r], ph_head[r] = float(p[h, r]), float(adj[h, r])
    out = {
        "order": order,
        "ci": intervals(samples, alpha),
        "rank_range": rank_ranges(ranks, alpha),
        "cluster": cluster,
        "p_next": p_next,
        "p_holm_next": ph_next,
        "p_head": p_head,
        "p_holm_head": ph_head,
    }
    if full or (full is None and R <= FULL_MATRIX_ROWS):
        out["p"], out["p_holm"] = p.tolist(), adj.tolist()
    if arrays:
        out["p_array"], out["p_holm_array"] = p, adj
    return out


def board_statistics(
    samples: np.ndarray, points: np.ndarray, greater_is_better: bool, alpha: float = 0.05
) -> dict:
    """`rank_statistics` with the full pairwise matrices: each row's percentile interval, 95 % rank
    interval, the pairwise p-values with Holm's correction, and the clusters."""
    return rank_statistics(samples, points, greater_is_better, alpha, full=True)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down correction of the off-diagonal (i < j) p-values of a symmetric matrix."""
    R = p.shape[0]
    iu = np.triu_indices(R, 1)
    vals = p[iu]
    m = vals.size
    out = np.ones_like(p)
    if m:
        order = np.argsort(vals, kind="stable")
        adj = np.minimum(1.0, np.maximum.accumulate(vals[order] * (m - np.arange(m))))
        res = np.empty(m)
        res[order] = adj
        out[iu] = res
        out[(iu[1], iu[0])] = res
    return out


# ------------------------------------------------------------------------- naive references (tests)


def naive_spearman(
    gold: np.ndarray, pred: np.ndarray, w: np.ndarray, unit_of: np.ndarray | None = None
) -> float:
    """scipy's Spearman on one explicitly resampled copy (items of unit u repeated w[u] times)."""
    unit_of = np.arange(gold.size) if unit_of is None else unit_of
    reps = w[unit_of].astype(np.int64)
    g, p = np.repeat(gold, reps), np.repeat(pred, reps)
    if g.size < 2 or np.ptp(g) == 0 or np.ptp(p) == 0:
        return float("nan")
    # the reference alone: scipy.stats costs every process that imports the server 0.7 s of CPU
    from scipy import stats

    return float(stats.spearmanr(g, p).statistic)


__all__ = [
    "Bootstrap",
    "board_statistics",
    "draw_weights",
    "holm",
    "naive_spearman",
    "paired_pvalues",
    "rank_statistics",
    "unit_arrays",
    "weighted_f1",
    "weighted_kendall",
    "weighted_spearman",
]
