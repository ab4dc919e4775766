"""Precisely named failures of the server's scoring backbone; each message says why and when."""

from __future__ import annotations

import errno
from datetime import datetime

from scorer.errors import PalimpsestError


class SubmissionRefused(PalimpsestError):
    """A submission the server will not accept now; `next_allowed_at` says when it may (or None)."""

    def __init__(self, message: str, next_allowed_at: datetime | None = None):
        super().__init__(message)
        self.message = message
        self.next_allowed_at = next_allowed_at


class LimitReached(SubmissionRefused):
    """The team has used its daily, total or concurrent allowance for this phase."""

    def __init__(self, message: str, next_allowed_at: datetime | None = None, limit: str = ""):
        super().__init__(message, next_allowed_at)
        self.limit = limit  # "daily", "total" or "concurrent"


class PhaseClosed(SubmissionRefused):
    """The phase is not open (not yet, or no longer)."""


class InputsNotReleased(SubmissionRefused):
    """A system for a phase whose split's inputs are not released yet (the downloads' rule,
    `server.domain.download_rule.inputs_release`): it is never run before their date."""

    def __init__(self, message: str, next_allowed_at: datetime | None = None):
        super().__init__(message, next_allowed_at)
        self.code = "not_released"


class EmptyUpload(SubmissionRefused):
    """An upload of no byte at all."""

    def __init__(self):
        super().__init__("the file is empty")


class UploadTooLarge(SubmissionRefused):
    """An upload over the configured size limit."""


class NotFound(PalimpsestError):
    """A user, team, task or phase that does not exist; `code` names it for the API."""

    def __init__(self, message: str, code: str = "not_found"):
        super().__init__(message)
        self.message = message
        self.code = code


class UploadFieldsInvalid(PalimpsestError):
    """An upload whose fields (method name, description, URL, ...) are not as declared; `fields`
    maps each wrong field to what is wrong with it."""

    def __init__(self, fields: dict[str, str]):
        self.fields = fields
        self.message = "; ".join(f"{k}: {v}" for k, v in fields.items())
        super().__init__(self.message)


class BundleRefused(PalimpsestError):
    """A competition bundle that cannot be created: every problem, each with where it is (a YAML
    path or a file, and a line)."""

    code = "invalid_bundle"

    def __init__(self, problems: list[dict]):
        self.problems = problems
        n = len(problems)
        first = problems[0]["message"] if problems else ""
        self.message = f"the bundle has {n} problem{'s' if n != 1 else ''}" + (
            f", the first: {first}" if first else ""
        )
        super().__init__(self.message)


class SystemRefused(BundleRefused):
    """A code submission that cannot be run: every problem of its archive or system.yaml."""

    code = "invalid_system"

    def __init__(self, problems: list[dict]):
        super().__init__(problems)
        self.message = self.message.replace("the bundle", "the system", 1)
        self.args = (self.message,)


class Forbidden(PalimpsestError):
    """An action the actor's role does not allow; `code` names it for the API."""

    def __init__(self, message: str, code: str = "forbidden"):
        super().__init__(message)
        self.message = message
        self.code = code


class DuplicateSubmission(PalimpsestError):
    """The team submitted this very file in this phase before; `submission_id` is that one."""

    def __init__(self, submission_id: int):
        super().__init__(f"this file was submitted before as submission {submission_id}")
        self.submission_id = submission_id


class UnknownSystem(PalimpsestError):
    """Baseline systems a task does not have, named with the ones it has."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class LifecycleRefused(PalimpsestError):
    """A change of a submission's or a phase's state that its current state does not allow."""

    def __init__(self, message: str, code: str = "refused"):
        super().__init__(message)
        self.message = message
        self.code = code


class TeamRefused(PalimpsestError):
    """A team action the caller's situation does not allow (already in a team, a taken name, a
    wrong invite code); `code` names it for the API."""

    def __init__(self, message: str, code: str = "team_refused", status: int = 409):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


class QueueUnreachable(PalimpsestError):
    """Work that a worker must do could not be put on the queue (Redis away): nothing will run
    it; the message says what was recorded and what to do. With `keeps_record`, the action's
    transaction commits what it recorded of the failure before the error goes up
    (`server.db.transaction`)."""

    def __init__(self, message: str, code: str = "queue_unreachable", *, keeps_record=False):
        super().__init__(message)
        self.message = message
        self.code = code
        self.keeps_record = keeps_record


class StoreUnreachable(PalimpsestError):
    """The object store (PALIMPSEST_S3_*) did not take or give a file: nothing was recorded; the
    message says which store and what to do."""

    def __init__(self, message: str, code: str = "store_unreachable"):
        super().__init__(message)
        self.message = message
        self.code = code


class DiskFull(PalimpsestError):
    """The server's disk (the data directory, or the database's) is full: nothing was recorded;
    the message says so, for the operator to free space."""

    def __init__(self, message: str = "", code: str = "disk_full"):
        message = message or (
            "the server's disk is full (no space left for the data directory or the database): "
            "nothing was recorded; try again once an operator has freed space"
        )
        super().__init__(message)
        self.message = message
        self.code = code


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is the disk being full: ENOSPC or EDQUOT, SQLite's
    "database or disk is full", PostgreSQL's disk_full (53100)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc)
        if "database or disk is full" in text or "No space left on device" in text:
            return True
        if getattr(exc, "sqlstate", None) == "53100" or getattr(exc, "pgcode", None) == "53100":
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
        seen += 1
    return False


class WrongSplit(SubmissionRefused):
    """A file whose ids are those of another split than its phase's: it names that split and the
    phase to choose."""

    def __init__(self, message: str):
        super().__init__(message)
        self.code = "wrong_split"


class BoardsInvalid(LifecycleRefused):
    """A phase's declared boards that do not hold (422), every problem named by its path."""

    status = 422

    def __init__(self, message: str):
        super().__init__(message, "invalid_boards")
