"""The API's shapes of tasks that change (server/actions/tasks.py, server/api/task_changes.py): a
task's texts edited, a new version from an edited bundle, an archived task, a task's versions."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from pydantic import Field

from server.api_models import Model, Out


class TaskTextsIn(Model):
    """A task's texts, changed in place (no new version; nothing is rescored). Leave a key out
    to keep it."""

    title: Optional[str] = None
    description: Optional[str] = None
    citation: Optional[str] = None
    licence: Optional[str] = None
    source: Optional[str] = None
    unit: Optional[str] = None
    group_name: Optional[str] = None


class TaskArchiveIn(Model):
    reason: str = Field("", max_length=2000)


class TaskVersionForm(Model):
    """A new version of one task from an edited bundle (multipart)."""

    bundle: bytes = Field(
        description="The competition's bundle (a .zip) with the task's new declaration."
    )
    reason: str = Field("", max_length=2000, description="Why (kept with the version).")


class BoardRank(Out):
    team: str
    submission_id: Optional[int] = None
    rank: Optional[int] = None
    value: Optional[float] = None
    metric: Optional[str] = Field(
        None, description="The board column `value` is of (subset/metric), e.g. all/spearman."
    )


class PhaseEffect(Out):
    """What a new version did to a phase's live board: its ranks before, the runs marked stale
    and queued for rescoring (its published rankings stay as published)."""

    phase: str
    before: list[BoardRank] = Field(default_factory=list)
    stale: int = 0
    rescoring: list[int] = Field(default_factory=list)
    published: list[int] = Field(
        default_factory=list, description="The versions of its published ranking, unchanged."
    )


class PhaseBoards(Out):
    """The boards an update changed on a phase (by name); its published rankings keep theirs."""

    phase: str
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)


class TaskChangeOut(Out):
    """What a change did to one task: `versioned` when it made a new version (its metrics,
    primary, files or gold changed), else only texts changed in place."""

    task: str
    version: int
    previous_version: int
    versioned: bool
    texts: list[str] = Field(default_factory=list)
    declared: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    gold: list[str] = Field(default_factory=list)
    phases: list[PhaseEffect] = Field(default_factory=list)
    boards: list[PhaseBoards] = Field(
        default_factory=list,
        description="The phases whose boards the bundle changed (live boards; published "
        "rankings unchanged).",
    )


class BundleUpdateOut(Out):
    """An edited bundle applied to its competition: each task's change (those unchanged
    included, with nothing listed), and what the update leaves to other commands."""

    competition: str
    tasks: list[TaskChangeOut]
    notes: list[str] = Field(default_factory=list)


class TaskVersionOut(Out):
    version: int
    reason: str
    changes: dict
    effect: dict
    created_at: datetime


class TaskStateOut(Out):
    """A task's version, whether it is archived, and the versions recorded."""

    task: str
    title: str
    version: int
    archived: bool
    archived_at: Optional[datetime] = None
    phases_closed: list[str] = Field(
        default_factory=list, description="The phases the archiving closed (none the second time)."
    )
    versions: list[TaskVersionOut] = Field(default_factory=list)


def boards_said(t: dict) -> str:
    """The boards a change gave its phases (a `TaskChangeOut` as JSON), in words: "" if none."""
    said = []
    for p in t.get("boards") or []:
        what = [f"{k} {', '.join(p[k])}" for k in ("added", "removed", "changed") if p[k]]
        said.append(f"the {p['phase']} phase's boards: {'; '.join(what)}")
    return "; ".join(said)


def change_line(t: dict) -> str:
    """One task's change (a `TaskChangeOut` as JSON) in words, for the command lines."""
    boards = boards_said(t)
    line = _change_line(t)
    if not boards:
        return line
    if not t["versioned"] and not t["texts"]:
        return f"{t['task']}: {boards} (published rankings unchanged)"
    return f"{line}; {boards}"


def _change_line(t: dict) -> str:
    if t["versioned"]:
        what = [f"{k}: {', '.join(t[k])}" for k in ("declared", "files", "gold") if t[k]]
        runs = sum(len(p["rescoring"]) for p in t["phases"])
        stale = sum(p["stale"] for p in t["phases"])
        return (
            f"{t['task']}: version {t['previous_version']} -> {t['version']} ({'; '.join(what)})"
            f"; {stale} run(s) stale, {runs} queued for rescoring; published rankings unchanged"
        )
    if t["texts"]:
        return f"{t['task']}: texts changed in place ({', '.join(t['texts'])}); nothing rescored"
    return f"{t['task']}: unchanged (version {t['version']})"
