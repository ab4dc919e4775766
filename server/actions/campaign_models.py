"""The Bayesian agreement model of an assessment campaign, on demand, fitted by a worker.

An organizer asks for a fit (`request_bayes`): a `CampaignModelFit` row is recorded (queued, with
its seed and settings) and, after the commit, a job is put on the queue
(`server.jobs.campaign_fit_jobs.fit_campaign_model`). The job reads the judgments stored when it
runs,
builds the table that `server.actions.campaigns.agreement` measures (`fit_inputs`: the items every
assigned assessor judged), fits Manjavacas et al.'s multilevel model (`tasks.agreement_bayes.fit`)
and stores its posterior multi-kappa with the diagnostics, or `not_converged` with what failed
(never a figure of that fit), or `failed` with the reason. `show_bayes` lists the fits.

Bounded work: one fit at a time per campaign, at most MAX_ITEMS items, at most 4 chains of
1,000 + 1,000 draws.
"""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session, select

from server import api_models as m
from server.actions.campaigns import for_organizer
from server.actions.common import action
from server.db import after_commit
from server.domain import audit
from server.domain.judgments import fit_inputs
from server.exceptions import LifecycleRefused, QueueUnreachable, UploadFieldsInvalid
from server.jobs.dispatch import jobs
from server.models import CampaignModelFit, User, utcnow

STATES = ("queued", "running", "done", "not_converged", "failed")
LIVE = ("queued", "running")
# the model's own defaults (tasks/agreement_bayes.py): 4 chains, so that R-hat can see a stuck one
DEFAULTS = {"chains": 4, "warmup": 1000, "samples": 1000}
BOUNDS = {"chains": (1, 4), "warmup": (10, 1000), "samples": (10, 1000)}
MIN_ITEMS = 5
MAX_ITEMS = 5000
# a fit queued or running this long is taken as lost (its worker died): a new request may go on
ABANDONED = timedelta(hours=6)
# the links pool's lexical overlap bucket (server.actions.campaigns: overlap_bucket), as a number
# the grouping factor of each kind of item: a link's source work, a pair's stratum


def _settings(chains, warmup, samples) -> dict[str, int]:
    got = {"chains": chains, "warmup": warmup, "samples": samples}
    out, bad = {}, {}
    for k, v in got.items():
        v = DEFAULTS[k] if v is None else v
        lo, hi = BOUNDS[k]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            bad[k] = f"a whole number from {lo} to {hi}"
        out[k] = v
    if bad:
        raise UploadFieldsInvalid(bad)
    return out


def _fit_out(f: CampaignModelFit, digest_now: str | None = None) -> m.BayesFitOut:
    return m.BayesFitOut(
        id=f.id,
        campaign=f.campaign_id,
        state=f.state,
        seed=f.seed,
        settings=dict(f.settings),
        judgments=f.judgments,
        digest=f.digest,
        current=None if f.state != "done" or digest_now is None else f.digest == digest_now,
        result=f.result,
        error=f.error,
        created_at=f.created_at,
        started_at=f.started_at,
        finished_at=f.finished_at,
    )


def _fits(s: Session, campaign_id: int) -> list[CampaignModelFit]:
    q = select(CampaignModelFit).where(CampaignModelFit.campaign_id == campaign_id)
    return list(s.exec(q.order_by(CampaignModelFit.id.desc())))


@action
def request_bayes(
    *,
    s: Session,
    actor: User | None,
    campaign: int,
    seed: int | None = None,
    chains: int | None = None,
    warmup: int | None = None,
    samples: int | None = None,
    via: str,
) -> m.BayesFitOut:
    """Record a request for the Bayesian agreement model of a campaign (its competition's
    organizers) and, after the commit, hand it to a worker; refused while
    another fit of the campaign is queued or running, with fewer than MIN_ITEMS or more than
    MAX_ITEMS fully judged items. Audited; commits. A queue that cannot be reached fails the
    request (recorded as failed) with QueueUnreachable."""
    c, comp = for_organizer(s, actor, campaign)
    cfg = _settings(chains, warmup, samples)
    if seed is None:
        seed = c.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise UploadFieldsInvalid({"seed": "a whole number from 0 to 2147483647"})
    now = utcnow()
    for f in _fits(s, c.id):
        if f.state not in LIVE:
            continue
        if now - (f.started_at or f.created_at) > ABANDONED:
            f.state, f.finished_at = "failed", now
            f.error = f"abandoned: no worker finished it within {ABANDONED} of its start"
            s.add(f)
            continue
        raise LifecycleRefused(
            f"campaign {c.id}: fit {f.id} of the Bayesian model is still {f.state}; one fit at a "
            "time: wait for it (palimpsest organizer campaign bayes "
            f"{c.id} --wait)",
            "fit_running",
        )
    got = fit_inputs(s, c)
    if got["assessors"] < 2 or got["items"] < MIN_ITEMS:
        raise LifecycleRefused(
            f"campaign {c.id} has {got['items']} item(s) judged by every assessor assigned: the "
            f"model needs at least {MIN_ITEMS} such items and two assessors",
            "too_few_items",
        )
    if got["items"] > MAX_ITEMS:
        raise LifecycleRefused(
            f"campaign {c.id} has {got['items']} fully judged items: a fit on the server takes at "
            f"most {MAX_ITEMS}; export the campaign and fit it offline",
            "too_many_items",
        )
    f = CampaignModelFit(
        campaign_id=c.id,
        state="queued",
        seed=seed,
        settings=cfg,
        requested_by=None if actor is None else actor.id,
        created_at=now,
    )
    s.add(f)
    s.flush()
    audit.record(
        s,
        actor,
        "campaign_bayes_request",
        f"campaign:{c.id}/fit:{f.id}",
        competition_id=comp.id,
        via=via,
        seed=seed,
        items=got["items"],
        **cfg,
    )
    queue = jobs(s)
    try:  # the queue is asked before the commit; the fit is put on it once committed
        queue.reachable()
    except Exception as e:  # noqa: BLE001 — recorded as failed and said plainly
        f.state, f.finished_at = "failed", utcnow()
        f.error = f"the queue was not reachable ({type(e).__name__}: {e}): nothing fits it"
        s.add(f)
        raise QueueUnreachable(
            f"campaign {c.id}: {f.error}; fit {f.id} is recorded as failed: request it again "
            "once the queue is back",
            keeps_record=True,
        ) from None
    after_commit(s, lambda: queue.fit_now(f.id))
    return _fit_out(f)


@action
def show_bayes(*, s: Session, actor: User | None, campaign: int) -> m.BayesFitsOut:
    """A campaign's fits of the Bayesian agreement model, the newest first, each done fit saying
    whether the judgments stored now still give the table it fitted (its organizers)."""
    c, _comp = for_organizer(s, actor, campaign)
    fits = _fits(s, c.id)
    now = fit_inputs(s, c)["digest"] if any(f.state == "done" for f in fits) else None
    return m.BayesFitsOut(campaign=c.id, fits=[_fit_out(f, now) for f in fits])


__all__ = ["fit_inputs", "request_bayes", "show_bayes"]
