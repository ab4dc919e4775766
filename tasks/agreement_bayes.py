"""Manjavacas et al. (2021)'s Bayesian multilevel model of agreement, fitted by NUTS (numpyro).

Each pair of judgments of one item by two annotators (x before y in the table's order) is one
observation whose outcome is the pair of labels (k labels: k^2 outcomes, the first, "both gave
the first label", the pivot). A multinomial logit gives the log-odds of the other k^2 - 1
outcomes against the pivot: fixed intercepts, fixed slopes for the covariates (standardised
lexical overlap; a known-passage flag where the data has one), and random intercepts for the
annotator pair and for each other grouping factor (the source book): one zero-mean normal per
outcome and factor with its own scale (half-normal prior), independent across outcomes, as
`(1 | pair) + (1 | book)` gives in brms' categorical family; non-centred unless the caller names
the factor in `centred`. The chains run in parallel, one per core where the machine has them
(jax's host devices), else one after the other.

Agreement follows the paper's eq. 7-8: A_o the probability of the diagonal outcomes averaged over
annotator pairs (each pair weighted as in tasks/agreement_measures.py's multi-kappa), A_e from each
annotator's own label distribution (the data's, a constant), kappa = (A_o - A_e) / (1 - A_e).
"For an average book" sets the book intercepts to zero; "marginalised over books" draws a new
book's intercepts from the fitted multivariate normal on every posterior draw (the paper's Figure 2
right). A fit is reported only when it converged: every R-hat below 1.01 and no divergent
transition; otherwise `NotConverged` says which.

numpyro and jax are an optional extra (`pip install .[agreement]`): they are imported inside the
functions that need them, so the rest of the project runs without them.
"""

from __future__ import annotations

import os
import time

import numpy as np

from tasks.agreement_measures import Table, weighted

RHAT_MAX = 1.01


class NotConverged(RuntimeError):
    """The sampler did not converge: no figure of this fit may be reported."""


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
        "pairs": [f"{table.annotators[x]} | {table.annotators[y]}" for x, y in table.pairs],
        "groups": {g: (inv[item], [str(u) for u in uniq]) for g, (uniq, inv) in level_of.items()},
        "covariates": {name: (z[item], mean, sd) for name, (z, mean, sd) in cov.items()},
        "k": k,
    }


def _model(outcome, pair, n_pairs, groups, X, K, centred=()):
    # imported here: numpyro/jax are the optional [agreement] extra
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    m = K - 1
    alpha = numpyro.sample("alpha", dist.Normal(0.0, 2.5).expand([m]).to_event(1))
    eta = jnp.broadcast_to(alpha, (outcome.shape[0], m))
    if X.shape[1]:
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1], m]).to_event(2))
        eta = eta + X @ beta
    for name, (index, n_levels) in {"pair": (pair, n_pairs), **groups}.items():
        sigma = numpyro.sample(f"sigma_{name}", dist.HalfNormal(1.0).expand([m]).to_event(1))
        if name not in centred:
            # non-centred: no funnel where a level holds little data or the levels differ little
            z = numpyro.sample(f"z_{name}", dist.Normal(0.0, 1.0).expand([n_levels, m]).to_event(2))
            nu = numpyro.deterministic(f"nu_{name}", z * sigma)
        else:
            nu = numpyro.sample(
                f"nu_{name}", dist.Normal(0.0, sigma).expand([n_levels, m]).to_event(2)
            )
        eta = eta + nu[index]
    logits = jnp.concatenate([jnp.zeros((outcome.shape[0], 1)), eta], axis=1)
    numpyro.sample("y", dist.Categorical(logits=logits), obs=outcome)


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
        "50%": _interval(draws, 0.5),
        "89%": _interval(draws, 0.89),
        "95%": _interval(draws, 0.95),
    }


def fit(
    table: Table,
    groups: dict[str, np.ndarray] | None = None,
    covariates: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    chains: int = 4,
    warmup: int = 300,
    samples: int = 300,
    curve: str | None = None,
    curve_grid: np.ndarray | None = None,
    centred: tuple[str, ...] = (),
    target_accept: float = 0.9,
) -> dict:
    """Fit the model by NUTS and return the posterior multi-kappa (average group level and
    marginalised over the first grouping factor), the counterfactual curve over the covariate
    `curve`, and the diagnostics; raises NotConverged when R-hat >= 1.01 or a transition
    diverged."""
    # imported here: numpyro/jax are the optional [agreement] extra (CPU unless a GPU is present)
    import numpyro

    # one host device per chain where the cores allow: effective only before jax first starts
    numpyro.set_host_device_count(max(1, min(chains, os.cpu_count() or 1)))
    # imported here too: the optional [agreement] extra, after the device count is set
    import jax
    import jax.numpy as jnp
    from numpyro.diagnostics import summary
    from numpyro.infer import MCMC, NUTS

    data = pair_outcomes(table, groups, covariates)
    K = data["k"] ** 2
    names = list(data["covariates"])
    X = (
        np.stack([data["covariates"][c][0] for c in names], axis=1)
        if names
        else np.zeros((data["outcome"].size, 0))
    )
    gidx = {g: (jnp.asarray(ix), len(levels)) for g, (ix, levels) in data["groups"].items()}
    started, cpu = time.monotonic(), time.process_time()
    mcmc = MCMC(
        # depth 8 (at most 255 leapfrog steps a draw) bounds the early warmup's cost
        NUTS(_model, target_accept_prob=target_accept, max_tree_depth=8),
        num_warmup=warmup,
        num_samples=samples,
        num_chains=chains,
        chain_method="parallel" if jax.local_device_count() >= chains else "sequential",
        progress_bar=False,
    )
    mcmc.run(
        jax.random.PRNGKey(seed),
        jnp.asarray(data["outcome"]),
        jnp.asarray(data["pair"]),
        len(data["pairs"]),
        gidx,
        jnp.asarray(X),
        K,
        tuple(centred),
        extra_fields=("diverging",),
    )
    # jax computes asynchronously: the clock stops once the draws are really there
    by_chain = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu
    params = {s: v for s, v in by_chain.items() if not s.startswith("z_")}
    diag = summary({s: np.asarray(v) for s, v in params.items()}, prob=0.89)
    rhat = max(float(np.nanmax(d["r_hat"])) for d in diag.values())
    ess = min(float(np.nanmin(d["n_eff"])) for d in diag.values())
    divergent = int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum())
    diagnostics = {
        "max_rhat": rhat,
        "min_ess": ess,
        "divergences": divergent,
        "chains": chains,
        "warmup": warmup,
        "samples": samples,
        "seed": seed,
        "target_accept": target_accept,
        "seconds": round(seconds, 1),  # wall clock, compilation included
        "cpu_seconds": round(cpu, 1),  # this process's CPU time (a shared machine's wall is longer)
        "observations": int(data["outcome"].size),
    }
    if not rhat < RHAT_MAX or divergent:
        worst = max(diag, key=lambda s: float(np.nanmax(diag[s]["r_hat"])))
        raise NotConverged(
            f"the fit did not converge (largest R-hat {rhat:.3f} at {worst}, must be below "
            f"{RHAT_MAX}; {divergent} divergent transitions, must be 0; {chains} chains of "
            f"{warmup} + {samples} draws, seed {seed}); no figure of it is reported: fit again "
            "with more warmup and draws, or another seed"
        )
    post = {s: np.asarray(v).reshape((-1,) + v.shape[2:]) for s, v in by_chain.items()}
    D = post["alpha"].shape[0]
    k = data["k"]
    # the data's own expected agreement and pair weights (tasks/agreement_measures.py's multi-kappa)
    point = weighted(table, np.ones((1, table.n_items)))
    a_e = float(point["expected_kappa"][0])
    share = (np.ones((1, table.n_items)) @ table.features)[0]
    a = len(table.annotators)
    off = 1 + a * k
    w = np.array([share[off + x * a + y] for x, y in table.pairs])
    w = w / w.sum()
    rng = np.random.default_rng(seed)
    first = next(iter(data["groups"]), None)

    def new_level(name: str) -> np.ndarray:
        """One draw of a new level's intercepts per posterior draw: nu = sigma * z."""
        return post[f"sigma_{name}"] * rng.standard_normal((D, K - 1))

    def kappa(x: np.ndarray, marginal: bool) -> np.ndarray:
        eta = post["alpha"].copy()
        if names:
            eta = eta + np.einsum("dp,dpk->dk", x, post["beta"])  # D x (K-1)
        if marginal and first is not None:
            eta = eta + new_level(first)
        # D x pairs x (K-1): each annotator pair's own intercepts
        a_o = (_softmax_diag(eta[:, None, :] + post["nu_pair"], k) * w).sum(axis=1)
        return (a_o - a_e) / (1 - a_e)

    zero = np.zeros((D, len(names)))
    out = {
        "model": (
            "multinomial logit over the outcomes of pairs of judgments; random intercepts: "
            + ", ".join(["annotator pair", *data["groups"]])
            + ("; fixed effects: " + ", ".join(names) + " (standardised)" if names else "")
        ),
        "expected_agreement": a_e,
        "average": _summary(kappa(zero, False)),
        "marginal": _summary(kappa(zero, True)) if first is not None else None,
        "marginal_over": first,
        "diagnostics": diagnostics,
        "levels": {g: len(levels) for g, (_, levels) in data["groups"].items()},
    }
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
                    "average": _summary(kappa(x, False)),
                    "marginal": _summary(kappa(x, True)) if first is not None else None,
                }
            )
        out["curve"] = {"covariate": curve, "points": pts}
    return out


__all__ = ["RHAT_MAX", "NotConverged", "fit", "pair_outcomes"]
