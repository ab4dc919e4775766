"""PSIS-LOO (tasks/agreement_loo.py) against ArviZ's `loo` on the same log-likelihoods: ELPD, its
standard error, p_loo and every Pareto k; a column counted c times equals it repeated c times;
the comparison of models against ArviZ's `compare`. Skipped, saying why, where ArviZ is not
installed (`pip install arviz`)."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.agreement_loo import compare, loo

az = pytest.importorskip("arviz", reason="ArviZ is the reference: pip install arviz")


def posterior_log_lik(seed: int, n_obs: int = 60, draws: int = 1000, outlier: bool = False):
    """A normal model's posterior draws (mean and sd) and each observation's log-likelihood."""
    rng = np.random.default_rng(seed)
    y = rng.normal(1.0, 2.0, size=n_obs)
    if outlier:
        y[0] = 25.0  # a large Pareto k
    mu = rng.normal(y.mean(), y.std() / np.sqrt(n_obs), size=draws)
    sd = np.abs(rng.normal(y.std(), 0.2, size=draws))
    return -0.5 * ((y[None, :] - mu[:, None]) / sd[:, None]) ** 2 - np.log(
        sd[:, None] * np.sqrt(2 * np.pi)
    )


def reference(log_lik: np.ndarray):
    idata = az.from_dict(
        posterior={"mu": np.zeros((1, log_lik.shape[0]))},
        log_likelihood={"y": log_lik[None, :, :]},
    )
    return az.loo(idata, pointwise=True, reff=1.0)


@pytest.mark.parametrize("seed, outlier", [(0, False), (1, False), (2, True), (3, True)])
def test_loo_equals_arviz(seed, outlier):
    ll = posterior_log_lik(seed, outlier=outlier)
    ours, ref = loo(ll), reference(ll)
    assert ours["elpd_loo"] == pytest.approx(float(ref["elpd_loo"]), abs=1e-9)
    assert ours["se"] == pytest.approx(float(ref["se"]), abs=1e-9)
    assert ours["p_loo"] == pytest.approx(float(ref["p_loo"]), abs=1e-9)
    assert np.allclose(ours["pointwise"]["k"], np.asarray(ref["pareto_k"]), atol=1e-9)
    assert np.allclose(ours["pointwise"]["elpd"], np.asarray(ref["loo_i"]), atol=1e-9)
    if outlier:
        assert ours["max_pareto_k"] > 0.7 and ours["n_high_k"] >= 1


def test_counted_columns_equal_repeated_columns():
    ll = posterior_log_lik(4, n_obs=20)
    counts = np.arange(1, 21)
    got = loo(ll, counts)
    expanded = loo(np.repeat(ll, counts, axis=1))
    for k in ("elpd_loo", "se", "p_loo", "n", "n_high_k"):
        assert got[k] == pytest.approx(expanded[k], abs=1e-9), k


def test_compare_equals_arviz():
    a, b = posterior_log_lik(5), posterior_log_lik(5)
    b = b + np.random.default_rng(9).normal(-0.05, 0.05, size=b.shape[1])[None, :]
    ours = compare({"a": loo(a)["pointwise"]["elpd"], "b": loo(b)["pointwise"]["elpd"]})
    ref = az.compare({"a": reference(a), "b": reference(b)}, ic="loo")
    assert [r["model"] for r in ours] == list(ref.index)
    for r in ours:
        assert r["elpd_loo"] == pytest.approx(float(ref.loc[r["model"], "elpd_loo"]), abs=1e-9)
        assert r["elpd_diff"] == pytest.approx(-float(ref.loc[r["model"], "elpd_diff"]), abs=1e-9)
        assert r["se_diff"] == pytest.approx(float(ref.loc[r["model"], "dse"]), abs=1e-9)
