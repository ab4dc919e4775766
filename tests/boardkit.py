"""The boards-per-phase world (the example bundle's evaluation phase with its declared boards, six
teams' runs on it) and the naive references the board tests check against: each board's resampled
values by scipy, and the quadratic rank statistics and pairwise p-values."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from backbone import burst, make_team, submit
from bundlekit import _bundle
from conftest import _make_backend
from scipy.special import ndtr
from sqlalchemy import select

from scorer import bootstrap as bs
from server.models import Phase

TASK = "sts-latin"
PHASE = "evaluation"
B = 200


def _partial(spec, root):
    # a team may cover one genre only (the others are then absent from its file)
    spec["tasks"][0]["partial_groups"] = True


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


@pytest.fixture
def site(request, tmp_path, monkeypatch):
    from server.actions import bundles
    from server.domain import lifecycle

    monkeypatch.setenv("PALIMPSEST_BOOTSTRAP_SAMPLES", str(B))
    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    b.settings.bootstrap_samples = B
    root = _bundle(tmp_path, edit=_partial)
    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=root, via="test", settings=b.settings)
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        lifecycle.edit_phase(
            s,
            p,
            {
                "opens_at": None,
                "closes_at": None,
                "daily_limit": None,
                "total_limit": None,
                "concurrent_limit": None,
            },
            actor=None,
        )
    return b


def _gold(b) -> list[dict]:
    from tasks.store import TaskStore

    path = TaskStore(TASK, b.settings.home).gold("test", "gold.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _predictions(b, noise: float, seed: int, genres=("prose", "verse")) -> dict[str, float]:
    rng = random.Random(seed)
    return {
        g["pair_id"]: round(g["score"] + rng.gauss(0, noise), 4)
        for g in _gold(b)
        if g["genre"] in genres
    }


def _file(pred: dict[str, float]) -> bytes:
    return "".join(json.dumps({"pair_id": k, "score": v}) + "\n" for k, v in pred.items()).encode()


# team -> (noise, genres covered, track); each team submits one run
TEAMS = {
    "alpha": (0.05, ("prose", "verse"), "A"),
    "beta": (0.15, ("prose", "verse"), "B"),
    "gamma": (0.3, ("prose",), "B"),  # prose only: not on the verse board, nor the macro
    "delta": (0.25, ("prose", "verse"), None),  # no track declared
    "eps": (0.4, ("verse",), "A"),  # verse only
    "theta": (0.2, ("prose", "verse"), "B"),
}
# the example's boards are anonymous before publication: "Team N" in the order of first runs
LABEL = {name: f"Team {i}" for i, name in enumerate(TEAMS, 1)}
EXPECTED = {
    # the default board lists every team (a one-genre team unranked, its `all` value empty)
    "main": {"alpha", "beta", "gamma", "delta", "eps", "theta"},
    "prose": {"alpha", "beta", "gamma", "delta", "theta"},
    "verse": {"alpha", "beta", "delta", "eps", "theta"},
    # track B ranks by the value over all pairs: gamma (B, prose only) has none
    "track-b": {"beta", "theta"},
}


def _runs(b) -> dict[str, tuple[int, dict]]:
    out = {}
    for i, (name, (noise, genres, track)) in enumerate(TEAMS.items()):
        team, user = make_team(b, name)
        pred = _predictions(b, noise, i, genres)
        facts = {"track": track} if track else None
        sub = submit(b, team, user, TASK, PHASE, data=_file(pred), facts=facts)
        out[name] = (sub.id, pred)
    burst(b)
    return out


def _app():
    from server import create_app

    return create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})


def _get(app, board: str | None, fmt: str = "json"):
    q = f"?phase={PHASE}" + (f"&board={board}" if board else "")
    ext = "" if fmt == "html" else f".{fmt}"
    return app.test_client().get(f"/tasks/{TASK}/leaderboard{ext}{q}")


def _naive_matrix(
    b, board: dict, preds: dict[str, dict], subset: str, part: str = "public"
) -> tuple[list[dict], np.ndarray]:
    """A board's ranked rows and their resampled values, naively: the phase's one matrix of
    resamples (drawn from its seed over the pairs of its `part`), each row's Spearman on `subset`
    by scipy on an explicitly repeated copy of each resample."""
    from scorer.bootstrap import draw_weights, naive_spearman
    from server.boards import stats

    with b.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        units = stats._gold_part(b.engine, p, b.settings, part)
        seed = p.stats_seed
    gold = [g for g in _gold(b) if g["pair_id"] in units]
    W = draw_weights(["all"] * len(gold), B, seed)
    mask = np.array([subset == "all" or g["genre"] == subset for g in gold])
    g = np.array([x["score"] for x in gold])[mask]
    ranked = [r for r in board["rows"] if r["rank"] is not None]
    M = []
    for r in ranked:
        pred = preds[r["submission_id"]]
        x = np.array([pred.get(u["pair_id"], np.nan) for u in gold])[mask]
        M.append([naive_spearman(g, x, W[k][mask]) for k in range(B)])
    return ranked, np.array(M)


def naive_board_statistics(samples, points, greater_is_better, alpha=0.05) -> dict:
    """The quadratic computation as the boards ran it: an R x R x B boolean array for the ranks and
    a Python loop over the R(R-1)/2 pairs for the p-values."""
    R = samples.shape[0]
    lo_q, hi_q = 100 * alpha / 2, 100 * (1 - alpha / 2)
    ci = []
    for r in range(R):
        x = samples[r][np.isfinite(samples[r])]
        ci.append(
            [float(np.percentile(x, lo_q)), float(np.percentile(x, hi_q))]
            if x.size
            else [None, None]
        )
    sgn = 1.0 if greater_is_better else -1.0
    s = np.where(np.isfinite(samples), sgn * samples, -np.inf)
    ranks = 1 + (s[None, :, :] > s[:, None, :]).sum(axis=1)
    rank_range = [
        [int(np.floor(np.percentile(ranks[r], lo_q))), int(np.ceil(np.percentile(ranks[r], hi_q)))]
        for r in range(R)
    ]
    p = np.ones((R, R))
    for i in range(R):
        for j in range(i + 1, R):
            d = samples[i] - samples[j]
            d = d[np.isfinite(d)]
            obs = points[i] - points[j]
            if d.size < 2 or not np.isfinite(obs):
                continue
            se = float(np.std(d, ddof=1))
            v = (1.0 if obs == 0 else 0.0) if se == 0.0 else float(2.0 * ndtr(-abs(obs) / se))
            p[i, j] = p[j, i] = min(1.0, v)
    adj = bs.holm(p)
    order = sorted(range(R), key=lambda r: (-sgn * points[r]) if np.isfinite(points[r]) else np.inf)
    cluster = [0] * R
    c, head = 0, None
    for r in order:
        if head is None or adj[head, r] < alpha:
            c += 1
            head = r
        cluster[r] = c
    return {"ci": ci, "rank_range": rank_range, "p": p, "p_holm": adj, "cluster": cluster}


def paired_board(seed: int, R: int, B: int, *, ties=False, undefined=False, rounded=False):
    """R systems on B paired resamples: a shared difficulty per resample, systems spread from
    clearly apart to nearly equal, some duplicated (equal scores on every resample)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 0.02, B)
    level = np.sort(rng.uniform(0.4, 0.9, R))[::-1]
    level[1::4] = level[0::4][: level[1::4].size] - rng.uniform(0, 0.004, level[1::4].size)
    samples = level[:, None] + base[None, :] + rng.normal(0, 0.01, (R, B))
    if rounded:  # few distinct values: ties between rows on many resamples
        samples = np.round(samples, 2)
    if ties and R > 3:
        samples[3] = samples[2]  # two runs with the same predictions
    points = samples.mean(axis=1) + rng.normal(0, 0.001, R)
    if ties and R > 3:
        points[3] = points[2]
    if undefined:
        samples[R - 1, rng.choice(B, 5, replace=False)] = np.nan  # undefined on a few resamples
        samples[0, :2] = np.inf
        if R > 5:
            points[R - 2] = np.nan  # a row without a point score ranks last
    return samples, points
