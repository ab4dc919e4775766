"""One exception type per failure a user can cause; each message says what was expected."""

from __future__ import annotations

from dataclasses import dataclass

# Defined with the tasks (which must not import the scorer); the same classes under either name.
from tasks.errors import (  # noqa: F401
    PalimpsestError,
    ReleaseError,
    SplitNotAvailable,
    TaskNotFound,
    TaskNotImported,
)

ECHO_CHARS = 80  # at most this much of a value from the file is echoed in a message
MESSAGE_CHARS = 400


def cut(s: str, n: int = ECHO_CHARS) -> str:
    """`s`, or its first characters and "…" when longer than `n`: a report never echoes a file
    without bound."""
    return s if len(s) <= n else s[: n - 1] + "…"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a submission, located by line and id where it can be. The id and
    the message are cut to bounded lengths (an id is the file's, of any length)."""

    message: str
    line: int | None = None
    id: str | None = None

    def __post_init__(self):
        if self.id is not None:
            object.__setattr__(self, "id", cut(str(self.id)))
        if len(self.message) > MESSAGE_CHARS:
            object.__setattr__(self, "message", cut(self.message, MESSAGE_CHARS))

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.id is not None:
            where.append(f"id {self.id!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def to_dict(self) -> dict:
        return {"line": self.line, "id": self.id, "message": self.message}


class SubmissionInvalid(PalimpsestError):
    """A submission with one or more problems; carries all of them."""

    def __init__(self, problems: list[Problem], total: int | None = None):
        self.problems = list(problems)
        self.total = total if total is not None else len(self.problems)
        super().__init__(self.summary())

    def summary(self, cap: int = 50) -> str:
        lines = [str(p) for p in self.problems[:cap]]
        rest = self.total - min(cap, len(self.problems))
        if rest > 0:
            lines.append(f"... and {rest} more problem{'s' if rest != 1 else ''}")
        head = f"{self.total} problem{'s' if self.total != 1 else ''} in the submission"
        return head + ":\n" + "\n".join("  " + x for x in lines)

    def to_list(self) -> list[dict]:
        return [p.to_dict() for p in self.problems]


class Problems:
    """Collects problems up to a cap, counting the rest, then raises once with all of them.

    A problem about the whole file (`whole=True`: ids missing from it, a file that covers
    nothing) is listed first and never crowded out by line problems: the located ones give way
    to it within the cap, and `total` counts every problem, listed or not.
    """

    def __init__(self, cap: int = 200, stop_after: int = 1000):
        self.cap = cap
        self.stop_after = stop_after  # line problems; then reading stops (bounded work per file)
        self.items: list[Problem] = []
        self.whole: list[Problem] = []
        self.total = 0

    def add(
        self, message: str, line: int | None = None, id: str | None = None, *, whole: bool = False
    ) -> None:
        self.total += 1
        if whole:
            self.whole.append(Problem(message, line, id))
            return
        if len(self.items) < self.cap:
            self.items.append(Problem(message, line, id))
        if line is not None and self.total >= self.stop_after:
            # a file that is wrong on every line costs no more than its first `stop_after` lines
            self.whole.append(
                Problem(
                    f"validation stopped at line {line} after {self.total} problems; the "
                    "rest of the file was not checked"
                )
            )
            raise SubmissionInvalid(self.listed(), self.total)

    def count_unlisted(self, n: int) -> None:
        """Count `n` more problems of a kind already listed, without listing them."""
        self.total += max(n, 0)

    def listed(self) -> list[Problem]:
        whole = self.whole[: self.cap]
        return whole + self.items[: max(self.cap - len(whole), 0)]

    def __bool__(self) -> bool:
        return self.total > 0

    def raise_if_any(self) -> None:
        if self.total:
            raise SubmissionInvalid(self.listed(), self.total)
