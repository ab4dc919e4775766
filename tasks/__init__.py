"""The registry of tasks: what each task is, looked up by its id."""

from __future__ import annotations

import difflib
import threading

from tasks.base import Task
from tasks.declared import declared_tasks
from tasks.errors import TaskNotFound
from tasks.store import default_home

# the built-in tasks, by id: read from their specs when first asked for, not on import (a local
# server command that looks up no task, `palimpsest tokens create`, never parses them)
_REGISTRY: dict[str, Task] = {}
_BUILTINS_READ = False
_READING = threading.Lock()
# tasks declared by competition bundles (tasks.bundle), by id: installed in this process, or found
# in the default data directory when first asked for (a worker knows them from there)
_DECLARED: dict[str, Task] = {}


def _builtins() -> dict[str, Task]:
    """The registry, the built-in tasks read into it first (once per process)."""
    global _BUILTINS_READ
    if not _BUILTINS_READ:
        with _READING:
            if not _BUILTINS_READ:
                # the specs' reader (YAML) loads with the first lookup, not with the package
                from tasks.builtin import builtin_tasks

                read: dict[str, Task] = {}
                for t in builtin_tasks():  # each spec (tasks/specs/<id>.yaml) and its Python
                    if t.id in read:
                        raise ValueError(f"task {t.id!r} is already registered")
                    read[t.id] = t
                _REGISTRY.update(read)
                _BUILTINS_READ = True
    return _REGISTRY


def register(task: Task) -> Task:
    """Add a task; a duplicate id is refused."""
    registry = _builtins()
    if task.id in registry:
        raise ValueError(f"task {task.id!r} is already registered")
    registry[task.id] = task
    return task


def register_declared(task: Task) -> Task:
    """Add (or replace) a bundle-declared task; a built-in task's id is refused."""
    if task.id in _builtins():
        raise ValueError(f"task {task.id!r} is a built-in task")
    _DECLARED[task.id] = task
    return task


def unregister_declared(task_id: str) -> None:
    _DECLARED.pop(task_id, None)


def builtin_ids() -> list[str]:
    return list(_builtins())


def _on_disk() -> dict[str, Task]:
    """The declared tasks of the default data directory, as their declarations now read (read
    again when a task comes, goes or changes: `tasks.declared.touch`)."""
    builtins = _builtins()
    return {t.id: t for t in declared_tasks(default_home()) if t.id not in builtins}


def _known() -> dict[str, Task]:
    # the data directory's declaration wins over one this process holds: a task changed by
    # another process (a new version, its texts) is seen here (a worker scores under it)
    _DECLARED.update(_on_disk())
    return {**_builtins(), **_DECLARED}


def all_tasks() -> list[Task]:
    return list(_known().values())


def task_ids() -> list[str]:
    return list(_known())


def get_task(task_id: str) -> Task:
    """The task with this id; an unknown id raises TaskNotFound suggesting the closest."""
    found = _builtins().get(task_id)
    if found is not None:
        return found
    found = _DECLARED.get(task_id)
    if found is not None:
        fresh = _on_disk().get(task_id)  # a stat of the tasks folder when nothing changed
        if fresh is not None and fresh is not found:
            _DECLARED[task_id] = found = fresh
        return found
    known = _known()
    try:
        return known[task_id]
    except KeyError:
        close = difflib.get_close_matches(task_id, list(known), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TaskNotFound(f"unknown task {task_id!r}{hint} (tasks: {', '.join(known)})") from None


__all__ = [
    "Task",
    "all_tasks",
    "builtin_ids",
    "get_task",
    "register",
    "register_declared",
    "task_ids",
    "unregister_declared",
]
