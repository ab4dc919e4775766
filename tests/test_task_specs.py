"""The built-in tasks' specs (tasks/specs/<id>.yaml): each is a valid TaskSpec, written in full,
and the Task it declares is the built-in task, field by field."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from tasks import builtin_ids, get_task
from tasks.builtin import SPECS, builtin_spec, spec_path
from tasks.bundle_models import TaskSpec
from tasks.declared import task_from_declaration

# what stays Python: a family's importer, its options, demo and agreement hooks
PYTHON = {
    "importer",
    "import_help",
    "import_options",
    "demo",
    "agreement",
    "agreement_rows",
    "agreement_bayes",
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
def test_spec_declares_the_builtin_task_field_by_field(task_id):
    task = get_task(task_id)
    declared = task_from_declaration(builtin_spec(task_id))
    for f in dataclasses.fields(task):
        if f.name in PYTHON:
            continue
        assert getattr(declared, f.name) == getattr(task, f.name), f.name
