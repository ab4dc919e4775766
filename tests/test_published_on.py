"""What a phase's published ranking is computed on, declared in a bundle or a task's spec
(`published_on`): "private" (the private part) or "whole" (the whole test split). A bad value, or
"whole" on a phase with no private part, is refused naming its YAML path and line; a declared
value reaches the phase, the task's is its phases' default, and an export carries it."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session, select
from webkit import engine_of, make_user

from tasks import get_task, unregister_declared
from tasks.builtin import builtin_spec
from tasks.bundle import BundleInvalid, read_bundle
from tasks.bundle_models import PhaseSpec, TaskSpec
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
TASK = "sts-latin"
EVALUATION = "      - name: evaluation\n        split: test\n"
DEVELOPMENT = "      - name: development\n        split: dev\n"


@pytest.fixture(autouse=True)
def _forget_declared():
    yield
    unregister_declared(TASK)


def _copy(tmp_path: Path, evaluation: str = "", development: str = "", task: str = "") -> Path:
    """The example bundle with `published_on` lines added to its phases and its task."""
    root = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, root)
    y = root / "competition.yaml"
    text = y.read_text(encoding="utf-8")
    assert EVALUATION in text and DEVELOPMENT in text
    if evaluation:
        text = text.replace(EVALUATION, f"{EVALUATION}        published_on: {evaluation}\n")
    if development:
        text = text.replace(DEVELOPMENT, f"{DEVELOPMENT}        published_on: {development}\n")
    if task:
        text = text.replace("    phases:\n", f"    published_on: {task}\n    phases:\n", 1)
    y.write_text(text, encoding="utf-8")
    return root


def _line(root: Path, needle: str) -> int:
    text = (root / "competition.yaml").read_text(encoding="utf-8")
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_bad_value_and_whole_without_a_private_part_name_their_yaml_path(tmp_path):
    root = _copy(tmp_path, evaluation="everything", development="whole", task="all")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    got = {p.path: p for p in e.value.problems}
    bad = got["tasks[0].phases[1].published_on"]
    assert "'private' or 'whole'" in bad.message
    assert bad.line == _line(root, "published_on: everything")
    assert "'private' or 'whole'" in got["tasks[0].published_on"].message
    # the dev split's gold is published: no private part to publish beside
    dev = got["tasks[0].phases[0].published_on"]
    assert "the dev split has no private part" in dev.message
    assert dev.line == _line(root, "published_on: whole")
    assert "Traceback" not in str(e.value)


def test_whole_on_a_public_fraction_of_one_is_refused(tmp_path):
    root = _copy(tmp_path, evaluation="whole")
    y = root / "competition.yaml"
    y.write_text(
        y.read_text(encoding="utf-8").replace("public_fraction: 0.3", "public_fraction: 1"),
        encoding="utf-8",
    )
    with pytest.raises(BundleInvalid, match=r"tasks\[0\]\.phases\[1\]\.published_on: 'whole'"):
        read_bundle(root)


def test_the_spec_keys_and_their_defaults():
    assert PhaseSpec(name="t", split="test").published_on is None
    assert PhaseSpec(name="t", split="test", published_on="whole").published_on == "whole"
    # the built-in tasks' specs write it out: STR's phases publish on the whole test split
    # (SemEval-2024 Task 1 ranked each language on its whole test set), the others' on the
    # private part
    assert builtin_spec("str")["published_on"] == "whole"
    assert get_task("str").published_on == "whole"
    for task_id in ("tric-binary", "swissgov-rsd", "loci-similes"):
        assert builtin_spec(task_id)["published_on"] == "private"
        assert get_task(task_id).published_on == "private"
    spec = TaskSpec.model_validate(builtin_spec("str"))
    assert spec.published_on == "whole"


def test_a_bundle_phase_publishes_on_what_it_declares_and_the_export_says_so(app, tmp_path):
    from server.actions import bundles as bundle_actions
    from server.models import Phase

    # the task's default is the whole split; its development phase says the private part (a dev
    # split has none: it is kept "private", as a phase without a private part always is)
    root = _copy(tmp_path, task="whole")
    b = read_bundle(root)
    assert b.tasks[0].published_on == "whole"
    assert [p.published_on for p in b.spec.tasks[0].phases] == [None, None, None]
    admin = make_user(app, "admin@x.org", organizer=True)
    settings = app.extensions["palimpsest.settings"]
    with Session(engine_of(app)) as s:
        bundle_actions.create_from_bundle(
            s=s, actor=admin, source=root, via="test", settings=settings
        )
        on = {p.name: p.published_on for p in s.exec(select(Phase).where(Phase.task_id == TASK))}
        out = bundle_actions.export_competition(
            s=s,
            actor=admin,
            competition="sts-latin-2027",
            out=tmp_path / "export.zip",
            include_gold=False,
            settings=settings,
        )
    # the test split's phases take the task's "whole"; the dev split has no private part
    assert on["development"] == "private"
    assert {on[n] for n in on if n != "development"} == {"whole"}
    with zipfile.ZipFile(out) as z:
        spec = yaml.safe_load(z.read("competition.yaml"))
    (task,) = spec["tasks"]
    assert task["published_on"] == "whole"
    assert {p["name"]: p["published_on"] for p in task["phases"]} == on
