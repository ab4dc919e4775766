"""Teams: create one, join one by its invite code, leave it; a team page for its members."""

from __future__ import annotations

import hmac

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from server.auth import audit, current_user, db, login_required, new_invite_code
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
        subs = s.exec(select(Submission).where(Submission.team_id == team.id)
                      .order_by(Submission.id.desc())).all()
        phases = {p.id: p for p in s.exec(select(Phase)).all()}
    return render_template("teams/mine.html", team=team, members=members, subs=subs, phases=phases)


@bp.route("/create", methods=["POST"])
@login_required
def create():
    u = current_user()
    s = db()
    if u.team_id:
        flash("You are in a team already; leave it first.", "error")
        return redirect(url_for("teams.mine"))
    name = " ".join(request.form.get("name", "").split())
    if not name or len(name) > 120:
        flash("A team name has 1 to 120 characters.", "error")
        return redirect(url_for("teams.mine"))
    from server.baselines import reads_as_baselines

    if reads_as_baselines(name):
        flash("That name is reserved for the organizers' baselines; choose another.", "error")
        return redirect(url_for("teams.mine"))
    team = Team(name=name, invite_code=new_invite_code())
    s.add(team)
    try:
        s.flush()
    except IntegrityError:
        s.rollback()
        flash("That team name is taken.", "error")
        return redirect(url_for("teams.mine"))
    u.team_id = team.id
    s.add(u)
    audit(s, u, "team.create", f"team:{team.id}")
    s.commit()
    flash(f"Team {name} created. Share its invite code with your teammates.", "ok")
    return redirect(url_for("teams.mine"))


@bp.route("/join", methods=["POST"])
@login_required
def join():
    u = current_user()
    s = db()
    if u.team_id:
        flash("You are in a team already; leave it first.", "error")
        return redirect(url_for("teams.mine"))
    code = request.form.get("invite_code", "").strip()
    team = s.exec(select(Team).where(Team.invite_code == code)).first() if code else None
    if team is None or not hmac.compare_digest(team.invite_code, code) or team.is_baseline:
        flash("No team has that invite code.", "error")
        return redirect(url_for("teams.mine"))
    u.team_id = team.id
    s.add(u)
    audit(s, u, "team.join", f"team:{team.id}")
    s.commit()
    flash(f"You joined {team.name}.", "ok")
    return redirect(url_for("teams.mine"))


@bp.route("/leave", methods=["POST"])
@login_required
def leave():
    u = current_user()
    s = db()
    if not u.team_id:
        abort(400)
    tid = u.team_id
    u.team_id = None
    s.add(u)
    audit(s, u, "team.leave", f"team:{tid}")
    s.commit()
    flash("You left the team. Its submissions stay with it.", "ok")
    return redirect(url_for("teams.mine"))


@bp.route("/invite/rotate", methods=["POST"])
@login_required
def rotate_invite():
    u = current_user()
    s = db()
    team = s.get(Team, u.team_id) if u.team_id else None
    if team is None:
        abort(400)
    team.invite_code = new_invite_code()
    s.add(team)
    audit(s, u, "team.invite_rotate", f"team:{team.id}")
    s.commit()
    flash("A new invite code replaces the old one.", "ok")
    return redirect(url_for("teams.mine"))
