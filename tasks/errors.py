"""The errors a task's declaration, registry and importers raise; the scorer re-exports them.

They live here, not in `scorer`, so that `tasks` imports nothing from `scorer` (which imports
`tasks`): the dependency runs one way only.
"""

from __future__ import annotations


class PalimpsestError(Exception):
    """Base of every error the project reports to a user without a traceback."""


class TaskNotFound(PalimpsestError):
    """A task id that is not registered (the message suggests the closest one)."""


class TaskNotImported(PalimpsestError):
    """A registered task whose data has not been imported into the data directory."""


class SplitNotAvailable(PalimpsestError):
    """A split the task does not have."""


class ReleaseError(PalimpsestError):
    """An official release that cannot be read; names the file and line."""

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


__all__ = [
    "PalimpsestError",
    "ReleaseError",
    "SplitNotAvailable",
    "TaskNotFound",
    "TaskNotImported",
]


class ExposureRefused(PalimpsestError):
    """An import, phase or download that would reveal hidden gold."""
