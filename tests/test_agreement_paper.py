"""TRoTR's multi-kappa as Manjavacas et al. (2021) print it (eq. 7-8, annotator pairs uniform),
checked against a computation written here from the judgments file; the pair-weighted
generalisation beside it; the import computes the agreement once per release and code, and a
re-import reuses it."""

from __future__ import annotations

import csv
import itertools
import json

import pytest
from click.testing import CliRunner

from tests.conftest import TROTR, need


def eq7_eq8(path, binary: bool) -> float:
    """A_o (eq. 7): per annotator pair, the share of the items both judged on which they agree,
    averaged over the pairs; A_e (eq. 8): per pair, sum_i P(i|x) P(i|y), P(i|x) the share of x's
    judgments that are i, averaged over the same pairs. Items judged by one annotator only carry
    no pair and are left out (as are the annotator's judgments of them)."""
    by_item: dict[str, dict[str, str]] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if r["label"] in ("1", "2", "3", "4", "1.0", "2.0", "3.0", "4.0"):
                v = int(float(r["label"]))
                by_item.setdefault(r["instanceID"], {})[r["annotator"]] = (
                    str(int(v >= 3)) if binary else str(v)
                )
    by_item = {i: d for i, d in by_item.items() if len(d) >= 2}
    annotators = sorted({a for d in by_item.values() for a in d})
    labels = sorted({v for d in by_item.values() for v in d.values()})
    p = {}
    for a in annotators:
        mine = [d[a] for d in by_item.values() if a in d]
        p[a] = {lab: mine.count(lab) / len(mine) for lab in labels}
    a_o, a_e = [], []
    for x, y in itertools.combinations(annotators, 2):
        both = [(d[x], d[y]) for d in by_item.values() if x in d and y in d]
        if both:
            a_o.append(sum(u == v for u, v in both) / len(both))
            a_e.append(sum(p[x][lab] * p[y][lab] for lab in labels))
    ao, ae = sum(a_o) / len(a_o), sum(a_e) / len(a_e)
    return (ao - ae) / (1 - ae)


def test_the_headline_multi_kappa_is_the_papers_eq_7_8():
    from cli.main import main

    root = need(TROTR)
    r = CliRunner().invoke(main, ["agreement", "tric-ranking", "--from", str(root), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)["kappa"]
    judgments = root / "judgments" / "TRoTR.tsv"
    for scale, binary, paper in (("labels", False, 0.174), ("binary", True, 0.393)):
        mk = got[scale]["multi_kappa"]
        assert mk["value"] == pytest.approx(eq7_eq8(judgments, binary), abs=1e-12)
        assert abs(mk["value"] - paper) < 0.001
        assert mk["low"] < mk["value"] < mk["high"]
        # the generalisation beside it, under its own name, and not the same number here
        weighted = got[scale]["multi_kappa_weighted"]
        assert weighted["value"] is not None and abs(weighted["value"] - mk["value"]) > 0.001
    assert "eq. 7-8" in got["note"] and "pair" in got["note"]
    text = CliRunner().invoke(main, ["agreement", "tric-ranking", "--from", str(root)])
    assert text.exit_code == 0 and "pair-weighted" in text.output
    assert f"{got['binary']['multi_kappa']['value']:.3f}" in text.output


def test_an_import_computes_the_agreement_once_per_release(tmp_path):
    from tasks.agreement import AGREEMENT_FILE, load_agreement
    from tasks.importers import import_task
    from tasks.store import TaskStore

    root = need(TROTR)
    import_task("tric-binary", tmp_path, source=root, fold=1)
    store = TaskStore("tric-binary", tmp_path)
    first = load_agreement(store.root)
    assert len(first["cache_key"]) == 64
    # a re-import of the same release by the same code reuses the figures: mark the cached file
    # and see the mark come back (a recomputation would drop it)
    cached = json.loads((store.root / AGREEMENT_FILE).read_text(encoding="utf-8"))
    (store.root / AGREEMENT_FILE).write_text(json.dumps(cached | {"mark": 1}), encoding="utf-8")
    import_task("tric-binary", tmp_path, source=root, fold=1)
    again = load_agreement(store.root)
    assert again["mark"] == 1 and again["cache_key"] == first["cache_key"]
    # another key (another release or code): computed again
    stale = cached | {"cache_key": "0" * 64, "mark": 2}
    (store.root / AGREEMENT_FILE).write_text(json.dumps(stale), encoding="utf-8")
    import_task("tric-binary", tmp_path, source=root, fold=1)
    fresh = load_agreement(store.root)
    assert "mark" not in fresh and fresh["cache_key"] == first["cache_key"]
    assert fresh["kappa"] == first["kappa"]
