"""Teams: create one, join one by its invite code, leave it; a team page for its members."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from sqlmodel import select

from server import teams
from server.auth import current_user, login_required
from server.db import db
from server.exceptions import TeamRefused
from server.models import Phase, Submission, Team, User

bp = Blueprint("teams", __name__, url_prefix="/team")


@bp.route("/")
@login_required
def mine():
    u = current_user()
    s = db()
    team = s.get(Team, u.team_id) if u.team_id else None
    members, subs, phases = [], [], {}
    if team is not None:
        members = s.exec(select(User).where(User.team_id == team.id).order_by(User.id)).all()
        subs = s.exec(
            select(Submission).where(Submission.team_id == team.id).order_by(Submission.id.desc())
        ).all()
        phases = {p.id: p for p in s.exec(select(Phase)).all()}
    return render_template("teams/mine.html", team=team, members=members, subs=subs, phases=phases)


def _do(fn, done):
    """Run a team action (server.teams); flash what happened or why not."""
    try:
        out = fn()
    except TeamRefused as e:
        db().rollback()
        flash(e.message, "error")
        return redirect(url_for("teams.mine"))
    flash(done(out), "ok")
    return redirect(url_for("teams.mine"))


@bp.route("/create", methods=["POST"])
@login_required
def create():
    return _do(
        lambda: teams.create_team(db(), current_user(), request.form.get("name", "")),
        lambda t: f"Team {t.name} created. Share its invite code with your teammates.",
    )


@bp.route("/join", methods=["POST"])
@login_required
def join():
    return _do(
        lambda: teams.join_team(db(), current_user(), request.form.get("invite_code", "")),
        lambda t: f"You joined {t.name}.",
    )


@bp.route("/leave", methods=["POST"])
@login_required
def leave():
    return _do(
        lambda: teams.leave_team(db(), current_user()),
        lambda _: "You left the team. Its submissions stay with it.",
    )


@bp.route("/invite/rotate", methods=["POST"])
@login_required
def rotate_invite():
    return _do(
        lambda: teams.rotate_invite(db(), current_user()),
        lambda _: "A new invite code replaces the old one.",
    )
