"""The database: the record of truth for users, teams, phases, submissions and scores.

Nothing is deleted for real: rows are hidden or marked removed, and organizer actions are logged.

The tables are written in the modules below by subject, and load when first named: `from
server.models import User, ApiToken` loads the accounts' module alone (a local command such as
`palimpsest tokens create` builds 3 tables, not 30). A subject's module imports the modules of the
tables its foreign keys name (SQLAlchemy resolves each one when it sorts a flush), so every table
loaded can be written. What needs the whole schema (Alembic's environment, a database built from
the models, the migrations' check of an unversioned database, the web app) calls `load_all()`
first; `SQLModel.metadata`'s `create_all`, `drop_all` and `sorted_tables` load every table
themselves (tests/test_models_lazy.py checks each of these sees the 30 tables).
"""

from __future__ import annotations

import importlib

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
    "submissions": ("Submission", "CodeRun", "Score"),
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

__all__ = ["TableModel", "load_all", "utcnow", *_SUBJECT_OF]


def _load(subject: str):
    module = importlib.import_module(f"{__name__}.{subject}")
    globals().update((name, getattr(module, name)) for name in SUBJECTS[subject])
    return module


def load_all() -> dict:
    """Load every table (the whole schema); returns `SQLModel.metadata.tables`."""
    for subject in SUBJECTS:
        _load(subject)
    return SQLModel.metadata.tables


def __getattr__(name: str):
    subject = _SUBJECT_OF.get(name)
    if subject is not None:
        _load(subject)
        return globals()[name]
    if name in SUBJECTS:  # a module of its own (the import system asks before importing it)
        return _load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBJECT_OF) | set(SUBJECTS))


class _WholeSchema(type(SQLModel.metadata)):
    """SQLModel's metadata, whose operations on the whole schema load every table first: a
    database built (or emptied) from the models, or the tables in order, never misses one that
    no import named yet."""

    def create_all(self, *args, **kwargs):
        load_all()
        return super().create_all(*args, **kwargs)

    def drop_all(self, *args, **kwargs):
        load_all()
        return super().drop_all(*args, **kwargs)

    @property
    def sorted_tables(self):
        load_all()
        return super().sorted_tables


# the same object (every table is in it), with these three operations
SQLModel.metadata.__class__ = _WholeSchema
