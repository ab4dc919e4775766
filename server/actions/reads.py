"""The reads that depend on who asks, written once for every surface: the audit entries a person
may read, the organizers' list of runs, a team's members. The web pages and the API call these and
only page and shape what they return, so that both answer the same for each role."""

from __future__ import annotations

from sqlmodel import Session, select

from server.domain import people
from server.models import AuditLog, Submission, Team, TeamMember, User

# the workers' status changes of every submission: in the audit log on demand only
STATUS_CHANGES = "submission.status"


def audit_entries(s: Session, actor: User | None, *, action: str | None = None, everything=False):
    """The audit entries `actor` may read (a query; the caller orders and pages it): an
    administrator's every entry, an organizer's those of the competitions they organize, anyone
    else's none. The workers' status changes are left out unless asked for (`everything`, or by
    their `action`); `action`: that action's entries only."""
    q = select(AuditLog)
    mine = people.organized_competitions(s, actor)  # None: every competition (an administrator)
    if mine is not None:  # an organizer reads the log of their competitions only
        q = q.where(AuditLog.competition_id.in_(sorted(mine)))
    if action:
        q = q.where(AuditLog.action == action)
    elif not everything:
        q = q.where(AuditLog.action != STATUS_CHANGES)
    return q


def audit_actors(s: Session, entries: list[AuditLog]) -> dict[int, str]:
    """The email of each person who made one of `entries` (an account since deleted: none)."""
    ids = sorted({a.actor_id for a in entries if a.actor_id is not None})
    if not ids:
        return {}
    return dict(s.exec(select(User.id, User.email).where(User.id.in_(ids))).all())


def organizer_runs(
    s: Session, actor: User | None, *, task: str | None = None, status: str | None = None
):
    """Every team's runs of the tasks `actor` organizes (every task for an administrator; none
    for anyone else), of `task` and in `status` when given: a query of (submission, team) that
    the caller orders and pages."""
    q = select(Submission, Team).join(Team, Team.id == Submission.team_id)
    mine = people.organized_tasks(s, actor)  # None: every task (an administrator)
    if mine is not None:
        q = q.where(Submission.task_id.in_(sorted(mine)))
    if task:
        q = q.where(Submission.task_id == task)
    if status:
        q = q.where(Submission.status == status)
    return q


def team_roster(s: Session, team: Team) -> list[tuple[TeamMember, User]]:
    """A team's members as its members see them: every membership of the team (active, and
    waiting for the captain's yes) with its person, in the order they joined."""
    return list(
        s.exec(
            select(TeamMember, User)
            .join(User, User.id == TeamMember.user_id)
            .where(TeamMember.team_id == team.id)
            .order_by(TeamMember.id)
        ).all()
    )
