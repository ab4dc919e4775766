"""Loci Similes' protocol: five folds of the positives (dealt by query), each fold's queries scored
as their own test set, the mean and std over the folds, Table 3's cut figures averaged over them,
and the bootstrap of queries within each fold; each against a computation written here."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from helpers import loci_files
from locikit import brute_force, generated_release, read_csv, write_csv

from scorer import score_file, validate_file
from tasks import get_task
from tasks.importers import import_task
from tasks.loci import CROSS_VALIDATED, CV_SEED
from tasks.store import TaskStore


def folds_by_hand(gold: list[tuple[str, str]], queries: list[str], k: int) -> dict[str, int]:
    """The draw as the docs state it, written out again."""
    count: dict[str, int] = {}
    for q, _ in gold:
        count[q] = count.get(q, 0) + 1
    linked = sorted(count)
    random.Random(CV_SEED).shuffle(linked)
    load = [0] * k
    out = {}
    for q in linked:
        best = 0
        for i in range(1, k):
            if load[i] < load[best]:
                best = i
        load[best] += count[q]
        out[q] = best + 1
    rest = sorted(set(queries) - set(count))
    random.Random(CV_SEED + ":unlinked").shuffle(rest)
    for i, q in enumerate(rest):
        out[q] = i % k + 1
    return out


@pytest.fixture(scope="module")
def cv_release(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loci-cv")
    files, qids, sids, gold = generated_release(tmp / "release", 3, 80, 300, 70)
    home = tmp / "home"
    m = import_task("loci-similes", home, **files, protocol=CROSS_VALIDATED)
    return home, qids, sids, gold, m


def test_the_folds_are_the_declared_draw_and_train_on_the_others(cv_release):
    home, qids, sids, gold, m = cv_release
    assert m["splits"] == ["cv"] and get_task("loci-similes").cross_validation.folds == 5
    store = TaskStore("loci-similes", home)
    with open(store.public("cv", "folds.csv"), encoding="utf-8", newline="") as f:
        got = {r["query_id"]: int(r["fold"]) for r in csv.DictReader(f)}
    want = folds_by_hand(gold, qids, 5)
    assert got == want
    links = [sum(1 for q, _ in gold if want[q] == f) for f in range(1, 6)]
    assert max(links) - min(links) <= max(sum(1 for g in gold if g[0] == q) for q, _ in gold)
    train = read_csv(store.public("cv", "train.csv"))
    for f in range(1, 6):
        mine = {(q, s) for ff, q, s in train if int(ff) == f}
        assert mine == {(q, s) for q, s in gold if want[q] != f}
    # no hidden split: the folds' links are each other's training data
    assert "test" not in m["splits"]


def _run(tmp_path, qids, sids, gold, seed):
    rng = np.random.default_rng(seed)
    gold_set = set(gold)
    run: dict = {}
    rows = []
    for q in qids:
        picked = {sids[int(j)] for j in rng.choice(len(sids), size=int(rng.integers(0, 40)))}
        picked |= {s for (gq, s) in gold if gq == q and rng.random() < 0.6}
        for s in sorted(picked):
            sc = float(np.round(rng.random() + (0.4 if (q, s) in gold_set else 0.0), 2))
            run.setdefault(q, {})[s] = sc
            rows.append((q, s, sc))
    return write_csv(tmp_path / "run.csv", ("query_id", "source_id", "score"), rows), run


def test_each_fold_and_the_mean_and_std_equal_a_count(cv_release, tmp_path):
    home, qids, sids, gold, _ = cv_release
    path, run = _run(tmp_path, qids, sids, gold, 1)
    result = score_file("loci-similes", path, "cv", home)
    fold_of = folds_by_hand(gold, qids, 5)
    gold_set = set(gold)
    per_f1, per_smr, cut_rows = [], [], []
    for f in range(1, 6):
        qs = [q for q in qids if fold_of[q] == f]
        every = brute_force(run, gold_set, qs, len(sids), 10**6)
        got = result["cross_validation"]["folds"][str(f)]["all"]
        assert got["tp"] == every["tp"] and got["fp"] == every["fp"] and got["fn"] == every["fn"]
        assert math.isclose(got["f1"], every["f1"], abs_tol=1e-12)
        assert math.isclose(got["smr"] * 1e4, every["smr_e4"], rel_tol=1e-12)
        per_f1.append(every["f1"])
        per_smr.append(every["smr_e4"] / 1e4)
        cut_rows.append(brute_force(run, gold_set, qs, len(sids), 5))
    whole = result["metrics"]["all"]
    assert whole["f1"] == pytest.approx(np.mean(per_f1), abs=1e-12)
    assert whole["smr"] == pytest.approx(np.mean(per_smr), abs=1e-15)
    assert result["cross_validation"]["std"]["all"]["f1"] == pytest.approx(
        np.std(per_f1), abs=1e-12
    )
    assert result["primary"]["value"] == whole["f1"]
    # Table 3's figures are averages over the folds
    for c in ("predictions", "tp", "fp", "fn", "f1", "fpr_e4", "smr_e4"):
        assert result["cuts"]["5"][c] == pytest.approx(
            np.mean([r[c] for r in cut_rows]), abs=1e-9
        ), c


def test_the_bootstrap_draws_queries_within_folds_and_equals_a_naive_loop(cv_release, tmp_path):
    from scorer.bootstrap import Bootstrap, unit_arrays

    home, qids, sids, gold, _ = cv_release
    task = get_task("loci-similes")
    store = TaskStore(task.id, home)
    path, run = _run(tmp_path, qids, sids, gold, 2)
    v = validate_file(task.id, path, "cv", home)
    arrays = unit_arrays(task, store, "cv", v.parsed)
    bs = Bootstrap(task, store, "cv")
    assert bs.point(arrays) == pytest.approx(
        score_file(task.id, path, "cv", home)["metrics"]["all"]["f1"], abs=1e-12
    )
    B = 30
    W = bs.weights(B, seed=5)
    got = bs.samples(arrays, W)
    fold_of = folds_by_hand(gold, qids, 5)
    units = bs.units
    for f in range(1, 6):  # every resample keeps each fold's size
        cols = [i for i, q in enumerate(units) if fold_of[q] == f]
        assert (W[:, cols].sum(axis=1) == len(cols)).all()
    gold_of: dict = {}
    for q, s in gold:
        gold_of.setdefault(q, set()).add(s)
    for b in range(B):  # per fold: each drawn copy a query of its own, F1 over the gold ones
        per = []
        for f in range(1, 6):
            f1s = []
            for i, q in enumerate(units):
                if fold_of[q] != f or q not in gold_of:
                    continue
                pred = set(run.get(q, {}))
                t = len(pred & gold_of[q])
                p = t / len(pred) if pred else 0.0
                r = t / len(gold_of[q])
                f1s += [2 * p * r / (p + r) if p + r else 0.0] * int(W[b, i])
            per.append(np.mean(f1s))
        assert got[b] == pytest.approx(np.mean(per), abs=1e-12), b


def test_the_shared_sample_imports_for_both_protocols(tmp_path):
    files = loci_files()
    m = import_task("loci-similes", tmp_path / "h", **files, protocol=CROSS_VALIDATED)
    assert sum(c["links"] for c in m["cross_validation"]["counts"].values()) == 10
    held = import_task("loci-similes", tmp_path / "h2", **files)
    assert held["splits"] == ["test"]


def test_a_links_split_declares_its_folds_file():
    from pydantic import ValidationError

    from tasks.builtin import builtin_spec
    from tasks.bundle_models import TaskSpec

    spec = builtin_spec("loci-similes")
    TaskSpec.model_validate(spec)
    no_file = {
        **spec,
        "splits": {
            **spec["splits"],
            "cv": {
                **spec["splits"]["cv"],
                "inputs": [i for i in spec["splits"]["cv"]["inputs"] if "folds" not in i],
            },
        },
    }
    with pytest.raises(ValidationError, match="folds.csv"):
        TaskSpec.model_validate(no_file)
    with pytest.raises(ValidationError, match="cross_validation.field"):
        TaskSpec.model_validate(
            {**spec, "cross_validation": {**spec["cross_validation"], "field": "fold"}}
        )


def test_baselines_run_on_the_cv_split_gives_each_fold(cv_release, tmp_path):
    """`palimpsest baselines run --task loci-similes --split cv` answers the cross-validated
    import's queries (every fold's) and its scores hold each fold's values."""
    from click.testing import CliRunner

    from cli.main import main

    home, qids, sids, gold, _ = cv_release
    out = CliRunner().invoke(
        main,
        [
            "baselines", "run", "--task", "loci-similes", "--system", "lexical", "--split", "cv",
            "--top-k", "3", "--out", str(tmp_path / "out"), "--home", str(home), "--quiet",
            "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    (got,) = json.loads(out.stdout)
    assert got["split"] == "cv" and got["file"].endswith("lexical.cv.csv")
    rows = read_csv(Path(got["file"]))
    assert {r[0] for r in rows} == set(qids)  # every fold's queries, 3 sources each
    assert len(rows) == 3 * len(qids)
    folds = got["scores"]["cross_validation"]["folds"]
    assert sorted(folds) == ["1", "2", "3", "4", "5"]
    f1 = [folds[f]["all"]["f1"] for f in sorted(folds)]
    assert got["scores"]["metrics"]["all"]["f1"] == pytest.approx(np.mean(f1), abs=1e-12)
