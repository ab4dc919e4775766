"""The request guard: every request's path integers, query string, form and JSON body checked
with server.domain.bounds before any view runs (before CSRF and sign-in: they read these
fields)."""

from __future__ import annotations

from flask import render_template, request

from server.domain.bounds import DIGITS, BadInput, check_int, check_text


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
