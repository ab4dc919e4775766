"""Every family by its task's kind: the row families of scorer.families and the spans family
(scorer.span_family), which builds on them (one module above both, so that neither imports the
other's registry)."""

from __future__ import annotations

from scorer.families import FAMILIES as ROW_FAMILIES
from scorer.families import Family
from scorer.span_family import SpanFamily
from tasks.base import Task
from tasks.store import TaskStore

FAMILIES = {**ROW_FAMILIES, "spans": SpanFamily}


def family(task: Task, store: TaskStore, split: str) -> Family:
    return FAMILIES[task.kind](task, store, split)
