"""What a viewer may see of a phase: the runs that rank (each team's ranked run, each baseline
method's newest entry, chosen in the database), the runs an organizer sees marked, the scores of
the attempt that counts, a declared board's filter and the runs the teams chose for it, the
anonymous labels, and whether a team's view of a live board is the public one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, false, func, or_
from sqlmodel import Session, select

from server.boards.board_model import Column
from server.boards.columns import (
    RERUN,
    _macro_groups,
    _value,
    board_columns,
    columns_for,
    result_folds,
)
from server.boards.request import BoardRequest
from server.domain import people, shown
from server.domain.lifecycle import PENDING, Status
from server.domain.partitions import ranked_part
from server.domain.provenance import is_current
from server.domain.visibility import HIDDEN, ORGANIZER, TEAM, Viewer, may_see
from server.models import BoardChoice, Phase, Score, Submission, Team, utcnow
from tasks.bundle_models import board_lets_in


def passes(board, sub: Submission, fields: list[dict] | None = None) -> bool:
    """Whether a run passes a declared board's filter (a baseline, declaring no fact, passes an
    unfiltered board only), and the rules of the filter's field that depend on the board (`fields`:
    the competition's fact fields; Track C's run that declares labelled data in the board's
    language stays off that board)."""
    return board_lets_in(board, sub.facts, fields)


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
    rank_parts = rank_parts_of(phase, use_private)
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


def run_counts(s: Session, phase: Phase, until: datetime | None = None) -> dict[int, int]:
    """The runs each team made in the phase (any status; those made by `until` when given)."""
    q = select(Submission.team_id, func.count(Submission.id)).where(Submission.phase_id == phase.id)
    if until is not None:
        q = q.where(Submission.created_at <= until)
    return dict(s.exec(q.group_by(Submission.team_id)).all())


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


def _rule(sub: Submission, picked: dict | None = None) -> str:
    if (picked or {}).get(sub.team_id) == sub.id:
        return "chosen for this board"
    return "primary run" if sub.is_primary else "latest scored run"


# ----------------------------------------------------------------------------- what a request reads


def rank_parts_of(phase: Phase, use_private: bool) -> tuple[str, ...]:
    """The parts a board ranks on: the private part (or the whole split for a phase that
    publishes on it) once it is read, else the public one (and the whole split where the gold
    has no hidden part; a hidden test gold split into parts: never anything but its public
    part)."""
    if use_private:
        return (ranked_part(phase), "all")
    if phase.public_fraction >= 1.0:
        return ("public", "all")
    return ("public",)


@dataclass(frozen=True)
class Scope:
    """What a request may read of a phase: the parts ranked on (and, after publication, the
    public part beside them), the banned users whose runs leave the live boards, the competition's
    fact fields, the freeze, and the viewer whose visibility rules apply."""

    use_private: bool
    see_private: bool
    rank_parts: tuple[str, ...]
    parts: tuple[str, ...]
    banned: set
    fields: list
    frozen_at: datetime | None
    viewer: Viewer


def scope_of(s: Session, task, phase: Phase, req: BoardRequest) -> Scope:
    use_private = phase.published_at is not None or req.show_private
    rank_parts = rank_parts_of(phase, use_private)
    # the runs of people banned from the task's competition leave its live boards (organizers see
    # them marked); a published snapshot is never rebuilt, so it keeps them
    comp = people.competition_of_task(s, task.id)
    # an organizer's preview sees every private score; anyone else only those publication released
    see_private = req.organizer or req.show_private
    return Scope(
        use_private=use_private,
        see_private=see_private,
        rank_parts=rank_parts,
        parts=tuple(dict.fromkeys(rank_parts + (("public",) if use_private else ()))),
        banned=people.excluded_users(s, comp.id) if comp is not None else set(),
        fields=list(comp.fact_fields or ()) if comp is not None else [],
        # a frozen board hides later runs from participants; the final ranking (show_private) has
        # them
        frozen_at=phase.frozen_at if phase.frozen and not see_private else None,
        viewer=Viewer(ORGANIZER) if see_private else Viewer(TEAM, req.own_team),
    )


@dataclass
class Seen:
    """The runs a request sees on a board (`candidates`: the ranked runs, or every run a declared
    board chooses among; `extras`: those an organizer sees marked, with their mark), their scores,
    the board's columns, and each run's result as the viewer may read it (`pick`)."""

    phase: Phase
    scope: Scope
    candidates: list
    extras: list
    scores: dict
    cols: list[Column]
    made: dict

    @property
    def prim(self) -> Column:
        return self.cols[0]

    def pick(self, sid: int) -> tuple[str, dict] | None:
        """The part and result a run ranks with, as the viewer may see it (None: nothing seen)."""
        for p in self.scope.rank_parts:
            r = self.scores.get((sid, p))
            if r is not None and may_see(self.scope.viewer, self.phase, self.made.get(sid), p):
                return p, r
        return None


def visible(s: Session, task, phase: Phase, req: BoardRequest, scope: Scope) -> Seen:
    """The runs the request sees on the board, their scores and the board's columns."""
    board, sc = req.board, scope
    candidates = _ranked_runs(
        s,
        phase,
        sc.rank_parts,
        sc.banned,
        sc.see_private,
        sc.frozen_at,
        req.team,
        every=board is not None,
        hold_unshown=not req.show_private,
    )
    extras = _marked_runs(s, phase, sc.banned) if req.organizer else []
    if board is not None:
        candidates = [
            (sub, team)
            for sub, team in candidates
            if passes(board, sub, sc.fields)
            and (board.filter is None or not (sub.is_baseline or team.is_baseline))
        ]
        extras = [e for e in extras if passes(board, e[0], sc.fields)]
    scores = _latest_scores(s, [c[0] for c in candidates] + [e[0] for e in extras], sc.parts)
    if board is None:
        cols = columns_for(task, phase.split, result_folds(scores.values()))
    else:
        cols = board_columns(task, board)
    made = {c[0].id: c[0].created_at for c in candidates} | {
        e[0].id: e[0].created_at for e in extras
    }
    seen = Seen(phase, sc, candidates, extras, scores, cols, made)
    if board is not None:
        # a run enters a declared board only with its ranking value (a stale score, being
        # rescored, keeps its place and says so)
        def enters(sub) -> bool:
            got = seen.pick(sub.id)
            return _enters(task, got[1] if got else None, seen.prim, req.provenance)

        seen.candidates = [c for c in candidates if enters(c[0])]
        seen.extras = [e for e in extras if enters(e[0])]
    return seen


def _newest(cur: tuple | None, sub: Submission) -> bool:
    return cur is None or (sub.created_at, sub.id) > (cur[0].created_at, cur[0].id)


def chosen_runs(seen: Seen, picked: dict) -> tuple[dict, dict, dict]:
    """The ranked run of each team (the run it chose for this board, else its primary run, else
    its latest scored one; no score is read), each baseline method's newest scored entry, and each
    archived system's newest re-run here: three dicts of (submission, team)."""
    chosen: dict[int, tuple] = {}
    baselines: dict[tuple, tuple] = {}  # (team_id, method_name) -> newest scored baseline entry
    reruns: dict[int, tuple] = {}  # the first run of a system re-run here -> its newest re-run
    for sub, team in seen.candidates:
        if seen.pick(sub.id) is None:
            continue
        if sub.is_baseline or team.is_baseline:
            key = (team.id, sub.method_name)
            if _newest(baselines.get(key), sub):
                baselines[key] = (sub, team)
            continue
        if sub.rerun_of is not None:  # an archived system re-run here: beside the team's own
            if _newest(reruns.get(sub.rerun_of), sub):
                reruns[sub.rerun_of] = (sub, team)
            continue
        cur = chosen.get(team.id)
        if cur is None or _choice_key(sub, picked) > _choice_key(cur[0], picked):
            chosen[team.id] = (sub, team)
    return chosen, baselines, reruns


def row_sources(s: Session, phase: Phase, req: BoardRequest, seen: Seen) -> list[tuple]:
    """The board's rows before their values: (submission, team, note, row type, chosen by), the
    baselines first, then each team's ranked run (a run not shown publicly only to its team and
    the organizers, marked), the re-runs, and the runs an organizer sees marked."""
    picked = board_choices(s, phase, req.board)
    chosen, baselines, reruns = chosen_runs(seen, picked)
    own, organizer = req.own_team, req.organizer
    out: list[tuple] = [
        (sub, team, "", "baseline", "baseline method") for sub, team in baselines.values()
    ]
    for sub, team in chosen.values():
        if not sub.show_publicly:
            if not (organizer or sub.team_id == own):
                continue  # the team's ranked run is not public: no row for others
            out.append((sub, team, "not public", "team", _rule(sub, picked)))
        else:
            out.append((sub, team, "", "team", _rule(sub, picked)))
    for sub, team in reruns.values():
        if sub.show_publicly or organizer or sub.team_id == own:
            out.append((sub, team, "" if sub.show_publicly else "not public", "team", RERUN))
    out.extend(
        (sub, team, note, "team", "") for sub, team, note in seen.extras if seen.pick(sub.id)
    )
    return out
