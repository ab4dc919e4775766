"""Tasks that change after they are created (docs/bundles.md, "Changing a task").

- `edit_texts`: a task's title, description, citation, ... changed in place; nothing is rescored.
- `update_from_bundle`: an edited bundle of an existing competition (`competitions create
  --update`, the API's bundle upload with `update`, the phase page's upload) checked in full as a
  new bundle is, then applied: a task whose metrics, primary, format, splits, files or gold
  changed gets a new version (`tasks.taskversions`); one whose texts alone changed is edited in
  place. After the commit, as a campaign's close does, every run scored under the earlier version
  is marked stale and queued for rescoring (`server.domain.provenance.mark_stale`): boards
  never
  rank two versions together, and published rankings stay as they were published, byte for byte.
  What the change did to each phase's live board (its ranks before, the runs marked stale and
  queued) is kept with the version (`TaskVersion.effect`) and shown on the phase page.
- `archive_task`: its phases closed for good, its files and runs kept; idempotent.

Each is one transaction; a refused change leaves nothing behind, on disk or in the database.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server import objectstore
from server import task_models as tm
from server.actions.bundles import bundle_problem, bundle_refusal
from server.actions.common import action, lock_for_change, require_organizer
from server.actions.common import task as find_task
from server.boards import leaderboard as lb
from server.db import after_commit, on_rollback, savepoint
from server.domain import audit, goldversions, lifecycle, people, publication
from server.domain import boards as board_rules
from server.domain.lifecycle import PENDING
from server.domain.provenance import current_provenance, mark_stale
from server.exceptions import BundleRefused, LifecycleRefused, NotFound
from server.jobs.dispatch import jobs
from server.models import (
    Competition,
    GoldVersion,
    Phase,
    Submission,
    TaskArchive,
    TaskVersion,
    User,
    utcnow,
)
from tasks import builtin_ids, get_task
from tasks import bundle as bundles
from tasks import taskversions as tv
from tasks.bundle_models import task_from_spec
from tasks.declared import declaration_path


def _phases(s: Session, task_id: str) -> list[Phase]:
    return list(s.exec(select(Phase).where(Phase.task_id == task_id).order_by(Phase.id)))


def archived(s: Session, task_id: str) -> TaskArchive | None:
    return s.exec(select(TaskArchive).where(TaskArchive.task_id == task_id)).first()


def _editable(task_id: str, home: Path) -> None:
    """Refuse a task that is not a bundle's (a built-in task changes with its spec file)."""
    if task_id in builtin_ids() or not declaration_path(task_id, home).is_file():
        raise LifecycleRefused(
            f"{task_id} is a built-in task: its declaration is tasks/specs/{task_id}.yaml, "
            "changed with the code (only a task created from a bundle changes here)",
            "builtin_task",
        )


def _ranks(s: Session, task, phase: Phase, home) -> list[dict]:
    """The phase's live board as its organizers see it (the private part ranked): each team's
    row, its rank and primary value."""
    board = lb.build_board(
        s,
        task,
        phase,
        audience="organizer",
        show_private=True,
        include_closed=True,
        provenance=current_provenance(task, phase.split, home),
    )
    key = board.primary.key
    return [
        {
            "team": r.team,
            "submission_id": r.submission_id,
            "rank": r.rank,
            "value": r.values.get(key),
            "metric": key,  # a new version may rank on another metric: the table names both
        }  # fmt: skip
        for r in board.rows
        if r.row_type == "team"
    ]


def _bump(s: Session, task_id: str) -> None:
    """Every phase of the task renders again (its title, its board)."""
    for p in _phases(s, task_id):
        p.revision = (p.revision or 0) + 1
        s.add(p)


# ----------------------------------------------------------------------------- reading


def _version_out(v: TaskVersion) -> tm.TaskVersionOut:
    return tm.TaskVersionOut(
        version=v.version,
        reason=v.reason,
        changes=v.changes or {},
        effect=v.effect or {},
        created_at=v.created_at,
    )


def _state(s: Session, task_id: str, closed: list[str] | None = None) -> tm.TaskStateOut:
    t = get_task(task_id)
    a = archived(s, task_id)
    versions = s.exec(
        select(TaskVersion).where(TaskVersion.task_id == task_id).order_by(TaskVersion.version)
    ).all()
    return tm.TaskStateOut(
        task=t.id,
        title=t.title,
        version=t.version,
        archived=a is not None,
        archived_at=a.archived_at if a else None,
        phases_closed=closed or [],
        versions=[_version_out(v) for v in versions],
    )


@action
def task_state(*, s: Session, actor: User | None, task: str) -> tm.TaskStateOut:
    """A task's version, the versions recorded and whether it is archived (its organizers)."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    return _state(s, t.id)


def phase_change(s: Session, phase: Phase, settings) -> dict:
    """What the phase page says of its task's changes: the version, whether it is archived, and,
    after a new version, its effect on this phase's board (ranks before and now, the runs still
    stale or being rescored)."""
    t = get_task(phase.task_id)
    home = Path(settings.home)
    out = {
        "version": t.version,
        "archived": archived(s, t.id) is not None,
        "editable": t.id not in builtin_ids() and declaration_path(t.id, home).is_file(),
        "texts": {k: getattr(t, k, "") or "" for k in tv.EDITABLE_TEXTS},
        "last": None,
    }
    v = s.exec(
        select(TaskVersion)
        .where(TaskVersion.task_id == t.id)
        .order_by(TaskVersion.version.desc())
        .limit(1)
    ).first()
    if v is None or not (v.changes or {}):
        return out
    effect = (v.effect or {}).get("phases", {}).get(phase.name, {})
    now = {r["team"]: r for r in _ranks(s, t, phase, home)}
    before = {r["team"]: r for r in effect.get("before", [])}
    stale, pending = s.exec(
        select(
            func.count(Submission.id).filter(Submission.stale.is_(True)),
            func.count(Submission.id).filter(Submission.status.in_(PENDING)),
        ).where(Submission.phase_id == phase.id, Submission.removed_at.is_(None))
    ).one()
    out["last"] = {
        "version": v.version,
        "reason": v.reason,
        "created_at": v.created_at,
        "changes": v.changes,
        "marked_stale": effect.get("stale", 0),
        "rescoring": len(effect.get("rescoring", [])),
        "still_stale": stale,
        "pending": pending,
        "published": effect.get("published", []),
        # the metric each side's values are of (rows recorded before it was kept name none)
        "before_metric": next((r["metric"] for r in before.values() if r.get("metric")), None),
        "now_metric": next((r["metric"] for r in now.values()), None),
        "rows": [
            {"team": team, "before": before.get(team), "now": now.get(team)}
            for team in sorted(set(before) | set(now))
        ],
    }
    return out


# ----------------------------------------------------------------------------- texts


@action
def edit_texts(
    *, s: Session, actor: User | None, task: str, texts: dict, via: str, settings
) -> tm.TaskStateOut:
    """Change a task's texts in place (its organizers): no new version, nothing rescored. Each
    text is checked as a bundle's is; a refusal names the key."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    home = Path(settings.home)
    _editable(t.id, home)
    texts = {k: v for k, v in texts.items() if v is not None}
    unknown = sorted(set(texts) - set(tv.EDITABLE_TEXTS))
    if unknown or not texts:
        raise BundleRefused(
            [bundle_problem(k, "not a text of a task (a new version changes it)") for k in unknown]
            or [
                bundle_problem(
                    "(top)", f"nothing to change: give one of {', '.join(tv.EDITABLE_TEXTS)}"
                )
            ]
        )
    try:
        spec = tv.with_texts(t.id, home, texts)
    except ValidationError as e:
        raise BundleRefused(
            [
                bundle_problem(bundles.yaml_path(err["loc"]), bundles.problem_message(err))
                for err in e.errors()
            ]
        ) from None
    before = tv.installed_spec(t.id, home)
    changed = [k for k in texts if getattr(before, k) != getattr(spec, k)]
    if not changed:
        return _state(s, t.id)
    on_rollback(s, lambda: _push_quietly(settings, [t.id]))  # runs after the files went back
    on_rollback(s, tv.write_texts(spec, home))
    _bump(s, t.id)
    audit.record(s, actor, "task.edit", f"task:{t.id}", via=via, texts=changed)
    objectstore.push_tree(settings, f"tasks/{t.id}")
    return _state(s, t.id)


# ----------------------------------------------------------------------------- new versions


def _changes(
    s: Session, c: Competition, b: bundles.Bundle, home: Path, only: str | None
) -> tuple[list[tv.Change], list[BoardEdit]]:
    """Each task's change and the phases' boards it changes, or every problem the database knows
    of (a task the competition does not have, a split its phases need left out or without gold,
    an archived task's new version, a board its phase cannot have)."""
    problems, out, edits = [], [], []
    ours = people.task_ids(s, c.id)
    for i, spec in enumerate(b.spec.tasks):
        if only is not None and spec.id != only:
            continue
        at = f"tasks[{i}]"
        if spec.id not in ours:
            problems.append(
                bundle_problem(
                    f"{at}.id",
                    f"{spec.id!r} is not a task of {c.slug} (its tasks: {', '.join(ours)}); an "
                    "update changes the tasks it has",
                )
            )
            continue
        if not declaration_path(spec.id, home).is_file():
            problems.append(
                bundle_problem(f"{at}.id", f"{spec.id} was not installed from a bundle")
            )
            continue
        for p in _phases(s, spec.id):
            sp = spec.splits.get(p.split)
            if sp is None or sp.gold is None:
                problems.append(
                    bundle_problem(
                        f"{at}.splits",
                        f"the {p.name} phase scores on the {p.split} split: a new version keeps "
                        "it, with its gold",
                    )
                )
        change = tv.diff(spec, b.root, home)
        if change.versioned and archived(s, spec.id) is not None:
            problems.append(
                bundle_problem(at, f"{spec.id} is archived: its runs stay as they were scored")
            )
        if change.boards:
            found, wrong = _board_edits(s, at, spec, change)
            edits += found
            problems += [bundle_problem(path, msg) for path, msg in wrong]
        out.append(change)
    if only is not None and not out and not problems:
        problems.append(bundle_problem("tasks", f"the bundle does not declare the task {only!r}"))
    if problems:
        raise BundleRefused(problems)
    return out, edits


@dataclass
class BoardEdit:
    """A phase whose boards an update changes: the boards it gets (checked)."""

    task_id: str
    phase: Phase
    boards: list[dict]


def _board_edits(
    s: Session, at: str, spec, change: tv.Change
) -> tuple[list[BoardEdit], list[tuple[str, str]]]:
    """The phases of the task whose boards the bundle's declaration changes (`change.boards`),
    each with its new boards checked against the task as the update leaves it and the
    competition's fact sheet, and the problems found (YAML path, message). A phase the bundle
    declares that the task does not have is left to `organizer phases` (the update's notes)."""
    task = task_from_spec(change.spec)
    live = {p.name: p for p in _phases(s, spec.id)}
    edits, problems = [], []
    for j, ps in enumerate(spec.phases):
        p = live.get(ps.name)
        if p is None or ps.name not in change.boards:
            continue
        declared = [x.model_dump(mode="json", exclude_none=True) for x in ps.boards]
        got, wrong = board_rules.check(s, task, declared, where=f"{at}.phases[{j}]")
        problems += wrong
        if not wrong and got != list(p.boards or ()):
            edits.append(BoardEdit(spec.id, p, got))
    return edits, problems


def _apply_boards(
    s: Session, actor: User | None, edits: list[BoardEdit], via: str
) -> dict[str, list[tm.PhaseBoards]]:
    """Give each phase its new boards (audited as a phase edit; its revision goes up, so that the
    live boards are built again and a new board's statistics are computed when next asked for).
    A published ranking keeps the boards it was published with."""
    out: dict[str, list[tm.PhaseBoards]] = {}
    for e in edits:
        before = {x["name"]: x for x in e.phase.boards or ()}
        after = {x["name"]: x for x in e.boards}
        lifecycle.edit_phase(s, e.phase, {"boards": e.boards}, actor=actor, via=via)
        out.setdefault(e.task_id, []).append(
            tm.PhaseBoards(
                phase=e.phase.name,
                added=[n for n in after if n not in before],
                removed=[n for n in before if n not in after],
                changed=[n for n in after if n in before and after[n] != before[n]],
            )
        )
    return out


def _record(
    s: Session,
    actor: User | None,
    change: tv.Change,
    inst: tv.Installed,
    kept_as: dict[str, int],
    reason: str,
    before: dict[str, list[dict]],
    created: datetime,
) -> None:
    """The version's rows: the first version (recorded when a second comes), the new one, and a
    new gold version for each split whose gold changed."""
    uid = actor.id if isinstance(actor, User) else None
    first = s.exec(select(TaskVersion.id).where(TaskVersion.task_id == change.task_id)).first()
    if first is None:
        s.add(
            TaskVersion(
                task_id=change.task_id,
                version=change.old_version,
                reason="as created",
                created_at=created,
            )
        )
    s.add(
        TaskVersion(
            task_id=change.task_id,
            version=change.new_version,
            reason=reason,
            changes=change.summary(),
            effect={"phases": {name: {"before": rows} for name, rows in before.items()}},
            created_by=uid,
        )
    )
    why = f"task version {change.new_version}" + (f": {reason}" if reason else "")
    for split in change.gold:
        if split not in inst.gold_before:
            continue  # a split that had no gold before
        if goldversions.current(s, change.task_id, split) is None:
            s.add(
                GoldVersion(
                    task_id=change.task_id,
                    split=split,
                    version=1,
                    sha256=inst.gold_before[split],
                    reason="imported",
                    created_at=created,
                )
            )
        s.add(
            GoldVersion(
                task_id=change.task_id,
                split=split,
                version=kept_as[split] + 1,
                sha256=inst.gold_after[split],
                parent_sha256=inst.gold_before[split],
                reason=why,
                created_by=uid,
            )
        )


def _effect(s: Session, change: tv.Change, ids: list[int]) -> list[tm.PhaseEffect]:
    """After the stale runs were marked and queued: each phase's effect, kept with the version."""
    v = s.exec(
        select(TaskVersion).where(
            TaskVersion.task_id == change.task_id, TaskVersion.version == change.new_version
        )
    ).one()
    phases = dict((v.effect or {}).get("phases", {}))
    out = []
    for p in _phases(s, change.task_id):
        subs = s.exec(
            select(Submission.id, Submission.stale).where(
                Submission.phase_id == p.id, Submission.removed_at.is_(None)
            )
        ).all()
        mine = {sid for sid, _ in subs}
        e = dict(phases.get(p.name, {}))
        e["stale"] = sum(1 for _, stale in subs if stale)
        e["rescoring"] = sorted(i for i in ids if i in mine)
        e["published"] = [rv.version for rv in publication.ranking_versions(s, p.id)]
        phases[p.name] = e
        out.append(tm.PhaseEffect(phase=p.name, **e))
    v.effect = {"phases": phases}
    s.add(v)
    return out


def _change_out(change: tv.Change, phases: list[tm.PhaseEffect]) -> tm.TaskChangeOut:
    return tm.TaskChangeOut(
        task=change.task_id,
        version=change.new_version,
        previous_version=change.old_version,
        versioned=change.versioned,
        **change.summary(),
        phases=phases,
    )


def _apply(
    s: Session,
    actor: User | None,
    changes: list[tv.Change],
    root: Path,
    *,
    origin: str,
    via: str,
    settings,
    reason: str,
) -> list[tm.TaskChangeOut]:
    """Write every change (files first, then their rows, in one transaction: if it fails, every
    task's files go back as they were), then mark and queue the stale runs."""
    home = Path(settings.home)
    # should the transaction roll back, every task's files go back (hooks in reverse order) and
    # then the object store is given them again
    on_rollback(s, lambda: _push_quietly(settings, [ch.task_id for ch in changes if not ch.empty]))
    for ch in changes:
        if ch.empty:
            continue
        if not ch.versioned:  # texts or boards: the declaration rewritten in place
            on_rollback(s, tv.write_texts(ch.spec, home))
            _bump(s, ch.task_id)
            audit.record(
                s, actor, "task.edit", f"task:{ch.task_id}", via=via, texts=ch.texts,
                **({"boards": ch.boards} if ch.boards else {}),
            )  # fmt: skip
            continue
        old = get_task(ch.task_id)
        created = datetime.fromtimestamp(
            declaration_path(ch.task_id, home).stat().st_mtime, timezone.utc
        ).replace(tzinfo=None)
        before = {p.name: _ranks(s, old, p, home) for p in _phases(s, ch.task_id)}
        kept_as = {}
        for split in ch.gold:
            cur = goldversions.current(s, ch.task_id, split)
            kept_as[split] = cur.version if cur is not None else 1
        inst = tv.install_version(ch, root, home, origin, kept_as)
        on_rollback(s, inst.undo)
        after_commit(s, inst.done)
        _record(s, actor, ch, inst, kept_as, reason, before, created)
        audit.record(
            s,
            actor,
            "task.version",
            f"task:{ch.task_id}",
            via=via,
            version=ch.new_version,
            previous=ch.old_version,
            reason=reason,
            **ch.summary(),
        )
    for ch in changes:
        if not ch.empty:  # into the object store (when the site has one) before the commit
            objectstore.push_tree(settings, f"tasks/{ch.task_id}")
    out = []
    for ch in changes:
        phases: list[tm.PhaseEffect] = []
        if ch.versioned:
            ids = mark_stale(s, settings, task_id=ch.task_id)
            jobs(s, settings).rescore(s, ids)
            phases = _effect(s, ch, ids)
        out.append(_change_out(ch, phases))
    return out


def _push_quietly(settings, task_ids: list[str]) -> None:
    """Give the object store (when the site has one) the tasks' files as they are again."""
    for task_id in task_ids:
        with contextlib.suppress(Exception):
            objectstore.push_tree(settings, f"tasks/{task_id}")


def _notes(s: Session, c: Competition, b: bundles.Bundle) -> list[str]:
    """What an update leaves to other commands: the competition's own settings and pages, and
    phases the bundle declares that the task does not have (or the other way round)."""
    notes = []
    if b.spec.title != c.title:
        notes.append("the competition's title differs: change it with `competitions edit`")
    for t in b.spec.tasks:
        have = {p.name for p in _phases(s, t.id)}
        want = {p.name for p in t.phases}
        if have != want:
            notes.append(
                f"{t.id}: the phases differ from the bundle's ({', '.join(sorted(want ^ have))})"
                "; phases change with `organizer phases`"
            )
    return notes


@action
def update_from_bundle(
    *,
    s: Session,
    actor: User | None,
    source: Path,
    via: str,
    settings,
    only: str | None = None,
    reason: str = "",
) -> tm.BundleUpdateOut:
    """Apply an edited bundle to its competition (its owners and organizers; `only`: one task of
    it). The bundle is checked in full as a new one is (every problem named with its YAML path
    and line), then each task's change is written: a new version where its metrics, primary,
    format, splits, files or gold changed, its texts in place otherwise. Runs scored under an
    earlier version are marked stale and queued after the commit."""
    home = Path(settings.home)
    reason = " ".join((reason or "").split())[:2000]
    with _work_dir() as work:
        try:
            b = bundles.read_bundle(Path(source), work_dir=work, home=home, updating=True)
        except bundles.BundleInvalid as e:
            raise bundle_refusal(e) from None
        c = s.exec(select(Competition).where(Competition.slug == b.spec.id)).first()
        if c is None:
            raise BundleRefused(
                [
                    bundle_problem(
                        "id",
                        f"no competition {b.spec.id!r} to update: create it from the bundle "
                        "first (without --update)",
                    )
                ]
            )
        require_organizer(actor, s, competition_id=c.id)
        # one change of a competition's tasks at a time: a second waits, then reads what the
        # first left (an identical update changes nothing more)
        lock_for_change(s, Competition, c.id, f"the competition {c.slug}'s tasks")
        changes, edits = _changes(s, c, b, home, only)
        out = _apply(
            s,
            actor,
            changes,
            b.root,
            origin=c.slug,
            via=via,
            settings=settings,
            reason=reason,
        )
        changed = _apply_boards(s, actor, edits, via)
        out = [t.model_copy(update={"boards": changed.get(t.task, [])}) for t in out]
        notes = _notes(s, c, b) if only is None else []
        notes += _board_notes(s, b, changes)
    return tm.BundleUpdateOut(competition=c.slug, tasks=out, notes=notes)


def _board_notes(s: Session, b: bundles.Bundle, changes: list[tv.Change]) -> list[str]:
    """The phases whose live boards differ from the bundle's where the bundle did not change them
    (an organizer changed them on the site since): the update leaves those as they are."""
    notes = []
    by_id = {ch.task_id: ch for ch in changes}
    for t in b.spec.tasks:
        ch = by_id.get(t.id)
        if ch is None:
            continue
        live = {p.name: list(p.boards or ()) for p in _phases(s, t.id)}
        for ps in t.phases:
            want = [x.model_dump(mode="json", exclude_none=True) for x in ps.boards]
            if ps.name in live and ps.name not in ch.boards and live[ps.name] != want:
                notes.append(
                    f"{t.id}: the {ps.name} phase's boards differ from the bundle's (changed on "
                    "the site since) and are left as they are; a change of them in the bundle "
                    "applies"
                )
    return notes


@contextlib.contextmanager
def _work_dir():
    with tempfile.TemporaryDirectory(prefix="palimpsest-update-") as d:
        yield Path(d)


# ----------------------------------------------------------------------------- archive


@action
def archive_task(
    *, s: Session, actor: User | None, task: str, via: str, reason: str = ""
) -> tm.TaskStateOut:
    """Archive a task (its organizers): each of its phases closed now (one not open yet closes
    without opening), no phase of it opens again or is added; its files, runs, scores and
    published rankings are kept. Archiving it again changes nothing."""
    t = find_task(task)
    require_organizer(actor, s, task_id=t.id)
    if archived(s, t.id) is not None:
        return _state(s, t.id)
    now = utcnow()
    closed = []
    try:  # archived at the same moment by another request: it is archived, nothing more
        with savepoint(s):
            for p in _phases(s, t.id):
                state = lifecycle.phase_state(p, now)
                if state == "closed":
                    continue
                if state == "not open yet":
                    p.opens_at = now
                p.closes_at = now
                lifecycle.phase_changed(s, p, actor, "phase.close", via=via, archived=True)
                closed.append(p.name)
            s.add(
                TaskArchive(
                    task_id=t.id,
                    reason=" ".join((reason or "").split())[:2000],
                    archived_by=actor.id if isinstance(actor, User) else None,
                    archived_at=now,
                )
            )
            audit.record(s, actor, "task.archive", f"task:{t.id}", via=via, phases_closed=closed)
    except IntegrityError:
        return _state(s, t.id)
    return _state(s, t.id, closed)


__all__ = [
    "BundleRefused",
    "LifecycleRefused",
    "NotFound",
    "archive_task",
    "archived",
    "edit_texts",
    "phase_change",
    "task_state",
    "update_from_bundle",
]
