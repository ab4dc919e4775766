"""Validation: every kind of problem, each located by line and id, never a gold value."""

from __future__ import annotations

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import read_jsonl, write_submission

from scorer import score_file, validate_file
from scorer.errors import SubmissionInvalid
from scorer.reader import DEFAULT_LIMITS, Limits
from tasks.store import TaskStore

KEYED = {
    "tric-binary": ("instanceID", "label"),
    "tric-ranking": ("instanceID", "score"),
    "trac": ("target", "score"),
}


def ids_of(home, task_id: str, split: str = "test") -> list[str]:
    st = TaskStore(task_id, home)
    if task_id == "trac":
        return [r["target"] for r in read_jsonl(st.public(split, "targets.jsonl"))]
    key = "id" if task_id == "swissgov-rsd" else "instanceID"
    return [r[key] for r in read_jsonl(st.public(split, "inputs.jsonl"))]


def valid_rows(home, task_id: str, split: str = "test") -> list[dict]:
    """A valid submission for a keyed or token task, built from the public inputs only."""
    if task_id == "swissgov-rsd":
        return [
            {
                "id": r["id"],
                "labels_a": [0.1 * (i % 7) for i in range(len(r["text_a"].split()))],
                "labels_b": [0.2 * (i % 3) for i in range(len(r["text_b"].split()))],
            }
            for r in read_jsonl(TaskStore(task_id, home).public(split, "inputs.jsonl"))
        ]
    key, value = KEYED[task_id]
    return [
        {key: k, value: (i % 2 if value == "label" else (i * 7919 % 101) / 10)}
        for i, k in enumerate(ids_of(home, task_id, split))
    ]


def invalid(
    home, task_id: str, path: Path, split: str = "test", limits: Limits = DEFAULT_LIMITS
) -> SubmissionInvalid:
    with pytest.raises(SubmissionInvalid) as e:
        validate_file(task_id, path, split, home, limits)
    return e.value


def messages(e: SubmissionInvalid) -> list[str]:
    return [str(p) for p in e.problems]


def jsonl(tmp_path: Path, lines: list, name: str = "sub.jsonl") -> Path:
    p = tmp_path / name
    p.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return p


# ---------------------------------------------------------------- valid files in every format


@pytest.mark.parametrize("task_id", ["tric-binary", "tric-ranking", "trac", "swissgov-rsd"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "jsonl.gz", "csv.zip", "tsv.gz"])
def test_valid_submission_in_every_format(home, tmp_path, task_id, fmt):
    rows = valid_rows(home, task_id)
    ref = score_file(task_id, write_submission(tmp_path / "ref", rows, "jsonl"), home=home)
    path = write_submission(tmp_path, rows, fmt)
    v = validate_file(task_id, path, home=home)
    assert v.format == fmt.split(".")[0]
    assert score_file(task_id, path, home=home)["metrics"] == ref["metrics"]


def test_dev_split_validates_against_dev_inputs(home, tmp_path):
    rows = valid_rows(home, "tric-binary", "dev")
    path = write_submission(tmp_path, rows, "jsonl")
    validate_file("tric-binary", path, "dev", home)
    e = invalid(home, "tric-binary", path)  # dev ids are not test ids
    assert any("unknown instanceID" in m for m in messages(e))


def test_columns_may_come_in_any_order_and_csv_header_with_bom(home, tmp_path):
    rows = valid_rows(home, "tric-ranking")
    p = write_submission(tmp_path, rows, "csv", columns=["score", "instanceID"])
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    validate_file("tric-ranking", p, home=home)


# ---------------------------------------------------------------- problems, one by one


def test_unparseable_lines(home, tmp_path):
    rows = valid_rows(home, "tric-binary")
    lines = [json.dumps(r) for r in rows]
    lines[2] = lines[2][:-1]
    lines[5] = "hello"
    lines[8] = "[1, 2]"
    e = invalid(home, "tric-binary", jsonl(tmp_path, lines))
    got = {p.line: p.message for p in e.problems}
    assert "not valid JSON" in got[3] and "not valid JSON" in got[6]
    assert "expected a JSON object" in got[9]
    # the ids of those lines cannot be read, so they are missing too: in the same report
    assert e.total == 4
    missing = [p.message for p in e.problems if p.line is None]
    assert missing == [
        f"3 instanceID(s) missing from the submission: {rows[2]['instanceID']!r}, "
        f"{rows[5]['instanceID']!r}, {rows[8]['instanceID']!r} (some may be on the 3 "
        f"lines whose instanceID could not be read)"
    ]


@pytest.mark.parametrize("task_id", ["tric-binary", "trac", "swissgov-rsd"])
def test_missing_and_unexpected_fields(home, tmp_path, task_id):
    rows = valid_rows(home, task_id)
    key = "id" if task_id == "swissgov-rsd" else KEYED[task_id][0]
    drop = "labels_b" if task_id == "swissgov-rsd" else KEYED[task_id][1]
    rows[1] = {k: v for k, v in rows[1].items() if k != drop}
    rows[4] = {**rows[4], "confidence": 0.5}
    e = invalid(home, task_id, write_submission(tmp_path, rows, "jsonl"))
    by_line = {p.line: p for p in e.problems}
    assert f"missing field(s) {drop}" in by_line[2].message and by_line[2].id == rows[1][key]
    assert "unexpected field(s) confidence" in by_line[5].message and by_line[5].id == rows[4][key]


def test_csv_header_without_a_required_column(home, tmp_path):
    p = tmp_path / "sub.csv"
    p.write_text("instanceID,prediction\nx,1\n", encoding="utf-8")
    e = invalid(home, "tric-binary", p)
    assert e.problems[0].line == 1
    assert (
        "lacks column(s) label" in e.problems[0].message
        and "found instanceID, prediction" in e.problems[0].message
    )


def test_csv_extra_column_and_short_row(home, tmp_path):
    rows = [{**r, "extra": "x"} for r in valid_rows(home, "tric-ranking")]
    p = write_submission(tmp_path, rows, "csv")
    text = p.read_text(encoding="utf-8").split("\n")
    text[3] = text[3].rsplit(",", 1)[0]
    p.write_text("\n".join(text), encoding="utf-8")
    e = invalid(home, "tric-ranking", p)
    by_line = {p.line: p.message for p in e.problems}
    assert "unexpected column(s) extra" in by_line[1]
    assert "expected 3 columns" in by_line[4]


def test_duplicate_ids(home, tmp_path):
    rows = valid_rows(home, "trac")
    rows.insert(10, dict(rows[3]))
    e = invalid(home, "trac", write_submission(tmp_path, rows, "jsonl"))
    assert len(e.problems) == 1
    p = e.problems[0]
    assert (
        p.line == 11
        and p.id == rows[3]["target"]
        and "duplicate target: also on line 4" in p.message
    )


def test_unknown_ids(home, tmp_path):
    rows = valid_rows(home, "tric-binary") + [
        {"instanceID": "pair_9999_(Nowhere 1:1)", "label": 1},
        {"instanceID": 17, "label": 0},
    ]
    e = invalid(home, "tric-binary", write_submission(tmp_path, rows, "jsonl"))
    assert [(p.line, p.id) for p in e.problems] == [(412, "pair_9999_(Nowhere 1:1)"), (413, "17")]
    assert all(
        "unknown instanceID: not among the 411 test instanceIDs" in p.message for p in e.problems
    )


@pytest.mark.parametrize("n_missing", [1, 5, 7])
def test_missing_ids_count_and_first_few(home, tmp_path, n_missing):
    rows = valid_rows(home, "tric-ranking")
    gone = [rows[i]["instanceID"] for i in range(0, 3 * n_missing, 3)]
    kept = [r for r in rows if r["instanceID"] not in gone]
    e = invalid(home, "tric-ranking", write_submission(tmp_path, kept, "jsonl"))
    assert e.total == 1
    msg = e.problems[0].message
    assert msg.startswith(f"{n_missing} instanceID(s) missing from the submission: ")
    assert all(repr(g) in msg for g in gone[:5])
    assert not any(repr(g) in msg for g in gone[5:])
    assert (f"and {n_missing - 5} more" in msg) == (n_missing > 5)


def test_swissgov_missing_ids_within_each_covered_pair(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    de = [r for r in rows if r["id"].startswith("admin_de_")]
    fr = [r for r in rows if r["id"].startswith("admin_fr_")]
    # a whole pair left out is allowed
    validate_file("swissgov-rsd", write_submission(tmp_path / "a", de + fr, "jsonl"), home=home)
    # within a covered pair every document is needed
    e = invalid(home, "swissgov-rsd", write_submission(tmp_path / "b", de[3:] + fr[:-1], "jsonl"))
    msgs = sorted(p.message for p in e.problems)
    assert len(msgs) == 2
    assert msgs[0].startswith("1 id(s) of en-fr missing") and repr(fr[-1]["id"]) in msgs[0]
    assert msgs[1].startswith("3 id(s) of en-de missing")
    assert all(repr(r["id"]) in msgs[1] for r in de[:3])
    assert not any("en-it" in m for m in msgs)


@pytest.mark.parametrize(
    "value, word",
    [
        ("abc", "must be a number"),
        (None, "must be a number"),
        ([1], "must be a number"),
        (True, "must be a number"),
        ("NaN", "is NaN"),
        ("Infinity", "is infinite"),
        ("-Infinity", "is infinite"),
        ("1e999", "is infinite"),
    ],
)
def test_non_numeric_nan_infinite_scores_jsonl(home, tmp_path, value, word):
    rows = valid_rows(home, "tric-ranking")
    lines = [json.dumps(r) for r in rows]
    raw = value if value in ("NaN", "Infinity", "-Infinity", "1e999") else json.dumps(value)
    lines[6] = '{"instanceID": %s, "score": %s}' % (json.dumps(rows[6]["instanceID"]), raw)
    e = invalid(home, "tric-ranking", jsonl(tmp_path, lines))
    assert [(p.line, p.id) for p in e.problems] == [(7, rows[6]["instanceID"])]
    assert e.problems[0].message.startswith("score " + word)


@pytest.mark.parametrize(
    "cell, word",
    [
        ("abc", "must be a number"),
        ("", "must be a number"),
        ("nan", "is NaN"),
        ("inf", "is infinite"),
        ("-Infinity", "is infinite"),
    ],
)
def test_non_numeric_nan_infinite_scores_csv(home, tmp_path, cell, word):
    rows = valid_rows(home, "trac")
    rows[2]["score"] = cell
    e = invalid(home, "trac", write_submission(tmp_path, rows, "csv"))
    assert [(p.line, p.id) for p in e.problems] == [(4, rows[2]["target"])]
    assert word in e.problems[0].message


@pytest.mark.parametrize("value", [2, -1, 0.5, "1", True, "yes"])
def test_labels_outside_0_1(home, tmp_path, value):
    rows = valid_rows(home, "tric-binary")
    rows[0]["label"] = value
    e = invalid(home, "tric-binary", write_submission(tmp_path, rows, "jsonl"))
    assert [(p.line, p.id) for p in e.problems] == [(1, rows[0]["instanceID"])]
    assert e.problems[0].message.startswith("label must be")


@pytest.mark.parametrize(
    "cell, ok", [("1", True), ("0", True), ("1.0", True), ("2", False), ("x", False)]
)
def test_csv_labels(home, tmp_path, cell, ok):
    rows = valid_rows(home, "tric-binary")
    rows[5]["label"] = cell
    path = write_submission(tmp_path, rows, "csv")
    if ok:
        validate_file("tric-binary", path, home=home)
    else:
        assert invalid(home, "tric-binary", path).problems[0].line == 7


def test_token_count_mismatch_message(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    i = next(i for i, r in enumerate(rows) if r["id"] == "admin_de_7")
    text_b = next(
        r["text_b"]
        for r in read_jsonl(TaskStore("swissgov-rsd", home).public("test", "inputs.jsonl"))
        if r["id"] == "admin_de_7"
    )
    n = len(text_b.split())
    rows[i]["labels_b"] = rows[i]["labels_b"][: n - 3]
    rows[i + 1]["labels_a"] = rows[i + 1]["labels_a"] + [0.0]
    e = invalid(home, "swissgov-rsd", write_submission(tmp_path, rows, "jsonl"))
    assert (
        e.problems[0].message == f"admin_de_7: labels_b has {n - 3} values, text_b has {n} tokens"
    )
    assert (e.problems[0].line, e.problems[0].id) == (i + 1, "admin_de_7")
    assert e.problems[1].line == i + 2 and "labels_a has" in e.problems[1].message
    assert e.total == 2


@pytest.mark.parametrize(
    "labels, word",
    [
        ("nope", "must be a list"),
        ([0.1, "x"], "must hold only numbers"),
        ([[0.1], [0.2]], "flat list"),
        ([0.1, None], "NaN"),
    ],
)
def test_swissgov_bad_label_lists(home, tmp_path, labels, word):
    rows = valid_rows(home, "swissgov-rsd")
    rows[2]["labels_a"] = labels
    e = invalid(home, "swissgov-rsd", write_submission(tmp_path, rows, "jsonl"))
    assert e.problems[0].line == 3 and word in e.problems[0].message


def test_swissgov_nan_inside_a_list_names_the_position(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    lines = [json.dumps(r) for r in rows]
    n_b = len(rows[0]["labels_b"])
    lines[0] = json.dumps({**rows[0], "labels_b": [0.0] * n_b}).replace(
        "[0.0, 0.0, ", "[0.0, NaN, ", 1
    )
    lines[1] = json.dumps({**rows[1], "labels_a": ["Infinity"]}).replace(
        '["Infinity"]', "[Infinity]"
    )
    e = invalid(home, "swissgov-rsd", jsonl(tmp_path, lines))
    assert [(p.line, p.message) for p in e.problems] == [
        (1, "labels_b value 2 is NaN"),
        (2, "labels_a value 1 is infinite"),
    ]


def test_the_file_covers_no_document(home, tmp_path):
    p = tmp_path / "sub.csv"
    p.write_text("id,labels_a,labels_b\n", encoding="utf-8")
    assert "covers no document pair" in str(invalid(home, "swissgov-rsd", p))


def test_problems_are_capped_with_a_count_of_the_rest(home, tmp_path):
    e = invalid(home, "tric-binary", jsonl(tmp_path, ["nonsense"] * 300))
    # 300 unreadable lines and the 411 ids they fail to give: one problem, listed first, which the
    # line problems make room for within the cap
    assert e.total == 301 and len(e.problems) == 200
    assert e.problems[0].line is None and e.problems[0].message.startswith(
        "411 instanceID(s) missing"
    )
    assert [p.line for p in e.problems[1:]] == list(range(1, 200))
    summary = e.summary(50)
    assert summary.startswith("301 problems in the submission")
    assert "\n  411 instanceID(s) missing" in summary
    assert summary.count("\n  line ") == 49 and "... and 251 more problems" in summary


# ---------------------------------------------------------------- loci links


def loci_ids(home) -> tuple[list[str], list[str]]:
    st = TaskStore("loci-similes", home)
    import csv

    def ids(name):
        with open(st.public("test", name), encoding="utf-8", newline="") as f:
            return [r["seg_id"] for r in csv.DictReader(f)]

    return ids("queries.csv"), ids("sources.csv")


def test_loci_valid_with_and_without_scores(home, tmp_path):
    qs, ss = loci_ids(home)
    rows = [
        {"query_id": q, "source_id": s, "score": (i * 31 % 17) / 17}
        for i, (q, s) in enumerate((q, s) for q in qs for s in ss[:4])
    ]
    for fmt in ("csv", "tsv", "jsonl", "csv.gz", "csv.zip"):
        validate_file("loci-similes", write_submission(tmp_path / fmt, rows, fmt), home=home)
    p = write_submission(tmp_path, rows, "csv", columns=["query_id", "source_id"])
    assert validate_file("loci-similes", p, home=home).parsed.score is None


def test_loci_unknown_segments_and_duplicate_links(home, tmp_path):
    qs, ss = loci_ids(home)
    p = tmp_path / "sub.csv"
    p.write_text(
        "query_id,source_id,score\n"
        f'"{qs[0]}","{ss[0]}",0.5\n'
        f'"ghost query","{ss[1]}",0.4\n'
        f'"{qs[1]}","ghost source",0.3\n'
        f'"{qs[0]}","{ss[0]}",0.2\n'
        f'"{qs[2]}","{ss[2]}",high\n'
        f'"{qs[2]}","{ss[3]}",nan\n',
        encoding="utf-8",
    )
    e = invalid(home, "loci-similes", p)
    got = [(p.line, p.id, p.message) for p in e.problems]
    assert (3, "ghost query", "unknown query_id: not a query segment of the task") in got
    assert (4, "ghost source", "unknown source_id: not a source segment of the task") in got
    assert any(line == 6 and "score must be a number" in m for line, _, m in got)
    assert any(line == 7 and "score is NaN" in m for line, _, m in got)
    assert any(f"duplicate link ({qs[0]!r}, {ss[0]!r}) appears 2 times" in m for _, _, m in got)


def test_loci_header_problems(home, tmp_path):
    p = tmp_path / "sub.csv"
    p.write_text("query,source_id,weight\nx,y,1\n", encoding="utf-8")
    msgs = messages(invalid(home, "loci-similes", p))
    assert any("lacks column query_id" in m for m in msgs)
    assert any("unexpected column(s) query, weight" in m for m in msgs)


def test_loci_jsonl_with_mixed_scores(home, tmp_path):
    qs, ss = loci_ids(home)
    p = jsonl(
        tmp_path,
        [
            {"query_id": qs[0], "source_id": ss[0], "score": 1},
            {"query_id": qs[1], "source_id": ss[1]},
            {"query_id": [qs[1]], "source_id": ss[1]},
            {"query_id": qs[2], "source_id": ss[2], "score": "x"},
        ],
    )
    got = {p.line: p.message for p in invalid(home, "loci-similes", p).problems}
    assert "either every row has a score or none does" in got[2]
    assert "unknown or missing" in got[3]
    assert "score must be a number" in got[4]


def test_loci_empty_submission(home, tmp_path):
    """The header alone is a valid submission: "predict no link", the point SMR is read against."""
    p = tmp_path / "sub.csv"
    p.write_text("query_id,source_id\n", encoding="utf-8")
    links = validate_file("loci-similes", p, home=home).parsed
    assert links.q.size == links.s.size == 0 and links.score is None


# ---------------------------------------------------------------- files and archives


def test_empty_file_and_size_limit(home, tmp_path):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(b"")
    assert "empty" in str(invalid(home, "trac", p))
    path = write_submission(tmp_path, valid_rows(home, "trac"), "jsonl")
    assert "over the limit" in str(invalid(home, "trac", path, limits=Limits(max_bytes=1000)))


def test_bad_utf8_names_the_line(home, tmp_path):
    path = write_submission(tmp_path, valid_rows(home, "trac"), "jsonl")
    lines = path.read_bytes().split(b"\n")
    lines[12] = lines[12].replace(b'"target": "', b'"target": "\xe9', 1)
    path.write_bytes(b"\n".join(lines))
    e = invalid(home, "trac", path)
    assert e.problems[0].line == 13 and "not valid UTF-8" in e.problems[0].message


def test_archives_refused_by_validate_file(home, tmp_path):
    data = b'{"target": "x", "score": 1}\n'
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("a.jsonl", data)
        z.writestr("b.jsonl", data)
    assert "exactly one file" in str(invalid(home, "trac", two))
    out = tmp_path / "out.zip"
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(zipfile.ZipInfo("../x.jsonl"), data)
    assert "outside the archive" in str(invalid(home, "trac", out))
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.GzipFile(bomb, "wb", compresslevel=1) as f:
        for _ in range(16):
            f.write(b"0" * (1 << 20))
    assert "over the limit" in str(
        invalid(home, "trac", bomb, limits=Limits(max_uncompressed_bytes=1 << 20))
    )


# ---------------------------------------------------------------- messages never reveal gold


def _home_without_gold(home: Path, dst: Path) -> Path:
    shutil.copytree(home / "tasks", dst / "tasks")
    for g in (dst / "tasks").glob("*/gold"):
        shutil.rmtree(g)
    return dst


def _broken_submissions(home, tmp_path: Path, task_id: str) -> list[Path]:
    rows = valid_rows(home, task_id)
    key = "id" if task_id == "swissgov-rsd" else KEYED[task_id][0]
    out = []
    for i, mutate in enumerate(
        [
            lambda rs: rs[:-4],
            lambda rs: rs + [rs[0]],
            lambda rs: [{**r, key: r[key] + "x"} if j % 5 == 0 else r for j, r in enumerate(rs)],
            lambda rs: [{**r, "extra": 1} for r in rs[:10]],
        ]
    ):
        out.append(write_submission(tmp_path / str(i), mutate([dict(r) for r in rows]), "jsonl"))
    return out


@pytest.mark.parametrize("task_id", ["tric-binary", "tric-ranking", "trac", "swissgov-rsd"])
def test_validation_never_reads_gold(home, tmp_path, task_id):
    """The same problems with the gold files deleted: no message can depend on a gold value."""
    bare = _home_without_gold(home, tmp_path / "bare")
    gold_path = TaskStore(task_id, home).gold("test", "gold.jsonl")
    gold_text = gold_path.read_text(encoding="utf-8")
    gold_values = {
        repr(r.get("label", r.get("score")))
        for r in read_jsonl(gold_path)
        if isinstance(r.get("label", r.get("score")), float)
    }
    for path in _broken_submissions(home, tmp_path, task_id):
        with_gold = messages(invalid(home, task_id, path))
        without = messages(invalid(bare, task_id, path))
        assert with_gold == without
        for m in with_gold:
            assert not any(v in m for v in gold_values if len(v) > 4), m
            assert 'labels_a": [' not in m and m not in gold_text
    validate_file(
        task_id, write_submission(tmp_path / "ok", valid_rows(home, task_id), "jsonl"), home=bare
    )


# ---------------------------------------------------------- inputs that once crashed the validators


def test_huge_integers_are_invalid_not_a_crash(home, tmp_path):
    big = "1" + "0" * 400  # json.loads gives an int that float() cannot hold
    rows = valid_rows(home, "tric-ranking")
    lines = [json.dumps(r) for r in rows]
    lines[0] = '{"instanceID": %s, "score": %s}' % (json.dumps(rows[0]["instanceID"]), big)
    e = invalid(home, "tric-ranking", jsonl(tmp_path, lines))
    assert [(p.line, p.id) for p in e.problems] == [(1, rows[0]["instanceID"])]
    assert "no larger than" in e.problems[0].message
    rows = valid_rows(home, "swissgov-rsd")
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1].replace('"labels_a": [0.0', '"labels_a": [%s' % big, 1)
    e = invalid(home, "swissgov-rsd", jsonl(tmp_path, lines, "sw.jsonl"))
    assert e.problems[0].line == 2 and "labels_a" in e.problems[0].message


def test_reading_trotr_contexts_leaves_the_csv_field_limit_as_it_was():
    """The csv module's field limit is process-wide and the reader's bound relies on it: computing
    TRoTR's lexical overlap (long contexts) raises it only while it reads them."""
    import csv

    from conftest import TROTR, need

    from tasks.agreement import trotr_overlap

    before = csv.field_size_limit()
    assert trotr_overlap(need(TROTR))
    assert csv.field_size_limit() == before


def test_csv_field_over_the_csv_module_limit(home, tmp_path):
    long = "q" * 200_000
    for task_id, header in (
        ("loci-similes", f"query_id,source_id,{long}"),
        ("tric-binary", f"instanceID,label,{long}"),
    ):
        p = tmp_path / f"{task_id}.csv"
        p.write_text(f"{header}\nx,y,1\n", encoding="utf-8")
        e = invalid(home, task_id, p)
        assert e.problems[0].line == 1
    p = tmp_path / "row.csv"
    p.write_text(f'query_id,source_id\n"{long}",y\n', encoding="utf-8")
    assert invalid(home, "loci-similes", p).problems[0].line == 2


# ---------------------------------------------------------------- every problem in one report


@pytest.mark.parametrize("task_id", ["tric-binary", "tric-ranking", "trac"])
def test_keyed_bad_lines_and_missing_ids_in_one_report(home, tmp_path, task_id):
    key, value = KEYED[task_id]
    rows = valid_rows(home, task_id)
    gone = [rows[i][key] for i in (0, 4)]  # left out of the file
    lines = [json.dumps(r) for r in rows]
    lines[1] = json.dumps({**rows[1], value: "high"})  # a bad value: its id is there, not missing
    lines[2] = "{not json"  # an unreadable line: its id cannot be known
    lines.append(json.dumps({key: "no such id", value: 1}))
    lines = [x for i, x in enumerate(lines) if i not in (0, 4)]
    e = invalid(home, task_id, jsonl(tmp_path, lines))
    assert e.total == 4
    got = [(p.line, p.message) for p in e.problems]
    assert got[0][0] is None
    assert got[0][1] == (
        f"3 {key}(s) missing from the submission: {gone[0]!r}, {rows[2][key]!r}, "
        f"{gone[1]!r} (some may be on the 1 line whose {key} could not be read)"
    )
    assert got[1][0] == 1 and got[1][1].startswith(f"{value} must be")
    assert got[2][0] == 2 and "not valid JSON" in got[2][1]
    assert got[3][0] == len(lines) and got[3][1].startswith(f"unknown {key}")
    assert repr(rows[1][key]) not in got[0][1]


def test_keyed_missing_without_unreadable_lines_has_no_hint(home, tmp_path):
    rows = valid_rows(home, "tric-binary")
    rows[3]["label"] = 2
    e = invalid(home, "tric-binary", write_submission(tmp_path, rows[1:], "csv"))
    assert [p.line for p in e.problems] == [None, 4]
    assert (
        e.problems[0].message
        == f"1 instanceID(s) missing from the submission: {rows[0]['instanceID']!r}"
    )


def test_swissgov_bad_lines_and_missing_documents_per_pair_in_one_report(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    de = [r for r in rows if r["id"].startswith("admin_de_")]
    fr = [r for r in rows if r["id"].startswith("admin_fr_")]
    # en-it left out entirely (allowed); en-de lacks two documents and has a bad list;
    # en-fr lacks one document and has a token count that does not fit
    de[5] = {**de[5], "labels_a": [0.1, None]}
    fr[3] = {**fr[3], "labels_b": fr[3]["labels_b"][:-1]}
    sub = de[2:] + fr[:-1]
    e = invalid(home, "swissgov-rsd", write_submission(tmp_path, sub, "jsonl"))
    assert e.total == 4
    whole = [p.message for p in e.problems if p.line is None]
    assert len(whole) == 2 and [p.line for p in e.problems[:2]] == [None, None]
    assert (
        whole[0]
        == f"2 id(s) of en-de missing from the submission: {de[0]['id']!r}, {de[1]['id']!r}"
    )
    assert whole[1] == f"1 id(s) of en-fr missing from the submission: {fr[-1]['id']!r}"
    located = {p.line: p for p in e.problems if p.line is not None}
    assert located[4].id == de[5]["id"] and "labels_a" in located[4].message
    assert (
        located[len(de) - 2 + 4].id == fr[3]["id"]
        and "labels_b has" in located[len(de) - 2 + 4].message
    )
    assert not any("en-it" in p.message for p in e.problems)


def test_swissgov_a_pair_named_only_by_bad_rows_is_covered(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    de = [r for r in rows if r["id"].startswith("admin_de_")]
    it = [r for r in rows if r["id"].startswith("admin_it_")]
    bad = {**it[0], "labels_a": "nope"}
    e = invalid(home, "swissgov-rsd", write_submission(tmp_path, de + [bad], "jsonl"))
    assert e.total == 2
    assert e.problems[0].message.startswith(
        f"{len(it) - 1} id(s) of en-it missing from the submission"
    )
    assert repr(it[0]["id"]) not in e.problems[0].message
    assert e.problems[1].line == len(de) + 1


def test_whole_file_problems_fit_within_the_cap(home, tmp_path):
    rows = valid_rows(home, "swissgov-rsd")
    de = [r for r in rows if r["id"].startswith("admin_de_")]
    fr = [r for r in rows if r["id"].startswith("admin_fr_")]
    lines = [json.dumps(r) for r in de[1:] + fr[1:]] + ["garbage"] * 250
    e = invalid(home, "swissgov-rsd", jsonl(tmp_path, lines))
    assert e.total == 252 and len(e.problems) == 200
    assert [p.message.split(" missing")[0] for p in e.problems[:2]] == [
        "1 id(s) of en-de",
        "1 id(s) of en-fr",
    ]
    assert all(p.line is not None for p in e.problems[2:])
    assert "... and 52 more problems" in e.summary(200)
    assert "... and 202 more problems" in e.summary(50)


def test_loci_bad_lines_unknown_ids_and_duplicates_in_one_report(home, tmp_path):
    qs, ss = loci_ids(home)
    p = tmp_path / "sub.csv"
    p.write_text(
        "query_id,source_id,score\n"
        f'"{qs[0]}","{ss[0]}",0.5\n'
        f'"{qs[0]}","{ss[0]}",0.7\n'
        f'"{qs[1]}","{ss[1]}",0.5,extra\n'
        f'"ghost","{ss[1]}",0.4\n'
        f'"{qs[2]}","{ss[2]}",high\n',
        encoding="utf-8",
    )
    e = invalid(home, "loci-similes", p)
    assert e.total == 4
    assert {p.line for p in e.problems} == {4, 5, 6, None}


def test_loci_duplicates_past_the_cap_are_counted(tmp_path):
    from tasks.importers import import_task

    n = 16
    rel = tmp_path / "release"
    rel.mkdir()
    (rel / "q.csv").write_text(
        "seg_id,text\n" + "".join(f"q{i},t\n" for i in range(n)), encoding="utf-8"
    )
    (rel / "s.csv").write_text(
        "seg_id,text\n" + "".join(f"s{i},t\n" for i in range(n)), encoding="utf-8"
    )
    (rel / "g.csv").write_text("query_id,source_id,label\nq0,s0,1\n", encoding="utf-8")
    h = tmp_path / "home"
    import_task("loci-similes", h, query=rel / "q.csv", source=rel / "s.csv", gold=rel / "g.csv")
    links = [f"q{i},s{j}\n" for i in range(n) for j in range(n)][:250]
    p = tmp_path / "sub.csv"
    p.write_text("query_id,source_id\n" + "".join(links * 2) + "q0,nowhere\n", encoding="utf-8")
    e = invalid(h, "loci-similes", p)
    assert e.total == 251 and len(e.problems) == 200
    assert "... and 51 more problems" in e.summary(200)
