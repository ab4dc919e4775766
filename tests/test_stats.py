"""A board's statistics end to end: computed by the worker after each score (never in a request),
seeded from the phase's recorded seed, identical on recomputation, carried by the JSON, CSV and
LaTeX, frozen into the published snapshot, and explained on the page."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from backbone import burst, make_team, phase, set_phase, submit
from conftest import _make_backend
from sqlalchemy import select

from server.domain import lifecycle, publication
from server.models import AuditLog, GoldPartition, Phase
from tasks import get_task


@pytest.fixture
def b(request, tmp_path, demo_home, monkeypatch):
    monkeypatch.setenv("PALIMPSEST_BOOTSTRAP_SAMPLES", "300")
    backend = _make_backend("embedded", request, tmp_path, demo_home, monkeypatch)
    backend.settings.bootstrap_samples = 300
    for task_id in ("tric-binary", "swissgov-rsd"):
        for name in ("dev", "test"):
            set_phase(backend, task_id, name, concurrent_limit=None, daily_limit=None)
    return backend


def _app():
    from server import create_app

    return create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})


def _board(app, task_id, name, fmt="json"):
    ext = "" if fmt == "html" else f".{fmt}"
    r = app.test_client().get(f"/tasks/{task_id}/leaderboard{ext}?phase={name}")
    assert r.status_code == 200
    return r.get_json() if fmt == "json" else r.get_data(as_text=True)


def _three(b, task_id, name, noises=(0.05, 0.2, 0.45)):
    teams = [make_team(b) for _ in noises]
    ids = [
        submit(b, t, u, task_id, name, noise=n).id for (t, u), n in zip(teams, noises, strict=True)
    ]
    burst(b)
    return teams, ids


def test_the_worker_computes_intervals_rank_ranges_and_clusters(b):
    _three(b, "tric-binary", "test")
    app = _app()
    data = _board(app, "tric-binary", "test")
    st = data["statistics"]
    assert (
        st["status"] == "ready"
        and st["B"] == 300
        and st["part"] == "public"
        and st["unit"] == "instances"
    )
    # the seed is the phase's own recorded seed, never the partition's; the partition is named by
    # its keyed fingerprint, and its seed appears in no public form of the board
    from server.domain.partitions import fingerprint

    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        part = s.get(GoldPartition, p.partition_id)
        assert st["seed"] == p.stats_seed != part.seed
        assert st["partition"] == fingerprint(part, b.settings.secret_key)
    assert st["partition"] != fingerprint(part, "another secret")
    seed = re.compile(rf"(?<![0-9]){part.seed}(?![0-9])")
    for fmt in ("json", "csv", "html"):
        body = _board(app, "tric-binary", "test", fmt)
        assert not seed.search(body if isinstance(body, str) else json.dumps(body)), fmt
    sig = app.test_client().get("/tasks/tric-binary/leaderboard/significance?phase=test")
    assert not seed.search(sig.get_data(as_text=True))
    assert f"partition <code>{st['partition']}</code>" in _board(app, "tric-binary", "test", "html")
    rows = data["rows"]
    assert len(rows) == 3
    for r in rows:
        lo, hi = r["ci"]
        assert lo <= r["metrics"]["all/f1"] <= hi
        best, worst = r["rank_range"]
        assert 1 <= best <= r["rank"] <= worst <= 3
        assert isinstance(r["cluster"], int)
        # the rank sets beside the range: the row's own and every row's at once
        ms, ss = r["rank_set"], r["rank_set_simultaneous"]
        assert (ms["kind"], ss["kind"], ms["coverage"], ms["method"]) == (
            "marginal",
            "simultaneous",
            0.95,
            "max-t",
        )
        assert 1 <= ss["low"] <= ms["low"] <= r["rank"] <= ms["high"] <= ss["high"] <= 3
    assert [r["cluster"] for r in rows] == sorted(r["cluster"] for r in rows)
    assert 'class="muted rankset"' in _board(app, "tric-binary", "test", "html")
    best = [r["submission_id"] for r in rows if r["rank_set_simultaneous"]["low"] == 1]
    assert st["top_sets"]["1"] == best
    assert st["order"] == [r["submission_id"] for r in rows]
    P = np.array(st["p_holm"])
    assert P.shape == (3, 3) and np.allclose(P, P.T)
    # the CSV and the LaTeX carry them
    csv = _board(app, "tric-binary", "test", "csv")
    head, first = csv.splitlines()[:2]
    assert head.endswith("ci_lo,ci_hi,rank_best,rank_worst,cluster")
    assert first.split(",")[-1] == str(rows[0]["cluster"])
    # the page explains them, and the matrix has its page
    html = _board(app, "tric-binary", "test", "html")
    assert "95 % paired bootstrap over instances" in html and "Pairwise p-values" in html
    sig = app.test_client().get("/tasks/tric-binary/leaderboard/significance?phase=test")
    assert sig.status_code == 200 and "Holm-corrected" in sig.get_data(as_text=True)


def test_a_recomputation_is_identical_and_equals_the_scorer_bootstrap(b):
    from server.boards import stats

    _three(b, "tric-binary", "dev")
    app = _app()
    before = _board(app, "tric-binary", "dev")
    # the dev phase has no partition: its seed is drawn once and recorded, audited
    with b.session() as s:
        pid = phase(b, "tric-binary", "dev").id
        seed = s.get(Phase, pid).stats_seed
        assert seed is not None and before["statistics"]["seed"] == seed
        assert s.execute(select(AuditLog).where(AuditLog.action == "stats.seed")).scalars().all()
    shutil.rmtree(stats.stats_dir(b.settings.home))  # every cached sample, board and unit array
    stats.Part._cache.clear()
    stats.compute_board_stats(pid, b.settings)  # the units are re-parsed from the uploads
    app2 = _app()
    after = _board(app2, "tric-binary", "dev")
    assert after["rows"] == before["rows"] and after["statistics"] == before["statistics"]
    # the interval is the percentile interval of scorer.bootstrap's own resamples
    from scorer.bootstrap import Bootstrap
    from tasks.store import TaskStore

    task = get_task("tric-binary")
    boot = Bootstrap(task, TaskStore(task.id, b.settings.home), "dev", None)
    W = boot.weights(300, seed)
    r0 = before["rows"][0]
    with b.session() as s:
        attempt = s.get(
            __import__("server.models", fromlist=["Submission"]).Submission, r0["submission_id"]
        ).score_attempt
    arrays = stats.load_units(
        b.settings,
        task,
        "dev",
        r0["submission_id"],
        attempt,
    )
    x = boot.samples(arrays, W)
    assert r0["ci"] == [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))]


def test_pages_never_compute_statistics(b):
    """A board version without statistics says they are being computed (a request never computes
    them), and shows them once the worker has written them."""
    from server.boards import stats

    _three(b, "tric-binary", "dev")
    shutil.rmtree(stats.stats_dir(b.settings.home) / "boards")
    app = _app()
    data = _board(app, "tric-binary", "dev")
    assert data["statistics"] == {"status": "pending"}
    assert all(r["ci"] is None and r["ci_note"] == "interval being computed" for r in data["rows"])
    assert "being computed by a worker" in _board(app, "tric-binary", "dev", "html")
    assert not (stats.stats_dir(b.settings.home) / "boards").exists()
    stats.compute_board_stats(phase(b, "tric-binary", "dev").id, b.settings)
    data = _board(app, "tric-binary", "dev")  # the render cache sees the new statistics
    assert data["statistics"]["status"] == "ready" and all(r["ci"] for r in data["rows"])


def test_the_published_snapshot_freezes_both_parts_statistics(b):
    teams, _ = _three(b, "tric-binary", "test")
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        lifecycle.close(s, p, actor=None)
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        rv = publication.publish(
            s, p, task=get_task("tric-binary"), actor=None, settings=b.settings
        )
    body = json.loads(rv.body_json)
    assert body["statistics"]["status"] == "ready" and body["statistics"]["part"] == "private"
    assert body["public_statistics"]["part"] == "public"
    for r in body["rows"]:
        assert r["ci"][0] <= r["metrics"]["all/f1"] <= r["ci"][1]
        assert r["public_ci"][0] <= r["public_primary"] <= r["public_ci"][1]
        assert r["rank_range"] and r["cluster"]
    assert "95\\% CI" in rv.body_latex and "ci_lo" in rv.body_csv.splitlines()[0]
    # later runs (a reopened phase) change the live statistics, never the snapshot
    with b.session() as s:
        lifecycle.edit_phase(
            s, s.get(Phase, phase(b, "tric-binary", "test").id), {"closes_at": None}, actor=None
        )
    submit(b, *teams[0], "tric-binary", "test", noise=0.0)
    burst(b)
    app = _app()
    served = app.test_client().get("/tasks/tric-binary/leaderboard.json?phase=test").data
    assert served == rv.body_json.encode()
    html = _board(app, "tric-binary", "test", "html")
    assert "95 % paired bootstrap" in html
    sig = (
        app.test_client()
        .get("/tasks/tric-binary/leaderboard/significance?phase=test")
        .get_data(as_text=True)
    )
    assert "The public part" in sig


def test_swissgov_resamples_documents_within_each_pair(b):
    _three(b, "swissgov-rsd", "dev", noises=(0.1, 0.3))
    data = _board(_app(), "swissgov-rsd", "dev")
    assert data["statistics"]["unit"] == "documents (within each language pair)"
    for r in data["rows"]:
        assert r["ci"][0] <= r["metrics"]["macro/spearman"] <= r["ci"][1]


def test_latex_bolds_the_best_score_never_a_count():
    from datetime import datetime

    from server.boards import leaderboard as lb

    cols = [
        lb.Column(subset="all", metric="f1", greater_is_better=True, primary=True),
        lb.Column(subset="all", metric="n", greater_is_better=True),
    ]
    rows = [
        lb.Row(
            rank=i + 1,
            row_type="team",
            team=f"t{i}",
            team_id=i,
            submission_id=i,
            method_name="m",
            url="",
            submitted_at=datetime(2026, 1, 1),
            is_primary=True,
            values={"all/f1": v, "all/n": 60.0},
            ci=[v - 0.1, v + 0.05],
            rank_range=[1, 2],
            cluster=1,
        )
        for i, v in enumerate([0.9, 0.8])
    ]
    board = lb.Board(
        task_id="tric-binary",
        phase="dev",
        split="dev",
        part="all",
        published=False,
        frozen=False,
        columns=cols,
        rows=rows,
    )
    tex = lb.to_latex(board, columns=["all/n"])
    assert r"\textbf{0.9000}" in tex and r"\textbf{60}" not in tex and " 60 " in tex
    assert "[0.8000, 0.9500]" in tex and "1--2" in tex


def test_requests_for_statistics_coalesce(b):
    from server.boards import stats
    from server.jobs.queue import get_queue

    pid = phase(b, "tric-binary", "dev").id
    q = get_queue("stats", b.conn)  # its own queue: scoring never waits behind it
    before = q.count
    for _ in range(5):
        assert stats.enqueue(b.settings, pid, b.conn)
    assert q.count == before + 1  # one waiting job reads the latest version when it runs
    burst(b)
    assert stats.enqueue(b.settings, pid, b.conn) and q.count == 1  # finished: a new one may wait


def test_plots_of_the_board_svg_and_pdf_rendered_once_per_version(b):
    _three(b, "tric-binary", "test")
    app = _app()
    c = app.test_client()
    svg = c.get("/tasks/tric-binary/leaderboard/plot.svg?phase=test")
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
    text = svg.get_data(as_text=True)
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert (
        "style-src 'unsafe-inline'" in svg.headers["Content-Security-Policy"]
    )  # its inline styles render
    assert "95 % bootstrap interval" in text and "per subset" in text and "over time" in text
    renders = app.extensions["palimpsest.lbcache"].renders
    assert c.get("/tasks/tric-binary/leaderboard/plot.svg?phase=test").data == svg.data
    assert (
        app.extensions["palimpsest.lbcache"].renders == renders
    )  # cached with the board's version
    pdf = c.get("/tasks/tric-binary/leaderboard/plot.pdf?phase=test&kind=ci")
    assert pdf.status_code == 200 and pdf.data.startswith(b"%PDF")
    assert c.get("/tasks/tric-binary/leaderboard/plot.png?phase=test").status_code == 404
    assert c.get("/tasks/tric-binary/leaderboard/plot.svg?phase=nope").status_code == 404


def test_latex_export_keeps_the_columns_picked(b):
    _three(b, "tric-binary", "test")
    with b.session() as s:
        lifecycle.close(s, s.get(Phase, phase(b, "tric-binary", "test").id), actor=None)
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        rv = publication.publish(
            s, p, task=get_task("tric-binary"), actor=None, settings=b.settings
        )
    body = json.loads(rv.body_json)
    from server.boards import leaderboard as lb

    picked = ["iov/f1_1", "oov/precision_0", "all/n"]
    tex = lb.snapshot_latex(body, columns=picked)
    head = [line for line in tex.splitlines() if line.startswith("\\#")][0]
    assert "f1\\_1 (iov)" in head and "precision\\_0 (oov)" in head and "n (all)" in head
    assert "95\\% CI" in head and "range" in head
    assert (
        "\\textbf{" + str(body["rows"][0]["metrics"]["all/n"]) not in tex
    )  # a count is never bold
