"""The phase's release rule on a live board (scorer.release): what each team row shows of its
ranked run given the team's runs before it."""

from __future__ import annotations

from scorer.release import Rule, released
from server.boards import ladder
from server.boards.columns import _value
from server.boards.query import _latest_scores, _ranked_runs, passes
from server.domain.provenance import is_current
from server.models import Phase


def release_rule_of(phase: Phase):
    """The phase's release rule (scorer.release.Rule), or None where it shows scores exactly."""
    if not phase.release_rule:
        return None
    rule = Rule.parse(phase.release_rule)
    return None if rule.kind == "exact" else rule


RELEASE_NOTE = "released by the phase's release rule"


def _release_ladder(
    s, phase, rows, cols, rule, rank_parts, banned, frozen_at, board, fields, pick, provenance
) -> None:
    """The ladder (scorer.release) on a live board: each team row shows what its ranked run
    releases given the team's runs before it on this board, in the order made (the best released
    value, unless the run beat it by eta); the other columns are not shown. The parameter-free
    ladder needs the runs' resamples: server.boards.ladder."""
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
    if rule.kind == ladder.KIND:  # released by the statistics job, from the runs' resamples
        ladder.hold(rows, by_team, {sub.id: sub.score_attempt for sub, _ in runs})
        return
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
