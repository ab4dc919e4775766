"""One table from the server's named failures to an HTTP status and an error code, used by the
web pages and the REST API alike (so a closed phase is 409 on both).

`describe(exc)` gives `(status, code, message, extra)`; `extra` holds what the API adds to its
error object (`next_allowed_at`, `limit`).
"""

from __future__ import annotations

from datetime import datetime, timezone

from server.exceptions import (
    BundleRefused,
    DiskFull,
    DuplicateSubmission,
    Forbidden,
    LifecycleRefused,
    LimitReached,
    NotFound,
    PhaseClosed,
    QueueUnreachable,
    StoreUnreachable,
    SubmissionRefused,
    TeamRefused,
    UnknownSystem,
    UploadFieldsInvalid,
    UploadTooLarge,
    disk_full,
)
from tasks.errors import ExposureRefused  # a task's files that would reveal hidden gold

# the most specific class first: the first match wins
TABLE: list[tuple[type[Exception], int, str]] = [
    (LimitReached, 429, "limit_reached"),
    (PhaseClosed, 409, "phase_closed"),
    (UploadTooLarge, 413, "too_large"),
    (SubmissionRefused, 422, "refused"),
    (UploadFieldsInvalid, 422, "invalid_request"),
    (UnknownSystem, 422, "unknown_system"),
    (BundleRefused, 422, "invalid_bundle"),
    (DuplicateSubmission, 200, "duplicate"),
    (LifecycleRefused, 409, "refused"),  # its own `code` (phase_open, reason_required, ...) is kept
    (TeamRefused, 409, "team_refused"),  # its own `code` and `status` are kept
    (NotFound, 404, "not_found"),
    (Forbidden, 403, "forbidden"),
    (QueueUnreachable, 503, "queue_unreachable"),
    (StoreUnreachable, 503, "store_unreachable"),
    (ExposureRefused, 422, "exposure_refused"),
    (DiskFull, 507, "disk_full"),
]


def _iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.isoformat().replace("+00:00", "Z")


def describe(exc: Exception) -> tuple[int, str, str, dict]:
    """(status, code, message, extra) of a named failure; LookupError for one the table lacks."""
    for cls, status, code in TABLE:
        if isinstance(exc, cls):
            message = getattr(exc, "message", None) or str(exc)
            code = getattr(exc, "code", None) or code
            status = getattr(exc, "status", None) or status
            extra: dict = {}
            if isinstance(exc, SubmissionRefused):
                extra["next_allowed_at"] = _iso(exc.next_allowed_at)
            if isinstance(exc, LimitReached):
                extra["limit"] = exc.limit or None
            if isinstance(exc, BundleRefused):
                extra["problems"], extra["total"] = exc.problems[:500], len(exc.problems)
            return status, code, message, extra
    raise LookupError(type(exc).__name__)


def status_of(exc: Exception) -> int:
    return describe(exc)[0]


HANDLED = tuple(cls for cls, _, _ in TABLE)


def as_disk_full(exc: Exception) -> DiskFull | None:
    """A failure that is the disk being full, as the named refusal (507); None otherwise."""
    return DiskFull() if disk_full(exc) else None


# failures that may be a full disk (checked by their errno or message; re-raised otherwise)
MAYBE_DISK_FULL: tuple[type[Exception], ...] = (OSError,)
