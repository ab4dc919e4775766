"""Assessment campaigns: open, list, show, the assessor's items and judgments, agreement,
adjudication, closing, export, the Bayesian model's fits.
"""

from __future__ import annotations

from server import api_models as m
from server.actions import adjudication, campaign_exports
from server.actions import campaign_models as model_actions
from server.actions import campaigns as campaign_actions
from server.api.common import (
    body_model,
    bp,
    json_out,
    need_organizer,
    need_user,
    page_out,
    query_model,
)
from server.api.openapi import op
from server.db import db

# ----------------------------------------------------------------------------- assessment campaigns
# (server/actions/campaigns.py: the pool, the assignment, the judgments, the agreement)


@bp.post("/tasks/<task_id>/phases/<phase_name>/campaigns")
@op(
    "Open an assessment campaign: pool the phase's ranked runs and assign the items (organizers)",
    body=m.CampaignOpenIn,
    responses={201: m.CampaignOut},
    errors=(403, 404, 409, 422),
    tags=("assessment",),
    description="Links tasks: the union of each ranked run's top-`depth` links per query, the "
    "gold's links and earlier campaigns' items among them (judged blind); pair tasks: `depth` "
    "instances per stratum. An assessor who takes part in the competition is refused (409) "
    "unless `allow_participants`. "
    "Each item goes to `per_item` of the named assessors (balanced), in an order of its own per "
    "assessor. The answer lists the pooled items.",
)
def campaign_open(task_id, phase_name):
    u = need_organizer(task_id)  # before the body: nobody else learns what a valid one is
    body = body_model(m.CampaignOpenIn)
    got = campaign_actions.open_campaign(
        s=db(),
        actor=u,
        task=task_id,
        phase=phase_name,
        depth=body.depth,
        assessors=body.assessors,
        per_item=body.per_item,
        labels=body.labels,
        guideline=body.guideline,
        seed=body.seed,
        positive=body.positive,
        allow_participants=body.allow_participants,
        via="api",
    )
    return json_out(got, 201)


@bp.get("/tasks/<task_id>/phases/<phase_name>/campaigns")
@op(
    "The assessment campaigns of a phase, newest first (organizers)",
    responses={200: m.Page[m.CampaignOut]},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_list(task_id, phase_name):
    u = need_user()
    got = campaign_actions.list_campaigns(s=db(), actor=u, task=task_id, phase=phase_name)
    return page_out(
        m.Page[m.CampaignOut],
        [c.model_dump(exclude_unset=True) for c in got],
        {"next_cursor": None, "next": None},
    )


@bp.get("/campaigns")
@op(
    "The campaigns that give you items to judge, newest first, with your own progress (assessors)",
    responses={200: m.Page[m.MyCampaignOut]},
    tags=("assessment",),
)
def campaign_mine():
    u = need_user()
    got = campaign_actions.my_campaigns(s=db(), user=u)
    return page_out(
        m.Page[m.MyCampaignOut],
        [c.model_dump(exclude_unset=True) for c in got],
        {"next_cursor": None, "next": None},
    )


@bp.get("/campaigns/<int:campaign_id>")
@op(
    "A campaign with its pooled items and each assessor's progress (organizers)",
    responses={200: m.CampaignOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_show(campaign_id):
    u = need_user()
    return json_out(campaign_actions.show_campaign(s=db(), actor=u, campaign=campaign_id))


@bp.get("/campaigns/<int:campaign_id>/items")
@op(
    "Your items in a campaign, in your order, with their texts and your judgments (assessors)",
    responses={200: m.AssessOut},
    errors=(404,),
    tags=("assessment",),
)
def campaign_items(campaign_id):
    u = need_user()
    return json_out(campaign_actions.my_items(s=db(), user=u, campaign=campaign_id))


@bp.put("/campaigns/<int:campaign_id>/items/<int:item_id>/judgment")
@op(
    "Judge one of your items (again: the judgment is replaced; audited)",
    body=m.JudgmentIn,
    responses={200: m.JudgmentOut},
    errors=(404, 409, 422),
    tags=("assessment",),
)
def campaign_judge(campaign_id, item_id):
    u = need_user()
    body = body_model(m.JudgmentIn)
    return json_out(
        campaign_actions.judge(
            s=db(),
            user=u,
            campaign=campaign_id,
            item=item_id,
            label=body.label,
            comment=body.comment,
            via="api",
        )
    )


@bp.get("/campaigns/<int:campaign_id>/agreement")
@op(
    "The assessors' agreement: multi-kappa with its interval, overall and by a factor (organizers)",
    query=m.AgreementQuery,
    responses={200: m.AgreementOut},
    errors=(403, 404, 422),
    tags=("assessment",),
)
def campaign_agreement(campaign_id):
    u = need_user()
    q = query_model(m.AgreementQuery)
    return json_out(campaign_actions.agreement(s=db(), actor=u, campaign=campaign_id, by=q.by))


@bp.get("/campaigns/<int:campaign_id>/disagreements")
@op(
    "The items whose judgments disagree or are not all in, with each label's count (organizers)",
    responses={200: m.DisagreementsOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_disagreements(campaign_id):
    u = need_user()
    return json_out(adjudication.disagreements(s=db(), actor=u, campaign=campaign_id))


@bp.post("/campaigns/<int:campaign_id>/adjudicate")
@op(
    "Decide disagreeing items: the majority rule in one step, or one item with a reason "
    "(organizers; audited)",
    body=m.AdjudicateIn,
    responses={200: m.AdjudicateOut},
    errors=(403, 404, 409, 422),
    tags=("assessment",),
    description="`majority`: every fully judged item with a strict majority label that no "
    "organizer decided gets it; ties are listed, left for a person. `item` + `label` + `reason`: "
    "an organizer's decision, which may overrule anything.",
)
def campaign_adjudicate(campaign_id):
    u = need_user()
    campaign_actions.check_organizer(s=db(), actor=u, campaign=campaign_id)  # before the body
    body = body_model(m.AdjudicateIn)
    return json_out(
        adjudication.adjudicate(
            s=db(),
            actor=u,
            campaign=campaign_id,
            majority=body.majority,
            item=body.item,
            label=body.label,
            reason=body.reason,
            via="api",
        )
    )


@bp.post("/campaigns/<int:campaign_id>/close")
@op(
    "Close a campaign: write a new gold version of its split and rescore every run under it "
    "(organizers)",
    responses={200: m.CloseOut},
    errors=(403, 404, 409),
    tags=("assessment",),
    description="Refused while an item has no decision. A published ranking stays as published; "
    "the answer names the command that publishes a new version under the new gold.",
)
def campaign_close(campaign_id):
    u = need_user()
    return json_out(adjudication.close_campaign(s=db(), actor=u, campaign=campaign_id, via="api"))


@bp.get("/campaigns/<int:campaign_id>/export")
@op(
    "A campaign's export: pseudonymised judgments, decisions, the gold, TREC qrels, the agreement "
    "(organizers)",
    responses={200: m.ExportOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_export(campaign_id):
    u = need_user()
    files = campaign_exports.export_files(s=db(), actor=u, campaign=campaign_id)
    return json_out(
        m.ExportOut(campaign=campaign_id, files={k: v.decode("utf-8") for k, v in files.items()})
    )


@bp.post("/campaigns/<int:campaign_id>/bayes")
@op(
    "Ask a worker for the Bayesian agreement model of a campaign (organizers; audited)",
    body=m.BayesIn,
    responses={202: m.BayesFitOut},
    errors=(403, 404, 409, 422, 503),
    tags=("assessment",),
    description="Manjavacas et al.'s multilevel model (random intercepts for the assessor pair and "
    "the items' source work or stratum; a link's lexical overlap as a fixed effect) fitted by NUTS "
    "on the items every assigned assessor judged. One fit at a time per campaign; a fit that did "
    "not converge is stored as `not_converged`, without its figures.",
)
def campaign_bayes_request(campaign_id):
    u = need_user()
    campaign_actions.check_organizer(s=db(), actor=u, campaign=campaign_id)  # before the body
    body = body_model(m.BayesIn)
    got = model_actions.request_bayes(
        s=db(),
        actor=u,
        campaign=campaign_id,
        seed=body.seed,
        chains=body.chains,
        warmup=body.warmup,
        samples=body.samples,
        via="api",
    )
    return json_out(got, 202)


@bp.get("/campaigns/<int:campaign_id>/bayes")
@op(
    "The fits of a campaign's Bayesian agreement model, the newest first (organizers)",
    responses={200: m.BayesFitsOut},
    errors=(403, 404),
    tags=("assessment",),
)
def campaign_bayes_fits(campaign_id):
    u = need_user()
    return json_out(model_actions.show_bayes(s=db(), actor=u, campaign=campaign_id))
