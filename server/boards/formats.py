"""A board's formats: its JSON, CSV and LaTeX (a task-overview paper's table), the words for an
empty cell, and the published snapshot's shape and its exports."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from scorer.metrics import COUNT_METRICS
from server.boards.board_model import Board, Column, Row, clean_name
from server.boards.columns import STALE_NOTE
from server.domain.provenance import public_result


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
    numbered = any(r.run is not None for r in board.rows)  # a blind phase's (server.boards.blind)
    head += ["run"] if numbered else []
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
        ] + (["" if r.run is None else r.run] if numbered else [])
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
