"""Strata for a stratified public/private partition of the gold, on the official releases, and the
notes of a part of the gold that holds no unit of a subset."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from helpers import loci_files, swissgov_docs, trotr_pairs, write_submission

from scorer import partition_strata, partition_units, score_validated, validate_file

TASKS = ["tric-binary", "tric-ranking", "trac", "swissgov-rsd", "loci-similes"]


@pytest.mark.parametrize("task_id", TASKS)
def test_strata_cover_every_unit_once_in_the_units_order(home, task_id):
    strata = partition_strata(task_id, home=home)
    units = [u for u, _ in strata]
    assert units == partition_units(task_id, home=home)
    assert len(set(units)) == len(units)
    assert all(isinstance(s, str) and s for _, s in strata)


@pytest.mark.parametrize("task_id, kind", [("tric-binary", "binary"), ("tric-ranking", "ranking")])
def test_tric_strata_are_the_oov_iov_subset_files(home, task_id, kind):
    expected = {
        r["instanceID"]: sub for sub in ("oov", "iov") for r in trotr_pairs(kind, "test", sub)
    }
    strata = dict(partition_strata(task_id, home=home))
    assert strata == expected
    assert set(strata.values()) == {"oov", "iov"}


def test_trac_has_one_stratum(home):
    strata = partition_strata("trac", home=home)
    assert len(strata) == 40 and {s for _, s in strata} == {"all"}


def test_swissgov_strata_are_the_language_pairs(home):
    strata = partition_strata("swissgov-rsd", home=home)
    docs = swissgov_docs("test")
    assert dict(strata) == {d["id"]: d["pair"] for d in docs}
    assert (
        Counter(s for _, s in strata)
        == Counter(d["pair"] for d in docs)
        == {"en-de": 56, "en-fr": 56, "en-it": 56}
    )


def test_loci_strata_follow_the_gold_links(home):
    files = loci_files()
    with open(files["gold"], encoding="utf-8", newline="") as f:
        linked = {r["query_id"] for r in csv.DictReader(f) if r["label"].strip() == "1"}
    with open(files["query"], encoding="utf-8", newline="") as f:
        queries = [r["seg_id"] for r in csv.DictReader(f)]
    strata = partition_strata("loci-similes", home=home)
    assert strata == [(q, "linked" if q in linked else "unlinked") for q in queries]
    assert {s for _, s in strata} == {"linked", "unlinked"}


def test_loci_strata_with_label_0_rows_and_unlinked_queries(tmp_path):
    from tasks.importers import import_task

    rel = tmp_path / "release"
    rel.mkdir()
    (rel / "q.csv").write_text("seg_id,text\nq0,a\nq1,b\nq2,c\nq3,d\n", encoding="utf-8")
    (rel / "s.csv").write_text("seg_id,text\ns0,a\ns1,b\n", encoding="utf-8")
    (rel / "g.csv").write_text(
        "query_id,source_id,label\nq2,s0,1\nq2,s1,1\nq1,s0,0\nq3,s1,1\n", encoding="utf-8"
    )
    h = tmp_path / "home"
    import_task("loci-similes", h, query=rel / "q.csv", source=rel / "s.csv", gold=rel / "g.csv")
    assert partition_strata("loci-similes", home=h) == [
        ("q0", "unlinked"),
        ("q1", "unlinked"),
        ("q2", "linked"),
        ("q3", "linked"),
    ]


# ---------------------------------------------------------------- parts of the gold


def swissgov_rows(docs):
    return [
        {
            "id": d["id"],
            "labels_a": [(i * 7 % 5) / 4 for i in range(len(d["labels_a"]))],
            "labels_b": [(i * 3 % 4) / 3 for i in range(len(d["labels_b"]))],
        }
        for d in docs
    ]


def test_swissgov_part_without_a_pair_says_so_not_that_the_file_lacks_it(home, tmp_path):
    docs = swissgov_docs("test")
    v = validate_file(
        "swissgov-rsd", write_submission(tmp_path, swissgov_rows(docs), "jsonl"), home=home
    )
    part = {d["id"] for d in docs if d["pair"] != "en-fr"}
    result = score_validated(v, home=home, only=part)
    assert result["metrics"]["en-fr"] == {"spearman": None, "kendall": None, "n": 0}
    assert "en-fr: no document of en-fr in this part of the gold" in result["notes"]
    assert not any("not in the submission" in n for n in result["notes"])
    assert result["metrics"]["en-de"]["spearman"] is not None


def test_swissgov_file_without_a_pair_is_still_not_in_the_submission(home, tmp_path):
    docs = swissgov_docs("test")
    sub = [d for d in docs if d["pair"] != "en-it"]
    v = validate_file(
        "swissgov-rsd", write_submission(tmp_path, swissgov_rows(sub), "jsonl"), home=home
    )
    for only in (None, {d["id"] for d in docs[::2]}):
        notes = score_validated(v, home=home, only=only)["notes"]
        assert "en-it: not in the submission" in notes
        assert not any("no document" in n for n in notes)


@pytest.mark.parametrize("task_id, value", [("tric-binary", "label"), ("tric-ranking", "score")])
def test_tric_part_without_a_subset_says_so(home, tmp_path, task_id, value):
    kind = task_id.split("-")[1]
    raw = trotr_pairs(kind, "test")
    rows = [
        {"instanceID": r["instanceID"], value: (i % 2 if value == "label" else (i * 37 % 11) / 3)}
        for i, r in enumerate(raw)
    ]
    v = validate_file(task_id, write_submission(tmp_path, rows, "jsonl"), home=home)
    oov = {r["instanceID"] for r in trotr_pairs(kind, "test", "oov")}
    result = score_validated(v, home=home, only=oov)
    iov = result["metrics"]["iov"]
    assert iov["n"] == 0 and all(x is None for k, x in iov.items() if k != "n")
    assert set(iov) == set(result["metrics"]["oov"])
    assert [n for n in result["notes"] if n.startswith("iov")] == [
        "iov: no instance of iov in this part of the gold"
    ]
    assert result["metrics"]["oov"]["n"] == len(oov) and result["metrics"]["all"]["n"] == len(oov)


def test_a_part_drawn_within_each_stratum_defines_every_subset_on_both_parts(home, tmp_path):
    """Alternate units of each stratum: both parts hold every language pair and every subset."""
    for task_id, subsets in (
        ("swissgov-rsd", ("en-de", "en-fr", "en-it", "macro")),
        ("tric-ranking", ("all", "oov", "iov")),
    ):
        if task_id == "swissgov-rsd":
            rows = swissgov_rows(swissgov_docs("test"))
        else:
            rows = [
                {"instanceID": r["instanceID"], "score": (i * 37 % 11) / 3}
                for i, r in enumerate(trotr_pairs("ranking", "test"))
            ]
        v = validate_file(task_id, write_submission(tmp_path / task_id, rows, "jsonl"), home=home)
        seen: Counter = Counter()
        public = set()
        for unit, stratum in partition_strata(task_id, home=home):
            if seen[stratum] % 2 == 0:
                public.add(unit)
            seen[stratum] += 1
        private = {u for u in partition_units(task_id, home=home)} - public
        for part in (public, private):
            result = score_validated(v, home=home, only=part)
            for s in subsets:
                assert result["metrics"][s]["spearman"] is not None, (task_id, s, result["notes"])
