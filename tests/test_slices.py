"""Slices: subsets by another field of the gold than the group's (issue 51, item 3).

STR-2022's pairs by source (its file's `SourceID`, the paper's Table 6) and SwissGov-RSD's
documents by annotator (its full gold's `annotator_tag`, the paper's Table 7), each scored as its
own column and resampled as its own primary, against computations written here: scipy's Spearman
on the pairs or tokens picked by hand, and a resample rebuilt row by row."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import SWISSGOV, need
from helpers import LANGS, write_submission
from scipy.stats import spearmanr

from scorer import score_file, validate_file
from scorer.bootstrap import Bootstrap, unit_arrays
from scorer.kinds import family
from tasks import get_task
from tasks.importers import import_task
from tasks.semrel import CROSS_VALIDATED, _pair
from tasks.store import TaskStore
from tasks.str_release import SOURCES


def str2022_with_sources(path: Path, n: int, seed: int = 8) -> list[tuple]:
    """A made-up STR-2022 file in the upstream column layout (Index,SourceID,SubsetID,PairID,
    Text,Score), its pairs dealt to the seven sources in turn."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        src = SOURCES[i % len(SOURCES)]
        rows.append((f"{src}_r_{i}", src, *_pair(rng)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("Index", "SourceID", "SubsetID", "PairID", "Text", "Score"))
        for i, (pid, src, s1, s2, sc) in enumerate(rows):
            w.writerow((i, src, f"{src}_r", pid, f"{s1}\n{s2}", sc))
    return rows


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _predict(ids_scores, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {pid: float(sc + rng.normal(0, 0.25)) for pid, sc in ids_scores}


def test_str_2022_sources_on_the_test_split_equal_scipy(tmp_path):
    rows = str2022_with_sources(tmp_path / "str.csv", 140)
    home = tmp_path / "home"
    import_task("str", home, source=tmp_path / "str.csv")
    pred = _predict([(r[0], r[4]) for r in rows], seed=4)
    path = tmp_path / "pred.csv"
    path.write_text(
        "PairID,Pred_Score\n" + "".join(f"{k},{v}\n" for k, v in pred.items()), encoding="utf-8"
    )
    result = score_file("str", path, "test", home)
    for src in SOURCES:
        mine = [r for r in rows if r[1] == src]
        rho = spearmanr([r[4] for r in mine], [pred[r[0]] for r in mine]).statistic
        assert result["metrics"][src.lower()]["spearman"] == pytest.approx(rho, abs=1e-12)
        assert result["metrics"][src.lower()]["n"] == len(mine)
    # the macro is the languages' alone (English here), never the sources'
    rho_all = spearmanr([r[4] for r in rows], [pred[r[0]] for r in rows]).statistic
    assert result["metrics"]["macro"]["spearman"] == pytest.approx(rho_all, abs=1e-12)
    assert result["primary"]["value"] == pytest.approx(rho_all, abs=1e-12)


def test_a_release_without_sources_leaves_the_source_columns_empty(tmp_path):
    from tasks.semrel import write_track_a

    root = write_track_a(tmp_path / "rel", size=30)
    home = tmp_path / "home"
    import_task("str", home, source=root)
    gold = _read(TaskStore("str", home).gold("test", "gold.jsonl"))
    assert all("source" not in g for g in gold)
    ids = [g["PairID"] for g in gold if g["language"] == "eng"]
    path = tmp_path / "p.csv"
    path.write_text("PairID,Pred_Score\n" + "".join(f"{i},0.{n}\n" for n, i in enumerate(ids)))
    result = score_file("str", path, "test", home)
    assert result["metrics"]["goodreads"]["spearman"] is None
    assert "goodreads: no pair of goodreads in the gold" in result["notes"]


@pytest.fixture(scope="module")
def cv_sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("str-sources")
    rows = str2022_with_sources(tmp / "str.csv", 175, seed=2)
    home = tmp / "home"
    import_task("str", home, source=tmp / "str.csv", protocol=CROSS_VALIDATED)
    return home, rows


def test_sources_fold_by_fold_equal_scipy(cv_sources, tmp_path):
    home, rows = cv_sources
    gold = _read(TaskStore("str", home).gold("cv", "gold.jsonl"))
    src_of = {r[0]: r[1] for r in rows}
    assert {g["PairID"]: g["source"] for g in gold} == src_of  # the gold keeps the source
    train = _read(TaskStore("str", home).public("cv", "train.jsonl"))
    assert all(t["source"] == src_of[t["PairID"]] for t in train)  # leave-one-source-out
    pred = _predict([(r[0], r[4]) for r in rows], seed=6)
    path = tmp_path / "pred.csv"
    path.write_text(
        "fold,PairID,Pred_Score\n"
        + "".join(f"{g['fold']},{g['PairID']},{pred[g['PairID']]}\n" for g in gold),
        encoding="utf-8",
    )
    result = score_file("str", path, "cv", home)
    for src in SOURCES:
        per = []
        for k in range(1, 6):
            mine = [g for g in gold if g["fold"] == k and g["source"] == src]
            rho = spearmanr([g["score"] for g in mine], [pred[g["PairID"]] for g in mine])
            per.append(rho.statistic)
            got = result["cross_validation"]["folds"][str(k)][src.lower()]["spearman"]
            assert got == pytest.approx(per[-1], abs=1e-12)
        assert result["metrics"][src.lower()]["spearman"] == pytest.approx(np.mean(per), abs=1e-12)
        std = result["cross_validation"]["std"][src.lower()]["spearman"]
        assert std == pytest.approx(np.std(per), abs=1e-12)


def test_a_source_resampled_equals_a_naive_loop(cv_sources, tmp_path):
    home, rows = cv_sources
    store = TaskStore("str", home)
    gold = _read(store.gold("cv", "gold.jsonl"))
    pred = _predict([(r[0], r[4]) for r in rows], seed=7)
    path = tmp_path / "pred.csv"
    path.write_text(
        "fold,PairID,Pred_Score\n"
        + "".join(f"{g['fold']},{g['PairID']},{pred[g['PairID']]}\n" for g in gold),
        encoding="utf-8",
    )
    task = replace(get_task("str"), primary=("goodreads", "spearman"))
    v = validate_file("str", path, "cv", home)
    arrays = unit_arrays(task, store, "cv", v.parsed)
    bs = Bootstrap(task, store, "cv")
    scored = family(task, store, "cv").score(v.parsed)
    assert bs.point(arrays) == pytest.approx(scored.metrics["goodreads"]["spearman"], abs=1e-12)
    W = bs.weights(25, seed=21)
    got = bs.samples(arrays, W)
    for b in range(W.shape[0]):  # the resampled Goodreads pairs of each fold, row by row
        per = []
        for k in range(1, 6):
            y, p = [], []
            for j, g in enumerate(gold):
                if g["fold"] == k and g["source"] == "Goodreads":
                    y += [g["score"]] * int(W[b, j])
                    p += [pred[g["PairID"]]] * int(W[b, j])
            if not y:  # a fold the resample draws none of: out of the mean, as macro's
                continue
            # a fold drawn but without a value (constant values): no mean
            ok = len(set(y)) > 1 and len(set(p)) > 1
            per.append(spearmanr(y, p).statistic if ok else np.nan)
        want = np.mean(per)
        if np.isnan(want):
            assert np.isnan(got[b])
        else:
            assert got[b] == pytest.approx(want, abs=1e-12)


# ----------------------------------------------------------------- SwissGov-RSD's annotators


def _full_annotators() -> dict[str, int]:
    out = {}
    for lang in LANGS:
        p = need(SWISSGOV / "data" / "evaluation" / "gold_labels" / "full")
        for line in (p / f"gold_admin_{lang}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                out[r["id"]] = r["annotator_tag"]
    return out


@pytest.fixture(scope="module")
def swiss(tmp_path_factory):
    need(SWISSGOV)
    home = tmp_path_factory.mktemp("swiss") / "home"
    import_task("swissgov-rsd", home, source=SWISSGOV)
    docs = []
    for lang, pair in LANGS.items():
        p = SWISSGOV / "data" / "evaluation" / "gold_labels" / "test" / f"gold_admin_{lang}.jsonl"
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                docs.append({**json.loads(line), "pair": pair})
    rng = np.random.default_rng(5)
    pred = {}
    for d in docs:
        la = [float(x) if x != -1 else 0.0 for x in d["labels_a"]]
        lb = [float(x) if x != -1 else 0.0 for x in d["labels_b"]]
        pred[d["id"]] = (
            [x + float(rng.normal(0, 0.4)) for x in la],
            [x + float(rng.normal(0, 0.4)) for x in lb],
        )
    return home, docs, pred


def _tokens(docs, pred, keep) -> tuple[list, list]:
    """Gold and predicted values of every scored token (gold != -1) of the documents `keep`,
    side a then side b of each document in the gold's order."""
    y, p = [], []
    for d in docs:
        for _ in range(keep(d)):
            for side, i in (("labels_a", 0), ("labels_b", 1)):
                for g, q in zip(d[side], pred[d["id"]][i], strict=True):
                    if g != -1:
                        y.append(g)
                        p.append(q)
    return y, p


def test_each_annotators_documents_equal_scipy(swiss, tmp_path):
    home, docs, pred = swiss
    ann = _full_annotators()
    rows = [
        {"id": d["id"], "labels_a": pred[d["id"]][0], "labels_b": pred[d["id"]][1]} for d in docs
    ]
    result = score_file("swissgov-rsd", write_submission(tmp_path / "s", rows, "jsonl"), home=home)
    for pair in LANGS.values():
        for a in (1, 2):
            y, p = _tokens(
                docs, pred, lambda d, a=a, pair=pair: d["pair"] == pair and ann[d["id"]] == a
            )
            want = spearmanr(y, p).statistic
            got = result["metrics"][f"{pair}-a{a}"]
            assert got["spearman"] == pytest.approx(want, abs=1e-12), (pair, a)
        y, p = _tokens(docs, pred, lambda d, pair=pair: d["pair"] == pair)
        assert result["metrics"][pair]["spearman"] == pytest.approx(
            spearmanr(y, p).statistic, abs=1e-12
        )
    macro = np.mean([result["metrics"][p]["spearman"] for p in LANGS.values()])
    assert result["metrics"]["macro"]["spearman"] == pytest.approx(macro, abs=1e-15)


def test_an_annotators_documents_resampled_equal_a_naive_loop(swiss, tmp_path):
    home, docs, pred = swiss
    ann = _full_annotators()
    store = TaskStore("swissgov-rsd", home)
    rows = [
        {"id": d["id"], "labels_a": pred[d["id"]][0], "labels_b": pred[d["id"]][1]} for d in docs
    ]
    v = validate_file("swissgov-rsd", write_submission(tmp_path / "s", rows, "jsonl"), home=home)
    task = replace(get_task("swissgov-rsd"), primary=("en-fr-a2", "spearman"))
    arrays = unit_arrays(task, store, "test", v.parsed)
    bs = Bootstrap(task, store, "test")
    scored = family(task, store, "test").score(v.parsed)
    assert bs.point(arrays) == pytest.approx(scored.metrics["en-fr-a2"]["spearman"], abs=1e-12)
    mine = [d["id"] for d in docs if d["pair"] == "en-fr" and ann[d["id"]] == 2]
    # the primary's units, in its order: one matrix of the phase feeds every board
    assert bs.units == Bootstrap(get_task("swissgov-rsd"), store, "test").units
    W = bs.weights(8, seed=3)
    got = bs.samples(arrays, W)
    col = {u: j for j, u in enumerate(bs.units)}
    for b in range(W.shape[0]):
        y, p = _tokens(docs, pred, lambda d, b=b: int(W[b, col[d["id"]]]) if d["id"] in mine else 0)
        assert got[b] == pytest.approx(spearmanr(y, p).statistic, abs=1e-12)


# ----------------------------------------------------------------- their boards


def test_the_annotators_and_sources_have_their_boards(request, tmp_path, monkeypatch):
    """SwissGov-RSD's phases declare a board per pair and annotator; an STR-2022 file's phases
    get a board per source from its import; a run's row on a slice's board carries the slice's
    value, equal to scipy's on the slice's documents of the board's part of the gold."""
    from backbone import burst, make_team, submit
    from conftest import _make_backend
    from sqlalchemy import select

    from server import create_app
    from server.boards import stats
    from server.models import Phase

    need(SWISSGOV)
    src = tmp_path / "src"
    import_task("swissgov-rsd", src, source=SWISSGOV)
    str2022_with_sources(tmp_path / "str.csv", 140)
    import_task("str", src, source=tmp_path / "str.csv", protocol=CROSS_VALIDATED)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    with b.session() as s:
        got = {
            (p.task_id, p.name): {x["name"] for x in p.boards or ()}
            for p in s.execute(select(Phase)).scalars()
        }
    pairs = [f"{p}-a{a}" for p in LANGS.values() for a in (1, 2)]
    pairs += [*LANGS.values(), "pairs-overall"]  # a board per pair, and the overall one over them
    assert got[("swissgov-rsd", "test")] == got[("swissgov-rsd", "dev")] == set(pairs)
    assert got[("str", "cv")] == {f"source-{x.lower()}" for x in SOURCES}
    # a run on the test phase, its row on en-fr-a2's board
    docs = []
    for lang, pair in LANGS.items():
        p = SWISSGOV / "data" / "evaluation" / "gold_labels" / "test" / f"gold_admin_{lang}.jsonl"
        docs += [{**json.loads(x), "pair": pair} for x in p.read_text().splitlines() if x.strip()]
    rng = np.random.default_rng(9)
    pred = {
        d["id"]: (
            [float(max(x, 0)) + float(rng.normal(0, 0.4)) for x in d["labels_a"]],
            [float(max(x, 0)) + float(rng.normal(0, 0.4)) for x in d["labels_b"]],
        )
        for d in docs
    }
    rows = [{"id": k, "labels_a": a, "labels_b": bb} for k, (a, bb) in pred.items()]
    team, user = make_team(b, "annotated")
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    submit(b, team, user, "swissgov-rsd", "test", data=data, filename="p.jsonl")
    burst(b)
    with b.session() as s:
        phase = s.execute(
            select(Phase).where(Phase.task_id == "swissgov-rsd", Phase.name == "test")
        ).scalar_one()
        units = stats._gold_part(b.engine, phase, b.settings, "public")
    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    r = app.test_client().get("/tasks/swissgov-rsd/leaderboard.json?phase=test&board=en-fr-a2")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    (row,) = [x for x in r.get_json()["rows"] if x["row_type"] == "team"]
    ann = _full_annotators()
    y, p = _tokens(
        docs, pred, lambda d: int(d["pair"] == "en-fr" and ann[d["id"]] == 2 and d["id"] in units)
    )
    assert row["metrics"]["en-fr-a2/spearman"] == pytest.approx(spearmanr(y, p).statistic, abs=1e-9)

    # the built-in overall board over the language pairs: the mean of the team's rows on the
    # pairs' boards, each scipy's on the pair's public documents (the main board's macro, where
    # one run covers every pair); shown and exported like every board
    def board(name, ext="json"):
        q = "?phase=test" + (f"&board={name}" if name else "")
        got = app.test_client().get(f"/tasks/swissgov-rsd/leaderboard{ext and '.' + ext}{q}")
        assert got.status_code == 200, (name, got.get_data(as_text=True)[:300])
        return got

    per_pair = []
    for pair in LANGS.values():
        (r,) = [x for x in board(pair).get_json()["rows"] if x["row_type"] == "team"]
        y, p = _tokens(docs, pred, lambda d, pair=pair: int(d["pair"] == pair and d["id"] in units))
        assert r["metrics"][f"{pair}/spearman"] == pytest.approx(
            spearmanr(y, p).statistic, abs=1e-9
        )
        per_pair.append(r["metrics"][f"{pair}/spearman"])
    overall = board("pairs-overall").get_json()
    assert overall["overall"] == {
        "boards": list(LANGS.values()),
        "rule": "mean",
        "missing": "unranked",
    }
    (r,) = [x for x in overall["rows"] if x["row_type"] == "team"]
    assert r["rank"] == 1
    assert r["metrics"]["pairs-overall/mean"] == pytest.approx(np.mean(per_pair), abs=1e-12)
    (main,) = [x for x in board(None).get_json()["rows"] if x["row_type"] == "team"]
    assert main["metrics"]["macro/spearman"] == pytest.approx(np.mean(per_pair), abs=1e-9)
    table = board("pairs-overall", "csv").get_data(as_text=True).splitlines()
    assert "pairs-overall/mean" in table[0] and len(table) == 2
    assert "Overall: mean over the language pairs" in board("pairs-overall", "").get_data(
        as_text=True
    )


def test_a_slice_is_declared_among_the_subsets_in_a_group():
    from pydantic import ValidationError

    from tasks.builtin import builtin_spec
    from tasks.bundle_models import TaskSpec

    spec = builtin_spec("swissgov-rsd")
    assert TaskSpec.model_validate(spec).slices[0].subset == "en-de-a1"
    for change, message in (
        ({"subset": "en-xx-a1"}, "'en-xx-a1' is not among the subsets"),
        ({"group": "en-xx"}, "its group 'en-xx' is not a group"),
        ({"group": "en-de-a2"}, "its group 'en-de-a2' is not a group"),
        ({"group": ""}, "a tokens slice names its group"),
        ({"field": "pair"}, "names the group field 'pair'"),
    ):
        bad = dict(spec, slices=[{**spec["slices"][0], **change}, *spec["slices"][1:]])
        with pytest.raises(ValidationError, match=message):
            TaskSpec.model_validate(bad)
    twice = dict(spec, slices=[spec["slices"][0], spec["slices"][0]])
    with pytest.raises(ValidationError, match="declared twice"):
        TaskSpec.model_validate(twice)
