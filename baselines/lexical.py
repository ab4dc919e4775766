"""Model-free lexical overlap: Dice's coefficient over word sets (as in the STR-2022 paper)."""

from __future__ import annotations

import re

import numpy as np
from tqdm.auto import tqdm

from scorer.lazy import sparse

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> frozenset[str]:
    """The set of lowercased word tokens (runs of letters, digits and underscores) of a text."""
    return frozenset(w.lower() for w in _WORD.findall(text))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    """2|A∩B| / (|A|+|B|); 0 when both sets are empty."""
    total = len(a) + len(b)
    return 2.0 * len(a & b) / total if total else 0.0


def dice_texts(a: str, b: str) -> float:
    """Dice over the word sets of two texts."""
    return dice(words(a), words(b))


def dice_top_k(
    queries: list[str], sources: list[str], k: int, chunk: int = 256, progress: bool = False
):
    """For each query, the k sources with the highest Dice (ties: lower source index first), as
    (indices, scores) arrays of shape (n_queries, k); computed by sparse matrix products in
    chunks."""
    vocab: dict[str, int] = {}

    def matrix(texts):
        rows, cols = [], []
        for i, t in enumerate(texts):
            for w in words(t):
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
        return rows, cols

    qr, qc = matrix(queries)
    sr, sc = matrix(sources)
    shape_v = max(len(vocab), 1)
    q = sparse().csr_matrix((np.ones(len(qr), np.float32), (qr, qc)), shape=(len(queries), shape_v))
    s = sparse().csr_matrix((np.ones(len(sr), np.float32), (sr, sc)), shape=(len(sources), shape_v))
    q_len = np.asarray(q.sum(axis=1)).ravel()
    s_len = np.asarray(s.sum(axis=1)).ravel()
    st = s.T.tocsc()
    k = min(k, len(sources))
    idx = np.zeros((len(queries), k), dtype=np.int64)
    val = np.zeros((len(queries), k), dtype=np.float64)
    for a in tqdm(
        range(0, len(queries), chunk), desc="Dice top-k", unit="chunk", disable=not progress
    ):
        inter = (q[a : a + chunk] @ st).toarray().astype(np.float64)
        denom = q_len[a : a + chunk, None] + s_len[None, :]
        d = np.divide(2.0 * inter, denom, out=np.zeros_like(inter), where=denom > 0)
        # stable sort on -score keeps the lower source index first among ties (deterministic)
        order = np.argsort(-d, axis=1, kind="stable")[:, :k]
        idx[a : a + chunk] = order
        val[a : a + chunk] = np.take_along_axis(d, order, axis=1)
    return idx, val
