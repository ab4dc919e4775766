"""Input bounds checked before any view runs: no request reaches the database with an integer out
of its range or a string holding a NUL or another control character (PostgreSQL refuses both with
an error that would otherwise be a 500). Each refusal is a 4xx naming the field.

The checks themselves, without Flask (the declared models and the actions use them, and a local
command must not load the web framework); server/web/input_guard.py runs them on every request."""

from __future__ import annotations

import re

# PostgreSQL's INTEGER (every id and limit column); SQLite's 64-bit integers hold it too
INT_MAX = 2**31 - 1
# C0 controls but tab, newline and carriage return (which a description may hold), and DEL
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
DIGITS = re.compile(r"[+-]?[0-9]+")
# what a single-line text (a title, a team or method name: each may become a mail header or a line
# of a table) may not hold: every C0 and C1 control (tab, CR, LF and NEL among them), DEL, and the
# Unicode line and paragraph separators
NOT_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line_problem(value: str | None) -> str | None:
    """Why `value` is no single line of text (None: it is one)."""
    m = NOT_ONE_LINE.search(value or "")
    if m is None:
        return None
    return f"a line break or control character (U+{ord(m.group()):04X}) is not allowed here"


def one_line(value: str) -> str:
    """`value` made one line: each run of line breaks, controls and spaces becomes one space."""
    return " ".join(NOT_ONE_LINE.sub(" ", value or "").split())


class BadInput(Exception):
    """A request field out of bounds: `status` 400 (a value) or 404 (an id in the path)."""

    def __init__(self, status: int, field: str, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


def check_text(field: str, value: str) -> None:
    """Refuse a text value holding a control character, naming the field."""
    m = CONTROL.search(value)
    if m:
        raise BadInput(
            400,
            field,
            f"{field}: a control character (U+{ord(m.group()):04X}) is not allowed in this field",
        )


def check_int(field: str, value: int, *, status: int = 400) -> None:
    """Refuse an integer outside what the database holds, naming the field."""
    if not -INT_MAX <= value <= INT_MAX:
        raise BadInput(status, field, f"{field}: {value} is out of range (at most {INT_MAX})")


def url_problem(url: str) -> str | None:
    """Why a run's paper/code URL is refused (the web form and the API ask this alike), or None:
    it is an http(s) address of at most 500 characters, or empty."""
    if not url:
        return None
    if not url.lower().startswith(("https://", "http://")) or len(url) <= len("https://"):
        return "the paper/code URL must start with https:// or http://"
    if len(url) > 500:
        return "the paper/code URL is at most 500 characters"
    if any(c.isspace() for c in url):
        return "the paper/code URL holds no spaces"
    return None
