"""A board as figures for the overview paper (matplotlib, SVG or PDF): the primary score of every
ranked row with its bootstrap interval, coloured by cluster; each team's primary score over time;
and the per-subset scores (TRiC all/oov/iov, SwissGov-RSD per language pair). Rendered from the
board the page shows (its statistics included), once per board version."""

from __future__ import annotations

import io
from datetime import datetime
from types import SimpleNamespace

import numpy as np
from sqlmodel import func, select

from server.domain import people, shown
from server.models import CodeRun, Score, Submission, Team, utcnow

KINDS = ("ci", "time", "subsets", "folds")


def _plt():
    # heavy: matplotlib loads only when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    # heavy: matplotlib loads only when a figure is drawn
    import matplotlib.pyplot as plt

    # team names are text, never mathtext ("$" is a character); SVG ids stable across renders
    plt.rcParams.update(
        {
            "svg.hashsalt": "palimpsest",
            "svg.fonttype": "none",
            "font.size": 9,
            "text.parse_math": False,
        }
    )
    return plt


def render(board, history: dict[str, list[tuple[datetime, float]]], fmt: str, kinds=KINDS) -> bytes:
    """The figure of `kinds` panels as SVG or PDF bytes (deterministic for the same board)."""
    plt = _plt()
    rows = [
        r
        for r in board.rows
        if r.values.get(board.primary.key) is not None and r.row_type != "human"
    ]
    ranked = [r for r in rows if r.rank is not None]
    subsets = [
        c
        for c in board.columns
        if c.metric == board.primary.metric and c.subset != board.primary.subset and not c.stat
    ]
    folds = [c for c in board.columns if c.stat == "fold"]  # a cross-validated board's folds
    panels = [k for k in kinds if (k != "subsets" or subsets) and (k != "folds" or folds)]
    height = {
        "ci": 0.35 * max(3, len(rows)) + 1.2,
        "time": 3.2,
        "subsets": 0.3 * max(3, len(ranked)) + 1.6,
        "folds": 3.4,
    }
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(7, sum(height[k] for k in panels)),
        gridspec_kw={"height_ratios": [height[k] for k in panels]},
        squeeze=False,
    )
    metric = f"{board.primary.metric} ({board.primary.subset})"
    colors = plt.get_cmap("tab10")
    for ax, kind in zip(axes[:, 0], panels, strict=True):
        if kind == "ci":
            ys = list(range(len(rows)))[::-1]
            for y, r in zip(ys, rows, strict=True):
                v = r.values[board.primary.key]
                c = colors((r.cluster - 1) % 10) if r.cluster else "0.5"
                if r.ci and None not in r.ci:
                    ax.errorbar(
                        v, y, xerr=[[v - r.ci[0]], [r.ci[1] - v]], fmt="o", color=c, capsize=3
                    )
                else:
                    ax.plot(v, y, "o", color=c, mfc="white")
            ax.set_yticks(
                ys,
                [
                    f"{r.rank or '–'}. {r.team}"
                    + (" (baseline)" if r.row_type == "baseline" else "")
                    + (f"  [{r.cluster}]" if r.cluster else "")
                    for r in rows
                ],
            )
            ax.set_xlabel(metric + " with its 95 % bootstrap interval; [cluster]")
            on = f", board {board.title or board.board}" if board.board != "main" else ""
            ax.set_title(f"{board.task_id}, {board.phase} phase{on}, {board.part} part")
            ax.grid(axis="x", alpha=0.3)
        elif kind == "time":
            for i, (team, points) in enumerate(sorted(history.items())):
                if points:
                    xs, vs = zip(*sorted(points), strict=True)
                    ax.plot(xs, vs, "o-", color=colors(i % 10), label=team, markersize=3)
            ax.set_ylabel(metric)
            ax.set_title("each team's scored runs over time")
            if history:
                ax.legend(fontsize=7, ncol=2, loc="best")
            ax.grid(alpha=0.3)
            for t in (
                ax.get_xticklabels()
            ):  # not fig.autofmt_xdate(): it blanks the other panels' labels
                t.set_rotation(30)
                t.set_horizontalalignment("right")
        elif kind == "folds":
            x = list(range(len(folds)))
            for i, r in enumerate(rows):
                vals = [r.values.get(c.key) for c in folds]
                ax.plot(
                    x,
                    [v if v is not None else float("nan") for v in vals],
                    "o-",
                    markersize=3,
                    color=colors(i % 10),
                    label=(f"{r.team}: {r.method_name}" if r.method_name else r.team)[:60],
                )
            ax.set_xticks(x, [c.fold for c in folds])
            ax.set_xlabel("fold")
            ax.set_ylabel(metric)
            ax.set_title(f"{board.primary.metric} on each fold (the board shows their mean ± std)")
            ax.legend(fontsize=6, loc="best")
            ax.grid(alpha=0.3)
        else:
            width = 0.8 / len(subsets)
            x = np.arange(len(ranked))
            for j, c in enumerate(subsets):
                vals = [r.values.get(c.key) for r in ranked]
                ax.bar(
                    x + j * width,
                    [v if v is not None else 0 for v in vals],
                    width,
                    label=c.subset,
                    color=colors(j % 10),
                )
            ax.set_xticks(
                x + width * (len(subsets) - 1) / 2,
                [r.team for r in ranked],
                rotation=30,
                ha="right",
            )
            ax.set_ylabel(board.primary.metric)
            ax.set_title(f"{board.primary.metric} per subset")
            ax.legend(fontsize=7)
            ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(
        buf, format=fmt, metadata={"Date": None} if fmt == "svg" else {"CreationDate": None}
    )
    plt.close(fig)
    return buf.getvalue()


def snapshot_history(board) -> dict[str, list[tuple[datetime, float]]]:
    """A published snapshot's time panel, drawn from its own rows only (each ranked team's run, as
    (time, primary score)): nothing read from the live rows, so the figure never moves after a
    hide, a rescore or a gold re-import."""
    out: dict[str, list] = {}
    for r in board.rows:
        v = r.values.get(board.primary.key)
        if r.row_type == "team" and r.rank is not None and v is not None:
            out.setdefault(r.team, []).append((r.submitted_at, float(v)))
    return out


def history(
    s,
    board,
    phase,
    until: datetime | None = None,
    labels: dict[int, str] | None = None,
    spec=None,
) -> dict[str, list[tuple[datetime, float]]]:
    """Each team's scored runs on the board's part (not hidden, removed or private to the team),
    as (time, primary score); `labels` (an anonymous board: team id -> "Team N") names the teams
    instead of their names. `spec`: a declared board (tasks.bundle_models.BoardSpec): the runs
    its filter lets in, by its ranking value (read from each run's result); none for an overall
    board."""
    from server.boards.leaderboard import _value, passes  # the boards import the figures

    if spec is not None and getattr(spec, "overall", None) is not None:
        return {}  # an overall board has no runs of its own: its boards' figures draw them
    part = {"private": "private", "public": "public", "whole": "whole"}.get(board.part, "all")
    if part == "public" and phase.public_fraction >= 1.0:
        part = "all"
    value = Score.primary_value if spec is None else Score.result
    at = Submission.created_at
    if phase.blind:  # when its system was submitted, not when the run ended (server.boards.blind)
        ran = (
            select(CodeRun.submission_id, func.min(CodeRun.created_at).label("at"))
            .where(CodeRun.phase_id == phase.id, CodeRun.submission_id.is_not(None))
            .group_by(CodeRun.submission_id)
            .subquery()
        )
        at = func.coalesce(
            ran.c.at, Submission.created_at, type_=Submission.__table__.c.created_at.type
        )
    q = (
        select(Team.name, at, value, Team.id, Submission.facts)
        .join(Submission, Submission.team_id == Team.id)
        .join(
            Score,
            (Score.submission_id == Submission.id) & (Score.attempt == Submission.score_attempt),
        )
        .where(
            Submission.phase_id == phase.id,
            Score.part == part,
            Submission.hidden.is_(False),
            Submission.removed_at.is_(None),
            Submission.show_publicly.is_(True),
            Submission.stale.is_(False),
        )
    )
    if phase.blind:  # a run's point appears at its shown moment, as its row does
        q = q.outerjoin(ran, ran.c.submission_id == Submission.id).where(
            Submission.id.not_in(shown.unshown_outputs(phase.id, utcnow()))
        )
    if phase.frozen and phase.frozen_at:
        q = q.where(Submission.created_at <= phase.frozen_at)
    if until is not None:  # a published snapshot: the runs made before it
        q = q.where(Submission.created_at <= until)
    fields = []
    if spec is not None:  # the board's rules on the competition's fact fields (Track C's)
        comp = people.competition_of_task(s, phase.task_id)
        fields = list(comp.fact_fields or ()) if comp is not None else []
    out: dict[str, list] = {}
    for team, at, v, team_id, facts in s.exec(q):
        if spec is not None:
            if not passes(spec, SimpleNamespace(facts=facts), fields):
                continue
            # the board's own value: a mean over groups (`over`) as the board computes it
            v = _value(v, spec.ranking.subset, spec.ranking.metric, board.primary)
        if labels is not None:
            team = labels.get(team_id, team)
        if v is not None:
            out.setdefault(team, []).append((at, float(v)))
    return out


def forest(rows: list[dict], title: str, measure: str = "multi_kappa") -> bytes:
    """A forest plot (SVG) of one agreement measure within each level of a factor: the point and
    its bootstrap interval per level, the number of items beside its name."""
    plt = _plt()
    shown = [r for r in rows if (r.get(measure) or {}).get("value") is not None]
    fig, ax = plt.subplots(figsize=(7, 0.28 * max(3, len(shown)) + 1.2))
    for y, r in enumerate(reversed(shown)):
        m = r[measure]
        if m.get("low") is not None:
            ax.plot([m["low"], m["high"]], [y, y], color="0.4", lw=1.2)
        ax.plot([m["value"]], [y], "o", color="C0", ms=4)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{r['level']} ({r['items']})" for r in reversed(shown)])
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_xlabel(measure.replace("_", "-"))
    ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def kappa_curve(curve: dict, title: str) -> bytes:
    """The posterior multi-kappa over a covariate (SVG): the median with its 50 % and 89 %
    credible bands, for an average book and marginalised over books (Manjavacas et al., Fig. 3)."""
    plt = _plt()
    pts = curve["points"]
    z = [p["z"] for p in pts]
    views = [v for v in ("average", "marginal") if pts and pts[0].get(v)]
    fig, axes = plt.subplots(1, len(views), figsize=(3.6 * len(views), 3.2), squeeze=False)
    for ax, v in zip(axes[0], views, strict=True):
        for mass, shade in (("89%", "0.85"), ("50%", "0.65")):
            ax.fill_between(
                z, [p[v][mass][0] for p in pts], [p[v][mass][1] for p in pts], color=shade
            )
        ax.plot(z, [p[v]["median"] for p in pts], color="black", lw=1.2)
        ax.set_xlabel(f"{curve['covariate']} (standard deviations from the mean)")
        ax.set_title("an average book" if v == "average" else "marginalised over books")
    axes[0][0].set_ylabel("multi-kappa")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()
