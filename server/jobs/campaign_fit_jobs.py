"""The agreement queue's job: fit the Bayesian agreement model of an assessment campaign
(`server.actions.campaign_models`) on the judgments stored when it runs, and record the outcome on
its `CampaignModelFit` row: done (the posterior multi-kappa and the diagnostics), not_converged
(what failed and the refused attempt's diagnostics, never a figure of that fit) or failed (why,
e.g. the optional extra missing).

The job takes the row's id and acts only on a queued row, so RQ running it twice fits once.
"""

from __future__ import annotations

import logging
import math
import time

from sqlmodel import Session

from server.db import get_engine, session_scope
from server.domain.judgments import fit_inputs
from server.models import AssessmentCampaign, CampaignModelFit, utcnow
from server.settings import get_settings
from tasks.agreement_bayes import NotConverged, fit

log = logging.getLogger(__name__)
EXTRA = "pip install 'palimpsest[agreement]'"


def _finish(engine, fit_id: int, state: str, *, result=None, error: str = "") -> None:
    with session_scope(engine) as s:  # the job's own step
        f = s.get(CampaignModelFit, fit_id)
        f.state, f.result, f.error, f.finished_at = state, result, error, utcnow()
        s.add(f)


def _finite(value):
    """`value` with every non-finite float as None (a JSON column, PostgreSQL's included, has no
    NaN nor infinity)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fit_campaign_model(fit_id: int) -> dict:
    """Fit the model for one requested fit and record the outcome; returns its state."""
    engine = get_engine(get_settings().sqlalchemy_url())
    with session_scope(engine) as s:  # the job's own step: the fit is running
        f = s.get(CampaignModelFit, fit_id)
        if f is None or f.state != "queued":
            return {"fit": fit_id, "skipped": True}
        f.state, f.started_at = "running", utcnow()
        s.add(f)
        seed, cfg = f.seed, dict(f.settings)
    with session_scope(engine) as s:  # and what it reads, recorded with it
        f = s.get(CampaignModelFit, fit_id)
        c = s.get(AssessmentCampaign, f.campaign_id)
        got = fit_inputs(s, c)
        f.judgments, f.digest = got["judgments"], got["digest"]
        s.add(f)
    read = {
        "items": got["items"],
        "assessors": got["assessors"],
        "groups": sorted(got["groups"]),
        "covariates": sorted(got["covariates"]),
    }
    started = time.monotonic()
    try:
        out = fit(
            got["table"],
            got["groups"],
            got["covariates"],
            seed=seed,
            chains=cfg["chains"],
            warmup=cfg["warmup"],
            samples=cfg["samples"],
            # the compiled sampler kept beside the site's other caches: a fit of the same
            # judgments with the same settings (a reseeded one, a rerun) skips the compilation
            compile_cache=str(get_settings().home / "cache" / "jax"),
        )
    except ImportError as e:
        _finish(
            engine,
            fit_id,
            "failed",
            error=f"numpyro and jax are not installed on this worker: {EXTRA} ({e})",
        )
        return {"fit": fit_id, "state": "failed"}
    except NotConverged as e:
        seconds = round(time.monotonic() - started, 1)
        # why it was refused, kept with the refusal (never a figure of the fit): the refused
        # attempt's R-hat, ESS, divergences and sampler settings (JSON: a non-finite number, an
        # R-hat of draws that never moved, is kept as null)
        why = _finite(e.diagnostics)
        _finish(
            engine,
            fit_id,
            "not_converged",
            result=read | {"seconds": seconds, "diagnostics": why},
            error=str(e),
        )
        return {"fit": fit_id, "state": "not_converged"}
    except Exception as e:  # noqa: BLE001 — recorded on the row, said plainly
        log.exception("fit %s of the Bayesian agreement model failed", fit_id)
        _finish(engine, fit_id, "failed", error=f"the fit failed: {type(e).__name__}: {e}")
        return {"fit": fit_id, "state": "failed"}
    result = read | {
        "model": out["model"],
        "expected_agreement": out["expected_agreement"],
        "kappa": out["average"],
        "kappa_pair_weighted": out["average_pair_weighted"],
        "marginal": out["marginal"],
        "marginal_over": out["marginal_over"],
        "levels": out["levels"],
        "diagnostics": out["diagnostics"],
        # the paper's reports (tasks/agreement_bayes.py: reports): its section 3.2 and note 6,
        # Table 3 by condition, and the PSIS-LOO a comparison of models reads
        **{
            key: out[key]
            for key in (
                "outcomes",
                "fixed_effects",
                "scales",
                "correlations",
                "by_level",
                "by_covariate_level",
                "by_condition",
                "loo",
            )
        },
    }
    _finish(engine, fit_id, "done", result=result)
    return {"fit": fit_id, "state": "done"}


def on_fit_failure(job, connection, exc_type=None, exc_value=None, tb=None) -> None:
    """RQ calls this when the job itself died (a timeout, a killed work horse): the row says so
    instead of staying "running"."""
    engine = get_engine(get_settings().sqlalchemy_url())
    fit_id = int(job.args[0])
    with Session(engine) as s:
        f = s.get(CampaignModelFit, fit_id)
        if f is None or f.state not in ("queued", "running"):
            return
    name = exc_type.__name__ if exc_type else "error"
    _finish(engine, fit_id, "failed", error=f"the worker's job ended: {name}: {exc_value}")
