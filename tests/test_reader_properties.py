"""Property-based tests of the readers and validators (hypothesis).

Any bytes at all give a valid submission or SubmissionInvalid, never another exception; a valid
random submission validates and scores identically in jsonl, csv, tsv, .gz and .zip, in any row
order.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import zipfile

import numpy as np
import pytest
from helpers import read_jsonl, write_submission
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer import score_validated, validate_file
from scorer.errors import SubmissionInvalid
from scorer.reader import Limits, load
from tasks import task_ids
from tasks.store import TaskStore

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
NAMES = ["sub.jsonl", "sub.csv", "sub.tsv", "sub.txt", "sub", "sub.json"]
FIELDS = [
    "instanceID",
    "label",
    "score",
    "target",
    "id",
    "labels_a",
    "labels_b",
    "query_id",
    "source_id",
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("properties")


def check_any(home, path, task_id) -> None:
    """Validation (and scoring, when valid) ends with a result or SubmissionInvalid, nothing
    else."""
    try:
        v = validate_file(
            task_id,
            path,
            home=home,
            limits=Limits(max_bytes=1 << 20, max_uncompressed_bytes=1 << 20),
        )
    except SubmissionInvalid as e:
        assert e.total >= 1 and e.problems
        assert all(isinstance(p.message, str) and p.message for p in e.problems)
        return
    score_validated(v, home=home)


def wrap(data: bytes, name: str, how: str, dir) -> object:
    if how == "gz":
        p = dir / (name + ".gz")
        p.write_bytes(gzip.compress(data, mtime=0))
    elif how == "zip":
        p = dir / "sub.zip"
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, data)
    else:
        p = dir / name
        p.write_bytes(data)
    return p


@settings(max_examples=40, **SETTINGS)
@given(
    data=st.binary(max_size=3000),
    name=st.sampled_from(NAMES),
    how=st.sampled_from(["", "gz", "zip", "raw"]),
    task_id=st.sampled_from(task_ids()),
)
def test_arbitrary_bytes(home, scratch, data, name, how, task_id):
    check_any(home, wrap(data, name, how, scratch), task_id)


@settings(max_examples=40, **SETTINGS)
@given(data=st.binary(min_size=4, max_size=400), cut=st.integers(0, 400))
def test_mangled_archives(home, scratch, data, cut):
    """Real gzip/zip containers with their bytes cut or overwritten."""
    for how in ("gz", "zip"):
        p = wrap(data, "sub.jsonl", how, scratch)
        raw = bytearray(p.read_bytes())
        i = cut % len(raw)
        p.write_bytes(bytes(raw[:i]) + data[: len(raw) - i])
        try:
            load(p)
        except SubmissionInvalid:
            pass


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.just(10**400),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(
        ["hier. adv. iovin. 1.1", "verg. aen. 10.636", "admin_de_1", "pair_40_(Matthew 7:7)"]
    ),
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)
records = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=50, **SETTINGS)
@given(
    rows=st.lists(records | json_values, min_size=1, max_size=8),
    task_id=st.sampled_from(task_ids()),
)
def test_json_lines_of_any_shape(home, scratch, rows, task_id):
    text = "\n".join(json.dumps(r) for r in rows)  # NaN/Infinity literals included
    p = scratch / "sub.jsonl"
    p.write_text(text, encoding="utf-8")
    check_any(home, p, task_id)


cells = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10
) | st.sampled_from(
    ["nan", "inf", "-1", "1", "0", "1e999", "[1, 2]", "0.5 0.5", "hier. adv. iovin. 1.1"]
)


@settings(max_examples=50, **SETTINGS)
@given(
    header=st.lists(st.sampled_from(FIELDS + ["score", "x"]), min_size=1, max_size=4),
    rows=st.lists(st.lists(cells, max_size=5), max_size=6),
    fmt=st.sampled_from(["csv", "tsv"]),
    task_id=st.sampled_from(task_ids()),
)
def test_tables_of_any_shape(home, scratch, header, rows, fmt, task_id):
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    p = scratch / f"sub.{fmt}"
    p.write_text(buf.getvalue(), encoding="utf-8", errors="surrogatepass")
    check_any(home, p, task_id)


# ---------------------------------------------------------------- round trips of valid submissions


FORMATS = ["jsonl", "csv", "tsv", "jsonl.gz", "csv.zip", "tsv.gz", "jsonl.zip"]
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


def ids(home, task_id):
    st_ = TaskStore(task_id, home)
    if task_id == "trac":
        return [r["target"] for r in read_jsonl(st_.public("test", "targets.jsonl"))]
    return [r["instanceID"] for r in read_jsonl(st_.public("test", "inputs.jsonl"))]


def same_everywhere(home, dir, task_id, rows, columns=None):
    """Validate and score the rows in every format and in a shuffled order: all results equal."""
    results = []
    shuffled = list(rows)
    random.Random(len(rows)).shuffle(shuffled)
    for i, fmt in enumerate(FORMATS):
        path = write_submission(dir / fmt, shuffled if i % 2 else rows, fmt, columns=columns)
        v = validate_file(task_id, path, home=home)
        assert v.format == fmt.split(".")[0]
        results.append(score_validated(v, home=home))
    first = results[0]
    for r in results[1:]:
        assert r["metrics"] == first["metrics"] and r["notes"] == first["notes"]
    return first


@settings(max_examples=8, **SETTINGS)
@given(data=st.data(), task_id=st.sampled_from(["tric-binary", "tric-ranking", "trac"]))
def test_keyed_round_trip(home, scratch, data, task_id):
    keys = ids(home, task_id)
    if task_id == "tric-binary":
        values = data.draw(st.lists(st.integers(0, 1), min_size=len(keys), max_size=len(keys)))
        rows = [{"instanceID": k, "label": v} for k, v in zip(keys, values, strict=True)]
    else:
        values = data.draw(st.lists(finite, min_size=len(keys), max_size=len(keys)))
        key = "target" if task_id == "trac" else "instanceID"
        rows = [{key: k, "score": v} for k, v in zip(keys, values, strict=True)]
    same_everywhere(home, scratch / task_id, task_id, rows)


@pytest.mark.slow
@settings(max_examples=3, **SETTINGS)
@given(
    seed=st.integers(0, 2**32 - 1),
    pairs=st.sets(st.sampled_from(["de", "fr", "it"]), min_size=1, max_size=2),
    ties=st.booleans(),
)
def test_swissgov_round_trip(home, scratch, seed, pairs, ties):
    rng = np.random.default_rng(seed)
    rows = []
    for r in read_jsonl(TaskStore("swissgov-rsd", home).public("test", "inputs.jsonl")):
        if r["id"].split("_")[1] not in pairs:
            continue
        row = {"id": r["id"]}
        for side in ("a", "b"):
            v = rng.standard_normal(len(r[f"text_{side}"].split()))
            row[f"labels_{side}"] = [float(x) for x in (np.round(v) if ties else v)]
        rows.append(row)
    result = same_everywhere(home, scratch / "swissgov", "swissgov-rsd", rows)
    for lang, pair in (("de", "en-de"), ("fr", "en-fr"), ("it", "en-it")):
        assert (result["metrics"][pair]["spearman"] is None) == (lang not in pairs)


@settings(max_examples=25, **SETTINGS)
@given(data=st.data(), with_score=st.booleans())
def test_loci_round_trip(home, scratch, data, with_score):
    with open(
        TaskStore("loci-similes", home).public("test", "queries.csv"), encoding="utf-8", newline=""
    ) as f:
        qs = [r["seg_id"] for r in csv.DictReader(f)]
    with open(
        TaskStore("loci-similes", home).public("test", "sources.csv"), encoding="utf-8", newline=""
    ) as f:
        ss = [r["seg_id"] for r in csv.DictReader(f)]
    links = data.draw(
        st.sets(st.tuples(st.sampled_from(qs), st.sampled_from(ss)), min_size=1, max_size=40)
    )
    scores = data.draw(st.lists(finite, min_size=len(links), max_size=len(links)))
    rows = [
        {"query_id": q, "source_id": s, "score": sc}
        for (q, s), sc in zip(sorted(links), scores, strict=True)
    ]
    columns = ["query_id", "source_id"] + (["score"] if with_score else [])
    if not with_score:
        rows = [{k: r[k] for k in columns} for r in rows]
    result = same_everywhere(home, scratch / "loci", "loci-similes", rows, columns)
    assert result["metrics"]["all"]["tp"] + result["metrics"]["all"]["fp"] == len(links)
