"""When a blind run's output reaches the boards: at the run's `shown_at` (when its result is shown
to its team, `server.domain.code_runs.shown_from`), fixed when the run is submitted, never when
it was scored. Before then no board shows its row and no transition of its submission moves its
phase's revision (`server.domain.lifecycle`), so nothing a board answers tells when the run ended.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, or_, select

from server import models  # models.X: the tables, loaded when first used (not on import)


def unshown(now: datetime):
    """The SQL condition on a phase's code runs (joined to their phase) of those whose output
    stays off the boards at `now`: a blind run not released as it is, before its `shown_at`."""
    return and_(
        models.Phase.blind.is_(True),
        or_(models.CodeRun.release.is_(None), models.CodeRun.release != "release"),
        models.CodeRun.shown_at.is_not(None),
        models.CodeRun.shown_at > now,
    )


def unshown_outputs(phase_id, now: datetime):
    """The ids of the submissions of a phase that no board shows yet at `now`: the outputs of
    blind runs before their `shown_at` (`unshown`), unless another run of the same output is
    shown already (two runs writing one file share their submission). A query."""
    shown = (
        select(models.CodeRun.submission_id)
        .join(models.Phase, models.Phase.id == models.CodeRun.phase_id)
        .where(models.CodeRun.phase_id == phase_id, models.CodeRun.submission_id.is_not(None))
        .where(~unshown(now))
    )
    return (
        select(models.CodeRun.submission_id)
        .join(models.Phase, models.Phase.id == models.CodeRun.phase_id)
        .where(
            models.CodeRun.phase_id == phase_id,
            models.CodeRun.submission_id.is_not(None),
            unshown(now),
        )
        .where(models.CodeRun.submission_id.not_in(shown))
    )


def unshown_row(now: datetime):
    """`is_unshown` as an SQL expression over the `submission` row in hand (an UPDATE's RETURNING
    says it beside the row it changed, without a read of its own)."""

    def runs(cond):
        return (
            select(models.CodeRun.id)
            .join(models.Phase, models.Phase.id == models.CodeRun.phase_id)
            .where(
                models.CodeRun.phase_id == models.Submission.phase_id,
                models.CodeRun.submission_id == models.Submission.id,
                cond,
            )
            .exists()
        )

    # one of its runs unshown, none of them shown already
    return and_(runs(unshown(now)), ~runs(~unshown(now)))


def is_unshown(s, submission_id: int, phase_id: int, now: datetime) -> bool:
    """Whether this submission is the output of a blind run not shown yet (`unshown_outputs`)."""
    q = unshown_outputs(phase_id, now).where(models.CodeRun.submission_id == submission_id).limit(1)
    return s.execute(q).first() is not None
