"""Account actions: register (at once, or by the link mailed to the address), change or reset a
password, sign out everywhere (oneself, or an account by a site administrator), API tokens (make
one, revoke one). Each is one transaction; the web's account pages and the local command line
call these, and decide only what to show."""

from __future__ import annotations

from sqlmodel import Session, select

from server.actions.common import action
from server.domain.accounts import (
    MIN_PASSWORD,
    EmailTaken,
    audit,
    create_token,
    create_user,
    end_sessions,
    reset_link,
    set_password,
    verify_password,
)
from server.exceptions import Forbidden, NotFound, UploadFieldsInvalid
from server.models import ApiToken, User, utcnow


def _check_new(password: str, again: str | None = None, field: str = "password") -> None:
    if len(password) < MIN_PASSWORD or (again is not None and password != again):
        raise UploadFieldsInvalid(
            {field: f"choose a password of at least {MIN_PASSWORD} characters, the same twice"}
        )


@action
def register(
    *, s: Session, email: str, password: str, via: str = "web", is_admin: bool = False
) -> User | None:
    """A new account with this (normalised) address and password; None when the address has one
    already (it keeps its password: the caller answers the same either way)."""
    _check_new(password)
    try:
        user = create_user(s, email=email, password=password, is_admin=is_admin)
        audit(s, user, "user.register", user.email, **({"via": via} if via != "web" else {}))
    except EmailTaken:
        return None
    return user


@action
def create_account(
    *, s: Session, email: str, password: str, is_admin: bool, actor: User | None, via: str
) -> User:
    """An account made by someone else (the server's shell, a site administrator); raises
    ValueError naming what is wrong (a bad address, a short password, one taken)."""
    user = create_user(s, email=email, password=password, is_admin=is_admin)
    audit(s, actor, "user.create", user.email, organizer=is_admin, via=via)
    return user


@action
def reset_link_for(*, s: Session, settings, user: User, base_url: str | None, via: str) -> str:
    """A single-use password-reset link for an account, audited (for a site that sends no
    mail)."""
    link = reset_link(settings, user, base_url)
    audit(s, None, "user.reset_link", user.email, via=via)
    return link


def account_of(s: Session, email: str) -> User | None:
    """The account of a (normalised) address, if any."""
    return s.exec(select(User).where(User.email == email)).first()


@action
def change_password(
    *, s: Session, user: User, current: str, new: str, again: str | None = None
) -> User:
    """Change a password, the current one given; every other session ends."""
    if not verify_password(user.password_hash, current):
        raise Forbidden("the current password is wrong", "wrong_password")
    _check_new(new, again, "new_password")
    set_password(s, user, new)
    audit(s, user, "user.password_change", user.email)
    return user


@action
def reset_password(*, s: Session, user: User, password: str, again: str | None = None) -> User:
    """A new password through a reset link (the caller checked the link); every session ends."""
    _check_new(password, again)
    set_password(s, user, password)
    audit(s, user, "user.password_reset", user.email)
    return user


@action
def sign_out_everywhere(
    *, s: Session, user: User, actor: User | None = None, via: str = "web"
) -> None:
    """End every session of `user`: by themselves, by a site administrator, or at the server's
    shell (`via` "cli")."""
    end_sessions(s, user)
    if via == "cli":
        audit(s, None, "user.sign_out_everywhere", user.email, via=via)
    elif actor is None or actor.id == user.id:
        audit(s, user, "user.sign_out_everywhere", user.email)
    else:
        audit(s, actor, "user.sign_out_everywhere", user.email, by="organizer")


@action
def sign_out(*, s: Session, user: User) -> None:
    """Sign out: like everywhere, since a copied cookie must stop working too (not audited)."""
    end_sessions(s, user)


@action
def new_token(*, s: Session, user: User, name: str = "") -> tuple[ApiToken, str]:
    """An API token for `user`: the row, and its plaintext (shown once, stored as sha256)."""
    return create_token(s, user=user, name=name)


@action
def revoke_token(*, s: Session, user: User, token_id: int) -> ApiToken:
    """Revoke one of `user`'s tokens (revoking a revoked one changes nothing)."""
    tok = s.get(ApiToken, token_id)
    if tok is None or tok.user_id != user.id:
        raise NotFound(f"no token {token_id} of yours")
    if tok.revoked_at is None:
        tok.revoked_at = utcnow()
        s.add(tok)
    return tok
