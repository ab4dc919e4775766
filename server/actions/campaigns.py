"""Assessment campaigns: experts judge the candidates that the participants' ranked runs found.

An organizer opens a campaign on a task's phase (`open_campaign`). Its pool:
- a `links` task: the union over the phase's ranked runs (each team's ranked run, chosen as the
  board chooses it, `server.leaderboard.build_board`, and each baseline method's newest entry) of
  each run's top-`depth` predicted links per query, ranked by descending score, ties by
  descending source id (trec_eval's rule, as the scorer ranks them; a run without scores ties
  everywhere), minus the links the gold already has and the items of an earlier campaign on the
  task;
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

Not built yet (a later slice): adjudication, closing a campaign into a new gold version,
rescoring under it, condensed metrics, exports and the browser's assessment page; `state` is
"open" until then (`judge` already refuses a closed campaign).
"""

from __future__ import annotations

import csv
import functools
import json
import random
import re
import secrets
from collections import defaultdict
from pathlib import Path

import numpy as np
from sqlmodel import Session, select

from scorer import validate_file
from scorer.errors import SubmissionInvalid
from scorer.families import family
from server import api_models as m
from server import audit, leaderboard, people
from server.actions.common import phase as find_phase
from server.actions.common import require_organizer as require_task_organizer
from server.actions.common import task as find_task
from server.actions.competitions import require_organizer
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.inputs import CONTROL
from server.models import (
    AssessmentCampaign,
    CampaignAssignment,
    CampaignItem,
    Competition,
    Judgment,
    Phase,
    Submission,
    User,
    utcnow,
)
from server.settings import get_settings
from server.storage import path_for
from tasks import agreement_measures as am
from tasks.base import unit_id
from tasks.store import TaskStore

DEFAULT_LABELS = ["reference", "no reference"]
SEP = "\t"  # between the query and the source id of a link item's key
KINDS = ("links", "instances")
N_BOOT = 1000
WORD = re.compile(r"\w+", re.UNICODE)


# ----------------------------------------------------------------------------- finding


def _campaign(s: Session, campaign_id: int) -> tuple[AssessmentCampaign, Competition]:
    c = s.get(AssessmentCampaign, campaign_id)
    if c is None:
        raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
    return c, s.get(Competition, c.competition_id)


def _for_organizer(s: Session, actor: User | None, campaign_id: int):
    c, comp = _campaign(s, campaign_id)
    if actor is not None and not people.organizes(s, actor, comp.id):
        # no hint that the campaign exists to anyone without a role in its competition
        if people.role_of(s, actor, comp.id) is None:
            raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
        require_organizer(s, actor, comp)
    return c, comp


def _for_assessor(s: Session, user: User, campaign_id: int):
    """The campaign, for a person with a role in its competition (assessors judge; organizers
    may look at their own items); anyone else is told there is no such campaign."""
    c, comp = _campaign(s, campaign_id)
    if not people.has_role(s, user, comp.id, *people.ROLES):
        raise NotFound(f"no campaign {campaign_id}", "unknown_campaign")
    return c, comp


# ----------------------------------------------------------------------------- texts


@functools.lru_cache(maxsize=8)
def _segments(path: str, mtime: float, size: int) -> dict[str, str]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        return {r[0]: r[1] for r in rows if len(r) >= 2}


def segments(store: TaskStore, split: str, name: str) -> dict[str, str]:
    """seg_id -> text of a links task's public `queries.csv` or `sources.csv`."""
    p = store.public(split, name)
    if not p.is_file():
        return {}
    st = p.stat()
    return _segments(str(p), st.st_mtime, st.st_size)


def _inputs(store: TaskStore, split: str) -> list[dict]:
    p = store.public(split, "inputs.jsonl")
    if not p.is_file():
        return []
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def overlap_bucket(a: str, b: str) -> str:
    """The number of word types two texts share, bucketed: 0, 1, 2-3, 4+."""
    n = len(set(WORD.findall(a.lower())) & set(WORD.findall(b.lower())))
    return "0" if n == 0 else "1" if n == 1 else "2-3" if n <= 3 else "4+"


def source_work(source_id: str) -> str:
    """A source segment's work: its id without the last part ("verg. aen. 10.636" ->
    "verg. aen.")."""
    head, _, tail = source_id.strip().rpartition(" ")
    return head if head and tail else source_id


# ----------------------------------------------------------------------------- the pool


def ranked_runs(s: Session, task, phase: Phase) -> list[Submission]:
    """Each team's ranked run of the phase and each baseline method's newest entry, as the board
    (organizers' preview of the final ranking) picks them; hidden, removed and banned runs are
    not among them."""
    board = leaderboard.build_board(s, task, phase, audience="organizer", show_private=True)
    ids = [
        r.submission_id
        for r in board.rows
        if r.submission_id is not None
        and (r.row_type == "baseline" or (r.row_type == "team" and r.chosen_by))
    ]
    return [s.get(Submission, i) for i in sorted(set(ids))]


def top_links(links, depth: int, qnames: list[str], snames: list[str]) -> set[tuple[str, str]]:
    """A run's top-`depth` links per query: by descending score, ties by descending source id."""
    q = np.asarray(links.q)
    src = np.asarray(links.s)
    score = np.zeros(len(q)) if links.score is None else np.asarray(links.score, dtype=float)
    by_q: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for qi, si, sc in zip(q.tolist(), src.tolist(), score.tolist(), strict=True):
        by_q[qi].append((sc, snames[si]))
    out = set()
    for qi, cands in by_q.items():
        cands.sort(reverse=True)  # score descending, then source id descending
        out.update((qnames[qi], sid) for _, sid in cands[:depth])
    return out


def _gold_links(store: TaskStore, split: str) -> set[tuple[str, str]]:
    p = store.gold(split, "links.csv")
    if not p.is_file():
        return set()
    with open(p, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        return {(r[0], r[1]) for r in rows if len(r) >= 2}


def _earlier_keys(s: Session, task_id: str) -> set[str]:
    q = (
        select(CampaignItem.key)
        .join(AssessmentCampaign, AssessmentCampaign.id == CampaignItem.campaign_id)
        .where(AssessmentCampaign.task_id == task_id)
    )
    return set(s.exec(q))


def _pool_links(s, task, phase, depth, home, runs) -> dict[str, dict]:
    store = TaskStore(task.id, home)
    qidx, sidx = family(task, store, phase.split).ids()
    qnames, snames = list(qidx), list(sidx)
    proposed: dict[tuple[str, str], list[int]] = defaultdict(list)
    for sub in runs:
        try:
            v = validate_file(task.id, path_for(home, sub.storage_key), phase.split, home)
        except (SubmissionInvalid, OSError) as e:
            raise LifecycleRefused(
                f"run {sub.id} cannot be read for the pool ({e}); hide it or rescore it first",
                "run_unreadable",
            ) from None
        for link in top_links(v.parsed, depth, qnames, snames):
            proposed[link].append(sub.id)
    gold = _gold_links(store, phase.split)
    gold_queries = {q for q, _ in gold}
    qtext = segments(store, phase.split, "queries.csv")
    stext = segments(store, phase.split, "sources.csv")
    earlier = _earlier_keys(s, task.id)
    items = {}
    for (q, src), by in sorted(proposed.items()):
        key = f"{q}{SEP}{src}"
        if (q, src) in gold or key in earlier:
            continue
        items[key] = {
            "run": sorted(by),
            "source_work": source_work(src),
            "overlap": overlap_bucket(qtext.get(q, ""), stext.get(src, "")),
            "query_had_gold": "yes" if q in gold_queries else "no",
        }
    return items


def _pool_instances(s, task, phase, depth, home, seed) -> dict[str, dict]:
    store = TaskStore(task.id, home)
    earlier = _earlier_keys(s, task.id)
    strata: dict[str, list[str]] = defaultdict(list)
    for row in _inputs(store, phase.split):
        key = unit_id(row, task.format.key)
        if key not in earlier:
            strata[str(row.get(task.group_field, "all"))].append(key)
    rng = random.Random(seed)
    items = {}
    for stratum in sorted(strata):
        keys = sorted(strata[stratum])
        for key in sorted(rng.sample(keys, min(depth, len(keys)))):
            items[key] = {"stratum": stratum}
    return items


def assign(keys: list[str], assessors: list[int], per_item: int, seed: int) -> dict[int, list[str]]:
    """Each key to `per_item` distinct assessors, the least loaded first (ties in a seeded
    order), so that loads differ by at most one; each assessor's keys then shuffled with the same
    seeded generator."""
    rng = random.Random(seed)
    order = list(keys)
    rng.shuffle(order)
    load = {a: 0 for a in assessors}
    tiebreak = {a: rng.random() for a in assessors}
    got: dict[int, list[str]] = {a: [] for a in assessors}
    for key in order:
        chosen = sorted(assessors, key=lambda a: (load[a], tiebreak[a]))[:per_item]
        for a in chosen:
            load[a] += 1
            got[a].append(key)
        for a in chosen:  # the next ties fall elsewhere
            tiebreak[a] = rng.random()
    for a in assessors:
        rng.shuffle(got[a])
    return got


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
    for e in dict.fromkeys(x.strip().lower() for x in emails if x.strip()):
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
            select(CampaignAssignment, User.email, Judgment.id)
            .join(User, User.id == CampaignAssignment.user_id)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id, isouter=True)
            .where(CampaignAssignment.campaign_id == c.id)
        )
    )
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for _a, email, jid in rows:
        per[email][0] += 1
        per[email][1] += jid is not None
    return m.CampaignOut(
        id=c.id,
        competition=comp.slug,
        task=c.task_id,
        phase=phase.name,
        state=c.state,
        depth=c.depth,
        per_item=c.assessors_per_item,
        labels=list(c.labels),
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
            m.CampaignAssessorOut(email=e, assigned=v[0], judged=v[1])
            for e, v in sorted(per.items())
        ],
        items=[m.CampaignItemOut(id=i.id, key=i.key, factors=i.factors) for i in items]
        if with_items
        else None,
    )


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
    via: str,
) -> m.CampaignOut:
    """Pool the phase's ranked runs, assign the items to the assessors and record it all (the
    organizers of the task's competition). Audited; commits."""
    t = find_task(task)
    require_task_organizer(actor, s, task_id=t.id)
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
    if CONTROL.search(guideline or ""):
        raise UploadFieldsInvalid({"guideline": "control characters are not allowed"})
    users = _assessor_users(s, comp, assessors)
    if not 1 <= per_item <= len(users):
        raise UploadFieldsInvalid(
            {"per_item": f"between 1 and the number of assessors named ({len(users)})"}
        )
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    home = Path(get_settings().home)
    runs = ranked_runs(s, t, p)
    if t.kind == "links":
        if not runs:
            raise LifecycleRefused(
                f"{t.id}/{p.name} has no scored ranked run to pool", "nothing_to_pool"
            )
        pooled = _pool_links(s, t, p, depth, home, runs)
    else:
        pooled = _pool_instances(s, t, p, depth, home, seed)
    if not pooled:
        raise LifecycleRefused(
            f"the pool of {t.id}/{p.name} at depth {depth} is empty: every candidate is in the "
            "gold or in an earlier campaign",
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
        created_by=None if actor is None else actor.id,
    )
    s.add(c)
    s.flush()
    item_of = {}
    for pos, (key, factors) in enumerate(pooled.items()):
        it = CampaignItem(campaign_id=c.id, key=key, factors=factors, position=pos)
        s.add(it)
        item_of[key] = it
    s.flush()
    for uid, keys in assign(list(pooled), [u.id for u in users], per_item, seed).items():
        for pos, key in enumerate(keys):
            s.add(
                CampaignAssignment(
                    campaign_id=c.id, item_id=item_of[key].id, user_id=uid, position=pos
                )
            )
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
        seed=seed,
    )
    s.commit()
    return _out(s, c, comp, with_items=True)


def show_campaign(*, s: Session, actor: User | None, campaign: int) -> m.CampaignOut:
    """A campaign with its items and its counts per assessor (its competition's organizers)."""
    c, comp = _for_organizer(s, actor, campaign)
    return _out(s, c, comp, with_items=True)


def list_campaigns(*, s: Session, actor: User | None, task: str, phase: str) -> list[m.CampaignOut]:
    """The campaigns of a task's phase, newest first (its competition's organizers)."""
    t = find_task(task)
    require_task_organizer(actor, s, task_id=t.id)
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
        inputs = {unit_id(r, t.format.key): r for r in _inputs(store, phase.split)}
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
    s.commit()
    return m.JudgmentOut(
        campaign=c.id,
        item=item,
        label=j.label,
        comment=j.comment,
        created_at=j.created_at,
        updated_at=j.updated_at,
    )


# ----------------------------------------------------------------------------- agreement


def judgment_rows(s: Session, c: AssessmentCampaign) -> tuple[list, dict[int, dict], dict]:
    """(user id, item id, label) of every stored judgment, each item's factors, and how many
    assessors each item was assigned to."""
    q = (
        select(CampaignAssignment.user_id, CampaignAssignment.item_id, Judgment.label)
        .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
        .where(CampaignAssignment.campaign_id == c.id)
    )
    rows = list(s.exec(q))
    factors = {
        i.id: i.factors
        for i in s.exec(select(CampaignItem).where(CampaignItem.campaign_id == c.id))
    }
    assigned: dict[int, int] = defaultdict(int)
    for iid in s.exec(
        select(CampaignAssignment.item_id).where(CampaignAssignment.campaign_id == c.id)
    ):
        assigned[iid] += 1
    return rows, factors, assigned


def agreement(
    *, s: Session, actor: User | None, campaign: int, by: str | None = None
) -> m.AgreementOut:
    """Multi-kappa (and the agreement module's other measures) with percentile-bootstrap
    intervals (the campaign's seed) over the items every assigned assessor judged; with `by`,
    per level of that factor (an item proposed by several runs counts in each run's level). Its
    competition's organizers."""
    c, _comp = _for_organizer(s, actor, campaign)
    if by is not None and by not in m.FACTORS:
        raise UploadFieldsInvalid({"by": f"one of {', '.join(m.FACTORS)}"})
    rows, factors, assigned = judgment_rows(s, c)
    done: dict[int, int] = defaultdict(int)
    for _u, iid, _label in rows:
        done[iid] += 1
    complete = {iid for iid, n in done.items() if n == assigned[iid]}
    code = {label: float(k) for k, label in enumerate(c.labels)}
    table, kept = am.table_from_rows(
        [(str(u), str(iid), code[label]) for u, iid, label in rows if iid in complete],
        labels=[float(k) for k in range(len(c.labels))],
    )
    overall = am.agreement(table, n_boot=N_BOOT, seed=c.seed)
    overall["labels"] = list(c.labels)
    overall.pop("cohen", None)  # pairs of assessors: a later slice (pseudonymised)
    levels = None
    if by is not None:
        values: dict[str, list[bool]] = {}
        kept_ids = [int(x) for x in kept]
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


# ----------------------------------------------------------------------------- the way in


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
