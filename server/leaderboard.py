"""Leaderboards: one row per team, ranked by the task's primary metric, rendered once per change.

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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from sqlalchemy import and_, or_
from sqlmodel import Session, select

from server.models import Phase, Score, Submission, Team

# ----------------------------------------------------------------------------- the shape


@dataclass
class Column:
    subset: str
    metric: str
    greater_is_better: bool
    primary: bool = False

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.metric}"


@dataclass
class Row:
    rank: Optional[int]
    row_type: str  # "team" or "baseline"
    team: str
    team_id: int
    submission_id: int
    method_name: str
    url: str
    submitted_at: datetime
    is_primary: bool
    values: dict[str, Optional[float]]
    public_value: Optional[float] = None  # after publication: the public-part primary value
    public_rank: Optional[int] = None
    note: str = ""  # e.g. "hidden", "not public" (only in views that may see those)
    why: str = ""  # the scorer's reason when the primary value is empty (its notes on that subset)


@dataclass
class Board:
    task_id: str
    phase: str
    split: str
    part: str  # the gold part ranked on: "public", "private" or "all"
    published: bool
    frozen: bool
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    version: str = ""
    closed: bool = False  # a closed leaderboard: shown to organizers only, empty for everyone else

    @property
    def primary(self) -> Column:
        return self.columns[0]


# ----------------------------------------------------------------------------- building


def columns_for(task) -> list[Column]:
    """The primary metric first, then every metric of every subset in the task's order."""
    psub, pmet = task.primary
    cols = [Column(psub, pmet, task.greater_is_better, primary=True)]
    for sub in task.subsets:
        for m in task.metrics:
            if (sub, m) != (psub, pmet):
                cols.append(Column(sub, m, task.metric_direction(m)))
    return cols


def _value(result: dict | None, subset: str, metric: str) -> Optional[float]:
    if not result:
        return None
    v = (result.get("metrics") or {}).get(subset, {}).get(metric)
    if v is None or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)


def _why_empty(result: dict | None, subset: str, metric: str) -> str:
    """The scorer's notes on `subset` when its primary value is empty (e.g. SwissGov-RSD's macro
    of a submission that leaves out a language pair)."""
    if not result or _value(result, subset, metric) is not None:
        return ""
    return "; ".join(n.split(": ", 1)[1] for n in result.get("notes") or () if n.startswith(f"{subset}: "))


def _latest_scores(s: Session, subs: list[Submission], parts: tuple[str, ...]) -> dict[tuple[int, str], dict]:
    """The result per (submission, part) of the attempt that counts: the submission's
    `score_attempt` when the backbone recorded one, else its latest."""
    out: dict[tuple[int, str], tuple[int, dict]] = {}
    counted = {sub.id: getattr(sub, "score_attempt", None) for sub in subs}
    sub_ids = list(counted)
    for i in range(0, len(sub_ids), 900):  # stay under SQLite's parameter limit
        chunk = sub_ids[i:i + 900]
        q = select(Score.submission_id, Score.part, Score.attempt, Score.result).where(
            Score.submission_id.in_(chunk), Score.part.in_(parts))
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


def build_board(s: Session, task, phase: Phase, *, audience: str = "public",
                show_private: bool = False, include_closed: bool = False) -> Board:
    """The leaderboard of a phase as `audience` ("public", "team:<id>" or "organizer") may see it.

    `show_private` (organizers only: a preview of the final ranking) ranks on the private part
    before publication; otherwise private scores are read only once the phase is published.
    `include_closed` (organizers' exports) shows the public view of a closed board.
    """
    published = phase.published_at is not None
    use_private = published or show_private
    own_team = int(audience.split(":", 1)[1]) if audience.startswith("team:") else None
    organizer = audience == "organizer"
    if not phase.leaderboard_open and not organizer and not include_closed:
        # every caller (pages, API, exports) gets nothing from a closed board
        return Board(task_id=task.id, phase=phase.name, split=phase.split, part="public", published=False,
                     frozen=bool(phase.frozen), columns=columns_for(task), closed=True)

    # scored, or being rescored with the scores of an earlier attempt still standing
    q = (select(Submission, Team).join(Team, Team.id == Submission.team_id)
         .where(Submission.phase_id == phase.id,
                or_(Submission.status == "scored",
                    and_(Submission.status.in_(("queued", "running")), Submission.score_attempt.is_not(None)))))
    candidates = []
    for sub, team in s.exec(q):
        note = ""
        if sub.removed_at is not None:
            if not organizer:
                continue
            note = "removed"
        elif sub.hidden:
            if not organizer:
                continue
            note = "hidden"
        elif not sub.show_publicly:
            if not (organizer or sub.team_id == own_team):
                continue
            note = "not public"
        if phase.frozen and phase.frozen_at and sub.created_at > phase.frozen_at and not organizer:
            continue
        candidates.append((sub, team, note))

    # ranked part and, after publication, the public part beside it
    if use_private:
        rank_parts = ("private", "all")
    elif phase.public_fraction >= 1.0:
        rank_parts = ("public", "all")
    else:
        # a hidden test gold split into parts: never read anything but its public part
        rank_parts = ("public",)
    parts = tuple(dict.fromkeys(rank_parts + (("public",) if use_private else ())))
    scores = _latest_scores(s, [c[0] for c in candidates], parts)

    cols = columns_for(task)
    prim = cols[0]

    def pick(sid: int) -> tuple[str, dict] | None:
        for p in rank_parts:
            r = scores.get((sid, p))
            if r is not None:
                return p, r
        return None

    best: dict[int, tuple] = {}  # team_id -> (sub, team, note, result, part)
    rows_src: list[tuple] = []
    baselines: dict[tuple, tuple] = {}  # (team_id, method_name) -> newest scored baseline entry
    gib = prim.greater_is_better
    for sub, team, note in candidates:
        got = pick(sub.id)
        if got is None:
            continue
        part, result = got
        if sub.is_baseline or team.is_baseline:
            # one row per baseline method: a re-run replaces the entry it repeats
            key = (team.id, sub.method_name)
            cur = baselines.get(key)
            if cur is None or (sub.created_at, sub.id) > (cur[0].created_at, cur[0].id):
                baselines[key] = (sub, team, note, result, part, "baseline")
            continue
        v = _value(result, prim.subset, prim.metric)
        cur = best.get(team.id)
        if cur is None:
            best[team.id] = (sub, team, note, result, part)
            continue
        csub, cv = cur[0], _value(cur[3], prim.subset, prim.metric)
        # a marked primary run wins; otherwise the best value, the earlier submission on a tie
        if sub.is_primary != csub.is_primary:
            if sub.is_primary:
                best[team.id] = (sub, team, note, result, part)
            continue
        if cv is None or (v is not None and ((v > cv) if gib else (v < cv))) or \
                (v == cv and (sub.created_at, sub.id) < (csub.created_at, csub.id)):
            best[team.id] = (sub, team, note, result, part)
    rows_src.extend(baselines.values())
    rows_src.extend(b + ("team",) for b in best.values())

    rows = []
    for sub, team, note, result, part, kind in rows_src:
        pub = _value(scores.get((sub.id, "public")), prim.subset, prim.metric) if use_private else None
        rows.append(Row(rank=None, row_type=kind, team=team.name, team_id=team.id, submission_id=sub.id,
                        method_name=sub.method_name, url=sub.url, submitted_at=sub.created_at,
                        is_primary=sub.is_primary,
                        values={c.key: _value(result, c.subset, c.metric) for c in cols},
                        public_value=pub, note=note, why=_why_empty(result, prim.subset, prim.metric)))

    team_rows = [r for r in rows if r.row_type == "team"]
    for r, rk in zip(team_rows, _rank([r.values[prim.key] for r in team_rows], gib)):
        r.rank = rk
    if use_private:
        for r, rk in zip(team_rows, _rank([r.public_value for r in team_rows], gib)):
            r.public_rank = rk

    def sort_key(r: Row):
        v = r.values[prim.key]
        missing = v is None
        return (missing, -(v or 0.0) if gib else (v or 0.0), r.row_type != "team", r.submitted_at, r.submission_id)

    rows.sort(key=sort_key)
    return Board(task_id=task.id, phase=phase.name, split=phase.split,
                 part="private" if use_private else "public",
                 published=published, frozen=bool(phase.frozen), columns=cols, rows=rows)


# ----------------------------------------------------------------------------- output


def to_dict(board: Board) -> dict[str, Any]:
    """The declared JSON shape of a leaderboard."""
    return {
        "task": board.task_id,
        "phase": board.phase,
        "split": board.split,
        "ranked_on": board.part,
        "published": board.published,
        "frozen": board.frozen,
        **({"closed": True} if board.closed else {}),
        "primary": {"subset": board.primary.subset, "metric": board.primary.metric,
                    "greater_is_better": board.primary.greater_is_better},
        "columns": [{"key": c.key, "subset": c.subset, "metric": c.metric,
                     "greater_is_better": c.greater_is_better, "primary": c.primary} for c in board.columns],
        "rows": [{
            "rank": r.rank, "row_type": r.row_type, "team": r.team, "submission_id": r.submission_id,
            "method_name": r.method_name, "url": r.url,
            "submitted_at": r.submitted_at.replace(microsecond=0).isoformat() + "Z",
            "primary_run": r.is_primary, "metrics": r.values,
            **({"public_primary": r.public_value, "public_rank": r.public_rank} if board.published else {}),
            **({"note": r.note} if r.note else {}),
            **({"why_empty": r.why} if r.why else {}),
        } for r in board.rows],
    }


def to_json(board: Board) -> bytes:
    return json.dumps(to_dict(board), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def to_csv(board: Board) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = ["rank", "row_type", "team", "method_name", "submitted_at", "submission_id"]
    head += [c.key for c in board.columns]
    if board.published:
        head += ["public_primary", "public_rank"]
    w.writerow(head)
    for r in board.rows:
        line = ["" if r.rank is None else r.rank, r.row_type, _csv_safe(r.team), _csv_safe(r.method_name),
                r.submitted_at.replace(microsecond=0).isoformat() + "Z", r.submission_id]
        line += ["" if r.values[c.key] is None else repr(r.values[c.key]) for c in board.columns]
        if board.published:
            line += ["" if r.public_value is None else repr(r.public_value),
                     "" if r.public_rank is None else r.public_rank]
        w.writerow(line)
    return buf.getvalue().encode("utf-8")


def _csv_safe(s: str) -> str:
    # a cell starting with = + - @ runs as a formula in spreadsheets (CSV injection)
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def latex_escape(s: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in s)


def to_latex(board: Board, *, max_metric_columns: int = 6, caption: str | None = None) -> str:
    """A booktabs table for a task-overview paper: the primary metric first, best in bold."""
    cols = board.columns[:max_metric_columns]
    best = {}
    for c in cols:
        vals = [r.values[c.key] for r in board.rows if r.row_type == "team" and r.values[c.key] is not None]
        if vals:
            best[c.key] = max(vals) if c.greater_is_better else min(vals)
    spec = "r l l " + " ".join("r" for _ in cols) + (" r" if board.published else "")
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    head = ["\\#", "Team", "Method"] + [latex_escape(f"{c.metric} ({c.subset})") + (r" $\uparrow$" if c.greater_is_better else r" $\downarrow$") for c in cols]
    if board.published:
        head.append("public")
    lines.append(" & ".join(head) + r" \\")
    lines.append(r"\midrule")
    for r in board.rows:
        cells = ["" if r.rank is None else str(r.rank),
                 latex_escape(r.team) + (r" \textit{(baseline)}" if r.row_type == "baseline" else ""),
                 latex_escape(r.method_name)]
        for c in cols:
            v = r.values[c.key]
            if v is None:
                cells.append("--")
            else:
                t = f"{v:.4f}" if c.metric != "n" else f"{int(v)}"
                cells.append(rf"\textbf{{{t}}}" if best.get(c.key) == v and r.row_type == "team" else t)
        if board.published:
            cells.append("--" if r.public_value is None else f"{r.public_value:.4f}")
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    cap = caption or (f"Results of {board.task_id} ({board.phase} phase, ranked on the "
                      f"{board.part} part of the gold by {board.primary.metric} on {board.primary.subset}).")
    lines += [rf"\caption{{{latex_escape(cap)}}}", rf"\label{{tab:{latex_escape(board.task_id)}-{latex_escape(board.phase)}}}",
              r"\end{table}", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the cache

# One SQL statement tells whether anything a leaderboard shows has changed: the phase's own state,
# whose revision is bumped by every visibility change (by the web side itself, and for changes
# made elsewhere -- the API, the CLI, the workers -- by a trigger on the submission table), and
# the newest score anywhere. Where the trigger cannot be installed, a fingerprint of the phase's
# submissions' flags is computed instead (correct, but O(submissions) per request).
_PHASE_COLUMNS = """p.id, p.name, p.split, p.revision, p.frozen, p.frozen_at, p.published_at, p.leaderboard_open,
       p.public_fraction, p.opens_at, (SELECT max(id) FROM score) AS smax"""
_VERSION_SQL = f"SELECT {_PHASE_COLUMNS}, 0 AS flags FROM phase p WHERE p.task_id = :task"
_VERSION_SQL_SCAN = f"""
SELECT {_PHASE_COLUMNS},
       (SELECT coalesce(sum(s.id * ((CASE WHEN s.hidden THEN 1 ELSE 0 END)
                                  + (CASE WHEN s.removed_at IS NOT NULL THEN 2 ELSE 0 END)
                                  + (CASE WHEN s.show_publicly THEN 0 ELSE 4 END)
                                  + (CASE WHEN s.is_primary THEN 8 ELSE 0 END)
                                  + (CASE WHEN s.status = 'scored' THEN 16 ELSE 0 END)
                                  + 32 * coalesce(s.score_attempt, 0))), 0)
          FROM submission s WHERE s.phase_id = p.id) AS flags
FROM phase p WHERE p.task_id = :task
"""

_WATCHED = ("hidden", "removed_at", "show_publicly", "is_primary", "score_attempt", "method_name")

_SQLITE_TRIGGER = f"""
CREATE TRIGGER IF NOT EXISTS palimpsest_board_revision AFTER UPDATE ON submission FOR EACH ROW
WHEN {" OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in _WATCHED)}
     OR (OLD.status = 'scored') IS NOT (NEW.status = 'scored')
BEGIN UPDATE phase SET revision = revision + 1 WHERE id = NEW.phase_id; END
"""

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION palimpsest_board_revision() RETURNS trigger AS $$
BEGIN
  IF {" OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _WATCHED)}
     OR (OLD.status = 'scored') IS DISTINCT FROM (NEW.status = 'scored') THEN
    UPDATE phase SET revision = revision + 1 WHERE id = NEW.phase_id;
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql
"""
_PG_TRIGGER = """
CREATE TRIGGER palimpsest_board_revision AFTER UPDATE ON submission FOR EACH ROW
EXECUTE FUNCTION palimpsest_board_revision()
"""


def install_triggers(engine) -> bool:
    """Install the trigger that bumps a phase's revision when one of its submissions changes in a
    way a leaderboard shows; False when it could not be (then versions are computed by a scan)."""
    import logging

    try:
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.exec_driver_sql(_SQLITE_TRIGGER)
            elif engine.dialect.name == "postgresql":
                exists = conn.exec_driver_sql(
                    "SELECT 1 FROM pg_trigger WHERE tgname = 'palimpsest_board_revision'").first()
                if not exists:
                    conn.exec_driver_sql(_PG_FUNCTION)
                    conn.exec_driver_sql(_PG_TRIGGER)
            else:
                return False
        return True
    except Exception as e:  # noqa: BLE001 — e.g. two workers racing at start-up: check again
        try:
            with engine.connect() as conn:
                if engine.dialect.name == "postgresql":
                    return bool(conn.exec_driver_sql(
                        "SELECT 1 FROM pg_trigger WHERE tgname = 'palimpsest_board_revision'").first())
                return bool(conn.exec_driver_sql(
                    "SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                    "AND name = 'palimpsest_board_revision'").first())
        except Exception:  # noqa: BLE001
            pass
        logging.getLogger(__name__).warning("leaderboard trigger not installed (%s); versions scan instead", e)
        return False


@dataclass
class PhaseState:
    id: int
    name: str
    split: str
    leaderboard_open: bool
    opens_at: Optional[datetime]
    version: str


def _raw_rows(engine, sql, task_id: str) -> list[tuple]:
    # the DBAPI directly: this runs on every leaderboard request, and SQLAlchemy's statement
    # machinery would cost more than the query itself
    stmt = sql if engine.dialect.paramstyle != "pyformat" else sql.replace(":task", "%(task)s")
    conn = engine.raw_connection()
    try:
        cur = conn.cursor()
        cur.execute(stmt, {"task": task_id})
        rows = cur.fetchall()
        cur.close()
        return rows
    finally:
        conn.close()


def phase_states(engine, task_id: str, *, triggers: bool = True) -> list[PhaseState]:
    """Every phase of a task with the version of its leaderboard, in one query."""
    out = []
    for row in _raw_rows(engine, _VERSION_SQL if triggers else _VERSION_SQL_SCAN, task_id):
        (pid, name, split, rev, frozen, frozen_at, published_at, lb_open, frac, opens_at, smax, flags) = row
        v = f"{pid}:{rev}:{int(bool(frozen))}:{frozen_at}:{published_at}:{int(bool(lb_open))}:{frac}:{smax}:{flags}"
        if isinstance(opens_at, str):  # SQLite through a raw connection
            opens_at = datetime.fromisoformat(opens_at)
        out.append(PhaseState(pid, name, split, bool(lb_open), opens_at,
                              hashlib.sha1(v.encode()).hexdigest()[:16]))
    return out


class RenderCache:
    """Rendered leaderboards per (task, phase, audience, format), reused while the version holds."""

    def __init__(self, max_entries: int = 512):
        self._d: dict[tuple, tuple[str, Any]] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.renders = 0

    def get(self, key: tuple, version: str, render):
        hit = self._d.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = render()
        with self._lock:
            self.renders += 1
            if len(self._d) >= self.max_entries:
                self._d.clear()
            self._d[key] = (version, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._d.clear()


def bump_revision(s: Session, phase: Phase) -> None:
    """Mark a phase's leaderboard as changed (in the caller's transaction)."""
    phase.revision = (phase.revision or 0) + 1
    s.add(phase)
