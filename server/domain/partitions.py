"""The public/private partition of a split's gold: which splits have a private part, the one
partition every phase on such a split shares (drawn once from a recorded seed), and the seed of a
board's bootstrap resamples.

Only this module draws, reads or changes a `GoldPartition`; the lifecycle attaches a phase to it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import case, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from scorer import partition_strata, partition_units
from scorer.partition import legacy_partition, stratified_partition
from server import models  # other subjects' tables: models.X, loaded when first used
from server.db import session_scope
from server.domain.audit import record as _audit
from server.exceptions import LifecycleRefused
from tasks import get_task
from tasks.base import HIDDEN_SPLITS
from tasks.errors import TaskNotFound


def has_private_part(task_id: str, split: str) -> bool:
    """Whether phases on this split of the task score with a hidden (private) part of the gold."""
    try:
        return get_task(task_id).has_private_part(split)
    except TaskNotFound:  # a phase of a task no longer registered: the declared default
        return split in HIDDEN_SPLITS


def phase_has_private_part(phase: models.Phase) -> bool:
    """Whether this phase scores with a private part (its split has one, and it hides some)."""
    return has_private_part(phase.task_id, phase.split) and phase.public_fraction < 1


def shared_key(task_id: str, split: str) -> str:
    return f"{task_id}/{split}"


def new_seed() -> int:

    return secrets.randbelow(2**31 - 1)


def partition_in_use(s: Session, partition_id: int) -> bool:
    return (
        s.execute(
            select(models.Submission.id)
            .join(models.Phase, models.Phase.id == models.Submission.phase_id)
            .where(
                models.Phase.partition_id == partition_id,
                models.Submission.score_attempt.is_not(None),
            )
        ).first()
        is not None
    )


def shared_partition(
    engine, task_id: str, split: str, public_fraction: float
) -> models.GoldPartition:
    """The partition of a task's split that every phase on it shares, drawn once (first writer
    wins)."""
    key = shared_key(task_id, split)
    with Session(engine, expire_on_commit=False) as s:
        got = s.execute(
            select(models.GoldPartition).where(models.GoldPartition.key == key)
        ).scalar_one_or_none()
    if got is not None:
        return got
    try:  # a transaction of its own: drawn once, by whoever comes first
        with session_scope(engine) as s:
            s.add(
                models.GoldPartition(
                    key=key,
                    task_id=task_id,
                    split=split,
                    seed=new_seed(),
                    public_fraction=public_fraction,
                    method="stratified",
                )
            )
            _audit(s, None, "partition.draw", f"partition:{key}", public_fraction=public_fraction)
    except IntegrityError:  # another process drew it first: theirs stands
        pass
    with Session(engine, expire_on_commit=False) as s:
        return s.execute(
            select(models.GoldPartition).where(models.GoldPartition.key == key)
        ).scalar_one()


def partition_of(engine, phase_id: int) -> models.GoldPartition | None:
    """The partition a phase scores with, attaching it to its split's shared one on first use;
    None when the phase has no private part."""
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(models.Phase, phase_id)
        if not phase_has_private_part(phase):
            return None
        if phase.partition_id is not None:
            return s.get(models.GoldPartition, phase.partition_id)
        task_id, split, frac = phase.task_id, phase.split, phase.public_fraction
    part = shared_partition(engine, task_id, split, frac)
    if part.public_fraction != frac:
        # drawn at another fraction: redraw it only while nothing is scored under it
        with session_scope(engine) as s:
            if not partition_in_use(s, part.id):
                s.execute(
                    update(models.GoldPartition)
                    .where(models.GoldPartition.id == part.id)
                    .values(public_fraction=frac, seed=new_seed())
                )
                _audit(s, None, "partition.redraw", f"partition:{part.key}", public_fraction=frac)
        with Session(engine, expire_on_commit=False) as s:
            part = s.get(models.GoldPartition, part.id)
    with session_scope(engine) as s:
        # attached at the phase's first scoring, before any score under it: on a blind phase
        # that is a blind run's output, whose scoring moves no board (`server.domain.shown`)
        bump = case((models.Phase.blind.is_(True), 0), else_=1)
        s.execute(
            update(models.Phase)
            .where(models.Phase.id == phase_id, models.Phase.partition_id.is_(None))
            .values(partition_id=part.id, revision=models.Phase.revision + bump)
        )
    with Session(engine) as s:
        pid = s.execute(
            select(models.Phase.partition_id).where(models.Phase.id == phase_id)
        ).scalar_one()
    with Session(engine, expire_on_commit=False) as s:
        return s.get(models.GoldPartition, pid)


def draw(part: models.GoldPartition, home) -> tuple[list[str], list[str]]:
    """(public, private) unit ids of a partition."""
    if part.method == "legacy":
        return legacy_partition(
            partition_units(part.task_id, part.split, home), part.seed, part.public_fraction
        )
    return stratified_partition(
        partition_strata(part.task_id, part.split, home), part.seed, part.public_fraction
    )


WHOLE = "whole"
"""The part holding the whole split of a phase with a private part, scored when the phase publishes
on it (`Phase.published_on`); hidden as the private part is until publication."""
HIDDEN_PARTS = ("private", WHOLE)
PUBLISHED_ON = ("private", WHOLE)


def gold_parts(engine, phase_id: int, settings, *, phase=None) -> dict[str, frozenset | None]:
    """{"all": None}, or {"public": units, "private": units} for a phase with a hidden part, and
    {"whole": None} beside them when the phase publishes on the whole split. `phase`: what the
    caller read of the phase already (its `task_id`, `split` and `public_fraction`): a phase
    without a private part then costs no read."""
    if phase is not None and not phase_has_private_part(phase):
        return {"all": None}
    part = partition_of(engine, phase_id)
    if part is None:
        return {"all": None}
    public, private = draw(part, settings.home)
    out = {"public": frozenset(public), "private": frozenset(private)}
    with Session(engine) as s:
        if s.get(models.Phase, phase_id).published_on == WHOLE:
            out[WHOLE] = None
    return out


def ranked_part(phase: models.Phase) -> str:
    """The part a phase's published ranking is computed on: "all" (no private part), "private",
    or "whole" (the whole split, `Phase.published_on`)."""
    if phase.public_fraction >= 1.0:
        return "all"
    return WHOLE if phase.published_on == WHOLE else "private"


def bootstrap_seed(engine, phase_id: int) -> int:
    """The seed of a board's bootstrap resamples: drawn once for the phase and recorded (audited),
    never the partition's (the board publishes it; the partition's would let anyone redraw the
    public/private split)."""
    with session_scope(engine) as s:  # a transaction of its own: drawn once, first writer wins
        got = s.execute(
            select(models.Phase.stats_seed).where(models.Phase.id == phase_id)
        ).scalar_one()
        if got is not None:
            return int(got)
        seed = new_seed()
        n = s.execute(
            update(models.Phase)
            .where(models.Phase.id == phase_id, models.Phase.stats_seed.is_(None))
            .values(stats_seed=seed)
        ).rowcount
        if n:
            _audit(s, None, "stats.seed", f"phase:{phase_id}", seed=seed)
    with Session(engine) as s:
        return int(
            s.execute(
                select(models.Phase.stats_seed).where(models.Phase.id == phase_id)
            ).scalar_one()
        )


def fingerprint(part: models.GoldPartition | None, secret: str) -> str | None:
    """A public name of a partition: equal for every phase that shares it, changed by a redraw,
    and of no use to redraw it (a keyed hash of its seed with the server's secret)."""
    if part is None:
        return None
    msg = f"{part.key}|{part.method}|{part.public_fraction!r}|{part.seed}"
    return (
        "p" + hmac.new(secret.encode("utf-8"), msg.encode("utf-8"), hashlib.sha256).hexdigest()[:15]
    )


def phase_fingerprint(engine, phase_id: int, secret: str) -> str | None:
    """The fingerprint of the partition a phase scores with; None when it has none (yet)."""
    with Session(engine) as s:
        pid = s.execute(
            select(models.Phase.partition_id).where(models.Phase.id == phase_id)
        ).scalar_one()
        return fingerprint(s.get(models.GoldPartition, pid) if pid is not None else None, secret)


def split_fraction(
    s: Session, task_id: str, split: str, *, other_than: int | None = None
) -> float | None:
    """The public fraction every phase on a hidden split takes: that of its drawn partition, else
    that of the phases already on it; None when the split has neither."""
    part = s.execute(
        select(models.GoldPartition).where(models.GoldPartition.key == shared_key(task_id, split))
    ).scalar_one_or_none()
    q = select(models.Phase.public_fraction).where(
        models.Phase.task_id == task_id, models.Phase.split == split
    )
    if other_than is not None:
        q = q.where(models.Phase.id != other_than)
    others = set(s.execute(q).scalars())
    if others:
        # phases on the split exist: they share one partition (at the lowest fraction, if an
        # older site holds several; raising it would reveal the private part)
        return min(others)
    return part.public_fraction if part is not None else None


def check_new_phase(s: Session, task_id: str, split: str, frac: float | None) -> float:
    """The public fraction of a new phase on a split: the split's one fraction when it has a
    private part (a different one is refused), else `frac` or 1."""
    if not has_private_part(task_id, split):
        return 1.0 if frac is None else float(frac)
    fixed = split_fraction(s, task_id, split)
    if fixed is None:
        return 0.5 if frac is None else float(frac)
    if frac is not None and float(frac) != fixed:
        raise LifecycleRefused(
            f"every phase on {task_id}/{split} scores with the split's one partition, at a "
            f"public fraction of {fixed}; a phase at {float(frac)} would "
            f"{'reveal part of' if float(frac) > fixed else 'change'} its private part",
            "partition_fixed",
        )
    return fixed


def check_fraction_change(s: Session, phase: models.Phase, frac: float) -> None:
    """Refuse a new public fraction for a phase: once it has scored runs, when other phases share
    its split's partition, or when the partition is in use at another fraction."""
    fixed = (
        split_fraction(s, phase.task_id, phase.split, other_than=phase.id)
        if has_private_part(phase.task_id, phase.split)
        else None
    )
    if fixed is not None and frac != fixed:
        raise LifecycleRefused(
            f"every phase on {phase.task_id}/{phase.split} scores with the split's one "
            f"partition, at a public fraction of {fixed}; this phase cannot use {frac}",
            "partition_fixed",
        )
    scored_here = s.execute(
        select(models.Submission.id).where(
            models.Submission.phase_id == phase.id, models.Submission.score_attempt.is_not(None)
        )
    ).first()
    if scored_here:
        raise LifecycleRefused(
            "the public fraction cannot change once submissions of the phase are scored "
            "(the public/private partition is drawn once)",
            "partition_fixed",
        )
    if frac >= 1.0:
        return
    part = s.execute(
        select(models.GoldPartition).where(
            models.GoldPartition.key == shared_key(phase.task_id, phase.split)
        )
    ).scalar_one_or_none()
    if part is not None and part.public_fraction != frac and partition_in_use(s, part.id):
        raise LifecycleRefused(
            f"the {phase.task_id}/{phase.split} gold is partitioned at a public fraction of "
            f"{part.public_fraction} for every phase on that split, and submissions are scored "
            "under it; "
            "this phase can use that fraction or 1 (no private part)",
            "partition_fixed",
        )
