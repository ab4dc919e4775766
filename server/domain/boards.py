"""A phase's declared boards (tasks.bundle_models.BoardSpec), checked against its task and its
competition's fact sheet, and read back as specs. The default board, "main", is not declared: it
ranks by the task's primary value and lets every run in."""

from __future__ import annotations

from pydantic import ValidationError
from sqlmodel import Session

from server.domain import people
from server.exceptions import BoardsInvalid, NotFound
from tasks.bundle_models import MAIN_BOARD, BoardSpec, board_problems

__all__ = ["MAIN_BOARD", "check", "checked", "names", "of_phase", "resolve"]


def _path(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def checked(s: Session, task, boards, *, where: str = "") -> list[dict]:
    """The declared boards as stored (BoardSpec JSON), or `BoardsInvalid` naming each problem by
    its path under `where` (e.g. `tasks[0].phases[1]`)."""
    out, problems = check(s, task, boards, where=where)
    if problems:
        raise BoardsInvalid("; ".join(f"{path}: {msg}" for path, msg in problems))
    return out


def check(s: Session, task, boards, *, where: str = "") -> tuple[list[dict], list[tuple[str, str]]]:
    """The declared boards as stored (BoardSpec JSON) and every problem found, each a (path under
    `where`, message) pair; the boards are meaningful only when there is no problem."""
    prefix = f"{where}." if where else ""
    if boards is None:
        return [], []
    if not isinstance(boards, list):
        return [], [(f"{prefix}boards", "a list of boards is expected")]
    problems: list[tuple[str, str]] = []
    specs: list[BoardSpec | None] = []
    for i, raw in enumerate(boards):
        try:
            specs.append(BoardSpec.model_validate(raw))
        except ValidationError as e:
            specs.append(None)
            for err in e.errors():
                problems.append((prefix + _path(("boards", i, *err["loc"])), err["msg"]))
    seen: set[str] = set()
    for i, b in enumerate(specs):
        if b is None:
            continue
        if b.name in seen:
            problems.append((f"{prefix}boards[{i}].name", f"board {b.name!r} declared twice"))
        seen.add(b.name)
    comp = people.competition_of_task(s, task.id)
    facts = list(comp.fact_fields or ()) if comp is not None else []
    for loc, msg in board_problems(specs, task, facts):
        problems.append((prefix + _path(loc), msg))
    return [b.model_dump(mode="json", exclude_none=True) for b in specs if b is not None], problems


def of_phase(phase) -> list[BoardSpec]:
    """The phase's declared boards, in their order."""
    return [BoardSpec.model_validate(b) for b in phase.boards or ()]


def names(phase) -> list[str]:
    """Every board of the phase: "main" first."""
    return [MAIN_BOARD] + [b["name"] for b in phase.boards or ()]


def resolve(phase, name: str | None) -> BoardSpec | None:
    """The declared board `name` of the phase (None: the default board), or NotFound naming the
    boards that exist."""
    if name in (None, "", MAIN_BOARD):
        return None
    for b in of_phase(phase):
        if b.name == name:
            return b
    shown = name if len(name) <= 40 else name[:40] + "…"
    raise NotFound(
        f"no board {shown!r} in the {phase.name} phase of {phase.task_id} "
        f"(boards: {', '.join(names(phase))})"
    )
