"""Paired bootstrap of a task's primary score: resample the task's natural unit, recompute exactly.

The unit is what the scorer scores: TRiC instances, TRaC targets, SwissGov-RSD documents (a
cluster bootstrap within each language pair: a document's tokens move together) and Loci Similes
queries. A resample is a vector of multiplicities (how often each unit is drawn); one matrix `W`
(B resamples x units), drawn from a recorded seed, is shared by every system of a board, so the
resamples are paired and a recomputation is identical.

Every statistic is recomputed on each resample as the scorer would compute it on the resampled
file (duplicated units included): weighted F1 from the resample's confusion counts; Spearman on
the resample's own average ranks (ties included), never on fixed global ranks; the Loci metrics
through the scorer's own metric functions on the relabelled links (each drawn copy of a query a
query of its own), or, for the metrics of `metrics.link_counts`, from each query's TP/FP/FN with
the same formulas (tested equal). `naive_*` helpers build the resampled arrays explicitly and call
scipy: the tests compare them to 1e-12.

No Flask, no database: the server stores `unit_arrays(...)` per scored submission and calls
`Bootstrap` on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scorer import metrics

# ----------------------------------------------------------------------------- what a submission keeps


def unit_arrays(task, store, split: str, parsed) -> dict[str, np.ndarray]:
    """What the bootstrap needs of a validated submission, as plain arrays (saved by the server as
    .npz): Keyed tasks a prediction per gold unit in the gold's order; SwissGov-RSD the scored
    (gold != -1) token predictions of each language pair in the gold's document order; Loci Similes
    the predicted links as query/source indices (and scores)."""
    from scorer.families import _cache_key, _token_gold, read_jsonl

    if task.kind in ("instances", "targets"):
        key = task.format.key[0]
        gold = read_jsonl(store.gold(split, "gold.jsonl"))
        return {"pred": np.array([parsed[r[key]] for r in gold], dtype=np.float64)}
    if task.kind == "tokens":
        gold = _token_gold(_cache_key(store.gold(split, "gold.jsonl")), None)
        out = {}
        for pair, (ids, _g, mask) in gold.items():
            if all(i in parsed for i in ids):
                out[f"pred:{pair}"] = np.concatenate([np.concatenate(parsed[i]) for i in ids])[mask]
        return out
    if task.kind == "links":
        out = {"q": parsed.q, "s": parsed.s}
        if parsed.score is not None:
            out["score"] = parsed.score
        return out
    raise ValueError(f"no bootstrap for task kind {task.kind!r}")


# ----------------------------------------------------------------------------- resamples


def draw_weights(strata: Sequence[str], B: int, seed: int) -> np.ndarray:
    """B x len(strata) multiplicities: each resample draws, within each stratum, as many units
    as the stratum has, with replacement (one stratum: the ordinary bootstrap)."""
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


def weighted_f1(gold: np.ndarray, pred: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Support-weighted F1 over labels {0, 1} (as `metrics.classification`) per resample."""
    code = gold.astype(np.int64) * 2 + pred.astype(np.int64)
    onehot = np.zeros((code.size, 4))
    onehot[np.arange(code.size), code] = 1.0
    c = W @ onehot  # B x 4: (g0p0, g0p1, g1p0, g1p1)
    n = c.sum(axis=1)
    out = np.zeros(W.shape[0])
    for lab, tp, fp, fn in ((0, c[:, 0], c[:, 2], c[:, 1]), (1, c[:, 3], c[:, 1], c[:, 2])):
        with np.errstate(invalid="ignore", divide="ignore"):
            prec = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
            rec = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
            f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
        out += f1 * (tp + fn)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, out / n, 0.0)


def _midranks(values: np.ndarray, W: np.ndarray) -> np.ndarray:
    """B x n: each unit's average rank in the resample (unit i repeated W[b, i] times), ties
    (equal values, duplicates included) sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    Ws = W[:, order]
    cum = np.cumsum(Ws, axis=1)
    new = np.r_[True, v[1:] != v[:-1]]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], v.size] - 1
    before = cum[:, starts] - Ws[:, starts]
    through = cum[:, ends]
    mid = (before + through + 1.0) / 2.0  # B x groups
    group = np.cumsum(new) - 1
    out = np.empty_like(Ws)
    out[:, order] = mid[:, group]
    return out


def weighted_spearman(gold: np.ndarray, pred: np.ndarray, W: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Spearman's rho per resample, each on its own average ranks: exactly scipy's spearmanr of
    the resampled arrays. NaN where a resample has constant values or fewer than 2 items."""
    out = np.empty(W.shape[0])
    for a in range(0, W.shape[0], chunk):
        w = W[a:a + chunk]
        rg, rp = _midranks(gold, w), _midranks(pred, w)
        N = w.sum(axis=1)
        m = (N[:, None] + 1.0) / 2.0
        rg -= m
        rp -= m
        cov = (w * rg * rp).sum(axis=1)
        vg = (w * rg * rg).sum(axis=1)
        vp = (w * rp * rp).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = cov / np.sqrt(vg * vp)
        rho[(vg <= 0) | (vp <= 0) | (N < 2)] = np.nan
        out[a:a + chunk] = np.clip(rho, -1.0, 1.0)
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
        self.cnt_dk = np.bincount(self.doc * self.K + gk, minlength=self.D * self.K).reshape(self.D, self.K)
        self.cnt_dk = self.cnt_dk.astype(np.float64)
        below = np.cumsum(self.cnt_dk, axis=1) - self.cnt_dk  # tokens of d' with a smaller gold value
        # centred gold midrank of value k: sum_d' w_d' * Ag[k, d']
        self.Ag = (below + 0.5 * self.cnt_dk - 0.5 * self.n_d[:, None]).T  # K x D

    def spearman(self, pred: np.ndarray, W: np.ndarray, block: int = 32) -> np.ndarray:
        """Spearman's rho of the pair's tokens on each resample of its documents (W: B x D)."""
        D, K = self.D, self.K
        n = pred.size
        if n == 0 or np.ptp(pred) == 0 or K < 2:
            return np.full(W.shape[0], np.nan)
        S, ties = _dominance(pred, self.doc, self.doc * K + self.gk, D, D * K, block)  # (D*K) x D
        S -= (self.cnt_dk.reshape(-1)[:, None] * self.n_d[None, :]) / 2.0  # centre: L - n_d''/2
        Rg = W @ self.Ag.T  # B x K: centred gold rank of each value
        Q = W @ S.T  # B x (D*K): sum_d'' w_d'' S[(d,k), d'']
        cov = np.einsum("bd,bk,bdk->b", W, Rg, Q.reshape(-1, D, K))
        N = W @ self.n_d
        Gg = W @ self.cnt_dk  # B x K: weight of each gold tie group
        vg = (N ** 3 - N - (Gg ** 3 - Gg).sum(axis=1)) / 12.0
        vp = (N ** 3 - N - _tie_cubes(ties, W)) / 12.0
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = cov / np.sqrt(vg * vp)
        tiny = 1e-9 * N ** 3
        rho[(vg <= tiny) | (vp <= tiny) | (N < 2)] = np.nan
        return np.clip(rho, -1.0, 1.0)


def _dominance(pred: np.ndarray, doc: np.ndarray, label: np.ndarray, D: int, G: int, m: int) -> np.ndarray:
    """S[g, d''] = sum over tokens t with label g of L_t(d''), where L_t(d'') counts the tokens of
    document d'' with a smaller prediction than t's plus half those with an equal one (t itself
    included): G x D, exact (integers and halves).

    In the sorted order, with t's tie group at positions [a, b), L_t(d'') = C(a) + c/2, C(x)
    being the number of d'' tokens before position x and c the number of d'' tokens in the tie
    group. C(a) comes in blocks of m positions: the counts up to each block from one sparse
    product with the block histograms, the rest from at most m positions per point; the tie
    term is a sparse product of the tie groups' label and document counts."""
    from scipy import sparse

    n = pred.size
    order = np.argsort(pred, kind="stable")
    v = pred[order]
    dsort = doc[order]
    lab = label[order]
    new = np.r_[True, v[1:] != v[:-1]]
    starts = np.flatnonzero(new)
    grp = np.cumsum(new) - 1
    x = starts[grp]  # a: the start of each token's tie group
    ones = np.ones(n)
    if starts.size < n:  # ties: one point per (group start, label), weighted by its count
        key, wt = np.unique(x.astype(np.int64) * G + lab, return_counts=True)
        x, g, wt = key // G, key % G, wt.astype(np.float64)
    else:
        g, wt = lab, ones
    unit = starts.size == n
    nb = n // m + 1
    # counts of each document before each block start: nb x D
    hist = np.bincount((np.arange(n) // m) * D + dsort, minlength=nb * D).reshape(nb, D).astype(np.float64)
    cblock = np.cumsum(hist, axis=0) - hist
    beta = x // m
    # points are in position order: one column of H per block, no sort needed
    H = sparse.csc_matrix((wt, g, np.searchsorted(beta, np.arange(nb + 1))), shape=(G, nb))
    S = np.asarray(H @ cblock)
    # within the block: positions beta*m .. x-1; points sorted by their offset, longest first,
    # so that the points still reaching offset o are a prefix
    off = x - beta * m
    srt = np.argsort((m - 1 - off).astype(np.int16), kind="stable")  # a radix sort
    off_s, base_s, gD_s, wt_s = off[srt], beta[srt] * m, g[srt] * D, wt[srt]
    reach = np.searchsorted(-off_s, -np.arange(m), side="left")  # points with off > o
    idx, wts = [], []
    for o in range(m - 1):
        k = int(reach[o])
        if k == 0:
            break
        idx.append(gD_s[:k] + dsort[base_s[:k] + o])
        if not unit:
            wts.append(wt_s[:k])
    if idx:
        S += np.bincount(np.concatenate(idx), weights=None if unit else np.concatenate(wts),
                         minlength=G * D).reshape(G, D)
    # the tie groups: half of each group's documents, once per member (a token alone in its
    # group: half of itself)
    size = np.diff(np.r_[starts, n])[grp]
    alone = size == 1
    S += 0.5 * np.bincount(lab[alone] * D + dsort[alone], minlength=G * D).reshape(G, D)
    if alone.all():
        return S, np.bincount(dsort, minlength=D).astype(np.float64)  # every tie group: one token
    ng = starts.size
    tied = ~alone
    Dm = sparse.csr_matrix((ones, (grp, dsort)), shape=(ng, D))
    Dm.sum_duplicates()
    L = sparse.csr_matrix((ones[tied], (grp[tied], lab[tied])), shape=(ng, G))
    S += 0.5 * (L.T @ Dm).toarray()
    return S, Dm


def _tie_cubes(Dm, W: np.ndarray) -> np.ndarray:
    """Per resample, the sum over the tie groups of the resampled predictions of G^3 - G, from
    each group's count per document (Dm: groups x D, sparse; or, when no two tokens tie, each
    document's token count)."""
    if isinstance(Dm, np.ndarray):  # a group of one token from document d weighs w_d
        return (W ** 3 - W) @ Dm
    per_row = np.diff(Dm.indptr)
    single = per_row == 1
    D = Dm.shape[1]
    first = Dm.indptr[:-1][single]
    docs, cnt = Dm.indices[first], Dm.data[first]
    # a group within one document: G = w_d * c
    out = (W ** 3) @ np.bincount(docs, weights=cnt ** 3, minlength=D) - W @ np.bincount(docs, weights=cnt,
                                                                                       minlength=D)
    rows = np.flatnonzero(~single)
    for lo in range(0, rows.size, 4096):
        Gm = W @ Dm[rows[lo:lo + 4096]].T.toarray()
        out += (Gm ** 3 - Gm).sum(axis=1)
    return out


# ----------------------------------------------------------------------------- a task's primary score


class Bootstrap:
    """The resampling of one task's split (restricted to a part of the gold): its units, their
    strata, and the primary score of any submission on a matrix of multiplicities."""

    def __init__(self, task, store, split: str, only: frozenset | None = None):
        from scorer.families import _cache_key, read_jsonl

        self.task, self.store, self.split = task, store, split
        self.subset, self.metric = task.primary
        kind = task.kind
        if kind in ("instances", "targets"):
            key = task.format.key[0]
            gold = read_jsonl(store.gold(split, "gold.jsonl"))
            keep = [i for i, r in enumerate(gold) if only is None or r[key] in only]
            self.rows = np.array(keep, dtype=np.int64)
            self.units = [gold[i][key] for i in keep]
            self.strata = ["all"] * len(keep)
            value = "label" if kind == "instances" else "score"
            self.gold = np.array([gold[i][value] for i in keep], dtype=np.float64)
            if self.subset == "all":
                self.mask = np.ones(len(keep), dtype=bool)
            else:
                self.mask = np.array([gold[i].get("subset") == self.subset for i in keep])
        elif kind == "tokens":
            from scorer.families import Tokens, _token_gold

            full = _token_gold(_cache_key(store.gold(split, "gold.jsonl")), None)
            rows = read_jsonl(store.gold(split, "gold.jsonl"))
            self.pairs = {}
            self.units, self.strata = [], []
            for pair in Tokens.PAIRS:
                if pair not in full:
                    continue
                ids, gvec, mask = full[pair]
                by_id = {r["id"]: r for r in rows if r["pair"] == pair}
                lens = np.array([len(by_id[i]["labels_a"]) + len(by_id[i]["labels_b"]) for i in ids])
                doc_all = np.repeat(np.arange(len(ids)), lens)[mask]  # document of each scored token
                keep_doc = np.array([only is None or i in only for i in ids])
                tok = keep_doc[doc_all]
                newidx = np.cumsum(keep_doc) - 1
                kept = [i for i, k in zip(ids, keep_doc) if k]
                if not kept:
                    continue
                col0 = len(self.units)
                self.units += kept
                self.strata += [pair] * len(kept)
                self.pairs[pair] = (np.arange(col0, col0 + len(kept)), tok,
                                    TokenPair(newidx[doc_all[tok]], gvec[tok], len(kept)))
        elif kind == "links":
            from scorer.families import _link_gold, family

            fam = family(task, store, split)
            qidx, sidx = fam.ids()
            self.n_sources = len(sidx)
            root = store.root / "index" / split
            gq, gs = _link_gold(_cache_key(store.gold(split, "links.csv")), _cache_key(root / "query_ids.txt"),
                                _cache_key(root / "source_ids.txt"))
            self.units = [q for q in qidx if only is None or q in only]
            self.strata = ["all"] * len(self.units)
            self.qcols = np.full(len(qidx), -1, dtype=np.int64)
            self.qcols[[qidx[q] for q in self.units]] = np.arange(len(self.units))
            self.gold_links = (gq, gs)
        else:
            raise ValueError(f"no bootstrap for task kind {kind!r}")

    # -------------------------------------------------------------------------------------------

    def weights(self, B: int, seed: int) -> np.ndarray:
        return draw_weights(self.strata, B, seed)

    def point(self, arrays: dict) -> float:
        """The primary score on the part itself (every unit once): the scorer's value."""
        return float(self.samples(arrays, np.ones((1, len(self.units))))[0])

    def samples(self, arrays: dict, W: np.ndarray) -> np.ndarray:
        """The primary score of one submission on each resample (NaN where undefined)."""
        kind = self.task.kind
        if kind in ("instances", "targets"):
            pred = np.asarray(arrays["pred"], dtype=np.float64)[self.rows]
            w = W[:, self.mask]
            g, p = self.gold[self.mask], pred[self.mask]
            if self.metric == "f1":
                return weighted_f1(g, p, w)
            if self.metric == "spearman":
                return weighted_spearman(g, p, w)
            if self.metric == "kendall":
                return weighted_kendall(g, p, w)
            raise ValueError(f"no bootstrap for {self.metric}")
        if kind == "tokens":
            if self.metric != "spearman":
                raise ValueError(f"no bootstrap for {self.metric}")
            per = []
            for pair, (cols, tok, tp) in self.pairs.items():
                if self.subset not in ("macro", pair):
                    continue
                p = arrays.get(f"pred:{pair}")
                if p is None:
                    per.append(np.full(W.shape[0], np.nan))
                    continue
                per.append(tp.spearman(np.asarray(p, dtype=np.float64)[tok], W[:, cols]))
            if self.subset == "macro" and len(per) < 3:
                return np.full(W.shape[0], np.nan)
            return np.mean(per, axis=0)
        if kind == "links":
            if self.metric in LINK_COUNT_METRICS:
                return self._links_counts(arrays, W)
            return np.array([self._links_once(arrays, w) for w in W])
        raise ValueError(kind)

    def _links_counts(self, arrays: dict, W: np.ndarray) -> np.ndarray:
        """The metrics of `metrics.link_counts` on every resample at once, from each query's own
        TP, FP and FN (the same formulas and operation order; `_links_once` is the reference)."""
        gq, gs = self.gold_links
        pq, ps = np.asarray(arrays["q"]), np.asarray(arrays["s"])
        n_s = self.n_sources
        gkeys = np.unique(gq * n_s + gs)
        hit = np.isin(pq * n_s + ps, gkeys, assume_unique=True)
        U = len(self.units)
        cp, cg = self.qcols[pq], self.qcols[gkeys // n_s]
        tp_u = np.bincount(cp[(cp >= 0) & hit], minlength=U).astype(np.float64)
        pred_u = np.bincount(cp[cp >= 0], minlength=U).astype(np.float64)
        gold_u = np.bincount(cg[cg >= 0], minlength=U).astype(np.float64)
        tp, pred, gold = W @ tp_u, W @ pred_u, W @ gold_u
        fp, fn = pred - tp, gold - tp
        n = W.sum(axis=1) * n_s
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
            recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
            vals = {"precision": precision, "recall": recall,
                    "f1": np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0),
                    "smr": np.where(n > 0, (fp + fn) / n, 0.0), "fpr": np.where(n > 0, fp / n, 0.0),
                    "fnr": np.where(n > 0, fn / n, 0.0)}
        return vals[self.metric]

    def _links_once(self, arrays: dict, w: np.ndarray) -> float:
        """The primary metric on one resample of queries, through the scorer's own metric functions:
        each drawn copy of a query becomes a query of its own (its links copied with it)."""
        gq, gs = self.gold_links
        pq, ps = np.asarray(arrays["q"]), np.asarray(arrays["s"])
        psc = arrays.get("score")
        reps = w.astype(np.int64)
        copies = np.repeat(np.arange(reps.size), reps)  # new query j is a copy of unit copies[j]
        n_q = copies.size
        n_s = self.n_sources

        def expand(q, *cols):
            c = self.qcols[q]
            keep = c >= 0
            c = c[keep]
            cols = [x[keep] for x in cols]
            # each link repeats once per copy of its query; copy numbers by cumulative offsets
            start = np.r_[0, np.cumsum(reps)][:-1]
            k = reps[c]
            newq = np.repeat(start[c], k) + _ranges(k)
            return (newq,) + tuple(np.repeat(x, k) for x in cols)

        nq_g, ns_g = expand(gq, gs)
        if psc is not None:
            nq_p, ns_p, nsc = expand(pq, ps, np.asarray(psc))
        else:
            nq_p, ns_p = expand(pq, ps)
            nsc = None
        vals = metrics.link_counts(np.unique(nq_g * n_s + ns_g), nq_p * n_s + ns_p, n_q * n_s)
        if self.metric in vals:
            return float(vals[self.metric]) if vals[self.metric] is not None else np.nan
        if nsc is None:
            return np.nan
        r = metrics.link_ranking(nq_g, ns_g, nq_p, ns_p, nsc)
        v = r.get(self.metric)
        return np.nan if v is None else float(v)


LINK_COUNT_METRICS = ("f1", "precision", "recall", "smr", "fpr", "fnr")


def _ranges(k: np.ndarray) -> np.ndarray:
    """0..k0-1, 0..k1-1, ... concatenated."""
    total = int(k.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(k)
    return np.arange(total) - np.repeat(ends - k, k)


# ----------------------------------------------------------------------------- board statistics


def board_statistics(samples: np.ndarray, points: np.ndarray, greater_is_better: bool,
                     alpha: float = 0.05) -> dict:
    """From an R x B matrix of paired resampled scores (one row per ranked system) and the R point
    scores: each row's percentile interval, 95 % rank interval, the pairwise two-sided paired
    bootstrap p-values with Holm's correction, and clusters of systems not significantly
    different from the best of their cluster (walking down the ranking)."""
    R = samples.shape[0]
    lo_q, hi_q = 100 * alpha / 2, 100 * (1 - alpha / 2)
    ci = []
    for r in range(R):
        x = samples[r][np.isfinite(samples[r])]
        ci.append([float(np.percentile(x, lo_q)), float(np.percentile(x, hi_q))] if x.size else [None, None])
    # ranks on each resample: competition ranking, an undefined score ranks last
    sgn = 1.0 if greater_is_better else -1.0
    s = np.where(np.isfinite(samples), sgn * samples, -np.inf)
    ranks = 1 + (s[None, :, :] > s[:, None, :]).sum(axis=1)  # R x B
    rank_range = [[int(np.floor(np.percentile(ranks[r], lo_q))), int(np.ceil(np.percentile(ranks[r], hi_q)))]
                  for r in range(R)]
    p = paired_pvalues(samples, points)
    adj = holm(p)
    # clusters, walking down the point ranking
    order = sorted(range(R), key=lambda r: (-sgn * points[r]) if np.isfinite(points[r]) else np.inf)
    cluster = [0] * R
    c, head = 0, None
    for r in order:
        if head is None or adj[head, r] < alpha:
            c += 1
            head = r
        cluster[r] = c
    return {"ci": ci, "rank_range": rank_range, "p": p.tolist(), "p_holm": adj.tolist(), "cluster": cluster}


def paired_pvalues(samples: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Two-sided p-values of the paired differences: the observed difference of two systems over
    the standard error of their difference across the same resamples (the bootstrap's normal
    approximation). Counting the resamples on the wrong side of zero instead cannot go below
    2/(B+1), which Holm's correction over a 50-row board's 1,225 pairs multiplies past 1."""
    from scipy.special import ndtr

    R = samples.shape[0]
    p = np.ones((R, R))
    for i in range(R):
        for j in range(i + 1, R):
            d = samples[i] - samples[j]
            d = d[np.isfinite(d)]
            obs = points[i] - points[j]
            if d.size < 2 or not np.isfinite(obs):
                continue
            se = float(np.std(d, ddof=1))
            if se == 0.0:
                v = 1.0 if obs == 0 else 0.0
            else:
                v = float(2.0 * ndtr(-abs(obs) / se))
            p[i, j] = p[j, i] = min(1.0, v)
    return p


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


# ----------------------------------------------------------------------------- naive references (tests)


def naive_spearman(gold: np.ndarray, pred: np.ndarray, w: np.ndarray, unit_of: np.ndarray | None = None) -> float:
    """scipy's Spearman on one explicitly resampled copy (items of unit u repeated w[u] times)."""
    from scipy import stats

    unit_of = np.arange(gold.size) if unit_of is None else unit_of
    reps = w[unit_of].astype(np.int64)
    g, p = np.repeat(gold, reps), np.repeat(pred, reps)
    if g.size < 2 or np.ptp(g) == 0 or np.ptp(p) == 0:
        return float("nan")
    return float(stats.spearmanr(g, p).statistic)


__all__ = ["Bootstrap", "board_statistics", "draw_weights", "holm", "naive_spearman", "unit_arrays",
           "weighted_f1", "weighted_kendall", "weighted_spearman"]
