"""The pool of an assessment campaign: the texts its items show, the runs it draws from, each run's
top links per query (or a stratified sample of pairs), less gold and earlier campaigns, and the
bulk writes of its items and assignments (ids drawn in one statement; COPY or executemany).
No commit here: `server.actions.campaigns.open_campaign` owns the transaction."""

from __future__ import annotations

import csv
import functools
import json
import random
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dc_field

import numpy as np
from sqlalchemy import text
from sqlmodel import Session, select

from scorer import pooling, validate_file
from scorer.errors import SubmissionInvalid
from scorer.kinds import family
from server import objectstore
from server.domain import people
from server.exceptions import LifecycleRefused
from server.models import (
    AssessmentCampaign,
    CampaignItem,
    Registration,
    Submission,
)
from server.settings import get_settings
from tasks import catalogue
from tasks.base import unit_id
from tasks.store import TaskStore

SEP = "\t"  # between the query and the source id of a link item's key


KINDS = tuple(f.name for f in catalogue.FAMILY_LIST if f.poolable)  # ("instances", "links")


WORD = pooling.WORD


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


def split_inputs(store: TaskStore, split: str) -> list[dict]:
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


def ranked_runs(s: Session, task, board) -> list[Submission]:
    """Each team's ranked run of the phase and each baseline method's newest entry, as `board`
    (the organizers' preview of the phase's final ranking, built by the caller) picks them;
    hidden, removed and banned runs are not among them, nor the runs of suspended
    participants."""
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


def pool_links(s, task, phase, depth, home, runs) -> Pool:
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


def pool_instances(s, task, phase, depth, home, seed) -> Pool:
    store = TaskStore(task.id, home)
    earlier = _earlier_keys(s, task.id)
    strata: dict[str, list[str]] = defaultdict(list)
    for row in split_inputs(store, phase.split):
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
