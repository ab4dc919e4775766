"""Competition bundles (tasks/bundle.py): the example reads, installs and scores; a broken copy is
refused with every problem at once; zips are bounded; an export installs back to the same bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers import tree_bytes

from scorer import SubmissionInvalid, score_file, validate_file
from scorer.metrics import REGISTRY
from tasks import all_tasks, get_task, unregister_declared
from tasks.bundle import (
    BundleInvalid,
    bundle_schema,
    export_task,
    install_tasks,
    load_declared,
    read_bundle,
    uninstall_tasks,
    write_bundle_zip,
)
from tasks.bundle_models import KNOWN_METRICS
from tasks.errors import TaskNotFound
from tasks.importers import import_task
from tasks.store import TaskStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
PREDICTIONS = EXAMPLE / "predictions-dev.jsonl"
TASK = "sts-latin"


@pytest.fixture(autouse=True)
def _forget_declared():
    """Each test installs into its own home; the process registry is left as it was found."""
    yield
    unregister_declared(TASK)


@pytest.fixture
def installed(tmp_path) -> Path:
    home = tmp_path / "home"
    assert install_tasks(read_bundle(EXAMPLE, home=home), home) == [TASK]
    return home


# ----------------------------------------------------------------------------- the example


def test_the_example_reads_with_its_pages_tasks_and_phases():
    b = read_bundle(EXAMPLE)
    assert b.spec.id == "sts-latin-2027" and b.spec.state == "draft"
    assert list(b.pages) == ["overview", "data", "evaluation", "terms", "timeline"]
    assert b.pages["terms"][0] == "Terms" and "CC0" in b.pages["terms"][1]
    assert [f.key for f in b.spec.fact_fields] == ["system_description", "external_data", "track"]
    (task,) = b.tasks
    assert task.id == TASK and task.kind == "instances" and task.primary == ("all", "spearman")
    assert task.hidden_splits == ("test",) and task.splits == ("dev", "test")
    assert task.importer == "tasks.bundle:import_declared" and "bundle" in task.import_help
    assert [p.split for p in b.spec.tasks[0].phases] == ["dev", "test", "test"]


def test_the_example_installs_registers_and_scores(installed, tmp_path):
    store = TaskStore(TASK, installed)
    assert store.manifest()["splits"] == ["dev", "test"]
    assert store.gold("test", "gold.jsonl").is_file()
    assert store.public("dev", "gold.jsonl").is_file()  # dev gold is public
    assert not store.public("test", "gold.jsonl").exists()  # test gold never is
    assert get_task(TASK).title.startswith("STS-Latin")
    assert TASK in [t.id for t in all_tasks()]
    validate_file(TASK, PREDICTIONS, split="dev", home=installed)
    result = score_file(TASK, PREDICTIONS, split="dev", home=installed)
    assert result["primary"]["name"] == "spearman" and result["primary"]["subset"] == "all"
    assert 0.6 < result["primary"]["value"] < 0.95
    assert set(result["metrics"]) == {"all", "prose", "verse", "macro"}
    assert result["metrics"]["all"]["n"] == 150
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"pair_id": "LAT-dev-0000", "score": "high"}\n', encoding="utf-8")
    with pytest.raises(SubmissionInvalid) as e:
        validate_file(TASK, bad, split="dev", home=installed)
    assert "score" in str(e.value) and "149" in str(e.value)


def test_a_worker_finds_the_declared_task_in_its_data_directory(installed):
    """Another process knows nothing of the install: it finds the task in $PALIMPSEST_HOME."""
    code = (
        "import json, sys; from scorer import score_file; "
        f"print(json.dumps(score_file({TASK!r}, sys.argv[1], split='dev')['primary']))"
    )
    env = {**os.environ, "PALIMPSEST_HOME": str(installed), "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(PREDICTIONS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["name"] == "spearman"


def test_uninstall_removes_files_and_registration_and_load_declared_brings_it_back(installed):
    assert load_declared(installed) == [TASK]  # idempotent
    uninstall_tasks([TASK], installed)
    assert not TaskStore(TASK, installed).root.exists()
    with pytest.raises(TaskNotFound):
        get_task(TASK)
    assert load_declared(installed) == []


def test_an_installed_id_and_a_built_in_id_are_refused(installed, tmp_path):
    with pytest.raises(BundleInvalid) as e:
        read_bundle(EXAMPLE, home=installed)
    assert "tasks[0].id" in str(e.value) and "already installed" in str(e.value)
    copy = tmp_path / "b"
    shutil.copytree(EXAMPLE, copy)
    y = copy / "competition.yaml"
    y.write_text(y.read_text().replace("  - id: sts-latin\n", "  - id: str\n"))
    with pytest.raises(BundleInvalid) as e:
        read_bundle(copy)
    assert "built-in task" in str(e.value)
    data = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
    data["tasks"].append(data["tasks"][0])
    out = tmp_path / "twice.zip"
    write_bundle_zip(data, EXAMPLE, out)
    with pytest.raises(BundleInvalid) as e:
        read_bundle(out, work_dir=tmp_path)
    assert "tasks[1].id: task 'sts-latin' declared twice (also tasks[0])" in str(e.value)


# ----------------------------------------------------------------------------- a broken bundle


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_broken_bundle_names_every_problem_at_once(tmp_path):
    root = tmp_path / "broken"
    shutil.copytree(EXAMPLE, root)
    y = root / "competition.yaml"
    text = y.read_text(encoding="utf-8")
    text = text.replace("  approval: manual", "  approval: sometimes")  # schema: a bad value
    text = text.replace(  # schema: a key naming code
        "    family: instances\n", "    family: instances\n    importer: tasks.semrel:import_str\n"
    )
    text = text.replace("file: pages/data.md", "file: pages/nothing.md")  # a missing file
    text = text.replace("file: pages/terms.md", "file: ../terms.md")  # outside the bundle
    text = text.replace("file: pages/timeline.md", "file: /etc/passwd")  # absolute
    text = text.replace("metrics: [spearman, pearson, n]", "metrics: [spearmann, pearson, n]")
    text = text.replace(  # a public file of dev labelling test pairs
        "inputs: [sts-latin/dev/inputs.jsonl]",
        "inputs: [sts-latin/dev/inputs.jsonl, sts-latin/dev/extra.jsonl]",
    )
    y.write_text(text, encoding="utf-8")
    test_gold = root / "sts-latin" / "test" / "test-gold.jsonl"
    rows = test_gold.read_text(encoding="utf-8").splitlines(keepends=True)
    test_gold.write_text("".join(rows[:-3]), encoding="utf-8")  # an id mismatch: 3 pairs
    (root / "sts-latin" / "dev" / "extra.jsonl").write_text("".join(rows[:2]), encoding="utf-8")
    dev_gold = root / "sts-latin" / "dev" / "dev-gold.jsonl"
    dev_rows = dev_gold.read_text(encoding="utf-8").splitlines(keepends=True)
    dev_rows[4] = '{"pair_id": "LAT-dev-0004", "genre": "verse", "score": "high"}\n'
    dev_gold.write_text("".join(dev_rows), encoding="utf-8")

    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    problems = e.value.problems
    by_path: dict[str, list] = {}
    for p in problems:
        by_path.setdefault(p.path, []).append(p)

    def one(path: str, needle: str, line: int | None) -> None:
        hits = [p for p in by_path.get(path, []) if needle in p.message]
        assert hits, f"no {needle!r} at {path}:\n{e.value}"
        assert hits[0].line == line, (hits[0], line)

    one("registration.approval", "'auto' or 'manual'", _line(text, "approval: sometimes"))
    one("tasks[0].importer", "unknown key", _line(text, "importer: tasks.semrel"))
    one("pages[1].file", "no such file", _line(text, "pages/nothing.md"))
    one("pages[3].file", "outside the bundle", _line(text, "../terms.md"))
    one("pages[4].file", "absolute path", _line(text, "/etc/passwd"))
    one("tasks[0].metrics[0]", "did you mean 'spearman'?", _line(text, "spearmann"))
    one("tasks[0].primary.metric", "not among the metrics", _line(text, "primary:"))
    one("tasks[0].splits.test.gold", "3 only in the inputs", _line(text, "test/test-gold.jsonl"))
    one("tasks[0].splits.dev", "2 instance(s) of the hidden test split", _line(text, "    dev:"))
    one("sts-latin/dev/dev-gold.jsonl", "field score: a number expected", 5)
    rendered = str(e.value).splitlines()
    assert len(rendered) == len(problems)
    assert f"competition.yaml:{_line(text, 'spearmann')}: tasks[0].metrics[0]: " in str(e.value)
    assert "sts-latin/dev/dev-gold.jsonl:5: field score" in str(e.value)


def test_python_and_links_out_of_the_bundle_are_refused(tmp_path):
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    (root / "hook.py").write_text("print('no')\n")
    (tmp_path / "secret.md").write_text("outside\n")
    (root / "pages" / "link.md").symlink_to(tmp_path / "secret.md")
    y = root / "competition.yaml"
    y.write_text(y.read_text().replace("pages/overview.md", "pages/link.md"))
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    msg = str(e.value)
    assert "hook.py: a bundle carries no Python" in msg
    assert "pages/link.md: a symbolic link leading outside the bundle" in msg
    assert "pages[0].file" in msg and "outside the bundle" in msg


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    (root / "pages" / "data.md").write_bytes(b"# Data\n\xff\xfe\n")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    assert "pages[1].file" in str(e.value) and "not UTF-8 (line 2" in str(e.value)


# ----------------------------------------------------------------------------- zips


def test_a_zipped_bundle_reads_like_its_directory(tmp_path):
    spec = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
    out = tmp_path / "bundle.zip"
    write_bundle_zip(spec, EXAMPLE, out)
    b = read_bundle(out, work_dir=tmp_path)
    assert b.root.is_relative_to(tmp_path)
    assert b.spec == read_bundle(EXAMPLE).spec and b.pages == read_bundle(EXAMPLE).pages


def test_a_zip_bomb_is_refused_before_extraction(tmp_path):
    out = tmp_path / "bomb.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("competition.yaml", "id: x\n")
        zf.writestr("zeros.jsonl", b"\0" * (20 * 1024 * 1024))
    with pytest.raises(BundleInvalid) as e:
        read_bundle(out, work_dir=tmp_path / "w")
    assert "zeros.jsonl" in str(e.value) and "zip bomb" in str(e.value)
    assert not any((tmp_path / "w").rglob("zeros.jsonl")) if (tmp_path / "w").exists() else True


def test_a_zip_slip_and_a_link_are_refused(tmp_path):
    out = tmp_path / "slip.zip"
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("competition.yaml", "id: x\n")
        zf.writestr("../evil.md", "up\n")
        zf.writestr("/abs.md", "abs\n")
        zf.writestr("C:/drive.md", "drive\n")
        zf.writestr("hook.py", "print()\n")
        link = zipfile.ZipInfo("link.md")
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
    work = tmp_path / "w"
    work.mkdir()
    with pytest.raises(BundleInvalid) as e:
        read_bundle(out, work_dir=work)
    msg = str(e.value)
    for name in ("../evil.md", "/abs.md", "C:/drive.md"):
        assert f"{name}: a path outside the bundle" in msg
    assert "link.md: a symbolic link" in msg and "hook.py: a bundle carries no Python" in msg
    assert not (tmp_path / "evil.md").exists() and not list(work.rglob("*.md"))


# ----------------------------------------------------------------------------- export


def test_export_then_install_gives_the_same_gold_and_declaration(installed, tmp_path):
    dest = tmp_path / "exported"
    spec = export_task(TASK, installed, dest, include_gold=True)
    assert spec["splits"]["test"]["gold"] == f"{TASK}/test/gold.jsonl"
    assert (dest / TASK / "test" / "gold.jsonl").is_file()
    # the fact sheet its phases' boards filter on (the track) travels with the competition
    facts = read_bundle(EXAMPLE).spec.model_dump(mode="json")["fact_fields"]
    competition = {"id": "again", "title": "Again", "fact_fields": facts, "tasks": [spec]}
    out = tmp_path / "again.zip"
    write_bundle_zip(competition, dest, out)
    again = tmp_path / "home2"
    b = read_bundle(out, work_dir=tmp_path, home=again)
    assert b.tasks[0] == get_task(TASK)  # the same declaration
    install_tasks(b, again)
    first, second = TaskStore(TASK, installed).root, TaskStore(TASK, again).root
    assert tree_bytes(first / "gold") == tree_bytes(second / "gold")
    assert tree_bytes(first / "public") == tree_bytes(second / "public")
    assert (first / "declaration.json").read_bytes() == (second / "declaration.json").read_bytes()


def test_export_without_gold_leaves_the_hidden_gold_out(installed, tmp_path):
    dest = tmp_path / "public"
    spec = export_task(TASK, installed, dest, include_gold=False)
    assert spec["splits"]["test"] == {
        "inputs": [f"{TASK}/test/inputs.jsonl"],
        "gold": None,
        "hidden": True,
    }
    assert spec["splits"]["dev"]["gold"] == f"{TASK}/dev/gold.jsonl"
    assert not (dest / TASK / "test" / "gold.jsonl").exists()
    names = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    expected = ("dev/inputs.jsonl", "dev/gold.jsonl", "test/inputs.jsonl")
    assert names == {f"{TASK}/{f}" for f in expected}


def test_the_stored_copy_reinstalls_through_the_task_importer(installed):
    before = tree_bytes(TaskStore(TASK, installed).root)
    import_task(TASK, installed)
    after = tree_bytes(TaskStore(TASK, installed).root)
    before.pop("task.json"), after.pop("task.json")  # the manifest records its origin
    assert before == after


# ----------------------------------------------------------------------------- schema


def test_the_schema_validates_the_example_and_is_committed():
    schema = bundle_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    data = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(data)
    bad = {**data, "tasks": [{**data["tasks"][0], "importer": "tasks.x:y"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)
    committed = (REPO / "docs" / "bundle.schema.json").read_text(encoding="utf-8")
    assert committed == json.dumps(schema, indent=2, sort_keys=True) + "\n", (
        "regenerate: python -m tasks.bundle > docs/bundle.schema.json"
    )


def test_the_bundle_knows_every_metric_of_the_scorer():
    assert sorted(KNOWN_METRICS) == sorted(REGISTRY)


def test_a_zip_of_too_many_files_is_refused(tmp_path):
    out = tmp_path / "many.zip"
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("competition.yaml", "id: x\n")
        for i in range(2001):
            zf.writestr(f"f/{i}.txt", "")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(out, work_dir=tmp_path / "w")
    assert "2002 files: over the limit of 2,000" in str(e.value)


def test_the_default_data_directory_is_read_lazily_and_a_broken_declaration_hides_one_task(
    installed, monkeypatch
):
    unregister_declared(TASK)  # as in a fresh process
    broken = installed / "tasks" / "broken" / "declaration.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{", encoding="utf-8")
    monkeypatch.setenv("PALIMPSEST_HOME", str(installed))
    ids = [t.id for t in all_tasks()]
    assert TASK in ids and "str" in ids and "broken" not in ids
    assert get_task(TASK).hidden_splits == ("test",)


def test_the_generator_writes_the_committed_data(tmp_path):
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_bundle_sts.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    made = tree_bytes(tmp_path)
    assert made == {k: v for k, v in tree_bytes(EXAMPLE).items() if k in made}
    assert len(made) == 5
