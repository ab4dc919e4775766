"""Importers that build a task's files from an official release."""

from __future__ import annotations

from pathlib import Path

from tasks import get_task
from tasks.loci import import_loci
from tasks.store import TaskStore
from tasks.swissgov import import_swissgov
from tasks.trotr import import_trotr

IMPORTERS = {"trotr": import_trotr, "swissgov": import_swissgov, "loci": import_loci}


def import_task(task_id: str, home: Path | str | None = None, **options) -> dict:
    """Import a task into the data directory; returns its manifest. Idempotent."""
    task = get_task(task_id)
    store = TaskStore(task.id, home)
    return IMPORTERS[task.importer](task, store=store, **options)
