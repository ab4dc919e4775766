"""Every process knows every task: on a site with an object store, a web process (pages and API)
on an empty data directory of its own fetches the files of the tasks organizers wrote (a bundle's
declaration with them) from the store, as a job does before it scores (`objectstore.ensure_task`),
when the database names a task its data directory lacks, or a task changed since it last looked.

What the database says of the tasks is read at most once a second per process (three small
queries; nothing on a site without a store): the tasks of the competitions, each task's newest
version (`TaskVersion`) and its phases' revisions (a task's texts or boards rewritten bump them).
A task whose key moved is compared with the store (its `task.json` and its declaration; fetched
when they differ); a task the store does not answer for is tried again at the next look. So no
process depends on having been the one that created or updated a task.

The built-in tasks (`palimpsest tasks import`, the demo's) write no row a key could be read from:
their `task.json` in the store is listed instead, at most every `BUILTIN_EVERY` seconds (one
request a task). One this directory lacks is fetched at the first look; one the store holds newer
than this directory's copy (its time in the store after the copy's file time) is fetched when its
`task.json` differs. A copy newer than the store's (imported here, not yet pushed: `palimpsest
store push` puts it later) is kept."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from sqlalchemy import func, select
from sqlmodel import Session

from server import objectstore
from server.models import CompetitionTask, Phase, TaskVersion
from tasks import builtin_ids
from tasks.store import TaskStore

log = logging.getLogger(__name__)

BUILTIN_EVERY = 30.0  # seconds between two listings of the built-in tasks' store copies


class TaskSync:
    """One process's view of which tasks' files it holds as the database last described them."""

    def __init__(self, settings, engine, every: float = 1.0, builtin_every: float = BUILTIN_EVERY):
        self.settings = settings
        self.engine = engine
        self.every = every
        self.seen: dict[str, tuple] = {}
        self.next_look = 0.0
        self.builtin_every = builtin_every
        self.builtin_seen: dict[str, datetime] = {}  # each built-in task's store time, as handled
        self.next_builtin = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> list[str]:
        """Look (at most every `every` seconds; one thread at a time, the others go on); returns
        the ids of the tasks fetched."""
        if objectstore.store_for(self.settings) is None or time.monotonic() < self.next_look:
            return []
        if not self.lock.acquire(blocking=False):
            return []
        try:
            self.next_look = time.monotonic() + self.every
            return self.look()
        finally:
            self.lock.release()

    def keys(self) -> dict[str, tuple]:
        """Each task organizers wrote, with what says it changed: (its newest version, the sum
        and count of its phases' revisions)."""
        builtin = set(builtin_ids())
        with Session(self.engine) as s:
            ids = [t for t in s.execute(select(CompetitionTask.task_id)).scalars()]
            versions = dict(
                s.execute(
                    select(TaskVersion.task_id, func.max(TaskVersion.version)).group_by(
                        TaskVersion.task_id
                    )
                ).all()
            )
            revisions = {
                t: (int(n or 0), int(c))
                for t, n, c in s.execute(
                    select(Phase.task_id, func.sum(Phase.revision), func.count(Phase.id)).group_by(
                        Phase.task_id
                    )
                ).all()
            }
        return {t: (versions.get(t), *revisions.get(t, (0, 0))) for t in ids if t not in builtin}

    def look(self) -> list[str]:
        fetched = []
        for task_id, key in self.keys().items():
            if self.seen.get(task_id) == key:
                continue
            try:
                if objectstore.ensure_declared(self.settings, task_id):
                    fetched.append(task_id)
            except Exception as e:  # noqa: BLE001 - the store away: the page says what it knows
                log.warning("task %s not fetched from the store (%s: %s)", task_id, type(e), e)
                continue
            self.seen[task_id] = key
        if time.monotonic() >= self.next_builtin:
            self.next_builtin = time.monotonic() + self.builtin_every
            fetched += self.look_builtin()
        if fetched:
            log.info("tasks fetched from the store: %s", ", ".join(fetched))
        return fetched

    def look_builtin(self) -> list[str]:
        """The built-in tasks whose store copy is missing here or newer than this directory's,
        fetched (`objectstore.ensure_task`: when their `task.json` differs)."""
        store = objectstore.store_for(self.settings)
        fetched = []
        for task_id in builtin_ids():
            key = f"tasks/{task_id}/task.json"
            try:
                times = [m for k, _, m in store.listing(key) if k == key]
            except Exception as e:  # noqa: BLE001 - the store away: tried again at the next look
                log.warning("task %s not looked up in the store (%s: %s)", task_id, type(e), e)
                continue
            if not times or self.builtin_seen.get(task_id) == times[0]:
                continue  # never imported on this site, or handled at this store time already
            local = TaskStore(task_id, self.settings.home)
            if local.exists():
                mine = datetime.fromtimestamp(local.manifest_path.stat().st_mtime, timezone.utc)
                if mine >= times[0]:  # this copy is the store's or newer (not pushed yet): kept
                    self.builtin_seen[task_id] = times[0]
                    continue
            try:
                if objectstore.ensure_task(self.settings, task_id):
                    fetched.append(task_id)
            except Exception as e:  # noqa: BLE001 - tried again at the next look
                log.warning("task %s not fetched from the store (%s: %s)", task_id, type(e), e)
                continue
            self.builtin_seen[task_id] = times[0]
        return fetched
