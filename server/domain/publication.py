"""Publication: a closed phase's final ranking written once as an immutable snapshot
(`RankingVersion`), with its statistics frozen in it; a correction is a new version with a reason.

The phase's state changes (closing, the revision bump, the audit record) are the lifecycle's; this
module builds the snapshot and writes it in the same transaction.
"""

from __future__ import annotations

import hashlib
import json
import logging

from sqlalchemy import func, select
from sqlmodel import Session

from server.db import after_commit
from server.domain import boards, partitions, snapshot_parts
from server.domain.lifecycle import PENDING, RANKED_RUN_RULE, close, phase_changed, phase_state
from server.exceptions import LifecycleRefused, NotFound
from server.models import BoardRanking, Phase, RankingVersion, Submission, User, utcnow

log = logging.getLogger(__name__)


def ranking_versions(s: Session, phase_id: int) -> list[RankingVersion]:
    return list(
        s.execute(
            select(RankingVersion)
            .where(RankingVersion.phase_id == phase_id)
            .order_by(RankingVersion.version)
        ).scalars()
    )


def board_ranking(s: Session, rv: RankingVersion, board: str) -> BoardRanking | None:
    """A declared board's published ranking in the version `rv`."""
    q = select(BoardRanking).where(BoardRanking.ranking_id == rv.id, BoardRanking.board == board)
    return s.execute(q).scalars().first()


def published_board(s: Session, rv: RankingVersion, board: str | None):
    """The published ranking of one board in the version `rv` (the RankingVersion itself for
    "main" or None), or NotFound naming the boards that version has (a board declared since, or
    removed since, is answered by what was published)."""
    if board in (None, "", "main"):
        return rv
    got = board_ranking(s, rv, board)
    if got is None:
        q = select(BoardRanking.board).where(BoardRanking.ranking_id == rv.id)
        names = ["main", *sorted(s.execute(q).scalars())]
        shown = board if len(board) <= 40 else board[:40] + "…"
        raise NotFound(
            f"version {rv.version} of the final ranking of {rv.task_id}/{rv.phase_name} has no "
            f"board {shown!r} (its boards: {', '.join(names)})"
        )
    return got


def latest_ranking(s: Session, phase_id: int, version: int | None = None) -> RankingVersion | None:
    q = select(RankingVersion).where(RankingVersion.phase_id == phase_id)
    if version is not None:
        q = q.where(RankingVersion.version == version)
    return s.execute(q.order_by(RankingVersion.version.desc()).limit(1)).scalar_one_or_none()


def publish(
    s: Session,
    phase: Phase,
    *,
    task,
    actor,
    settings,
    reason: str = "",
    via: str = "web",
    close_first: bool = False,
) -> RankingVersion:
    """Publish the final ranking of a closed phase as an immutable snapshot (version 1), or a
    correction of it (version n + 1, with a reason). With `close_first`, an open phase is closed
    in the same transaction (the caller's)."""
    # the boards and statistics (scipy) load to publish; the matrix files beside the snapshot
    from server.boards import leaderboard, pairwise

    lb = leaderboard

    reason = " ".join((reason or "").split())[:2000]
    prepare(s, phase)
    if close_first and phase_state(phase) == "open":
        close(s, phase, actor=actor, via=via)
    state = phase_state(phase)
    if state != "closed":
        raise LifecycleRefused(
            f"only a closed phase can be published: the {phase.name} phase of "
            f"{phase.task_id} is {state} (close it first, or close and publish)",
            "phase_open",
        )
    pending = s.execute(
        select(func.count(Submission.id)).where(
            Submission.phase_id == phase.id,
            Submission.status.in_(PENDING),
            Submission.removed_at.is_(None),
        )
    ).scalar_one()
    if pending:
        raise LifecycleRefused(
            f"{pending} submission(s) of the phase are still being scored; publish when "
            "every one is final",
            "pending",
        )
    prev = latest_ranking(s, phase.id)
    if prev is not None and not reason:
        raise LifecycleRefused(
            f"the final ranking of {phase.task_id}/{phase.name} was published as "
            f"version {prev.version}; a correction needs a reason",
            "reason_required",
        )
    now = utcnow()
    version = (prev.version if prev else 0) + 1
    # the snapshot is public: it names the role, never an address (the row keeps the account's id)
    who = "organizer" if isinstance(actor, User) else None
    meta = {
        "version": version,
        "published_at": now.replace(microsecond=0).isoformat() + "Z",
        "published_by": who,
        "reason": reason,
        "rule": RANKED_RUN_RULE,
    }
    matrices: dict = {}  # the full pairwise matrix, frozen beside the snapshot (not in it)
    body = snapshot_body(s, task, phase, settings, meta, matrices=matrices)
    body_json = snapshot_json(body)
    rv = RankingVersion(
        phase_id=phase.id,
        task_id=phase.task_id,
        phase_name=phase.name,
        version=version,
        reason=reason,
        published_by=actor.id if isinstance(actor, User) else None,
        published_at=now,
        sha256=hashlib.sha256(body_json.encode("utf-8")).hexdigest(),
        body_json=body_json,
        body_csv=lb.snapshot_csv(body),
        body_latex=lb.snapshot_latex(body),
    )
    s.add(rv)
    s.flush()
    # the matrix files are written once the publication is committed (a refused or failed
    # publication leaves none); one missing after a crash answers that it was not kept
    frozen = [(rv.sha256, None, matrices)]
    # each declared board's final ranking, in the same version (the phase's published ranking
    # is the set of its boards')
    for spec in boards.of_phase(phase):
        matrices = {}
        b = snapshot_body(s, task, phase, settings, meta, board=spec, matrices=matrices)
        b_json = snapshot_json(b)
        br = BoardRanking(
            ranking_id=rv.id,
            board=spec.name,
            sha256=hashlib.sha256(b_json.encode("utf-8")).hexdigest(),
            body_json=b_json,
            body_csv=lb.snapshot_csv(b),
            body_latex=lb.snapshot_latex(b),
        )
        s.add(br)
        frozen.append((br.sha256, spec.name, matrices))
    after_commit(
        s,
        lambda: [pairwise.freeze(settings, phase.id, version, *f) for f in frozen],
    )
    if phase.published_at is None:
        phase.published_at = now
    changes = ranking_diff(json.loads(prev.body_json), body) if prev else None
    phase_changed(
        s,
        phase,
        actor,
        "ranking.publish" if version == 1 else "ranking.correct",
        via=via,
        version=version,
        reason=reason,
        sha256=rv.sha256,
        changes=changes,
    )
    s.flush()
    return rv


def prepare(s: Session, phase: Phase) -> None:
    """What a publication needs recorded first, each in a transaction of its own and before the
    caller's writes anything (or locks the phase): the statistics' seed and, for a phase with a
    private part published before any scoring, its partition."""
    if phase.stats_seed is None:
        # the seed of the statistics (normally recorded by the worker already)
        partitions.bootstrap_seed(s.get_bind(), phase.id)
        s.refresh(phase)
    if phase.partition_id is None and partitions.phase_has_private_part(phase):
        # published before any scoring: its partition is drawn now (the snapshot's statistics
        # need it)
        partitions.partition_of(s.get_bind(), phase.id)
        s.refresh(phase)


def repeated(
    s: Session, phase: Phase, *, task, settings, reason: str = ""
) -> RankingVersion | None:
    """The newest published version when publishing again now would repeat it: the same reason
    and the same ranking (rebuilt with that version's time and organizer, byte for byte). A
    second click, or a request sent twice, then gets the version the first made."""
    prev = latest_ranking(s, phase.id)
    reason = " ".join((reason or "").split())[:2000]
    if prev is None or (prev.reason or "") != reason or phase_state(phase) != "closed":
        return None
    before = json.loads(prev.body_json)
    meta = before.get("ranking", {})
    again = snapshot_json(
        snapshot_body(s, task, phase, settings, meta, compact=snapshot_parts.is_compact(before))
    )
    return prev if again == prev.body_json else None


def snapshot_body(
    s: Session,
    task,
    phase: Phase,
    settings,
    meta: dict,
    *,
    board=None,
    matrices=None,
    compact: bool = True,
) -> dict:
    """The snapshot of a phase's final ranking as the data stand now, with the publication's
    `meta` (version, time, organizer, reason, rule). `publish` stores it; `server.backup`
    rebuilds it from a restored site to check a published version byte for byte. `board`: one of
    the phase's declared boards (None: the default one); `matrices`, a dict, gets the ranking's
    full pairwise matrices (`server.boards.stats.statistics`). `compact`: the rows' parts in
    the compact form (`server.domain.snapshot_parts`; off only to rebuild a version published
    before it)."""
    # the boards and statistics (scipy) load to publish, not to show a ranking
    from server.boards import leaderboard, stats

    lb = leaderboard
    built = lb.final_board(s, task, phase, settings.home, with_parts=True, board=board)
    built.published = (
        True  # as it will be served: the private ranking with the public part beside it
    )
    lb.add_reference_rows(built, task, settings.home)
    _snapshot_statistics(stats, s, task, phase, built, settings, matrices)
    body = lb.snapshot_dict(built, meta, secret=settings.secret_key)
    return snapshot_parts.compact(body) if compact else body


def snapshot_json(body: dict) -> str:
    """The stored bytes of a snapshot (`RankingVersion.body_json`)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _snapshot_statistics(
    stats, s: Session, task, phase: Phase, board, settings, matrices=None
) -> None:
    """Freeze the board's statistics into the snapshot: intervals, rank ranges, p-values and
    clusters of the ranked part, and the public part's intervals beside them (`stats`: the
    module `server.boards.stats`, loaded by the caller)."""
    try:
        snap = stats.for_snapshot(settings, s.get_bind(), task, phase, board, matrices=matrices)
    except Exception as e:  # noqa: BLE001 — publication never fails for its statistics
        log.warning(
            "statistics of the snapshot of phase %s not computed (%s: %s)",
            phase.id,
            type(e).__name__,
            e,
        )
        stats.attach(board, None, reason="no interval: its computation failed at publication")
        return
    stats.attach(board, snap["ranked"])
    if "public" in snap:
        board.public_stats = snap["public"]
        for r in board.rows:
            r.public_ci = snap["public"]["rows"].get(str(r.submission_id), {}).get("ci")


def ranking_diff(old: dict, new: dict) -> dict:
    """What changed between two published versions: rows added, removed, re-ranked or re-scored."""

    def key(r):
        return (
            (r["row_type"], r["team"], r.get("method_name", ""))
            if r["row_type"] != "team"
            else ("team", r["team"])
        )

    a = {key(r): r for r in old.get("rows", [])}
    b = {key(r): r for r in new.get("rows", [])}
    out = {"added": [], "removed": [], "changed": []}
    for k in b.keys() - a.keys():
        out["added"].append(
            {"team": b[k]["team"], "submission_id": b[k]["submission_id"], "rank": b[k]["rank"]}
        )
    for k in a.keys() - b.keys():
        out["removed"].append(
            {"team": a[k]["team"], "submission_id": a[k]["submission_id"], "rank": a[k]["rank"]}
        )
    for k in a.keys() & b.keys():
        ra, rb = a[k], b[k]
        diff = {
            f: [ra.get(f), rb.get(f)] for f in ("rank", "submission_id") if ra.get(f) != rb.get(f)
        }
        vals = {
            m: [ra["metrics"].get(m), rb["metrics"].get(m)]
            for m in rb["metrics"]
            if ra["metrics"].get(m) != rb["metrics"].get(m)
        }
        if vals:
            diff["metrics"] = vals
        if diff:
            out["changed"].append({"team": rb["team"], **diff})
    for v in out.values():
        v.sort(key=lambda r: r.get("team") or "")
    return out
