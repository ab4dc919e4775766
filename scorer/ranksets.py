"""Confidence sets for ranks with the coverage they state: the max-t procedure of Mogstad, Romano,
Shaikh and Wilhelm, "Inference for ranks with applications to mobility across neighborhoods and
academic achievements across countries" (Review of Economic Studies 91(1), 2024,
doi:10.1093/restud/rdad006), as their R package csranks computes it (`csranks`, `csdiffmeans`,
`cstaubest`; stepwise, two-sided), ported to a board's paired bootstrap resamples.

A row's rank is 1 + the number of rows truly better. The procedure tests every hypothesis
"theta_j <= theta_k" of a family of ordered pairs (j, k) at once: the statistic t_jk =
(x_j - x_k) / s_jk (x the point values, s_jk the standard deviation of the difference over the
resamples) is rejected above c, the 1 - alpha quantile over the resamples of the largest root
(z_j - z_k) / s_jk in the family (z a row's resampled values centred on their mean: the
empirical form of csranks' draws from N(0, Sigma), Sigma the resamples' covariance); stepwise,
the rejected pairs leave the family and c is recomputed until nothing more is rejected. A row's
set is [1 + the rows k with (k, j) rejected, R - the rows k with (j, k) rejected].

- `marginal`: one family per row j, its pairs with every other row in both directions: each
  row's set holds that row's true rank with probability 1 - alpha (asymptotically).
- `simultaneous`: one family of every ordered pair: all rows' sets hold all true ranks at once
  with probability 1 - alpha. Its lower ends give the top-tau set (csranks' `cstaubest`, whose
  family and rejections are the same): the rows whose set reaches tau hold every row truly among
  the tau best, with probability 1 - alpha.

Cost: a pass over the R x R pairs on each resample per step (R^2 B, compiled, no R x R x B
array); the marginal sets repeat it only for the rows the previous step rejected something for.
`naive_rank_sets` is the direct port (a list of pairs, a quantile of their maxima), the tests'
reference.
"""

from __future__ import annotations

import numpy as np

from scorer import streamsel
from scorer.lazy import njit, special


@njit(cache=True, nogil=True)
def _first_pass(zt, inv, Mu, Au, Md, Ad):  # pragma: no cover (compiled; tested through rank_sets)
    """For every row j and resample b, over every other row k: the largest (z_j - z_k) * inv[j, k]
    (the roots of the pairs (j, k)) and of its negative (those of (k, j)), and where they are. A
    NaN root (an undefined resample) is never the largest."""
    B = zt.shape[0]
    R = zt.shape[1]
    for j in range(R):
        for b in range(B):
            zj = zt[b, j]
            mu = -np.inf
            md = -np.inf
            au = -1
            ad = -1
            for k in range(R):
                if k == j:
                    continue
                d = (zj - zt[b, k]) * inv[j, k]
                if d > mu:
                    mu = d
                    au = k
                if -d > md:
                    md = -d
                    ad = k
            Mu[b, j] = mu
            Au[b, j] = au
            Md[b, j] = md
            Ad[b, j] = ad


@njit(cache=True, nogil=True)
def _refresh(zt, inv, j, keep, sign, gone, M, A):  # pragma: no cover (compiled)
    """Row j's largest root of one direction (sign +1: the pairs (j, k), -1: (k, j)) over the rows
    still in its family (keep[k]), recomputed on the resamples whose largest was a row that left
    it (gone[A[b, j]])."""
    B = zt.shape[0]
    R = zt.shape[1]
    for b in range(B):
        a = A[b, j]
        if a < 0 or not gone[a]:
            continue
        zj = zt[b, j]
        m = -np.inf
        am = -1
        for k in range(R):
            if keep[k]:
                d = sign * (zj - zt[b, k]) * inv[j, k]
                if d > m:
                    m = d
                    am = k
        M[b, j] = m
        A[b, j] = am


def _diff_sd_of(samples):
    S = np.asarray(samples, dtype=np.float64)
    finite = np.isfinite(S)
    return _diff_sd(np.where(finite, S, np.nan), finite)


def _prepare(samples, points, greater_is_better):
    """The centred resamples (B x R, the better direction up), the point differences' statistics
    t (R x R, t[j, k] > 0: j looks better than k) and 1/s (0 where s is 0)."""
    sgn = 1.0 if greater_is_better else -1.0
    S = sgn * np.asarray(samples, dtype=np.float64)
    x = sgn * np.asarray(points, dtype=np.float64)
    R, B = S.shape
    finite = np.isfinite(S)
    S = np.where(finite, S, np.nan)
    with np.errstate(invalid="ignore"):
        Z = S - np.nanmean(S, axis=1, keepdims=True) if B else S
    sd = _diff_sd(S, finite)
    with np.errstate(divide="ignore"):
        inv = np.where(sd > 0, 1.0 / sd, 0.0)
    np.fill_diagonal(inv, 0.0)
    return np.ascontiguousarray(Z.T), _tstats(x, sd), inv


def _tstats(x, sd):
    """t[j, k] = (x_j - x_k) / s_jk; +-inf where s is 0 and the points differ."""
    dx = x[:, None] - x[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, dx / sd, np.sign(dx) * np.inf)
    t = np.where(np.isnan(t), 0.0, t)
    np.fill_diagonal(t, 0.0)
    return t


def _diff_sd(S, finite):
    """s[j, k]: the standard deviation (ddof 1) of the paired differences over the resamples where
    both are defined; from one Gram product where every resample is, a pair whose difference is
    small beside the rows' spread (where that cancellation loses digits) and every pair of a row
    undefined somewhere directly."""
    R, B = S.shape
    sd = np.zeros((R, R))
    good = np.flatnonzero(finite.all(axis=1))
    if good.size and B >= 2:
        C = S[good] - S[good].mean(axis=1, keepdims=True)
        G = C @ C.T
        sq = np.diag(G).copy()
        ss = np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0)
        part = np.sqrt(ss / (B - 1))
        shaky = ss < 1e-6 * (sq[:, None] + sq[None, :])
        np.fill_diagonal(shaky, False)
        for a, b in zip(*np.nonzero(np.triu(shaky, 1)), strict=True):
            part[a, b] = part[b, a] = _sd(S[good[a]] - S[good[b]])
        sd[np.ix_(good, good)] = part
    for j in np.flatnonzero(~finite.all(axis=1)):
        for k in range(R):
            if k != j:
                sd[j, k] = sd[k, j] = _sd(S[j] - S[k])
    np.fill_diagonal(sd, 0.0)
    return sd


def _sd(d):
    d = d[np.isfinite(d)]
    return float(np.std(d, ddof=1)) if d.size >= 2 else 0.0


def _quantile(m, level):
    """The level quantile of each column (csranks': R's default, numpy's linear); a resample on
    which no root is defined counts as the smallest."""
    m = np.where(np.isfinite(m), m, -1e300)
    return np.quantile(m, level, axis=0)


MAX_T_ROWS = 500
"""Up to this many rows the critical values are the max-t's (a pass over every pair on each
resample per step: about 1 s of CPU at 500 rows, B = 1,000); beyond, Holm's (the same stepwise
tests with the normal quantile at alpha over the hypotheses left: conservative beside max-t, no
pass over the resamples)."""


def rank_sets(
    samples: np.ndarray,
    points: np.ndarray,
    greater_is_better: bool,
    alpha: float = 0.05,
    *,
    simultaneous: bool = True,
    max_t_rows: int | None = None,
) -> dict:
    """Marginal (and, by default, simultaneous) 1 - alpha confidence sets for the ranks of R rows
    from their R x B paired resamples and R point values (finite): {"marginal": [[low, high], ...],
    "simultaneous": [[low, high], ...], "method": "max-t" or "holm"} in the rows' order, 1 the
    best; Holm's beyond `max_t_rows` rows (MAX_T_ROWS)."""
    samples = np.asarray(samples, dtype=np.float64)
    R = samples.shape[0]
    big = R > (MAX_T_ROWS if max_t_rows is None else max_t_rows)
    out: dict = {"marginal": [[1, R]] * R, "method": "holm" if big else "max-t"}
    if simultaneous:
        out["simultaneous"] = [[1, R]] * R
    if R < 2 or samples.shape[1] < 2:
        return out
    if big:
        return _holm_sets(samples, points, greater_is_better, alpha, out, simultaneous)
    zt, t, inv = _prepare(samples, points, greater_is_better)
    level = 1.0 - alpha
    B = zt.shape[0]
    off = ~np.eye(R, dtype=bool)
    Mu, Md = np.empty((B, R)), np.empty((B, R))
    Au, Ad = np.empty((B, R), dtype=np.int64), np.empty((B, R), dtype=np.int64)
    _first_pass(zt, inv, Mu, Au, Md, Ad)

    if simultaneous:
        # one family of every ordered pair: (j, k) in it while fam[j, k]; the largest root on a
        # resample is the largest over the rows of their pairs (j, k) (a pair (k, j) is row k's)
        fam = off.copy()
        SMu, SAu = Mu.copy(), Au.copy()
        while True:
            c = float(_quantile(SMu.max(axis=1), level))
            rej = fam & (t > c)
            if not rej.any():
                break
            fam &= ~rej
            for j in np.flatnonzero(rej.any(axis=1)):
                _refresh(zt, inv, j, fam[j], 1.0, rej[j], SMu, SAu)
        shown = off & ~fam  # shown[j, k]: j better than k
        out["simultaneous"] = [
            [int(1 + shown[:, j].sum()), int(R - shown[j].sum())] for j in range(R)
        ]

    # marginal: row j's own family, (j, k) and (k, j) for every k, stepwise; a step recomputes
    # the largest root only on the resamples where the row that left was the largest
    up, dn = off.copy(), off.copy()  # up[j, k]: (j, k) in row j's family; dn[j, k]: (k, j)
    todo = np.arange(R)
    while todo.size:
        c = _quantile(np.maximum(Mu[:, todo], Md[:, todo]), level)
        nxt = []
        for n, j in enumerate(todo):
            ru = up[j] & (t[j] > c[n])
            rd = dn[j] & (-t[j] > c[n])
            if ru.any():
                up[j] &= ~ru
                _refresh(zt, inv, j, up[j], 1.0, ru, Mu, Au)
            if rd.any():
                dn[j] &= ~rd
                _refresh(zt, inv, j, dn[j], -1.0, rd, Md, Ad)
            if (ru.any() or rd.any()) and (up[j].any() or dn[j].any()):
                nxt.append(j)
        todo = np.array(nxt, dtype=np.int64)
    above = (off & ~dn).sum(axis=1)  # rows shown better than j
    below = (off & ~up).sum(axis=1)  # rows shown worse than j
    out["marginal"] = [[int(1 + a), int(R - b)] for a, b in zip(above, below, strict=True)]
    return out


def _t_rows(S, x, C, sq, lo, hi):
    """t[lo:hi, :] of `_tstats(x, _diff_sd(S, ...))` for resamples all finite, from the block's
    Gram product (the same figures to the rounding of the product)."""
    B = S.shape[1]
    G = C[lo:hi] @ C.T
    both = sq[lo:hi, None] + sq[None, :]
    ss = np.maximum(both - 2.0 * G, 0.0)
    del G
    sd = np.sqrt(ss / (B - 1))
    shaky = ss < 1e-6 * both
    rows = np.arange(hi - lo)
    shaky[rows, lo + rows] = False
    for a, k in zip(*np.nonzero(shaky), strict=True):
        sd[a, k] = _sd(S[lo + a] - S[k])
    sd[rows, lo + rows] = 0.0
    dx = x[lo:hi, None] - x[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, dx / sd, np.sign(dx) * np.inf)
    t = np.where(np.isnan(t), 0.0, t)
    t[rows, lo + rows] = 0.0
    return t


PAIR_BUDGET = 1 << 21
"""Up to this many pairs (R(R-1)/2) the simultaneous family's positive statistics are held (12
bytes a pair, and a sorted copy); beyond, they are recomputed in passes (`_streamed_cut`)."""


def _streamed_cut(S, x, C, sq, alpha, block, budget):
    """Holm's step-down over every ordered pair's statistic (the simultaneous family), holding
    none of them: the statistics are recomputed a block of rows at a time on each pass and
    `scorer.streamsel` finds the first step that fails (the largest statistics first, against
    the normal quantile at alpha over the hypotheses left). Returns the smallest statistic
    rejected (inf: none), `_holm_sets_by_blocks`' `cut`, bit for bit."""
    R = S.shape[0]
    m = R * (R - 1)

    def stream():
        for a in range(0, R, block):
            hi = min(R, a + block)
            t = _t_rows(S, x, C, sq, a, hi)
            t[np.arange(hi - a), a + np.arange(hi - a)] = 0.0
            yield -t[t > 0]  # ascending: the largest statistic first

    def c(i):
        return float(special().ndtri(1.0 - alpha / np.int64(m - i)))

    state = {}

    def want(segs):
        prev = None
        for s in segs:
            if s.values is not None:
                i = s.F + np.arange(s.n)
                ok = -s.values > special().ndtri(1.0 - alpha / (m - i))
                if not ok.all():
                    k = int(np.argmin(ok))
                    state["cut"] = float(-s.values[k - 1]) if k else prev
                    return []
            elif -s.vmax > c(s.F):
                pass  # every step in it rejects
            elif s.vmin == s.vmax:
                state["cut"] = prev  # its first step fails
                return []
            else:
                return [s]
            prev = -s.vmax
        state["cut"] = prev
        return []

    streamsel.settle(stream, want, budget)
    return np.inf if state["cut"] is None else state["cut"]


def _holm_cut(v, c, c_hi, c_lo):
    """Holm's step-down over one family's statistics `v` (any order) against its critical values
    `c` (largest first, for the largest statistic first): the smallest statistic rejected (inf:
    none). Only the statistics between the lowest and the highest critical value are sorted: one
    above every critical value is rejected whatever its place (those before it are larger), one at
    or below the lowest never is, so the first step that fails is among the middle ones."""
    sure = v > c_hi
    n_sure = int(np.count_nonzero(sure))
    mid = v[(v > c_lo) & ~sure]
    if mid.size:
        mid = -np.sort(-mid)
        ok = mid > c[n_sure : n_sure + mid.size]
        n = mid.size if ok.all() else int(np.argmin(ok))
        if n:
            return float(mid[n - 1])
    return float(v[sure].min()) if n_sure else np.inf


def _holm_sets_by_blocks(S, x, alpha, out, simultaneous, crit, block=128, budget=None):
    """`_holm_sets` a block of rows at a time (every resample finite): each row's family from its
    block's statistics; the simultaneous family from the positive statistics Holm may reject (above
    the lowest critical value) kept with their pairs, never an R x R array, or beyond PAIR_BUDGET
    pairs none of them (`_streamed_cut`, then a pass counting each row's rejections). Each family
    sorts only its statistics between its lowest and highest critical values (`_holm_cut`): the
    rest are rejected, or not, whatever their order."""
    R, B = S.shape
    streamed = R * (R - 1) // 2 > (PAIR_BUDGET if budget is None else budget)
    C = S - S.mean(axis=1, keepdims=True)
    sq = np.einsum("ij,ij->i", C, C)
    c = crit(2 * (R - 1))
    c_hi, c_lo = float(c.max()), float(c.min())
    above, below = np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64)
    # the simultaneous family (every ordered pair): its critical values' ends; the statistics
    # above the highest are rejected whatever their order (counted here, not kept)
    m_sim = R * (R - 1)
    s_hi = float(special().ndtri(1.0 - alpha / np.int64(m_sim)))
    s_lo = float(special().ndtri(1.0 - alpha))
    sure_above, sure_below = np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64)
    n_sure, sure_min = 0, np.inf
    pos_t, pos_j, pos_k = [], [], []
    for a in range(0, R, block):
        hi = min(R, a + block)
        t = _t_rows(S, x, C, sq, a, hi)
        rows = np.arange(hi - a)
        t[rows, a + rows] = -np.inf  # a row is not in its own family (either way)
        nt = -t
        nt[rows, a + rows] = -np.inf
        for r in range(hi - a):
            cut = _holm_cut(np.concatenate([t[r], nt[r]]), c, c_hi, c_lo)
            below[a + r] = np.count_nonzero(t[r] >= cut)
            above[a + r] = np.count_nonzero(nt[r] >= cut)
        del nt
        if simultaneous and not streamed:
            t[rows, a + rows] = 0.0
            sure = t > s_hi
            if sure.any():
                n_sure += int(np.count_nonzero(sure))
                sure_min = min(sure_min, float(t[sure].min()))
                sure_below[a:hi] += sure.sum(axis=1)
                sure_above += sure.sum(axis=0)
            j, k = np.nonzero((t > s_lo) & ~sure)
            pos_t.append(t[j, k])
            pos_j.append((a + j).astype(np.int32))
            pos_k.append(k.astype(np.int32))
    out["marginal"] = [[int(1 + p), int(R - q)] for p, q in zip(above, below, strict=True)]
    if simultaneous and streamed:
        cut = _streamed_cut(S, x, C, sq, alpha, block, streamsel_budget())
        shown_above, shown_below = np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64)
        for a in range(0, R, block):
            hi = min(R, a + block)
            t = _t_rows(S, x, C, sq, a, hi)
            t[np.arange(hi - a), a + np.arange(hi - a)] = 0.0
            keep = (t > 0) & (t >= cut)  # (j, k): j shown better than k
            shown_below[a:hi] = keep.sum(axis=1)
            shown_above += keep.sum(axis=0)
        out["simultaneous"] = [[int(1 + shown_above[j]), int(R - shown_below[j])] for j in range(R)]
    elif simultaneous:
        vals = np.concatenate(pos_t)
        del pos_t
        js, ks = np.concatenate(pos_j), np.concatenate(pos_k)
        del pos_j, pos_k
        # the middle statistics, largest first, tested against Holm's critical values (of the
        # steps after the sure ones) a chunk at a time; the first that fails ends the rejections
        srt = np.sort(vals)[::-1]
        n, step = srt.size, 1 << 16
        for lo in range(0, srt.size, step):
            i = n_sure + np.arange(lo, min(srt.size, lo + step))
            ok = srt[i - n_sure] > special().ndtri(1.0 - alpha / (m_sim - i))
            if not ok.all():
                n = lo + int(np.argmin(ok))
                break
        cut = srt[n - 1] if n else sure_min
        del srt
        keep = vals >= cut  # (j, k): j shown better than k
        shown_above = sure_above + np.bincount(ks[keep], minlength=R)  # rows shown better than j
        shown_below = sure_below + np.bincount(js[keep], minlength=R)  # rows j is shown better than
        out["simultaneous"] = [[int(1 + shown_above[j]), int(R - shown_below[j])] for j in range(R)]
    return out


def _holm_sets(samples, points, greater_is_better, alpha, out, simultaneous):
    """The stepwise tests with Holm's critical values: with m hypotheses of the family left, the
    1 - alpha/m normal quantile (Bonferroni's bound on the max-t's)."""
    sgn = 1.0 if greater_is_better else -1.0

    def crit(m):
        return special().ndtri(1.0 - alpha / (m - np.arange(m)))

    S = sgn * np.asarray(samples, dtype=np.float64)
    x = sgn * np.asarray(points, dtype=np.float64)
    if S.shape[1] >= 2 and np.isfinite(S).all():
        return _holm_sets_by_blocks(S, x, alpha, out, simultaneous, crit)
    t = _tstats(x, _diff_sd_of(samples))
    R = t.shape[0]
    off = ~np.eye(R, dtype=bool)

    # each row's family: its 2(R - 1) statistics t[j, k] (is j better than k?) and -t[j, k];
    # Holm's critical values fall as the family shrinks, so tied statistics are rejected together
    c = crit(2 * (R - 1))
    above, below = np.zeros(R, dtype=np.int64), np.zeros(R, dtype=np.int64)
    for a in range(0, R, 256):  # in blocks of rows: a few MB at a time
        ob = off[a : a + 256]
        tb = np.where(ob, t[a : a + 256], -np.inf)
        nb = np.where(ob, -tb, -np.inf)
        v = np.concatenate([tb, nb], axis=1)
        v = -np.sort(-v, axis=1)[:, : 2 * (R - 1)]
        ok = v > c
        n = np.where(ok.all(axis=1), ok.shape[1], np.argmin(ok, axis=1))
        cut = np.where(n > 0, v[np.arange(v.shape[0]), np.maximum(n - 1, 0)], np.inf)[:, None]
        below[a : a + 256] = (tb >= cut).sum(axis=1)
        above[a : a + 256] = (nb >= cut).sum(axis=1)
    out["marginal"] = [[int(1 + x), int(R - y)] for x, y in zip(above, below, strict=True)]
    if simultaneous:
        v = -np.sort(-t[off])
        ok = v > crit(v.size)
        n = v.size if ok.all() else int(np.argmin(ok))
        S = off & (t >= (v[n - 1] if n else np.inf))  # S[j, k]: j shown better than k
        out["simultaneous"] = [[int(1 + S[:, j].sum()), int(R - S[j].sum())] for j in range(R)]
    return out


def streamsel_budget() -> int:
    """The statistics a pass may hold at once (`scorer.streamsel`'s read-out)."""
    return 1 << 20


def top_set(simultaneous: list, tau: int) -> list[int]:
    """The rows that may be among the tau best (csranks' `cstaubest`): those whose simultaneous
    set starts at tau or better. Holds every row truly among the tau best with the simultaneous
    sets' coverage."""
    return [j for j, (low, _) in enumerate(simultaneous) if low <= tau]


# ------------------------------------------------------------------------- naive reference (tests)


def naive_rank_sets(
    samples: np.ndarray, points: np.ndarray, greater_is_better: bool, alpha: float = 0.05
) -> dict:
    """csranks' `csranks_simul`/`csdiffmeans` (stepdown, two-sided) line by line, on the explicit
    list of the family's ordered pairs, with the resamples' centred values for its normal draws
    and every pair's standard deviation computed from its own differences."""
    sgn = 1.0 if greater_is_better else -1.0
    S = sgn * np.asarray(samples, dtype=np.float64)
    x = sgn * np.asarray(points, dtype=np.float64)
    R, B = S.shape
    S = np.where(np.isfinite(S), S, np.nan)
    Z = S - np.nanmean(S, axis=1, keepdims=True)

    sds: dict = {}

    def sd(j, k):
        if (j, k) not in sds:
            d = S[j] - S[k]
            d = d[np.isfinite(d)]
            sds[j, k] = float(np.std(d, ddof=1)) if d.size >= 2 else 0.0
        return sds[j, k]

    def tstat(j, k):
        s = sd(j, k)
        if s > 0:
            return (x[j] - x[k]) / s
        return np.inf if x[j] > x[k] else -np.inf if x[j] < x[k] else 0.0

    def roots(j, k):
        s = sd(j, k)
        return (Z[j] - Z[k]) / s if s > 0 else np.zeros(B)

    def sets(family):
        rejected: set = set()
        current = set(family)
        while current:
            each = np.array([roots(j, k) for j, k in sorted(current)])
            maxima = [max((v for v in col if np.isfinite(v)), default=-1e300) for col in each.T]
            c = float(np.quantile(maxima, 1 - alpha))
            new = {(j, k) for j, k in current if tstat(j, k) > c}
            if not new:
                break
            rejected |= new
            current -= new
        return rejected

    pairs = [(j, k) for j in range(R) for k in range(R) if j != k]
    marginal = []
    for j in range(R):
        rej = sets([p for p in pairs if j in p])
        marginal.append(
            [1 + sum((k, j) in rej for k in range(R)), R - sum((j, k) in rej for k in range(R))]
        )
    rej = sets(pairs)
    simultaneous = [
        [1 + sum((k, j) in rej for k in range(R)), R - sum((j, k) in rej for k in range(R))]
        for j in range(R)
    ]
    return {"marginal": marginal, "simultaneous": simultaneous}


__all__ = ["naive_rank_sets", "rank_sets", "top_set"]
