"""Tracks: a competition fact field of kind `choice` (`track: A | B | C`) that runs answer at
upload, that boards filter on (`filter: {fact: track, equals: [B]}`), and whose rules the fact
sheet's one check enforces (`server.domain.facts.rule_problems`). An organizer moves a run to
another track with a reason (`move`): the run's fact sheet changes, the change is audited, and the
phase's revision goes up so that every board is built again.

Nothing here commits: the action that calls `move` owns the transaction.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import Session

from server import models
from server.db import lock_row
from server.domain import audit, facts
from server.exceptions import LifecycleRefused, UploadFieldsInvalid

TRACK_KEY = "track"


def track_field(fields: list[dict], key: str | None = None) -> dict:
    """The competition's track field: the choice field `key`; without one, the field keyed
    `track`, else the only choice field. LifecycleRefused naming the choice fields otherwise."""
    choices = [f for f in fields or [] if (f.get("kind") or "text") == "choice"]
    if key:
        f = next((f for f in choices if f["key"] == key), None)
        if f is None:
            known = ", ".join(f["key"] for f in choices) or "none"
            raise LifecycleRefused(
                f"{key!r} is not a choice field of the competition's fact sheet "
                f"(its choice fields: {known})",
                "not_a_track",
            )
        return f
    f = next((f for f in choices if f["key"] == TRACK_KEY), None)
    if f is None and len(choices) == 1:
        f = choices[0]
    if f is None:
        known = ", ".join(f["key"] for f in choices)
        raise LifecycleRefused(
            "the competition declares no track (a choice field keyed `track`)"
            if not choices
            else f"name the track field (one of: {known})",
            "no_track",
        )
    return f


def move(
    s: Session,
    sub: models.Submission,
    fields: list[dict],
    value: str,
    *,
    actor,
    reason: str,
    key: str | None = None,
    via: str = "web",
) -> models.Submission:
    """Move a run to the track `value` (its fact sheet answers the track field with it), checked
    against the field's choices and rules; audited with the old and new track and the reason.
    The run's row is locked first: moves of one run are serialized, so that each audit entry's
    `old` is the previous one's `new`."""
    reason = " ".join((reason or "").split())[:500]
    if not reason:
        raise LifecycleRefused("Say why: the reason is recorded with the move", "reason_required")
    f = track_field(fields, key)
    value = (value or "").strip()
    if value not in f.get("choices", ()):
        raise UploadFieldsInvalid(
            {f"facts.{f['key']}": f"{value[:100]!r} is not one of: {', '.join(f['choices'])}"}
        )
    lock_row(s, models.Submission, sub.id)
    s.refresh(sub)
    old = (sub.facts or {}).get(f["key"])
    if old == value:
        raise LifecycleRefused(f"submission {sub.id} is in track {value} already", "unchanged")
    sheet = {**(sub.facts or {}), f["key"]: value}
    problems = facts.rule_problems(fields, sheet)
    if problems:
        raise UploadFieldsInvalid(problems)
    s.execute(
        update(models.Submission)
        .where(models.Submission.id == sub.id)
        .values(facts=sheet)
        .execution_options(synchronize_session=False)
    )
    s.execute(  # every board of the phase is built again (its revision: the page cache's key)
        update(models.Phase)
        .where(models.Phase.id == sub.phase_id)
        .values(revision=models.Phase.revision + 1)
    )
    audit.record(
        s,
        actor,
        "submission.track",
        f"submission:{sub.id}",
        field=f["key"],
        old=old,
        new=value,
        reason=reason,
        via=via,
    )
    s.flush()
    s.refresh(sub)
    return sub
