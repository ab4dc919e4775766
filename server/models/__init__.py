"""The database: the record of truth for users, teams, phases, submissions and scores.

Nothing is deleted for real: rows are hidden or marked removed, and organizer actions are logged.

The tables are written in the modules below, one per subject (`SUBJECTS`), and a subject's module
is imported when one of its tables is first named: `from server.models import User, ApiToken`
imports `server.models.accounts` alone, through this package's `__getattr__` (PEP 562), so a
local command such as `palimpsest tokens create` builds 3 tables, not 30. A subject's module
imports the modules of the tables its foreign keys name (SQLAlchemy resolves each one when it
sorts a flush), so every table loaded can be written.

`SQLModel.metadata` therefore holds only the tables loaded so far. What needs the whole schema
(building or emptying a database, the tables in order, Alembic's environment, the migrations'
check of an unversioned database, the web app) asks `schema()`, which loads every subject first
and returns that metadata; tests/test_models_lazy.py checks each path sees the 32 tables, and that
nothing reads `SQLModel.metadata`'s whole-schema operations directly.
"""

from __future__ import annotations

import importlib

from sqlalchemy import MetaData
from sqlmodel import SQLModel

from server.models.base import TableModel, utcnow

# each table's subject module (tests/test_models_lazy.py checks this names every table once)
SUBJECTS: dict[str, tuple[str, ...]] = {
    "accounts": ("User", "ApiToken", "ThrottleCount"),
    "competitions": ("Competition", "CompetitionTask", "CompetitionPage", "Announcement"),
    "people": ("CompetitionRole", "CompetitionInvite", "Registration", "Team", "TeamMember"),
    "audit": ("AuditLog",),
    "mail": ("OutgoingMail",),
    "phases": ("GoldPartition", "Phase", "RankingVersion", "BoardRanking"),
    "submissions": (
        "Submission",
        "CodeRun",
        "RunQueueTurn",
        "RunWorkerToken",
        "Score",
        "BoardChoice",
    ),
    "campaigns": (
        "AssessmentCampaign",
        "CampaignItem",
        "CampaignAssignment",
        "Judgment",
        "CampaignDecision",
        "CampaignModelFit",
        "GoldVersion",
    ),
    "tasks": ("TaskVersion", "TaskArchive"),
}
_SUBJECT_OF = {table: subject for subject, tables in SUBJECTS.items() for table in tables}

__all__ = ["TableModel", "load_all", "schema", "utcnow", *_SUBJECT_OF]


def _load(subject: str):
    """Import a subject's module and keep its tables here (later lookups find them at once)."""
    module = importlib.import_module(f"{__name__}.{subject}")
    globals().update((name, getattr(module, name)) for name in SUBJECTS[subject])
    return module


def load_all() -> dict:
    """Load every table (the whole schema); returns `SQLModel.metadata.tables`."""
    for subject in SUBJECTS:
        _load(subject)
    return SQLModel.metadata.tables


def schema() -> MetaData:
    """The whole schema: every table loaded, then SQLAlchemy's metadata (for `create_all`,
    `drop_all`, `sorted_tables`). Never `SQLModel.metadata` directly for these: it holds only the
    tables some import named so far."""
    load_all()
    return SQLModel.metadata


def __getattr__(name: str):
    """`server.models.User` (and `from server.models import User`): the table's subject module is
    imported on first use; a subject's name gives its module."""
    subject = _SUBJECT_OF.get(name)
    if subject is not None:
        return getattr(_load(subject), name)
    if name in SUBJECTS:  # a module of its own (the import system asks before importing it)
        return _load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBJECT_OF) | set(SUBJECTS))
