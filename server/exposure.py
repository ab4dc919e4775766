"""The exposure rule as the server asks it: the rule itself lives beside the task declarations
(tasks/exposure.py), since an import checks it before its files replace the old; the server checks
every phase and download with it, and a data directory as a whole."""

from __future__ import annotations

from pathlib import Path

from tasks import all_tasks, get_task
from tasks import exposure as rule
from tasks.base import Task
from tasks.exposure import (  # noqa: F401 - the server's names for the rule
    Exposure,
    ExposureRefused,
    check_download,
    check_phase,
    exposure,
    exposure_of_tree,
)
from tasks.store import TaskStore


def check_home(home) -> list[str]:
    """Every breach of the rule over every imported task of a data directory (`palimpsest check`
    and the tests)."""
    out = []
    for t in all_tasks():
        if TaskStore(t.id, home).exists():
            out += exposure(t, home).violations()
    return out


def check_tree(task: Task | str, root: Path) -> None:
    """Refuse the files of an import (staged under `root`) that would break the rule."""
    rule.check_tree(get_task(task) if isinstance(task, str) else task, root)
