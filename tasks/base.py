"""What a task is: its metadata, submission format and metrics, as one declaration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Field:
    """One column of a submission file."""

    name: str
    kind: str  # "id", "label01", "float", "floats"
    description: str


@dataclass(frozen=True)
class SubmissionFormat:
    """The shape of a submission: its columns, native format and a small example."""

    fields: tuple[Field, ...]
    native: str  # "jsonl" or "csv"
    example: str
    key: tuple[str, ...]  # the columns that identify a row
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """A shared task as participants and organizers see it.

    `kind` names the scorer family in `scorer.families` that validates and scores it;
    `primary` is (subset, metric) and `greater_is_better` its direction.
    """

    id: str
    version: int
    title: str
    description: str
    citation: str
    licence: str
    source: str
    kind: str
    format: SubmissionFormat
    metrics: tuple[str, ...]
    subsets: tuple[str, ...]
    primary: tuple[str, str]
    greater_is_better: bool
    splits: tuple[str, ...]
    importer: str  # name of the importer in tasks.importers
    import_help: str
    secondary: tuple[tuple[str, str, bool], ...] = field(default=())
    # the few columns ("subset/metric") a board shows beside the primary one; the rest are a click away
    key_columns: tuple[str, ...] = field(default=())

    @property
    def primary_metric(self) -> str:
        return self.primary[1]

    @property
    def primary_subset(self) -> str:
        return self.primary[0]

    def metric_direction(self, metric: str) -> bool:
        """True when a larger value of `metric` is better."""
        return metric not in LOWER_IS_BETTER


LOWER_IS_BETTER = frozenset({"smr", "fpr", "fnr"})

Importer = Callable[..., dict]
