"""Importers that build a task's files from an official release (each task declares its own);
the exposure rule checks what an import would publish before it replaces the old files."""

from __future__ import annotations

from pathlib import Path

from tasks import get_task
from tasks.base import resolve
from tasks.exposure import check_tree
from tasks.store import TaskStore


def import_task(task_id: str, home: Path | str | None = None, **options) -> dict:
    """Import a task into the data directory; returns its manifest. Idempotent."""
    task = get_task(task_id)
    store = TaskStore(task.id, home)
    store.before_commit = lambda root: check_tree(task.id, root, store.home)
    return resolve(task.importer)(task, store=store, **options)
