"""A refusal as a page in the site's layout, with a way back (never bare text)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import render_template, request


def refusal(code: int, message: str, back: str | None = None):
    """The status, the reason and a way back: `back`, else the page of this site the visitor came
    from, else the home page."""
    if back is None:
        ref = urlsplit(request.referrer or "")
        if ref.netloc == request.host and ref.path != request.path:
            back = ref.path + (f"?{ref.query}" if ref.query else "")
    return render_template("error.html", code=code, message=message, back=back), code
