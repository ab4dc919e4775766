"""Importers on the real releases: counts, no test label in public files, idempotency, folds,
and malformed releases that must fail with the file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import LOCI, SWISSGOV, TROTR, need
from helpers import (
    loci_files,
    read_jsonl,
    swissgov_docs,
    trac_gold,
    tree_bytes,
    trotr_pairs,
)

from scorer.errors import ReleaseError
from tasks import task_ids
from tasks.importers import import_task
from tasks.store import TaskStore

LABEL_KEYS = {"label", "labels_a", "labels_b", "score", "topic_variation", "label_set", "non_label"}


def public_rows(store: TaskStore, split: str) -> list[dict]:
    rows = []
    for p in store.public_files(split):
        if p.suffix == ".jsonl":
            rows += read_jsonl(p)
    return rows


# ---------------------------------------------------------------- counts


@pytest.mark.parametrize("task_id, kind", [("tric-binary", "binary"), ("tric-ranking", "ranking")])
def test_tric_counts_and_subsets_match_the_fold_files(home, task_id, kind):
    st = TaskStore(task_id, home)
    m = st.manifest()
    assert m["fold"] == 1
    assert m["counts"]["test"] == {"all": 411, "oov": 184, "iov": 227}
    inputs = read_jsonl(st.public("test", "inputs.jsonl"))
    assert len(inputs) == 411
    for sub in ("oov", "iov"):
        raw = {r["instanceID"] for r in trotr_pairs(kind, "test", sub)}
        assert {r["instanceID"] for r in inputs if r["subset"] == sub} == raw
    dev = read_jsonl(st.public("dev", "inputs.jsonl"))
    # the release repeats one test instance in the fold's dev file: it stays in the hidden test only
    test_ids = {r["instanceID"] for r in trotr_pairs(kind, "test")}
    raw_dev = [r for r in trotr_pairs(kind, "dev") if r["instanceID"] not in test_ids]
    assert len(raw_dev) == len(trotr_pairs(kind, "dev")) - 1
    assert len(dev) == m["counts"]["dev"]["all"] == len(raw_dev)
    assert any("left out of dev" in n for n in m["notes"])


def test_tric_gold_equals_the_release(home):
    for task_id, kind in (("tric-binary", "binary"), ("tric-ranking", "ranking")):
        raw = {r["instanceID"]: float(r["label"]) for r in trotr_pairs(kind, "test")}
        gold = {
            r["instanceID"]: r["label"]
            for r in read_jsonl(TaskStore(task_id, home).gold("test", "gold.jsonl"))
        }
        assert gold == raw


def test_trac_counts_and_targets(home):
    st = TaskStore("trac", home)
    targets = [r["target"] for r in read_jsonl(st.public("test", "targets.jsonl"))]
    assert len(targets) == 40 == st.manifest()["counts"]["test"]["targets"]
    assert set(targets) == set(trac_gold())
    inputs = read_jsonl(st.public("test", "inputs.jsonl"))
    assert {r["target"] for r in inputs} == set(targets)
    gold = {r["target"]: r["score"] for r in read_jsonl(st.gold("test", "gold.jsonl"))}
    assert gold == trac_gold()


def test_swissgov_counts_per_language_pair(home):
    st = TaskStore("swissgov-rsd", home)
    m = st.manifest()
    assert m["counts"]["test"] == {"en-de": 56, "en-fr": 56, "en-it": 56}
    inputs = read_jsonl(st.public("test", "inputs.jsonl"))
    raw = swissgov_docs("test")
    assert [(r["id"], r["pair"]) for r in inputs] == [(r["id"], r["pair"]) for r in raw]
    # text kept exactly, so token counts are the release's
    assert all(
        i["text_a"] == r["text_a"] and i["text_b"] == r["text_b"]
        for i, r in zip(inputs, raw, strict=True)
    )
    assert len(read_jsonl(st.public("dev", "inputs.jsonl"))) == len(swissgov_docs("dev"))


def test_loci_counts(home):
    m = TaskStore("loci-similes", home).manifest()
    f = loci_files()
    n_lines = {
        k: sum(1 for line in open(p, encoding="utf-8") if line.strip()) - 1 for k, p in f.items()
    }
    assert m["counts"]["test"] == {
        "queries": n_lines["query"],
        "sources": n_lines["source"],
        "links": n_lines["gold"],
    }


# ---------------------------------------------------------------- no test label in public files


@pytest.mark.parametrize("task_id", ["tric-binary", "tric-ranking", "trac", "swissgov-rsd"])
def test_public_test_files_hold_no_label(home, task_id):
    st = TaskStore(task_id, home)
    files = st.public_files("test")
    assert files and not any("gold" in p.name for p in files)
    for row in public_rows(st, "test"):
        assert not (LABEL_KEYS & set(row)), sorted(LABEL_KEYS & set(row))
    text = "\n".join(p.read_text(encoding="utf-8") for p in files)
    if task_id == "trac":  # the gold values themselves never appear
        for v in trac_gold().values():
            assert repr(v) not in text and f"{v:.6f}"[:-1] not in text
    if task_id == "swissgov-rsd":
        for r in swissgov_docs("test"):
            assert json.dumps(r["labels_a"]) not in text and json.dumps(r["labels_b"]) not in text


def test_public_loci_files_hold_no_link(home):
    st = TaskStore("loci-similes", home)
    files = st.public_files("test")
    assert sorted(p.name for p in files) == ["queries.csv", "sources.csv"]
    import csv

    with open(loci_files()["gold"], encoding="utf-8", newline="") as f:
        links = [(r["query_id"], r["source_id"]) for r in csv.DictReader(f)]
    for p in files:
        text = p.read_text(encoding="utf-8")
        for q, s in links:
            assert f'{q}","{s}' not in text and f"{q},{s}" not in text


def test_gold_is_kept_apart(home):
    for tid in task_ids():
        st = TaskStore(tid, home)
        gold = list((st.root / "gold" / "test").rglob("*"))
        assert gold, tid
        assert all("public" not in p.relative_to(st.root).parts for p in gold)


# ---------------------------------------------------------------- idempotency and folds


def _import_all(h: Path, fold: int = 1):
    for tid in ("tric-binary", "tric-ranking", "trac"):
        import_task(tid, h, source=TROTR, fold=fold)
    import_task("swissgov-rsd", h, source=SWISSGOV)
    import_task("loci-similes", h, **loci_files())


def test_importing_twice_gives_identical_files(tmp_path, home):
    need(TROTR)
    _import_all(tmp_path)
    first = tree_bytes(tmp_path / "tasks")
    _import_all(tmp_path)
    again = tree_bytes(tmp_path / "tasks")
    assert first == again
    # and the same as another home (whose tasks without a shared release come from demo data)
    assert first == {
        k: v
        for k, v in tree_bytes(home / "tasks").items()
        if k.split("/")[0] in {p.name for p in (tmp_path / "tasks").iterdir()}
    }
    assert not [p for p in (tmp_path / "tasks").iterdir() if p.name.startswith(".")]  # no leftovers


def test_fold_choice(tmp_path):
    need(TROTR)
    m = import_task("tric-binary", tmp_path, source=TROTR, fold=2)
    assert m["fold"] == 2
    inputs = read_jsonl(TaskStore("tric-binary", tmp_path).public("test", "inputs.jsonl"))
    fold2 = [r["instanceID"] for r in trotr_pairs("binary", "test", fold=2)]
    fold1 = [r["instanceID"] for r in trotr_pairs("binary", "test", fold=1)]
    assert [r["instanceID"] for r in inputs] == fold2
    assert set(fold2) != set(fold1)
    assert m["counts"]["test"]["all"] == len(fold2)
    with pytest.raises(ReleaseError, match="fold 11"):
        import_task("tric-binary", tmp_path, source=TROTR, fold=11)
    # the failed import left fold 2 in place
    assert TaskStore("tric-binary", tmp_path).manifest()["fold"] == 2


def test_the_release_root_may_be_the_checkout_parent(tmp_path):
    need(TROTR)
    m = import_task("trac", tmp_path, source=TROTR.parent)
    assert m["counts"]["test"]["targets"] == 40


# ---------------------------------------------------------------- malformed releases


def trotr_copy(tmp_path: Path) -> Path:
    """A TRoTR tree in tmp_path: fold 1's files copied (to be corrupted), the rest linked."""
    need(TROTR)
    root = tmp_path / "TRoTR"
    (root / "datasets").mkdir(parents=True)
    shutil.copytree(TROTR / "datasets" / "FOLD_1", root / "datasets" / "FOLD_1")
    shutil.copy(TROTR / "datasets" / "trac_gold_scores.tsv", root / "datasets")
    shutil.copytree(TROTR / "data", root / "data")
    for p in (root / "datasets").rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    for p in (root / "data").rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return root


def edit_line(path: Path, line: int, fn) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = fn(lines[line - 1])
    path.write_text("\n".join(lines), encoding="utf-8")


def assert_release_error(exc, path: Path, line: int | None, *words: str):
    e = exc.value
    assert e.path == str(path), e
    assert e.line == line, e
    msg = str(e)
    assert str(path) in msg and (line is None or f"line {line}" in msg)
    for w in words:
        assert w in msg, msg


def _fold_file(root: Path, name: str) -> Path:
    return root / "datasets" / "FOLD_1" / "pair-by-line" / name


def _json_edit(fn):
    def edit(line: str) -> str:
        obj = json.loads(line)
        fn(obj)
        return json.dumps(obj)

    return edit


@pytest.mark.parametrize(
    "name, line, edit, words",
    [
        ("test.binary.jsonl", 5, lambda s: s[:-3], ["not valid JSON"]),
        ("test.binary.jsonl", 7, _json_edit(lambda o: o.pop("lemma")), ["missing field", "lemma"]),
        ("test.binary.jsonl", 9, _json_edit(lambda o: o.update(label=2)), ["0 or 1"]),
        ("test.binary.jsonl", 4, _json_edit(lambda o: o.update(label="x")), ["not a number"]),
        ("dev.binary.jsonl", 3, lambda s: "[1, 2]", ["JSON object"]),
        (
            "test.oov.binary.jsonl",
            2,
            _json_edit(lambda o: o.update(instanceID="nowhere")),
            ["nowhere"],
        ),
        (
            "test.binary.jsonl",
            6,
            _json_edit(lambda o: o.update(instanceID=["pair_1"])),
            ["instanceID"],
        ),
    ],
)
def test_malformed_tric_release(tmp_path, name, line, edit, words):
    root = trotr_copy(tmp_path)
    edit_line(_fold_file(root, name), line, edit)
    with pytest.raises(ReleaseError) as e:
        import_task("tric-binary", tmp_path / "home", source=root)
    assert_release_error(e, _fold_file(root, name), line, *words)


def test_duplicate_instance_id_in_a_tric_release(tmp_path):
    root = trotr_copy(tmp_path)
    path = _fold_file(root, "test.ranking.jsonl")
    first = json.loads(path.read_text(encoding="utf-8").split("\n")[2])["instanceID"]
    edit_line(path, 8, _json_edit(lambda o: o.update(instanceID=first)))
    with pytest.raises(ReleaseError) as e:
        import_task("tric-ranking", tmp_path / "home", source=root)
    assert_release_error(e, path, 8, "repeats line 3")


def test_failed_import_keeps_the_previous_task(tmp_path):
    root = trotr_copy(tmp_path)
    h = tmp_path / "home"
    import_task("tric-binary", h, source=root)
    before = tree_bytes(h / "tasks")
    edit_line(_fold_file(root, "test.binary.jsonl"), 5, lambda s: "{")
    with pytest.raises(ReleaseError):
        import_task("tric-binary", h, source=root)
    assert tree_bytes(h / "tasks") == before


@pytest.mark.parametrize(
    "edit, line, words",
    [
        (lambda s: "lemma,variation", 1, ["topic_variation"]),
        (lambda s: s.rsplit(",", 1)[0] + ",high", 3, ["not a number"]),
        (lambda s: s.rsplit(",", 1)[0] + ",nan", 4, ["not finite"]),
    ],
)
def test_malformed_trac_gold(tmp_path, edit, line, words):
    root = trotr_copy(tmp_path)
    path = root / "datasets" / "trac_gold_scores.tsv"
    edit_line(path, line, edit)
    with pytest.raises(ReleaseError) as e:
        import_task("trac", tmp_path / "home", source=root)
    assert_release_error(e, path, line, *words)


def test_trac_gold_target_twice(tmp_path):
    root = trotr_copy(tmp_path)
    path = root / "datasets" / "trac_gold_scores.tsv"
    second = path.read_text(encoding="utf-8").split("\n")[2]
    edit_line(path, 6, lambda s: second)
    with pytest.raises(ReleaseError) as e:
        import_task("trac", tmp_path / "home", source=root)
    assert_release_error(e, path, 6, "appears twice")


def test_trac_instance_with_unknown_use(tmp_path):
    root = trotr_copy(tmp_path)
    path = root / "data" / "instances.tsv"
    edit_line(path, 10, lambda s: s.split("\t")[0] + "\tghost-c1,ghost-c2\t1,2,3,4\t-")
    with pytest.raises(ReleaseError) as e:
        import_task("trac", tmp_path / "home", source=root)
    assert_release_error(e, path, 10, "ghost-c1")


def swissgov_copy(tmp_path: Path) -> Path:
    need(SWISSGOV)
    root = tmp_path / "SwissGov-RSD"
    base = root / "data" / "evaluation" / "gold_labels"
    for split in ("dev", "test"):
        (base / split).mkdir(parents=True)
        for lang in ("de", "fr", "it"):
            src = (
                SWISSGOV
                / "data"
                / "evaluation"
                / "gold_labels"
                / split
                / f"gold_admin_{lang}.jsonl"
            )
            (base / split / src.name).write_bytes(src.read_bytes())
    return root


def test_swissgov_token_count_mismatch(tmp_path):
    root = swissgov_copy(tmp_path)
    path = root / "data" / "evaluation" / "gold_labels" / "test" / "gold_admin_de.jsonl"
    rec = json.loads(path.read_text(encoding="utf-8").split("\n")[6])
    n_tok = len(rec["text_b"].split())
    edit_line(path, 7, _json_edit(lambda o: o.update(labels_b=o["labels_b"][:-3])))
    with pytest.raises(ReleaseError) as e:
        import_task("swissgov-rsd", tmp_path / "home", source=root)
    assert_release_error(
        e, path, 7, f"{rec['id']}: labels_b has {n_tok - 3} values, text_b has {n_tok} tokens"
    )


@pytest.mark.parametrize(
    "line, edit, words",
    [
        (3, lambda s: s.replace('"labels_a"', '"labels_x"'), ["missing field", "labels_a"]),
        (2, lambda s: s + "}", ["not valid JSON"]),
        (
            5,
            _json_edit(lambda o: o.update(labels_a=["a"] * len(o["labels_a"]))),
            ["list of numbers"],
        ),
        (6, _json_edit(lambda o: o.update(text_b=None)), ["text_b"]),
        (8, _json_edit(lambda o: o.update(id=["admin_fr_x"])), ["id"]),
    ],
)
def test_malformed_swissgov_release(tmp_path, line, edit, words):
    root = swissgov_copy(tmp_path)
    path = root / "data" / "evaluation" / "gold_labels" / "test" / "gold_admin_fr.jsonl"
    edit_line(path, line, edit)
    with pytest.raises(ReleaseError) as e:
        import_task("swissgov-rsd", tmp_path / "home", source=root)
    assert_release_error(e, path, line, *words)


def test_swissgov_duplicate_id(tmp_path):
    root = swissgov_copy(tmp_path)
    path = root / "data" / "evaluation" / "gold_labels" / "test" / "gold_admin_it.jsonl"
    first = json.loads(path.read_text(encoding="utf-8").split("\n")[0])["id"]
    edit_line(path, 4, _json_edit(lambda o: o.update(id=first)))
    with pytest.raises(ReleaseError) as e:
        import_task("swissgov-rsd", tmp_path / "home", source=root)
    assert_release_error(e, path, 4, "repeats")


def loci_copy(tmp_path: Path) -> dict:
    need(LOCI)
    out = {}
    for k, p in loci_files().items():
        dst = tmp_path / p.name
        dst.write_bytes(p.read_bytes())
        out[k] = dst
    return out


@pytest.mark.parametrize(
    "which, line, edit, words",
    [
        (
            "gold",
            4,
            lambda s: '"no such query","verg. aen. 4.172",1',
            ["no such query", "query file"],
        ),
        (
            "gold",
            6,
            lambda s: '"hier. adv. iovin. 1.1","no such source",1',
            ["no such source", "source file"],
        ),
        ("gold", 1, lambda s: "query_id,source_id", ["label"]),
        ("query", 1, lambda s: '"id","text"', ["seg_id"]),
        ("query", 3, lambda s: '"hier. adv. iovin. 1.1","again"', ["repeats line 2"]),
        ("source", 2, lambda s: s + ",extra", ["expected 2 columns"]),
    ],
)
def test_malformed_loci_release(tmp_path, which, line, edit, words):
    files = loci_copy(tmp_path)
    edit_line(files[which], line, edit)
    with pytest.raises(ReleaseError) as e:
        import_task("loci-similes", tmp_path / "home", **files)
    assert_release_error(e, files[which], line, *words)


def test_loci_duplicate_gold_link(tmp_path):
    files = loci_copy(tmp_path)
    second = files["gold"].read_text(encoding="utf-8").split("\n")[1]
    edit_line(files["gold"], 5, lambda s: second)
    with pytest.raises(ReleaseError) as e:
        import_task("loci-similes", tmp_path / "home", **files)
    assert_release_error(e, files["gold"], 5, "appears twice")


def test_bad_utf8_in_a_release_names_the_file(tmp_path):
    files = loci_copy(tmp_path)
    files["source"].write_bytes(files["source"].read_bytes() + b'"x","\xff"\n')
    with pytest.raises(ReleaseError) as e:
        import_task("loci-similes", tmp_path / "home", **files)
    assert str(files["source"]) in str(e.value) and "UTF-8" in str(e.value)


def test_not_a_checkout(tmp_path):
    with pytest.raises(ReleaseError, match="not a release checkout"):
        import_task("tric-binary", tmp_path / "home", source=tmp_path)
    with pytest.raises(ReleaseError, match="not a release checkout"):
        import_task("swissgov-rsd", tmp_path / "home", source=tmp_path)
