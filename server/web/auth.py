"""Accounts, sessions, teams, API tokens and who may see what.

Pages authenticate by the session cookie; `/api/` authenticates ONLY by an
`Authorization: Bearer <token>` header and never by a cookie, so that a page
another site makes a browser load cannot act through the API.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta
from urllib.parse import unquote, urlsplit

from flask import (
    Blueprint,
    abort,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlmodel import select

from server.actions import accounts as account_actions
from server.actions import common as action_common
from server.actions import signup as signup_actions
from server.db import db
from server.domain import people
from server.domain.accounts import (
    MIN_PASSWORD,
    dummy_hash,
    pw_stamp,
    reset_link,
    user_for_reset_token,
    user_for_token,
    verify_password,
)
from server.domain.emails import BadEmail, is_email, lookup_form, normalize_email
from server.exceptions import Forbidden, NotFound, UploadFieldsInvalid
from server.jobs.mail import send_in_background
from server.models import ApiToken, User
from server.settings import get_settings
from server.statuses import status_of

bp = Blueprint("auth", __name__, url_prefix="/auth")


# --------------------------------------------------------------------------- primitives


# --------------------------------------------------------------------------- request context


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
            # a sign-out, a password change or "sign out everywhere" raises the epoch: every cookie
            # signed before it stops working, a copied one too
            if user is not None and (
                session.get("pw") != pw_stamp(user)
                or session.get("ep") != (user.session_epoch or 0)
            ):
                user = None
    g.user = user
    return user


def login_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        if current_user() is None:
            if is_api_request():
                abort(401)
            return redirect(
                url_for(
                    "auth.login", next=request.full_path if request.query_string else request.path
                )
            )
        return view(*args, **kwargs)

    return wrapped


_NAMED = {  # a view's URL argument -> what the one organizer check is told it names
    "task_id": "task_id",
    "phase_id": "phase_id",
    "submission_id": "submission_id",
    "campaign_id": "campaign_id",
    "competition_id": "slug",
    "competition": "slug",
}


def organizer_required(view):
    """A signed-in organizer of the competition the URL names (its task, phase, submission,
    campaign or competition), or of any competition for a view that names none (it filters what
    it shows by `server.domain.people.organized_tasks`); site administrators pass everywhere.
    The check is `server.actions.common.require_organizer`'s; this translates its answers (404
    for what is not shown to exist, 403 for what the person may not do)."""

    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        u = current_user()
        if u is None:
            if is_api_request():
                abort(401)
            return redirect(url_for("auth.login", next=request.path))
        named = {_NAMED[k]: v for k, v in kwargs.items() if k in _NAMED}
        try:
            action_common.require_organizer(u, db(), **named)
        except NotFound:
            abort(404)
        except Forbidden:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def admin_required(view):
    """A signed-in site administrator."""

    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        u = current_user()
        if u is None:
            if is_api_request():
                abort(401)
            return redirect(url_for("auth.login", next=request.path))
        if not u.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


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


# Links mailed or printed for a password reset or to finish a registration: signed with the secret
# key, expiring after reset_minutes. A reset link names the user and a fingerprint of the password
# hash, so it is single-use: setting the password changes the hash and so kills the link.


def _link_base() -> str:
    # never the request's Host header, which is the visitor's to choose: a reset link built from
    # it could point at another site. Settings.check() refuses mail without a base URL, and
    # `palimpsest serve` sets it to the address it binds.
    return get_settings().base_url


def _max_age() -> int:
    return int(get_settings().reset_minutes) * 60


def _mail(to: str, subject: str, body: str) -> None:
    send_in_background(get_settings(), to, subject, body)


def _came_for() -> str | None:
    """The competition a visitor came from (`?competition=` on the register link of its page)."""
    slug = (request.values.get("competition") or "").strip()
    return slug if re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", slug) else None


def _landing(competition: str | None) -> str:
    """The first page after signing up: the competition the person came from, to register for
    it; else the list of competitions (never the team page, before any registration)."""
    if competition:
        return url_for("competitions.show", competition=competition)
    return url_for("pages.index")


@bp.route("/register", methods=["GET", "POST"])
def register():
    mail = get_settings().mail_configured()
    competition = _came_for()
    if request.method == "POST":
        email = lookup_form(request.form.get("email", ""))
        password = request.form.get("password", "")
        problem = None
        try:
            email = normalize_email(email)
        except BadEmail as e:
            problem = str(e)
        if problem is None and not mail and len(password) < MIN_PASSWORD:
            problem = f"the password must have at least {MIN_PASSWORD} characters"
        if problem:
            flash(problem, "error")
            page = render_template(
                "auth/register.html", email=email, mail=mail, competition=competition
            )
            return page, 400
        s = db()
        if mail:
            # the address must be the visitor's: a link to finish registering is mailed to it, or,
            # when it has an account, a note saying so; the answer is the same either way (the
            # API's sign-up is the same action)
            try:
                signup_actions.start(
                    s=s, settings=get_settings(), email=email, competition=competition, via="web"
                )
            except (Forbidden, NotFound) as e:
                flash(str(e), "error")
                page = render_template(
                    "auth/register.html", email=email, mail=mail, competition=competition
                )
                return page, status_of(e)
            minutes = get_settings().reset_minutes
            flash(
                f"We sent a message to {email}: follow its link within {minutes} minutes to "
                "finish.",
                "ok",
            )
            return redirect(url_for("auth.login"))
        # taken: the same answer as for a new account, and no session
        account_actions.register(s=s, email=email, password=password)
        # the same words whether or not the address had an account (an address that had one
        # keeps its password): the page tells no one which addresses are registered
        flash(
            f"Registered {email}: now sign in with the password you chose (an address that was "
            "registered before keeps its old password).",
            "ok",
        )
        # signed in, the person lands on the competition they came from (if any)
        landing = _landing(competition) if competition else None
        return redirect(url_for("auth.login", email=email, next=landing))
    return render_template("auth/register.html", email="", mail=mail, competition=competition)


@bp.route("/register/<token>", methods=["GET", "POST"])
def register_finish(token: str):
    """The link mailed to finish a registration: the address is proven, the password chosen here."""
    try:
        email, competition = signup_actions.read_token(get_settings(), token)
    except UploadFieldsInvalid:
        return render_template(
            "error.html", code=400, message="This link is invalid or has expired: register again."
        ), 400
    s = db()
    if s.exec(select(User).where(User.email == email)).first() is not None:
        flash(f"{email} has an account already: sign in, or reset its password.", "ok")
        return redirect(url_for("auth.login"))
    if request.method == "POST":
        password = request.form.get("password", "")
        if len(password) < MIN_PASSWORD or password != request.form.get("again", password):
            flash(
                f"Choose a password of at least {MIN_PASSWORD} characters, the same twice.", "error"
            )
            return render_template("auth/set_password.html", email=email, finish=True), 400
        user = account_actions.register(s=s, email=email, password=password, via="mail")
        if user is None:  # registered meanwhile
            return redirect(url_for("auth.login"))
        _login(user)
        if competition:
            flash(f"Welcome! Register for {competition} here, then form or join a team.", "ok")
        else:
            flash("Welcome! Choose a competition to take part in.", "ok")
        return redirect(_landing(competition))
    return render_template("auth/set_password.html", email=email, finish=True)


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "POST":
        email = lookup_form(request.form.get("email", ""))
        password = request.form.get("password", "")
        user = db().exec(select(User).where(User.email == email)).first()
        # an unknown email costs one argon2 verification too, so the time tells nothing
        ok = (
            verify_password(user.password_hash if user else dummy_hash(), password)
            and user is not None
        )
        if not ok:
            flash("Wrong email or password.", "error")
            return render_template("auth/login.html", email=email), 401
        _login(user)
        return redirect(_safe_next(request.args.get("next")))
    # the registration form sends the address along, so that it need not be typed twice
    return render_template("auth/login.html", email=request.args.get("email", "")[:320])


@bp.route("/logout", methods=["POST"])
def logout():
    """Sign out: ends this account's sessions everywhere (a copied cookie stops working too)."""
    user = current_user()
    if user is not None:
        account_actions.sign_out(s=db(), user=user)
    session.clear()
    return redirect(url_for("pages.index"))


@bp.route("/reset", methods=["GET", "POST"])
def reset_request():
    mail = get_settings().mail_configured()
    if request.method == "POST":
        email = lookup_form(request.form.get("email", ""))
        user = (
            db().exec(select(User).where(User.email == email)).first() if is_email(email) else None
        )
        minutes = get_settings().reset_minutes
        if user is not None and mail:
            _mail(
                user.email,
                "Reset your Palimpsest password",
                f"To choose a new password for {user.email} on Palimpsest, follow this link within "
                f"{minutes} minutes (it works once):\n\n"
                f"{reset_link(get_settings(), user, _link_base())}\n\n"
                "If you did not ask for this, ignore this message: your password stays as it is.",
            )
        if mail:
            flash(
                f"If {email} has an account, we sent it a link to choose a new password "
                f"(valid {minutes} minutes, once).",
                "ok",
            )
        else:
            flash(
                "This server sends no mail: ask a site administrator for a reset link "
                "(palimpsest users reset-link EMAIL).",
                "ok",
            )
        return redirect(url_for("auth.login"))
    return render_template("auth/reset_request.html", mail=mail)


@bp.route("/reset/<token>", methods=["GET", "POST"])
def reset(token: str):
    """The reset link: shows a form (a mail scanner's GET uses nothing); the POST sets the
    password."""
    s = db()
    user = user_for_reset_token(s, get_settings().secret_key, token, _max_age())
    if user is None:
        return render_template(
            "error.html",
            code=400,
            message="This reset link is invalid, has expired or "
            "was used already: ask for a new one.",
        ), 400
    if request.method == "POST":
        password = request.form.get("password", "")
        if len(password) < MIN_PASSWORD or password != request.form.get("again", password):
            flash(
                f"Choose a password of at least {MIN_PASSWORD} characters, the same twice.", "error"
            )
            return render_template("auth/set_password.html", email=user.email, finish=False), 400
        account_actions.reset_password(s=s, user=user, password=password)
        _login(user)
        flash("Your password is changed; every other session of this account is signed out.", "ok")
        return redirect(url_for("teams.mine"))
    return render_template("auth/set_password.html", email=user.email, finish=False)


@bp.route("/account", methods=["GET"])
@login_required
def account():
    return render_template("auth/account.html", lifetime=get_settings().session_hours)


@bp.route("/password", methods=["POST"])
@login_required
def password():
    """Change the password (the current one is asked); every other session ends, this one goes
    on."""
    s = db()
    user = current_user()
    new = request.form.get("new_password", "")
    try:
        account_actions.change_password(
            s=s,
            user=user,
            current=request.form.get("current_password", ""),
            new=new,
            again=request.form.get("again", new),
        )
    except Forbidden:
        flash("The current password is wrong.", "error")
        return render_template("auth/account.html", lifetime=get_settings().session_hours), 400
    except UploadFieldsInvalid:
        flash(
            f"Choose a new password of at least {MIN_PASSWORD} characters, the same twice.", "error"
        )
        return render_template("auth/account.html", lifetime=get_settings().session_hours), 400
    _login(user)
    flash("Password changed; every other session of this account is signed out.", "ok")
    return redirect(url_for("auth.account"))


@bp.route("/sessions/end", methods=["POST"])
@login_required
def end_my_sessions():
    """Sign out everywhere: every session of this account ends, this one too."""
    s = db()
    account_actions.sign_out_everywhere(s=s, user=current_user())
    session.clear()
    flash("Every session of your account is signed out.", "ok")
    return redirect(url_for("auth.login"))


@bp.route("/users", methods=["GET"])
@admin_required
def users():
    s = db()
    rows = s.exec(select(User).order_by(User.id)).all()
    teams = {u.id: people.team_of(s, u, None) for u in rows}
    return render_template("auth/users.html", users=rows, teams=teams)


@bp.route("/users/<int:user_id>/sign-out", methods=["POST"])
@admin_required
def sign_out_user(user_id: int):
    """A site administrator ends every session of an account (e.g. a stolen cookie)."""
    s = db()
    user = s.get(User, user_id)
    if user is None:
        abort(404)
    account_actions.sign_out_everywhere(s=s, user=user, actor=current_user())
    flash(f"Every session of {user.email} is signed out.", "ok")
    return redirect(url_for("auth.users"))


def _login(user: User) -> None:
    session.clear()
    session["uid"] = user.id
    session["pw"] = pw_stamp(user)
    session["ep"] = user.session_epoch or 0
    session.permanent = True
    g.pop("user", None)


@bp.route("/tokens", methods=["GET", "POST"])
@login_required
def tokens():
    s = db()
    user = current_user()
    plaintext = None
    if request.method == "POST":
        _, plaintext = account_actions.new_token(s=s, user=user, name=request.form.get("name", ""))
    rows = s.exec(
        select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id.desc())
    ).all()
    return render_template("auth/tokens.html", tokens=rows, plaintext=plaintext)


@bp.route("/tokens/<int:token_id>/revoke", methods=["POST"])
@login_required
def revoke_token(token_id: int):
    try:
        tok = account_actions.revoke_token(s=db(), user=current_user(), token_id=token_id)
    except NotFound:
        abort(404)
    flash(f"Token {tok.prefix}… revoked.", "ok")
    return redirect(url_for("auth.tokens"))


def init_app(app) -> None:
    app.config["PERMANENT_SESSION_LIFETIME"] = timedelta(
        hours=app.extensions["palimpsest.settings"].session_hours
    )

    @app.context_processor
    def _inject():
        u = current_user()
        return {
            "current_user": u,
            "now": datetime.utcnow,
            # whether to show the organizer link: asked only when a page renders the menu
            "organizes_anything": lambda: u is not None and people.organizes_anything(db(), u),
        }
