"""A blind phase's live board as everyone but its organizers reads it (the page, its JSON and
CSV, the API, `palimpsest leaderboard`): nothing on it tells when a run ended or what its output
held beyond its scores.

- **No submission's id.** A run's output becomes a submission when the run ends, and its id is
  the site's next: it tells how many outputs of any team arrived before it, hence when the run
  ended. A row names its run instead by the team's own count (`run`: 1, 2, ... in the order the
  team submitted its systems, a file uploaded directly counted among them), and its
  `submitted_at` is when that system was submitted, both fixed before the system ran. Rows of
  equal value keep that order too, never the order their runs ended in.
- **Runs counted at submission.** A team's `runs` are the systems (and files) it submitted in
  the phase, not the outputs that came back: an output arriving would otherwise move the count
  at the moment the run ended, and say whether it wrote one.
- **No scorer's notes before review.** The notes the scorer writes on a result (the subsets an
  output leaves out, why a macro is undefined) depend on the output: a row of a run not released
  as it is (`server.domain.code_runs.disclosed`) carries none, and its empty cells say "not
  computed for this run", a fixed text; once the run is released, its row carries them as any.

The organizers' views, published rankings and open phases are as built."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from server.models import CodeRun, Phase, Submission

__all__ = ["team_rows"]


def _entries(s: Session, phase: Phase):
    """The phase's runs as (team, submitted, kind, id, submission, released) per code run, and
    per submission that no code run made (a file uploaded directly: a baseline's)."""
    runs = s.exec(
        select(
            CodeRun.team_id,
            CodeRun.created_at,
            CodeRun.id,
            CodeRun.submission_id,
            CodeRun.release,
        ).where(CodeRun.phase_id == phase.id)
    ).all()
    made = {sid for _, _, _, sid, _ in runs if sid is not None}
    files = s.exec(
        select(Submission.team_id, Submission.created_at, Submission.id).where(
            Submission.phase_id == phase.id
        )
    ).all()
    out = [(t, at, 0, rid, sid, rel == "release") for t, at, rid, sid, rel in runs]
    out += [(t, at, 1, sid, sid, True) for t, at, sid in files if sid not in made]
    out.sort(key=lambda e: (e[0], e[1], e[2], e[3]))
    return out


def team_rows(s: Session, phase: Phase, board, *, frozen_at: datetime | None = None) -> None:
    """Rewrite the rows of `board` (a live board of the blind `phase`, a copy its caller owns)
    as the module says: `run` and `submitted_at` in place of the submission's id and time,
    `runs` counted at submission, no scorer's notes on a row not released, equal values in the
    order submitted. Does nothing on a phase that is not blind or whose final ranking is
    published (its rows then are the ranking's)."""
    if not phase.blind or phase.published_at is not None:
        return
    number: dict[int, tuple[int, datetime]] = {}  # submission id -> (run number, submitted)
    counts: dict[int, int] = {}
    gated: set[int] = set()
    for team, at, _, _, sid, released in _entries(s, phase):
        if frozen_at is None or at <= frozen_at:
            counts[team] = counts.get(team, 0) + 1
        n = counts.get(team, 0) if (frozen_at is None or at <= frozen_at) else None
        if sid is None:
            continue
        if not released:
            gated.add(sid)
        if sid not in number and n is not None:
            number[sid] = (n, at)
    for r in board.rows:
        if r.row_type == "team" and r.runs is not None:
            r.runs = counts.get(r.team_id, 0)
        sid = r.submission_id
        if sid is None:
            continue
        n, at = number.get(sid, (None, r.submitted_at))
        r.submission_id, r.run, r.submitted_at = None, n, at
        if sid in gated:
            r.notes, r.why_empty = [], ""
    _ties_in_order(board)


def _ties_in_order(board) -> None:
    """Rows of one value (and kind) side by side in the order their systems were submitted."""
    key = board.primary.key
    rows, out, i = board.rows, [], 0
    while i < len(rows):
        j = i + 1
        same = (rows[i].values.get(key), rows[i].row_type == "team")
        while j < len(rows) and (rows[j].values.get(key), rows[j].row_type == "team") == same:
            j += 1
        group = rows[i:j]
        if len(group) > 1 and all(r.run is not None for r in group):
            group.sort(key=lambda r: (r.submitted_at, r.team, r.run))
        out += group
        i = j
    board.rows = out
