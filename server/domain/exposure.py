"""The exposure rule as the server asks it. The rule lives beside the task declarations
(tasks/exposure.py), since an import checks it before its files replace the old; the server checks
every phase and every download with it, and a data directory as a whole."""

from __future__ import annotations

from sqlmodel import Session, select

from server import models  # other subjects' tables: models.X, loaded when first used
from tasks.exposure import (  # noqa: F401 - the server's names for the rule
    Exposure,
    ExposureRefused,
    check_download,
    check_home,
    check_phase,
    check_tree,
    exposure,
    exposure_of_tree,
)


def blind_splits(s: Session, task_id: str) -> set[str]:
    """The splits of a task that a blind phase runs systems on: their inputs are never served."""
    return set(
        s.exec(
            select(models.Phase.split).where(
                models.Phase.task_id == task_id, models.Phase.blind.is_(True)
            )
        ).all()
    )
