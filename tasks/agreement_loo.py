"""Model comparison by PSIS-LOO (Vehtari, Gelman and Gabry 2017; Vehtari et al. 2024): the expected
log pointwise predictive density of leave-one-out cross-validation, estimated from one posterior
by Pareto-smoothed importance sampling, with its standard error, the effective number of
parameters and each observation's Pareto k.

Written here rather than taken from ArviZ (a large dependency: xarray, matplotlib, h5py) for the
few functions a fit needs; tests/test_agreement_loo.py checks it equals `arviz.loo` on the same
log-likelihoods (with ArviZ's `reff` given as 1, the value used here: the draws of NUTS are close
to independent for these models, docs/agreement.md). The procedure follows ArviZ's `psislw`
(its generalized Pareto fit after Zhang and Stephens 2009, with the same weakly informative prior
on k), so that the two agree to rounding.

The observations of the agreement model share their log-likelihood within a cell and outcome:
`loo` takes each distinct column once with its count, which equals the expanded computation.
"""

from __future__ import annotations

import numpy as np


def logsumexp(x: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """log(sum(exp(x))) along `axis`, computed from the largest value (numpy only: the module
    loads with the agreement model, without scipy)."""
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out.item() if axis is None else np.squeeze(out, axis=axis)


def _gpdfit(ary: np.ndarray) -> tuple[float, float]:
    """Generalized Pareto (k, sigma) of sorted exceedances (Zhang and Stephens 2009), k shrunk
    towards 0.5 by a weak prior, as ArviZ and loo estimate it."""
    prior_bs, prior_k = 3, 10
    n = len(ary)
    m_est = 30 + int(n**0.5)
    b_ary = 1 - np.sqrt(m_est / (np.arange(1, m_est + 1, dtype=float) - 0.5))
    b_ary /= prior_bs * ary[int(n / 4 + 0.5) - 1]
    b_ary += 1 / ary[-1]
    k_ary = np.log1p(-b_ary[:, None] * ary).mean(axis=1)
    len_scale = n * (np.log(-(b_ary / k_ary)) - k_ary - 1)
    weights = 1 / np.exp(len_scale - len_scale[:, None]).sum(axis=1)
    real = weights >= 10 * np.finfo(float).eps
    if not np.all(real):
        weights, b_ary = weights[real], b_ary[real]
    weights /= weights.sum()
    b_post = np.sum(b_ary * weights)
    k_post = np.log1p(-b_post * ary).mean()
    sigma = -k_post / b_post
    k_post = (n * k_post + prior_k * 0.5) / (n + prior_k)
    return float(k_post), float(sigma)


def _gpinv(probs: np.ndarray, kappa: float, sigma: float) -> np.ndarray:
    """The generalized Pareto's quantiles at `probs` (all in (0, 1))."""
    if sigma <= 0:
        return np.full_like(probs, np.nan)
    if abs(kappa) < np.finfo(float).eps:
        x = -np.log1p(-probs)
    else:
        x = np.expm1(-kappa * np.log1p(-probs)) / kappa
    return x * sigma


def psis(log_ratios: np.ndarray, reff: float = 1.0) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log weights (normalised) of one observation's draws, and the Pareto k."""
    x = np.array(log_ratios, dtype=float)
    S = x.size
    cutoff_ind = -int(np.ceil(min(0.2 * S, 3 * np.sqrt(S / reff)))) - 1
    cutoffmin = np.log(np.finfo(float).tiny)
    x -= x.max()
    order = np.argsort(x)
    xcutoff = max(x[order[cutoff_ind]], cutoffmin)
    expxcutoff = np.exp(xcutoff)
    (tail,) = np.where(x > xcutoff)
    k = np.inf
    if tail.size > 4:
        tail_order = np.argsort(x[tail])
        exceed = np.exp(x[tail]) - expxcutoff
        k, sigma = _gpdfit(exceed[tail_order])
        if np.isfinite(k):
            probs = np.arange(0.5, tail.size) / tail.size
            x[tail[tail_order]] = np.log(_gpinv(probs, k, sigma) + expxcutoff)
            x[x > 0] = 0
    x -= logsumexp(x)
    return x, float(k)


def pointwise(log_lik: np.ndarray, reff: float = 1.0) -> dict[str, np.ndarray]:
    """Each column's (observation's) elpd_loo, lppd and Pareto k from a draws x columns matrix."""
    log_lik = np.asarray(log_lik, dtype=float)
    S, n = log_lik.shape
    elpd, ks = np.empty(n), np.empty(n)
    for j in range(n):
        lw, ks[j] = psis(-log_lik[:, j], reff)
        elpd[j] = logsumexp(lw + log_lik[:, j])
    lppd = logsumexp(log_lik, axis=0) - np.log(S)
    return {"elpd": elpd, "lppd": lppd, "k": ks}


def summarise(points: dict[str, np.ndarray], counts: np.ndarray | None = None, S: int = 0) -> dict:
    """ELPD-LOO, its standard error (sqrt(n var), as loo and ArviZ take it), p_loo, and the
    Pareto k diagnostics, each column counted `counts` times (default once)."""
    e, lp, k = points["elpd"], points["lppd"], points["k"]
    c = np.ones(e.size) if counts is None else np.asarray(counts, dtype=float)
    n = c.sum()
    elpd = float((c * e).sum())
    mean = elpd / n
    var = float((c * (e - mean) ** 2).sum() / n)
    good = min(1 - 1 / np.log10(S), 0.7) if S > 1 else 0.7
    return {
        "elpd_loo": elpd,
        "se": float(np.sqrt(n * var)),
        "p_loo": float((c * lp).sum()) - elpd,
        "n": int(n),
        "max_pareto_k": float(k.max()) if k.size else None,
        "pareto_k_above": float(good),
        "n_high_k": int(c[k > good].sum()),
    }


def loo(log_lik: np.ndarray, counts: np.ndarray | None = None, reff: float = 1.0) -> dict:
    """PSIS-LOO of a draws x columns log-likelihood matrix (see the module)."""
    pts = pointwise(log_lik, reff)
    out = summarise(pts, counts, np.asarray(log_lik).shape[0])
    out["pointwise"] = pts
    return out


def compare(models: dict[str, np.ndarray]) -> list[dict]:
    """Models ranked by ELPD-LOO, best first, each given by its observations' pointwise elpd_loo
    (the same observations, in the same order, for every model), with the difference from the
    best and its standard error (sqrt(n var) of the pointwise differences), as loo's
    `loo_compare` and ArviZ's `compare` report them."""
    totals = {m: float(np.sum(e)) for m, e in models.items()}
    order = sorted(totals, key=totals.get, reverse=True)
    best = np.asarray(models[order[0]], dtype=float)
    out = []
    for m in order:
        e = np.asarray(models[m], dtype=float)
        if e.shape != best.shape:
            raise ValueError("models compared by LOO must share their observations")
        d = e - best
        out.append(
            {
                "model": m,
                "elpd_loo": totals[m],
                "elpd_diff": float(d.sum()),
                "se_diff": float(np.sqrt(d.size * np.var(d))),
            }
        )
    return out
