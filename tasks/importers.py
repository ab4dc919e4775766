"""Importers that build a task's files from an official release (each task declares its own)."""

from __future__ import annotations

from pathlib import Path

from tasks import get_task
from tasks.base import resolve
from tasks.store import TaskStore


def import_task(task_id: str, home: Path | str | None = None, **options) -> dict:
    """Import a task into the data directory; returns its manifest. Idempotent."""
    task = get_task(task_id)
    store = TaskStore(task.id, home)
    return resolve(task.importer)(task, store=store, **options)
