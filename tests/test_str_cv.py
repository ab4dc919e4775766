"""STR-2022's protocol: five folds of the English labelled pairs, each scored as its own test set,
the mean and std over the folds, and the bootstrap over pairs; each against a computation written
here (the folds drawn by hand, scipy's Spearman per fold, a naive resampling loop)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from scorer import SubmissionInvalid, score_file, validate_file
from tasks import get_task
from tasks.importers import import_task
from tasks.semrel import CROSS_VALIDATED, CV_SEED, _pair, write_track_a
from tasks.store import TaskStore


def str2022_file(path: Path, n: int, seed: int = 5) -> list[tuple[str, str, str, float]]:
    """A made-up STR-2022 file (`PairID,Score,Text`, the two sentences in one field)."""
    rng = random.Random(seed)
    pairs = [(f"ENG-train-{i:04d}", *_pair(rng)) for i in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("PairID", "Score", "Text"))
        for pid, s1, s2, sc in pairs:
            w.writerow((pid, sc, f"{s1}\n{s2}"))
    return pairs


def folds_by_hand(ids: list[str], k: int) -> dict[str, int]:
    order = sorted(ids)
    random.Random(CV_SEED).shuffle(order)
    return {pid: 1 + i % k for i, pid in enumerate(order)}


@pytest.fixture(scope="module")
def cv_home(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("str-cv")
    pairs = str2022_file(tmp / "str2022.csv", 103)
    home = tmp / "home"
    manifest = import_task("str", home, source=tmp / "str2022.csv", protocol=CROSS_VALIDATED)
    return home, pairs, manifest


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_folds_are_the_declared_draw(cv_home):
    home, pairs, manifest = cv_home
    assert manifest["splits"] == ["cv"] and get_task("str").cross_validation.folds == 5
    store = TaskStore("str", home)
    fold_of = folds_by_hand([p[0] for p in pairs], 5)
    gold = _read(store.gold("cv", "gold.jsonl"))
    assert {g["PairID"]: g["fold"] for g in gold} == fold_of
    sizes = [sum(1 for f in fold_of.values() if f == k) for k in range(1, 6)]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 103
    inputs = _read(store.public("cv", "inputs.jsonl"))
    assert all("score" not in r for r in inputs) and len(inputs) == 103
    train = _read(store.public("cv", "train.jsonl"))
    for k in range(1, 6):  # a fold trains on every other fold's pairs, with their scores
        mine = {r["PairID"] for r in train if r["fold"] == k}
        assert mine == {p for p, f in fold_of.items() if f != k}
    by_id = {p[0]: p[3] for p in pairs}
    assert all(r["score"] == by_id[r["PairID"]] for r in train)


def _submission(tmp_path, home, seed=3, fold_as=int) -> tuple[Path, dict]:
    gold = _read(TaskStore("str", home).gold("cv", "gold.jsonl"))
    rng = np.random.default_rng(seed)
    pred = {g["PairID"]: float(g["score"] + rng.normal(0, 0.3)) for g in gold}
    path = tmp_path / "pred.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("fold", "PairID", "Pred_Score"))
        for g in gold:
            w.writerow((fold_as(g["fold"]), g["PairID"], pred[g["PairID"]]))
    return path, pred


def test_each_fold_and_the_mean_and_std_equal_scipy(cv_home, tmp_path):
    home, pairs, _ = cv_home
    path, pred = _submission(tmp_path, home)
    result = score_file("str", path, "cv", home)
    fold_of = folds_by_hand([p[0] for p in pairs], 5)
    gold = {p[0]: p[3] for p in pairs}
    per = []
    for k in range(1, 6):
        ids = [p for p, f in fold_of.items() if f == k]
        rho = spearmanr([gold[i] for i in ids], [pred[i] for i in ids]).statistic
        per.append(rho)
        got = result["cross_validation"]["folds"][str(k)]["eng"]["spearman"]
        assert got == pytest.approx(rho, abs=1e-12)
    assert result["metrics"]["eng"]["spearman"] == pytest.approx(np.mean(per), abs=1e-12)
    assert result["cross_validation"]["std"]["eng"]["spearman"] == pytest.approx(
        np.std(per), abs=1e-12
    )
    # the primary (macro over the languages the gold holds: English alone) is that mean
    assert result["primary"]["value"] == pytest.approx(np.mean(per), abs=1e-12)


def test_a_pair_answered_for_the_wrong_fold_is_named(cv_home, tmp_path):
    home, pairs, _ = cv_home
    path, _ = _submission(tmp_path, home)
    lines = path.read_text(encoding="utf-8").splitlines()
    fold, pid, score = lines[1].split(",")
    lines[1] = f"{int(fold) % 5 + 1},{pid},{score}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("str", path, "cv", home)
    text = json.dumps([p.__dict__ for p in e.value.problems])
    assert f"{int(fold) % 5 + 1}/{pid}" in text and f"{fold}/{pid}" in text


def test_the_bootstrap_draws_pairs_and_equals_a_naive_loop(cv_home, tmp_path):
    from scorer.bootstrap import Bootstrap, unit_arrays
    from scorer.kinds import family

    home, pairs, _ = cv_home
    task = get_task("str")
    store = TaskStore("str", home)
    path, pred = _submission(tmp_path, home, seed=9)
    v = validate_file("str", path, "cv", home)
    arrays = unit_arrays(task, store, "cv", v.parsed)
    bs = Bootstrap(task, store, "cv")
    scored = family(task, store, "cv").score(v.parsed)
    assert bs.point(arrays) == pytest.approx(scored.metrics["macro"]["spearman"], abs=1e-12)
    B, seed = 40, 13
    W = bs.weights(B, seed=seed)
    got = bs.samples(arrays, W)
    gold = _read(store.gold("cv", "gold.jsonl"))
    units = [f"{g['fold']}/{g['PairID']}" for g in gold]
    for b in range(B):  # the resampled file row by row, each fold scored by scipy
        per = []
        for k in range(1, 6):
            y, p = [], []
            for j, g in enumerate(gold):
                if g["fold"] == k:
                    y += [g["score"]] * int(W[b, j])
                    p += [pred[g["PairID"]]] * int(W[b, j])
            if len(y) >= 2 and len(set(y)) > 1:
                per.append(spearmanr(y, p).statistic)
        assert got[b] == pytest.approx(np.mean(per), abs=1e-12), (b, units[:2])


def test_a_checkout_adds_the_folds_beside_semeval_splits(tmp_path):
    root = write_track_a(tmp_path / "checkout", size=60)
    home = tmp_path / "home"
    m = import_task("str", home, source=root, protocol=CROSS_VALIDATED)
    assert m["splits"] == ["dev", "test", "cv"]
    eng_train = m["counts"]["train"]["eng"]
    assert m["counts"]["cv"] == {"eng": eng_train, "folds": 5}
    held = import_task("str", tmp_path / "h2", source=root)
    assert held["splits"] == ["dev", "test"] and "cross_validation" not in held


def test_baselines_run_on_the_cv_split_gives_each_fold(cv_home, tmp_path):
    """`palimpsest baselines run --task str --split cv` on an STR-2022 import answers every fold's
    pairs, each named with its fold, and its scores hold each fold's Spearman (scipy on the
    file); the score names no absent language once per fold."""
    from click.testing import CliRunner

    from cli.main import main

    home, pairs, _ = cv_home
    out = CliRunner().invoke(
        main,
        [
            "baselines", "run", "--task", "str", "--system", "lexical", "--split", "cv",
            "--out", str(tmp_path / "out"), "--home", str(home), "--quiet", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    (got,) = json.loads(out.stdout)
    with open(got["file"], encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    fold_of = folds_by_hand([p[0] for p in pairs], 5)
    assert {r["PairID"]: int(r["fold"]) for r in rows} == fold_of
    gold = {p[0]: p[3] for p in pairs}
    folds = got["scores"]["cross_validation"]["folds"]
    for k in range(1, 6):
        mine = [r for r in rows if int(r["fold"]) == k]
        rho = spearmanr([gold[r["PairID"]] for r in mine], [float(r["Pred_Score"]) for r in mine])
        assert folds[str(k)]["eng"]["spearman"] == pytest.approx(rho.statistic, abs=1e-12)
    notes = got["scores"]["notes"]
    assert not any(n.startswith("fold ") and "no pair" in n for n in notes), notes
    absent = [n for n in notes if "no pair" in n]
    assert len(absent) == 1 and "arq" in absent[0] and "any fold" in absent[0], notes
