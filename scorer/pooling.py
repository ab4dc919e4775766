"""Pooling runs for assessment, vectorised: each run's top-k links per query, their union with
the runs that proposed each link, the words a query and a candidate share, and a balanced seeded
assignment of items to assessors.

Everything here works on index arrays (query and source positions, as `scorer.families.Links`
holds them), so that a pool of three top-100 runs at Loci Similes' scale (8.3 M links each) is a
few sorts and no Python loop over links. `server.actions.campaigns` turns the results into
campaign items; `tests/test_pooling.py` checks each function against a naive computation.
"""

from __future__ import annotations

import re

import numpy as np

from scorer.metrics import trec_scores

WORD = re.compile(r"\w+", re.UNICODE)
CHUNK = 1 << 19  # pairs per sparse product when counting shared words


def top_k(q, s, score, depth: int, source_rank: np.ndarray) -> np.ndarray:
    """Positions of a run's top-`depth` links per query, ranked exactly as the scorer ranks them
    (`scorer.metrics.link_ranking_ir`, trec_eval's `comp_sim_docno`): by descending score compared
    in single precision (`trec_scores`: scores equal as float32 tie), ties by descending source id
    (`source_rank` is each source's rank in byte order); a run without scores ties everywhere."""
    q = np.asarray(q, dtype=np.int64)
    if q.size == 0:
        return np.zeros(0, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    sc = np.zeros(q.size, dtype=np.float32) if score is None else trec_scores(score)
    order = np.lexsort((-source_rank[s], -sc, q))  # the last key sorts first
    qs = q[order]
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
    lengths = np.diff(np.r_[starts, qs.size])
    rank = np.arange(qs.size) - np.repeat(starts, lengths)
    return order[rank < depth]


def union(codes_per_run: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct link codes (query * n_sources + source) over the runs, sorted, and for each
    a bit mask of the runs (by their position in the list) that proposed it."""
    if not codes_per_run:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if len(codes_per_run) > 62:
        raise ValueError("at most 62 runs in one pool")
    codes = np.concatenate([np.asarray(c, dtype=np.int64) for c in codes_per_run])
    bits = np.concatenate(
        [np.full(len(c), 1 << i, dtype=np.int64) for i, c in enumerate(codes_per_run)]
    )
    if codes.size == 0:
        return codes, bits
    order = np.argsort(codes, kind="stable")
    codes, bits = codes[order], bits[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    return codes[starts], np.bitwise_or.reduceat(bits, starts)


def mask_members(mask: np.ndarray) -> list[list[int]]:
    """Each bit mask as the sorted positions of its set bits (one list per distinct mask, shared
    by the items that have it: read them, do not change them)."""
    uniq, inv = np.unique(np.asarray(mask, dtype=np.int64), return_inverse=True)
    lists = [[i for i in range(63) if (int(u) >> i) & 1] for u in uniq.tolist()]
    return [lists[k] for k in inv.ravel().tolist()]


def shared_words(qtexts: list[str], stexts: list[str], qi, si) -> np.ndarray:
    """For each pair (qtexts[qi[k]], stexts[si[k]]), the number of word types (`\\w+`, lower case)
    the two texts share; a sparse product over the segments the pairs use, in chunks."""
    # heavy: scipy.sparse loads only when a pool is drawn
    from scipy import sparse

    qi = np.asarray(qi, dtype=np.int64)
    si = np.asarray(si, dtype=np.int64)
    out = np.zeros(qi.size, dtype=np.int64)
    if qi.size == 0:
        return out
    uq, qpos = np.unique(qi, return_inverse=True)
    us, spos = np.unique(si, return_inverse=True)
    vocab: dict[str, int] = {}

    def matrix(ids: np.ndarray, texts: list[str]):
        indptr, indices = [0], []
        for i in ids.tolist():
            words = {vocab.setdefault(w, len(vocab)) for w in WORD.findall(texts[i].lower())}
            indices.extend(sorted(words))
            indptr.append(len(indices))
        return indptr, indices

    qp, qx = matrix(uq, qtexts)
    sp, sx = matrix(us, stexts)
    n = max(len(vocab), 1)
    Q = sparse.csr_matrix((np.ones(len(qx), np.int32), qx, qp), shape=(len(uq), n))
    S = sparse.csr_matrix((np.ones(len(sx), np.int32), sx, sp), shape=(len(us), n))
    for lo in range(0, qi.size, CHUNK):
        hi = min(lo + CHUNK, qi.size)
        prod = Q[qpos[lo:hi]].multiply(S[spos[lo:hi]])
        out[lo:hi] = np.asarray(prod.sum(axis=1)).ravel()
    return out


def overlap_buckets(counts: np.ndarray) -> np.ndarray:
    """Shared word types bucketed as the campaigns' `overlap` factor: 0, 1, 2-3, 4+."""
    names = np.array(["0", "1", "2-3", "4+"], dtype=object)
    return names[np.select([counts == 0, counts == 1, counts <= 3], [0, 1, 2], 3)]


def balanced_assignment(
    n_items: int, n_assessors: int, per_item: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each of `n_items` items to `per_item` distinct assessors, so that the assessors' loads
    differ by at most one, and each assessor's items in a shuffled order; all from one seeded
    generator (numpy's PCG64). Returns (item, assessor, position) arrays, one row per
    assignment.

    The items are dealt in a seeded order, round robin over a seeded order of the assessors
    (`per_item` consecutive places of the round are distinct assessors); then every assessor's
    items are shuffled, so that the order says nothing of the pool's order."""
    if not 1 <= per_item <= n_assessors:
        raise ValueError("per_item must be between 1 and the number of assessors")
    rng = np.random.default_rng(seed)
    dealt = rng.permutation(n_items)
    people = rng.permutation(n_assessors)
    slot = np.arange(n_items * per_item, dtype=np.int64)
    item = np.repeat(dealt, per_item)
    assessor = people[slot % n_assessors]
    key = rng.random(slot.size)
    order = np.lexsort((key, assessor))
    item, assessor = item[order], assessor[order]
    starts = np.flatnonzero(np.r_[True, assessor[1:] != assessor[:-1]]) if slot.size else []
    lengths = np.diff(np.r_[starts, slot.size]) if slot.size else []
    position = np.arange(slot.size) - np.repeat(starts, lengths) if slot.size else slot
    return item.astype(np.int64), assessor.astype(np.int64), np.asarray(position, dtype=np.int64)
