"""Leaderboard logic: one row per team, primary runs, baselines, ties, parts, visibility, the
cache."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from helpers import board_json
from sqlmodel import Session
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of, update_phase

from server.boards import leaderboard as lb
from server.models import Phase, utcnow
from tasks import get_task


@pytest.fixture
def teams(app):
    for name in ["alpha", "beta", "gamma", "delta"]:
        make_user(app, f"{name}@x.org", team=name)
    make_user(app, "base@x.org", team="Baselines", baseline=True)
    return {n: team_of(app, n) for n in ["alpha", "beta", "gamma", "delta", "Baselines"]}


@pytest.mark.parametrize(
    "values,gib,expected",
    [
        ([0.9, 0.8, 0.8, 0.7], True, [1, 2, 2, 4]),
        ([0.1, 0.1, 0.1], True, [1, 1, 1]),
        ([0.3, 0.1, 0.2], False, [3, 1, 2]),
        ([0.5, None, 0.5, 0.9], True, [2, None, 2, 1]),
        ([], True, []),
    ],
)
def test_competition_ranking(values, gib, expected):
    assert lb._rank(values, gib) == expected


def test_one_row_per_team_best_or_primary(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.60}, method="a1")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.80}, method="a2")
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.90}, method="b1")
    make_submission(
        app, team=teams["beta"], phase=dev, scores={"all": 0.70}, method="b2", is_primary=True
    )
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.80}, method="g1")
    make_submission(app, team=teams["delta"], phase=dev, status="failed", method="d1")
    make_submission(
        app, team=teams["Baselines"], phase=dev, scores={"all": 0.75}, method="majority"
    )
    make_submission(app, team=teams["Baselines"], phase=dev, scores={"all": 0.50}, method="random")
    data = board_json(client)
    rows = data["rows"]
    teams_rows = [r for r in rows if r["row_type"] == "team"]
    assert [(r["team"], r["method_name"], r["rank"]) for r in teams_rows] == [
        ("alpha", "a2", 1),
        ("gamma", "g1", 1),
        ("beta", "b2", 3),
    ]  # beta's primary run, not its best
    base = [r for r in rows if r["row_type"] == "baseline"]
    assert {r["method_name"] for r in base} == {"majority", "random"}
    assert all(r["rank"] is None for r in base)
    # sorted by the primary metric, baselines in place
    prim = [r["metrics"]["all/f1"] for r in rows]
    assert prim == sorted(prim, reverse=True)
    # every metric of every subset, primary first
    task = get_task("tric-binary")
    assert data["columns"][0]["key"] == "all/f1" and data["columns"][0]["primary"]
    assert len(data["columns"]) == len(task.metrics) * len(task.subsets)
    assert set(rows[0]["metrics"]) == {c["key"] for c in data["columns"]}
    assert "submitted_at" in rows[0] and rows[0]["submitted_at"].endswith("Z")


def test_lower_is_better_is_read_from_the_task(app):
    task = get_task("tric-binary")
    cols = lb.columns_for(task)
    assert cols[0].primary and cols[0].greater_is_better == task.greater_is_better


def test_test_phase_public_part_then_private_after_publication(app, client, teams):
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    make_submission(app, team=teams["alpha"], phase=test, scores={"public": 0.9, "private": 0.4111})
    make_submission(app, team=teams["beta"], phase=test, scores={"public": 0.5, "private": 0.8222})
    data = board_json(client, phase="test")
    assert data["ranked_on"] == "public" and not data["published"]
    assert [r["team"] for r in data["rows"]] == ["alpha", "beta"]
    body = client.get("/tasks/tric-binary/leaderboard.json?phase=test").get_data(as_text=True)
    body += client.get("/tasks/tric-binary/leaderboard.csv?phase=test").get_data(as_text=True)
    body += client.get("/tasks/tric-binary/leaderboard?phase=test").get_data(as_text=True)
    assert (
        "0.4111" not in body and "0.8222" not in body
    )  # private scores never leave before publication
    update_phase(app, test.id, published_at=utcnow())
    data = board_json(client, phase="test")
    assert data["ranked_on"] == "private" and data["published"]
    assert [(r["team"], r["rank"], r["public_rank"]) for r in data["rows"]] == [
        ("beta", 1, 2),
        ("alpha", 2, 1),
    ]
    assert data["rows"][0]["public_primary"] == 0.5


def test_hidden_removed_and_not_public_are_excluded_for_others(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(
        app, team=teams["alpha"], phase=dev, scores={"all": 0.9}, hidden=True, hidden_reason="dup"
    )
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.8}, removed_at=utcnow())
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.7}, show_publicly=False)
    make_submission(app, team=teams["delta"], phase=dev, scores={"all": 0.6})
    assert [r["team"] for r in board_json(client)["rows"]] == ["delta"]
    # the team itself sees its own not-public run, marked
    b = Browser(app.test_client())
    b.login("gamma@x.org")
    rows = board_json(b.c)["rows"]
    assert [(r["team"], r.get("note")) for r in rows] == [("gamma", "not public"), ("delta", None)]
    # and another team does not
    b2 = Browser(app.test_client())
    b2.login("alpha@x.org")
    assert [r["team"] for r in board_json(b2.c)["rows"]] == ["delta"]
    # organizers see everything, marked
    make_user(app, "org@x.org", organizer=True)
    b3 = Browser(app.test_client())
    b3.login("org@x.org")
    notes = {r["team"]: r.get("note") for r in board_json(b3.c)["rows"]}
    assert notes == {"alpha": "hidden", "beta": "removed", "gamma": "not public", "delta": None}


def test_frozen_board_ignores_later_submissions(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    t0 = utcnow() - timedelta(hours=2)
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5}, created_at=t0)
    update_phase(app, dev.id, frozen=True, frozen_at=utcnow() - timedelta(hours=1))
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.9})
    assert [r["team"] for r in board_json(client)["rows"]] == ["alpha"]


def test_closed_leaderboard_is_not_shown(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev", leaderboard_open=False)
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    assert client.get("/tasks/tric-binary/leaderboard.json?phase=dev").status_code == 404
    assert client.get("/tasks/tric-binary/leaderboard?phase=dev").status_code == 404


def test_unknown_task_and_phase(app, client):
    assert client.get("/tasks/nope/leaderboard").status_code == 404
    make_phase(app, "tric-binary", "dev")
    assert client.get("/tasks/tric-binary/leaderboard.json?phase=final").status_code == 404


def test_csv_has_every_column_and_quotes_formulas(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(
        app, team=teams["alpha"], phase=dev, scores={"all": 0.5}, method='=HYPERLINK("x")'
    )
    r = client.get("/tasks/tric-binary/leaderboard.csv?phase=dev")
    assert r.mimetype == "text/csv"
    rows = list(csv.reader(io.StringIO(r.get_data(as_text=True))))
    assert rows[0][:6] == [
        "rank",
        "row_type",
        "team",
        "method_name",
        "submitted_at",
        "submission_id",
    ]
    assert rows[0][6] == "all/f1"
    assert rows[1][3].startswith("'=")


def test_render_once_per_change(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    cache = app.extensions["palimpsest.lbcache"]
    for _ in range(5):
        client.get("/tasks/tric-binary/leaderboard?phase=dev")
    assert cache.renders == 1
    r = client.get("/tasks/tric-binary/leaderboard?phase=dev")
    etag = r.headers["ETag"]
    assert (
        client.get(
            "/tasks/tric-binary/leaderboard?phase=dev", headers={"If-None-Match": etag}
        ).status_code
        == 304
    )
    # a new score changes the version
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.7})
    assert [r["team"] for r in board_json(client)["rows"]] == ["beta", "alpha"]
    before = cache.renders
    client.get("/tasks/tric-binary/leaderboard?phase=dev")
    assert cache.renders == before + 1
    # so does a visibility change made elsewhere (the API, the CLI): the lifecycle bumps the
    # revision
    from server.actions import submissions as sub_actions

    with Session(engine_of(app), expire_on_commit=False) as s:  # the action the API and CLI call
        sub_actions.set_visibility(
            s=s, submission_id=2, action="hide", actor=None, reason="duplicate"
        )
    assert [r["team"] for r in board_json(client)["rows"]] == ["alpha"]
    # and nothing else: a rendered board is reused until the lifecycle changes the phase
    before = cache.renders
    for _ in range(3):
        client.get("/tasks/tric-binary/leaderboard?phase=dev")
    assert cache.renders == before + 1


def test_latex_export_escapes_and_bolds(app, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5}, method="50% & $x_1$")
    with Session(engine_of(app)) as s:
        board = lb.build_board(s, get_task("tric-binary"), s.get(Phase, dev.id))
    tex = lb.to_latex(board)
    assert r"50\% \& \$x\_1\$" in tex and r"\textbf{0.5000}" in tex and r"\begin{tabular}" in tex
    # a count has no better direction: its column carries no arrow
    counts = [c for c in board.columns if c.metric == "n"]
    assert counts, [c.key for c in board.columns]
    tex = lb.to_latex(board, columns=[counts[0].key])
    head = next(x for x in tex.splitlines() if x.startswith("\\#"))
    assert "n (all)" in head and head.count("arrow") == 1, head  # the primary's only


def test_html_board_is_sortable_and_escaped(app, client, teams):
    make_user(app, "x@x.org", team="<script>alert(1)</script>")
    evil = team_of(app, "<script>alert(1)</script>")
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(
        app, team=evil, phase=dev, scores={"all": 0.5}, method="<img src=x onerror=alert(2)>"
    )
    html = client.get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert 'class="board sortable"' in html and "sort.js" in html
    assert (
        json.loads(client.get("/tasks/tric-binary/leaderboard.json?phase=dev").data)["rows"][0][
            "team"
        ]
        == "<script>alert(1)</script>"
    )


def test_default_phase_is_the_latest_opened(app, client, teams):
    make_phase(app, "tric-binary", "dev")
    make_phase(app, "tric-binary", "test", opens_at=utcnow() + timedelta(days=3))
    assert board_json.__name__  # the default is dev while test has not opened
    assert client.get("/tasks/tric-binary/leaderboard.json").get_json()["phase"] == "dev"


def test_a_rescore_keeps_the_standing_scores_on_the_board(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    sub = make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    from server.domain import lifecycle

    with Session(engine_of(app), expire_on_commit=False) as s:
        from server.models import Submission

        assert lifecycle.rescore(s, [s.get(Submission, sub.id)], actor=None, max_attempts=3) == [
            sub.id
        ]
        assert s.get(Submission, sub.id, populate_existing=True).status == "queued"
    assert [r["team"] for r in board_json(client)["rows"]] == ["alpha"]


def test_gzip_is_served_to_clients_that_accept_it(app, client, teams):
    import gzip as gz

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    r = client.get(
        "/tasks/tric-binary/leaderboard?phase=dev", headers={"Accept-Encoding": "gzip, br"}
    )
    assert r.headers["Content-Encoding"] == "gzip" and b"alpha" in gz.decompress(r.data)
    plain = client.get("/tasks/tric-binary/leaderboard?phase=dev")
    assert "Content-Encoding" not in plain.headers and plain.headers["ETag"] != r.headers["ETag"]


def test_a_closed_board_is_empty_for_every_caller_but_organizers(app, teams):
    dev = make_phase(app, "tric-binary", "dev", leaderboard_open=False)
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    task = get_task("tric-binary")
    with Session(engine_of(app)) as s:
        ph = s.get(Phase, dev.id)
        assert lb.build_board(s, task, ph).rows == [] and lb.build_board(s, task, ph).closed
        assert lb.build_board(s, task, ph, audience=f"team:{teams['alpha'].id}").rows == []
        assert len(lb.build_board(s, task, ph, audience="organizer").rows) == 1


def test_swissgov_row_without_a_language_pair_says_why_its_macro_is_empty(
    app, client, teams, tmp_path, home
):
    """A real scorer result of a submission that leaves out en-it: valid, scored, macro empty, and
    the board's row carries the scorer's reason."""
    import sqlmodel
    from helpers import swissgov_docs, write_submission

    from scorer import score_file
    from server.models import Score

    docs = [d for d in swissgov_docs("test") if d["pair"] != "en-it"]
    rows = [
        {
            "id": d["id"],
            "labels_a": [0.5] * len(d["text_a"].split()),
            "labels_b": [float(i % 3) for i in range(len(d["text_b"].split()))],
        }
        for d in docs
    ]
    result = score_file("swissgov-rsd", write_submission(tmp_path, rows, "jsonl"), home=home)
    assert result["primary"]["value"] is None
    test = make_phase(app, "swissgov-rsd", "test", public_fraction=1.0)
    sub = make_submission(app, team=teams["alpha"], phase=test, scores={"all": 0.0})
    with Session(engine_of(app)) as s:
        score = s.exec(sqlmodel.select(Score).where(Score.submission_id == sub.id)).one()
        score.result, score.primary_value = result, None
        s.add(score)
        s.commit()
    row = board_json(client, task="swissgov-rsd", phase="test")["rows"][0]
    assert [v for k, v in row["metrics"].items() if k.startswith("macro") and "spearman" in k] == [
        None
    ]
    assert (
        "en-it: not in the submission" in row["why_empty"]
        and "macro: undefined" in row["why_empty"]
    )
    page = client.get("/tasks/swissgov-rsd/leaderboard?phase=test").get_data(as_text=True)
    assert "en-it: not in the submission" in page
