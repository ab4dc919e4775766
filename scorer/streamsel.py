"""Exact order statistics of a stream of values too many to hold: Holm's step-down over every pair
of a board without a vector of the pairs.

The values (one per pair) are not stored: `stream()` recomputes them, block by block, each time it
is called (the same figures every time). A pass sorts them into ranges of their bit patterns (the
IEEE bits of a non-negative double, read as an integer, are in the values' order) and keeps, per
range, its count, smallest and largest value; a range a consumer cannot settle from those is split
by the next bits on the next pass, and once the ranges left open hold at most `budget` values they
are read out whole. Memory: the ranges (a few per open range, bounded) and `budget` values, never
one per pair; CPU: a pass per level (up to five, usually one or two).

`holm_queries` gives Holm's adjusted p-values (`scorer.bootstrap.holm`'s figures, bit for bit) of
a few of the pairs and the smallest p-value Holm's correction does not reject at alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

_FLIP = np.int64(0x7FFFFFFFFFFFFFFF)
_TOP = 48  # the first pass's ranges: the top 16 bits (sign, exponent, 4 bits of mantissa)


def keys(x: np.ndarray) -> np.ndarray:
    """Integers in the order of the doubles x (no NaN; -0.0 read as 0.0)."""
    b = (np.asarray(x, dtype=np.float64) + 0.0).view(np.int64)
    return np.where(b < 0, b ^ _FLIP, b)


def values_of(k: np.ndarray) -> np.ndarray:
    """The doubles of keys (`keys`' inverse)."""
    return np.where(k < 0, k ^ _FLIP, k).view(np.float64)


def _tally(c: np.ndarray, k: np.ndarray, n, kmin, kmax) -> None:
    """Counts, smallest and largest key per cell c (from one sort of the keys by cell)."""
    o = np.lexsort((k, c))
    c, k = c[o], k[o]
    first = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    lastk = k[np.concatenate([first[1:] - 1, [c.size - 1]])]
    cells = c[first]
    n[cells] += np.diff(np.concatenate([first, [c.size]]))
    kmin[cells] = np.minimum(kmin[cells], k[first])
    kmax[cells] = np.maximum(kmax[cells], lastk)


class Seg:
    """A range of keys [lo, lo + 2**shift): `n` values, the first at sorted index `F`."""

    __slots__ = ("F", "lo", "n", "shift", "values", "vmax", "vmin")

    def __init__(self, lo, shift, n, F, vmin, vmax):
        self.lo, self.shift, self.n, self.F = int(lo), int(shift), int(n), int(F)
        self.vmin, self.vmax = float(vmin), float(vmax)
        self.values = None  # sorted, once read out

    @property
    def hi(self) -> int:
        return self.lo + (1 << self.shift)

    @property
    def exact(self) -> bool:
        return self.values is not None or self.vmin == self.vmax


def _first_pass(stream) -> list[Seg]:
    size = 1 << 16
    n = np.zeros(size, dtype=np.int64)
    kmin = np.full(size, np.iinfo(np.int64).max)
    kmax = np.full(size, np.iinfo(np.int64).min)
    for v in stream():
        if not v.size:
            continue
        k = keys(v)
        _tally((k >> _TOP) + (1 << 15), k, n, kmin, kmax)
    F = np.concatenate([[0], np.cumsum(n)[:-1]])
    nz = np.flatnonzero(n)
    vmin, vmax = values_of(kmin[nz]), values_of(kmax[nz])
    return [
        Seg((int(b) - (1 << 15)) << _TOP, _TOP, n[b], F[b], vmin[t], vmax[t])
        for t, b in enumerate(nz)
    ]


def _locate(open_: list[Seg], k: np.ndarray):
    """The index into open_ of each key's range (-1: none)."""
    lo = np.array([s.lo for s in open_], dtype=np.int64)
    hi = np.array([s.hi - 1 for s in open_], dtype=np.int64)  # inclusive: hi may be 2**63
    i = np.searchsorted(lo, k, side="right") - 1
    ok = i >= 0
    ok[ok] = k[ok] <= hi[i[ok]]
    return np.where(ok, i, -1)


def _split(stream, open_: list[Seg]) -> dict[int, list[Seg]]:
    """One pass: each open range split by its next bits into its non-empty ranges."""
    bits = max(1, min(12, 17 - int(np.log2(len(open_) + 1))))
    sub = [max(0, s.shift - bits) for s in open_]
    width = [1 << (s.shift - c) for s, c in zip(open_, sub, strict=True)]
    base = np.concatenate([[0], np.cumsum(width)])
    size = int(base[-1])
    n = np.zeros(size, dtype=np.int64)
    kmin = np.full(size, np.iinfo(np.int64).max)
    kmax = np.full(size, np.iinfo(np.int64).min)
    lo = np.array([s.lo for s in open_], dtype=np.int64)
    sh = np.array(sub, dtype=np.int64)
    for v in stream():
        if not v.size:
            continue
        k = keys(v)
        i = _locate(open_, k)
        keep = i >= 0
        if not keep.any():
            continue
        i, k, v = i[keep], k[keep], v[keep]
        _tally(base[i] + ((k - lo[i]) >> sh[i]), k, n, kmin, kmax)
    vmin, vmax = values_of(kmin), values_of(kmax)
    out = {}
    for j, s in enumerate(open_):
        part = n[base[j] : base[j + 1]]
        F = s.F + np.concatenate([[0], np.cumsum(part)[:-1]])
        out[id(s)] = [
            Seg(
                s.lo + (int(t) << sub[j]),
                sub[j],
                part[t],
                F[t],
                vmin[base[j] + t],
                vmax[base[j] + t],
            )
            for t in np.flatnonzero(part)
        ]
    return out


def _read_out(stream, open_: list[Seg]) -> None:
    got: list[list] = [[] for _ in open_]
    for v in stream():
        if not v.size:
            continue
        i = _locate(open_, keys(v))
        keep = i >= 0
        if not keep.any():
            continue
        i, v = i[keep], v[keep]
        o = np.argsort(i, kind="stable")
        i, v = i[o], v[o]
        cut = np.searchsorted(i, np.arange(len(open_) + 1))
        for j in np.flatnonzero(np.diff(cut)):
            got[j].append(v[cut[j] : cut[j + 1]])
    for s, g in zip(open_, got, strict=True):
        s.values = np.sort(np.concatenate(g)) if g else np.zeros(0)


def settle(
    stream: Callable[[], Iterable[np.ndarray]],
    want: Callable[[list[Seg]], list[Seg]],
    budget: int = 1 << 20,
    segs: list[Seg] | None = None,
) -> list[Seg]:
    """The ranges of the stream's values in order, refined until `want(ranges)` (the ranges its
    answer still needs to see whole) is empty: split while they hold more than `budget` values,
    then read out."""
    segs = _first_pass(stream) if segs is None else segs
    while True:
        open_ = want(segs)
        if not open_:
            return segs
        if sum(s.n for s in open_) <= budget:
            _read_out(stream, open_)
            continue
        parts = _split(stream, open_)
        segs = [t for s in segs for t in parts.get(id(s), [s])]


def _f(s: Seg, m: int) -> np.ndarray:
    """(m - i) p_(i) of a read-out range's values (`holm`'s products)."""
    return s.values * (m - (s.F + np.arange(s.n)))


def holm_queries(
    stream: Callable[[], Iterable[np.ndarray]],
    m: int,
    queries: np.ndarray,
    alpha: float | None = None,
    budget: int = 1 << 20,
    segs: list[Seg] | None = None,
) -> tuple[np.ndarray, float, list[Seg]]:
    """Holm's adjusted value of each query (a value of the stream) over the stream's m values,
    and (with alpha) the smallest value whose adjusted value is >= alpha (inf: none): a value q is
    rejected at alpha exactly when q < it. Returns them and the ranges (reusable by a later call
    on the same stream)."""
    q = np.sort(np.asarray(queries, dtype=np.float64))
    kq = keys(q)
    state = {"cross": None if alpha is not None else np.inf}

    def L(s):  # (m - F) p at the range's first index: `holm`'s product
        return s.vmin * (m - s.F)

    def U(s):  # above every product in the range
        return s.vmax * (m - s.F)

    def want(segs):
        need: list[Seg] = []
        if state["cross"] is None:
            # the first value with (m - i) p_(i) >= alpha (every earlier one has it below)
            found = None
            for s in segs:
                if U(s) < alpha:
                    continue
                if s.values is not None:
                    f = _f(s, m)
                    hit = np.flatnonzero(f >= alpha)
                    if hit.size:
                        found = float(s.values[hit[0]])
                        break
                    continue
                if L(s) >= alpha:
                    if not need:
                        found = s.vmin
                    break
                need.append(s)
            if found is not None or not need:
                state["cross"] = np.inf if found is None else found
            else:
                return need
        if not q.size:
            return []
        los = np.array([s.lo for s in segs], dtype=np.int64)
        holds = np.zeros(len(segs), dtype=bool)
        holds[np.searchsorted(los, kq, side="right") - 1] = True
        last = int(np.flatnonzero(holds)[-1])
        point = [L(s) for s in segs[: last + 1]]
        whole = [
            float(_f(s, m).max()) if s.values is not None and s.n else point[i]
            for i, s in enumerate(segs[: last + 1])
        ]
        # after[i]: the largest known product after range i up to the next query's range's first
        # index (a range below it changes no query's maximum)
        after = [-np.inf] * (last + 1)
        carry = -np.inf
        for i in range(last, -1, -1):
            after[i] = carry
            carry = point[i] if holds[i] else max(carry, whole[i])
        best = -np.inf
        for i in range(last + 1):
            s = segs[i]
            if best >= 1.0:
                break
            if s.values is None and not s.exact:
                known = max(best, point[i], -np.inf if holds[i] else after[i])
                if U(s) > known:
                    need.append(s)
            best = max(best, whole[i])
        return need

    segs = settle(stream, want, budget, segs)
    # walk the ranges in order: the running maximum of (m - i) p_(i) at each query's first index
    out = np.empty(q.size)
    run = -np.inf
    j = 0
    for s in segs:
        if j >= q.size:
            break
        inside = int(np.searchsorted(kq, s.hi - 1, side="right"))  # the queries up to its end
        if s.values is not None:
            f = np.maximum.accumulate(_f(s, m))
            while j < inside:
                k = int(np.searchsorted(s.values, q[j], side="left"))
                out[j] = max(run, float(f[k]))
                j += 1
            run = max(run, float(f[-1]))
        else:
            # settled: nothing inside above a product known before the next query
            run = max(run, L(s))
            while j < inside:
                out[j] = run
                j += 1
    out[j:] = run
    res = np.empty_like(out)
    res[np.argsort(np.asarray(queries, dtype=np.float64), kind="stable")] = np.minimum(1.0, out)
    return res, state["cross"], segs
