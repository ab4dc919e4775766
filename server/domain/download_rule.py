"""What of a task may be downloaded now: one rule, used by the web's task page and zips, the API's
download (and so the CLI's `palimpsest download`).

A task's public files sit in areas, `<home>/tasks/<task>/public/<area>/`: one per split (its
inputs, and the dev gold), and one per folder of a bundle's `public_files` (training data, a
starting kit). A split's area is released when the first phase on that split opens, or at the
phase's `inputs_at` when the organizer set one (the earliest over the split's phases); an area no
phase scores is released with the task; a split a blind phase runs systems on is never released.
Before that it is refused with its date, except to the competition's organizers (who prepare it).
Only regular files inside the area's own folder are served: a symlink planted in public/ is never
followed, by any surface.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlmodel import Session, select

from server.domain import exposure, people
from server.models import Phase, User, utcnow
from tasks.declared import DECLARATION, declaration_path
from tasks.store import TaskStore

# the folder of a bundle's starting kit among its `public_files` (shown on the task page)
KIT = "starting_kit"


class DownloadRefused(Exception):
    """A download the rule refuses: an HTTP status, a stable code and a sentence."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class Area:
    """One downloadable folder of a task and whether it is released now."""

    name: str
    is_split: bool
    released: bool
    release_at: datetime | None  # None: released with the task (or its phase has no start)
    files: list[Path] = field(default_factory=list)  # regular files inside its folder only
    blind: bool = False  # a blind phase runs systems on it: never released to participants

    def when(self) -> str:
        return self.release_at.strftime("%Y-%m-%d %H:%M UTC") if self.release_at else "now"

    def refusal(self) -> str:
        if self.blind:
            return (
                f"the {self.name} inputs are blind: they are never downloaded; submit your system "
                "(`palimpsest submit TASK --code DIR`) and it runs on them on the server"
            )
        return (
            f"the {self.name} files are not released yet (they are from {self.when()}, "
            "when its phase opens)"
        )


def area_files(store: TaskStore, area: str) -> list[Path]:
    """The regular files inside `public/<area>/`, symlinks never followed (a planted link, to a
    file or a folder, is left out) and nothing that resolves outside the folder."""
    top = store.root / "public"
    base = top / area
    if os.path.islink(top) or os.path.islink(base) or not base.is_dir():
        return []
    real = base.resolve()
    out = []
    for d, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(x for x in dirs if not os.path.islink(os.path.join(d, x)))
        for f in sorted(files):
            p = Path(d) / f
            if p.is_symlink() or not p.is_file():
                continue
            if real not in p.resolve().parents:
                continue
            out.append(p)
    return sorted(out)


def release_time(phases: list[Phase]) -> tuple[bool, datetime | None]:
    """(released at all without a date, the date) of a split from its phases: the earliest of
    each phase's `inputs_at`, else its opening; a phase with neither releases it now."""
    times = []
    for p in phases:
        t = p.inputs_at or p.opens_at
        if t is None:
            return True, None
        times.append(t)
    if not times:
        return True, None
    return False, min(times)


def inputs_release(s: Session, task_id: str, split: str, now: datetime | None = None):
    """When a split's inputs are released by date: None when they are now (or when its phases
    set no date), else the date. The downloads' rule (`areas`) and the runs' (a system is never
    run on a split before this date, blind or not) are this one."""
    on_it = list(s.exec(select(Phase).where(Phase.task_id == task_id, Phase.split == split)).all())
    return _pending(*release_time(on_it), now or utcnow())


def _pending(always: bool, at: datetime | None, now: datetime) -> datetime | None:
    """The date a split's files wait for, None when they are released by date."""
    return None if always or at is None or at <= now else at


def areas(s: Session, task, home, now: datetime | None = None) -> list[Area]:
    """Every area of an imported task, in name order, with its release state and files."""
    store = TaskStore(task.id, home)
    top = store.root / "public"
    if not store.exists() or not top.is_dir() or os.path.islink(top):
        return []
    now = now or utcnow()
    phases = list(s.exec(select(Phase).where(Phase.task_id == task.id)).all())
    out = []
    for d in sorted(top.iterdir(), key=lambda p: p.name):
        if not d.is_dir() or d.is_symlink():
            continue
        on_it = [p for p in phases if p.split == d.name]
        always, at = release_time(on_it)
        blind = any(p.blind for p in on_it)
        out.append(
            Area(
                name=d.name,
                is_split=d.name in task.splits,
                released=not blind and _pending(always, at, now) is None,
                release_at=None if always or blind else at,
                files=area_files(store, d.name),
                blind=blind,
            )
        )
    return out


def downloadable(
    s: Session, user: User | None, task, home, area: str | None, now: datetime | None = None
) -> tuple[list[Area], list[Area]]:
    """The areas the person may download now (one, or every released one when `area` is None),
    and those withheld until their date; raises DownloadRefused (404 not imported or no such
    area, 403 not allowed or not released yet, 409 it would expose hidden gold). The caller's
    transaction keeps an implicit registration."""
    allowed = people.may_download(s, user, task.id)
    if not allowed.ok:
        raise DownloadRefused(403, allowed.code, allowed.message)
    store = TaskStore(task.id, home)
    if not store.exists():
        raise DownloadRefused(
            404,
            "not_imported",
            f"task {task.id!r} has no data yet; the organizer imports it with: {task.import_help}",
        )
    every = [a for a in areas(s, task, home, now) if a.files]
    if area is not None:
        every = [a for a in every if a.name == area]
        if not every:
            raise DownloadRefused(404, "unknown_split", f"task {task.id!r} has no files {area!r}")
    if people.organizes_task(s, user, task.id):
        given, withheld = every, []
    else:
        given = [a for a in every if a.released]
        withheld = [a for a in every if not a.released]
        if area is not None and withheld:
            code = "blind" if withheld[0].blind else "not_released"
            raise DownloadRefused(403, code, f"{task.id}: {withheld[0].refusal()}")
    try:
        exposure.check_download(task, home, [a.name for a in given])
    except exposure.ExposureRefused as e:
        raise DownloadRefused(409, "exposes_hidden_gold", str(e)) from e
    return given, withheld


def declaration_member(task, home) -> list[tuple[str, bytes]]:
    """What a download carries beside the files so that `validate` and `score --split dev --home
    DIR` know a bundle task offline: its declaration (format, metrics, splits and the names of
    their files; never a file of gold/). A built-in task needs none: the command knows it."""
    path = declaration_path(task.id, home)
    # its bytes, not its path: it lies beside public/, and a zip handed out by URL takes files
    # from public/ alone (server.web.downloads)
    return [(DECLARATION, path.read_bytes())] if path.is_file() else []
