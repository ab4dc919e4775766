"""The boards a new phase gets from what its task's import found (`Task.import_boards`: STR's
Track x language boards, STR-2022's source boards), and the fact sheet's questions their filters
read, added to the task's competition where it does not ask them yet. Called by the lifecycle's
one `create_phase`; nothing here commits."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from server.domain import audit, people
from tasks.base import resolve
from tasks.store import TaskStore


def imported_boards(s: Session, task, phase_name: str, split: str, home: Path | str | None) -> list:
    """The boards a new phase gets from what the task's import found (`Task.import_boards`: STR's
    Track x language boards), its competition asked the facts their filters read where it does not
    yet (audited); [] for a task without the hook or not imported."""
    if not task.import_boards:
        return []
    store = TaskStore(task.id, home)
    if not store.exists():
        return []
    got = resolve(task.import_boards)(task, store.manifest(), phase_name, split)
    if got.get("boards") and got.get("facts"):
        ensure_facts(s, task.id, got["facts"])
    return list(got.get("boards") or [])


def ensure_facts(s: Session, task_id: str, wanted: list[dict]) -> None:
    """Add to the task's competition the fact fields of `wanted` it does not ask yet (by key),
    after its own; audited as a change of the competition's fact sheet."""
    c = people.ensure_competition(s, task_id)
    have = list(c.fact_fields or [])
    keys = {f.get("key") for f in have}
    added = [f for f in wanted if f["key"] not in keys]
    if not added:
        return
    c.fact_fields = have + added
    s.add(c)
    audit.record(
        s,
        None,
        "fact_sheet.extend",
        c.slug,
        competition_id=c.id,
        via="system",
        fact_fields_added=[f["key"] for f in added],
        why=f"the boards of {task_id}'s phases filter on them",
    )
    s.flush()
