"""Organizer actions on a phase: close it, freeze or unfreeze its board, show or hide the board,
publish its final ranking, re-run archived systems on its inputs. Each one is written here once;
the surfaces name it by its key in `PHASE_ACTIONS`."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from sqlalchemy import select
from sqlmodel import Session

from server import api_models as m
from server.actions import common
from server.actions.common import action
from server.actions.phase_help import PHASE_ACTION_HELP
from server.domain import code_runs, lifecycle, submissions
from server.domain.accounts import audit
from server.domain.submissions import phase_state
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.jobs.dispatch import jobs
from server.models import CodeRun, Phase, RankingVersion, User
from tasks import get_task


def phase_kind(p: Phase) -> str:
    """'cross-validated' for a phase on its task's cross-validated split, else 'standard'."""
    try:
        return "cross-validated" if get_task(p.task_id).is_cross_validated(p.split) else "standard"
    except Exception:  # noqa: BLE001 - a phase of a task no longer declared
        return "standard"


def phase_fields(p: Phase, quota: dict | None = None) -> dict:
    """A phase as everyone sees it (the fields of `PhaseOut`)."""
    return {
        "name": p.name,
        "split": p.split,
        "kind": phase_kind(p),
        "opens_at": p.opens_at,
        "closes_at": p.closes_at,
        "inputs_at": p.inputs_at,
        "is_open": phase_state(p) == "open",
        "published": p.published_at is not None,
        "limits": {
            "daily": p.daily_limit,
            "total": p.total_limit,
            "concurrent": p.concurrent_limit,
        },
        "quota": quota,
        "accepts": p.accepts,
        "blind": bool(p.blind),
        "boards": board_list(p),
        "release_rule": p.release_rule or "exact",
    }


def board_list(p: Phase) -> list[dict]:
    """Every board of a phase, `main` (the task's primary value, every run) first."""
    task = get_task(p.task_id)
    sub, met = task.primary
    main = {"name": "main", "title": "Main", "ranking": {"subset": sub, "metric": met}}
    return [main, *(p.boards or ())]


def phase_state_fields(p: Phase) -> dict:
    """A phase as organizers see it (the fields of `PhaseState`)."""
    return {
        **phase_fields(p),
        "state": lifecycle.phase_labels(p),
        "frozen": bool(p.frozen),
        "leaderboard_open": bool(p.leaderboard_open),
        "published_at": p.published_at,
        "public_fraction": p.public_fraction,
        "compute_budget_seconds": p.compute_budget_seconds,
    }


def version_fields(rv: RankingVersion) -> dict:
    """A published version of a final ranking (the fields of `VersionOut`)."""
    return {
        "version": rv.version,
        "published_at": rv.published_at,
        "reason": rv.reason,
        "sha256": rv.sha256,
    }


def _result(p: Phase, rv: RankingVersion | None = None) -> m.PhaseActionOut:
    fields = {"phase": m.PhaseState(**phase_state_fields(p))}
    if rv is not None:  # left unset otherwise, so that answers leave it out
        fields["ranking"] = m.VersionOut(**version_fields(rv))
    return m.PhaseActionOut(**fields)


def _change(
    *, s: Session, task_id: str, phase: str, actor: User | None, do: Callable[[Phase], object]
) -> m.PhaseActionOut:
    """Resolve the phase, check the actor, apply one lifecycle change, answer the phase's state."""
    common.require_organizer(actor, s, task_id=common.task(task_id).id)
    p = common.phase(s, task_id, phase)
    do(p)
    return _result(p)


@action
def close_phase(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseActionOut:
    """Close an open phase now: no further submissions are accepted."""
    return _change(
        s=s,
        task_id=task_id,
        phase=phase,
        actor=actor,
        do=lambda p: lifecycle.close(s, p, actor=actor, via=via),
    )


@action
def freeze_board(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseActionOut:
    """Freeze a phase's board: later submissions are not shown to participants."""
    return _change(
        s=s,
        task_id=task_id,
        phase=phase,
        actor=actor,
        do=lambda p: lifecycle.set_frozen(s, p, True, actor=actor, via=via),
    )


@action
def unfreeze_board(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseActionOut:
    """Unfreeze a phase's board."""
    return _change(
        s=s,
        task_id=task_id,
        phase=phase,
        actor=actor,
        do=lambda p: lifecycle.set_frozen(s, p, False, actor=actor, via=via),
    )


@action
def show_board(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseActionOut:
    """Show a phase's board to everyone."""
    return _change(
        s=s,
        task_id=task_id,
        phase=phase,
        actor=actor,
        do=lambda p: lifecycle.set_board_open(s, p, True, actor=actor, via=via),
    )


@action
def hide_board(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseActionOut:
    """Show a phase's board to organizers only."""
    return _change(
        s=s,
        task_id=task_id,
        phase=phase,
        actor=actor,
        do=lambda p: lifecycle.set_board_open(s, p, False, actor=actor, via=via),
    )


@action
def publish_ranking(
    *,
    s: Session,
    task_id: str,
    phase: str,
    actor: User | None,
    settings,
    via: str,
    reason: str = "",
    close_first: bool = False,
) -> m.PhaseActionOut:
    """Publish the final ranking of a closed phase (or a correction, with a reason); with
    `close_first`, an open phase is closed in the same step."""
    from server.domain import publication  # the boards and their statistics (scipy) load here alone

    task = common.task(task_id)
    common.require_organizer(actor, s, task_id=task.id)
    p = common.phase(s, task.id, phase)
    # what publishing records in transactions of its own, before the lock (they would wait for
    # it); then one publication of a phase at a time: a second click waits, then finds the
    # version the first made
    publication.prepare(s, p)
    common.lock_for_change(s, Phase, p.id, f"the {p.name} phase of {task.id}")
    s.refresh(p)
    same = publication.repeated(s, p, task=task, settings=settings, reason=reason)
    if same is not None:
        return _result(p, same)
    rv = publication.publish(
        s,
        p,
        task=task,
        actor=actor,
        settings=settings,
        reason=reason,
        via=via,
        close_first=close_first,
    )
    return _result(p, rv)


def default_split(task, name: str) -> str:
    """The split a new phase is on when none is named: the split it is named after, else the
    task's test split, else its first. One rule for every surface."""
    if name in task.splits:
        return name
    return "test" if "test" in task.splits else task.splits[0]


@action
def create_phase(
    *,
    s: Session,
    task_id: str,
    name: str,
    actor: User | None,
    home,
    via: str,
    split: str | None = None,
    changes: dict | None = None,
) -> m.PhaseState:
    """Create a phase on a split of a task (`default_split` when none is named) with the given
    fields (window, limits, public fraction, ...), in one transaction: a phase refused for any of
    its fields is not created."""
    changes = dict(changes or {})
    task = common.task(task_id)
    common.require_organizer(actor, s, task_id=task.id)
    p = lifecycle.create_phase(
        s,
        task=task,
        name=name,
        split=split or default_split(task, name),
        actor=actor,
        via=via,
        home=home,
        public_fraction=changes.get("public_fraction"),  # None: the split's
    )
    if changes:
        lifecycle.edit_phase(s, p, changes, actor=actor, via=via)
    return m.PhaseState(**phase_state_fields(p))


@action
def edit_phase(
    *, s: Session, task_id: str, phase: str, changes: dict, actor: User | None, via: str
) -> m.PhaseState:
    """Change a phase's window, limits or public fraction (validated by the lifecycle)."""
    common.require_organizer(actor, s, task_id=common.task(task_id).id)
    p = common.phase(s, task_id, phase)
    lifecycle.edit_phase(s, p, changes, actor=actor, via=via)
    return m.PhaseState(**phase_state_fields(p))


@action
def set_phase(
    *, s: Session, task_id: str, phase: str, changes: dict, actor: User | None, home, via: str
) -> m.PhaseState:
    """Create the phase if the task has none of that name (on `default_split`), else edit it: the
    local command line's `phases set`."""
    task = common.task(task_id)
    exists = s.execute(
        select(Phase.id).where(Phase.task_id == task.id, Phase.name == phase)
    ).first()
    if exists is None:
        return create_phase(
            s=s, task_id=task.id, name=phase, actor=actor, home=home, via=via, changes=changes
        )
    return edit_phase(s=s, task_id=task.id, phase=phase, changes=changes, actor=actor, via=via)


@action
def redraw_partition(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str
) -> m.PhaseState:
    """Move a phase that kept its own partition onto its split's shared, stratified one (only
    before its first scored submission)."""
    common.require_organizer(actor, s, task_id=common.task(task_id).id)
    p = common.phase(s, task_id, phase)
    lifecycle.redraw_partition(s, p, actor=actor, via=via)
    return m.PhaseState(**phase_state_fields(p))


MAX_RERUNS = 200  # systems re-run in one action


def _run_ids(runs: str) -> list[int]:
    ids = []
    for part in (runs or "").replace(" ", ",").split(","):
        if not part:
            continue
        if not part.isdigit() or len(part) > 12:
            raise UploadFieldsInvalid({"runs": f"{part[:20]!r} is not a code run's id"})
        ids.append(int(part))
    if not ids:
        raise UploadFieldsInvalid({"runs": "the id of at least one archived system's code run"})
    if len(ids) > MAX_RERUNS:
        raise UploadFieldsInvalid({"runs": f"at most {MAX_RERUNS} systems at once"})
    return list(dict.fromkeys(ids))


@action
def rerun_systems(
    *, s: Session, task_id: str, phase: str, actor: User | None, via: str, settings, runs: str = ""
) -> m.PhaseActionOut:
    """Re-run archived systems on a phase's inputs: each named code run's archive (of this or an
    earlier phase, another version of the task, another task of the same family), run again as a
    code run of this phase through the same sandbox, review and compute budget as any run, its
    output on the phase's board beside the team's own run, marked as a re-run. Refused, whole, for
    a run the actor does not organize, of another family, still waiting, or whose team did not
    consent (`code_runs.consented`)."""
    task = common.task(task_id)
    common.require_organizer(actor, s, task_id=task.id)
    p = common.phase(s, task.id, phase)
    ids = _run_ids(runs)
    roots: dict[int, CodeRun] = {}  # by the first run's id: a system named twice runs once
    for rid in ids:
        r = s.get(CodeRun, rid)
        if r is None:
            raise NotFound(f"no code run {rid}")
        common.require_organizer(actor, s, task_id=r.task_id)
        root = code_runs.rerun_root(s, r)
        try:
            family = get_task(root.task_id).kind
        except Exception:  # noqa: BLE001 - a task no longer declared
            family = None
        if family != task.kind:
            raise LifecycleRefused(
                f"code run {rid} is a system of {root.task_id} ({family or 'no longer declared'}"
                f"), not of the {task.kind} family of {task.id}",
                "other_family",
            )
        if not code_runs.consented(root):
            raise LifecycleRefused(
                f"the team of code run {rid} did not consent to its system being re-run (its "
                f"fact sheet's {code_runs.RERUN_CONSENT!r} is not yes)",
                "no_consent",
            )
        if root.stage not in ("ran", "failed") or not root.storage_key:
            raise LifecycleRefused(
                f"code run {rid} is {root.stage}: re-run a system once it has run", "running"
            )
        roots[root.id] = root
    out = []
    for root in roots.values():
        run, duplicate = code_runs.add_rerun(s, root=root, phase=p, settings=settings)
        if not duplicate:
            audit(s, actor, "run.rerun", f"run:{run.id}", of=root.id, phase=p.name,
                  task=task.id, consent="baseline" if root.is_baseline else
                  f"fact {code_runs.RERUN_CONSENT} of run {root.id}", via=via)  # fmt: skip
            jobs(s, settings).run_code(s, run.id)
        orig_phase = s.get(Phase, root.phase_id)
        out.append(
            m.RerunOut(
                run=run.id,
                of=root.id,
                task=root.task_id,
                phase=orig_phase.name if orig_phase else "",
                team=root.team_id,
                duplicate=duplicate,
            )
        )
    result = _result(p)
    result.reruns = out
    return result


# The phase actions by the name every surface uses (web form `action=`, API path, CLI command), in
# the order and with the help server.actions.phase_help declares them.
PHASE_ACTIONS: dict[str, Callable[..., m.PhaseActionOut]] = {
    "close": close_phase,
    "freeze": freeze_board,
    "unfreeze": unfreeze_board,
    "show-board": show_board,
    "hide-board": hide_board,
    "publish": publish_ranking,
    "rerun": rerun_systems,
}
if list(PHASE_ACTIONS) != list(PHASE_ACTION_HELP):  # a new action is declared in both, or neither
    raise ImportError(
        f"server.actions.phase_help declares {list(PHASE_ACTION_HELP)}, "
        f"PHASE_ACTIONS binds {list(PHASE_ACTIONS)}"
    )


def phase_action_options(name: str, options: dict, settings=None) -> dict:
    """The keyword arguments of phase action `name` from a surface's `options` (its form fields,
    body or flags, as m.PhaseAction declares them): those its own signature declares, and `settings`
    where it takes them. An option given (a true value) that the action does not take is refused
    (UploadFieldsInvalid naming it), never ignored. One reading for the web, the API and the CLI."""
    takes = inspect.signature(PHASE_ACTIONS[name]).parameters
    declared = m.PhaseAction.model_fields
    stray = {  # named as the surfaces name it (the declaration's alias: `close`)
        k: f"the {name} action takes no {getattr(declared.get(k), 'alias', None) or k}"
        for k, v in options.items()
        if v and k not in takes
    }
    if stray:
        raise UploadFieldsInvalid(stray)
    out = {k: v for k, v in options.items() if k in takes}
    if "settings" in takes:
        out["settings"] = settings
    return out


@action
def ensure_phases(*, s: Session, home=None) -> list[Phase]:
    """The default phases of every imported task whose split has none yet (idempotent: the
    start-up's, and a page's or a command's that finds a task without phases)."""
    return submissions.ensure_phases(s, home)
