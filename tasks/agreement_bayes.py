"""Manjavacas et al. (2021)'s Bayesian multilevel model of agreement, fitted by NUTS (numpyro).

Each pair of judgments of one item by two annotators (x before y in the table's order) is one
observation whose outcome is the pair of labels (k labels: k^2 outcomes, the first, "both gave
the first label", the pivot). A multinomial logit gives the log-odds of the other k^2 - 1
outcomes against the pivot (eq. 3-6): fixed intercepts, fixed slopes for the covariates
(standardised lexical overlap; a known-passage flag where the data has one), and random
intercepts for the annotator pair and for each other grouping factor (the source book).
A centred factor named by `around` is sampled by hierarchical centring (Gelfand, Sahu and Carlin
1995): its levels' own intercepts theta_q ~ MVN(alpha, Sigma), nu_q = theta_q - alpha, the same
model with the fixed intercept no longer on a ridge with the levels' mean. Beside another centred
factor (TRoTR's books), its levels are sampled relative to that factor's mean and that factor's
levels rotated so that their mean is a coordinate of its own (`_around`, `_centred`: linear
changes of variables with unit Jacobian), and its levels with few observations (`sparse_below`)
non-centred: the same model, whose ridges a diagonal mass matrix then follows.

The random intercepts of one factor are, by default, the paper's (eq. 5 and note 6): jointly
multivariate normal across the k^2 - 1 outcomes, the covariance decomposed into scales (half-normal
prior) and a correlation matrix (LKJ(2) prior on its Cholesky factor). With `correlated=False`
each outcome has its own independent normal (brms' `(1 | pair) + (1 | book)`). The random
intercepts are non-centred unless the caller names the factor in `centred` (TRoTR's fit names the
annotator pair: each pair judged hundreds of items and the pairs differ, and there the
non-centred form made divergent transitions; on a generated table whose pairs do not differ, the
centred form did).

The likelihood is aggregated over cells: observations with the same annotator pair, the same level
of every grouping factor and the same bin of every covariate share one linear predictor, so a cell
contributes its outcome counts times their log-probabilities (the multinomial's kernel). A
covariate is cut into `bins` quantile bins over the pairs of judgments (one bin per value where it
has no more values than that, which is exact) and enters as a cell-level covariate: the mean of
its standardised values over the cell's observations. `bins=None` keeps every observation its own
cell (the row-level model), against which the binning is checked (docs/agreement.md).

Agreement follows the paper's eq. 7-8: A_o the probability of the diagonal outcomes averaged
uniformly over the annotator pairs, A_e the data's own (eq. 8, a constant: tasks/agreement_
measures.py's `expected_kappa`), kappa = (A_o - A_e) / (1 - A_e); beside it the pair-weighted
generalisation (each pair weighted by its share of the item pairs, A_e likewise). "For an average
book" sets the book intercepts to zero; "marginalised over books" draws a new book's intercepts
from the fitted (multivariate) normal on every posterior draw (the paper's Figure 2 right).

A fit is reported only when it converged: every parameter's rank-normalised split R-hat (bulk and
tail, Vehtari et al. 2021) below 1.01 and no divergent transition; otherwise `NotConverged` says
which. Its bulk effective sample sizes are reported beside it.

numpyro and jax are an optional extra (`pip install .[agreement]`): they are imported inside the
functions that need them, so the rest of the project runs without them.
"""

from __future__ import annotations

import functools
import gc
import itertools
import time
from types import SimpleNamespace

import numpy as np

from tasks.agreement_loo import compare, pointwise, summarise
from tasks.agreement_measures import Table, weighted

RHAT_MAX = 1.01
COMPILE_CACHE_BYTES = 256 * 2**20  # keep_compiled's directory holds at most this much
ESS_MIN = 400  # the bulk ESS every parameter of a fit with the defaults is expected to reach
BINS = 10  # quantile bins of a continuous covariate
LKJ_ETA = 2.0
# factors whose intercepts are sampled centred by default: none (a level may hold few items, or
# the levels may differ little: the non-centred form has no funnel there); TRoTR's fit names the
# annotator pair (every pair judged hundreds of items and the pairs differ: there the
# non-centred form made divergent transitions)
CENTRED: tuple[str, ...] = ()
DEFAULTS = {"chains": 4, "warmup": 1000, "samples": 1000, "target_accept": 0.95}
# the target acceptance a fit with divergent transitions (and R-hat below the bound) is run again
# with, once, before it is refused; None never retries
RETRY_ACCEPT = 0.99
# the warm-up draws of that second attempt: it starts where the first one's chains ended, with the
# mass matrix the first adapted kept fixed, and adapts only its step size to the higher target
RETRY_WARMUP = 300


class NotConverged(RuntimeError):
    """The sampler did not converge: no figure of this fit may be reported. `diagnostics`: the
    refused fit's (the last attempt's, with `retried` naming the earlier one)."""

    def __init__(self, message: str, diagnostics: dict | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or {}


def pair_outcomes(
    table: Table,
    groups: dict[str, np.ndarray] | None = None,
    covariates: dict[str, np.ndarray] | None = None,
) -> dict:
    """One row per pair of judgments: outcome index (label of x * k + label of y), annotator pair
    index, each grouping factor's level index and the covariates of its item (standardised)."""
    n, a, k = table.onehot.shape
    code = table.onehot.argmax(axis=2)
    judged = table.onehot.sum(axis=2) > 0
    groups = groups or {}
    covariates = covariates or {}
    level_of = {g: np.unique(np.asarray(v), return_inverse=True) for g, v in groups.items()}
    cov = {}
    for name, v in covariates.items():
        v = np.asarray(v, dtype=float)
        sd = v.std()
        cov[name] = ((v - v.mean()) / (sd if sd > 0 else 1.0), float(v.mean()), float(sd))
    rows_item, rows_pair, outcome = [], [], []
    for j, (x, y) in enumerate(table.pairs):
        both = np.nonzero(judged[:, x] & judged[:, y])[0]
        rows_item.append(both)
        rows_pair.append(np.full(both.size, j))
        outcome.append(code[both, x] * k + code[both, y])
    item = np.concatenate(rows_item)
    return {
        "outcome": np.concatenate(outcome),
        "pair": np.concatenate(rows_pair),
        "item": item,
        "pairs": [f"{table.annotators[x]} | {table.annotators[y]}" for x, y in table.pairs],
        "groups": {g: (inv[item], [str(u) for u in uniq]) for g, (uniq, inv) in level_of.items()},
        "covariates": {name: (z[item], mean, sd) for name, (z, mean, sd) in cov.items()},
        "k": k,
    }


def covariate_bins(values: np.ndarray, bins: int | None) -> np.ndarray:
    """Each value's bin: quantile bins of the values (ties kept in one bin), or one bin per
    distinct value where there are no more than `bins` of them; None: each its own bin."""
    v = np.asarray(values, dtype=float)
    if bins is None:
        return np.arange(v.size)
    uniq = np.unique(v)
    if uniq.size <= bins:
        return np.searchsorted(uniq, v)
    edges = np.unique(np.quantile(v, np.linspace(0, 1, bins + 1))[1:-1])
    return np.searchsorted(edges, v, side="right")


def cells(data: dict, bins: int | None = BINS) -> dict:
    """Aggregate pair_outcomes' rows into cells (annotator pair x every factor's level x every
    covariate's bin): outcome counts (cells x k^2), the cell's pair and levels, and the mean of
    each standardised covariate over the cell's rows. `bins=None`: every row its own cell."""
    names = list(data["covariates"])
    n = data["outcome"].size
    K = data["k"] ** 2
    if bins is None:
        cell = np.arange(n)
    else:
        keys = [data["pair"]] + [ix for ix, _ in data["groups"].values()]
        # the bins of an item's covariate, over the items (rows of one item share it)
        for c in names:
            keys.append(covariate_bins(data["covariates"][c][0], bins))
        _, cell = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
        cell = cell.ravel()
    C = int(cell.max()) + 1 if n else 0
    counts = np.zeros((C, K))
    np.add.at(counts, (cell, data["outcome"]), 1.0)
    size = np.bincount(cell, minlength=C).astype(float)
    first = np.full(C, -1)
    first[cell[::-1]] = np.arange(n)[::-1]  # any row of each cell gives its pair and levels
    X = np.zeros((C, len(names)))
    for j, c in enumerate(names):
        X[:, j] = np.bincount(cell, weights=data["covariates"][c][0], minlength=C) / size
    return {
        "cell": cell,  # each pair of judgments' cell
        "counts": counts,
        "pair": data["pair"][first],
        "groups": {g: ix[first] for g, (ix, _) in data["groups"].items()},
        "X": X,
        "cells": C,
    }


@functools.cache
def _deps() -> SimpleNamespace:
    """jax and numpyro (the optional [agreement] extra: seconds to import) and scipy's ranks,
    loaded by a fit's first step and never with the module: the one place they are imported."""
    # here, not at the top: the [agreement] extra is optional, and slow to import
    import jax
    import numpyro
    from numpyro import distributions, infer
    from scipy import stats

    return SimpleNamespace(
        jax=jax,
        jnp=jax.numpy,
        numpyro=numpyro,
        dist=distributions,
        MCMC=infer.MCMC,
        NUTS=infer.NUTS,
        norm=stats.norm,
        rankdata=stats.rankdata,
    )


def _helmert(n: int) -> np.ndarray:
    """The full Helmert matrix of order n (scipy.linalg.helmert(n, full=True)): orthonormal rows,
    the first constant (1/sqrt(n)), row i (1 <= i < n) 1/sqrt(i(i+1)) on its first i entries and
    -i/sqrt(i(i+1)) on entry i."""
    h = np.zeros((n, n))
    h[0] = 1.0 / np.sqrt(n)
    for i in range(1, n):
        h[i, :i] = 1.0 / np.sqrt(i * (i + 1))
        h[i, i] = -i / np.sqrt(i * (i + 1))
    return h


def _around(name: str, prior, n_levels: int, m: int, shift, alpha, sigma, L, sparse=()):
    """The intercepts theta (levels x m) of the factor centred around alpha, each level's drawn
    from `prior` (its distribution around alpha). With no other centred factor they are the
    sampled parameter. With one (`shift`: the sum of their levels' means, sampled before), the
    sampled parameter is phi = theta + shift, an improper flat site whose density is the prior's
    at theta = phi - shift: a linear change of variables with unit Jacobian, so the same model.
    Why: the data fix each cell's theta_pair + nu_book, so theta and the books' mean lie on a
    ridge (theta + c, nu - c); phi is what the data fix, and the books' mean moves alone, under
    its own prior, no longer dragging every level of the other factor with it (a diagonal mass
    matrix then mixes, where it needed a dense one: docs/agreement.md).

    The levels in `sparse` (few observations: their data fix them loosely) are non-centred
    instead, theta_q = alpha + sigma * (L z_q), z_q standard normal (L None: independent outcomes;
    Papaspiliopoulos, Roberts and Sköld 2007: centred where the data are informative, non-centred
    where they are not); again the same model."""
    dep = _deps()
    numpyro, dist, jnp = dep.numpyro, dep.dist, dep.jnp
    if not sparse and shift is None:
        return numpyro.sample(f"theta_{name}", prior.expand([n_levels]).to_event(1))
    full = [q for q in range(n_levels) if q not in sparse]
    if not full:  # every level non-centred
        theta = jnp.zeros((0, m))
    elif shift is None:
        theta = numpyro.sample(f"theta_{name}", prior.expand([len(full)]).to_event(1))
    else:
        phi = numpyro.sample(
            f"phi_{name}",
            dist.ImproperUniform(dist.constraints.real, (), event_shape=(len(full), m)),
        )
        theta = phi - shift
        numpyro.factor(f"theta_{name}_prior", prior.log_prob(theta).sum())
    if sparse:
        z = numpyro.sample(f"z_{name}", dist.Normal(0.0, 1.0).expand([len(sparse), m]).to_event(2))
        theta = (
            jnp.zeros((n_levels, m))
            .at[np.asarray(full, dtype=int)]
            .set(theta)
            .at[np.asarray(sparse, dtype=int)]
            .set(alpha + (z if L is None else z @ L.T) * sigma)
        )
    # (where the centred levels' theta is itself the sampled site, all levels' is theta_*_all)
    site = f"theta_{name}_all" if shift is None and full else f"theta_{name}"
    return numpyro.deterministic(site, theta)


def _around_alpha(name: str, n_levels: int, m: int, shift, sigma, L, sparse, a):
    """`_around`'s levels with the fixed intercept alpha itself non-centred about their mean:
    alpha = mean(theta_c) - (diag(sigma) L) a / sqrt(c) over the c centred levels, `a` the
    sampled parameter (an improper flat site), alpha's normal prior and the levels' MVN(alpha,
    Sigma) added as factors with the Jacobian |d alpha / d a| = det(diag(sigma) L) / c^(m/2)
    (its constant left out). The same model: a change of variables from alpha to a, the levels
    kept. Why: given the levels (which the data fix), alpha's spread is Sigma / c, so alpha and
    the pairs' scales made a funnel (alpha's scale proportional to sigma); a is a standard
    normal given the levels whatever sigma is. Returns (theta, alpha)."""
    dep = _deps()
    numpyro, dist, jnp = dep.numpyro, dep.dist, dep.jnp
    full = [q for q in range(n_levels) if q not in sparse]
    if not full:
        raise ValueError("alpha about the levels' mean needs a centred level")
    phi = numpyro.sample(
        f"phi_{name}", dist.ImproperUniform(dist.constraints.real, (), event_shape=(len(full), m))
    )
    theta_c = phi if shift is None else phi - shift
    scale = sigma[:, None] * L if L is not None else jnp.diag(sigma)
    alpha = numpyro.deterministic("alpha", theta_c.mean(axis=0) - scale @ a / np.sqrt(len(full)))
    numpyro.factor("alpha_prior", dist.Normal(0.0, 2.5).log_prob(alpha).sum())
    prior = dist.MultivariateNormal(alpha, scale_tril=scale)
    numpyro.factor(f"theta_{name}_prior", prior.log_prob(theta_c).sum())
    numpyro.factor("alpha_jacobian", jnp.sum(jnp.log(jnp.diagonal(scale))))
    theta = theta_c
    if sparse:
        z = numpyro.sample(f"z_{name}", dist.Normal(0.0, 1.0).expand([len(sparse), m]).to_event(2))
        theta = (
            jnp.zeros((n_levels, m))
            .at[np.asarray(full, dtype=int)]
            .set(theta_c)
            .at[np.asarray(sparse, dtype=int)]
            .set(alpha + z @ scale.T)
        )
    return numpyro.deterministic(f"theta_{name}", theta), alpha


def _centred(name: str, prior, n_levels: int, m: int, rotate: bool):
    """A centred factor's intercepts nu (levels x m), each level's drawn from `prior`. Rotated
    (`rotate`, beside a factor sampled relative to their mean: `_around`): the sampled parameter
    is v = Q^T nu, Q orthogonal with first column 1/sqrt(levels) (Helmert's), an improper flat
    site whose density is the prior's at nu = Q v: an orthogonal change of variables (Jacobian 1),
    the same model. v's first row is the levels' mean times sqrt(levels): the one direction the
    data leave to the prior (all levels moving together, the other factor against them) is then
    a coordinate of its own, which a diagonal mass matrix scales, and the other rows the contrasts
    between levels, which the data fix."""
    dep = _deps()
    numpyro, dist, jnp = dep.numpyro, dep.dist, dep.jnp
    if not rotate:
        return numpyro.sample(f"nu_{name}", prior.expand([n_levels]).to_event(1))
    q = jnp.asarray(_helmert(n_levels).T)  # orthonormal columns, the first constant
    v = numpyro.sample(
        f"v_{name}", dist.ImproperUniform(dist.constraints.real, (), event_shape=(n_levels, m))
    )
    nu = numpyro.deterministic(f"nu_{name}", q @ v)
    numpyro.factor(f"nu_{name}_prior", prior.log_prob(nu).sum())
    return nu


def _model(
    counts,
    pair,
    n_pairs,
    groups,
    X,
    K,
    centred=(),
    correlated=True,
    around=None,
    sparse=(),
    alpha_about=False,
):
    dep = _deps()
    jax, jnp, numpyro, dist = dep.jax, dep.jnp, dep.numpyro, dep.dist

    m = K - 1
    factors = {"pair": (pair, n_pairs), **groups}
    # `alpha_about`: alpha non-centred about the mean of the centred levels of the factor centred
    # around it (`_around_alpha`); else sampled itself, as where every level of that factor is
    # sparse (non-centred: no centred level to take the mean of; a small table's pairs)
    alpha_about = (
        bool(alpha_about)
        and around is not None
        and around in centred
        and len(sparse) < factors[around][1]
    )
    if alpha_about:
        a = numpyro.sample(
            "a_alpha", dist.ImproperUniform(dist.constraints.real, (), event_shape=(m,))
        )
        eta = jnp.zeros((counts.shape[0], m))  # alpha added once the levels give it
    else:
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 2.5).expand([m]).to_event(1))
        eta = jnp.broadcast_to(alpha, (counts.shape[0], m))
    if X.shape[1]:
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1], m]).to_event(2))
        eta = eta + X @ beta
    # the factor centred around alpha comes last: its levels are sampled relative to the other
    # centred factors' means (`_around`)
    order = sorted(factors, key=lambda name: name == around and name in centred)
    shift = None  # the sum of the other centred factors' level means, once sampled
    # the other centred factors' levels rotated so that their mean is one coordinate (`_centred`)
    relative = around in centred and any(g in centred for g in factors if g != around)
    for name in order:
        index, n_levels = factors[name]
        sigma = numpyro.sample(f"sigma_{name}", dist.HalfNormal(1.0).expand([m]).to_event(1))
        if correlated and m > 1:
            # eq. 5: nu_q ~ MVN(0, diag(sigma) R diag(sigma)), R = L L^T, L ~ LKJ(2) (note 6)
            L = numpyro.sample(f"L_{name}", dist.LKJCholesky(m, concentration=LKJ_ETA))
            if name in centred and name == around:
                # hierarchical centring (Gelfand, Sahu and Carlin 1995): the levels' own
                # intercepts drawn around the fixed intercept, theta_q ~ MVN(alpha, Sigma), and
                # nu_q = theta_q - alpha; the same model, but alpha is then the levels' mean and
                # no longer a ridge with them (few levels, each with much data)
                if alpha_about:
                    theta, alpha = _around_alpha(name, n_levels, m, shift, sigma, L, sparse, a)
                    eta = eta + alpha
                else:
                    prior = dist.MultivariateNormal(alpha, scale_tril=sigma[:, None] * L)
                    theta = _around(name, prior, n_levels, m, shift, alpha, sigma, L, sparse)
                nu = numpyro.deterministic(f"nu_{name}", theta - alpha)
            elif name in centred:
                prior = dist.MultivariateNormal(jnp.zeros(m), scale_tril=sigma[:, None] * L)
                nu = _centred(name, prior, n_levels, m, rotate=relative)
                shift = nu.mean(axis=0) if shift is None else shift + nu.mean(axis=0)
            else:
                z = numpyro.sample(
                    f"z_{name}", dist.Normal(0.0, 1.0).expand([n_levels, m]).to_event(2)
                )
                nu = numpyro.deterministic(f"nu_{name}", (z @ L.T) * sigma)
        elif name not in centred:
            # non-centred: no funnel where a level holds little data or the levels differ little
            z = numpyro.sample(f"z_{name}", dist.Normal(0.0, 1.0).expand([n_levels, m]).to_event(2))
            nu = numpyro.deterministic(f"nu_{name}", z * sigma)
        elif name == around:  # hierarchical centring, as above, each outcome on its own
            if alpha_about:
                theta, alpha = _around_alpha(name, n_levels, m, shift, sigma, None, sparse, a)
                eta = eta + alpha
            else:
                prior = dist.Normal(alpha, sigma).expand([m]).to_event(1)
                theta = _around(name, prior, n_levels, m, shift, alpha, sigma, None, sparse)
            nu = numpyro.deterministic(f"nu_{name}", theta - alpha)
        else:
            prior = dist.Normal(jnp.zeros(m), sigma).to_event(1)
            nu = _centred(name, prior, n_levels, m, rotate=relative)
            shift = nu.mean(axis=0) if shift is None else shift + nu.mean(axis=0)
        eta = eta + nu[index]
    logits = jnp.concatenate([jnp.zeros((counts.shape[0], 1)), eta], axis=1)
    # the multinomial's kernel: each cell's counts times its outcomes' log-probabilities
    numpyro.factor("y", jnp.sum(counts * jax.nn.log_softmax(logits, axis=1)))


def _softmax_diag(eta: np.ndarray, k: int) -> np.ndarray:
    """P(both annotators gave the same label) from the non-pivot log-odds (last axis k^2 - 1)."""
    logits = np.concatenate([np.zeros(eta.shape[:-1] + (1,)), eta], axis=-1)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    return p[..., [i * k + i for i in range(k)]].sum(axis=-1)


def _interval(draws: np.ndarray, mass: float) -> list[float]:
    return [float(np.quantile(draws, (1 - mass) / 2)), float(np.quantile(draws, (1 + mass) / 2))]


def _summary(draws: np.ndarray) -> dict:
    return {
        "median": float(np.median(draws)),
        "mean": float(np.mean(draws)),
        "sd": float(np.std(draws)),
        "50%": _interval(draws, 0.5),
        "89%": _interval(draws, 0.89),
        "95%": _interval(draws, 0.95),
    }


def _rank_normal(x: np.ndarray) -> np.ndarray:
    """Rank-normalise draws (chains x draws) pooled over chains (Vehtari et al. 2021)."""
    r = _deps().rankdata(x, method="average").reshape(x.shape)
    return _deps().norm.ppf((r - 0.375) / (x.size + 0.25))


def convergence(x: np.ndarray) -> tuple[float, float]:
    """(R-hat, bulk ESS) of one scalar's draws (chains x draws): the rank-normalised split R-hat,
    the larger of bulk and tail (folded), and the bulk ESS (Vehtari et al. 2021). NaN for a
    constant (a Cholesky factor's fixed entries)."""
    x = np.asarray(x, dtype=float)
    if np.ptp(x) == 0:
        return float("nan"), float("nan")
    c, n = x.shape
    half = n // 2
    split = np.concatenate([x[:, :half], x[:, n - half :]], axis=0)
    bulk = _rank_normal(split)
    fold = _rank_normal(np.abs(split - np.median(split)))
    rhat = max(_rhat(bulk), _rhat(fold))
    ess = _ess(bulk)
    return rhat, ess


def _ess(x: np.ndarray) -> float:
    """The effective sample size of (split, rank-normalised) chains x draws as ArviZ and Stan
    compute it: autocorrelations by FFT, Geyer's initial positive then monotone sequence, and the
    autocorrelation time bounded below by 1 / log10(draws). numpyro's estimate sums every lag and
    has no bound: a short or stuck fit's antithetic chains gave it an ESS of -430."""
    c, n = x.shape
    m = 1
    while m < 2 * n:  # a power of two at least 2n: the FFT's products do not wrap around
        m *= 2
    centred = x - x.mean(axis=1, keepdims=True)
    f = np.fft.rfft(centred, n=m, axis=1)
    acov = np.fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n
    mean_var = float(np.mean(acov[:, 0])) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if c > 1:
        var_plus += float(np.var(x.mean(axis=1), ddof=1))
    # the autocorrelation at every lag, over the chains (as plain floats: the loops below read
    # them one by one)
    r = (1.0 - (mean_var - acov.mean(axis=0)) / var_plus).tolist()
    rho = np.zeros(n)
    even, odd = 1.0, r[1]
    rho[0], rho[1] = even, odd
    t = 1
    while t < n - 3 and even + odd > 0.0:  # the initial positive sequence
        even, odd = r[t + 1], r[t + 2]
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:  # made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * float(np.sum(rho[: max_t + 1])) + float(np.sum(rho[max_t + 1 : max_t + 2]))
    tau = max(tau, 1.0 / np.log10(x.size))
    return float(x.size / tau) if np.all(np.isfinite(rho)) else float("nan")


def _rhat(x: np.ndarray) -> float:
    """Gelman-Rubin's potential scale reduction of (already split) chains x draws."""
    n = x.shape[1]
    w = float(np.mean(np.var(x, axis=1, ddof=1)))
    b = n * float(np.var(np.mean(x, axis=1), ddof=1))
    return float(np.sqrt(((n - 1) / n * w + b / n) / w))


def diagnose(by_chain: dict) -> dict[str, tuple[float, float, str]]:
    """Every parameter's worst R-hat and smallest bulk ESS over its entries."""
    out = {}
    for name, v in by_chain.items():
        v = np.asarray(v)
        flat = v.reshape(v.shape[0], v.shape[1], -1)
        worst_r, least_e = float("nan"), float("nan")
        for j in range(flat.shape[2]):
            r, e = convergence(flat[:, :, j])
            if np.isfinite(r) and not worst_r >= r:
                worst_r = r
            if np.isfinite(e) and not least_e <= e:
                least_e = e
        out[name] = (worst_r, least_e)
    return out


def _resume_from(mcmc) -> dict:
    """Where a second attempt starts: the first's chains' last positions (unconstrained, a chain
    each), the diagonal mass matrix its warm-up adapted (the chains' mean: one kernel runs every
    chain) and its step size (the chains' smallest), as numpyro's NUTS and MCMC.run take them."""
    jnp = _deps().jnp
    state = mcmc.last_state
    inverse = state.adapt_state.inverse_mass_matrix
    if isinstance(inverse, dict):
        mass = {sites: jnp.mean(m, axis=0) for sites, m in inverse.items()}
    else:
        mass = jnp.mean(inverse, axis=0)
    return {
        "positions": state.z,
        "inverse_mass_matrix": mass,
        "step_size": float(np.min(np.asarray(state.adapt_state.step_size))),
    }


def _resume_args(resume: dict, chains: int) -> dict:
    """`_resume_from`'s start as the program's arguments (`_resumed_nuts`): the positions (a
    chain each) and, repeated for every chain, the inverse mass matrix and the step size (as
    numpy arrays: the run spreads them over the chains' devices itself)."""
    jnp = _deps().jnp

    def each(x, dtype=None):
        x = np.asarray(x, dtype=dtype)
        return np.ascontiguousarray(np.broadcast_to(x, (chains,) + x.shape))

    mass = resume["inverse_mass_matrix"]
    return {
        "positions": resume["positions"],
        "inverse_mass_matrix": (
            {sites: each(m) for sites, m in mass.items()} if isinstance(mass, dict) else each(mass)
        ),
        # the precision numpyro gives a step size (float32 unless jax runs in 64 bits)
        "step_size": each(resume["step_size"], dtype=jnp.result_type(float)),
    }


@functools.cache
def _resumed_nuts():
    """numpyro's NUTS whose start (`_resume_args`: the positions, the inverse mass matrix and
    the step size) comes in as the compiled program's arguments. Given to NUTS itself, the mass
    matrix and the step size are constants of the program (jax bakes a closed-over array in),
    so every refit compiled a program of its own; as arguments, the refits of every seed of the
    same data run one program, which a kept compilation cache (`keep_compiled`) then holds once.
    The same sampler and the same draws: only where the values enter the program differs."""
    NUTS = _deps().NUTS

    class ResumedNUTS(NUTS):
        def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs={}):  # noqa: B006
            kept = self._inverse_mass_matrix, self._step_size
            # read by NUTS's init below (numpyro reads them from the kernel, not its arguments)
            self._inverse_mass_matrix = init_params["inverse_mass_matrix"]
            self._step_size = init_params["step_size"]
            try:
                return super().init(
                    rng_key, num_warmup, init_params["positions"], model_args, model_kwargs
                )
            finally:  # not left holding the program's traced values
                self._inverse_mass_matrix, self._step_size = kept

    return ResumedNUTS


def keep_compiled(directory: str) -> str:
    """Keep jax's compiled programs in `directory` (jax's persistent compilation cache, for this
    process), unless a directory is set already (JAX_COMPILATION_CACHE_DIR, or an earlier call):
    a fit whose program was compiled before, by this process or another sharing the directory
    (the same data, chains, warmup and draws: the data are constants of the program; the seed is
    an argument), skips the compilation, about half of a short fit's time (docs/benchmarks.md).
    A refit's program (`_resumed_nuts`) serves the refit of every seed likewise. The draws are
    the same either way: the same program runs. Returns the directory in use."""
    jax = _deps().jax
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(directory))
        if jax.config.jax_compilation_cache_max_size < 0:  # unbounded by default
            # the least recently used programs go first past this size (a program is about 1 MB)
            jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_BYTES)
    return jax.config.jax_compilation_cache_dir


def fit(
    table: Table,
    groups: dict[str, np.ndarray] | None = None,
    covariates: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    chains: int = DEFAULTS["chains"],
    warmup: int = DEFAULTS["warmup"],
    samples: int = DEFAULTS["samples"],
    curve: str | None = None,
    curve_grid: np.ndarray | None = None,
    centred: tuple[str, ...] = CENTRED,
    target_accept: float = DEFAULTS["target_accept"],
    correlated: bool = True,
    bins: int | None = BINS,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    compile_cache: str | None = None,
    loo_report: bool = True,
    keep_draws: bool = False,
    retry_accept: float | None = RETRY_ACCEPT,
    around: str | None = None,
    chain_method: str | None = None,
    sparse_below: int | None = None,
    resume: dict | None = None,
    alpha_about: bool = False,
) -> dict:
    """Fit the model by NUTS and return the posterior multi-kappa by eq. 7-8 for an average level
    of the first grouping factor (its intercepts at zero) and marginalised over it (a new level's
    intercepts drawn from the fitted normal on every posterior draw), the pair-weighted
    generalisation beside them, the counterfactual curve over the covariate `curve`, and the
    diagnostics; raises NotConverged when an R-hat is 1.01 or more or a transition diverged.

    `correlated`: the paper's jointly normal intercepts with an LKJ prior on their correlations
    (default), else independent per outcome; `bins`: quantile bins of each covariate in the
    aggregated likelihood (None: one cell per pair of judgments); `centred`: factors whose
    intercepts are sampled centred (default none: all non-centred); `around`: a centred factor
    whose levels' intercepts are drawn around the fixed intercept (hierarchical centring: the
    same model, `nu` = theta - alpha; TRoTR's annotator pair); `compile_cache`: a directory
    where jax keeps the compiled sampler (see `keep_compiled`); `retry_accept`: a fit whose only
    fault is divergent transitions is run again once with this target acceptance (the
    diagnostics' `retried` says so) before it is refused; `loo_report`: compute PSIS-LOO;
    `keep_draws`: keep the posterior draws and the pointwise LOO in the result (not for JSON);
    `sparse_below`: with `around`, that factor's levels with fewer observations than this are
    non-centred (`_around`); `chain_method`: numpyro's ("parallel" where there is a device per
    chain, else "sequential": one compilation a chain, and "vectorized" took more CPU on TRoTR);
    `resume`: the second attempt's start (`_resume_from`: the first's last positions, its adapted
    mass matrix kept fixed, its step size as the start of the step size's adaptation)."""
    dep = _deps()  # the optional [agreement] extra (CPU unless a GPU is present)
    jax, jnp, MCMC, NUTS = dep.jax, dep.jnp, dep.MCMC, dep.NUTS
    # one host device per chain: effective only before jax's backend first starts (importing it
    # does not start it; else the chains run one after another)
    dep.numpyro.set_host_device_count(max(1, chains))

    if compile_cache is not None:
        keep_compiled(compile_cache)
    data = pair_outcomes(table, groups, covariates)
    agg = cells(data, bins)
    K = data["k"] ** 2
    names = list(data["covariates"])
    gidx = {
        g: (jnp.asarray(agg["groups"][g]), len(levels)) for g, (_, levels) in data["groups"].items()
    }
    sparse: tuple[int, ...] = ()
    if around is not None and sparse_below is not None:
        # the levels of the factor centred around alpha with few observations: non-centred
        index = data["pair"] if around == "pair" else data["groups"][around][0]
        n_levels = len(data["pairs"]) if around == "pair" else len(data["groups"][around][1])
        held = np.bincount(index, minlength=n_levels)
        sparse = tuple(int(q) for q in np.nonzero(held < sparse_below)[0])
    started, cpu = time.monotonic(), time.process_time()
    kernel = {}
    if resume is not None:
        # the first attempt's mass matrix kept fixed, its step size the start of the step size's
        # adaptation; both, with the positions, arguments of the program (`_resumed_nuts`)
        kernel = {"adapt_mass_matrix": False}
    mcmc = MCMC(
        (NUTS if resume is None else _resumed_nuts())(
            _model,
            target_accept_prob=target_accept,
            max_tree_depth=max_tree_depth,
            dense_mass=dense_mass,
            **kernel,
        ),
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        chain_method=chain_method
        or ("parallel" if jax.local_device_count() >= chains else "sequential"),
        progress_bar=False,
    )
    mcmc.run(
        # the second attempt's draws from another stream of the same seed: reproducible, and not
        # the first attempt's momenta again
        jax.random.fold_in(jax.random.PRNGKey(seed), 1) if resume else jax.random.PRNGKey(seed),
        jnp.asarray(agg["counts"]),
        jnp.asarray(agg["pair"]),
        len(data["pairs"]),
        gidx,
        jnp.asarray(agg["X"]),
        K,
        tuple(centred),
        correlated,
        around,
        sparse,
        alpha_about,
        extra_fields=("diverging", "num_steps"),
        init_params=_resume_args(resume, chains) if resume else None,
    )
    # jax computes asynchronously: the clock stops once the draws are really there
    by_chain = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu
    diag = diagnose(by_chain)
    finite_r = {s: r for s, (r, _) in diag.items() if np.isfinite(r)}
    rhat = max(finite_r.values()) if finite_r else float("nan")
    ess = min((e for _, e in diag.values() if np.isfinite(e)), default=float("nan"))
    extra = mcmc.get_extra_fields()
    divergent = int(np.asarray(extra["diverging"]).sum())
    diagnostics = {
        "max_rhat": rhat,
        "max_rhat_at": max(finite_r, key=finite_r.get) if finite_r else None,
        "min_ess": ess,
        "min_ess_at": min(
            (s for s in diag if np.isfinite(diag[s][1])), key=lambda s: diag[s][1], default=None
        ),
        "divergences": divergent,
        "mean_leapfrog_steps": float(np.mean(np.asarray(extra["num_steps"]))),
        "chains": chains,
        "warmup": warmup,
        "samples": samples,
        "resumed": resume is not None,
        "seed": seed,
        "target_accept": target_accept,
        "max_tree_depth": max_tree_depth,
        "dense_mass": dense_mass,
        "correlated": correlated,
        "centred": list(centred),
        "around": around,
        "sparse_below": sparse_below,
        "sparse_levels": len(sparse),
        "alpha_about": alpha_about,
        "bins": bins,
        "seconds": round(seconds, 1),  # wall clock, compilation included
        "cpu_seconds": round(cpu, 1),  # this process's CPU time (a shared machine's wall is longer)
        "observations": int(data["outcome"].size),
        "cells": int(agg["cells"]),
    }
    if divergent and rhat < RHAT_MAX and retry_accept is not None and target_accept < retry_accept:
        # a few divergent transitions in an otherwise converged fit: the step size adapted to the
        # target acceptance was too large somewhere; a higher target (smaller steps) is tried
        # once, automatically, before the fit is refused (the same seed: reproducible). The
        # first attempt's warm-up is not thrown away: its chains' last positions and its mass
        # matrix carry over, and a short warm-up adapts the step size alone (a second full fit
        # took the CPU of a fit over 60 s on four seeds of twenty)
        resume = _resume_from(mcmc)
        first_steps = float(np.mean(np.asarray(extra["num_steps"])))
        del mcmc, by_chain, extra  # the first attempt's draws: not held through the second
        gc.collect()
        again = fit(
            table,
            groups,
            covariates,
            seed=seed,
            chains=chains,
            warmup=min(warmup, RETRY_WARMUP),
            samples=samples,
            curve=curve,
            curve_grid=curve_grid,
            centred=centred,
            target_accept=retry_accept,
            correlated=correlated,
            bins=bins,
            max_tree_depth=max_tree_depth,
            dense_mass=dense_mass,
            compile_cache=compile_cache,
            loo_report=loo_report,
            keep_draws=keep_draws,
            retry_accept=None,
            around=around,
            chain_method=chain_method,
            sparse_below=sparse_below,
            resume=resume,
            alpha_about=alpha_about,
        )
        d = again["diagnostics"]
        d["retried"] = {
            "target_accept": target_accept,
            "divergences": divergent,
            "max_rhat": rhat,
            "warmup": warmup,  # the first attempt's, whose mass matrix the second kept
            "samples": samples,
            "mean_leapfrog_steps": first_steps,
        }
        d["seconds"] = round(d["seconds"] + seconds, 1)
        d["cpu_seconds"] = round(d["cpu_seconds"] + cpu, 1)
        return again
    if not rhat < RHAT_MAX or divergent:
        worst = max(finite_r, key=finite_r.get) if finite_r else "?"
        raise NotConverged(
            f"the fit did not converge (largest R-hat {rhat:.3f} at {worst}, must be below "
            f"{RHAT_MAX}; {divergent} divergent transitions, must be 0; {chains} chains of "
            f"{warmup} + {samples} draws, seed {seed}, target acceptance {target_accept}); no "
            "figure of it is reported: fit again "
            "with more warmup and draws, or another seed",
            diagnostics,
        )
    # in double precision: every figure below is computed from the draws as numpy doubles
    post = {
        s: np.asarray(v, dtype=np.float64).reshape((-1,) + v.shape[2:]) for s, v in by_chain.items()
    }
    D = post["alpha"].shape[0]
    k = data["k"]
    # the data's own expected agreement (eq. 8) and pair weights (tasks/agreement_measures.py)
    point = weighted(table, np.ones((1, table.n_items)))
    a_e = float(point["expected_kappa"][0])
    a_e_w = float(point["expected_kappa_weighted"][0])
    share = (np.ones((1, table.n_items)) @ table.features)[0]
    a = len(table.annotators)
    off = 1 + a * k
    w = np.array([share[off + x * a + y] for x, y in table.pairs])
    present = np.bincount(data["pair"], minlength=len(table.pairs)) > 0
    uniform = present / present.sum()  # eq. 7: each pair that judged an item together once
    w = w / w.sum()
    rng = np.random.default_rng(seed)
    first = next(iter(data["groups"]), None)

    def new_level(name: str) -> np.ndarray:
        """One draw of a new level's intercepts per posterior draw: nu = sigma * (L z)."""
        z = rng.standard_normal((D, K - 1))
        if f"L_{name}" in post:
            z = np.einsum("dij,dj->di", post[f"L_{name}"], z)
        return post[f"sigma_{name}"] * z

    def kappa(
        x: np.ndarray, marginal: bool, weights: np.ndarray, ae: float, offset=None
    ) -> np.ndarray:
        eta = post["alpha"].copy()
        if names:
            eta = eta + np.einsum("dp,dpk->dk", x, post["beta"])  # D x (K-1)
        if marginal and first is not None:
            eta = eta + new_level(first)
        if offset is not None:  # a level's own intercepts (one per draw)
            eta = eta + offset
        # D x pairs x (K-1): each annotator pair's own intercepts
        a_o = (_softmax_diag(eta[:, None, :] + post["nu_pair"], k) * weights).sum(axis=1)
        return (a_o - ae) / (1 - ae)

    zero = np.zeros((D, len(names)))
    out = {
        "model": (
            "multinomial logit over the outcomes of pairs of judgments, aggregated over cells; "
            + ("correlated (LKJ) " if correlated else "independent ")
            + "random intercepts: "
            + ", ".join(["annotator pair", *data["groups"]])
            + ("; fixed effects: " + ", ".join(names) + " (standardised" if names else "")
            + (
                f", {bins} quantile bins as a cell-level covariate)"
                if names and bins is not None
                else ")"
                if names
                else ""
            )
        ),
        "kappa": "eq. 7-8: annotator pairs weighted uniformly",
        "expected_agreement": a_e,
        "average": _summary(kappa(zero, False, uniform, a_e)),
        "marginal": _summary(kappa(zero, True, uniform, a_e)) if first is not None else None,
        "average_pair_weighted": _summary(kappa(zero, False, w, a_e_w)),
        "expected_agreement_pair_weighted": a_e_w,
        "marginal_over": first,
        "diagnostics": diagnostics,
        "levels": {g: len(levels) for g, (_, levels) in data["groups"].items()},
    }
    out.update(reports(post, data, agg, zero, uniform, a_e, kappa, first, log_lik=loo_report))
    pointwise_loo = out.pop("loo_pointwise", None)
    if keep_draws:  # for a caller that checks or compares them (never serialised)
        out["draws"] = post
        out["loo_pointwise"] = pointwise_loo
    if curve is not None and curve in names:
        grid = np.linspace(-2.0, 3.0, 21) if curve_grid is None else np.asarray(curve_grid)
        _, mean, sd = data["covariates"][curve]
        j = names.index(curve)
        pts = []
        for g in grid:
            x = zero.copy()
            x[:, j] = g
            pts.append(
                {
                    "z": float(g),
                    "value": mean + g * sd,
                    "average": _summary(kappa(x, False, uniform, a_e)),
                    "marginal": _summary(kappa(x, True, uniform, a_e))
                    if first is not None
                    else None,
                }
            )
        out["curve"] = {"covariate": curve, "points": pts}
    return out


def compare_models(
    table: Table,
    ladder: dict[str, tuple[dict, dict]],
    seed: int = 0,
    keep_draws: bool = False,
    **options,
) -> dict:
    """Fit each model of `ladder` (name -> (groups, covariates), all on the same table, so on the
    same pairs of judgments) and compare them by PSIS-LOO (the paper's Table 2): each model's
    ELPD-LOO with its standard error, p_loo and Pareto k diagnostics beside its sampler
    diagnostics; the converged ones ranked by ELPD, with the difference from the best and its
    standard error. A model that did not converge is listed with its refusal and no figure.
    `keep_draws`: each converged model keeps its posterior draws and pointwise elpd_loo."""
    models, pointwise_elpd = {}, {}
    for name, (groups, covariates) in ladder.items():
        try:
            got = fit(
                table, groups, covariates, seed=seed, keep_draws=True, loo_report=True, **options
            )
        except NotConverged as e:
            models[name] = {
                "converged": False,
                "error": str(e),
                "diagnostics": e.diagnostics,
                "groups": sorted(groups),
                "covariates": sorted(covariates),
            }
            continue
        pointwise_elpd[name] = got["loo_pointwise"]
        models[name] = {
            "converged": True,
            "groups": sorted(groups),
            "covariates": sorted(covariates),
            "loo": got["loo"],
            "average": got["average"],
            "diagnostics": got["diagnostics"],
        }
        if keep_draws:  # for a caller that checks them (never serialised)
            models[name]["draws"] = got["draws"]
            models[name]["loo_pointwise"] = got["loo_pointwise"]
    ranking = compare(pointwise_elpd) if pointwise_elpd else []
    return {
        "models": models,
        "ranking": ranking,
        "seed": seed,
        "note": "ELPD-LOO by PSIS-LOO over the pairs of judgments (reff 1); elpd_diff and se_diff "
        "against the best model, from the pointwise differences",
    }


def _outcome_names(k: int) -> list[str]:
    """The non-pivot outcomes (label index of x, label index of y), as "x,y"."""
    return [f"{o // k},{o % k}" for o in range(1, k * k)]


def cell_log_lik(post: dict, agg: dict, groups, names, chunk: int = 64):
    """Yield (cells, log-probabilities draws x cells x K) of the cells' outcomes, a chunk of cells
    at a time (all draws of all cells at once would not fit in memory for TRoTR's four labels)."""
    C = agg["cells"]
    for lo in range(0, C, chunk):
        cs = np.arange(lo, min(C, lo + chunk))
        eta = post["alpha"][:, None, :] + post["nu_pair"][:, agg["pair"][cs], :]
        if names:
            eta = eta + np.einsum("cp,dpk->dck", agg["X"][cs], post["beta"])
        for g in groups:
            eta = eta + post[f"nu_{g}"][:, agg["groups"][g][cs], :]
        logits = np.concatenate([np.zeros(eta.shape[:2] + (1,)), eta], axis=2)
        logits -= logits.max(axis=2, keepdims=True)
        yield cs, logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))


def model_loo(post: dict, data: dict, agg: dict) -> tuple[dict, np.ndarray]:
    """PSIS-LOO of a fit over its pairs of judgments (tasks/agreement_loo.py): each distinct
    (cell, outcome) once with its count (the pairs in it share their log-likelihood); and each
    pair of judgments' elpd_loo, in `pair_outcomes`' order (what `agreement_loo.compare` takes)."""
    counts = agg["counts"]
    elpd_cells = np.zeros(counts.shape)
    cols_e, cols_lp, cols_k, cols_c = [], [], [], []
    names = list(data["covariates"])
    for cs, ll in cell_log_lik(post, agg, list(data["groups"]), names):
        ci, oi = np.nonzero(counts[cs] > 0)
        pts = pointwise(ll[:, ci, oi])
        elpd_cells[cs[ci], oi] = pts["elpd"]
        cols_e.append(pts["elpd"])
        cols_lp.append(pts["lppd"])
        cols_k.append(pts["k"])
        cols_c.append(counts[cs[ci], oi])
    pts = {
        "elpd": np.concatenate(cols_e),
        "lppd": np.concatenate(cols_lp),
        "k": np.concatenate(cols_k),
    }
    summary = summarise(pts, np.concatenate(cols_c), post["alpha"].shape[0])
    summary["reff"] = 1.0
    return summary, elpd_cells[agg["cell"], data["outcome"]]


def reports(post, data, agg, zero, uniform, a_e, kappa, first, log_lik: bool = True) -> dict:
    """What a converged fit reports beside its kappa: the fixed effects (intercepts and slopes
    per outcome) and the scales of the random intercepts, the posterior correlations of each
    factor's correlated intercepts (R = L L^T per draw), a posterior kappa per level of each
    grouping factor (that level's fitted intercepts added, the annotator pairs' own), per level
    of a covariate with two values (a flag), for an average level of the first factor and
    marginalised over it, and PSIS-LOO (`model_loo`)."""
    k = data["k"]
    outcomes = _outcome_names(k)
    names = list(data["covariates"])
    groups = list(data["groups"])
    effects = {"intercept": {o: _summary(post["alpha"][:, j]) for j, o in enumerate(outcomes)}}
    for i, c in enumerate(names):
        effects[c] = {o: _summary(post["beta"][:, i, j]) for j, o in enumerate(outcomes)}
    scales = {
        g: {o: _summary(post[f"sigma_{g}"][:, j]) for j, o in enumerate(outcomes)}
        for g in ("pair", *groups)
    }
    correlations = {}
    for g in ("pair", *groups):
        if f"L_{g}" in post:
            L = post[f"L_{g}"]
            R = np.einsum("dij,dkj->dik", L, L)
            correlations[g] = {
                f"{outcomes[i]} ~ {outcomes[j]}": _summary(R[:, i, j])
                for i in range(len(outcomes))
                for j in range(i + 1, len(outcomes))
            }
    by_level = {
        g: {
            level: _summary(kappa(zero, False, uniform, a_e, offset=post[f"nu_{g}"][:, li, :]))
            for li, level in enumerate(levels)
        }
        for g, (_, levels) in data["groups"].items()
    }
    by_covariate = {}
    for j, c in enumerate(names):
        z, mean, sd = data["covariates"][c]
        values = np.unique(z)
        if values.size != 2:
            continue
        rows = {}
        for v in values:
            x = zero.copy()
            x[:, j] = v
            rows[f"{mean + v * sd:g}"] = {
                "average": _summary(kappa(x, False, uniform, a_e)),
                "marginal": _summary(kappa(x, True, uniform, a_e)) if first is not None else None,
            }
        by_covariate[c] = rows
    # the paper's Table 3: every combination of the flags' values (its retrieval method and
    # Known, both binary predictors), crossed with each level of each grouping factor after the
    # first (a campaign's proposing runs), for an average level of the first factor (- Book) and
    # marginalised over it (+ Book); the other covariates at their mean (zero)
    flags = [c for c in names if np.unique(data["covariates"][c][0]).size == 2]
    others = [
        (g, li, level)
        for g, (_, levels) in data["groups"].items()
        if g != first
        for li, level in enumerate(levels)
    ]
    by_condition = []
    if flags or others:
        others = others or [(None, None, None)]
        for values in itertools.product(*(np.unique(data["covariates"][c][0]) for c in flags)):
            x = zero.copy()
            cond = {}
            for c, v in zip(flags, values, strict=True):
                x[:, names.index(c)] = v
                _, mean, sd = data["covariates"][c]
                cond[c] = f"{mean + v * sd:g}"
            for g, li, level in others:
                offset = None if g is None else post[f"nu_{g}"][:, li, :]
                by_condition.append(
                    {
                        "condition": cond | ({} if g is None else {g: level}),
                        "average": _summary(kappa(x, False, uniform, a_e, offset)),
                        "marginal": _summary(kappa(x, True, uniform, a_e, offset))
                        if first is not None
                        else None,
                    }
                )
    out = {
        "outcomes": outcomes,
        "fixed_effects": effects,
        "scales": scales,
        "correlations": correlations,
        "by_level": by_level,
        "by_covariate_level": by_covariate,
        "by_condition": by_condition,
    }
    if log_lik:
        out["loo"], out["loo_pointwise"] = model_loo(post, data, agg)
    return out


__all__ = [
    "BINS",
    "DEFAULTS",
    "ESS_MIN",
    "RHAT_MAX",
    "NotConverged",
    "cells",
    "compare_models",
    "convergence",
    "covariate_bins",
    "fit",
    "pair_outcomes",
]
