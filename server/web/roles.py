"""The people of a competition (its owners invite and remove them; its organizers read who is
who) and the page of an invitation link, where the invited person accepts it. Everything goes
through server.actions.roles."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from server.actions import roles as role_actions
from server.db import db
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.web.auth import current_user, login_required, organizer_required
from server.web.forms import InviteForm

bp = Blueprint("roles", __name__)


def _people_page(competition: str, form: InviteForm, code: int = 200, made=None):
    roles = role_actions.list_roles(s=db(), actor=current_user(), competition=competition)
    return render_template(
        "competitions/people.html",
        r=roles,
        form=form,
        made=made,
        field_errors=any(f.errors for f in form),
    ), code


@bp.route("/competitions/<competition>/people", methods=["GET", "POST"])
@organizer_required
def people(competition: str):
    """Who has which role, the pending invitations and (owners) the invitation form."""
    if request.method != "POST":
        return _people_page(competition, InviteForm(formdata=None))
    role_actions.require_owner(s=db(), actor=current_user(), competition=competition)
    form = InviteForm()
    if not form.validate():
        return _people_page(competition, form, 400)
    s = db()
    try:
        made = role_actions.invite(
            s=s,
            actor=current_user(),
            competition=competition,
            email=form.email.data,
            role=form.role.data,
            via="web",
        )
    except (UploadFieldsInvalid, LifecycleRefused) as e:
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _people_page(competition, form, 400)
    flash(f"{made.message[:1].upper()}{made.message[1:]}.", "ok")
    if made.link:  # shown once, for the owner to hand over
        return _people_page(competition, InviteForm(formdata=None), made=made)
    return redirect(url_for("roles.people", competition=competition))


@bp.route("/competitions/<competition>/people/revoke", methods=["POST"])
@organizer_required
def revoke(competition: str):
    """Take a role away (or cancel an invitation): `who` is an account's id or an email."""
    s = db()
    try:
        done = role_actions.revoke(
            s=s,
            actor=current_user(),
            competition=competition,
            user_or_email=(request.form.get("who") or "")[:320],
            via="web",
        )
    except (LifecycleRefused, NotFound) as e:
        flash(f"Refused. {e.message[:1].upper()}{e.message[1:]}.", "error")
        return redirect(url_for("roles.people", competition=competition))
    said = f"{done.email} is no longer {done.role}" if done.role else f"{done.email}: "
    if done.invites_cancelled:
        said += f"{', ' if done.role else ''}{done.invites_cancelled} invitation(s) cancelled"
    flash(f"{said}.", "ok")
    return redirect(url_for("roles.people", competition=competition))


@bp.route("/invites/<token>", methods=["GET", "POST"])
@login_required
def invite(token: str):
    """An invitation link: its competition and role, and an Accept button (a mail scanner's GET
    changes nothing)."""
    s = db()
    user = current_user()
    try:
        shown = role_actions.show_invite(s=s, user=user, token=token)
        if request.method == "POST":
            done = role_actions.accept(s=s, user=user, token=token, via="web")
            flash(f"You are now {done.role} of {done.title}.", "ok")
            return redirect(url_for("competitions.show", competition=done.competition))
    except (NotFound, LifecycleRefused, Forbidden) as e:
        code = 404 if isinstance(e, NotFound) else 403 if isinstance(e, Forbidden) else 409
        return render_template(
            "error.html", code=code, message=f"{e.message[:1].upper()}{e.message[1:]}."
        ), code
    return render_template("competitions/invite.html", i=shown, token=token)
