"""Tasks declared by competition bundles: each installed one keeps its declaration beside its
files (`<home>/tasks/<id>/declaration.json`, a `TaskSpec`), so that any process (a worker, the
CLI) finds it in the data directory without the bundle."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from pydantic import ValidationError

from tasks.base import Task
from tasks.bundle_models import TaskSpec, task_from_spec

DECLARATION = "declaration.json"
log = logging.getLogger(__name__)


def declaration_path(task_id: str, home: Path) -> Path:
    return Path(home) / "tasks" / task_id / DECLARATION


def read_declaration(path: Path) -> TaskSpec:
    return TaskSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))


def _stamp(home: Path) -> int:
    try:
        return (Path(home) / "tasks").stat().st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=16)
def _declared(home: str, stamp: int) -> tuple[Task, ...]:
    out = []
    base = Path(home) / "tasks"
    for p in sorted(base.glob(f"*/{DECLARATION}")) if stamp else []:
        try:
            out.append(task_from_spec(read_declaration(p)))
        except (OSError, ValueError, ValidationError) as e:  # one broken file hides one task
            log.warning("%s: not a task declaration (%s)", p, e)
    return tuple(out)


def declared_tasks(home: Path) -> tuple[Task, ...]:
    """The bundle-declared tasks installed in `home` (read again when a task comes or goes)."""
    return _declared(str(Path(home)), _stamp(home))
