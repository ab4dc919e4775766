"""STR's human agreement (tasks/agreement_str.py): split-half reliability of the raw Best-Worst-
Scaling annotations a checkout keeps in `BWS_annotations/`.

On a small project-written checkout (Track A from `write_track_a`, and BWS files in the upstream
layout with its quirks, written here from made-up annotators, no upstream row): the counting scores
equal a naive count of the annotations the writer made; the split equals a naive per-tuple loop
over the same draws and the reliability a naive loop of scipy correlations over those splits; the
seed reproduces the figure; the import records it, `palimpsest agreement str` prints it and the
board shows one unranked human row per language it covers."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from cli.main import main
from server.domain import accounts
from tasks import get_task
from tasks.agreement import reference_rows
from tasks.agreement_str import (
    SEED,
    bws_scores,
    gold_check,
    item_key,
    read_annotations,
    split_correlations,
    split_half_reliability,
    split_halves,
    str_agreement,
)
from tasks.importers import import_task
from tasks.semrel import write_track_a
from tasks.store import TaskStore
from tasks.str_release import read_pairs

HEADER = [
    "SentPair1",
    "SentPair2",
    "SentPair3",
    "SemPair4",
    "Best",
    "Worst",
]  # upstream's, typo included
HEADER2 = [
    "Item1",
    "Item2",
    "Item3",
    "Item4",
    "Most related",
    "Least related",
]  # repeated mid-file upstream


def _items(release: Path, lang: str) -> list[tuple[str, str, float]]:
    out = []
    for name in (
        f"{lang}_train.csv",
        f"{lang}_dev_with_labels.csv",
        f"{lang}_test_with_labels.csv",
    ):
        p = release / "Track A" / lang / name
        if p.is_file():
            out += [(r["sentence1"], r["sentence2"], r["score"]) for r in read_pairs(p, True, lang)]
    return out


def _cell(s1: str, s2: str, rng: random.Random) -> str:
    """An item cell as upstream writes it (a Python list literal), with its quirks now and then: a
    space lost between two words, a character after the closing bracket, the bracket missing."""
    x = rng.random()
    if x < 0.15 and " " in s1:
        i = s1.index(" ")
        s1 = s1[:i] + s1[i + 1 :]
    text = repr([s1, s2])
    if 0.15 <= x < 0.2:
        text += rng.choice([".", ",", "4"])
    elif 0.2 <= x < 0.21:
        text = text[:-1]
    return text


def write_bws(path: Path, items, rng: random.Random, rounds: int = 5, lonely: int = 2) -> list:
    """A BWS file over `items` ((s1, s2, latent)): `rounds` shuffles of the items cut into 4-tuples,
    each tuple annotated 1 to 3 times by a noisy annotator, and `lonely` tuples of items seen
    nowhere else, annotated once (so some item is always missing from one half). Returns the
    annotations as (the four (s1, s2), best position, worst position), 1-based as in the file."""
    truth = []
    for _ in range(rounds):
        order = list(range(len(items)))
        rng.shuffle(order)
        for j in range(0, len(order) - 3, 4):
            tup = [items[k] for k in order[j : j + 4]]
            for _ in range(rng.choice([1, 2, 2, 3])):
                noisy = [it[2] + rng.gauss(0, 0.2) for it in tup]
                best = max(range(4), key=noisy.__getitem__) + 1
                worst = min(range(4), key=noisy.__getitem__) + 1
                truth.append(([(a, b) for a, b, _ in tup], best, worst))
    for n in range(lonely):
        tup = [(f"lonely {n} {i} one", f"lonely {n} {i} two") for i in range(4)]
        truth.append((tup, 1 + n % 4, 1 + (n + 2) % 4))
    rows = [
        [_cell(a, b, rng) for a, b in tup] + [str(best), str(worst)] for tup, best, worst in truth
    ]
    rows.insert(len(rows) // 2, HEADER2)
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([HEADER] + rows)
    return truth


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A Track A checkout with BWS_annotations/: esp_bws.csv, kinyarwanda.csv (a full-name file, as
    upstream's marathi.csv) and xyz_bws.csv (not a str language)."""
    root = write_track_a(
        tmp_path_factory.mktemp("semrel") / "Semantic_Relatedness_SemEval2024", size=120
    )
    d = root / "BWS_annotations"
    d.mkdir()
    rng = random.Random(11)
    truth = {
        "esp": write_bws(d / "esp_bws.csv", _items(root, "esp"), rng),
        "kin": write_bws(d / "kinyarwanda.csv", _items(root, "kin"), rng, rounds=4),
    }
    write_bws(
        d / "xyz_bws.csv",
        [(f"xyz {i}", f"xyz {i} b", rng.random()) for i in range(12)],
        rng,
        rounds=2,
    )
    return root, truth


def naive_scores(truth) -> dict[str, float]:
    best, worst, seen = {}, {}, {}
    for tup, b, w in truth:
        keys = [item_key(a, c) for a, c in tup]
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
        best[keys[b - 1]] = best.get(keys[b - 1], 0) + 1
        worst[keys[w - 1]] = worst.get(keys[w - 1], 0) + 1
    return {k: (best.get(k, 0) - worst.get(k, 0)) / n for k, n in seen.items()}


def test_counting_scores_equal_a_naive_count_of_what_was_written(checkout):
    root, truth = checkout
    ann = read_annotations([root / "BWS_annotations" / "esp_bws.csv"])
    assert ann.skipped["headers"] == 1 and len(ann.best) == len(truth["esp"])
    assert ann.spellings > len(ann.items)  # a lost space is the same item
    want = naive_scores(truth["esp"])
    s, n = bws_scores(ann)
    got = dict(zip(ann.items, s, strict=True))
    assert set(got) == set(want)
    assert max(abs(got[k] - want[k]) for k in want) < 1e-12
    # a mask selects annotations: the first 40 only
    take = np.zeros(len(ann.best), bool)
    take[:40] = True
    s40, _ = bws_scores(ann, take)
    want40 = naive_scores(truth["esp"][:40])  # the repeated header sits in the middle, after these
    got40 = {k: v for k, v in zip(ann.items, s40, strict=True) if not np.isnan(v)}
    assert set(got40) == set(want40) and max(abs(got40[k] - want40[k]) for k in want40) < 1e-12


def naive_halves(group, n_splits, seed):
    rng = np.random.default_rng(seed)
    u = rng.random((n_splits, len(group)))
    coin = rng.random((n_splits, int(max(group)) + 1))
    out = np.zeros((n_splits, len(group)), bool)
    for r in range(n_splits):
        for g in set(group.tolist()):
            idx = [i for i in range(len(group)) if group[i] == g]
            idx.sort(key=lambda i: u[r, i])
            k = len(idx) // 2 + (1 if len(idx) % 2 == 1 and coin[r, g] < 0.5 else 0)
            for i in idx[:k]:
                out[r, i] = True
    return out


def naive_shr(ann, halves, items=None):
    rhos, rs = [], []
    keep = set(range(len(ann.items))) if items is None else set(np.flatnonzero(items).tolist())
    for h in halves:
        half_scores = []
        for side in (True, False):
            b, w, n = {}, {}, {}
            for t in range(len(ann.best)):
                if h[t] != side:
                    continue
                for i in ann.tuples[t]:
                    n[int(i)] = n.get(int(i), 0) + 1
                b[int(ann.best[t])] = b.get(int(ann.best[t]), 0) + 1
                w[int(ann.worst[t])] = w.get(int(ann.worst[t]), 0) + 1
            half_scores.append({i: (b.get(i, 0) - w.get(i, 0)) / c for i, c in n.items()})
        both = sorted(set(half_scores[0]) & set(half_scores[1]) & keep)
        x = [half_scores[0][i] for i in both]
        y = [half_scores[1][i] for i in both]
        rhos.append(stats.spearmanr(x, y).statistic)
        rs.append(stats.pearsonr(x, y).statistic)
    return float(np.mean(rhos)), float(np.mean(rs))


def test_the_split_and_the_reliability_equal_a_naive_loop_over_the_same_splits(checkout):
    root, _ = checkout
    ann = read_annotations([root / "BWS_annotations" / "esp_bws.csv"])
    sizes = set(np.bincount(ann.group).tolist())
    assert {1, 2, 3} <= sizes  # odd counts, and tuples annotated once
    halves = split_halves(ann.group, 30, 7)
    assert (halves == naive_halves(ann.group, 30, 7)).all()
    for g in range(ann.group.max() + 1):  # each tuple cut into int(N/2) and the rest
        first = halves[:, ann.group == g].sum(axis=1)
        n = int((ann.group == g).sum())
        assert set(first.tolist()) <= {n // 2, n - n // 2}
    rho, r, used = split_correlations(ann, halves)
    assert used.max() < len(ann.items)  # an item of a lonely tuple is always missing from one half
    want_rho, want_r = naive_shr(ann, halves)
    assert abs(rho.mean() - want_rho) < 1e-12 and abs(r.mean() - want_r) < 1e-12
    got = split_half_reliability(ann, 30, 7)
    assert got["spearman"] == round(want_rho, 6) and got["pearson"] == round(want_r, 6)
    assert (got["splits"], got["seed"]) == (30, 7)
    # over a subset of the items (as for the release's pairs only)
    mask = np.arange(len(ann.items)) % 5 != 0
    rho_m, r_m, _ = split_correlations(ann, halves, mask)
    want_rho_m, want_r_m = naive_shr(ann, halves, mask)
    assert abs(rho_m.mean() - want_rho_m) < 1e-12 and abs(r_m.mean() - want_r_m) < 1e-12
    assert abs(rho_m.mean() - want_rho) > 1e-9  # the mask changes the figure: the test can tell


def test_the_seed_reproduces_the_figure(checkout):
    root, _ = checkout
    ann = read_annotations([root / "BWS_annotations" / "esp_bws.csv"])
    a, b = split_half_reliability(ann, 200, SEED), split_half_reliability(ann, 200, SEED)
    assert a == b and a["seed"] == SEED
    c = split_half_reliability(ann, 200, SEED + 1)
    assert c["spearman"] != a["spearman"]
    assert 0.3 < a["spearman"] < 1.0  # the made-up annotators agree, noisily


def test_the_gold_check_tells_a_reproduced_score_from_one_that_is_not(checkout):
    root, _ = checkout
    ann = read_annotations([root / "BWS_annotations" / "esp_bws.csv"])
    s, _ = bws_scores(ann)
    gold = {
        k: round((v + 1) / 2, 2)
        for k, v in zip(ann.items, s, strict=True)
        if not k.startswith("lonely")
    }
    g = gold_check(ann, gold)
    assert g["reproduced"] and g["within_rounding"] == 1.0 and g["cannot_be_counts"] == 0
    assert g["matched"] == len(gold) and g["annotated_items_not_in_release"] == 8
    k = next(iter(gold))
    gold[k] = round(gold[k] + 0.13, 2) if gold[k] < 0.5 else round(gold[k] - 0.13, 2)
    g = gold_check(ann, gold)
    assert not g["reproduced"] and g["within_rounding"] == (len(gold) - 1) / len(gold)


def test_the_import_records_it_and_the_command_prints_it(checkout, tmp_path):
    root, _ = checkout
    m = import_task("str", tmp_path / "h", source=root)
    got = m["agreement"]
    assert got == json.loads(json.dumps(str_agreement(root, m["languages"])))
    assert set(got["languages"]) == {"esp", "kin"} and got["other_files"] == ["xyz_bws.csv"]
    esp = got["languages"]["esp"]
    assert (esp["splits"], esp["seed"], esp["files"]) == (1000, SEED, ["esp_bws.csv"])
    ann = read_annotations([root / "BWS_annotations" / "esp_bws.csv"])
    assert esp["spearman"] == split_half_reliability(ann)["spearman"]
    assert (
        esp["gold_check"]["matched"] == esp["items"] - 8
    )  # the lonely items are not release pairs
    assert not esp["gold_check"][
        "reproduced"
    ]  # the fixture's Score is not these annotations' count
    assert "release_items_only" in esp
    assert TaskStore("str", tmp_path / "h").manifest()["agreement"] == got
    r = CliRunner().invoke(main, ["agreement", "str", "--home", str(tmp_path / "h"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == got
    r = CliRunner().invoke(main, ["agreement", "str", "--from", str(root)])
    assert r.exit_code == 0, r.output
    assert f"esp     {esp['spearman']:.3f} ± {esp['spearman_sd']:.3f}" in r.output
    assert (
        "1000 splits, seed 1234" in r.output
        and "NOT reproduced" in r.output
        and "xyz_bws.csv" in r.output
    )


def test_a_checkout_without_raw_annotations_imports_as_before(tmp_path):
    root = write_track_a(tmp_path / "rel", size=60)
    m = import_task("str", tmp_path / "h", source=root)
    assert "agreement" not in m and not any("agreement" in n for n in m["notes"])
    r = CliRunner().invoke(main, ["agreement", "str", "--home", str(tmp_path / "h")])
    assert r.exit_code != 0 and "re-import it, or pass --from" in r.output
    # no raw annotations in the checkout: nothing to measure, which is no error
    r = CliRunner().invoke(main, ["agreement", "str", "--from", str(root)])
    assert r.exit_code == 0 and "nothing to measure" in r.output
    assert "has no BWS_annotations/ folder" in r.output
    r = CliRunner().invoke(main, ["agreement", "str", "--from", str(root), "--json"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)  # one JSON document and nothing else
    assert doc["languages"] == {} and "has no BWS_annotations/ folder" in doc["nothing_to_measure"]
    # a folder whose files hold no annotation: a note, and the task imports
    (root / "BWS_annotations").mkdir()
    (root / "BWS_annotations" / "esp_bws.csv").write_text(
        "SentPair1,SentPair2,SentPair3,SemPair4,Best,Worst\n", encoding="utf-8"
    )
    m = import_task("str", tmp_path / "h2", source=root)
    assert "agreement" not in m
    assert any(
        n.startswith("human agreement (split-half reliability) not computed: no annotation")
        for n in m["notes"]
    )


def test_the_board_shows_a_human_row_per_language(checkout, tmp_path, monkeypatch):
    from argon2 import PasswordHasher
    from conftest import build_schema
    from webkit import make_phase, make_submission, make_user, team_of

    from server import create_app

    root, _ = checkout
    home = tmp_path / "data"
    m = import_task("str", home, source=root)
    rows = reference_rows(get_task("str"), m["agreement"])
    assert [x["team"] for x in rows] == [
        "Human agreement ESP (split-half)",
        "Human agreement KIN (split-half)",
    ]
    monkeypatch.setattr(
        accounts, "hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    )
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    build_schema(home)
    app = create_app(
        {
            "home": home,
            "env": "testing",
            "database_url": None,
            "redis_url": None,
            "PALIMPSEST_ENQUEUE": False,
        }
    )
    dev = make_phase(app, "str", "dev")
    make_user(app, "a@x.org", team="alpha")
    make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.4})
    data = app.test_client().get("/tasks/str/leaderboard.json?phase=dev").get_json()
    human = [x for x in data["rows"] if x["row_type"] == "human"]
    assert [h["team"] for h in human] == [
        "Human agreement ESP (split-half)",
        "Human agreement KIN (split-half)",
    ]
    for h in human:
        lang = h["team"].split()[2].lower()
        a = m["agreement"]["languages"][lang]
        assert h["rank"] is None and h["submission_id"] is None
        assert h["metrics"][f"{lang}/spearman"] == a["spearman"]
        assert h["metrics"][f"{lang}/pearson"] == a["pearson"]
        assert all(v is None for k, v in h["metrics"].items() if not k.startswith(lang + "/"))
        assert h["note"].startswith("ours, from the release's raw annotations")
        assert "1000 splits (seed 1234)" in h["note"] and "0.84 reference" in h["note"]
        assert "not ranked" in h["note"]
    html = app.test_client().get("/tasks/str/leaderboard?phase=dev").get_data(as_text=True)
    assert "Human agreement ESP (split-half)" in html and "reference, not ranked" in html
    assert "0.84" in html  # the declared STR-2022 reference stays beside ours
