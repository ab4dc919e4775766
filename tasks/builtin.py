"""The built-in tasks are bundles too: what each one is (its metadata, format, metrics, subsets,
splits, references, folds and published rows) lives in its spec, `tasks/specs/<id>.yaml`, a
`TaskSpec` of tasks/bundle_models.py, the format of a bundle's task. What stays Python is what a
family needs and a bundle cannot say: the importer that turns an official release into a bundle
and its options, the demo generator and the agreement hooks, joined to the spec by task id.

A spec is read without pydantic (declared.py says why): it is the model's full dump, checked by
tests/test_task_specs.py."""

from __future__ import annotations

from pathlib import Path

import yaml

SPECS = Path(__file__).with_name("specs")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def spec_path(task_id: str) -> Path:
    return SPECS / f"{task_id}.yaml"


def builtin_spec(task_id: str) -> dict:
    """A built-in task's spec (a `TaskSpec` as data), as its YAML file declares it."""
    return yaml.load(spec_path(task_id).read_text(encoding="utf-8"), Loader=_LOADER)
