"""Teams: create one, join one by its invite code, leave it; a team page for its members. With
`?competition=ID` the page and its forms act on the team of that competition; without, on the
account-wide team (the team of every competition where the person has none of their own)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from sqlmodel import select

from server.actions import competitions as comp_actions
from server.actions import reads
from server.actions import teams as team_actions
from server.db import db
from server.domain import people, submissions, teams
from server.domain.visibility import viewer_of
from server.exceptions import TeamRefused
from server.models import Competition, Phase, Submission
from server.web.auth import current_user, login_required
from server.web.pages import primary_scores

bp = Blueprint("teams", __name__, url_prefix="/team")


def _scope() -> Competition | None:
    slug = request.values.get("competition") or None
    if slug is None:
        return None
    s = db()
    c = s.exec(select(Competition).where(Competition.slug == slug)).first()
    if c is None or (c.state == "draft" and not comp_actions.may_see_draft(s, current_user(), c)):
        abort(404)
    return c


def _here(c: Competition | None):
    return url_for("teams.mine", competition=c.slug) if c is not None else url_for("teams.mine")


@bp.route("/")
@login_required
def mine():
    u = current_user()
    s = db()
    c = _scope()
    team = teams.team_for(s, u, c)
    own = people.membership(s, u, None if c is None else c.id)
    pending = own is not None and own.status == "pending"
    members, subs, phases, waiting = [], [], {}, []
    captain = own is not None and own.role == "captain" and own.status == "active"
    if team is not None:
        rows = reads.team_roster(s, team)
        members = [(m, x) for m, x in rows if m.status == "active"]
        waiting = [(m, x) for m, x in rows if m.status == "pending"]
        subs = s.exec(submissions.team_runs([team.id]).order_by(Submission.id.desc())).all()
        phases = {p.id: p for p in s.exec(select(Phase)).all()}
    return render_template(
        "teams/mine.html",
        team=team,
        members=members,
        waiting=waiting,
        captain=captain,
        pending=pending,
        subs=subs,
        phases=phases,
        # each run's primary score as "My submissions" shows it (what the viewer may see)
        primary=primary_scores(subs, phases, lambda task_id: viewer_of(u, s, task_id)),
        competition=c,
    )


def _do(fn, done):
    """Run a team action (server.domain.teams); flash what happened or why not."""
    c = _scope()
    try:
        out = fn(c)
    except TeamRefused as e:
        flash(e.message, "error")
        return redirect(_here(c))
    flash(done(out), "ok")
    return redirect(_here(c))


@bp.route("/create", methods=["POST"])
@login_required
def create():
    return _do(
        lambda c: team_actions.create_team(
            s=db(), user=current_user(), name=request.form.get("name", ""), competition=c
        ),
        lambda t: f"Team {t.name} created. Share its invite code with your teammates.",
    )


@bp.route("/join", methods=["POST"])
@login_required
def join():
    return _do(
        lambda c: team_actions.join_team(
            s=db(),
            user=current_user(),
            invite_code=request.form.get("invite_code", ""),
            competition=c,
        ),
        lambda t: f"You joined {t.name}.",
    )


@bp.route("/leave", methods=["POST"])
@login_required
def leave():
    return _do(
        lambda c: team_actions.leave_team(s=db(), user=current_user(), competition=c),
        lambda _: "You left the team. Its submissions stay with it.",
    )


@bp.route("/invite/rotate", methods=["POST"])
@login_required
def rotate_invite():
    return _do(
        lambda c: team_actions.rotate_invite(s=db(), user=current_user(), competition=c),
        lambda _: "A new invite code replaces the old one.",
    )


@bp.route("/members/<int:user_id>", methods=["POST"])
@login_required
def decide(user_id: int):
    approve = request.form.get("approve", "1") == "1"

    def go(c):
        if c is None:
            abort(404)
        return team_actions.decide_member(
            s=db(), captain=current_user(), competition=c, user_id=user_id, approve=approve
        )

    return _do(go, lambda _: "Approved." if approve else "Turned away.")
