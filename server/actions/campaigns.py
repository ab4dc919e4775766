"""Assessment campaigns: experts judge the candidates that the participants' ranked runs found.

An organizer opens a campaign on a task's phase (`open_campaign`). Its pool:
- a `links` task: the union over the phase's ranked runs (each team's ranked run, chosen as the
  board chooses it, `server.boards.leaderboard.build_board`, and each baseline method's newest
  entry) of
  each run's top-`depth` predicted links per query, ranked by descending score, ties by
  descending source id (trec_eval's rule, as the scorer ranks them; a run without scores ties
  everywhere). The gold links the runs proposed and the items of earlier campaigns stay in the
  pool, judged blind like every other item: a pool without them would tell an assessor who knows
  a run (their own) which of its top links are gold. The gold items (factor `gold`) also measure
  each assessor against the gold, for the organizers only (`CampaignOut.assessors`). An assessor
  with a team or runs in the competition is refused unless the organizer says so
  (`allow_participants`), and named on the campaign's page;
- an `instances` (pair) task: `depth` instances per stratum (the task's group field), sampled
  with the campaign's seed, minus the items of an earlier campaign, for re-judgment.
Each item goes to `per_item` assessors, balanced (every assessor's load differs by at most one),
and each assessor gets their items in an order shuffled with the recorded seed, so that the
order says nothing of which or how many runs proposed an item.

An assessor (`my_items`, `judge`) sees their own items in their order with the texts from the
task's public inputs, and their own judgments: never the runs, their scores, or anyone else's
judgment. The organizers (`agreement`) read multi-kappa with its bootstrap interval
(`tasks.agreement_measures`) over the items every assigned assessor judged, overall and by a
factor of the items.

The organizers then decide where the assessors disagree (`disagreements`, `adjudicate`: the
majority rule in one step, or one item with a reason), close the campaign (`close_campaign`: a
new gold version of the split, `server.domain.goldversions`, and every run of the task rescored
under
it) and export it (`export_files`, `export_campaign`). The pages (`server/web/campaigns.py`)
translate to and from these actions.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from pathlib import Path

import numpy as np
from sqlmodel import Session, select

from server import api_models as m
from server.actions.common import action, require_organizer
from server.actions.common import phase as find_phase
from server.actions.common import task as find_task
from server.boards import leaderboard
from server.domain import audit, people
from server.domain.bounds import CONTROL
from server.domain.campaign_pool import (
    KINDS,
    SEP,
    pool_instances,
    pool_links,
    ranked_runs,
    segments,
    split_inputs,
    write_items,
)
from server.domain.emails import lookup_form
from server.domain.judgments import judged_table, positive_keys
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.models import (
    AssessmentCampaign,
    CampaignAssignment,
    CampaignItem,
    Competition,
    Judgment,
    Phase,
    Submission,
    Team,
    User,
    utcnow,
)
from server.settings import get_settings
from tasks import agreement_measures as am
from tasks.base import unit_id
from tasks.store import TaskStore

DEFAULT_LABELS = ["reference", "no reference"]
N_BOOT = 1000


# ----------------------------------------------------------------------------- finding


def _campaign(s: Session, campaign_id: int) -> tuple[AssessmentCampaign, Competition]:
    c = s.get(AssessmentCampaign, campaign_id)
    if c is None:
        raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
    return c, s.get(Competition, c.competition_id)


def for_organizer(s: Session, actor: User | None, campaign_id: int):
    """The campaign and its competition, for an organizer of it (`common.require_organizer`: no
    hint that the campaign exists to anyone without a role in its competition)."""
    c, comp = _campaign(s, campaign_id)
    require_organizer(actor, s, campaign_id=campaign_id)
    return c, comp


@action
def check_organizer(*, s: Session, actor: User | None, campaign: int) -> None:
    """Refuse (404, or 403 to someone with another role in its competition) anyone who does not
    organize the campaign's competition: a route checks it before it reads a body."""
    for_organizer(s, actor, campaign)


def _for_assessor(s: Session, user: User, campaign_id: int):
    """The campaign, for a person with a role in its competition (assessors judge; organizers
    may look at their own items); anyone else is told there is no such campaign."""
    c, comp = _campaign(s, campaign_id)
    if not people.has_role(s, user, comp.id, *people.ROLES):
        raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
    return c, comp


# ----------------------------------------------------------------------------- texts


# ----------------------------------------------------------------------------- the pool


# ----------------------------------------------------------------------------- organizers


def _labels(labels: list[str] | None) -> list[str]:
    if labels is None:
        return list(DEFAULT_LABELS)
    clean = [x.strip() for x in labels]
    if any(not x or CONTROL.search(x) or len(x) > 64 for x in clean):
        raise UploadFieldsInvalid({"labels": "each label is 1 to 64 printable characters"})
    if len(set(clean)) != len(clean):
        raise UploadFieldsInvalid({"labels": "the labels repeat"})
    if len(clean) < 2:
        raise UploadFieldsInvalid({"labels": "declare at least two labels"})
    return clean


def _assessor_users(s: Session, comp: Competition, emails: list[str]) -> list[User]:
    users, missing = [], []
    for e in dict.fromkeys(lookup_form(x) for x in emails if x.strip()):
        u = s.exec(select(User).where(User.email == e)).first()
        if u is None or not (people.role_of(s, u, comp.id) in people.ROLES or people.is_admin(u)):
            missing.append(e)
        else:
            users.append(u)
    if missing:
        raise UploadFieldsInvalid(
            {
                "assessors": f"not assessors of {comp.slug!r}: {', '.join(missing)} (give them "
                "the assessor role in the competition first)"
            }
        )
    if not users:
        raise UploadFieldsInvalid({"assessors": "name at least one assessor"})
    return users


def participating(s: Session, comp: Competition, users: list[User]) -> list[str]:
    """The emails of those among `users` who take part in the competition: a team there (or one
    of every competition), or a run of their own on one of its tasks (baselines aside). Such an
    assessor knows a run, and so what a pool holds of it."""
    tasks = people.task_ids(s, comp.id)
    out = []
    for u in users:
        if people.membership(s, u, comp.id) is not None:
            out.append(u.email)
            continue
        run = s.exec(
            select(Submission.id)
            .join(Team, Team.id == Submission.team_id)
            .where(
                Submission.user_id == u.id,
                Submission.task_id.in_(tasks),
                Team.is_baseline.is_(False),
            )
            .limit(1)
        ).first()
        if run is not None:
            out.append(u.email)
    return sorted(out)


def _out(s: Session, c: AssessmentCampaign, comp: Competition, with_items: bool):
    phase = s.get(Phase, c.phase_id)
    items = list(
        s.exec(
            select(CampaignItem)
            .where(CampaignItem.campaign_id == c.id)
            .order_by(CampaignItem.position)
        )
    )
    rows = list(
        s.exec(
            select(CampaignAssignment, User.email, Judgment.id, Judgment.label)
            .join(User, User.id == CampaignAssignment.user_id)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id, isouter=True)
            .where(CampaignAssignment.campaign_id == c.id)
        )
    )
    in_gold = {i.id for i in items if (i.factors or {}).get("gold") == "yes"}
    pos = positive_keys(c)
    # assigned, judged, gold items judged, gold items judged as a link
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for a, email, jid, label in rows:
        per[email][0] += 1
        per[email][1] += jid is not None
        if jid is not None and a.item_id in in_gold:
            per[email][2] += 1
            per[email][3] += label in pos
    users = list(
        s.exec(
            select(User).where(
                User.id.in_(
                    select(CampaignAssignment.user_id).where(CampaignAssignment.campaign_id == c.id)
                )
            )
        )
    )
    return m.CampaignOut(
        id=c.id,
        competition=comp.slug,
        task=c.task_id,
        phase=phase.name,
        state=c.state,
        depth=c.depth,
        per_item=c.assessors_per_item,
        labels=list(c.labels),
        positive=sorted(positive_keys(c), key=list(c.labels).index),
        guideline=c.guideline,
        seed=c.seed,
        runs=list(c.runs),
        created_at=c.created_at,
        counts=m.CampaignCounts(
            items=len(items),
            assignments=len(rows),
            judgments=sum(1 for r in rows if r[2] is not None),
        ),
        assessors=[
            m.CampaignAssessorOut(
                email=e,
                assigned=v[0],
                judged=v[1],
                gold_judged=v[2] if c.runs else None,
                gold_agreed=v[3] if c.runs else None,
            )
            for e, v in sorted(per.items())
        ],
        participants=participating(s, comp, users),
        items=[m.CampaignItemOut(id=i.id, key=i.key, factors=i.factors) for i in items]
        if with_items
        else None,
    )


@action
def open_campaign(
    *,
    s: Session,
    actor: User | None,
    task: str,
    phase: str,
    depth: int,
    assessors: list[str],
    per_item: int = 3,
    labels: list[str] | None = None,
    guideline: str = "",
    seed: int | None = None,
    positive: list[str] | None = None,
    allow_participants: bool = False,
    via: str,
) -> m.CampaignOut:
    """Pool the phase's ranked runs, assign the items to the assessors and record it all (the
    organizers of the task's competition). An assessor who takes part in the competition
    (`participating`) is refused unless `allow_participants`. Audited; commits."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    p = find_phase(s, t.id, phase)
    comp = people.ensure_competition(s, t.id)
    if t.kind not in KINDS:
        raise LifecycleRefused(
            f"task {t.id!r} is a {t.kind} task: campaigns pool links and pair tasks only",
            "campaign_kind",
        )
    if depth < 1:
        raise UploadFieldsInvalid({"depth": "at least 1"})
    labels = _labels(labels)
    if positive is not None:
        positive = list(dict.fromkeys(x.strip() for x in positive))
        if not positive or not set(positive) < set(labels):
            raise UploadFieldsInvalid(
                {"positive": f"some but not all of the labels ({', '.join(labels)})"}
            )
    if CONTROL.search(guideline or ""):
        raise UploadFieldsInvalid({"guideline": "control characters are not allowed"})
    users = _assessor_users(s, comp, assessors)
    if not 1 <= per_item <= len(users):
        raise UploadFieldsInvalid(
            {"per_item": f"between 1 and the number of assessors named ({len(users)})"}
        )
    taking_part = participating(s, comp, users)
    if taking_part and not allow_participants:
        raise LifecycleRefused(
            f"assessors who take part in {comp.slug!r} (a team or runs of their own): "
            f"{', '.join(taking_part)}; they know their runs, and so what the pool holds of them. "
            "Name other assessors, or open it anyway (allow_participants, --allow-participants, "
            "the form's box)",
            "assessor_participates",
        )
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    home = Path(get_settings().home)
    board = leaderboard.build_board(s, t, p, audience="organizer", show_private=True)
    runs = ranked_runs(s, t, board)
    if t.kind == "links":
        if not runs:
            raise LifecycleRefused(
                f"{t.id}/{p.name} has no scored ranked run to pool", "nothing_to_pool"
            )
        pooled = pool_links(s, t, p, depth, home, runs)
    else:
        pooled = pool_instances(s, t, p, depth, home, seed)
    if not pooled:
        raise LifecycleRefused(
            f"the pool of {t.id}/{p.name} at depth {depth} is empty: "
            + (
                "the runs propose no link"
                if t.kind == "links"
                else "every instance is in an earlier campaign"
            ),
            "nothing_to_pool",
        )
    c = AssessmentCampaign(
        competition_id=comp.id,
        task_id=t.id,
        phase_id=p.id,
        depth=depth,
        assessors_per_item=per_item,
        labels=labels,
        guideline=guideline or "",
        seed=seed,
        runs=[r.id for r in runs] if t.kind == "links" else [],
        positive=positive,
        created_by=None if actor is None else actor.id,
    )
    s.add(c)
    s.flush()
    write_items(s, c.id, pooled, [u.id for u in users], per_item, seed)
    audit.record(
        s,
        actor,
        "campaign_open",
        f"{t.id}/{p.name}/campaign:{c.id}",
        competition_id=comp.id,
        via=via,
        depth=depth,
        per_item=per_item,
        items=len(pooled),
        runs=c.runs,
        assessors=[u.email for u in users],
        participants=taking_part,
        seed=seed,
    )
    return _out(s, c, comp, with_items=True)


@action
def show_campaign(*, s: Session, actor: User | None, campaign: int) -> m.CampaignOut:
    """A campaign with its items and its counts per assessor (its competition's organizers)."""
    c, comp = for_organizer(s, actor, campaign)
    return _out(s, c, comp, with_items=True)


@action
def list_campaigns(*, s: Session, actor: User | None, task: str, phase: str) -> list[m.CampaignOut]:
    """The campaigns of a task's phase, newest first (its competition's organizers)."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    p = find_phase(s, t.id, phase)
    comp = people.competition_of_task(s, t.id)  # a reading makes nothing
    if comp is None:  # a campaign is opened in a competition: none without one
        return []
    q = select(AssessmentCampaign).where(AssessmentCampaign.phase_id == p.id)
    return [
        _out(s, c, comp, with_items=False) for c in s.exec(q.order_by(AssessmentCampaign.id.desc()))
    ]


# ----------------------------------------------------------------------------- assessors


def _item_view(c, store, split, item, a, j, qtext, stext, inputs) -> m.AssessItemOut:
    fields: dict = dict(
        item=item.id,
        position=a.position,
        label=None if j is None else j.label,
        comment="" if j is None else j.comment,
        judged_at=None if j is None else j.updated_at,
    )
    if SEP in item.key:
        q, src = item.key.split(SEP, 1)
        fields |= dict(
            query=q, candidate=src, query_text=qtext.get(q), candidate_text=stext.get(src)
        )
    else:
        fields |= dict(query=item.key, fields=inputs.get(item.key))
    return m.AssessItemOut(**fields)


@action
def my_items(*, s: Session, user: User, campaign: int) -> m.AssessOut:
    """The signed-in assessor's items in their own order, with the texts and their own
    judgments; nothing of the runs, the scores or the other assessors."""
    c, _comp = _for_assessor(s, user, campaign)
    t = find_task(c.task_id)
    phase = s.get(Phase, c.phase_id)
    store = TaskStore(t.id, get_settings().home)
    rows = list(
        s.exec(
            select(CampaignAssignment, CampaignItem, Judgment)
            .join(CampaignItem, CampaignItem.id == CampaignAssignment.item_id)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id, isouter=True)
            .where(CampaignAssignment.campaign_id == c.id, CampaignAssignment.user_id == user.id)
            .order_by(CampaignAssignment.position)
        )
    )
    qtext = stext = {}
    inputs: dict = {}
    if t.kind == "links":
        qtext = segments(store, phase.split, "queries.csv")
        stext = segments(store, phase.split, "sources.csv")
    elif rows:
        inputs = {unit_id(r, t.format.key): r for r in split_inputs(store, phase.split)}
    items = [_item_view(c, store, phase.split, it, a, j, qtext, stext, inputs) for a, it, j in rows]
    return m.AssessOut(
        campaign=c.id,
        task=c.task_id,
        state=c.state,
        labels=list(c.labels),
        guideline=c.guideline,
        judged=sum(1 for i in items if i.label is not None),
        total=len(items),
        items=items,
    )


@action
def judge(
    *, s: Session, user: User, campaign: int, item: int, label: str, comment: str = "", via: str
) -> m.JudgmentOut:
    """Record (or change) the assessor's judgment of an item assigned to them, while the campaign
    is open; the label is one the campaign declared. Audited; commits."""
    c, comp = _for_assessor(s, user, campaign)
    a = s.exec(
        select(CampaignAssignment).where(
            CampaignAssignment.campaign_id == c.id,
            CampaignAssignment.item_id == item,
            CampaignAssignment.user_id == user.id,
        )
    ).first()
    if a is None:
        raise NotFound(f"item {item} of campaign {c.id} is not assigned to you", "not_assigned")
    if c.state != "open":
        raise LifecycleRefused(f"campaign {c.id} is {c.state}: it takes no judgments", "closed")
    label = (label or "").strip()
    if label not in c.labels:
        raise UploadFieldsInvalid({"label": f"one of {', '.join(c.labels)}"})
    comment = (comment or "").strip()
    if CONTROL.search(comment) or len(comment) > 2000:
        raise UploadFieldsInvalid({"comment": "at most 2000 printable characters"})
    j = s.exec(select(Judgment).where(Judgment.assignment_id == a.id)).first()
    before = None
    now = utcnow()
    if j is None:
        j = Judgment(assignment_id=a.id, label=label, comment=comment, created_at=now)
    else:
        before = j.label
        j.label, j.comment = label, comment
    j.updated_at = now
    s.add(j)
    audit.record(
        s,
        user,
        "campaign_judge" if before is None else "campaign_rejudge",
        f"campaign:{c.id}/item:{item}",
        competition_id=comp.id,
        via=via,
        label=label if before is None else [before, label],
    )
    return m.JudgmentOut(
        campaign=c.id,
        item=item,
        label=j.label,
        comment=j.comment,
        created_at=j.created_at,
        updated_at=j.updated_at,
    )


# ----------------------------------------------------------------------------- agreement


@action
def agreement(
    *, s: Session, actor: User | None, campaign: int, by: str | None = None
) -> m.AgreementOut:
    """Multi-kappa (and the agreement module's other measures) with percentile-bootstrap
    intervals (the campaign's seed) over the items every assigned assessor judged; with `by`,
    per level of that factor (an item proposed by several runs counts in each run's level). Its
    competition's organizers."""
    c, _comp = for_organizer(s, actor, campaign)
    if by is not None and by not in m.FACTORS:
        raise UploadFieldsInvalid({"by": f"one of {', '.join(m.FACTORS)}"})
    judged = judged_table(s, c)
    table, kept, factors = judged.table, judged.kept, judged.factors
    rows, assigned, complete = judged.rows, judged.assigned, judged.complete
    overall = am.agreement(table, n_boot=N_BOOT, seed=c.seed)
    overall["labels"] = list(c.labels)
    overall["note"] = am.KAPPA_NOTE
    overall.pop("cohen", None)  # pairs of assessors: a later slice (pseudonymised)
    levels = None
    if by is not None:
        values: dict[str, list[bool]] = {}
        kept_ids = kept
        for pos, iid in enumerate(kept_ids):
            v = (factors.get(iid) or {}).get(by)
            for level in v if isinstance(v, list) else [v]:
                if level is None:
                    continue
                name = f"run {level}" if by == "run" else str(level)
                values.setdefault(name, [False] * len(kept_ids))[pos] = True
        levels = am.by_factor(
            table, {k: np.asarray(v) for k, v in sorted(values.items())}, n_boot=N_BOOT, seed=c.seed
        )
        for lv in levels:
            lv["labels"] = list(c.labels)
        overall["expected_by_level"] = {
            "multi_kappa": am.EXPECTED_NOTE["level"],
            "multi_kappa_dataset_expected": am.EXPECTED_NOTE["dataset"],
        }
    return m.AgreementOut(
        campaign=c.id,
        by=by,
        counts={
            "items": len(factors),
            "complete_items": len(complete),
            "assignments": sum(assigned.values()),
            "judgments": len(rows),
        },
        overall=overall,
        levels=levels,
    )


# ----------------------------------------------------------------------------- adjudication


# ----------------------------------------------------------------------------- closing


# ----------------------------------------------------------------------------- exports


# ----------------------------------------------------------------------------- the way in


@action
def my_campaigns(*, s: Session, user: User | None) -> list[m.MyCampaignOut]:
    """The campaigns that give the signed-in person items to judge, newest first, with how many
    of their own items they have judged (nothing of anyone else's)."""
    if user is None:
        return []
    q = (
        select(AssessmentCampaign, Competition.slug, CampaignAssignment.id, Judgment.id)
        .join(CampaignAssignment, CampaignAssignment.campaign_id == AssessmentCampaign.id)
        .join(Competition, Competition.id == AssessmentCampaign.competition_id)
        .join(Judgment, Judgment.assignment_id == CampaignAssignment.id, isouter=True)
        .where(CampaignAssignment.user_id == user.id)
    )
    got: dict[int, list] = {}
    for c, slug, _aid, jid in s.exec(q):
        row = got.setdefault(c.id, [c, slug, 0, 0])
        row[2] += 1
        row[3] += jid is not None
    out = []
    for c, slug, total, judged in sorted(got.values(), key=lambda r: -r[0].id):
        if not people.has_role(s, user, c.competition_id, *people.ROLES):
            continue  # a role taken away takes the campaign's items with it
        phase = s.get(Phase, c.phase_id)
        out.append(
            m.MyCampaignOut(
                campaign=c.id,
                competition=slug,
                task=c.task_id,
                phase=phase.name if phase else "",
                state=c.state,
                judged=judged,
                total=total,
            )
        )
    return out
