"""A keyed split's ids and their places are built once per version of the split's file: every
validation (the request's split check, the worker's) reads them, and a new version of the file
(a task update) is read again, not served from the cache."""

from __future__ import annotations

import json

import pytest

from scorer import SubmissionInvalid, validate_file
from scorer.families import _reference_of
from server.demo import import_demo_tasks, predictions
from tasks.store import TaskStore

TASK = "tric-binary"


def test_the_splits_ids_are_built_once_and_again_for_a_new_version_of_its_file(tmp_path):
    import_demo_tasks(tmp_path, n_pairs=40)
    inputs = TaskStore(TASK, tmp_path).public("dev", "inputs.jsonl")
    body = predictions(TASK, "dev", tmp_path, 0.3, 0)[0]
    sub = tmp_path / "pred.jsonl"
    sub.write_bytes(body)
    _reference_of.cache_clear()
    validate_file(TASK, sub, "dev", tmp_path)
    validate_file(TASK, sub, "dev", tmp_path)
    assert _reference_of.cache_info().misses == 1 and _reference_of.cache_info().hits >= 1
    # a new version of the split: one more id, which the same file now misses
    rows = [json.loads(line) for line in inputs.read_text().splitlines() if line.strip()]
    extra = dict(rows[-1], instanceID="pair_new_(Demo 1)")
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows + [extra]))
    with pytest.raises(SubmissionInvalid, match="pair_new_"):
        validate_file(TASK, sub, "dev", tmp_path)
    sub.write_bytes(
        body + (json.dumps({"instanceID": "pair_new_(Demo 1)", "label": 1}) + "\n").encode()
    )
    validate_file(TASK, sub, "dev", tmp_path)
