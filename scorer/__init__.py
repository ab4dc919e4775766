"""The offline scorer: validate a submission file against a task's inputs, then score it.

`score_file` returns the scoring contract every other part relies on:
{"task", "split", "primary": {"name", "subset", "value", "greater_is_better"},
 "metrics": {subset: {metric: value}}, "notes": [...], "signature": ..., "provenance": {...}}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from scorer.errors import (
    PalimpsestError,
    Problem,
    SplitNotAvailable,
    SubmissionInvalid,
    TaskNotFound,
    TaskNotImported,
)
from tasks import get_task
from tasks.store import TaskStore

if TYPE_CHECKING:
    from scorer.reader import Limits

# The readers and the families (numpy) load when a file is validated or scored, not when a module
# only needs the errors (`from scorer.errors import ...` runs this file first).
_LAZY = {"Limits": "scorer.reader", "DEFAULT_LIMITS": "scorer.reader", "load": "scorer.reader"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib  # the lazy names above: the readers (numpy) load on first use

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scorer' has no attribute {name!r}")


def family(task, store, split):
    """The task's family (its reader, validator and metrics) on a split's data."""
    from scorer.kinds import family as make  # the families (numpy) load to validate

    return make(task, store, split)


__version__ = "0.1.0"


@dataclass
class Validated:
    """A submission that passed validation, ready to score."""

    task_id: str
    split: str
    parsed: object
    format: str
    seconds: float


def _resolve(task_id: str, split: str, home):
    task = get_task(task_id)
    if split not in task.splits:
        raise SplitNotAvailable(
            f"task {task.id!r} has no {split!r} split (splits: {', '.join(task.splits)})"
        )
    store = TaskStore(task.id, home)
    if not store.exists():
        raise TaskNotImported(
            f"task {task.id!r} has no data in {store.home}; import it with: {task.import_help}"
        )
    if split not in store.manifest().get("splits", task.splits):
        raise SplitNotAvailable(f"task {task.id!r} was imported without a {split!r} split")
    return task, store


def for_task(limits: Limits, task) -> Limits:
    """The limits of a file of this task: the tighter of the given ones and the task's own (its
    declared `format.max_bytes`, enough for its largest valid file)."""
    cap = getattr(task.format, "max_bytes", None)
    if not cap:
        return limits
    return replace(
        limits,
        max_bytes=min(limits.max_bytes, cap),
        max_uncompressed_bytes=min(limits.max_uncompressed_bytes, cap),
    )


def _reader():
    """The readers' module, loaded when a file is first validated (numpy with it)."""
    from scorer import reader  # the readers (numpy) load to validate

    return reader


def validate_file(
    task_id: str, path: str | Path, split: str = "test", home=None, limits: Limits | None = None
) -> Validated:
    """Check a submission against the task's inputs; raises SubmissionInvalid listing every
    problem. `limits`: what the file may weigh (default: the reader's DEFAULT_LIMITS)."""
    reader = _reader()
    limits = reader.DEFAULT_LIMITS if limits is None else limits
    t0 = time.perf_counter()
    task, store = _resolve(task_id, split, home)
    limits = for_task(limits, task)
    fam = family(task, store, split)
    if hasattr(fam, "validate_path"):  # link tables: read by a columnar reader from the path
        parsed, fmt = fam.validate_path(path, limits)
        return Validated(task.id, split, parsed, fmt, time.perf_counter() - t0)
    text = reader.load(path, limits)
    parsed = fam.validate(text)
    return Validated(task.id, split, parsed, text.format, time.perf_counter() - t0)


def validate_bytes(
    task_id: str, data: bytes, name: str, split: str = "test", home=None
) -> Validated:
    """`validate_file` of an uncompressed file held in memory (`name`: its file name, which
    tells its format): the rows checked one by one, as every family checks a file its columnar
    reader does not take. For a few rows already in memory (the intake's split check), which a
    temporary file would cost more than validating them."""
    t0 = time.perf_counter()
    task, store = _resolve(task_id, split, home)
    text = _reader().as_text(data, name)
    parsed = family(task, store, split).validate(text)
    return Validated(task.id, split, parsed, text.format, time.perf_counter() - t0)


def partition_units(task_id: str, split: str = "test", home=None) -> list[str]:
    """The ids a public/private partition of the gold is drawn over (instances, targets,
    documents or queries), in the inputs' order."""
    task, store = _resolve(task_id, split, home)
    return family(task, store, split).units()


def partition_strata(task_id: str, split: str = "test", home=None) -> list[tuple[str, str]]:
    """Each unit of `partition_units` with its stratum, in the inputs' order: the groups a
    stratified public/private partition divides in the same proportion, so that every subset
    is present in both parts (TRiC: the instance's subset, `oov` or `iov`; SwissGov-RSD: the
    document's language pair; Loci Similes: `linked` for a query with a gold link, else
    `unlinked`; otherwise one stratum, `all`). Reads the gold: for the server only."""
    task, store = _resolve(task_id, split, home)
    return family(task, store, split).strata()


def score_validated(v: Validated, home=None, only=None) -> dict:
    """Score a validated submission against the split's gold, restricted to the units in `only`
    (e.g. the public part of the test gold) when given."""
    task, store = _resolve(v.task_id, v.split, home)
    only = frozenset(only) if only is not None else None
    scored = family(task, store, v.split).score(v.parsed, only)
    subset, name = task.primary
    gold_sha = store.gold_checksum(v.split)
    return {
        "task": task.id,
        "split": v.split,
        "primary": {
            "name": name,
            "subset": subset,
            "value": scored.metrics[subset][name],
            "greater_is_better": task.greater_is_better,
        },
        "metrics": scored.metrics,
        "notes": scored.notes,
        **scored.extra,
        "signature": f"{name}|task:{task.id}|v:{task.version}|split:{v.split}"
        f"|gold:sha256:{gold_sha[:16]}|scorer:{__version__}",
        "provenance": {
            "task_version": task.version,
            "gold_sha256": gold_sha,
            "scorer_version": __version__,
        },
    }


def score_file(
    task_id: str, path: str | Path, split: str = "test", home=None, limits: Limits | None = None
) -> dict:
    """Validate, then score; the result is the scoring contract (see the module docstring)."""
    return score_validated(validate_file(task_id, path, split, home, limits), home)


__all__ = [
    "Limits",
    "PalimpsestError",
    "Problem",
    "SplitNotAvailable",
    "SubmissionInvalid",
    "TaskNotFound",
    "TaskNotImported",
    "Validated",
    "partition_strata",
    "partition_units",
    "score_file",
    "score_validated",
    "validate_bytes",
    "validate_file",
]
