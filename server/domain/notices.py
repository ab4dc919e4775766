"""A run's notice: when a run is scored or fails, its submitter is mailed if they asked for it
(`Registration.mail_runs` in the task's competition), through the mail queue (server.jobs.outbox).

Called by the scoring job after the lifecycle transition; it never breaks scoring: every failure
is logged and swallowed. One notice per (submission, attempt, status): a job run twice queues it
once (the queue's dedup key)."""

from __future__ import annotations

import logging

from sqlalchemy import and_, bindparam
from sqlalchemy import select as sql_select
from sqlmodel import Session, select

from server.domain import code_runs, mail, people
from server.domain.submissions import visible_scores
from server.models import CodeRun, CompetitionTask, Phase, Registration, Submission, User
from server.settings import Settings
from tasks import get_task

log = logging.getLogger(__name__)

KIND = "run"
PROBLEMS = 5  # the first problems of a failed run the notice quotes


def _link_base(settings: Settings) -> str:
    return (settings.base_url or "http://127.0.0.1:5000").rstrip("/")


def _problem_line(p) -> str:
    if isinstance(p, dict):
        where = f"line {p['line']}: " if p.get("line") not in (None, "") else ""
        return f"- {where}{p.get('message', '')}"[:500]
    return f"- {p}"[:500]


def compose(s: Session, settings: Settings, sub: Submission) -> tuple[str, str]:
    """The notice's subject and body: the status, the primary score the team may see (a scored
    run) or the first problems (a failed one), and the submission's address."""
    phase = s.get(Phase, sub.phase_id)
    gated = code_runs.gating_run(s, sub.id)
    if gated is not None:  # a blind run's output: the team's view of the run, nothing else
        return _compose_gated(s, settings, gated, phase)
    url = f"{_link_base(settings)}/submissions/{sub.id}"
    where = f"{sub.task_id}, phase {phase.name if phase else sub.phase_id}"
    lines = [f"Your run {sub.id} ({where}) is {sub.status}."]
    if sub.status == "scored":
        scores = [sc for sc in visible_scores(s, sub, phase, organizer=False)]
        shown = [sc for sc in scores if sc.primary_value is not None]
        if shown and phase is not None and phase.release_rule and phase.published_at is None:
            # the phase's release rule: the board shows the team's score as it releases it
            lines.append("Its public score is shown on the leaderboard as the phase releases it.")
        elif shown:
            try:  # the metric named, as the board names it (the task's primary)
                subset, metric = get_task(sub.task_id).primary
                named = f"{metric}" + (f" on {subset}" if subset not in ("", "all") else "")
            except Exception:  # noqa: BLE001 - a notice never breaks scoring
                named = ""
            for sc in shown:
                what = f", {named}" if named else ""
                lines.append(f"Primary score ({sc.part}{what}): {sc.primary_value:.4f}")
        else:
            lines.append("Its scores are shown once the organizers publish them.")
    else:
        problems = list(sub.errors or [])
        if sub.failure_kind == "infra":
            lines.append("The server could not score it (this costs your team nothing).")
        if problems:
            lines.append("")
            lines.append("The first problems:" if len(problems) > 1 else "The problem:")
            lines += [_problem_line(p) for p in problems[:PROBLEMS]]
            if len(problems) > PROBLEMS:
                lines.append(f"... and {len(problems) - PROBLEMS} more on its page.")
    lines += ["", f"Details: {url}"]
    subject = f"Run {sub.id} {sub.status} ({sub.task_id})"
    return subject, "\n".join(lines + _footer(settings)) + "\n"


def _footer(settings: Settings) -> list[str]:
    return [
        "",
        "You receive this because you asked for a notice of each run; turn it off under "
        f'"Mail" on the competition\'s page, or send PUT {_link_base(settings)}/api/v1/'
        'competitions/<id>/mail {"runs": false}.',
    ]


def _compose_gated(s: Session, settings: Settings, run: CodeRun, phase: Phase) -> tuple[str, str]:
    """A blind run's notice: `code_runs.team_view` once its result is shown (it is sent then,
    `notice_time`), its address; never the submission's status, problems or times."""
    view = code_runs.team_view(s, run, phase, settings, now=code_runs.shown_from(run, settings))
    lines = [f"Your code run {run.id} ({run.task_id}, phase {phase.name}): {view['state']}."]
    for part, got in sorted((view["scores"] or {}).items()):
        prim = got.get("primary") or {}
        if prim.get("value") is not None:
            lines.append(f"Primary score ({part}): {prim['value']:.4f}")
    lines += ["", f"Details: {_link_base(settings)}/runs/{run.id}"]
    subject = f"Code run {run.id}: {view['state']} ({run.task_id})"
    return subject, "\n".join(lines + _footer(settings)) + "\n"


def run_notice_wanted(s: Session, submission_id: int) -> bool:
    """Whether the run's submitter may want its notice: registered, approved and asking for runs'
    notices in the competition of its task (a baseline's never). One statement, which most runs
    end at; `queue_run_notice` decides the rest (it is never True where this is False)."""
    return s.execute(_WANTED, {"sid": submission_id}).first() is not None


# the submitter's registration that asks for runs' notices, in the competition of the run's task
_WANTED = (
    sql_select(Registration.id)
    .join(CompetitionTask, CompetitionTask.competition_id == Registration.competition_id)
    .join(
        Submission,
        and_(
            Submission.task_id == CompetitionTask.task_id,
            Submission.user_id == Registration.user_id,
        ),
    )
    .where(
        Submission.id == bindparam("sid"),
        Submission.is_baseline.is_(False),
        Registration.mail_runs.is_(True),
        Registration.status == people.APPROVED,
    )
    .limit(1)
)


def queue_run_notice(s: Session, settings: Settings, submission_id: int) -> bool:
    """Queue the notice of a finished run in `s` (not committed) if its submitter asked for one;
    True when a message was queued."""
    sub = s.get(Submission, submission_id)
    if sub is None or sub.status not in ("scored", "failed") or sub.user_id is None:
        return False
    if sub.is_baseline:
        return False
    c = people.competition_of_task(s, sub.task_id)
    if c is None:
        return False
    reg = s.exec(
        select(Registration).where(
            Registration.competition_id == c.id, Registration.user_id == sub.user_id
        )
    ).first()
    if reg is None or not reg.mail_runs or reg.status != people.APPROVED:
        return False
    user = s.get(User, sub.user_id)
    if user is None:
        return False
    subject, body = compose(s, settings, sub)
    gated = code_runs.gating_run(s, sub.id)
    row = mail.queue(
        s,
        to=user.email,
        subject=subject,
        body=body,
        dedup_key=f"run:{sub.id}:{sub.attempts}:{sub.status}",
        kind=KIND,
        competition_id=c.id,
        # a blind run's notice leaves when its result is shown, never when it is known
        not_before=code_runs.shown_from(gated, settings) if gated is not None else None,
    )
    return row is not None
