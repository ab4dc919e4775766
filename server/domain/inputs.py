"""Input bounds checked before any view runs: no request reaches the database with an integer out
of its range or a string holding a NUL or another control character (PostgreSQL refuses both with
an error that would otherwise be a 500). Each refusal is a 4xx naming the field."""

from __future__ import annotations

import re

from flask import render_template, request

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


def _walk_json(path: str, v) -> None:
    if isinstance(v, bool):
        return
    if isinstance(v, int):
        check_int(path, v)
    elif isinstance(v, str):
        check_text(path, v)
    elif isinstance(v, dict):
        for k, x in v.items():
            check_text(f"{path}.{k}" if path else str(k), str(k))
            _walk_json(f"{path}.{k}" if path else str(k), x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _walk_json(f"{path}[{i}]", x)


def _check_part_name(name) -> None:
    if not name:
        raise BadInput(
            400, "form", "form: a part without a name (Content-Disposition: form-data; name=...)"
        )


def check_request() -> None:
    """Check the path's integers, the query string, the form (file names included) and a JSON body
    of the current request; raises BadInput."""
    for name, v in (request.view_args or {}).items():
        if isinstance(v, int):
            check_int(name, v, status=404)
        elif isinstance(v, str):
            check_text(name, v)
    for name, v in request.args.items(multi=True):
        check_text(name, name)
        check_text(name, v)
        if DIGITS.fullmatch(v.strip()):
            check_int(name, int(v))
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        for name, v in request.form.items(multi=True):
            _check_part_name(name)
            check_text(name, name)
            check_text(name, v)
        for name, f in request.files.items(multi=True):
            _check_part_name(name)
            check_text(f"{name} (file name)", f.filename or "")
        if request.is_json:
            _walk_json("", request.get_json(silent=True))


def init_app(app, is_api_request) -> None:
    """Run `check_request` before every view (before CSRF and sign-in: they read these fields)."""

    def guard():
        try:
            check_request()
        except BadInput as e:
            if is_api_request():
                code = "not_found" if e.status == 404 else "invalid_input"
                return {"error": {"code": code, "message": e.message, "field": e.field}}, e.status
            return render_template("error.html", code=e.status, message=e.message), e.status
        return None

    app.before_request_funcs.setdefault(None, []).insert(0, guard)
