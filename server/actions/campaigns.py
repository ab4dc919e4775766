"""Assessment campaigns: experts judge the candidates that the participants' ranked runs found.

An organizer opens a campaign on a task's phase (`open_campaign`). Its pool:
- a `links` task: the union over the phase's ranked runs (each team's ranked run, chosen as the
  board chooses it, `server.leaderboard.build_board`, and each baseline method's newest entry) of
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
new gold version of the split, `server.goldversions`, and every run of the task rescored under
it) and export it (`export_files`, `export_campaign`). The pages (`server/views/campaigns.py`)
translate to and from these actions.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
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
from server import audit, goldversions, leaderboard, objectstore, people, plots, publication
from server.actions.common import phase as find_phase
from server.actions.common import require_organizer as require_task_organizer
from server.actions.common import task as find_task
from server.actions.competitions import require_organizer
from server.db import lock_row
from server.emails import lookup_form
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.inputs import CONTROL
from server.models import (
    AssessmentCampaign,
    CampaignAssignment,
    CampaignDecision,
    CampaignItem,
    Competition,
    Judgment,
    Phase,
    Registration,
    Submission,
    Team,
    User,
    utcnow,
)
from server.provenance import check_provenance
from server.settings import get_settings
from tasks import agreement_measures as am
from tasks import catalogue
from tasks.base import unit_id
from tasks.store import TaskStore

DEFAULT_LABELS = ["reference", "no reference"]
SEP = "\t"  # between the query and the source id of a link item's key
KINDS = tuple(f.name for f in catalogue.FAMILY_LIST if f.poolable)  # ("instances", "links")
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


def check_organizer(*, s: Session, actor: User | None, campaign: int) -> None:
    """Refuse (404, or 403 to someone with another role in its competition) anyone who does not
    organize the campaign's competition: a route checks it before it reads a body."""
    _for_organizer(s, actor, campaign)


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
    not among them, nor the runs of suspended participants."""
    board = leaderboard.build_board(s, task, phase, audience="organizer", show_private=True)
    ids = [
        r.submission_id
        for r in board.rows
        if r.submission_id is not None
        and (r.row_type == "baseline" or (r.row_type == "team" and r.chosen_by))
    ]
    comp = people.competition_of_task(s, task.id)
    suspended = set()
    if comp is not None:
        suspended = set(
            s.exec(
                select(Registration.user_id).where(
                    Registration.competition_id == comp.id,
                    Registration.status.in_(("suspended", "banned")),
                )
            )
        )
    runs = [s.get(Submission, i) for i in sorted(set(ids))]
    return [r for r in runs if r.user_id is None or r.user_id not in suspended]


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
    top-`depth` codes and their union with a mask of the proposing runs, in (query id, source
    id) order; the gold links and earlier campaigns' items among them stay (marked `gold` for the
    organizers), so that nothing of the gold shows in what is left out."""
    store = TaskStore(task.id, home)
    qidx, sidx = family(task, store, phase.split).ids()
    qnames, snames = list(qidx), list(sidx)
    n_s = len(snames)
    srank = _byte_rank(snames)
    codes = []
    for sub in runs:
        try:
            local = objectstore.local_upload(get_settings(), sub.storage_key)  # or the store's
            v = validate_file(task.id, local, phase.split, home)
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
    in_gold = np.isin(pooled, gold)
    qi, si = pooled // n_s, pooled % n_s
    order = np.lexsort((srank[si], _byte_rank(qnames)[qi]))  # by query id, then source id
    qi, si, mask, in_gold = qi[order], si[order], mask[order], in_gold[order]
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
            "gold": np.where(in_gold, "yes", "no").tolist(),
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
    pos = _positive(c)
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
        positive=sorted(_positive(c), key=list(c.labels).index),
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
    # written in item order: the indexes on (item, user) then grow at their end, where a random
    # order would touch pages all over a table of millions of rows
    order = np.lexsort((who, item))
    item_id = item[order] + first
    users = np.asarray(assessors, dtype=np.int64)[who[order]]
    pos = pos[order]
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
    positive: list[str] | None = None,
    allow_participants: bool = False,
    via: str,
) -> m.CampaignOut:
    """Pool the phase's ranked runs, assign the items to the assessors and record it all (the
    organizers of the task's competition). An assessor who takes part in the competition
    (`participating`) is refused unless `allow_participants`. Audited; commits."""
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


@dataclass
class Judged:
    """The campaign's judgments as the agreement measures read them: the table over the items
    every assigned assessor judged (labels coded by their declared order), its item ids in the
    table's row order, every item's factors, the stored rows and the assignments per item."""

    table: am.Table
    kept: list[int]
    factors: dict[int, dict]
    rows: list
    assigned: dict[int, int]
    complete: set[int]


def judged_table(s: Session, c: AssessmentCampaign) -> Judged:
    """The table `agreement` measures (and the Bayesian model fits): the items every assigned
    assessor judged, one column per assessor."""
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
    return Judged(table, [int(x) for x in kept], factors, rows, assigned, complete)


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


def _decisions(s: Session, c: AssessmentCampaign) -> dict[int, CampaignDecision]:
    q = select(CampaignDecision).where(CampaignDecision.campaign_id == c.id)
    return {d.item_id: d for d in s.exec(q)}


def _undecided(votes, decided) -> list:
    """The items a close needs a decision for: neither decided nor unanimous and complete."""
    return [
        it for it, labels, done in votes if it.id not in decided and not _unanimous(labels, done)
    ]


def disagreements(*, s: Session, actor: User | None, campaign: int) -> m.DisagreementsOut:
    """The items whose judgments disagree or are not all in, with each label's count, the strict
    majority and the decision so far; unanimous complete items need none (its organizers)."""
    c, _comp = _for_organizer(s, actor, campaign)
    votes = _item_votes(s, c)
    decided = _decisions(s, c)
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
    c, comp = _for_organizer(s, actor, campaign)
    if c.state != "open":
        raise LifecycleRefused(f"campaign {c.id} is {c.state}: its decisions are final", "closed")
    reason = " ".join((reason or "").split())
    if CONTROL.search(reason) or len(reason) > 2000:
        raise UploadFieldsInvalid({"reason": "at most 2000 printable characters"})
    if majority == (item is not None):
        raise UploadFieldsInvalid({"majority": "either majority, or an item with its label"})
    votes = _item_votes(s, c)
    decided = _decisions(s, c)
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
    s.commit()
    return m.AdjudicateOut(
        campaign=c.id, decided=made, ties=ties, undecided=len(_undecided(votes, decided))
    )


# ----------------------------------------------------------------------------- closing


def _positive(c: AssessmentCampaign) -> set[str]:
    return set(c.positive or [c.labels[0]])


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


def close_campaign(
    *, s: Session, actor: User | None, campaign: int, enqueue=None, via: str
) -> m.CloseOut:
    """Close a campaign whose every item is decided (unanimous complete items decide
    themselves): write a new gold version of the phase's split (links: the accepted links added,
    the rejected pairs in `judged.csv`; pair tasks: the decided values, which must be numbers),
    mark every score under the old gold stale and queue the runs for rescoring (`enqueue(ids)`
    after the commit). A published ranking stays as published: the answer names the command
    that publishes a new version. Audited; commits."""
    c, comp = _for_organizer(s, actor, campaign)
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
    decided = _decisions(s, c)
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
        pos = _positive(c)
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
    v, undo = goldversions.write_version(
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
    try:
        # the new gold into the object store (when the site has one) before its row commits
        objectstore.push_tree(get_settings(), f"tasks/{t.id}")
        s.commit()
    except Exception:
        s.rollback()
        undo()  # the files go back with the transaction (e.g. another close took the version)
        with contextlib.suppress(Exception):
            objectstore.push_tree(get_settings(), f"tasks/{t.id}")
        raise
    ids = check_provenance(s.get_bind(), get_settings(), task_id=t.id)
    if enqueue is not None and ids:
        enqueue(ids)
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


def gold_versions(*, s: Session, actor: User | None, task: str) -> list[m.GoldVersionOut]:
    """The recorded versions of a task's gold, by split (its organizers)."""
    t = find_task(task)
    require_task_organizer(actor, s, task_id=t.id)
    return [_gold_version_out(v) for v in goldversions.versions(s, t.id)]


# ----------------------------------------------------------------------------- exports


def qrels_id(seg_id: str) -> str:
    """A segment id as a TREC qrels field: whitespace-separated files cannot hold its spaces,
    so "%" and whitespace are percent-encoded (`urllib.parse.unquote`
    gives the id back)."""
    return "".join(f"%{ord(ch):02X}" if ch == "%" or ch.isspace() else ch for ch in seg_id)


def _pseudonyms(rows) -> dict[int, str]:
    """A1..An for the assessors, in the order of their user ids (stable across exports)."""
    return {uid: f"A{k}" for k, uid in enumerate(sorted({r[0] for r in rows}), start=1)}


def export_files(*, s: Session, actor: User | None, campaign: int) -> dict[str, bytes]:
    """A campaign's export as file name -> bytes: `judgments.csv` (assessors pseudonymised A1..An,
    no emails), `decisions.csv`, `gold/` (the split's gold as the store holds it, after a close
    the new version), `qrels.txt` (TREC: `query 0 source rel`; links tasks), `agreement.json` and
    `agreement.svg` (its organizers)."""
    c, _comp = _for_organizer(s, actor, campaign)
    t = find_task(c.task_id)
    phase = s.get(Phase, c.phase_id)
    store = TaskStore(t.id, get_settings().home)
    q = (
        select(CampaignAssignment.user_id, CampaignItem.key, Judgment)
        .join(CampaignItem, CampaignItem.id == CampaignAssignment.item_id)
        .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
        .where(CampaignAssignment.campaign_id == c.id)
    )
    rows = sorted(s.exec(q), key=lambda r: (r[1], r[0]))
    alias = _pseudonyms(rows)
    out: dict[str, bytes] = {}

    def table(header, body) -> bytes:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(body)
        return buf.getvalue().encode("utf-8")

    def when(d) -> str:
        return d.replace(microsecond=0).isoformat() + "Z"

    out["judgments.csv"] = table(
        ("item", "assessor", "label", "comment", "judged_at"),
        [(key, alias[uid], j.label, j.comment, when(j.updated_at)) for uid, key, j in rows],
    )
    items = {i.id: i for i in s.exec(select(CampaignItem).where(CampaignItem.campaign_id == c.id))}
    decided = sorted(_decisions(s, c).values(), key=lambda d: items[d.item_id].key)
    out["decisions.csv"] = table(
        ("item", "label", "rule", "reason", "decided_at"),
        [(items[d.item_id].key, d.label, d.rule, d.reason, when(d.decided_at)) for d in decided],
    )
    gold_dir = store.root / "gold" / phase.split
    for p in sorted(gold_dir.rglob("*")) if gold_dir.is_dir() else []:
        if p.is_file():
            out[f"gold/{p.relative_to(gold_dir).as_posix()}"] = p.read_bytes()
    if t.kind == "links":
        rel = {
            (q_, s_): 1 for q_, s_ in goldversions.link_rows(store.gold(phase.split, "links.csv"))
        }
        for q_, s_ in goldversions.link_rows(store.gold(phase.split, goldversions.JUDGED)):
            rel.setdefault((q_, s_), 0)
        out["qrels.txt"] = "".join(
            f"{qrels_id(q_)} 0 {qrels_id(s_)} {r}\n" for (q_, s_), r in sorted(rel.items())
        ).encode("utf-8")
    ag = agreement(s=s, actor=actor, campaign=c.id)
    out["agreement.json"] = (
        json.dumps(ag.model_dump(mode="json", exclude_unset=True), indent=2, sort_keys=True) + "\n"
    ).encode("utf-8")
    ov = dict(ag.overall, level="overall", items=ag.counts["complete_items"])
    out["agreement.svg"] = plots.forest([ov], f"{t.id}: campaign {c.id}, multi-kappa")
    return out


def export_campaign(*, s: Session, actor: User | None, campaign: int, dest: Path) -> list[Path]:
    """Write the campaign's export (`export_files`) under `dest`; returns the paths written."""
    written = []
    for name, body in export_files(s=s, actor=actor, campaign=campaign).items():
        p = Path(dest) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)
        written.append(p)
    return written


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
