"""The built-in tasks' specs (tasks/specs/<id>.yaml): each is a valid TaskSpec, written in full,
and the registered task is what it declares, joined to its family's Python (tasks/builtin.py)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
import yaml

from tasks import builtin_ids, get_task
from tasks.base import resolve
from tasks.builtin import SPECS, builtin_spec, spec_path
from tasks.bundle_models import TaskSpec
from tasks.declared import task_from_declaration
from tasks.semrel import ORGANISERS_LEXICAL
from tasks.str_release import LANGUAGES, SOURCES
from tasks.swissgov import PAIRS
from tasks.trotr_paper import authors_rows

# what stays Python: a family's importer, its options, demo and agreement hooks
PYTHON = {
    "importer",
    "import_help",
    "import_options",
    "demo",
    "agreement",
    "agreement_rows",
    "agreement_bayes",
    "import_boards",
}


def test_every_builtin_task_has_a_spec_and_no_spec_is_stray():
    assert sorted(p.stem for p in SPECS.glob("*.yaml")) == sorted(builtin_ids())


@pytest.mark.parametrize("task_id", builtin_ids())
def test_spec_is_a_complete_task_spec(task_id):
    data = yaml.safe_load(spec_path(task_id).read_text(encoding="utf-8"))
    assert data == builtin_spec(task_id)
    # every key written out: read without pydantic, a left-out default would be missing
    assert TaskSpec.model_validate(data).model_dump(mode="json") == data
    assert data["id"] == task_id


@pytest.mark.parametrize("task_id", builtin_ids())
def test_the_registered_task_is_its_spec_and_its_python(task_id):
    """Every data field from the spec; what stays Python resolves to a function."""
    task = get_task(task_id)
    declared = task_from_declaration(builtin_spec(task_id))
    for f in dataclasses.fields(task):
        if f.name not in PYTHON:
            assert getattr(declared, f.name) == getattr(task, f.name), f.name
    assert task.importer != declared.importer and callable(resolve(task.importer))
    for hook in ("agreement", "agreement_rows", "agreement_bayes", "import_boards"):
        assert not getattr(task, hook) or callable(resolve(getattr(task, hook)))
    assert task.demo is None or callable(resolve(task.demo.release))


@pytest.mark.parametrize("task_id, metric", [("tric-binary", "f1"), ("tric-ranking", "spearman")])
def test_published_rows_are_the_authors_figures(task_id, metric):
    assert get_task(task_id).paper_rows == authors_rows(metric)


def test_the_organisers_lexical_figures():
    got = {
        r.subset: r.value
        for r in get_task("str").references
        if r.name == "lexical overlap (Dice), the organisers' figure"
    }
    assert got == ORGANISERS_LEXICAL


def test_groups_are_what_the_importers_write():
    str_ = get_task("str")
    assert str_.groups == LANGUAGES
    assert str_.subsets == (*LANGUAGES, "macro", *(s.lower() for s in SOURCES))
    assert [(sl.subset, sl.field, sl.equals, sl.group) for sl in str_.slices] == [
        (s.lower(), "source", s, "eng") for s in SOURCES
    ]
    swiss = get_task("swissgov-rsd")
    assert swiss.groups == PAIRS
    assert swiss.subsets == (*PAIRS, "macro", *(f"{p}-a{a}" for p in PAIRS for a in (1, 2)))
    assert {(sl.subset, sl.group, sl.field, sl.equals) for sl in swiss.slices} == {
        (f"{p}-a{a}", p, "annotator", str(a)) for p in PAIRS for a in (1, 2)
    }


def test_specs_ship_with_the_package():
    data = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "*.yaml" in data["tool"]["setuptools"]["package-data"]["*"]
