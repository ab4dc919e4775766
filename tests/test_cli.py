"""The `palimpsest` command through click's CliRunner: exit statuses, JSON contract, no
tracebacks."""

from __future__ import annotations

import gzip
import json
import zipfile

import pytest
from click.testing import CliRunner
from conftest import TROTR, need
from helpers import loci_files, read_jsonl, write_submission

from cli.main import main
from tasks import get_task, task_ids
from tasks.store import TaskStore

SUBSETS = {
    "tric-binary": {"all", "oov", "iov"},
    "tric-ranking": {"all", "oov", "iov"},
    "trac": {"all"},
    # the pairs, their macro, and each pair's annotators' documents (Table 7)
    "swissgov-rsd": {"en-de", "en-fr", "en-it", "macro"}
    | {f"{p}-a{a}" for p in ("en-de", "en-fr", "en-it") for a in (1, 2)},
    "loci-similes": {"all"},
}


def run(*args, home=None):
    argv = list(map(str, args)) + (["--home", str(home)] if home is not None else [])
    result = CliRunner().invoke(main, argv, catch_exceptions=False, env={"PALIMPSEST_DEBUG": ""})
    assert "Traceback" not in result.output, result.output
    return result


def valid_submission(home, tmp_path, task_id):
    st = TaskStore(task_id, home)
    if task_id == "loci-similes":
        import csv

        with open(loci_files()["gold"], encoding="utf-8", newline="") as f:
            rows = [
                {"query_id": r["query_id"], "source_id": r["source_id"], "score": 0.5 + i / 100}
                for i, r in enumerate(csv.DictReader(f))
            ]
        return write_submission(tmp_path, rows, "csv")
    if task_id == "swissgov-rsd":
        rows = [
            {
                "id": r["id"],
                "labels_a": [i % 3 / 2 for i in range(len(r["text_a"].split()))],
                "labels_b": [i % 4 / 3 for i in range(len(r["text_b"].split()))],
            }
            for r in read_jsonl(st.public("test", "inputs.jsonl"))
        ]
        return write_submission(tmp_path, rows, "jsonl")
    if task_id == "trac":
        return write_submission(
            tmp_path,
            [
                {"target": r["target"], "score": i % 7}
                for i, r in enumerate(read_jsonl(st.public("test", "targets.jsonl")))
            ],
            "jsonl",
        )
    if task_id not in (
        "tric-binary",
        "tric-ranking",
    ):  # a later task: the file its declaration makes
        from server.demo import predictions

        data, name = predictions(task_id, "test", home, 0.3, seed=1)
        (tmp_path / name).write_bytes(data)
        return tmp_path / name
    value = "label" if task_id == "tric-binary" else "score"
    return write_submission(
        tmp_path,
        [
            {"instanceID": r["instanceID"], value: i % 2}
            for i, r in enumerate(read_jsonl(st.public("test", "inputs.jsonl")))
        ],
        "jsonl",
    )


@pytest.mark.parametrize("task_id", task_ids())
def test_validate_and_score_a_valid_file(home, tmp_path, task_id):
    path = valid_submission(home, tmp_path, task_id)
    r = run("validate", task_id, path, home=home)
    assert r.exit_code == 0 and "valid" in r.output
    r = run("validate", task_id, path, "--json", home=home)
    assert r.exit_code == 0 and json.loads(r.output)["valid"] is True
    r = run("score", task_id, path, "--json", home=home)
    assert r.exit_code == 0
    out = json.loads(r.output)
    assert out["task"] == task_id and out["split"] == "test"
    assert set(out["metrics"]) == SUBSETS.get(task_id, set(get_task(task_id).subsets))
    subset, name = out["primary"]["subset"], out["primary"]["name"]
    assert out["primary"]["value"] == out["metrics"][subset][name]
    r = run("score", task_id, path, home=home)
    assert r.exit_code == 0 and f"{name} on {subset}" in r.output


def _broken_files(tmp_path, home) -> dict:
    d = tmp_path / "broken"
    d.mkdir()
    files = {}

    def put(name, data: bytes):
        (d / name).write_bytes(data)
        files[name] = d / name

    put("empty.jsonl", b"")
    put("blank.csv", b"\n\n  \n")
    put("binary.jsonl", bytes(range(256)) * 4)
    put("latin1.jsonl", '{"instanceID": "caf\xe9", "label": 1}\n'.encode("latin-1"))
    put("notjson.jsonl", b"{{{\n[[[\n")
    put("array.jsonl", b"[1, 2, 3]\n")
    put(
        "huge-int.jsonl",
        b'{"instanceID": "x", "label": 1' + b"0" * 400 + b', "score": 1' + b"0" * 400 + b"}\n",
    )
    put(
        "list-ids.jsonl",
        b'{"instanceID": ["x"], "target": {"a": 1}, "id": [1], "query_id": ["q"], '
        b'"source_id": {"s": 1}, "label": 1, "score": 1}\n',
    )
    put("header-only.csv", b"a,b,c\n")
    put("ragged.tsv", b"instanceID\tlabel\nx\n\ty\tz\n")
    put("long-field.csv", b"query_id,source_id,x" + b"y" * 200_000 + b"\n1,2,3\n")
    put("quote.csv", b'query_id,source_id\n"unterminated,1\n')
    put("nul.csv", b"query_id,source_id\n\x00,\x00\n")
    put("trunc.jsonl.gz", gzip.compress(b'{"a": 1}\n' * 100)[:30])
    put("fake.zip", b"PK\x03\x04" + b"\x01" * 100)
    z2 = d / "two.zip"
    with zipfile.ZipFile(z2, "w") as z:
        z.writestr("a.jsonl", b"{}\n")
        z.writestr("b.jsonl", b"{}\n")
    files["two.zip"] = z2
    zo = d / "outside.zip"
    with zipfile.ZipFile(zo, "w") as z:
        z.writestr(zipfile.ZipInfo("../x.jsonl"), b"{}\n")
    files["outside.zip"] = zo
    files["missing.jsonl"] = d / "does-not-exist.jsonl"
    files["a-directory"] = d
    return files


@pytest.mark.parametrize("task_id", task_ids())
@pytest.mark.parametrize("command", ["validate", "score"])
def test_broken_inputs_exit_1_without_traceback(home, tmp_path, task_id, command):
    for name, path in _broken_files(tmp_path, home).items():
        for extra in ([], ["--json"]):
            r = run(command, task_id, path, *extra, home=home)
            assert r.exit_code == 1, (name, r.exit_code, r.output)
            assert "internal error" not in r.output, (name, r.output)
            if extra:
                out = json.loads(r.stdout)
                assert out["valid"] is False and out["total"] >= 1 and out["problems"], name


def test_problems_are_printed_capped(home, tmp_path):
    p = tmp_path / "sub.jsonl"
    p.write_text("nonsense\n" * 120, encoding="utf-8")
    r = run("validate", "tric-binary", p, home=home)
    assert r.exit_code == 1
    # 120 unreadable lines and, in the same report, the 411 ids they leave missing
    assert "121 problems in the submission" in r.output and "... and 71 more problems" in r.output
    assert "line 1:" in r.output and "411 instanceID(s) missing from the submission" in r.output


def test_invalid_file_lists_lines_and_ids(home, tmp_path):
    rows = [
        {"target": r["target"], "score": 1.0}
        for r in read_jsonl(TaskStore("trac", home).public("test", "targets.jsonl"))
    ]
    rows[3]["score"] = "high"
    r = run("validate", "trac", write_submission(tmp_path, rows, "jsonl"), home=home)
    assert r.exit_code == 1
    assert f"line 4, id {rows[3]['target']!r}: score must be a number" in r.output


def test_user_errors_exit_2_with_one_line(tmp_path, home):
    path = tmp_path / "sub.jsonl"
    path.write_text('{"target": "x", "score": 1}\n', encoding="utf-8")
    r = run("validate", "trac", path, home=tmp_path / "empty-home")
    assert r.exit_code == 2 and "import it with" in r.output
    r = run("validate", "trac", path, "--split", "dev", home=home)
    assert r.exit_code == 2 and "no 'dev' split" in r.output
    r = run("validate", "tric-binaryy", path, home=home)
    assert r.exit_code == 2


def test_tasks_list_and_show(home):
    r = run("tasks", "list", "--json", home=home)
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert [x["id"] for x in rows] == task_ids() and all(x["imported"] for x in rows)
    for tid in task_ids():
        r = run("tasks", "show", tid)
        assert r.exit_code == 0 and tid in r.output and "Primary metric" in r.output
        assert json.loads(run("tasks", "show", tid, "--json").output)["id"] == tid


def test_tasks_import_commands(tmp_path):
    need(TROTR)
    h = tmp_path / "home"
    r = run("tasks", "import", "tric-binary", "--from", TROTR, "--fold", 3, home=h)
    assert r.exit_code == 0 and "test: all" in r.output
    assert TaskStore("tric-binary", h).manifest()["fold"] == 3
    f = loci_files()
    r = run(
        "tasks",
        "import",
        "loci-similes",
        "--query",
        f["query"],
        "--source",
        f["source"],
        "--gold",
        f["gold"],
        home=h,
    )
    assert r.exit_code == 0 and "links 10" in r.output
    assert (
        run("tasks", "import", "tric-binary", "--from", TROTR, "--fold", 11, home=h).exit_code == 2
    )
    r = run("tasks", "import", "tric-binary", home=h)
    assert r.exit_code == 2 and "needs --from" in r.output
    r = run("tasks", "import", "loci-similes", "--query", f["query"], home=h)
    assert r.exit_code == 2 and "needs --query, --source and --gold" in r.output


def test_malformed_release_exits_2_naming_file_and_line(tmp_path):
    f = loci_files()
    bad = tmp_path / "gold.csv"
    bad.write_text(
        f["gold"].read_text(encoding="utf-8") + '"ghost","verg. aen. 4.172",1\n', encoding="utf-8"
    )
    n = len(bad.read_text(encoding="utf-8").splitlines())
    r = run(
        "tasks",
        "import",
        "loci-similes",
        "--query",
        f["query"],
        "--source",
        f["source"],
        "--gold",
        bad,
        home=tmp_path / "home",
    )
    assert r.exit_code == 2
    assert f"{bad}, line {n}" in r.output and "ghost" in r.output
    r = run("tasks", "import", "swissgov-rsd", "--from", tmp_path, home=tmp_path / "home")
    assert r.exit_code == 2 and "not a release checkout" in r.output


def test_import_swissgov_full_test_split(tmp_path):
    """--test-split full: all 224 documents per language pair as the hidden test, no dev split."""
    from conftest import SWISSGOV

    need(SWISSGOV)
    h = tmp_path / "home"
    r = run("tasks", "import", "swissgov-rsd", "--from", SWISSGOV, "--test-split", "full", home=h)
    assert r.exit_code == 0, r.output
    m = TaskStore("swissgov-rsd", h).manifest()
    assert m["test_split"] == "full" and m["splits"] == ["test"]
    assert m["counts"]["test"] == {"en-de": 224, "en-fr": 224, "en-it": 224}
    r = run("tasks", "import", "swissgov-rsd", "--from", SWISSGOV, "--test-split", "test", home=h)
    assert r.exit_code == 0 and TaskStore("swissgov-rsd", h).manifest()["splits"] == ["dev", "test"]
    assert (
        run(
            "tasks", "import", "swissgov-rsd", "--from", SWISSGOV, "--test-split", "all", home=h
        ).exit_code
        == 2
    )
    r = run("tasks", "import", "tric-binary", "--from", TROTR, "--test-split", "full", home=h)
    assert r.exit_code == 2 and "takes no --test-split" in r.output
