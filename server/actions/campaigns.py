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
import secrets
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path

import numpy as np
from sqlalchemy import text
from sqlmodel import Session, select

from scorer import pooling, validate_file
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
WORD = pooling.WORD


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
    """The number of word types two texts share, bucketed: 0, 1, 2-3, 4+ (one pair; a pool counts
    them all at once with `scorer.pooling.shared_words`)."""
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


@dataclass
class Pool:
    """Pooled items in the pool's order: their keys and, column by column, their factors (a
    column per factor, so that millions of items cost a list per factor, not a dict each)."""

    keys: list[str]
    columns: dict[str, list] = dc_field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.keys)

    def factors(self, i: int) -> dict:
        return {name: col[i] for name, col in self.columns.items()}


def top_links(links, depth: int, qnames: list[str], snames: list[str]) -> set[tuple[str, str]]:
    """A run's top-`depth` links per query (by descending score, ties by descending source id)
    as (query id, source id) pairs."""
    keep = pooling.top_k(links.q, links.s, links.score, depth, _byte_rank(snames))
    q, s = np.asarray(links.q)[keep].tolist(), np.asarray(links.s)[keep].tolist()
    return {(qnames[a], snames[b]) for a, b in zip(q, s, strict=True)}


def _byte_rank(names: list[str]) -> np.ndarray:
    """Each name's rank in byte order (UTF-8 orders as code points do)."""
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return rank


def _gold_codes(store: TaskStore, split: str, qidx, sidx) -> np.ndarray:
    p = store.gold(split, "links.csv")
    if not p.is_file():
        return np.zeros(0, dtype=np.int64)
    n = len(sidx)
    with open(p, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        return np.asarray(
            [
                qidx[r[0]] * n + sidx[r[1]]
                for r in rows
                if len(r) >= 2 and r[0] in qidx and r[1] in sidx
            ],
            dtype=np.int64,
        )


def _earlier_keys(s: Session, task_id: str) -> set[str]:
    q = (
        select(CampaignItem.key)
        .join(AssessmentCampaign, AssessmentCampaign.id == CampaignItem.campaign_id)
        .where(AssessmentCampaign.task_id == task_id)
    )
    return set(s.exec(q))


def _pool_links(s, task, phase, depth, home, runs) -> Pool:
    """The links pool (see the module's docstring), vectorised (`scorer.pooling`): each run's
    top-`depth` codes, their union with a mask of the proposing runs, minus the gold and the
    earlier campaigns' items, in (query id, source id) order."""
    store = TaskStore(task.id, home)
    qidx, sidx = family(task, store, phase.split).ids()
    qnames, snames = list(qidx), list(sidx)
    n_s = len(snames)
    srank = _byte_rank(snames)
    codes = []
    for sub in runs:
        try:
            v = validate_file(task.id, path_for(home, sub.storage_key), phase.split, home)
        except (SubmissionInvalid, OSError) as e:
            raise LifecycleRefused(
                f"run {sub.id} cannot be read for the pool ({e}); hide it or rescore it first",
                "run_unreadable",
            ) from None
        links = v.parsed
        keep = pooling.top_k(links.q, links.s, links.score, depth, srank)
        codes.append(np.asarray(links.q)[keep] * n_s + np.asarray(links.s)[keep])
        del v, links
    pooled, mask = pooling.union(codes)
    del codes
    gold = _gold_codes(store, phase.split, qidx, sidx)
    drop = np.isin(pooled, gold)
    earlier = _earlier_keys(s, task.id)
    if earlier:
        known = []
        for key in earlier:
            q, _, src = key.partition(SEP)
            if q in qidx and src in sidx:
                known.append(qidx[q] * n_s + sidx[src])
        drop |= np.isin(pooled, np.asarray(known, dtype=np.int64))
    pooled, mask = pooled[~drop], mask[~drop]
    qi, si = pooled // n_s, pooled % n_s
    order = np.lexsort((srank[si], _byte_rank(qnames)[qi]))  # by query id, then source id
    qi, si, mask = qi[order], si[order], mask[order]
    qtext = segments(store, phase.split, "queries.csv")
    stext = segments(store, phase.split, "sources.csv")
    shared = pooling.shared_words(
        [qtext.get(x, "") for x in qnames], [stext.get(x, "") for x in snames], qi, si
    )
    gold_queries = np.zeros(len(qnames), dtype=bool)
    gold_queries[gold // n_s] = True
    run_ids = [sub.id for sub in runs]
    works = {}
    qi_l, si_l = qi.tolist(), si.tolist()
    return Pool(
        keys=[f"{qnames[a]}{SEP}{snames[b]}" for a, b in zip(qi_l, si_l, strict=True)],
        columns={
            "run": _run_lists(mask, run_ids),
            "source_work": [
                works.get(b) or works.setdefault(b, source_work(snames[b])) for b in si_l
            ],
            "overlap": pooling.overlap_buckets(shared).tolist(),
            "query_had_gold": np.where(gold_queries[qi], "yes", "no").tolist(),
        },
    )


def _run_lists(mask: np.ndarray, run_ids: list[int]) -> list[list[int]]:
    """The proposing runs' ids of each item, one shared list per distinct mask."""
    members = pooling.mask_members(mask)
    cache: dict[int, list[int]] = {}
    return [cache.setdefault(id(m), [run_ids[k] for k in m]) for m in members]


def _pool_instances(s, task, phase, depth, home, seed) -> Pool:
    store = TaskStore(task.id, home)
    earlier = _earlier_keys(s, task.id)
    strata: dict[str, list[str]] = defaultdict(list)
    for row in _inputs(store, phase.split):
        key = unit_id(row, task.format.key)
        if key not in earlier:
            strata[str(row.get(task.group_field, "all"))].append(key)
    rng = random.Random(seed)
    pool = Pool(keys=[], columns={"stratum": []})
    for stratum in sorted(strata):
        keys = sorted(strata[stratum])
        for key in sorted(rng.sample(keys, min(depth, len(keys)))):
            pool.keys.append(key)
            pool.columns["stratum"].append(stratum)
    return pool


def assign(keys: list[str], assessors: list[int], per_item: int, seed: int) -> dict[int, list[str]]:
    """Each key to `per_item` distinct assessors, loads differing by at most one, each
    assessor's keys in a seeded shuffled order (`scorer.pooling.balanced_assignment`)."""
    item, who, pos = pooling.balanced_assignment(len(keys), len(assessors), per_item, seed)
    got: dict[int, list[str]] = {a: [None] * 0 for a in assessors}
    slots: dict[int, dict[int, str]] = {a: {} for a in assessors}
    for i, w, p in zip(item.tolist(), who.tolist(), pos.tolist(), strict=True):
        slots[assessors[w]][p] = keys[i]
    for a in assessors:
        got[a] = [slots[a][p] for p in range(len(slots[a]))]
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


BATCH = 100_000  # rows per bulk write
ITEM_COLUMNS = ("id", "campaign_id", "key", "factors", "position")
ASSIGNMENT_COLUMNS = ("campaign_id", "item_id", "user_id", "position")


def _new_ids(s: Session, n: int) -> int:
    """The first of `n` consecutive new campaign item ids. PostgreSQL: drawn from the table's
    sequence in one statement (other transactions draw past them); SQLite: after the highest,
    safe because the campaign's own INSERT already holds SQLite's single write lock."""
    if s.get_bind().dialect.name == "postgresql":
        got = s.execute(
            text(
                "SELECT nextval(pg_get_serial_sequence('campaignitem', 'id')) "
                "FROM generate_series(1, :n)"
            ),
            {"n": n},
        ).scalars()
        ids = sorted(got)
        if ids and ids[-1] - ids[0] == n - 1:
            return ids[0]
        raise RuntimeError("the campaign item ids drawn are not consecutive")  # pragma: no cover
    return (s.execute(text("SELECT COALESCE(MAX(id), 0) FROM campaignitem")).scalar() or 0) + 1


def _bulk(s: Session, table: str, columns: tuple[str, ...], rows) -> None:
    """Write many rows: PostgreSQL's COPY, SQLite's executemany on the driver's connection (the
    ORM's per-row work is most of a bulk INSERT's time at a million rows)."""
    conn = s.connection()
    raw = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        with raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
    elif conn.dialect.name == "sqlite":
        raw.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            rows,
        )
    else:  # pragma: no cover - the two databases the server runs on are above
        conn.execute(
            text(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                f"({', '.join(':' + c for c in columns)})"
            ),
            [dict(zip(columns, r, strict=True)) for r in rows],
        )


def write_items(
    s: Session, campaign_id: int, pool: Pool, assessors: list[int], per_item: int, seed: int
) -> None:
    """Insert a campaign's items (in the pool's order, with consecutive ids) and their
    assignments (`scorer.pooling.balanced_assignment`) in bulk, `BATCH` rows at a time."""
    s.flush()
    first = _new_ids(s, len(pool)) if len(pool) else 1
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
    for lo in range(0, len(pool), BATCH):
        hi = min(lo + BATCH, len(pool))
        _bulk(
            s,
            "campaignitem",
            ITEM_COLUMNS,
            [
                (first + i, campaign_id, pool.keys[i], dumps(pool.factors(i)), i)
                for i in range(lo, hi)
            ],
        )
    item, who, pos = pooling.balanced_assignment(len(pool), len(assessors), per_item, seed)
    item_id = item + first
    users = np.asarray(assessors, dtype=np.int64)[who]
    for lo in range(0, len(item), BATCH):
        hi = min(lo + BATCH, len(item))
        _bulk(
            s,
            "campaignassignment",
            ASSIGNMENT_COLUMNS,
            list(
                zip(
                    [campaign_id] * (hi - lo),
                    item_id[lo:hi].tolist(),
                    users[lo:hi].tolist(),
                    pos[lo:hi].tolist(),
                    strict=True,
                )
            ),
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
