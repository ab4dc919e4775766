"""Leaderboards: one row per team, ranked by the task's primary metric, rendered once per change;
and the published final rankings, served from their immutable snapshots.

Ranking code reads only `task.primary` and `task.greater_is_better` (no per-task cases).
Before a phase's final ranking is published only public-part scores are read at all;
after publication the private ranking is shown with the public one beside it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from sqlalchemy import and_, case, false, func, or_
from sqlmodel import Session, select

from scorer.metrics import COUNT_METRICS, fold_key
from scorer.overall import combine, rule_direction
from scorer.release import Rule, released
from server.boards.board_model import (  # noqa: F401 - the shapes, re-exported
    STATS_FIELDS,
    Board,
    Column,
    Row,
    clean_name,
    json_value,
    stats_summary,
)
from server.domain import code_runs, goldversions, people, shown
from server.domain.lifecycle import PENDING, Status
from server.domain.partitions import ranked_part
from server.domain.provenance import current_provenance, is_current, public_result
from server.domain.visibility import HIDDEN, ORGANIZER, TEAM, Viewer, may_see
from server.models import BoardChoice, Phase, Score, Submission, Team, utcnow
from tasks.agreement import reference_rows
from tasks.bundle_models import BoardSpec, board_lets_in
from tasks.store import TaskStore

# ----------------------------------------------------------------------------- building


def columns_for(
    task, split: str | None = None, folds: list[str] | tuple[str, ...] = ()
) -> list[Column]:
    """The primary metric first, then every metric of every subset in the task's order. On a
    cross-validated split (values: means over folds) the standard deviation over the folds of the
    primary and key columns follows, then the primary metric on each of `folds`."""
    psub, pmet = task.primary
    cols = [
        Column(subset=psub, metric=pmet, greater_is_better=task.greater_is_better, primary=True)
    ]
    for sub in task.subsets:
        for m in task.metrics:
            if (sub, m) != (psub, pmet):
                cols.append(
                    Column(subset=sub, metric=m, greater_is_better=task.metric_direction(m))
                )
    if split is not None and task.is_cross_validated(split):
        for key in (f"{psub}/{pmet}", *task.key_columns):
            sub, _, m = key.partition("/")
            cols.append(Column(subset=sub, metric=m, greater_is_better=False, stat="std"))
        cols += [
            Column(
                subset=psub,
                metric=pmet,
                greater_is_better=task.greater_is_better,
                stat="fold",
                fold=f,
            )
            for f in folds
        ]
    return cols


def board_columns(task, board, phase: Phase | None = None) -> list[Column]:
    """A declared board's columns: its ranking value first, then its declared columns (none
    declared: the task's other metrics on the ranking subset). An overall board's: its value
    (subset: the board's name, metric: the rule), then each board's ranking value (subset: that
    board's name)."""
    if getattr(board, "overall", None) is not None:
        return _overall_columns(task, board, _declared_of(phase))
    sub, met, over = board.ranking.subset, board.ranking.metric, tuple(board.ranking.over or ())
    cols = [
        Column(
            subset=sub,
            metric=met,
            greater_is_better=task.metric_direction(met),
            primary=True,
            over=list(over),
        )
    ]
    extra = [(c.subset, c.metric, tuple(c.over or ())) for c in board.columns] or [
        (sub, m, over) for m in task.metrics if m != met
    ]
    for c_sub, c_met, c_over in dict.fromkeys(extra):
        if (c_sub, c_met) != (sub, met):
            cols.append(
                Column(
                    subset=c_sub,
                    metric=c_met,
                    greater_is_better=task.metric_direction(c_met),
                    over=list(c_over),
                )
            )
    return cols


def _macro_groups(task, col) -> list[str]:
    """The groups a column's value is the mean over: a board's own mean's, `macro`'s (every group
    of the task), or none."""
    if col.over:
        return list(col.over)
    return list(task.groups or ()) if col.subset == "macro" else []


def passes(board, sub: Submission, fields: list[dict] | None = None) -> bool:
    """Whether a run passes a declared board's filter (a baseline, declaring no fact, passes an
    unfiltered board only), and the rules of the filter's field that depend on the board (`fields`:
    the competition's fact fields; Track C's run that declares labelled data in the board's
    language stays off that board)."""
    return board_lets_in(board, sub.facts, fields)


def result_folds(results) -> list[str]:
    """The folds the cross-validated results name, in fold order."""
    seen = {f for r in results if r for f in ((r.get("cross_validation") or {}).get("folds") or {})}
    return sorted(seen, key=fold_key)


def in_gold(result: dict | None, group: str) -> bool:
    """Whether the gold (the part of it scored) holds units of `group`: the scorer says so of a
    subset without any (`scorer.families._no_unit_note`)."""
    return not any(
        n.startswith(f"{group}: no ") and f" of {group} in " in n
        for n in (result or {}).get("notes") or ()
    )


def mean_over(result: dict | None, over, metric: str) -> Optional[float]:
    """A board's own mean of `metric` over the groups `over` (those the gold holds), as the
    scorer takes `macro` (`scorer.metrics.macro`: `n` summed): None unless each has a value."""
    held = [g for g in over if in_gold(result, g)]
    vals = [_value(result, g, metric) for g in held]
    if not held or any(v is None for v in vals):
        return None
    return float(sum(vals)) if metric == "n" else float(sum(vals) / len(vals))


def _value(
    result: dict | None, subset: str, metric: str, col: Optional[Column] = None
) -> Optional[float]:
    if not result:
        return None
    if col is not None and col.over:
        return mean_over(result, col.over, metric)
    if col is not None and col.stat:
        cv = result.get("cross_validation") or {}
        where = cv.get("std") if col.stat == "std" else (cv.get("folds") or {}).get(col.fold)
        v = (where or {}).get(subset, {}).get(metric)
    else:
        v = (result.get("metrics") or {}).get(subset, {}).get(metric)
    if v is None or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)


def _latest_scores(
    s: Session, subs: list[Submission], parts: tuple[str, ...]
) -> dict[tuple[int, str], dict]:
    """The result per (submission, part) of the attempt that counts: the submission's
    `score_attempt` when the backbone recorded one, else its latest."""
    out: dict[tuple[int, str], tuple[int, dict]] = {}
    counted = {sub.id: getattr(sub, "score_attempt", None) for sub in subs}
    sub_ids = list(counted)
    for i in range(0, len(sub_ids), 900):  # stay under SQLite's parameter limit
        chunk = sub_ids[i : i + 900]
        q = select(Score.submission_id, Score.part, Score.attempt, Score.result).where(
            Score.submission_id.in_(chunk), Score.part.in_(parts)
        )
        for sid, part, attempt, result in s.exec(q):
            want = counted.get(sid)
            if want is not None and attempt != want:
                continue
            prev = out.get((sid, part))
            if prev is None or attempt > prev[0]:
                out[(sid, part)] = (attempt, result)
    return {k: v[1] for k, v in out.items()}


def _rank(values: list[Optional[float]], greater_is_better: bool) -> list[Optional[int]]:
    """Competition ranking (1, 2, 2, 4): equal values share a rank; a missing value has none."""
    order = sorted((v for v in values if v is not None), reverse=greater_is_better)
    first: dict[float, int] = {}
    for i, v in enumerate(order):
        first.setdefault(v, i + 1)
    return [first[v] if v is not None else None for v in values]


def why_empty(result: dict | None, subset: str) -> str:
    """The result's notes that say why `subset` has no value (e.g. a macro over languages some of
    which the submission leaves out): the subset's own notes, then what the file lacks."""
    notes = (result or {}).get("notes") or []
    own = [n for n in notes if n.startswith(f"{subset}:")]
    lacking = [n for n in notes if n.endswith(": not in the submission") and n not in own]
    return "; ".join(own + lacking)


STALE_NOTE = "stale: scored against an earlier gold or scorer version; being rescored"
RERUN = "re-run of an archived system"  # a re-run row's `chosen_by`


# scored, or being rescored with the scores of an earlier attempt still standing
def _listed(phase: Phase) -> list:
    return [
        Submission.phase_id == phase.id,
        or_(
            Submission.status == Status.SCORED,
            and_(Submission.status.in_(PENDING), Submission.score_attempt.is_not(None)),
        ),
    ]


def _ranked_runs(
    s: Session,
    phase: Phase,
    rank_parts: tuple[str, ...],
    banned: set,
    see_private: bool,
    frozen_at: datetime | None,
    team_id: int | None = None,
    every: bool = False,
    hold_unshown: bool = True,
) -> list[tuple[Submission, Team]]:
    """The run each team ranks with and each baseline method's newest entry, chosen in the
    database (`lifecycle.RANKED_RUN_RULE`: the marked primary run, else the latest; among the runs
    neither hidden nor removed, of no banned user, with a score the viewer may see on a ranked
    part): one row per team and method, so a board costs what its teams cost, not its runs.
    `every`: every such run instead (a declared board chooses among the runs it lets in).
    `hold_unshown`: leave out the blind runs' outputs not shown yet (`server.domain.shown`), as
    every live board does (the final ranking and its preview show them)."""
    counted = [
        Score.submission_id == Submission.id,
        Score.part.in_(rank_parts),
        or_(Submission.score_attempt.is_(None), Score.attempt == Submission.score_attempt),
    ]
    if not see_private:  # visibility.may_see: a private score only once publication released it
        released = (
            Submission.created_at <= phase.published_at
            if phase.published_at is not None
            else false()
        )
        counted.append(or_(Score.part.notin_(HIDDEN), released))
    where = [
        *_listed(phase),
        Submission.removed_at.is_(None),
        Submission.hidden.is_(False),
        select(Score.id).where(*counted).exists(),
    ]
    if banned:
        where.append(or_(Submission.user_id.is_(None), Submission.user_id.not_in(sorted(banned))))
    if frozen_at is not None:
        where.append(Submission.created_at <= frozen_at)
    if team_id is not None:
        where.append(Submission.team_id == team_id)
    if phase.blind and hold_unshown:
        # a blind run's output enters no board before its result is shown to its team (the
        # moment fixed when it was submitted), so when its row appears says nothing of its run
        where.append(Submission.id.not_in(shown.unshown_outputs(phase.id, utcnow())))
    if every:
        q = (
            select(Submission, Team)
            .join(Team, Team.id == Submission.team_id)
            .where(*where)
            .order_by(Submission.id)
        )
        return list(s.exec(q))
    baseline = or_(Submission.is_baseline.is_(True), Team.is_baseline.is_(True))
    nth = (
        func.row_number()
        .over(
            partition_by=(
                Submission.team_id,
                case((baseline, 1), else_=0),
                case((baseline, Submission.method_name), else_=None),
                Submission.rerun_of,  # an archived system's re-run: a row of its own
            ),
            order_by=(
                case((baseline, 0), (Submission.is_primary.is_(True), 1), else_=0).desc(),
                Submission.created_at.desc(),
                Submission.id.desc(),
            ),
        )
        .label("nth")
    )
    firsts = (
        select(Submission.id.label("sid"), nth)
        .join(Team, Team.id == Submission.team_id)
        .where(*where)
        .subquery()
    )
    q = (
        select(Submission, Team)
        .join(Team, Team.id == Submission.team_id)
        .join(firsts, firsts.c.sid == Submission.id)
        .where(firsts.c.nth == 1)
        .order_by(Submission.id)
    )
    return list(s.exec(q))


def _marked_runs(s: Session, phase: Phase, banned: set) -> list[tuple[Submission, Team, str]]:
    """The runs an organizer's board shows marked and unranked: a banned user's, hidden, removed."""
    marked = [Submission.removed_at.is_not(None), Submission.hidden.is_(True)]
    if banned:
        marked.append(Submission.user_id.in_(sorted(banned)))
    q = (
        select(Submission, Team)
        .join(Team, Team.id == Submission.team_id)
        .where(*_listed(phase), or_(*marked))
        .order_by(Submission.id)
    )
    out = []
    for sub, team in s.exec(q):
        if sub.user_id is not None and sub.user_id in banned:
            out.append((sub, team, "banned"))
        else:
            out.append((sub, team, "removed" if sub.removed_at is not None else "hidden"))
    return out


def _enters(task, result: dict | None, prim: Column, provenance: dict | None) -> bool:
    """Whether a run with this result enters a declared board ranked by `prim`: it has the
    board's value (a stale score, being rescored, keeps its place and says so), or, on a board
    ranked by a mean over groups, the value of some of them (shown unranked, saying what it
    covers: never a partial mean passed off as the mean)."""
    if result is None:
        return False
    if not is_current(result, provenance):
        return True
    if _value(result, prim.subset, prim.metric, prim) is not None:
        return True
    return any(_value(result, g, prim.metric) is not None for g in _macro_groups(task, prim))


def _choice_key(sub: Submission, picked: dict | None = None) -> tuple:
    """A team's ranked run is its greatest by this key: the run it chose for the board
    (`picked`: team -> submission, `board_choices`), else the marked primary run, else the latest
    (`lifecycle.RANKED_RUN_RULE`); no score is read."""
    return ((picked or {}).get(sub.team_id) == sub.id, sub.is_primary, sub.created_at, sub.id)


def board_choices(s: Session, phase: Phase, board) -> dict[int, int]:
    """The runs the teams chose for a declared board (team -> submission; {} for the default
    board, ranked by the primary runs)."""
    if board is None:
        return {}
    q = select(BoardChoice.team_id, BoardChoice.submission_id).where(
        BoardChoice.phase_id == phase.id, BoardChoice.board == board.name
    )
    return dict(s.exec(q).all())


def team_sees_the_public_board(
    s: Session, task, phase: Phase, team_id: int, board=None, provenance: dict | None = None
) -> bool:
    """Whether a team's view of a live board is the public one, so that one render serves every
    team: it differs only where the team's ranked run is not shown publicly (the team sees it,
    marked) or the board is anonymous and the team has a row (the team sees its own name). Two
    small queries, whatever the board's size. `board`: one of the phase's declared boards (its
    ranked run chosen among the team's runs its filter lets in and that have its value, as
    `build_board` chooses it, with `provenance` the current versions); a few more small queries,
    over the team's own runs only."""
    if not phase.leaderboard_open:
        return True
    if board is not None and getattr(board, "overall", None) is not None:
        return False  # several boards' runs: the team's view is built for it
    use_private = phase.published_at is not None
    if use_private:
        # the private part, or the whole split for a phase that publishes on it
        rank_parts = (ranked_part(phase), "all")
    elif phase.public_fraction >= 1.0:
        rank_parts = ("public", "all")
    else:
        rank_parts = ("public",)
    comp = people.competition_of_task(s, task.id)
    banned = people.excluded_users(s, comp.id) if comp is not None else set()
    frozen_at = phase.frozen_at if phase.frozen else None
    runs = [
        sub
        for sub, team in _ranked_runs(
            s, phase, rank_parts, banned, False, frozen_at, team_id, every=board is not None
        )
        if not (sub.is_baseline or team.is_baseline)
    ]
    if board is not None:
        # the runs that enter the board, each by its score as the team may see it
        fields = list(comp.fact_fields or ()) if comp is not None else []
        runs = [sub for sub in runs if passes(board, sub, fields)]
        scores = _latest_scores(s, runs, rank_parts)
        viewer = Viewer(TEAM, team_id)
        prim = board_columns(task, board)[0]

        def seen(sub) -> dict | None:
            for p in rank_parts:
                r = scores.get((sub.id, p))
                if r is not None and may_see(viewer, phase, sub.created_at, p):
                    return r
            return None

        runs = [sub for sub in runs if _enters(task, seen(sub), prim, provenance)]
        picked = board_choices(s, phase, board)
        runs = [max(runs, key=lambda sub: _choice_key(sub, picked))] if runs else []
    if not runs:
        return True
    if not runs[0].show_publicly:
        return False
    return use_private or anonymous_labels(s, task.id, phase) is None


def final_board(s: Session, task, phase: Phase, home, **more) -> Board:
    """The final ranking as it is (or will be) published: the public audience's board ranked on
    the private part, a closed board shown, scores of the current gold, task and scorer only
    (`home`: the site's data); `more`: build_board's other arguments (`with_parts`). The one
    place the publication, its preview and the exports build it."""
    return build_board(
        s,
        task,
        phase,
        audience="public",
        show_private=True,
        include_closed=True,
        provenance=current_provenance(task, phase.split, home),
        **more,
    )


def build_board(
    s: Session,
    task,
    phase: Phase,
    *,
    audience: str = "public",
    show_private: bool = False,
    include_closed: bool = False,
    provenance: dict | None = None,
    with_parts: bool = False,
    board=None,
    team: int | None = None,
) -> Board:
    """The leaderboard of a phase as `audience` ("public", "team:<id>" or "organizer") may see it.

    `board`: one of the phase's declared boards (tasks.bundle_models.BoardSpec; None: the default
    board, ranked by the task's primary value). A declared board ranks by its own value, over the
    runs that pass its filter and have that value; each team's ranked run is chosen among those by
    the same rule (its marked primary run when it enters, else its latest one that does).

    Each team has one row (and one more for each of its archived systems the organizers re-ran on
    the phase, `rerun_of`): its ranked run, chosen by `lifecycle.RANKED_RUN_RULE` (the marked
    primary run, else the latest scored one) among its runs that are neither hidden nor removed;
    the choice never reads a score. Each baseline method has one unranked row (its newest entry).
    `show_private` (organizers only: a preview of the final ranking) ranks on the private part
    before publication; otherwise private scores are read only once the phase is published.
    `include_closed` (organizers' exports) shows the public view of a closed board. Scores whose
    provenance differs from `provenance` (the current gold, task and scorer versions) are never
    ranked: their row says they are stale. `with_parts` keeps every part's result on each row.
    `team`: that team's rows only (its own row, which `overlay` puts onto the public board).
    """
    only_team = team  # (`team` is reused below for each row's team)
    if board is not None and getattr(board, "overall", None) is not None:
        return _overall_board(
            s,
            task,
            phase,
            board,
            audience=audience,
            show_private=show_private,
            include_closed=include_closed,
            provenance=provenance,
            with_parts=with_parts,
        )
    published = phase.published_at is not None
    use_private = published or show_private
    own_team = int(audience.split(":", 1)[1]) if audience.startswith("team:") else None
    organizer = audience == "organizer"
    if not phase.leaderboard_open and not organizer and not include_closed:
        # every caller (pages, API, exports) gets nothing from a closed board
        return Board(
            task_id=task.id,
            phase=phase.name,
            split=phase.split,
            part="public",
            published=False,
            frozen=bool(phase.frozen),
            columns=columns_for(task, phase.split) if board is None else board_columns(task, board),
            closed=True,
            **_board_fields(board),
        )

    # ranked part and, after publication, the public part beside it
    if use_private:
        # the private part, or the whole split for a phase that publishes on it
        rank_parts = (ranked_part(phase), "all")
    elif phase.public_fraction >= 1.0:
        rank_parts = ("public", "all")
    else:
        # a hidden test gold split into parts: never read anything but its public part
        rank_parts = ("public",)
    parts = tuple(dict.fromkeys(rank_parts + (("public",) if use_private else ())))
    # the runs of people banned from the task's competition leave its live boards (organizers see
    # them marked); a published snapshot is never rebuilt, so it keeps them
    comp = people.competition_of_task(s, task.id)
    banned = people.excluded_users(s, comp.id) if comp is not None else set()
    fields = list(comp.fact_fields or ()) if comp is not None else []
    # an organizer's preview sees every private score; anyone else only those publication released
    see_private = organizer or show_private
    # a frozen board hides later runs from participants; the final ranking (show_private) has them
    frozen_at = phase.frozen_at if phase.frozen and not see_private else None
    candidates = _ranked_runs(
        s,
        phase,
        rank_parts,
        banned,
        see_private,
        frozen_at,
        only_team,
        every=board is not None,
        hold_unshown=not show_private,
    )
    extras = _marked_runs(s, phase, banned) if organizer else []
    if board is not None:
        candidates = [
            (sub, team)
            for sub, team in candidates
            if passes(board, sub, fields)
            and (board.filter is None or not (sub.is_baseline or team.is_baseline))
        ]
        extras = [e for e in extras if passes(board, e[0], fields)]
    scores = _latest_scores(s, [c[0] for c in candidates] + [e[0] for e in extras], parts)

    if board is None:
        cols = columns_for(task, phase.split, result_folds(scores.values()))
    else:
        cols = board_columns(task, board)
    prim = cols[0]

    made = {c[0].id: c[0].created_at for c in candidates} | {
        e[0].id: e[0].created_at for e in extras
    }
    # an organizer's preview sees every private score; anyone else only those publication released
    viewer = Viewer(ORGANIZER) if (organizer or show_private) else Viewer(TEAM, own_team)

    def pick(sid: int) -> tuple[str, dict] | None:
        for p in rank_parts:
            r = scores.get((sid, p))
            if r is not None and may_see(viewer, phase, made.get(sid), p):
                return p, r
        return None

    if board is not None:
        # a run enters a declared board only with its ranking value (a stale score, being
        # rescored, keeps its place and says so)
        def enters(sub) -> bool:
            got = pick(sub.id)
            return _enters(task, got[1] if got else None, prim, provenance)

        candidates = [c for c in candidates if enters(c[0])]
        extras = [e for e in extras if enters(e[0])]

    # the ranked run of each team: the run it chose for this board, else its primary run, else its
    # latest scored one (no score is read)
    picked = board_choices(s, phase, board)
    chosen: dict[int, tuple] = {}
    baselines: dict[tuple, tuple] = {}  # (team_id, method_name) -> newest scored baseline entry
    reruns: dict[int, tuple] = {}  # the first run of a system re-run here -> its newest re-run
    for sub, team in candidates:
        if pick(sub.id) is None:
            continue
        if sub.is_baseline or team.is_baseline:
            key = (team.id, sub.method_name)
            cur = baselines.get(key)
            if cur is None or (sub.created_at, sub.id) > (cur[0].created_at, cur[0].id):
                baselines[key] = (sub, team)
            continue
        if sub.rerun_of is not None:  # an archived system re-run here: beside the team's own
            cur = reruns.get(sub.rerun_of)
            if cur is None or (sub.created_at, sub.id) > (cur[0].created_at, cur[0].id):
                reruns[sub.rerun_of] = (sub, team)
            continue
        cur = chosen.get(team.id)
        if cur is None or _choice_key(sub, picked) > _choice_key(cur[0], picked):
            chosen[team.id] = (sub, team)

    rows_src: list[tuple] = [
        (sub, team, "", "baseline", "baseline method") for sub, team in baselines.values()
    ]
    for sub, team in chosen.values():
        if not sub.show_publicly:
            if not (organizer or sub.team_id == own_team):
                continue  # the team's ranked run is not public: no row for others
            rows_src.append((sub, team, "not public", "team", _rule(sub, picked)))
        else:
            rows_src.append((sub, team, "", "team", _rule(sub, picked)))
    for sub, team in reruns.values():
        if sub.show_publicly or organizer or sub.team_id == own_team:
            rows_src.append((sub, team, "" if sub.show_publicly else "not public", "team", RERUN))
    rows_src.extend((sub, team, note, "team", "") for sub, team, note in extras if pick(sub.id))
    rerun_of = code_runs.reruns_of(s, [x[0].id for x in rows_src if x[0].rerun_of is not None])

    rows = []
    for sub, team, note, kind, rule in rows_src:
        part, result = pick(sub.id)
        values = {c.key: _value(result, c.subset, c.metric, c) for c in cols}
        pub = (
            _value(scores.get((sub.id, "public")), prim.subset, prim.metric, prim)
            if use_private
            else None
        )
        if not is_current(result, provenance):
            values = {c.key: None for c in cols}
            pub, note = None, STALE_NOTE
        row = Row(
            rank=None,
            row_type=kind,
            team=team.name,
            team_id=team.id,
            submission_id=sub.id,
            method_name=sub.method_name,
            url=sub.url,
            submitted_at=sub.created_at,
            is_primary=sub.is_primary,
            values=values,
            public_value=pub,
            note=note,
            chosen_by=rule,
            attempt=sub.score_attempt,
            notes=list((result or {}).get("notes") or []),
            rerun_of=rerun_of.get(sub.id),
        )
        if values[prim.key] is None and note != STALE_NOTE:
            row.why_empty = why_empty(result, prim.subset)
            groups = _macro_groups(task, prim)
            if groups:
                covered = [g for g in groups if _value(result, g, prim.metric) is not None]
                if covered:  # a partial macro is never shown as the macro
                    # the groups the gold holds and the run leaves out (not those the gold
                    # lacks: STR's languages without test gold)
                    said = set((result or {}).get("notes") or ())
                    rest = [
                        g
                        for g in groups
                        if g not in covered and f"{g}: not in the submission" in said
                    ] or [g for g in groups if g not in covered and in_gold(result, g)]
                    # its own macro, over what it covers, said as such (STR's teams by language)
                    mine = sum(_value(result, g, prim.metric) for g in covered) / len(covered)
                    every = f"every {task.group_name}" + (" of this board" if prim.over else "")
                    row.why_empty = (
                        f"covers {', '.join(covered)} only, not {', '.join(rest)}: no macro "
                        f"over {every}; its macro over the {len(covered)} it "
                        f"covers is {mine:.4f}" + (f"; {row.why_empty}" if row.why_empty else "")
                    )
        if with_parts and note != STALE_NOTE:
            row.parts = {p: scores[(sub.id, p)] for p in parts if (sub.id, p) in scores}
        rows.append(row)

    if not use_private:
        # each team's runs in the phase (one query, a count per team)
        made_runs = run_counts(s, phase, frozen_at)
        for r in rows:
            if r.row_type == "team":
                r.runs = made_runs.get(r.team_id, 0)
    rule = None if (organizer or use_private) else release_rule_of(phase)
    if rule is not None and rule.kind == "ladder":
        _release_ladder(
            s, phase, rows, cols, rule, rank_parts, banned, frozen_at, board, fields, pick,
            provenance,
        )  # fmt: skip
    own_only = organizer or use_private or only_team is not None
    labels = None if own_only else anonymous_labels(s, task.id, phase)
    if labels is not None:  # an anonymous board: the team sees its own name, no one else's
        for r in rows:
            if r.row_type == "team" and r.team_id != own_team:
                r.team, r.method_name, r.url = labels.get(r.team_id, "Team ?"), "", ""
                if r.rerun_of:  # its first run's id would name the team
                    r.rerun_of = {k: v for k, v in r.rerun_of.items() if k != "run"}

    ranked = [r for r in rows if r.row_type == "team" and r.note in ("", "not public")]
    ranks = _rank([r.values[prim.key] for r in ranked], prim.greater_is_better)
    for r, rk in zip(ranked, ranks, strict=True):
        r.rank = rk
    if use_private:
        public_ranks = _rank([r.public_value for r in ranked], prim.greater_is_better)
        for r, rk in zip(ranked, public_ranks, strict=True):
            r.public_rank = rk

    gib = prim.greater_is_better

    def sort_key(r: Row):
        v = r.values[prim.key]
        missing = v is None
        return (
            missing,
            -(v or 0.0) if gib else (v or 0.0),
            r.row_type != "team",
            r.submitted_at,
            r.submission_id,
        )

    rows.sort(key=sort_key)
    # the part ranked on, as named in the JSON: a phase without a hidden part ranks on all of its
    # gold
    part = ranked_part(phase) if use_private else "all"
    if phase.public_fraction < 1.0 and not use_private:
        part = "public"
    return Board(
        task_id=task.id,
        phase=phase.name,
        split=phase.split,
        part=part,
        published=published,
        frozen=bool(phase.frozen),
        gold=goldversions.label(s, task.id, phase.split),
        columns=cols,
        rows=rows,
        release_rule=None if rule is None else rule.to_json(),
        **_board_fields(board),
    )


def for_stats(board: Board) -> Board:
    """A copy of a built board to put statistics (or a team's row) on: the rows copied, their
    values shared; the built board stays as it was, for the next version of its statistics."""
    return board.model_copy(update={"rows": [r.model_copy() for r in board.rows]})


def overlay(public: Board, own: Row) -> Board:
    """A team's view of a board whose public view hides its row (its ranked run not shown
    publicly, or its name on an anonymous board): the public board (a copy) with the team's own
    row put in its place. The other rows keep their public ranks; the team's row is ranked where
    its value stands among them (equal values sharing the rank)."""
    out = for_stats(public)
    rows = [r for r in out.rows if not (r.row_type == "team" and r.team_id == own.team_id)]
    key, gib = out.primary.key, out.primary.greater_is_better
    v = own.values.get(key)
    if own.rank is not None and v is not None:
        own.rank = 1 + sum(
            1
            for r in rows
            if r.rank is not None
            and r.values.get(key) is not None
            and (r.values[key] > v if gib else r.values[key] < v)
        )

    def order(r: Row) -> tuple:
        x = r.values.get(key)
        return (x is None, -(x or 0.0) if gib else (x or 0.0), r.row_type != "team")

    mine = order(own)
    at = next((i for i, r in enumerate(rows) if order(r) > mine), len(rows))
    rows.insert(at, own)
    out.rows = rows
    return out


# ----------------------------------------------------------------------------- release rules


def release_rule_of(phase: Phase):
    """The phase's release rule (scorer.release.Rule), or None where it shows scores exactly."""
    if not phase.release_rule:
        return None
    rule = Rule.parse(phase.release_rule)
    return None if rule.kind == "exact" else rule


def run_counts(s: Session, phase: Phase, until: datetime | None = None) -> dict[int, int]:
    """The runs each team made in the phase (any status; those made by `until` when given)."""
    q = select(Submission.team_id, func.count(Submission.id)).where(Submission.phase_id == phase.id)
    if until is not None:
        q = q.where(Submission.created_at <= until)
    return dict(s.exec(q.group_by(Submission.team_id)).all())


RELEASE_NOTE = "released by the phase's release rule"


def _release_ladder(
    s, phase, rows, cols, rule, rank_parts, banned, frozen_at, board, fields, pick, provenance
) -> None:
    """The ladder (scorer.release) on a live board: each team row shows what its ranked run
    releases given the team's runs before it on this board, in the order made (the best released
    value, unless the run beat it by eta); the other columns are not shown."""
    prim = cols[0]
    sgn = 1.0 if prim.greater_is_better else -1.0
    runs = _ranked_runs(s, phase, rank_parts, banned, False, frozen_at, every=True)
    if board is not None:
        runs = [(sub, team) for sub, team in runs if passes(board, sub, fields)]
    teams = {r.team_id for r in rows if r.row_type == "team"}
    runs = [(sub, team) for sub, team in runs if sub.team_id in teams and not sub.is_baseline]
    scores = _latest_scores(s, [sub for sub, _ in runs], rank_parts)
    by_team: dict[int, list] = {}
    for sub, _ in sorted(runs, key=lambda x: (x[0].created_at, x[0].id)):
        got = None
        for p in rank_parts:
            if (sub.id, p) in scores:
                got = scores[(sub.id, p)]
                break
        v = None
        if got is not None and is_current(got, provenance):
            v = _value(got, prim.subset, prim.metric, prim)
        by_team.setdefault(sub.team_id, []).append((sub.id, None if v is None else sgn * v))
    for r in rows:
        if r.row_type != "team":
            continue
        if r.values.get(prim.key) is None:
            r.values = {c.key: None for c in cols}
            continue
        seq = by_team.get(r.team_id, [])
        shown = released([v for _, v in seq], rule)
        at = [i for i, (sid, _) in enumerate(seq) if sid == r.submission_id]
        v = shown[at[0]] if at else None
        r.values = {c.key: None for c in cols} | {prim.key: None if v is None else sgn * v}
        r.note = r.note or ""
        r.chosen_by = (r.chosen_by + "; " if r.chosen_by else "") + RELEASE_NOTE


def _board_fields(board) -> dict:
    if board is None:
        return {}
    f = board.filter
    o = board.overall
    return {
        "board": board.name,
        "title": board.title,
        "filter": None if f is None else {"fact": f.fact, "equals": list(f.equals)},
        "overall": None if o is None else o.model_dump(mode="json"),
    }


# ----------------------------------------------------------------------------- overall boards


def _declared_of(phase: Phase | None) -> dict:
    """The phase's declared boards by name (what an overall board's columns name)."""
    return {b["name"]: BoardSpec.model_validate(b) for b in (phase.boards or ())} if phase else {}


def _overall_columns(task, board, declared: dict) -> list[Column]:
    comps = []
    for name in board.overall.boards:
        spec = declared.get(name)
        if spec is None:  # "main": the task's primary value
            met = task.primary[1]
            gib = task.greater_is_better
        else:
            met = spec.ranking.metric
            gib = task.metric_direction(met)
        comps.append(Column(subset=name, metric=met, greater_is_better=gib))
    rule = board.overall.rule
    head = Column(
        subset=board.name,
        metric=rule,
        greater_is_better=rule_direction(rule, [c.greater_is_better for c in comps]),
        primary=True,
    )
    return [head, *comps]


def _overall_board(s: Session, task, phase: Phase, board, **kw) -> Board:
    """An overall board: each of its boards built as the audience sees it, each team's ranked row
    there read, and the rule applied to their values (scorer.overall). A team's row names the
    run of the first board it is on; its values are the boards' (each board's ranked run)."""
    declared = _declared_of(phase)
    cols = _overall_columns(task, board, declared)
    prim = cols[0]
    comps = [
        build_board(s, task, phase, board=declared.get(name), **kw) for name in board.overall.boards
    ]
    out = Board(
        task_id=task.id,
        phase=phase.name,
        split=phase.split,
        part=comps[0].part,
        published=comps[0].published,
        frozen=comps[0].frozen,
        gold=comps[0].gold,
        columns=cols,
        closed=any(c.closed for c in comps),
        # the boards' released values under the phase's release rule: its statistics withheld too
        release_rule=comps[0].release_rule,
        **_board_fields(board),
    )
    out._components = comps
    if out.closed:
        return out
    teams, first = overall_teams(comps)
    K, n = len(comps), len(teams)
    present = [[t in rows for t in teams] for rows in (_ranked_rows(c) for c in comps)]
    vals = [
        [rows[t].values[c.primary.key] if t in rows else float("nan") for t in teams]
        for c, rows in ((c, _ranked_rows(c)) for c in comps)
    ]
    gib = [c.greater_is_better for c in cols[1:]]
    o = board.overall
    points = combine(vals, present, gib, o.rule, o.missing) if n else []
    pub_points = None
    if n and any(r.public_value is not None for c in comps for r in c.rows):
        # the final ranking (published, or its preview): the public part's beside it
        pub = [
            [
                rows[t].public_value
                if t in rows and rows[t].public_value is not None
                else float("nan")
                for t in teams
            ]
            for rows in (_ranked_rows(c) for c in comps)
        ]
        pub_present = [
            [p and v == v for p, v in zip(pr, pv, strict=True)]
            for pr, pv in zip(present, pub, strict=True)
        ]
        pub_points = combine(pub, pub_present, gib, o.rule, o.missing)
    rows = []
    for i, t in enumerate(teams):
        r0 = first[t]
        missing = [board.overall.boards[k] for k in range(K) if not present[k][i]]
        if missing and o.missing == "leave-out":
            continue
        v = float(points[i])
        values = {prim.key: None if v != v else v}
        for k, c in enumerate(cols[1:]):
            values[c.key] = vals[k][i] if present[k][i] else None
        row = Row(
            rank=None,
            row_type="team",
            team=r0.team,
            team_id=r0.team_id,
            submission_id=r0.submission_id,
            method_name=r0.method_name,
            url=r0.url,
            submitted_at=r0.submitted_at,
            is_primary=r0.is_primary,
            values=values,
            note=r0.note if r0.note == "not public" else "",
            chosen_by=f"{o.rule} over {K} boards",
            attempt=r0.attempt,
        )
        if pub_points is not None and pub_points[i] == pub_points[i]:
            row.public_value = float(pub_points[i])
        if missing:
            how = {"last": "ranked last there", "unranked": "unranked"}[o.missing]
            row.why_empty = f"not on {', '.join(missing)}: {how}"
        rows.append(row)
    ranks = _rank([r.values[prim.key] for r in rows], prim.greater_is_better)
    for r, rk in zip(rows, ranks, strict=True):
        r.rank = rk
    if pub_points is not None:
        for r, rk in zip(
            rows, _rank([r.public_value for r in rows], prim.greater_is_better), strict=True
        ):
            r.public_rank = rk
    gb = prim.greater_is_better
    rows.sort(
        key=lambda r: (
            r.values[prim.key] is None,
            -(r.values[prim.key] or 0.0) if gb else (r.values[prim.key] or 0.0),
            r.team,
        )
    )
    out.rows = rows
    return out


def _ranked_rows(board: Board) -> dict[int, Row]:
    """A board's ranked team rows, by team."""
    return {r.team_id: r for r in board.rows if r.row_type == "team" and r.rank is not None}


def overall_teams(comps: list[Board]) -> tuple[list[int], dict[int, Row]]:
    """The teams ranked on any of an overall board's boards, in a fixed order, and each one's row
    on the first board it is on."""
    first: dict[int, Row] = {}
    for c in comps:
        for t, r in _ranked_rows(c).items():
            first.setdefault(t, r)
    return sorted(first), first


# ----------------------------------------------------------------------------- anonymous boards


def anonymous_labels(s: Session, task_id: str, phase: Phase) -> dict[int, str] | None:
    """Where the task's competition keeps its boards anonymous and the phase is not published:
    each team's label, "Team 1", "Team 2", ..., numbered in the order of the teams' first runs in
    the phase (stable: a team that submits later gets a later number); else None. Baseline teams
    keep their names."""
    if phase.published_at is not None:
        return None
    c = people.competition_of_task(s, task_id)
    if c is None or not c.anonymous_board:
        return None
    q = (
        select(Submission.team_id, func.min(Submission.id))
        .join(Team, Team.id == Submission.team_id)
        .where(Submission.phase_id == phase.id, Team.is_baseline.is_(False))
        .group_by(Submission.team_id)
    )
    firsts = sorted(s.exec(q).all(), key=lambda t: t[1])
    return {team_id: f"Team {i}" for i, (team_id, _) in enumerate(firsts, 1)}


def add_reference_rows(board: Board, task, home) -> None:
    """The human-agreement rows the task's import recorded (`tasks/agreement.py`), unranked, in
    their place by the primary score (none on an overall board: they have no value there)."""
    if board.overall is not None:
        return
    store = TaskStore(task.id, home)
    try:
        manifest = store.manifest()
        at = datetime.utcfromtimestamp(store.manifest_path.stat().st_mtime).replace(microsecond=0)
    except (OSError, ValueError):
        return
    refs = reference_rows(task, manifest.get("agreement"))
    # published results stand beside runs on the same data: every fold a row names must be a fold of
    # the imported split (the synthetic demo release has three, the paper's ten)
    folds = {str(f) for f in (manifest.get("cross_validation") or {}).get("folds") or ()}
    papers = [
        p
        for p in getattr(task, "paper_rows", ())
        if p.split == board.split
        and {k.rsplit("@fold", 1)[1] for k, _ in p.values if "@fold" in k} <= folds
    ]
    if not (refs or papers) or board.closed:
        return
    for ref in refs:
        values = {c.key: ref["values"].get(c.key) for c in board.columns}
        board.rows.append(
            Row(
                rank=None,
                row_type="human",
                team=ref["team"],
                team_id=0,
                submission_id=None,
                method_name=ref["method_name"],
                url="",
                submitted_at=at,
                is_primary=False,
                values=values,
                note=ref["note"],
            )
        )
    for p in papers:  # published results, as declared by the task
        given = dict(p.values)
        board.rows.append(
            Row(
                rank=None,
                row_type="paper",
                team=p.team,
                team_id=0,
                submission_id=None,
                method_name=p.method,
                url="",
                submitted_at=at,
                is_primary=False,
                values={c.key: given.get(c.key) for c in board.columns},
                note=f"{p.source}{'; ' + p.note if p.note else ''}; not ranked",
            )
        )
    key, gib = board.primary.key, board.primary.greater_is_better
    board.rows.sort(
        key=lambda r: (
            r.values[key] is None,
            -(r.values[key] or 0.0) if gib else (r.values[key] or 0.0),
            r.row_type != "team",
        )
    )


def _rule(sub: Submission, picked: dict | None = None) -> str:
    if (picked or {}).get(sub.team_id) == sub.id:
        return "chosen for this board"
    return "primary run" if sub.is_primary else "latest scored run"


# ----------------------------------------------------------------------------- output


def empty_reason(row: Row, col: Column) -> str:
    """Why a cell of a board is empty, in a few words."""
    if row.row_type == "human":
        return "no such figure of the annotations"
    if row.row_type == "paper":
        return "not among the published figures"
    if row.note == STALE_NOTE:
        return "stale: being rescored"
    if row.note:
        return row.note
    if (
        col.primary and row.why_empty
    ):  # e.g. "macro: undefined unless every pair ...; en-it: not in the submission"
        return row.why_empty
    for n in row.notes:
        head, _, rest = n.partition(": ")
        if head == col.subset and (
            col.metric in rest or "no " in rest or "not in" in rest or "needs" in rest
        ):
            return rest
        if head == col.subset and rest.startswith("undefined"):
            return rest
    for n in row.notes:  # a reason without a subset
        if col.metric in n:
            return n
    return "not computed for this run"


def to_dict(board: Board) -> dict[str, Any]:
    """The declared JSON shape of a leaderboard."""
    return board.to_dict()


def to_json(board: Board) -> bytes:
    return json.dumps(to_dict(board), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def to_csv(board: Board) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = ["rank", "row_type", "team", "method_name", "submitted_at", "submission_id"]
    head += [c.key for c in board.columns]
    if board.published:
        head += ["public_primary", "public_rank"]
    # the rank sets with the coverage they state (marginal, simultaneous), where computed
    with_sets = any(r.rank_set for r in board.rows)
    if with_sets:
        head += ["rank_set_low", "rank_set_high", "rank_set_all_low", "rank_set_all_high"]
    head += ["ci_lo", "ci_hi", "rank_best", "rank_worst", "cluster"]
    w.writerow(head)
    for r in board.rows:
        line = [
            "" if r.rank is None else r.rank,
            r.row_type,
            _csv_safe(r.team),
            _csv_safe(clean_name(r.method_name)),
            r.submitted_at.replace(microsecond=0).isoformat() + "Z",
            "" if r.submission_id is None else r.submission_id,
        ]
        line += [_csv_value(c.metric, r.values[c.key]) for c in board.columns]
        if board.published:
            line += [
                "" if r.public_value is None else repr(r.public_value),
                "" if r.public_rank is None else r.public_rank,
            ]
        if with_sets:
            for rs in (r.rank_set, r.rank_set_simultaneous):
                line += [rs["low"], rs["high"]] if rs else ["", ""]
        line += list(map(repr, r.ci)) if r.ci and None not in r.ci else ["", ""]
        line += (r.rank_range if r.rank_range else ["", ""]) + [
            "" if r.cluster is None else r.cluster
        ]
        w.writerow(line)
    return buf.getvalue().encode("utf-8")


def _csv_safe(s: str) -> str:
    # a cell starting with = + - @ runs as a formula in spreadsheets (CSV injection); leading
    # blanks are stripped first, since spreadsheets skip them too
    s = (s or "").strip()
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


def _csv_value(metric: str, v) -> str:
    """A metric's value in the CSV: a count as an integer (`206`, not `206.0`), else repr."""
    if v is None:
        return ""
    if metric in COUNT_METRICS and float(v).is_integer():
        return str(int(v))
    return repr(v)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def latex_escape(s: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in s)


def format_value(metric: str, v: float) -> str:
    return f"{int(v)}" if metric in COUNT_METRICS else f"{v:.4f}"


def to_latex(
    board: Board,
    *,
    max_metric_columns: int = 6,
    caption: str | None = None,
    columns: list[str] | None = None,
) -> str:
    """A booktabs table for a task-overview paper: rank (with its 95 % range when computed), team,
    method, the primary metric with its interval, then the metrics picked (`columns`: keys, every
    one kept; else the first few); the best score of each column in bold, never a count."""
    if columns:
        by_key = {c.key: c for c in board.columns}
        cols = [board.primary] + [
            by_key[k] for k in columns if k in by_key and k != board.primary.key
        ]
    else:
        cols = board.columns[:max_metric_columns]
    with_ci = any(r.ci for r in board.rows)
    with_range = any(r.rank_range for r in board.rows)
    with_set = any(r.rank_set for r in board.rows)
    best = {}
    for c in cols:
        if c.metric in COUNT_METRICS or c.stat == "std":  # a count or a spread is no score
            continue
        vals = [
            r.values[c.key]
            for r in board.rows
            if r.row_type == "team" and r.values[c.key] is not None
        ]
        if vals:
            best[c.key] = max(vals) if c.greater_is_better else min(vals)
    spec = (
        "r "
        + ("c " if with_range else "")
        + ("c " if with_set else "")
        + "l l "
        + " ".join("r c" if c.primary and with_ci else "r" for c in cols)
    )
    spec += " r" if board.published else ""
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
    ]
    head = ["\\#"] + (["range"] if with_range else []) + (["set"] if with_set else [])
    head += ["Team", "Method"]
    for c in cols:
        # no arrow where neither direction is better: a spread, a count (`n`, TP...)
        arrow = (
            ""
            if c.stat == "std" or c.metric in COUNT_METRICS
            else (r" $\uparrow$" if c.greater_is_better else r" $\downarrow$")
        )
        head.append(latex_escape(f"{c.label} ({c.subset})") + arrow)
        if c.primary and with_ci:
            head.append("95\\% CI")
    if board.published:
        head.append("public")
    lines.append(" & ".join(head) + r" \\")
    lines.append(r"\midrule")
    for r in board.rows:
        cells = ["" if r.rank is None else str(r.rank)]
        if with_range:
            cells.append(f"{r.rank_range[0]}--{r.rank_range[1]}" if r.rank_range else "")
        if with_set:
            rs = r.rank_set
            cells.append(f"{rs['low']}--{rs['high']}" if rs else "")
        cells += [
            latex_escape(r.team) + (r" \textit{(baseline)}" if r.row_type == "baseline" else ""),
            latex_escape(clean_name(r.method_name)),
        ]
        for c in cols:
            v = r.values[c.key]
            if v is None:
                cells.append("--")
            else:
                t = format_value(c.metric, v)
                cells.append(
                    rf"\textbf{{{t}}}" if best.get(c.key) == v and r.row_type == "team" else t
                )
            if c.primary and with_ci:
                cells.append(
                    f"[{r.ci[0]:.4f}, {r.ci[1]:.4f}]" if r.ci and None not in r.ci else "--"
                )
        if board.published:
            cells.append("--" if r.public_value is None else f"{r.public_value:.4f}")
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    on = f", board {board.title or board.board}" if board.board != "main" else ""
    by = (
        f"by {board.primary.metric} over the boards {', '.join(board.overall['boards'])}"
        if board.overall
        else f"by {board.primary.metric} on {board.primary.subset}"
    )
    cap = caption or (
        f"Results of {board.task_id} ({board.phase} phase{on}, ranked on the "
        f"{board.part} part of the gold {by})."
    )
    if with_ci and board.stats:
        cap += (
            f" Intervals: 95% paired bootstrap over {board.stats.get('unit')}, "
            f"B={board.stats.get('B')}, seed {board.stats.get('seed')}; range: 95% rank interval."
        )
        if with_set:
            cap += (
                " Set: the 95% confidence set for the rank (marginal; Mogstad, Romano, Shaikh and "
                "Wilhelm's max-t procedure on the same resamples)."
            )
    lines += [
        rf"\caption{{{latex_escape(cap)}}}",
        rf"\label{{tab:{latex_escape(board.task_id)}-{latex_escape(board.phase)}"
        + (f"-{latex_escape(board.board)}" if board.board != "main" else "")
        + "}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- published snapshots


def snapshot_dict(board: Board, meta: dict, *, secret: str) -> dict[str, Any]:
    """The published final ranking: the board's declared shape, plus the publication (`ranking`:
    version, time, organizer, reason, the rule that chose each run) and, per row, the rule that
    chose it and every score of every part with its signature (gold named by its keyed id)."""
    d = to_dict(board)
    d["ranking"] = dict(meta)
    for out, r in zip(d["rows"], board.rows, strict=True):
        out["chosen_by"] = r.chosen_by
        out["parts"] = {}
        for part, result in sorted(r.parts.items()):
            pr = public_result(result, secret)
            out["parts"][part] = {
                "primary": pr.get("primary", {}).get("value"),
                "metrics": pr.get("metrics"),
                "notes": pr.get("notes", []),
                "signature": pr.get("signature", ""),
                "provenance": pr.get("provenance", {}),
            }
    return d


def board_from_dict(d: dict) -> Board:
    """A Board back from its JSON shape (a published snapshot), for the page and the exports."""
    return Board.model_validate(d)


def snapshot_csv(body: dict) -> str:
    return to_csv(board_from_dict(body)).decode("utf-8")


def snapshot_latex(body: dict, columns: list[str] | None = None) -> str:
    r = body.get("ranking") or {}
    on = f", board {body.get('title') or body['board']}" if body.get("board") else ""
    o = body.get("overall")
    by = (
        f"by {body['primary']['metric']} over the boards {', '.join(o['boards'])}"
        if o
        else f"by {body['primary']['metric']} on {body['primary']['subset']}"
    )
    cap = (
        f"Final ranking of {body['task']} ({body['phase']} phase{on}, version {r.get('version')}, "
        f"published {r.get('published_at')}), ranked on the {body['ranked_on']} part of the "
        f"gold {by}."
    )
    return to_latex(board_from_dict(body), caption=cap, columns=columns)


# ----------------------------------------------------------------------------- the cache
# A board's version is its phase's row: every change a board shows goes through
# server.domain.lifecycle,
# which bumps the phase's revision in the same transaction. One small statement per request.
# A blind run's output changes the boards at its `shown_at` (code_runs.unshown_outputs), when no
# revision moves: the latest such moment past is part of the version (its transitions before
# then move no revision, `lifecycle._moved`, so that nothing of a board tells when it ended).
_VERSION_SQL = """SELECT p.id, p.name, p.split, p.revision, p.frozen, p.frozen_at, p.published_at,
       p.leaderboard_open, p.public_fraction, p.opens_at,
       (SELECT max(c.shown_at) FROM coderun c WHERE c.phase_id = p.id
        AND c.submission_id IS NOT NULL AND c.shown_at <= :now)
FROM phase p WHERE p.task_id = :task"""


@dataclass
class PhaseState:
    id: int
    name: str
    split: str
    leaderboard_open: bool
    opens_at: Optional[datetime]
    version: str
    published: bool = False
    shape: str = ""  # what must never be served stale: publication, freeze, openness, gold


def _raw_rows(engine, sql, task_id: str) -> list[tuple]:
    # the DBAPI directly: this runs on every leaderboard request, and SQLAlchemy's statement
    # machinery would cost more than the query itself
    now = utcnow()
    if engine.dialect.paramstyle == "pyformat":
        stmt = sql.replace(":task", "%(task)s").replace(":now", "%(now)s")
    else:  # SQLite keeps a time as SQLAlchemy writes it, a text compared as one
        stmt, now = sql, now.strftime("%Y-%m-%d %H:%M:%S.%f")
    conn = engine.raw_connection()
    try:
        cur = conn.cursor()
        cur.execute(stmt, {"task": task_id, "now": now})
        rows = cur.fetchall()
        cur.close()
        return rows
    finally:
        conn.close()


def phase_states(engine, task_id: str, provenance=None) -> list[PhaseState]:
    """Every phase of a task with the version of its leaderboard, in one query; `provenance(split)`
    gives the current gold and scorer versions of a split, which the version includes (a gold
    re-import makes earlier scores stale)."""
    out = []
    for row in _raw_rows(engine, _VERSION_SQL, task_id):
        (pid, name, split, rev, frozen, frozen_at, published_at, lb_open, frac, opens_at, seen) = (
            row
        )
        prov = provenance(split) if provenance else None
        v = (
            f"{pid}:{rev}:{int(bool(frozen))}:{frozen_at}:{published_at}:{int(bool(lb_open))}:"
            f"{frac}:{prov}"
        )
        if seen is not None:  # a blind run's output shown since (none: the version as before)
            v += f":{seen}"
        if isinstance(opens_at, str):  # SQLite through a raw connection
            opens_at = datetime.fromisoformat(opens_at)
        shape = f"{pid}:{int(bool(frozen))}:{frozen_at}:{published_at}:{int(bool(lb_open))}:"
        shape += f"{frac}:{prov}"
        out.append(
            PhaseState(
                pid,
                name,
                split,
                bool(lb_open),
                opens_at,
                hashlib.sha1(v.encode()).hexdigest()[:16],
                published_at is not None,
                hashlib.sha1(shape.encode()).hexdigest()[:16],
            )
        )
    return out


class SharedRenders:
    """A second level of the render cache that every process and machine of a site shares (Redis):
    a board rendered once is served by every gunicorn process and web machine. Per key the site's
    newest render is kept with its version (served stale while the next is built), and a claim
    that lets one process of the site render a key once per interval. Only bytes (or tuples of
    bytes) are kept, framed, never pickled; a Redis that does not answer is left alone for a while
    and each process renders on its own."""

    TTL = 24 * 3600
    RETRY = 30.0

    def __init__(self, connect, site: str):
        self._connect = connect  # () -> redis.Redis
        self._site = hashlib.sha256(site.encode("utf-8")).hexdigest()[:12]
        self._down_until = 0.0

    def _key(self, key: tuple, kind: str = "render") -> str:
        ident = json.dumps(list(map(str, key)))
        return f"palimpsest:{kind}:{self._site}:{hashlib.sha256(ident.encode()).hexdigest()}"

    def _conn(self):
        if time.monotonic() < self._down_until:
            return None
        try:
            return self._connect()
        except Exception:  # noqa: BLE001 — no shared cache: render here
            self._down_until = time.monotonic() + self.RETRY
            return None

    def _failed(self) -> None:
        self._down_until = time.monotonic() + self.RETRY

    def latest(self, key: tuple) -> tuple[str, Any] | None:
        """The site's newest render of `key`: (its version, the value), or None."""
        conn = self._conn()
        if conn is None:
            return None
        try:
            raw = conn.get(self._key(key))
        except Exception:  # noqa: BLE001
            self._failed()
            return None
        if not raw or raw[:1] != b"v":
            return None
        n = raw[1]
        value = _unpack(raw[2 + n :])
        return None if value is None else (raw[2 : 2 + n].decode("ascii"), value)

    def get(self, key: tuple, version: str):
        got = self.latest(key)
        return got[1] if got is not None and got[0] == version else None

    def put(self, key: tuple, version: str, value) -> None:
        packed = _pack(value)
        tag = version.encode("ascii")
        conn = self._conn() if packed is not None and len(tag) < 256 else None
        if conn is None:
            return
        try:
            conn.set(self._key(key), b"v" + bytes([len(tag)]) + tag + packed, ex=self.TTL)
        except Exception:  # noqa: BLE001
            self._failed()

    def claim(self, key: tuple, seconds: float) -> bool:
        """Whether this process may render `key` now: the first to ask in each interval of
        `seconds` is told yes, every other process of the site no (a Redis that does not answer:
        yes, each process keeps its own interval)."""
        conn = self._conn()
        if conn is None:
            return True
        try:
            return bool(conn.set(self._key(key, "claim"), b"1", nx=True, px=int(seconds * 1000)))
        except Exception:  # noqa: BLE001
            self._failed()
            return True


def _pack(value) -> bytes | None:
    if isinstance(value, bytes):
        return b"b" + value
    if isinstance(value, tuple) and all(isinstance(v, bytes) for v in value):
        head = json.dumps([len(v) for v in value]).encode("ascii")
        return b"t" + len(head).to_bytes(4, "big") + head + b"".join(value)
    return None


def _unpack(raw: bytes):
    if raw[:1] == b"b":
        return raw[1:]
    if raw[:1] == b"t":
        n = int.from_bytes(raw[1:5], "big")
        sizes, at, out = json.loads(raw[5 : 5 + n]), 5 + n, []
        for size in sizes:
            out.append(raw[at : at + size])
            at += size
        return tuple(out)
    return None


class RenderCache:
    """Rendered leaderboards per (task, phase, audience, format), in this process and through
    `shared` (SharedRenders) across the site's processes.

    `interval` (seconds; the setting `board_refresh_seconds`): 0 renders each new version at once
    (one render per key at a time, the others waiting for it). Above 0 the cache serves stale
    while it revalidates (RFC 5861): a key whose version moved is served from its last render
    while one request (one in the whole site, with `shared`) builds the next, and a key is
    rendered at most once per interval whatever the rate of changes; only a key never rendered
    waits for its first render. `shape`: what must never be served stale (a publication, a
    freeze, a new gold): a render of another shape is never served in its place.
    """

    def __init__(
        self, max_entries: int = 512, shared: SharedRenders | None = None, interval: float = 0.0
    ):
        # key -> (version, value, shape, when rendered (time.monotonic()))
        self._d: dict[tuple, tuple[str, Any, str, float]] = {}
        self._lock = threading.Lock()
        self._busy: dict[tuple, threading.Lock] = {}
        self.max_entries = max_entries
        self.renders = 0
        self.shared = shared
        self.interval = float(interval)

    def get(self, key: tuple, version: str, render, shape: str = ""):
        return self.lookup(key, version, render, shape)[1]

    def lookup(self, key: tuple, version: str, render, shape: str = "") -> tuple[str, Any]:
        """(the version served, the value): the render of `key` at `version`, or, while the next
        one is built elsewhere or the interval since the last one has not passed, the last one of
        the same shape. The site's shared renders are asked at most once per interval."""
        hit = self._d.get(key)
        if hit is not None and hit[0] == version:
            return version, hit[1]
        now = time.monotonic()
        stale = hit if hit is not None and hit[2] == shape else None
        skey = (*key, shape)
        with self._lock:
            busy = self._busy.setdefault(key, threading.Lock())
        if self.interval > 0:
            if stale is not None and now - stale[3] < self.interval:
                return stale[0], stale[1]
            got = self.shared.latest(skey) if self.shared is not None else None
            if got is not None:
                if got[0] == version:
                    self._store(key, version, got[1], shape, now)
                    return got
                stale = (got[0], got[1], shape, 0.0)
            if stale is not None:
                if not busy.acquire(blocking=False):
                    return stale[0], stale[1]  # being rendered now by another request
                try:
                    if self.shared is not None and not self.shared.claim(skey, self.interval):
                        # another process of the site renders it: the stale one for an interval
                        self._store(key, stale[0], stale[1], shape, now)
                        return stale[0], stale[1]
                    return version, self._render(key, version, render, shape)
                finally:
                    busy.release()
        elif self.shared is not None:
            got = self.shared.latest(skey)
            if got is not None and got[0] == version:
                self._store(key, version, got[1], shape, now)
                return got
        with busy:  # a key's first render (or no interval): one at a time, the others wait
            hit = self._d.get(key)
            if hit is not None and hit[2] == shape and (hit[0] == version or self.interval > 0):
                return hit[0], hit[1]  # rendered while this request waited
            return version, self._render(key, version, render, shape)

    def _render(self, key: tuple, version: str, render, shape: str):
        value = render()
        with self._lock:
            self.renders += 1
        self._store(key, version, value, shape, time.monotonic())
        if self.shared is not None:
            self.shared.put((*key, shape), version, value)
        return value

    def _store(self, key, version, value, shape, when) -> None:
        with self._lock:
            if len(self._d) >= self.max_entries and key not in self._d:
                self._d.clear()
            self._d[key] = (version, value, shape, when)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
