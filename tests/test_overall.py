"""Overall rankings over a phase's boards (issue 61): each rule's value, on point values and on
every resample, equals a direct loop over teams and boards; a team missing a board is placed as
declared."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pytest
from browserkit import driver  # noqa: F401  (Chromium, its console read)

from scorer.overall import MISSING, RULES, boards_won, combine, naive_combine


def _world(seed=0, K=3, n=7, B=40):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 0.1, size=(K, n, B)).round(2)  # rounded: ties happen
    present = rng.random((K, n)) > 0.25
    present[:, 0] = True  # one team on every board
    present[:, 1] = True
    return x, present, [True, True, False][:K]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("missing", MISSING)
def test_each_rule_equals_a_direct_loop_on_every_resample(rule, missing):
    x, present, dirs = _world()
    if rule == "mean":
        dirs = [True] * len(dirs)
    got = combine(x, present, dirs, rule, missing)
    assert got.shape == x.shape[1:]
    for b in range(x.shape[2]):
        want = naive_combine(x[:, :, b].tolist(), present.tolist(), dirs, rule, missing)
        for i, w in enumerate(want):
            if math.isnan(w):
                assert np.isnan(got[i, b]), (rule, missing, i, b)
            else:
                assert got[i, b] == pytest.approx(w, abs=1e-12), (rule, missing, i, b)
    # point values: the same function on a (K, n) array
    pts = combine(x[:, :, 0], present, dirs, rule, missing)
    assert np.array_equal(np.isnan(pts), np.isnan(got[:, 0]))
    np.testing.assert_allclose(pts[~np.isnan(pts)], got[~np.isnan(pts), 0])


def test_a_team_missing_a_board_is_placed_as_declared():
    # three teams, two boards; team 2 is not on board 1
    x = np.array([[0.9, 0.5, 0.7], [0.8, 0.6, np.nan]])
    present = np.array([[True, True, True], [True, True, False]])
    for rule in RULES:
        for missing in ("leave-out", "unranked"):
            got = combine(x, present, [True, True], rule, missing)
            assert np.isnan(got[2]) and not np.isnan(got[:2]).any()
        last = combine(x, present, [True, True], rule, "last")
        assert not np.isnan(last).any()
    # ranked last on the board it misses: its mean takes that board's worst value
    assert combine(x, present, [True, True], "mean", "last")[2] == pytest.approx((0.7 + 0.6) / 2)
    # mean rank: 2nd on board 0, 3rd (last) on board 1
    assert combine(x, present, [True, True], "mean-rank", "last")[2] == pytest.approx(2.5)
    # Borda: a point for each team beaten on a board, none where absent (team 0 beats two teams
    # on board 0 and the one other team board 1 has)
    assert combine(x, present, [True, True], "borda", "last").tolist() == [3.0, 0.0, 1.0]


def _naive_won(V, X, present, dirs, alpha):
    """Dror et al.'s count for each ordered pair, directly: per board a one-sided p-value from
    the resampled differences, the partial conjunction tests in turn (Bonferroni), alpha split
    over the ordered pairs."""
    from statistics import NormalDist, stdev

    K, n = len(V), len(V[0])
    a = alpha / (n * (n - 1))
    out = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            ps = []
            for k in range(K):
                if present[k][i] and present[k][j]:
                    s = 1 if dirs[k] else -1
                    d = [s * (X[k][i][b] - X[k][j][b]) for b in range(len(X[k][i]))]
                    obs = s * (V[k][i] - V[k][j])
                    ps.append(1 - NormalDist().cdf(obs / stdev(d)))
            ps.sort()
            u = 0
            while u < len(ps) and (len(ps) - u) * ps[u] <= a:
                u += 1
            out[i][j] = u
    return out


def test_better_on_at_least_k_boards_equals_a_direct_count():
    rng = np.random.default_rng(3)
    K, n, B = 5, 4, 300
    truth = np.array([0.8, 0.7, 0.69, 0.5])
    X = truth[None, :, None] + rng.normal(0, 0.02, size=(K, n, B))
    V = truth[None, :] + rng.normal(0, 0.005, size=(K, n))
    present = np.ones((K, n), dtype=bool)
    present[4, 2] = False  # team 2 misses a board: its pairs count over the other four
    dirs = [True, True, True, False, True]
    got = boards_won(V, X, present, dirs, 0.05)
    want = _naive_won(V.tolist(), X.tolist(), present.tolist(), dirs, 0.05)
    assert got.tolist() == want
    # the clear winner is shown better than the last team on the boards ranked upward, never on
    # the one ranked downward (where a higher value is worse)
    assert got[0, 3] == 4 and got[3, 0] == 1
    assert got[1, 2] == 0 and got[2, 1] == 0  # too close to claim


def test_a_mean_over_boards_of_opposite_directions_is_refused():
    with pytest.raises(ValueError, match="opposite"):
        combine(np.zeros((2, 3)), np.ones((2, 3)), [True, False], "mean", "last")


# ----------------------------------------------------------------------------- on a phase

OVERALL = {
    # name: (rule, missing)
    "overall": ("mean", "unranked"),
    "overall-last": ("mean-rank", "last"),
    "overall-borda": ("borda", "leave-out"),
}


def _with_overall(spec, root):
    from boardkit import _partial

    _partial(spec, root)
    (ev,) = [p for p in spec["tasks"][0]["phases"] if p["name"] == "evaluation"]
    for name, (rule, missing) in OVERALL.items():
        ev["boards"].append(
            {
                "name": name,
                "title": f"Overall ({rule})",
                "overall": {"boards": ["prose", "verse"], "rule": rule, "missing": missing},
            }
        )


@pytest.fixture
def overall_site(request, tmp_path, monkeypatch):
    from boardkit import PHASE, TASK, B
    from bundlekit import _bundle
    from conftest import _make_backend
    from sqlalchemy import select

    from server.actions import bundles
    from server.domain import lifecycle
    from server.models import Phase

    monkeypatch.setenv("PALIMPSEST_BOOTSTRAP_SAMPLES", str(B))
    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    b.settings.bootstrap_samples = B
    root = _bundle(tmp_path, edit=_with_overall)
    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=root, via="test", settings=b.settings)
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        open_all = dict.fromkeys(
            ("opens_at", "closes_at", "daily_limit", "total_limit", "concurrent_limit")
        )
        lifecycle.edit_phase(s, p, open_all, actor=None)
    yield b
    from tasks import unregister_declared

    unregister_declared(TASK)


def test_an_overall_board_equals_a_direct_loop_over_its_boards_resamples(
    overall_site,
    driver,  # noqa: F811  (browserkit's fixture)
):
    from boardkit import LABEL, PHASE, TASK, B, _app, _get, _naive_matrix, _runs

    runs = _runs(overall_site)
    preds = {sid: pred for sid, pred in runs.values()}
    app = _app()
    comps = {}
    for name in ("prose", "verse"):
        board = _get(app, name).get_json()
        ranked, M = _naive_matrix(overall_site, board, preds, name)
        comps[name] = {
            r["team"]: (r["metrics"][f"{name}/spearman"], M[i]) for i, r in enumerate(ranked)
        }
    for name, (rule, missing) in OVERALL.items():
        r = _get(app, name)
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
        board = r.get_json()
        assert board["board"] == name and board["overall"]["rule"] == rule
        assert board["statistics"]["status"] == "ready", name
        assert [c["key"] for c in board["columns"]] == [
            f"{name}/{rule}",
            "prose/spearman",
            "verse/spearman",
        ]
        teams = sorted(set(comps["prose"]) | set(comps["verse"]))
        present = [[t in comps[k] for t in teams] for k in ("prose", "verse")]
        pts = [[comps[k][t][0] if t in comps[k] else np.nan for t in teams] for k in comps]
        want = naive_combine(pts, present, [True, True], rule, missing)
        samples = np.array(
            [
                naive_combine(
                    [
                        [comps[k][t][1][b] if t in comps[k] else np.nan for t in teams]
                        for k in comps
                    ],
                    present,
                    [True, True],
                    rule,
                    missing,
                )
                for b in range(B)
            ]
        ).T
        rows = {row["team"]: row for row in board["rows"]}
        # gamma covers prose only, eps verse only: placed as declared
        partial = {LABEL["gamma"], LABEL["eps"]}
        if missing == "leave-out":
            assert set(rows) == set(teams) - partial
        else:
            assert set(rows) == set(teams)
        ranked = [i for i, t in enumerate(teams) if not math.isnan(want[i])]
        gib = rule != "mean-rank"
        sgn = 1.0 if gib else -1.0
        for i, t in enumerate(teams):
            if t not in rows:
                continue
            row = rows[t]
            if math.isnan(want[i]):
                assert missing == "unranked" and t in partial
                assert row["rank"] is None and row["metrics"][f"{name}/{rule}"] is None
                assert "unranked" in row["why_empty"], row
                continue
            assert row["metrics"][f"{name}/{rule}"] == pytest.approx(want[i], abs=1e-9)
            assert row["rank"] == 1 + sum(1 for j in ranked if sgn * want[j] > sgn * want[i])
            lo, hi = np.percentile(samples[i], [2.5, 97.5])
            assert row["ci"] == pytest.approx([lo, hi], abs=1e-9), (name, t)
            ranks = [
                1 + sum(1 for j in ranked if sgn * samples[j, b] > sgn * samples[i, b])
                for b in range(B)
            ]
            rr = [
                int(np.floor(np.percentile(ranks, 2.5))),
                int(np.ceil(np.percentile(ranks, 97.5))),
            ]
            assert row["rank_range"] == rr, (name, t)
            assert row["rank_set"]["low"] <= row["rank"] <= row["rank_set"]["high"]
        if missing == "last":
            assert {LABEL["gamma"], LABEL["eps"]} <= {t for t, r in rows.items() if r["rank"]}
    # shown and exported like every board: the page (in Chromium at 390 and 1366 px, its console
    # clean), the CSV
    page = _get(app, "overall", "html")
    assert page.status_code == 200 and "Overall (mean)" in page.get_data(as_text=True)
    from browserkit import _look
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for name in OVERALL:
            url = f"http://127.0.0.1:{srv.server_port}/tasks/{TASK}/leaderboard?phase={PHASE}"
            _look(driver, f"{url}&board={name}", [])
        # the significance page: the rank sets beside the p-values
        base = f"http://127.0.0.1:{srv.server_port}/tasks/{TASK}/leaderboard"
        _look(driver, f"{base}/significance?phase={PHASE}&board=overall", [])
        assert "Confidence sets for ranks" in driver.page_source
    finally:
        srv.shutdown()
    import csv
    import io

    live = {r["team"]: r for r in _get(app, "overall").get_json()["rows"]}
    by_sid = {r["submission_id"]: r["team"] for r in live.values()}
    table = list(csv.DictReader(io.StringIO(_get(app, "overall", "csv").get_data(as_text=True))))
    assert "overall/mean" in table[0] and "rank_set_low" in table[0]
    for line in table:  # the rank sets exported as the JSON carries them
        rs = live[line["team"]].get("rank_set")
        want = [str(rs["low"]), str(rs["high"])] if rs else ["", ""]
        assert [line["rank_set_low"], line["rank_set_high"]] == want
    page = app.test_client().get(
        f"/tasks/{TASK}/leaderboard/significance?phase={PHASE}&board=overall"
    )
    text = page.get_data(as_text=True)
    # better on at least k of the 2 boards: the counts of the ranked pairs, as a direct count
    st = _get(app, "overall").get_json()["statistics"]
    bw = st["boards_won"]
    assert bw["K"] == 2 and "Better on at least k of the 2 boards" in text
    order = [by_sid[sid] for sid in st["order"]]
    V = [[comps[k][t][0] for t in order] for k in comps]
    X = [[list(comps[k][t][1]) for t in order] for k in comps]
    assert bw["counts"] == _naive_won(V, X, [[True] * len(order)] * 2, [True, True], 0.05)
    assert len(bw["counts"]) == len(order)  # (non-zero counts: the direct count's test above)
    for r in live.values():
        if r.get("rank_set"):
            assert f"{r['rank_set']['low']}–{r['rank_set']['high']}" in text

    # published like every board: the snapshot ranks on the private part, its statistics frozen
    from sqlalchemy import select

    from server.domain import publication
    from server.models import BoardRanking, Phase
    from tasks import get_task

    with overall_site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        publication.prepare(s, p)
        publication.publish(
            s, p, task=get_task(TASK), actor=None, settings=overall_site.settings, close_first=True
        )
        s.commit()
    with overall_site.session() as s:
        snaps = {
            br.board: json.loads(br.body_json) for br in s.execute(select(BoardRanking)).scalars()
        }
    snap = snaps["overall"]
    assert snap["overall"]["rule"] == "mean" and snap["statistics"]["status"] == "ready"
    prose = {r["team"]: r for r in snaps["prose"]["rows"]}
    verse = {r["team"]: r for r in snaps["verse"]["rows"]}
    for row in snap["rows"]:
        t = row["team"]
        if row["rank"] is None:
            assert t in {"gamma", "eps"}  # named once published
            continue
        want = (prose[t]["metrics"]["prose/spearman"] + verse[t]["metrics"]["verse/spearman"]) / 2
        assert row["metrics"]["overall/mean"] == pytest.approx(want, abs=1e-12)
        assert row["ci"][0] <= row["metrics"]["overall/mean"] <= row["ci"][1]
        assert row["rank_set"]["coverage"] == 0.95
        # the public part beside it, from the boards' public values
        want_pub = (prose[t]["public_primary"] + verse[t]["public_primary"]) / 2
        assert row["public_primary"] == pytest.approx(want_pub, abs=1e-12)
    # the CSV and LaTeX of the snapshot
    with overall_site.session() as s:
        br = s.execute(select(BoardRanking).where(BoardRanking.board == "overall")).scalar_one()
        assert "over the boards prose, verse" in br.body_latex and " & set & " in br.body_latex
        assert "rank_set_low" in br.body_csv.splitlines()[0]


def test_a_bad_overall_declaration_is_refused_naming_its_path():
    from pydantic import ValidationError

    from tasks import get_task
    from tasks.bundle_models import BoardSpec, board_problems

    with pytest.raises(ValidationError, match="either `ranking` or `overall`"):
        BoardSpec.model_validate(
            {
                "name": "x",
                "title": "X",
                "ranking": {"subset": "en-de", "metric": "spearman"},
                "overall": {"boards": ["main", "de"]},
            }
        )
    with pytest.raises(ValidationError, match="named twice"):
        BoardSpec.model_validate({"name": "x", "title": "X", "overall": {"boards": ["a", "a"]}})
    task = get_task("swissgov-rsd")
    boards = [
        BoardSpec.model_validate(
            {"name": "de", "title": "DE", "ranking": {"subset": "en-de", "metric": "spearman"}}
        ),
        BoardSpec.model_validate(
            {"name": "n", "title": "N", "ranking": {"subset": "en-de", "metric": "n"}}
        ),
        BoardSpec.model_validate(
            {"name": "all", "title": "All", "overall": {"boards": ["main", "de", "fr"]}}
        ),
    ]
    got = board_problems(boards, task, None)
    assert got == [
        (
            ("boards", 2, "overall", "boards", 2),
            "'fr' is not a ranked board of the phase (main, de, n)",
        )
    ]
    ok = BoardSpec.model_validate(
        {"name": "all", "title": "All", "overall": {"boards": ["main", "de"], "rule": "borda"}}
    )
    assert board_problems([*boards[:2], ok], task, None) == []
