"""Leaderboards, the audit log, baselines."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import (
    Field,
    RootModel,
)

from server.api_models.base import Model, Out, PageQuery, Stamp
from server.api_models.tasks import PhaseState
from server.boards.board_model import Leaderboard, Snapshot

# ----------------------------------------------------------------------------- leaderboards


# the board's shapes are declared once, in server.boards.board_model


class Board(RootModel[Snapshot | Leaderboard]):
    """A live board, or the final ranking of a published phase as published."""


class VersionOut(Out):
    version: int
    published_at: Stamp
    reason: str
    sha256: str


class RerunOut(Out):
    """An archived system re-run on the phase (the phase action `rerun`)."""

    run: int = Field(description="The re-run: a code run of the phase, queued.")
    of: int = Field(description="The code run first uploaded, whose archive it runs.")
    task: str = Field(description="The task of that first run.")
    phase: str = Field(description="The phase of that first run.")
    team: int
    duplicate: bool = Field(description="True: the same system was re-run on the phase before.")


class PhaseActionOut(Out):
    phase: PhaseState
    ranking: Optional[VersionOut] = None
    reruns: Optional[list[RerunOut]] = None


class RankingsOut(Out):
    phase: PhaseState
    items: list[VersionOut]
    next_cursor: Optional[str] = None
    next: Optional[str] = None


class BoardQuery(Model):
    board: Optional[str] = Field(
        None, max_length=200, description='One of the phase\'s boards (default "main").'
    )


class ExportQuery(Model):
    format: Literal["csv", "json", "tex"] = "csv"
    version: Optional[int] = Field(
        None,
        ge=1,
        description="A published version (default: the latest; a preview before publication).",
    )
    # fact sheets
    facts: bool = Field(
        False,
        description="The fact sheets of the published version's rows (csv or json) instead.",
    )
    board: Optional[str] = Field(
        None, max_length=200, description='One of the phase\'s boards (default "main").'
    )


# ----------------------------------------------------------------------------- audit and baselines


class AuditQuery(PageQuery):
    action: Optional[str] = Field(None, description="Only this action, e.g. `ranking.publish`.")
    all: Optional[Literal["0", "1"]] = Field(
        None, description="`1`: also the workers' status changes."
    )


class AuditEntry(Out):
    id: int
    actor: Optional[str]
    action: str
    target: str
    details: Optional[dict[str, Any]]
    created: Stamp


class BaselineRuns(Model):
    systems: list[str] = Field(min_length=1, json_schema_extra={"examples": [["lexical"]]})
    device: Literal["auto", "cpu", "cuda"] = "auto"
    model: Optional[str] = None
    cross_model: Optional[str] = None


class BaselinesQueued(Out):
    jobs: list[str]
    systems: list[str]


class BaselinesQuery(PageQuery):
    phase: Optional[str] = None


class BaselineRun(Out):
    """A baseline run the baselines queue still knows of."""

    id: str
    what: Optional[str]
    status: str = Field(description="queued, started, finished, failed, ...")
    enqueued: Stamp
    ended: Stamp
    recorded: list[dict[str, Any]] = Field(
        description="Finished: the baseline entries it recorded (phase, submission_id, duplicate)."
    )
    error: str = Field(description="Failed: the last line of its error.")
