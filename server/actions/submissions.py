"""Actions on submissions: a team's upload; an organizer's rescore of one run or a selection,
hide, unhide, remove or restore, or move to another track. Each is written here once."""

from __future__ import annotations

from typing import BinaryIO

from pydantic import ValidationError
from sqlmodel import Session, select

from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.boards import stats
from server.db import after_commit
from server.domain import code_runs, facts, lifecycle, people, phase_choice, submissions, tracks
from server.domain.accounts import audit, can_see_submission
from server.domain.baselines import baseline_team
from server.domain.system_archive import LIMITS, runnable
from server.exceptions import (
    DuplicateSubmission,
    EmptyUpload,
    Forbidden,
    LifecycleRefused,
    NotFound,
    UploadFieldsInvalid,
)
from server.jobs.dispatch import jobs
from server.models import CodeRun, Phase, Submission, Team, User
from server.storage import path_for
from tasks.store import TaskStore


@action
def rescore_submission(
    *,
    s: Session,
    submission_id: int,
    actor: User | None,
    settings,
    reason: str = "",
) -> m.Rescored:
    """Queue one scored or failed run for scoring again (handed to the queue once the change is
    committed)."""
    sub = common.submission(s, submission_id)
    common.require_organizer(actor, s, task_id=sub.task_id)
    if sub.removed_at is not None:
        raise LifecycleRefused(f"submission {sub.id} is removed; restore it first", "removed")
    ids = lifecycle.rescore(
        s, [sub], actor=actor, max_attempts=settings.max_attempts, reason=reason
    )
    if not ids:
        raise LifecycleRefused(
            f"submission {sub.id} is {sub.status}: only a scored or failed submission is rescored",
            "not_final",
        )
    jobs(s).rescore(s, ids)
    return m.Rescored(queued=ids, skipped=0)


def rescore_candidates(
    s: Session, task_id: str, actor: User | None, phase: str | None = None
) -> tuple[list[Submission], list[Submission]]:
    """What `rescore_selection` would queue, for its confirmation: the final runs of a task (or
    of one phase), not removed, as (runs, files that failed validation) -- the second queued only
    when asked (they would fail again). The one selection; the web's page counts it."""
    task = common.task(task_id)
    common.require_organizer(actor, s, task_id=task.id)
    p = common.phase(s, task.id, phase) if phase else None
    q = select(Submission).where(
        Submission.task_id == task.id,
        Submission.status.in_(lifecycle.FINAL),
        Submission.removed_at.is_(None),
    )
    if p is not None:
        q = q.where(Submission.phase_id == p.id)
    runs, invalid = [], []
    for x in s.exec(q).all():
        (invalid if x.status == "failed" and x.failure_kind == "invalid" else runs).append(x)
    return runs, invalid


@action
def rescore_selection(
    *,
    s: Session,
    task_id: str,
    actor: User | None,
    settings,
    phase: str | None = None,
    include_invalid: bool = False,
    reason: str = "",
    via: str,
) -> m.Rescored:
    """Queue every final run of a task (or of one phase) for scoring again (`rescore_candidates`);
    a file that failed validation only when asked (it would fail again)."""
    runs, invalid = rescore_candidates(s, task_id, actor, phase)
    subs = runs + invalid if include_invalid else runs
    audit(
        s,
        actor,
        "task.rescore",
        f"task:{common.task(task_id).id}",
        phase=phase or None,
        count=len(subs),
        via=via,
    )
    ids = lifecycle.rescore(s, subs, actor=actor, max_attempts=settings.max_attempts, reason=reason)
    jobs(s).rescore(s, ids)
    return m.Rescored(queued=ids, skipped=0)


@action
def set_visibility(
    *, s: Session, submission_id: int, action: str, actor: User | None, reason: str = ""
) -> Submission:
    """Hide, unhide, remove or restore a run (nothing is deleted for real); hide and remove need
    a reason, which the team is shown. Returns the run, for the surface to show as it shows
    runs."""
    sub = common.submission(s, submission_id)
    common.require_organizer(actor, s, task_id=sub.task_id)
    return lifecycle.set_visibility(s, sub, action, actor=actor, reason=reason)


@action
def move_track(
    *,
    s: Session,
    submission_id: int,
    track: str,
    reason: str,
    actor: User | None,
    settings,
    field: str | None = None,
    via: str = "web",
) -> Submission:
    """An organizer moves a run to another track (the competition's choice field `track`, or
    `field`), with a reason: the run's fact sheet answers the new track, checked against the
    field's choices and rules; audited; every board of the phase is built again (its revision
    goes up, and its statistics are asked for once the change is committed). A team never moves
    its own run: it submits again with the right track."""
    sub = common.submission(s, submission_id)
    common.require_organizer(actor, s, task_id=sub.task_id)
    if sub.removed_at is not None:
        raise LifecycleRefused(f"submission {sub.id} is removed; restore it first", "removed")
    comp = people.competition_of_task(s, sub.task_id)
    fields = [] if comp is None else list(comp.fact_fields or [])
    sub = tracks.move(s, sub, fields, track, actor=actor, reason=reason, key=field or None, via=via)
    phase_id, queues = sub.phase_id, jobs(s, settings)
    # the boards' statistics of the new revision, asked for once the move is committed (where
    # the installation enqueues at all; else the next board page asks)
    after_commit(s, lambda: queues.enabled and stats.enqueue(settings, phase_id))
    return sub


def _own_run(s: Session, submission_id: int, actor: User | None, verb: str) -> Submission:
    """A run of the actor's own team, not deleted; NotFound alike for what does not exist, what
    is another team's to see, and what was removed (ids are not an oracle); Forbidden for an
    organizer who may see it but is not of the team."""
    sub = s.get(Submission, submission_id)
    if (
        actor is None
        or sub is None
        or sub.removed_at is not None
        or not can_see_submission(actor, sub, s)
    ):
        raise NotFound(f"no submission {submission_id} visible to you")
    if people.team_id_for_task(s, actor, sub.task_id) != sub.team_id:
        raise Forbidden(f"only the team that made a submission {verb}", "not_your_team")
    return sub


@action
def choose_primary(
    *,
    s: Session,
    submission_id: int,
    actor: User | None,
    board: str | None = None,
    reason: str | None = None,
) -> Submission:
    """A team makes one of its runs its primary (ranked) run of the phase (the others become
    contrastive), or, with `board`, its ranked run on that declared board of the phase.

    With `reason`, an organizer of the task (or the server's own shell, `actor` None) makes the
    choice for the run's team (a team that asked by mail, whose members cannot sign in): the
    same rule and checks (the board's filter, publication; no score read), the reason kept in
    the audit row beside the organizer."""
    if reason is None:
        sub = _own_run(s, submission_id, actor, "chooses its primary run")
    else:
        sub = common.submission(s, submission_id)
        common.require_organizer(actor, s, task_id=sub.task_id)
        reason = " ".join(reason.split())[:500]
        if not reason:
            raise LifecycleRefused(
                "Say why: an organizer's choice for a team keeps its reason in the audit log",
                "reason_required",
            )
    said = {"reason": reason} if reason else {}
    if board not in (None, "", "main"):
        return lifecycle.set_board_choice(
            s, sub, team_id=sub.team_id, board=board, actor=actor, **said
        )
    return lifecycle.set_primary(s, sub, team_id=sub.team_id, actor=actor, **said)


@action
def set_shown_publicly(
    *, s: Session, submission_id: int, actor: User | None, show: bool
) -> Submission:
    """A team shows one of its runs on the public board, or keeps it to itself (and the
    organizers)."""
    sub = _own_run(s, submission_id, actor, "decides whether it is shown publicly")
    return lifecycle.set_shown_publicly(s, sub, show, actor=actor)


@action
def delete_run(*, s: Session, submission_id: int, actor: User | None) -> Submission:
    """A team deletes one of its runs: it leaves every board and the team's lists at once, is
    kept for the organizers (who may restore it) and still counts against the quota."""
    sub = _own_run(s, submission_id, actor, "deletes it")
    return lifecycle.delete_by_team(s, sub, actor=actor)


def read_upload_fields(form, *, checkboxes: tuple[str, ...] = ()) -> m.UploadFields:
    """The upload's fields from a submitted form (web or API), validated against the one declared
    form; raises `UploadFieldsInvalid` naming every field that is wrong. `checkboxes` names the
    yes/no fields the form shows as checkboxes: a browser posts a checkbox only when it is ticked
    (WTForms' `y`), so there an absent one means no, not the declared default."""
    data = {k: form.get(k) for k in m.UploadFields.model_fields if form.get(k) is not None}
    for k in checkboxes:
        data.setdefault(k, "no")
    data["facts"] = facts.form_facts(form)  # the fact sheet: fields `fact.<key>`
    try:
        return m.UploadFields.model_validate(data)
    except ValidationError as e:
        raise UploadFieldsInvalid(
            {str(err["loc"][0]): err["msg"].removeprefix("Value error, ") for err in e.errors()}
        ) from None


@action
def submit(
    *,
    s: Session,
    user: User | None,
    task_id: str,
    fields: m.UploadFields,
    stream: BinaryIO,
    filename: str,
    settings,
    system: bool = False,
) -> tuple[Submission | CodeRun, bool]:
    """The one intake of every upload: a prediction file, or with `system` a system to run blind
    (a zip with system.yaml), from the web, the API, a large upload's completion or a baseline's
    output. Streamed, never read whole here. In order: who may submit and for which team, the
    phase and what it takes, the fact sheet, an empty upload (before anything is stored), the
    store (undone by a rollback), a system's archive, then under the team's lock the same upload
    already taken (that one answers, counted once) or the phase's limits, the row, the primary
    run if asked, and the job, queued once the transaction has committed. Returns the submission
    (a code run with `system`) and whether it was that earlier one. The phase and team it read
    stay on the session (`UPLOAD_READ` in its info) for the answer, which shows their names
    without reading them again."""
    task = common.task(task_id)
    # a file's team locked as it is read (its runs are counted under that lock: `admit`)
    team = uploader_team(s, user, task.id, baseline=fields.baseline, lock=not system)
    if not TaskStore(task.id, settings.home).exists():
        raise LifecycleRefused(f"task {task.id!r} has no data yet", "not_imported")
    phases = common.phases_of(s, task.id)
    phase = common.phase_or_default(
        s, task.id, fields.phase, accepts="code" if system else "predictions", phases=phases
    )
    _phase_takes(phase, task.id, system=system, baseline=fields.baseline)
    if _empty_stream(stream):
        raise EmptyUpload()
    if not system:  # a file of another split's ids: refused now, naming the phase to choose
        phase_choice.refuse_other_split(task, settings.home, phase, phases, stream, filename or "")
    sheet = fact_sheet(s, task.id, phase, fields)  # every problem named, before anything is stored
    if not system:  # a prediction file: the intake's core (the jobs' own files take it too)
        try:
            sub = submissions.take_file(
                s,
                user=user,
                team=team,
                task_id=task.id,
                phase=phase,
                stream=stream,
                filename=filename,
                settings=settings,
                baseline=bool(fields.baseline),
                dedupe=True,
                facts=sheet or None,
                **fields.row(),
            )
        except DuplicateSubmission as e:  # a retried upload: the same answer, counted once
            return s.get(Submission, e.submission_id), True
        if fields.primary and not fields.baseline:
            lifecycle.set_primary(s, sub, team_id=team.id, actor=user)
        jobs(s, settings).score(s, sub.id, upload=sub.storage_key)
        # held: the session's identity map holds them weakly (the phase as read under the lock)
        s.info[UPLOAD_READ] = (s.get(Phase, sub.phase_id), team)
        return sub, False
    exempt = submissions.exempt_from_limits(
        s, user=user, team=team, task_id=task.id, baseline=bool(fields.baseline)
    )
    stored = submissions.store(s, settings, stream, filename, LIMITS.max_zip_bytes)
    # a system that cannot run is refused before it is counted
    manifest = runnable(path_for(settings.home, stored[0]), run_images=settings.run_images)
    phase, same = submissions.admit(
        s,
        team_id=team.id,
        phase_id=phase.id,
        sha=stored[1],
        exempt=exempt,
        settings=settings,
        system=True,
    )
    if same is not None:  # a retried upload: the same answer, counted once
        return s.get(CodeRun, same), True
    user_id = user.id if user is not None else None
    if code_runs.failed_twice(s, team.id, phase.id, stored[1]) is not None:
        raise LifecycleRefused(
            "the server failed to finish this very system twice in this phase: it is not "
            "run again (change it, or ask the organizers)",
            "failed_twice",
        )
    run = code_runs.add_run(
        s,
        team_id=team.id,
        user_id=user_id,
        phase=phase,
        stored=stored,
        filename=filename,
        manifest=manifest.model_dump(),
        fields=fields.row() | {"primary": fields.primary, "facts": sheet or None},
        is_baseline=bool(fields.baseline or team.is_baseline),
        settings=settings,
        # never run before its inputs' date (the downloads' rule): held, queued, until then
        held=code_runs.held_until(s, phase),
    )
    code_runs.reserve_budget(run, settings)
    audit(s, user, "run.submit", f"run:{task.id}/{phase.name}", sha256=run.archive_sha256,
          size=run.size)  # fmt: skip
    jobs(s, settings).run_code(s, run.id)
    return run, False


# the session's info key of the phase and team the last upload on it read (`submit`)
UPLOAD_READ = "palimpsest.upload_read"


def _phase_takes(phase, task_id: str, *, system: bool, baseline: bool) -> None:
    """Refuse a prediction file where the phase takes systems, and a system where it takes files
    (a baseline goes anywhere)."""
    if baseline:
        return
    if not system and phase.accepts == "code":
        raise LifecycleRefused(
            f"the {phase.name} phase of {task_id} takes systems, run on the server, not "
            f"prediction files: `palimpsest submit {task_id} --code DIR`",
            "code_only",
        )
    if system and phase.accepts == "predictions":
        raise LifecycleRefused(
            f"the {phase.name} phase of {task_id} takes prediction files, not systems", "no_code"
        )


def fact_sheet(s: Session, task_id: str, phase, fields: m.UploadFields) -> dict:
    """An upload's fact sheet (a file's or a system's) checked against the competition's declared
    fields for its phase; raises UploadFieldsInvalid naming every problem."""
    comp = people.competition_of_task(s, task_id)
    return facts.check_facts(
        [] if comp is None else list(comp.fact_fields or []),
        phase.name,
        fields.facts,
        require=not fields.baseline,
    )


def uploader_team(
    s: Session, user: User, task_id: str, *, baseline: bool, lock: bool = False
) -> Team:
    """The team an upload (a file or a system) is for: the baselines team for an organizer's
    baseline entry, else the uploader's team in the task's competition, who must take part.
    `lock`: the uploader's team locked by the read where the database can (`people.team_of`)."""
    if baseline:
        if user is not None and not people.organizes_task(s, user, task_id):
            raise Forbidden("only an organizer may record baseline entries", "not_organizer")
        return baseline_team(s)
    common.require_participant(s, user, task_id)
    c = people.competition_of_task(s, task_id)
    team = people.team_of(s, user, None if c is None else c.id, lock=lock)  # kept: read once
    if team is None:
        opt = f" --competition {c.slug}" if c is not None else ""
        raise Forbidden(
            f"join or create a team before submitting (`palimpsest teams create NAME{opt}` "
            f"or `palimpsest teams join CODE{opt}`)",
            "no_team",
        )
    return team


def _empty_stream(stream: BinaryIO) -> bool:
    """Whether a seekable upload stream holds no byte (it is left at its start)."""
    pos = stream.tell()
    empty = not stream.read(1)
    stream.seek(pos)
    return empty
