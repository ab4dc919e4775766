"""The registry of tasks: what each task is, looked up by its id."""

from __future__ import annotations

import difflib

from tasks.base import Task
from tasks.errors import TaskNotFound
from tasks.loci import LOCI_SIMILES
from tasks.semrel import STR
from tasks.swissgov import SWISSGOV_RSD
from tasks.trotr import TRAC, TRIC_BINARY, TRIC_RANKING

_REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a task; a duplicate id is refused."""
    if task.id in _REGISTRY:
        raise ValueError(f"task {task.id!r} is already registered")
    _REGISTRY[task.id] = task
    return task


for _t in (TRIC_BINARY, TRIC_RANKING, TRAC, SWISSGOV_RSD, LOCI_SIMILES, STR):
    register(_t)


def all_tasks() -> list[Task]:
    return list(_REGISTRY.values())


def task_ids() -> list[str]:
    return list(_REGISTRY)


def get_task(task_id: str) -> Task:
    """The task with this id; an unknown id raises TaskNotFound suggesting the closest."""
    try:
        return _REGISTRY[task_id]
    except KeyError:
        close = difflib.get_close_matches(task_id, list(_REGISTRY), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TaskNotFound(
            f"unknown task {task_id!r}{hint} (tasks: {', '.join(_REGISTRY)})"
        ) from None


__all__ = ["Task", "all_tasks", "get_task", "register", "task_ids"]
