"""Signing up without a browser (the API's `/signup`, the CLI's `palimpsest signup`), with the
checks of the web's registration: the address must be its owner's (a token is mailed to it; the
answer is the same whether it has an account or not), the same throttling, and, for a competition
the person comes for, its allowed domains. Finishing with the mailed token and a password makes
the account and an API token, so a team needs the site's pages at no step.

The token is the web's registration link's (`/auth/register/<token>`): either finishes it. It
carries the competition the person came from, where the web's first page then leads."""

from __future__ import annotations

from itsdangerous import BadData
from sqlmodel import Session, select

from server.actions import accounts as account_actions
from server.actions.common import action
from server.db import after_commit
from server.domain import people
from server.domain.accounts import create_token, reset_link, signer
from server.domain.emails import BadEmail, normalize_email
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs.mail import send_in_background
from server.models import Competition, User

PURPOSE = "register"  # the web's registration link signs with the same purpose


def _competition(s: Session, slug: str | None) -> Competition | None:
    if not slug:
        return None
    c = s.exec(select(Competition).where(Competition.slug == slug)).first()
    if c is None or c.state != "visible":
        raise NotFound(f"no competition {slug!r}", "unknown_competition")
    return c


def token_for(settings, email: str, competition: str | None) -> str:
    """The signed registration token of an address (and the competition it came for)."""
    data = {"e": email}
    if competition:
        data["c"] = competition
    return signer(settings.secret_key, PURPOSE).dumps(data)


def read_token(settings, token: str) -> tuple[str, str | None]:
    """(address, competition) of a registration token; UploadFieldsInvalid when it is forged or
    has expired."""
    try:
        data = signer(settings.secret_key, PURPOSE).loads(
            token.strip(), max_age=int(settings.reset_minutes) * 60
        )
        return data["e"], data.get("c")
    except (BadData, KeyError, TypeError, AttributeError):
        raise UploadFieldsInvalid(
            {"token": "invalid or expired: sign up again (`palimpsest signup EMAIL`)"}
        ) from None


@action
def start(
    *, s: Session, settings, email: str, competition: str | None = None, via: str = "api"
) -> str:
    """Mail the address a token to finish signing up (or, when it has an account, a note saying
    so with a reset link); the answer is the same either way. Refused: a malformed address, a
    site that sends no mail (no proof the address is the person's), an address outside the
    competition's allowed domains. Returns the (normalised) address."""
    try:
        email = normalize_email(email)
    except BadEmail as e:
        raise UploadFieldsInvalid({"email": str(e)}) from None
    if not settings.mail_configured():
        raise LifecycleRefused(
            "this site sends no mail, so it cannot confirm an address: register on its page "
            "(/auth/register) or ask an administrator for an account",
            "no_mail",
        )
    c = _competition(s, competition)
    if c is not None and not people.domain_allowed(c, email):
        raise Forbidden(
            f"{c.slug} is open to addresses at {', '.join(c.allowed_domains)} only",
            "domain_not_allowed",
        )
    base = settings.base_url
    minutes = settings.reset_minutes
    user = s.exec(select(User).where(User.email == email)).first()
    if user is None:
        token = token_for(settings, email, c.slug if c else None)
        subject = "Finish registering on Palimpsest"
        body = (
            f"To finish registering {email} on Palimpsest, choose a password here within "
            f"{minutes} minutes:\n\n{base}/auth/register/{token}\n\n"
            "or from the command line:\n\n"
            f"palimpsest signup --server {base} --finish {token}\n\n"
            "If you did not ask for this, ignore this message."
        )
    else:
        subject = "Your Palimpsest account"
        body = (
            f"Someone asked to register {email} on Palimpsest, which has an account already. "
            f"Sign in at {base}/auth/login, or set a new password within {minutes} minutes "
            f"here:\n\n{reset_link(settings, user, base)}\n\n"
            "If you did not ask for this, ignore this message."
        )
    after_commit(s, lambda: send_in_background(settings, email, subject, body))
    return email


@action
def finish(*, s: Session, settings, token: str, password: str) -> tuple[User, str, str | None]:
    """Make the account of a mailed token with this password, and an API token for it: (user,
    plaintext token, the competition the person came for). Refused: a forged or expired token, a
    short password, an address that has an account already (409)."""
    email, competition = read_token(settings, token)
    user = account_actions.register(s=s, email=email, password=password, via="api")
    if user is None:
        raise LifecycleRefused(
            f"{email} has an account already: sign in, or reset its password", "email_taken"
        )
    _, plaintext = create_token(s, user=user, name="signup")
    return user, plaintext, competition
