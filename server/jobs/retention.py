"""Retention of invalid uploads: the files of submissions that failed validation are deleted after
the retention period (settings), from the data directory and the object store; their rows and
problem reports stay. On a site with a store, a worker forgets its own copy of an invalid upload
as soon as it is found invalid (server.jobs.scoring), so no machine keeps one past the period."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import select, update

from server import objectstore
from server.db import session_scope
from server.domain.audit import record as _audit
from server.domain.lifecycle import Status
from server.exceptions import StoreUnreachable
from server.models import Submission, utcnow

log = logging.getLogger(__name__)


def purge_invalid_uploads(engine, settings, *, batch: int = 200) -> int:
    """Delete the stored files of submissions that failed validation longer ago than the retention
    period (a file another live submission also uses is kept); returns how many were purged. The
    rows and their problem reports stay."""
    cutoff = utcnow() - timedelta(days=settings.invalid_retention_days)
    done = 0
    with session_scope(engine) as s:  # the reconciler's own step
        rows = s.execute(
            select(Submission.id, Submission.storage_key)
            .where(
                Submission.status == Status.FAILED,
                Submission.failure_kind == "invalid",
                Submission.finished_at < cutoff,
                Submission.file_purged_at.is_(None),
            )
            .limit(batch)
        ).all()
        for sid, key in rows:
            in_use = s.execute(
                select(Submission.id).where(
                    Submission.storage_key == key,
                    Submission.id != sid,
                    ~(
                        (Submission.status == Status.FAILED)
                        & (Submission.failure_kind == "invalid")
                        & (Submission.finished_at < cutoff)
                    ),
                )
            ).first()
            if not in_use and key:
                try:  # here and, on a site with a store, there (every machine fetches from it)
                    objectstore.delete_upload(settings, key)
                except (OSError, ValueError, StoreUnreachable) as e:
                    log.warning("could not delete the upload of submission %s: %s", sid, e)
                    continue  # not marked purged: the next pass tries again
            s.execute(
                update(Submission)
                .where(Submission.id == sid)
                .values(file_purged_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            done += 1
        if done:
            _audit(
                s,
                None,
                "uploads.purge",
                "uploads",
                count=done,
                older_than_days=settings.invalid_retention_days,
            )
    return done
