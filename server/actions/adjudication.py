"""Adjudication and closing of an assessment campaign: where the assessors disagree, the majority
rule or one decision with a reason (audited), and closing into a new gold version of the split
(every run of the task marked stale and rescored under it)."""

from __future__ import annotations

import contextlib
from collections import defaultdict

from sqlmodel import Session, select

from server import api_models as m
from server import objectstore
from server.actions.campaigns import for_organizer
from server.actions.common import action, require_organizer
from server.actions.common import task as find_task
from server.db import lock_row, on_rollback
from server.domain import audit, goldversions, publication
from server.domain.bounds import CONTROL
from server.domain.campaign_pool import SEP
from server.domain.judgments import judgment_rows, positive_keys
from server.domain.provenance import mark_stale
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs.dispatch import jobs
from server.models import (
    AssessmentCampaign,
    CampaignDecision,
    CampaignItem,
    Competition,
    Phase,
    User,
    utcnow,
)
from server.settings import get_settings
from tasks.store import TaskStore


def _item_votes(s: Session, c: AssessmentCampaign):
    """The campaign's items in pool order, each with its labels so far and whether every
    assigned assessor judged it."""
    rows, _factors, assigned = judgment_rows(s, c)
    votes: dict[int, list[str]] = defaultdict(list)
    for _u, iid, label in rows:
        votes[iid].append(label)
    items = list(
        s.exec(
            select(CampaignItem)
            .where(CampaignItem.campaign_id == c.id)
            .order_by(CampaignItem.position)
        )
    )
    return [
        (it, votes.get(it.id, []), len(votes.get(it.id, [])) == assigned[it.id]) for it in items
    ]


def _counts(labels: list[str], declared: list[str]) -> dict[str, int]:
    return {x: labels.count(x) for x in declared if x in labels}


def _strict_majority(labels: list[str]) -> str | None:
    if not labels:
        return None
    best = max(set(labels), key=lambda x: (labels.count(x), x))
    return best if labels.count(best) * 2 > len(labels) else None


def _unanimous(labels: list[str], complete: bool) -> str | None:
    return labels[0] if complete and labels and len(set(labels)) == 1 else None


def decisions(s: Session, c: AssessmentCampaign) -> dict[int, CampaignDecision]:
    q = select(CampaignDecision).where(CampaignDecision.campaign_id == c.id)
    return {d.item_id: d for d in s.exec(q)}


def _undecided(votes, decided) -> list:
    """The items a close needs a decision for: neither decided nor unanimous and complete."""
    return [
        it for it, labels, done in votes if it.id not in decided and not _unanimous(labels, done)
    ]


@action
def disagreements(*, s: Session, actor: User | None, campaign: int) -> m.DisagreementsOut:
    """The items whose judgments disagree or are not all in, with each label's count, the strict
    majority and the decision so far; unanimous complete items need none (its organizers)."""
    c, _comp = for_organizer(s, actor, campaign)
    votes = _item_votes(s, c)
    decided = decisions(s, c)
    out = []
    for it, labels, done in votes:
        if _unanimous(labels, done) and it.id not in decided:
            continue
        d = decided.get(it.id)
        if d is not None and d.rule == "unanimous":
            continue
        out.append(
            m.DisagreementOut(
                item=it.id,
                key=it.key,
                complete=done,
                counts=_counts(labels, list(c.labels)),
                majority=_strict_majority(labels),
                decision=None if d is None else d.label,
                rule=None if d is None else d.rule,
                reason="" if d is None else d.reason,
            )
        )
    unanimous = sum(1 for _it, labels, done in votes if _unanimous(labels, done))
    return m.DisagreementsOut(
        campaign=c.id,
        state=c.state,
        counts={
            "items": len(votes),
            "complete": sum(1 for v in votes if v[2]),
            "unanimous": unanimous,
            "disagreeing": sum(1 for _it, labels, done in votes if done and len(set(labels)) > 1),
            "decided": len(decided),
            "undecided": len(_undecided(votes, decided)),
        },
        items=out,
    )


def _decide(s, c, comp, actor, it, label, rule, reason, via) -> CampaignDecision:
    d = s.exec(select(CampaignDecision).where(CampaignDecision.item_id == it.id)).first()
    before = None if d is None else (d.label, d.rule)
    if d is None:
        d = CampaignDecision(campaign_id=c.id, item_id=it.id, label=label, rule=rule)
    d.label, d.rule, d.reason = label, rule, reason
    d.decided_by = None if actor is None else actor.id
    d.decided_at = utcnow()
    s.add(d)
    audit.record(
        s,
        actor,
        "campaign_decide",
        f"campaign:{c.id}/item:{it.id}",
        competition_id=comp.id,
        via=via,
        label=label,
        rule=rule,
        reason=reason,
        before=None if before is None else list(before),
    )
    return d


def _decision_out(it: CampaignItem, d: CampaignDecision) -> m.DecisionOut:
    return m.DecisionOut(
        item=it.id, key=it.key, label=d.label, rule=d.rule, reason=d.reason, decided_at=d.decided_at
    )


@action
def adjudicate(
    *,
    s: Session,
    actor: User | None,
    campaign: int,
    majority: bool = False,
    item: int | None = None,
    label: str | None = None,
    reason: str = "",
    via: str,
) -> m.AdjudicateOut:
    """Decide disagreeing items: with `majority`, every complete item with a strict majority
    label that no organizer decided gets that label (rule "majority"; ties are left and listed);
    with `item` and `label`, an organizer's decision with a reason, which may overrule anything.
    Every decision is audited; commits."""
    c, comp = for_organizer(s, actor, campaign)
    if c.state != "open":
        raise LifecycleRefused(f"campaign {c.id} is {c.state}: its decisions are final", "closed")
    reason = " ".join((reason or "").split())
    if CONTROL.search(reason) or len(reason) > 2000:
        raise UploadFieldsInvalid({"reason": "at most 2000 printable characters"})
    if majority == (item is not None):
        raise UploadFieldsInvalid({"majority": "either majority, or an item with its label"})
    votes = _item_votes(s, c)
    decided = decisions(s, c)
    made, ties = [], []
    if majority:
        if label is not None:
            raise UploadFieldsInvalid({"label": "the majority rule takes no label"})
        for it, labels, done in votes:
            d = decided.get(it.id)
            if not done or _unanimous(labels, done) or (d is not None and d.rule == "organizer"):
                continue
            win = _strict_majority(labels)
            if win is None:
                ties.append(it.id)
            elif d is None or d.label != win:
                d = _decide(s, c, comp, actor, it, win, "majority", reason or "majority rule", via)
                made.append(_decision_out(it, d))
                decided[it.id] = d
    else:
        found = [v for v in votes if v[0].id == item]
        if not found:
            raise NotFound(f"campaign {c.id} has no item {item}", "unknown_item")
        label = (label or "").strip()
        if label not in c.labels:
            raise UploadFieldsInvalid({"label": f"one of {', '.join(c.labels)}"})
        if not reason:
            raise UploadFieldsInvalid({"reason": "an organizer's decision needs a reason"})
        it = found[0][0]
        d = _decide(s, c, comp, actor, it, label, "organizer", reason, via)
        made.append(_decision_out(it, d))
        decided[it.id] = d
    return m.AdjudicateOut(
        campaign=c.id, decided=made, ties=ties, undecided=len(_undecided(votes, decided))
    )


def _gold_version_out(v) -> m.GoldVersionOut:
    return m.GoldVersionOut(
        task=v.task_id,
        split=v.split,
        version=v.version,
        sha256=v.sha256,
        parent_sha256=v.parent_sha256,
        reason=v.reason,
        campaign=v.campaign_id,
        added=v.added,
        judged_negative=v.judged_negative,
        created_at=v.created_at,
    )


@action
def close_campaign(*, s: Session, actor: User | None, campaign: int, via: str) -> m.CloseOut:
    """Close a campaign whose every item is decided (unanimous complete items decide
    themselves): write a new gold version of the phase's split (links: the accepted links added,
    the rejected pairs in `judged.csv`; pair tasks: the decided values, which must be numbers),
    mark every score under the old gold stale and queue the runs for rescoring (after the
    commit). A published ranking stays as published: the answer names the command
    that publishes a new version. Audited; commits."""
    c, comp = for_organizer(s, actor, campaign)
    # one close at a time in a competition: the gold files are written before the commit, so two
    # closes of one split (or of one campaign) must not interleave; the state is read again
    # under the lock
    lock_row(s, Competition, comp.id)
    s.refresh(c)
    if c.state != "open":
        raise LifecycleRefused(f"campaign {c.id} is already {c.state}", "closed")
    t = find_task(c.task_id)
    phase = s.get(Phase, c.phase_id)
    votes = _item_votes(s, c)
    decided = decisions(s, c)
    missing = _undecided(votes, decided)
    if missing:
        first = ", ".join(f"{it.id} ({it.key.replace(SEP, ' -> ')})" for it in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise LifecycleRefused(
            f"campaign {c.id}: {len(missing)} item(s) have no decision yet: {first}{more}; "
            "adjudicate them (--majority, or --item with --label and --reason) first",
            "undecided",
        )
    for it, labels, _done in votes:
        if it.id not in decided:
            decided[it.id] = _decide(
                s, c, comp, actor, it, labels[0], "unanimous", "every assessor agreed", via
            )
    by_item = {it.id: it for it, _labels, _done in votes}
    store = TaskStore(t.id, get_settings().home)
    if t.kind == "links":
        pos = positive_keys(c)
        pairs = {
            iid: tuple(by_item[iid].key.split(SEP, 1)) for iid in decided if SEP in by_item[iid].key
        }
        accepted = [pairs[i] for i, d in decided.items() if d.label in pos and i in pairs]
        rejected = [pairs[i] for i, d in decided.items() if d.label not in pos and i in pairs]
        files, added, negative = goldversions.links_gold(store, phase.split, accepted, rejected)
    else:
        values = {}
        for iid, d in decided.items():
            try:
                values[by_item[iid].key] = float(d.label)
            except ValueError:
                raise LifecycleRefused(
                    f"campaign {c.id}: item {iid} is decided {d.label!r}, which is no number: a "
                    "pair task's decided label becomes the instance's gold value",
                    "label_not_a_number",
                ) from None
        files, added, negative = goldversions.instances_gold(store, phase.split, t, values)
    reason = f"gold extended by campaign {c.id}"
    # should the transaction roll back, the files go back (write_version's undo) and then the
    # object store is given them again (hooks run in reverse order)
    on_rollback(s, lambda: _push_quietly(t.id))
    v, _undo = goldversions.write_version(
        s,
        store,
        phase.split,
        files,
        reason=reason,
        campaign_id=c.id,
        added=added,
        judged_negative=negative,
        actor_id=None if actor is None else actor.id,
    )
    c.state = "closed"
    s.add(c)
    rules = defaultdict(int)
    for d in decided.values():
        rules[d.rule] += 1
    audit.record(
        s,
        actor,
        "campaign_close",
        f"{t.id}/{phase.name}/campaign:{c.id}",
        competition_id=comp.id,
        via=via,
        gold_version=v.version,
        gold_sha256=v.sha256,
        parent_sha256=v.parent_sha256,
        added=added,
        judged_negative=negative,
        decisions=dict(rules),
    )
    # the new gold into the object store (when the site has one) before its row commits
    objectstore.push_tree(get_settings(), f"tasks/{t.id}")
    ids = mark_stale(s, get_settings(), task_id=t.id)  # the scores under the old gold
    jobs(s).rescore(s, ids)
    published = []
    for p in s.exec(select(Phase).where(Phase.task_id == t.id, Phase.split == phase.split)):
        rv = publication.latest_ranking(s, p.id)
        if rv is not None:
            published.append(
                m.PublishedOut(
                    phase=p.name,
                    version=rv.version,
                    command=f'palimpsest organizer publish {t.id} {p.name} --reason "{reason}"',
                )
            )
    return m.CloseOut(
        campaign=c.id,
        state=c.state,
        gold=_gold_version_out(v),
        decisions=dict(sorted(rules.items())),
        rescoring=sorted(ids),
        published=published,
    )


def _push_quietly(task_id: str) -> None:
    with contextlib.suppress(Exception):
        objectstore.push_tree(get_settings(), f"tasks/{task_id}")


@action
def gold_versions(*, s: Session, actor: User | None, task: str) -> list[m.GoldVersionOut]:
    """The recorded versions of a task's gold, by split (its organizers)."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    return [_gold_version_out(v) for v in goldversions.versions(s, t.id)]
