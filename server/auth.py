"""Accounts, sessions, teams, API tokens and who may see what.

Pages authenticate by the session cookie; `/api/` authenticates ONLY by an
`Authorization: Bearer <token>` header and never by a cookie, so that a page
another site makes a browser load cannot act through the API.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from datetime import datetime
from urllib.parse import unquote, urlsplit

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlmodel import Session, select

from server.models import ApiToken, AuditLog, Submission, Team, User, utcnow

bp = Blueprint("auth", __name__, url_prefix="/auth")

_hasher = PasswordHasher()
TOKEN_PREFIX = "pal_"
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
MIN_PASSWORD = 8


# --------------------------------------------------------------------------- primitives

def hash_password(password: str) -> str:
    """An argon2id hash of a password."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True when the password matches the stored hash; never raises for a wrong one."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A new API token: (plaintext shown once, its sha256 to store)."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return plaintext, hash_token(plaintext)


def new_invite_code() -> str:
    return secrets.token_urlsafe(12)


def create_user(s: Session, *, email: str, password: str, is_organizer: bool = False) -> User:
    """A new account; raises ValueError with a message for a bad email, a short password or a taken email."""
    email = email.strip().lower()
    if not EMAIL_RE.match(email):
        raise ValueError("that is not an email address")
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"the password must have at least {MIN_PASSWORD} characters")
    if s.exec(select(User).where(User.email == email)).first():
        raise ValueError("an account with this email exists already")
    u = User(email=email, password_hash=hash_password(password), is_organizer=is_organizer)
    s.add(u)
    s.flush()
    return u


def create_token(s: Session, *, user: User, name: str = "") -> tuple[ApiToken, str]:
    """Store a new token for a user; returns the row and the plaintext (shown once, never stored)."""
    plaintext, digest = new_token()
    tok = ApiToken(user_id=user.id, token_sha256=digest, prefix=plaintext[:10], name=name[:120])
    s.add(tok)
    s.flush()
    return tok, plaintext


def user_for_token(s: Session, plaintext: str) -> User | None:
    """The user a live (unrevoked) token belongs to, or None."""
    digest = hash_token(plaintext)
    tok = s.exec(select(ApiToken).where(ApiToken.token_sha256 == digest)).first()
    if tok is None or tok.revoked_at is not None or not hmac.compare_digest(tok.token_sha256, digest):
        return None
    tok.last_used_at = utcnow()
    s.add(tok)
    s.commit()
    return s.get(User, tok.user_id)


def audit(s: Session, actor: User | None, action: str, target: str = "", **details) -> None:
    """Record an action in the audit log (in the caller's transaction)."""
    s.add(AuditLog(actor_id=actor.id if actor else None, action=action, target=target[:200],
                   details=details or None))


# --------------------------------------------------------------------------- request context

def db() -> Session:
    """The request's database session, closed at teardown."""
    if "db" not in g:
        g.db = Session(current_app.extensions["palimpsest.engine"], expire_on_commit=False)
    return g.db


def close_db(_exc=None) -> None:
    s = g.pop("db", None)
    if s is not None:
        s.close()


def is_api_request() -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def current_user() -> User | None:
    """Who asks: the bearer token on /api (cookies refused there), the session cookie elsewhere."""
    if "user" in g:
        return g.user
    user = None
    if is_api_request():
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            user = user_for_token(db(), token.strip())
    else:
        uid = session.get("uid")
        if isinstance(uid, int):
            user = db().get(User, uid)
            # a password change or logout elsewhere invalidates old cookies
            if user is not None and session.get("pw") != _pw_stamp(user):
                user = None
    g.user = user
    return user


def _pw_stamp(user: User) -> str:
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def login_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        if current_user() is None:
            if is_api_request():
                abort(401)
            return redirect(url_for("auth.login", next=request.full_path if request.query_string else request.path))
        return view(*args, **kwargs)

    return wrapped


def organizer_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        u = current_user()
        if u is None:
            if is_api_request():
                abort(401)
            return redirect(url_for("auth.login", next=request.path))
        if not u.is_organizer:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def can_see_submission(user: User | None, sub: Submission) -> bool:
    """A team sees its own submissions' details; organizers see everything; others nothing."""
    if user is None:
        return False
    if user.is_organizer:
        return True
    return user.team_id is not None and user.team_id == sub.team_id


def safe_next(target: str | None, default: str = "/") -> str:
    """`target` when it is a same-site relative path, else `default`.

    An open redirect would let a phishing page borrow our login. Refused: anything not starting
    with one "/", a scheme or a host, a backslash (browsers read it as "/"), and any control
    character (browsers drop a tab or a newline, so "/\t/evil.com" is "//evil.com"), also when
    they only appear once the path is percent-decoded ("/%09/evil.com")."""
    if not target or not isinstance(target, str) or len(target) > 2000:
        return default
    seen, text = [target], target
    for _ in range(3):  # doubly encoded forms too
        decoded = unquote(text)
        if decoded == text:
            break
        seen.append(decoded)
        text = decoded
    for t in seen:
        if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c in "\\\u2028\u2029" for c in t):
            return default
        if not t.startswith("/") or t.startswith("//"):
            return default
        parts = urlsplit(t)
        if parts.scheme or parts.netloc:
            return default
    return target


def _safe_next(target: str | None) -> str:
    return safe_next(target, url_for("pages.index"))


# --------------------------------------------------------------------------- routes

@bp.route("/register", methods=["GET", "POST"])
def register():
    if request.method == "POST":
        s = db()
        try:
            user = create_user(s, email=request.form.get("email", ""),
                               password=request.form.get("password", ""))
            s.commit()
        except ValueError as e:
            s.rollback()
            flash(str(e), "error")
            return render_template("auth/register.html", email=request.form.get("email", "")), 400
        _login(user)
        flash("Welcome! Create a team or join one with its invite code.", "ok")
        return redirect(url_for("teams.mine"))
    return render_template("auth/register.html", email="")


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "POST":
        email = request.form.get("email", "").strip().lower()
        user = db().exec(select(User).where(User.email == email)).first()
        if user is None or not verify_password(user.password_hash, request.form.get("password", "")):
            flash("Wrong email or password.", "error")
            return render_template("auth/login.html", email=email), 401
        _login(user)
        return redirect(_safe_next(request.args.get("next")))
    return render_template("auth/login.html", email="")


@bp.route("/logout", methods=["POST"])
def logout():
    session.clear()
    return redirect(url_for("pages.index"))


def _login(user: User) -> None:
    session.clear()
    session["uid"] = user.id
    session["pw"] = _pw_stamp(user)
    session.permanent = True


@bp.route("/tokens", methods=["GET", "POST"])
@login_required
def tokens():
    s = db()
    user = current_user()
    plaintext = None
    if request.method == "POST":
        _, plaintext = create_token(s, user=user, name=request.form.get("name", ""))
        s.commit()
    rows = s.exec(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id.desc())).all()
    return render_template("auth/tokens.html", tokens=rows, plaintext=plaintext)


@bp.route("/tokens/<int:token_id>/revoke", methods=["POST"])
@login_required
def revoke_token(token_id: int):
    s = db()
    tok = s.get(ApiToken, token_id)
    if tok is None or tok.user_id != current_user().id:
        abort(404)
    if tok.revoked_at is None:
        tok.revoked_at = utcnow()
        s.add(tok)
        s.commit()
    flash(f"Token {tok.prefix}… revoked.", "ok")
    return redirect(url_for("auth.tokens"))


def init_app(app) -> None:
    app.teardown_appcontext(close_db)

    @app.context_processor
    def _inject():
        return {"current_user": current_user(), "now": datetime.utcnow}
