"""A board's columns and the values its cells read: the primary metric first, then the declared
(or every) metric; a declared board's ranking value and columns; an overall board's value and its
boards' values; what a result holds for a column, and the words saying why it holds nothing."""

from __future__ import annotations

import math
from typing import Optional

from scorer.metrics import fold_key
from scorer.overall import rule_direction
from server.boards.board_model import Column
from server.models import Phase
from tasks.bundle_models import BoardSpec

STALE_NOTE = "stale: scored against an earlier gold or scorer version; being rescored"
RERUN = "re-run of an archived system"  # a re-run row's `chosen_by`


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


def why_empty(result: dict | None, subset: str) -> str:
    """The result's notes that say why `subset` has no value (e.g. a macro over languages some of
    which the submission leaves out): the subset's own notes, then what the file lacks."""
    notes = (result or {}).get("notes") or []
    own = [n for n in notes if n.startswith(f"{subset}:")]
    lacking = [n for n in notes if n.endswith(": not in the submission") and n not in own]
    return "; ".join(own + lacking)


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
