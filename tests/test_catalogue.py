"""The declarations of families and metrics (tasks/catalogue.py): one list of names, each with an
implementation in the scorer and each implementation with a name; a task of each family scores
every metric the declarations allow and gets intervals for every primary-capable one; a bundle
naming a metric its family does not compute, or a primary it cannot resample, is refused naming
the ones that fit; duplicate YAML keys are problems on their lines; the docs' table is the
declarations'."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import _parsed
from scipy import stats

from scorer import bootstrap as bs
from scorer import metrics, spans
from scorer.kinds import FAMILIES as SCORER_FAMILIES
from scorer.kinds import family
from tasks import all_tasks, catalogue, get_task, unregister_declared
from tasks.bundle import BundleInvalid, read_bundle
from tasks.store import TaskStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
BY_FAMILY = {
    "instances": "tric-binary",
    "targets": "trac",
    "tokens": "swissgov-rsd",
    "links": "loci-similes",
    "spans": "pan-text-alignment",
}


# ----------------------------------------------------------------------------- names


def test_every_name_has_an_implementation_and_every_implementation_a_name():
    names = set(catalogue.METRICS)
    rng = np.random.default_rng(0)
    g, p = rng.integers(0, 2, 30), rng.integers(0, 2, 30)
    computed = set(metrics.classification(g, p)) | set(
        metrics.correlations(g, p, names & {"spearman", "pearson", "kendall"})[0]
    )
    gq, gs = np.array([0, 1]), np.array([0, 1])
    links = set(metrics.loci_links(gq, gs, gq, gs, 3, 3)[0])
    ranking = set(metrics.link_ranking_ir(gq, gs, gq, gs, np.ones(2), 3, 3, np.arange(3))[0])
    # an implementation without a name
    assert computed <= names and links <= names and ranking <= names
    assert set(bs.FROM_CONFUSION) <= names and set(bs.EXACT) <= names
    assert bs.FROM_LINK_COUNTS <= names
    # a name without an implementation, per family
    for fam in catalogue.FAMILIES:
        for m in catalogue.family_metrics(fam):
            where = {"links": links | ranking, "spans": set(spans.MEASURES) | {"n"}}.get(
                fam, computed
            )
            assert m in where, (fam, m)
            d = catalogue.METRICS[m]
            if not d.resamples_on(fam):
                continue
            st = d.statistics_on(fam)
            if st == "confusion":
                assert m in bs.FROM_CONFUSION
            elif st == "values":
                assert m in bs.EXACT
            elif st == "link counts":
                assert m in bs.FROM_LINK_COUNTS
            elif st == "span counts":
                assert m in spans.MEASURES
            else:
                assert st in ("moments", "ranked links"), (m, st)
    assert set(metrics.REGISTRY) == names
    # the families: one resampler and one scorer family each, and no other
    assert set(bs.UNITS) == set(catalogue.FAMILIES) == set(SCORER_FAMILIES)
    for f in catalogue.FAMILY_LIST:
        assert set(f.statistics) >= {
            catalogue.METRICS[m].statistics_on(f.name)
            for m in catalogue.family_metrics(f.name)
            if catalogue.METRICS[m].resample
        }


def test_every_registered_task_declares_what_its_family_supports():
    for t in all_tasks():
        assert catalogue.declaration_problems(t.kind, t.metrics, t.primary[1]) == [], t.id


def test_the_docs_table_is_the_declarations():
    text = (REPO / "docs" / "bundles.md").read_text(encoding="utf-8")
    start = text.index("<!-- catalogue table")
    start = text.index("\n", start) + 1
    end = text.index("<!-- end of the catalogue table -->")
    assert text[start:end] == catalogue.markdown_table()
    assert "weighted F1" in text[start:end]


# ----------------------------------------------------------------------------- pearson resamples


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_pearson_equals_scipy_on_each_resample(seed):
    rng = np.random.default_rng(seed)
    n = 40
    gold = rng.integers(0, 5, n).astype(float)
    pred = np.round(rng.normal(gold, 1.0), 1) + 100.0  # far from 0: the centring matters
    W = bs.draw_weights(["all"] * n, 50, seed)
    W[0] = 0
    W[0, :1] = 3  # one unit drawn three times: undefined
    got = bs.weighted_pearson(gold, pred, W)
    for b, w in enumerate(W):
        reps = w.astype(int)
        g, p = np.repeat(gold, reps), np.repeat(pred, reps)
        if g.size < 2 or np.ptp(g) == 0 or np.ptp(p) == 0:
            assert np.isnan(got[b])
        else:
            assert abs(got[b] - stats.pearsonr(g, p).statistic) <= 1e-12
    # clustered: items of unit u repeated w[u] times
    unit = rng.integers(0, 8, n)
    Wc = bs.draw_weights(["all"] * 8, 30, seed)
    got = bs.weighted_pearson(gold, pred, Wc, unit)
    for b, w in enumerate(Wc):
        reps = w[unit].astype(int)
        want = stats.pearsonr(np.repeat(gold, reps), np.repeat(pred, reps)).statistic
        assert abs(got[b] - want) <= 1e-12


# ----------------------------------------------------------------------------- every family


@pytest.mark.parametrize("fam", list(catalogue.FAMILIES))
def test_a_task_of_each_family_scores_every_allowed_metric_with_intervals(home, fam):
    """Every metric the declarations allow is scored; every primary-capable one gets finite
    intervals whose point is the scorer's value (a board's statistics run on them)."""
    base = get_task(BY_FAMILY[fam])
    allowed = tuple(catalogue.family_metrics(fam))
    task = dataclasses.replace(base, metrics=allowed, secondary=())
    store = TaskStore(base.id, home)
    rng = np.random.default_rng(3)
    runs = [_parsed(task, store, "test", rng) for _ in range(3)]
    f = family(task, store, "test")
    scored = [f.score(p).metrics[base.primary[0]] for p in runs]
    for m in allowed:
        if fam != "links" or "@" not in m or m.endswith(("@10", "@100")):
            assert m in scored[0], m
    for m in catalogue.primary_metrics(fam):
        t = dataclasses.replace(task, primary=(base.primary[0], m))
        boot = bs.Bootstrap(t, store, "test")
        W = boot.weights(40, 5)
        rows = []
        for p, sc in zip(runs, scored, strict=True):
            arrays = bs.unit_arrays(t, store, "test", p)
            want = sc.get(m)
            if want is None:
                continue
            assert boot.point(arrays) == pytest.approx(want, abs=1e-12), m
            rows.append(boot.samples(arrays, W))
        if m.endswith("@1000"):  # reported only for a run ranking 1,000 sources for a query
            continue
        assert rows, m
        st = bs.board_statistics(np.vstack(rows), np.zeros(len(rows)), True)
        assert all(lo is not None and hi is not None for lo, hi in st["ci"]), m
    for m in [m for m in allowed if not catalogue.METRICS[m].resamples_on(fam)]:
        t = dataclasses.replace(task, primary=(base.primary[0], m))
        with pytest.raises(ValueError, match="no bootstrap"):
            bs.Bootstrap(t, store, "test").samples({}, np.ones((1, 1)))


@pytest.mark.parametrize("fam", list(catalogue.FAMILIES))
def test_each_family_refuses_a_metric_it_does_not_compute_naming_the_allowed(fam):
    other = next(m for m in catalogue.METRICS if fam not in catalogue.METRICS[m].families)
    bad = catalogue.metric_problem(fam, other)
    assert bad and all(m in bad for m in catalogue.family_metrics(fam))
    for m in catalogue.family_metrics(fam):
        p = catalogue.primary_problem(fam, m)
        assert (p is None) == (m in catalogue.primary_metrics(fam))
        if p:
            assert ", ".join(catalogue.primary_metrics(fam)) in p


# ----------------------------------------------------------------------------- bundles


def _edited(tmp_path: Path, edit, text_edit=None) -> Path:
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    y = root / "competition.yaml"
    data = yaml.safe_load(y.read_text(encoding="utf-8"))
    edit(data)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    y.write_text(text_edit(text) if text_edit else text, encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def _forget():
    yield
    unregister_declared("sts-latin")


def test_a_bundle_with_every_allowed_metric_is_accepted(tmp_path):
    def edit(d):
        d["tasks"][0]["metrics"] = [
            m for m in catalogue.family_metrics("instances") if not catalogue.METRICS[m].needs_value
        ]
        d["tasks"][0]["primary"]["metric"] = "pearson"

    b = read_bundle(_edited(tmp_path, edit))
    assert b.tasks[0].primary == ("all", "pearson")


def test_a_bundle_with_f1_on_scores_is_refused_naming_what_fits(tmp_path):
    def edit(d):
        d["tasks"][0]["metrics"] = ["spearman", "f1"]

    with pytest.raises(BundleInvalid) as e:
        read_bundle(_edited(tmp_path, edit))
    assert "f1 needs label01 predictions, these are float" in str(e.value)
    assert "spearman, pearson, kendall, n" in str(e.value)


def test_a_bundle_naming_a_metric_its_family_lacks_is_refused_on_its_line(tmp_path):
    def edit(d):
        d["tasks"][0]["metrics"] = ["spearman", "precision", "recall@10", "n"]
        d["tasks"][0]["primary"]["metric"] = "n"

    with pytest.raises(BundleInvalid) as e:
        read_bundle(_edited(tmp_path, edit))
    text = str(e.value)
    assert "tasks[0].metrics[1]: the instances family does not compute precision" in text
    assert "tasks[0].metrics[2]" in text and "recall@10" in text
    assert "its metrics: f1, precision_0" in text
    assert "tasks[0].primary.metric: n is a count" in text and "spearman, pearson" in text
    lines = [p.line for p in e.value.problems]
    assert all(isinstance(n, int) and n > 1 for n in lines)


def test_duplicate_keys_are_problems_on_their_lines(tmp_path):
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    y = root / "competition.yaml"
    lines = y.read_text(encoding="utf-8").splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("id:"))
    lines.insert(i + 1, "id: another-id")
    y.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    (p,) = [p for p in e.value.problems if "given twice" in p.message]
    assert p.line == i + 2 and p.path == "id" and f"first on line {i + 1}" in p.message


# ----------------------------------------------------------------------------- exposure by instance


@pytest.mark.parametrize("hint", [0.566, "0.566", [0.5], True])
def test_a_hidden_splits_inputs_carrying_anything_but_text_are_refused(tmp_path, hint):
    """The gold under another name (`hint`) in the public inputs of the hidden test split: refused
    whatever the field is called, on its line."""
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    path = root / "sts-latin" / "test" / "inputs.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[1]["hint"] = hint
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    (p,) = [p for p in e.value.problems if "hint" in p.message]
    assert p.path == "sts-latin/test/inputs.jsonl" and p.line == 2
    assert "hidden test split" in p.message


def test_the_dev_splits_inputs_may_carry_values_and_the_example_is_accepted(tmp_path):
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    path = root / "sts-latin" / "dev" / "inputs.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[0]["hint"] = 0.5
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert read_bundle(root).tasks[0].id == "sts-latin"


def test_a_builtin_spec_with_a_primary_its_family_cannot_resample_is_refused(monkeypatch):
    from tasks import builtin

    real = builtin.builtin_spec

    def spec(task_id):
        d = real(task_id)
        if task_id == "swissgov-rsd":
            d["primary"] = {"subset": "macro", "metric": "kendall"}
        return d

    monkeypatch.setattr(builtin, "builtin_spec", spec)
    with pytest.raises(ValueError) as e:
        builtin.builtin_tasks()
    assert "swissgov-rsd.yaml" in str(e.value)
    assert "kendall has no bootstrap on the tokens family" in str(e.value)
    assert "spearman, pearson" in str(e.value)
