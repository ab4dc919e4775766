"""Assessment campaigns on the web: the assessor's page (one item at a time, judged with a button
or a key) and the organizers' pages (a phase's campaigns, the form that opens one, a campaign's
progress and agreement). Everything goes through server.actions.campaigns."""

from __future__ import annotations

import io
import re
import zipfile

from flask import (
    Blueprint,
    abort,
    flash,
    redirect,
    render_template,
    request,
    send_file,
    url_for,
)
from markupsafe import Markup, escape

from server.actions import adjudication, campaign_exports
from server.actions import campaign_models as model_actions
from server.actions import campaigns as campaign_actions
from server.api_models import FACTORS
from server.db import db
from server.domain.sanitize import render_markdown
from server.exceptions import LifecycleRefused, NotFound, QueueUnreachable, UploadFieldsInvalid
from server.models import AssessmentCampaign, Phase
from server.web.auth import current_user, login_required, organizer_required
from server.web.forms import CampaignForm
from server.web.pages import phase_or_404
from tasks import get_task

bp = Blueprint("campaigns", __name__)

WORD = re.compile(r"\w+", re.UNICODE)
# the factors of each kind of task's items (server.actions.campaigns: pool_links, pool_instances)
FACTORS_OF = {
    "links": ("run", "source_work", "overlap", "query_had_gold", "gold"),
    "instances": ("stratum",),
}
# a pair task's two texts: fields named alike but for a last 1/2 or a/b (context1, context2)
_PAIRED = re.compile(r"^(.*?)(?:_?)([12ab])$")


# ----------------------------------------------------------------------------- texts


def highlight(text: str | None, other: str | None) -> Markup:
    """`text` escaped, each word token it shares with `other` (case-folded) in a <mark>."""
    text = text or ""
    mine = {w.lower() for w in WORD.findall(text)}
    shared = mine & {w.lower() for w in WORD.findall(other or "")}
    out, at = [], 0
    for mo in WORD.finditer(text):
        if mo.group(0).lower() in shared:
            out.append(escape(text[at : mo.start()]))
            out.append(Markup("<mark>") + escape(mo.group(0)) + Markup("</mark>"))
            at = mo.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


def pair_texts(fields: dict) -> tuple[tuple[str, str], tuple[str, str], dict]:
    """A pair task's two texts ((name, text) each) and its other fields: the two string fields
    named alike but for a last 1/2 or a/b with the most text (context1/context2, text_a/text_b),
    else the two longest string fields."""
    strings = {k: v for k, v in fields.items() if isinstance(v, str)}
    stems: dict[str, dict[str, str]] = {}
    for k in strings:
        mo = _PAIRED.match(k)
        if mo:
            stems.setdefault(mo.group(1), {})[mo.group(2)] = k
    pairs = [
        (d["1"], d["2"]) if "1" in d and "2" in d else (d["a"], d["b"])
        for d in stems.values()
        if {"1", "2"} <= d.keys() or {"a", "b"} <= d.keys()
    ]
    if pairs:
        a, b = max(pairs, key=lambda p: len(strings[p[0]]) + len(strings[p[1]]))
    else:
        longest = sorted(strings, key=lambda k: -len(strings[k]))[:2] + ["", ""]
        a, b = sorted(longest[:2], key=list(fields).index) if longest[1] else (longest[0], "")
    rest = {k: v for k, v in fields.items() if k not in (a, b)}
    return (a, strings.get(a, "")), (b, strings.get(b, "")), rest


def _sides(it) -> tuple[dict, dict, dict]:
    """The item's two sides (title, id, highlighted text) and its other fields."""
    if it.fields is None:  # a link: the query and the candidate source segment
        return (
            {"title": "Query", "id": it.query, "text": highlight(it.query_text, it.candidate_text)},
            {
                "title": "Candidate source",
                "id": it.candidate,
                "text": highlight(it.candidate_text, it.query_text),
            },
            {},
        )
    (ka, ta), (kb, tb), rest = pair_texts(it.fields)
    return (
        {"title": ka or "Text 1", "id": it.query, "text": highlight(ta, tb)},
        {"title": kb or "Text 2", "id": None, "text": highlight(tb, ta)},
        rest,
    )


# ----------------------------------------------------------------------------- assessors


def _assess_page(campaign_id: int, item_id: int | None, code: int = 200, errors=None, typed=None):
    got = campaign_actions.my_items(s=db(), user=current_user(), campaign=campaign_id)
    items = got.items
    at, done = None, False
    if items:
        if item_id is not None:
            at = next((k for k, it in enumerate(items) if it.item == item_id), None)
            if at is None:
                abort(404)
        else:  # resume: the first item not judged yet
            at = next((k for k, it in enumerate(items) if it.label is None), None)
            done = at is None
            at = 0 if at is None else at
    it = items[at] if at is not None else None
    left, right, rest = _sides(it) if it is not None else ({}, {}, {})
    return render_template(
        "campaigns/assess.html",
        a=got,
        it=it,
        at=at,
        done=done,
        left=left,
        right=right,
        rest=rest,
        prev=items[at - 1].item if at else None,
        next=items[at + 1].item if at is not None and at + 1 < len(items) else None,
        guideline=Markup(render_markdown(got.guideline)) if got.guideline else "",
        errors=errors or {},
        typed=typed,
    ), code


@bp.route("/campaigns/<int:campaign_id>/assess")
@login_required
def assess(campaign_id: int):
    """One of the signed-in assessor's items: the one asked for, else the first not judged."""
    return _assess_page(campaign_id, request.args.get("item", type=int))


@bp.route("/campaigns/<int:campaign_id>/assess/<int:item_id>", methods=["POST"])
@login_required
def judge(campaign_id: int, item_id: int):
    """Record the judgment of an item, then go on to the next item not judged yet."""
    s = db()
    label = (request.form.get("label") or "")[:64]
    comment = (request.form.get("comment") or "")[:4000]
    try:
        campaign_actions.judge(
            s=s,
            user=current_user(),
            campaign=campaign_id,
            item=item_id,
            label=label,
            comment=comment,
            via="web",
        )
    except UploadFieldsInvalid as e:
        return _assess_page(campaign_id, item_id, 400, e.fields, {"comment": comment})
    except LifecycleRefused as e:
        return _assess_page(campaign_id, item_id, 409, {"": e.message}, {"comment": comment})
    items = campaign_actions.my_items(s=s, user=current_user(), campaign=campaign_id).items
    here = next((k for k, it in enumerate(items) if it.item == item_id), 0)
    # the next item not judged yet after this one, coming round to the start
    for it in items[here + 1 :] + items[:here]:
        if it.label is None:
            return redirect(url_for("campaigns.assess", campaign_id=campaign_id, item=it.item))
    return redirect(url_for("campaigns.assess", campaign_id=campaign_id))


# ----------------------------------------------------------------------------- organizers


def _phase_campaigns_page(p: Phase, form: CampaignForm, code: int = 200):
    got = campaign_actions.list_campaigns(
        s=db(), actor=current_user(), task=p.task_id, phase=p.name
    )
    return render_template(
        "campaigns/phase.html",
        phase=p,
        task=get_task(p.task_id),
        campaigns=got,
        form=form,
        field_errors=any(f.errors for f in form),
    ), code


@bp.route("/organizer/phases/<int:phase_id>/campaigns", methods=["GET", "POST"])
@organizer_required
def phase_campaigns(phase_id: int):
    """A phase's campaigns and the form that opens one."""
    p = phase_or_404(phase_id)
    if request.method != "POST":
        return _phase_campaigns_page(p, CampaignForm(formdata=None))
    form = CampaignForm()
    if not form.validate():
        return _phase_campaigns_page(p, form, 400)
    s = db()
    try:
        got = campaign_actions.open_campaign(
            s=s,
            actor=current_user(),
            task=p.task_id,
            phase=p.name,
            depth=form.depth.data,
            assessors=form.emails(),
            per_item=form.per_item.data,
            labels=form.label_list(),
            guideline=form.guideline.data or "",
            seed=form.seed.data,
            allow_participants=bool(form.allow_participants.data),
            via="web",
        )
    except UploadFieldsInvalid as e:
        for k, msg in e.fields.items():
            if k in form and k != "csrf_token":
                form[k].errors = [*form[k].errors, msg]
            else:
                form.form_errors.append(f"{k}: {msg}")
        return _phase_campaigns_page(p, form, 400)
    except (LifecycleRefused, NotFound) as e:
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _phase_campaigns_page(p, form, 409 if isinstance(e, LifecycleRefused) else 404)
    flash(
        f"Campaign {got.id} opened: {got.counts.items} items, {got.counts.assignments} "
        "assignments.",
        "ok",
    )
    return redirect(url_for("campaigns.campaign", campaign_id=got.id))


def _campaign_page(campaign_id: int, code: int = 200, **refused_form):
    """The organizer's campaign page; `refused_form` carries a refused form's message, its
    field errors, the item it was about and what was typed."""
    s = db()
    u = current_user()
    c = campaign_actions.show_campaign(s=s, actor=u, campaign=campaign_id)
    kind = get_task(c.task).kind
    factors = FACTORS_OF.get(kind, FACTORS)
    by = request.args.get("by") or None
    by_error = None
    if by is not None and by not in factors:
        code, by_error = (
            400,
            f"{by[:40]!r} is not a factor of this campaign: one of " + ", ".join(factors),
        )
        by = None
    agreement = campaign_actions.agreement(s=s, actor=u, campaign=campaign_id, by=by)
    disagreements = adjudication.disagreements(s=s, actor=u, campaign=campaign_id)
    written = [
        v
        for v in adjudication.gold_versions(s=s, actor=u, task=c.task)
        if v.campaign == campaign_id
    ]
    fits = model_actions.show_bayes(s=s, actor=u, campaign=campaign_id).fits
    return render_template(
        "campaigns/campaign.html",
        c=c,
        phase=s.get(Phase, s.get(AssessmentCampaign, campaign_id).phase_id),
        agreement=agreement,
        factors=factors,
        by=by,
        by_error=by_error,
        fit=fits[0] if fits else None,
        guideline=Markup(render_markdown(c.guideline)) if c.guideline else "",
        disagreements=disagreements,
        written=written,
        adj={
            "message": None,
            "errors": {},
            "item": None,
            "typed": {},
            "top": False,
            **refused_form,
        },
    ), code


@bp.route("/organizer/campaigns/<int:campaign_id>")
@organizer_required
def campaign(campaign_id: int):
    """A campaign: its state, labels, guideline, counts, each assessor's progress and the
    agreement so far, overall and by a chosen factor (computed on each visit); then the items
    that need a decision, the decisions made, closing and the export."""
    return _campaign_page(campaign_id)


def _refused(campaign_id: int, e: Exception, item: int | None = None, typed=None, top=False):
    """The campaign page again with an action's refusal: 400 for fields, 409 for a state, 404
    for an item the campaign does not have; beside the item's form, under Adjudication, or (a
    refused close: the page opens at its top) above the page's title."""
    typed = typed or {}
    if isinstance(e, UploadFieldsInvalid):
        return _campaign_page(campaign_id, 400, errors=e.fields, item=item, typed=typed)
    code = 409 if isinstance(e, LifecycleRefused) else 404
    message = f"{e.message[:1].upper()}{e.message[1:]}."
    return _campaign_page(campaign_id, code, message=message, item=item, typed=typed, top=top)


@bp.route("/organizer/campaigns/<int:campaign_id>/adjudicate", methods=["POST"])
@organizer_required
def adjudicate(campaign_id: int):
    """The majority rule in one step (`majority`), or one item decided with a label and a
    reason (`item`, `label`, `reason`)."""
    s = db()
    campaign_actions.check_organizer(s=s, actor=current_user(), campaign=campaign_id)
    majority = request.form.get("majority") == "1"
    raw_item = (request.form.get("item") or "").strip()
    label = (request.form.get("label") or "")[:64] or None
    reason = (request.form.get("reason") or "")[:4000]
    typed = {"label": label or "", "reason": reason}
    item = None
    if not majority:
        if not raw_item.isdigit():
            e = UploadFieldsInvalid({"item": "an item of this campaign (its number)"})
            return _refused(campaign_id, e, typed=typed)
        item = int(raw_item)
    try:
        got = adjudication.adjudicate(
            s=s,
            actor=current_user(),
            campaign=campaign_id,
            majority=majority,
            item=item,
            label=None if majority else label,
            reason=reason,
            via="web",
        )
    except (UploadFieldsInvalid, LifecycleRefused, NotFound) as e:
        return _refused(campaign_id, e, item, typed)
    if majority:
        ties = ", ".join(map(str, got.ties))
        ties = f"; ties left for a person: items {ties}" if ties else ""
        flash(
            f"The majority rule decided {len(got.decided)} item"
            f"{'s' if len(got.decided) != 1 else ''}{ties}. {got.undecided} still undecided.",
            "ok",
        )
    else:
        d = got.decided[0]
        flash(f"Item {d.item} decided {d.label!r}. {got.undecided} still undecided.", "ok")
    return redirect(url_for("campaigns.campaign", campaign_id=campaign_id))


@bp.route("/organizer/campaigns/<int:campaign_id>/close", methods=["POST"])
@organizer_required
def close(campaign_id: int):
    """Close the campaign into a new gold version of its split; its runs are queued for
    rescoring. Refused (the page again, the undecided items named) while an item needs a
    decision."""
    s = db()
    try:
        got = adjudication.close_campaign(
            s=s, actor=current_user(), campaign=campaign_id, via="web"
        )
    except (LifecycleRefused, NotFound) as e:
        return _refused(campaign_id, e, top=True)
    g = got.gold
    flash(
        f"Campaign {got.campaign} closed: gold v{g.version} of {g.task}/{g.split} written "
        f"({g.added} added, {g.judged_negative} judged negative); {len(got.rescoring)} run"
        f"{'s' if len(got.rescoring) != 1 else ''} queued for rescoring.",
        "ok",
    )
    for p in got.published:
        flash(
            f"The published ranking of phase {p.phase} (version {p.version}) stays as published; "
            f"to rank under the new gold, publish a new version: {p.command}",
            "ok",
        )
    return redirect(url_for("campaigns.campaign", campaign_id=campaign_id))


@bp.route("/organizer/campaigns/<int:campaign_id>/export.zip")
@organizer_required
def export(campaign_id: int):
    """The campaign's export (`export_files`) as one zip file."""
    s = db()
    files = campaign_exports.export_files(s=s, actor=current_user(), campaign=campaign_id)
    c = s.get(AssessmentCampaign, campaign_id)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            # a fixed time stamp: the same export gives the same bytes
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, files[name])
    return send_file(
        io.BytesIO(buf.getvalue()),
        mimetype="application/zip",
        as_attachment=True,
        download_name=f"campaign-{campaign_id}-{c.task_id}.zip",
        max_age=0,
    )


@bp.route("/organizer/campaigns/<int:campaign_id>/bayes", methods=["POST"])
@organizer_required
def bayes(campaign_id: int):
    """Ask a worker for the Bayesian agreement model (the campaign page's button), with the
    campaign's seed and the default settings; back to the page, which shows the latest fit."""
    s = db()
    try:
        got = model_actions.request_bayes(
            s=s,
            actor=current_user(),
            campaign=campaign_id,
            via="web",
        )
    except (LifecycleRefused, UploadFieldsInvalid, QueueUnreachable) as e:
        flash(f"Not requested: {e.message}.", "error")
    else:
        flash(f"Fit {got.id} of the Bayesian model is queued: a worker fits it.", "ok")
    return redirect(url_for("campaigns.campaign", campaign_id=campaign_id) + "#bayes")
