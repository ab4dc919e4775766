"""The built-in tasks are bundles too: an import installs the task as its bundle (its spec and
files, declaration.json beside them), so a competition of built-in tasks exports as a bundle, and
its clone is a declared task with the same gold, the same public files and the same scores."""

from __future__ import annotations

import random
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session
from webkit import engine_of, make_user

from scorer import score_file
from tasks import get_task, unregister_declared
from tasks.base import resolve
from tasks.builtin import CROSS_VALIDATED, builtin_spec
from tasks.bundle import (
    BundleInvalid,
    ReleaseBundle,
    export_task,
    install_tasks,
    read_bundle,
    write_bundle_zip,
)
from tasks.errors import PalimpsestError
from tasks.importers import import_task
from tasks.store import TaskStore
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, CLONE = "reuse-2027", "reuse-2028"
TASKS = ("tric-ranking", "loci-similes")


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own linking each of the session's imported tasks: a clone installs
    its tasks here, never among the session's."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    for t in (home / "tasks").iterdir():
        (d / "tasks" / t.name).symlink_to(t, target_is_directory=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    for t in TASKS:
        unregister_declared(f"{t}-{CLONE}")
    unregister_declared("tric-ranking-cv-copy")


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def predictions(task_id: str, home: Path, split: str, out: Path) -> Path:
    task = get_task(task_id)
    data, name = resolve(task.demo.predictions)(
        task, TaskStore(task_id, home), split, 0.3, random.Random(7)
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(data)
    return out / name


def test_a_competition_of_builtin_tasks_exports_and_clones(app, tmp_path):
    from server.actions import bundles as bundle_actions
    from server.actions import competitions as comp_actions

    admin = make_user(app, "admin@x.org", organizer=True)
    settings = app.extensions["palimpsest.settings"]
    home = Path(settings.home)
    with Session(engine_of(app)) as s:
        comp_actions.create_competition(
            s=s, actor=admin, via="test", competition=SLUG, title="Reuse", tasks=TASKS
        )
        assert bundle_actions.exportable(s=s, competition=SLUG, home=home)
        out = bundle_actions.export_competition(
            s=s,
            actor=admin,
            competition=SLUG,
            out=tmp_path / "export.zip",
            include_gold=False,
            settings=settings,
        )
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        spec = yaml.safe_load(z.read("competition.yaml"))
    assert [t["id"] for t in spec["tasks"]] == list(TASKS)
    # what the task is travels with it: its spec, with the files the import wrote
    declared = spec["tasks"][0]
    for key in ("title", "metrics", "subsets", "references", "key_columns", "paper_rows"):
        assert declared[key] == builtin_spec("tric-ranking")[key], key
    assert "tric-ranking/dev/gold.jsonl" in names and "tric-ranking/train/train.jsonl" in names
    assert not [n for n in names if n.endswith("/test/gold.jsonl") or n.endswith("links.csv")]

    with Session(engine_of(app)) as s:
        cloned = bundle_actions.clone_competition(
            s=s, actor=admin, competition=SLUG, new_id=CLONE, via="test", settings=settings
        )
    assert cloned.tasks == [f"{t}-{CLONE}" for t in TASKS]
    for old_id, new_id in zip(TASKS, cloned.tasks, strict=True):
        old, new = TaskStore(old_id, home), TaskStore(new_id, home)
        assert tree(old.root / "gold") == tree(new.root / "gold")  # the same gold ids, bytes
        assert tree(old.root / "public") == tree(new.root / "public")
        assert old.manifest()["gold_sha256"] == new.manifest()["gold_sha256"]
        copy = get_task(new_id)
        assert copy.importer == "tasks.bundle:import_declared"
        for split in old.manifest()["gold_sha256"]:
            f = predictions(old_id, home, split, tmp_path / old_id)
            a = score_file(old_id, f, split=split, home=home)
            b = score_file(new_id, f, split=split, home=home)
            assert a["metrics"] == b["metrics"], (old_id, split)
            assert a["primary"] == b["primary"]


def test_a_cross_validated_import_is_a_bundle_that_reinstalls_under_another_id(tmp_path):
    """The cross-validated split (every fold's test units, its gold kept on the server, its train
    and dev files public) survives export and install: same files, same fold-by-fold scores."""
    src = tmp_path / "release"
    options = resolve(get_task("tric-ranking").demo.release)(src, 60)
    a, b = tmp_path / "a", tmp_path / "b"
    import_task("tric-ranking", a, **{**options, "protocol": CROSS_VALIDATED})
    assert (a / "tasks" / "tric-ranking" / "declaration.json").is_file()
    assert not (a / "tasks" / "tric-ranking" / "public" / "cv" / "gold.jsonl").exists()
    dest = tmp_path / "bundle"
    spec = export_task("tric-ranking", a, dest, include_gold=True)
    assert sorted(spec["splits"]) == ["cv", "dev"]  # the protocol has no hidden test split
    text = yaml.safe_dump(spec).replace("tric-ranking/", "tric-ranking-cv-copy/")
    copy = yaml.safe_load(text)
    copy["id"] = "tric-ranking-cv-copy"
    (dest / "tric-ranking").rename(dest / "tric-ranking-cv-copy")
    write_bundle_zip(
        {"id": "cv-copy", "title": "A copy", "tasks": [copy]}, dest, tmp_path / "c.zip"
    )
    bundle = read_bundle(tmp_path / "c.zip", work_dir=tmp_path / "work", home=b)
    install_tasks(bundle, b)
    old, new = TaskStore("tric-ranking", a), TaskStore("tric-ranking-cv-copy", b)
    assert tree(old.root / "gold") == tree(new.root / "gold")
    assert tree(old.root / "public") == tree(new.root / "public")
    f = predictions("tric-ranking", a, "cv", tmp_path / "p")
    r1 = score_file("tric-ranking", f, split="cv", home=a)
    r2 = score_file("tric-ranking-cv-copy", f, split="cv", home=b)
    assert r1["metrics"] == r2["metrics"] and r1["primary"] == r2["primary"]


def test_an_importer_writing_a_file_its_spec_does_not_name_is_refused(tmp_path):
    store = TaskStore("trac", tmp_path / "h")
    with ReleaseBundle(get_task("trac"), store) as b:
        b.write_jsonl("test", "inputs.jsonl", [{"target": "a"}])
        b.write_jsonl("test", "targets.jsonl", [{"target": "a"}])
        b.write_jsonl("test", "gold.jsonl", [{"target": "a", "score": 1.0}])
        assert sorted(b.spec().splits) == ["test"]
        b.write_jsonl("test", "answers.jsonl", [{"target": "a", "score": 1.0}])
        with pytest.raises(PalimpsestError, match=r"trac/test/answers\.jsonl, which tasks/specs"):
            b.spec()
    assert not store.exists() and not [p for p in store.root.parent.iterdir()]


def test_files_beside_the_splits_and_published_gold_are_checked(tmp_path):
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    task = spec["tasks"][0]
    task["public_files"] = {"dev": ["sts-latin/dev/inputs.jsonl"], "extra": ["missing.jsonl"]}
    task["splits"]["test"]["publish_gold"] = True
    (root / "competition.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    text = str(e.value)
    assert "tasks[0].public_files.dev: folder 'dev'" in text
    assert "tasks[0].public_files.extra[0]" in text and "missing.jsonl" in text
    assert "tasks[0].splits.test: a hidden split's gold is never published" in text
