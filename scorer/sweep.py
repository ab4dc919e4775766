"""The dominance counts of a token-level Spearman, compiled (numba): one sweep over the tokens in
the order of their predictions.

`dominance(order, pred, doc, label, D, G)` gives S (G x D): S[g, d] = the sum over the tokens t
with label g of the number of tokens of document d with a smaller prediction than t's plus half
those with an equal one (t itself included). In the sorted order, with t's tie group at
positions [a, b), that is C(a) + c/2, C(a) being the count of d's tokens before a and c the count
of d's tokens in the group: the sweep keeps twice that per document (an integer) and adds it to
the row of every member's label. n x D additions of 32-bit integers (64-bit where those could
overflow), vectorised (float64 additions would not be, without fastmath), halved at the end, exact;
what numpy could only do in blocks and walks, about five times slower.

Compiled on the first call in a process where no cache of it exists (about 0.4 s of CPU), else
loaded from the disk cache numba keeps beside this file (about 0.2 s; where that is not writable,
in the user's cache directory, or in `NUMBA_CACHE_DIR`); `nogil`: the language pairs' threads run
it side by side.
"""

from __future__ import annotations

import numpy as np

from scorer.lazy import njit


@njit(cache=True, nogil=True)
def _sweep(v, doc, label, S2, C2):  # pragma: no cover (compiled; tested through `dominance`)
    n = v.size
    D = C2.size
    i = 0
    while i < n:
        j = i + 1
        while j < n and v[j] == v[i]:
            j += 1
        for t in range(i, j):
            C2[doc[t]] += 1
        for t in range(i, j):
            g = label[t]
            for d in range(D):
                S2[g, d] += C2[d]
        for t in range(i, j):
            C2[doc[t]] += 1
        i = j


_INT32_BELOW = 2**31
"""The counts are taken in 32-bit integers where twice the largest possible one stays below this
(twice a label's tokens times a document's: a third faster than 64-bit ones), else in 64-bit."""


def dominance(
    order: np.ndarray, pred: np.ndarray, doc: np.ndarray, label: np.ndarray, D: int, G: int
) -> np.ndarray:
    """S (G x D, float64, C order) from the tokens' predictions, documents (0..D-1) and labels
    (0..G-1), and `order`, any order of the tokens that sorts `pred` (the members of a tie group
    may come in any order)."""
    most = (
        2
        * int(np.bincount(label, minlength=1).max(initial=0))
        * int(np.bincount(doc, minlength=1).max(initial=0))
    )
    dtype = np.int32 if most < _INT32_BELOW else np.int64
    # the sweep reads the tokens in order: gathered once, rather than through `order` at each step
    v = np.ascontiguousarray(pred[order], dtype=np.float64)
    d, g = doc[order].astype(dtype), label[order].astype(dtype)
    S2 = np.zeros((int(G), int(D)), dtype=dtype)  # twice the counts: integers
    # per document: twice its tokens before the current tie group, plus once those in it
    _sweep(v, d, g, S2, np.zeros(int(D), dtype=dtype))
    return S2 * 0.5  # float64, exact: integers below 2^53, halved


def warm() -> None:
    """Load the sweep's machine code now (from numba's cache; compiled where there is none): a
    worker does so before it forks its work horses, which then start with it loaded (each would
    spend about 0.2 s of CPU loading it, and the first ever about 0.4 s compiling it)."""
    one = np.zeros(2, dtype=np.int64)
    dominance(np.arange(2), np.array([0.0, 1.0]), one, one, 1, 1)
