"""The vectorised pooling of assessment campaigns (`scorer.pooling`) equals a naive computation."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict

import numpy as np
import pytest

from scorer import pooling
from server import models

WORDS = "arma virum cano troiae qui primus ab oris Italiam fato profugus".split()


def _naive_top(q, s, score, depth, snames):
    by_q = defaultdict(list)
    for i, (a, b) in enumerate(zip(q, s, strict=True)):
        by_q[a].append((0.0 if score is None else score[i], snames[b], b))
    out = set()
    for a, cands in by_q.items():
        cands.sort(reverse=True)  # score descending, then source id descending
        out.update((a, b) for _, _, b in cands[:depth])
    return out


def _run(rng, n_q, n_s, n, with_score=True, ties=False):
    pairs = set()
    while len(pairs) < n:
        pairs.add((rng.randrange(n_q), rng.randrange(n_s)))
    pairs = sorted(pairs, key=lambda _: rng.random())
    q = [a for a, _ in pairs]
    s = [b for _, b in pairs]
    score = None
    if with_score:
        score = [float(rng.randrange(3)) if ties else rng.random() for _ in pairs]
    return q, s, score


def test_top_k_equals_a_sort_per_query_with_trec_eval_ties():
    rng = random.Random(5)
    # names whose byte order differs from their index order, one with a non-ASCII letter
    snames = [f"src {rng.randrange(10**6):06d}" for _ in range(39)] + ["src æ"]
    rank = np.empty(len(snames), dtype=np.int64)
    rank[sorted(range(len(snames)), key=snames.__getitem__)] = np.arange(len(snames))
    for with_score, ties in ((True, False), (True, True), (False, False)):
        for depth in (1, 3, 50):
            q, s, score = _run(rng, 12, len(snames), 200, with_score, ties)
            keep = pooling.top_k(q, s, score, depth, rank)
            got = {(q[i], s[i]) for i in keep.tolist()}
            assert got == _naive_top(q, s, score, depth, snames)
            assert len(keep) == len(set(keep.tolist()))
    assert pooling.top_k([], [], None, 5, rank).size == 0


def test_union_keeps_each_link_once_with_the_runs_that_proposed_it():
    rng = np.random.default_rng(3)
    runs = [np.unique(rng.integers(0, 60, 40)) for _ in range(4)]
    codes, mask = pooling.union(runs)
    want = defaultdict(set)
    for i, r in enumerate(runs):
        for c in r.tolist():
            want[c].add(i)
    assert codes.tolist() == sorted(want)
    members = pooling.mask_members(mask)
    assert [set(m) for m in members] == [want[c] for c in codes.tolist()]
    assert pooling.union([])[0].size == 0


def test_shared_words_counts_word_types_as_sets_do():
    rng = random.Random(9)
    qtexts = [" ".join(rng.choices(WORDS, k=rng.randint(0, 8))) for _ in range(30)]
    stexts = [" ".join(rng.choices(WORDS, k=rng.randint(0, 8))).upper() for _ in range(25)]
    qi = [rng.randrange(30) for _ in range(300)]
    si = [rng.randrange(25) for _ in range(300)]
    word = re.compile(r"\w+")
    naive = [
        len(set(word.findall(qtexts[a].lower())) & set(word.findall(stexts[b].lower())))
        for a, b in zip(qi, si, strict=True)
    ]
    got = pooling.shared_words(qtexts, stexts, qi, si)
    assert got.tolist() == naive and max(naive) >= 4
    assert pooling.overlap_buckets(np.array([0, 1, 2, 3, 4, 9])).tolist() == [
        "0", "1", "2-3", "2-3", "4+", "4+",
    ]  # fmt: skip


def test_balanced_assignment_is_balanced_distinct_shuffled_and_seeded():
    for n_items, n_a, per in ((17, 5, 3), (40, 3, 3), (7, 4, 1), (0, 3, 2)):
        item, who, pos = pooling.balanced_assignment(n_items, n_a, per, seed=11)
        assert len(item) == n_items * per
        per_item = Counter(item.tolist())
        assert set(per_item.values()) <= {per} and len(per_item) == n_items
        assert len(set(zip(item.tolist(), who.tolist(), strict=True))) == len(item)
        loads = Counter(who.tolist())
        if n_items:
            assert max(loads.values()) - min(loads.values()) <= 1
        for a in loads:  # each assessor's positions are 0..n-1
            assert sorted(pos[who == a].tolist()) == list(range(loads[a]))
        again = pooling.balanced_assignment(n_items, n_a, per, seed=11)
        assert all((x == y).all() for x, y in zip(again, (item, who, pos), strict=True))
    item, who, pos = pooling.balanced_assignment(200, 3, 3, seed=1)
    orders = [item[who == a][np.argsort(pos[who == a])].tolist() for a in range(3)]
    assert len({tuple(o) for o in orders}) == 3 and all(o != sorted(o) for o in orders)


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_items_and_assignments_are_written_in_bulk_as_drawn(db, tmp_path, request):
    """`write_items` stores every item with its factors in the pool's order under consecutive
    ids, and exactly the assignment `balanced_assignment` draws (SQLite and PostgreSQL)."""
    from sqlmodel import Session, create_engine, select

    from server.domain.campaign_pool import Pool, write_items
    from server.models import (
        AssessmentCampaign,
        CampaignAssignment,
        CampaignItem,
        Competition,
        Phase,
        User,
    )

    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if db == "sqlite"
        else request.getfixturevalue("pg_server_url")
    )
    engine = create_engine(url)
    models.schema().create_all(engine)
    keys = [f"q {i % 7}\tsrc ü{i}" for i in range(250)]
    pool = Pool(
        keys, {"run": [[1, 2] if i % 3 else [3] for i in range(250)], "n": list(range(250))}
    )
    with Session(engine) as s:
        users = [User(email=f"p{i}-{db}@example.org", password_hash="x") for i in range(4)]
        comp = Competition(slug=f"pool-{db}", title="t")
        s.add_all([*users, comp])
        s.flush()
        phase = Phase(task_id="t", name="test", split="test")
        s.add(phase)
        s.flush()
        for n in (1, 2):  # two campaigns: the second's ids follow the first's
            c = AssessmentCampaign(
                competition_id=comp.id, task_id="t", phase_id=phase.id, depth=1, seed=n
            )
            s.add(c)
            s.flush()
            write_items(s, c.id, pool, [u.id for u in users], 3, seed=n)
            s.commit()
            items = list(
                s.exec(
                    select(CampaignItem)
                    .where(CampaignItem.campaign_id == c.id)
                    .order_by(CampaignItem.id)
                )
            )
            assert [i.key for i in items] == keys and [i.position for i in items] == list(
                range(250)
            )
            assert [i.factors for i in items] == [pool.factors(k) for k in range(250)]
            assert [i.id for i in items] == list(range(items[0].id, items[0].id + 250))
            got = {
                (a.item_id - items[0].id, a.user_id, a.position)
                for a in s.exec(
                    select(CampaignAssignment).where(CampaignAssignment.campaign_id == c.id)
                )
            }
            item, who, pos = pooling.balanced_assignment(250, 4, 3, seed=n)
            ids = [u.id for u in users]
            assert got == {
                (i, ids[w], p)
                for i, w, p in zip(item.tolist(), who.tolist(), pos.tolist(), strict=True)
            }
    engine.dispose()


def _trec_eval_ranks(q, s, score, snames) -> dict[tuple[int, int], int]:
    """Each link's rank in its query as trec_eval orders it (through pytrec_eval): one
    pseudo-query per link, with that link the only relevant one, so that its reciprocal rank
    says where trec_eval put it."""
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec_eval is not installed")
    by_q = defaultdict(dict)
    for i, (a, b) in enumerate(zip(q, s, strict=True)):
        by_q[a][snames[b]] = float(score[i])
    qrels, run = {}, {}
    for a, docs in by_q.items():
        for name in docs:
            key = f"{a}|{name}"
            qrels[key] = {name: 1}
            run[key] = dict(docs)
    got = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    index = {n: k for k, n in enumerate(snames)}
    return {
        (int(key.split("|", 1)[0]), index[key.split("|", 1)[1]]): round(1 / v["recip_rank"])
        for key, v in got.items()
    }


def test_top_k_takes_the_links_trec_eval_ranks_first_near_float32_ties():
    """Scores closer than float32's resolution tie in trec_eval (and the scorer) and are broken
    by descending source id: the pool takes the same top-k, not the one float64 would."""
    snames = ["a", "b"]
    rank = np.arange(2)
    # trec_eval: 0.91 and 0.9099999999999999 are one float32; the tie goes to source "b"
    keep = pooling.top_k([0, 0], [0, 1], [0.91, 0.9099999999999999], 1, rank)
    assert keep.tolist() == [1]
    assert _trec_eval_ranks([0, 0], [0, 1], [0.91, 0.9099999999999999], snames)[(0, 1)] == 1

    rng = random.Random(11)
    snames = [f"s{rng.randrange(10**6):06d}" for _ in range(30)]
    rank = np.empty(len(snames), dtype=np.int64)
    rank[sorted(range(len(snames)), key=snames.__getitem__)] = np.arange(len(snames))
    q, s, score = _run(rng, 6, len(snames), 150)
    # near-ties: many scores a few float64 ulps apart, within one float32
    base = [0.5, 0.25, 0.7]
    score = [base[k % 3] + rng.randrange(4) * 2e-17 * (k % 2) for k in range(len(q))]
    score = [x + rng.choice((0.0, 1e-9, -1e-9)) for x in score]
    ranks = _trec_eval_ranks(q, s, score, snames)
    for depth in (1, 2, 5, 13):
        keep = pooling.top_k(q, s, score, depth, rank)
        got = {(q[i], s[i]) for i in keep.tolist()}
        assert got == {link for link, r in ranks.items() if r <= depth}, depth
