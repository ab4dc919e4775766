"""Provenance: what a score was computed against (the task's version, the gold's checksum, the
scorer's version), whether it is current, and how it is shown to participants (the gold's keyed
id instead of its checksum)."""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import select, update

import scorer
from server import models  # other subjects' tables: models.X, loaded when first used
from server.domain.lifecycle import FINAL, audit_change, bump_phase, move
from tasks import all_tasks
from tasks.store import TaskStore


def current_provenance(task, split: str, home) -> dict | None:
    """What a score must have been computed against to be ranked now: the task's declared version,
    the split's gold checksum and the scorer's version; None when the task is not imported."""
    store = TaskStore(task.id, home)
    if not store.exists():
        return None
    try:
        gold = store.gold_checksum(split)
    except Exception:  # noqa: BLE001 — a broken manifest: nothing can be compared
        return None
    return {"task_version": task.version, "gold_sha256": gold, "scorer_version": scorer.__version__}


def is_current(result: dict | None, prov: dict | None) -> bool:
    if prov is None or not result:
        return True
    got = result.get("provenance") or {}
    return all(got.get(k) == v for k, v in prov.items())


def mark_stale(s, settings, task_id: str | None = None) -> list[int]:
    """Mark stale every scored submission whose counted scores were computed against another gold,
    task or scorer version than the current one (read from the task's files), and queue it for
    rescoring; returns the ids to enqueue once the caller's transaction commits. With `task_id`,
    that task's phases only (a campaign's close after it wrote a new gold version). Flushes."""
    out: list[int] = []
    q = (
        select(models.Phase)
        if task_id is None
        else select(models.Phase).where(models.Phase.task_id == task_id)
    )
    phases = list(s.execute(q).scalars())
    tasks = {t.id: t for t in all_tasks()}
    for phase in phases:
        task = tasks.get(phase.task_id)
        prov = current_provenance(task, phase.split, settings.home) if task else None
        if prov is None:
            continue
        rows = (
            s.execute(
                select(models.Submission)
                .join(
                    models.Score,
                    (models.Score.submission_id == models.Submission.id)
                    & (models.Score.attempt == models.Submission.score_attempt),
                )
                .where(
                    models.Submission.phase_id == phase.id,
                    models.Submission.stale.is_(False),
                    models.Submission.removed_at.is_(None),
                    (models.Score.gold_sha256 != prov["gold_sha256"])
                    | (models.Score.task_version != prov["task_version"])
                    | (models.Score.scorer_version != prov["scorer_version"]),
                )
            )
            .scalars()
            .unique()
            .all()
        )
        for sub in rows:
            s.execute(
                update(models.Submission)
                .where(models.Submission.id == sub.id)
                .values(stale=True)
                .execution_options(synchronize_session=False)
            )
            audit_change(s, None, "submission.stale", f"submission:{sub.id}", current=prov)
            if sub.status in FINAL and move(
                s,
                sub.id,
                "rescore",
                details={"reason": "stale provenance"},
                attempt_ceiling=(sub.attempts or 0) + settings.max_attempts,
                failure_kind=None,
                errors=None,
                finished_at=None,
            ):
                out.append(sub.id)
        if rows:
            bump_phase(s, phase.id)
    return out


def gold_id(secret: str, gold_sha256: str) -> str:
    """An identifier of a gold version that cannot be used to check a guess offline: a keyed hash
    with the server's secret (the raw sha256 is for organizers only)."""
    return (
        "g"
        + hmac.new(
            secret.encode("utf-8"), gold_sha256.encode("ascii", "replace"), hashlib.sha256
        ).hexdigest()[:15]
    )


def public_result(result: dict, secret: str) -> dict:
    """A scoring result as a participant may see it: the gold's sha256 replaced by its keyed id,
    in the provenance and in the signature."""
    out = dict(result)
    prov = dict(out.get("provenance") or {})
    sha = prov.pop("gold_sha256", None)
    if sha:
        gid = gold_id(secret, sha)
        prov["gold_id"] = gid
        sig = out.get("signature") or ""
        out["signature"] = "|".join(
            f"gold:{gid}" if p.startswith("gold:") else p for p in sig.split("|")
        )
    out["provenance"] = prov
    return out
