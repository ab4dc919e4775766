"""Downloads: what of a task a person may download now, by the one rule of
`server.domain.download_rule` (the web's zips, the API's download and so the CLI's). One
transaction: the registration a first download makes in an open competition is kept with it."""

from __future__ import annotations

from sqlmodel import Session

from server.actions.common import action
from server.domain import download_rule
from server.models import User


@action
def released(*, s: Session, user: User | None, task, home, area: str | None = None):
    """(given, withheld): the areas `user` may download now (`area`, or every released one) and
    those withheld until their date; raises `download_rule.DownloadRefused` (404, 403, 409)."""
    return download_rule.downloadable(s, user, task, home, area)
