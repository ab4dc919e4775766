"""Boards people can read: key columns by default and the rest a click away, counts as integers,
every empty cell says why, the visitor's own navigation around a cached board, a submission page
that follows its status, and the primary score in "My submissions"."""

from __future__ import annotations

import re

from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of

from server.models import Submission


def _run_jobs(app):
    from server.jobs.scoring import score_submission

    with Session(engine_of(app)) as s:
        ids = [x.id for x in s.exec(select(Submission).where(Submission.status == "queued")).all()]
    for i in ids:
        score_submission(i)


def test_the_navigation_is_the_visitors_own_around_one_cached_board(app):
    dev = make_phase(app, "tric-binary", "dev")
    make_user(app, "a@x.org", team="alpha")
    make_user(app, "org@x.org", organizer=True)
    make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.7})
    anon = app.test_client().get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    assert "Sign in" in anon and "Sign out" not in anon and "<!--pal:" not in anon
    b = Browser(app.test_client())
    b.login("a@x.org")
    mine = b.get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    assert "Sign out (a@x.org)" in mine and "My submissions" in mine and "Organizer" not in mine
    o = Browser(app.test_client())
    o.login("org@x.org")
    org = o.get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    assert "Sign out (org@x.org)" in org and ">Organizer<" in org
    renders = app.extensions["palimpsest.lbcache"].renders
    again = b.get("/tasks/tric-binary/leaderboard?phase=dev", headers={"Accept-Encoding": "gzip"})
    assert again.headers.get("Content-Encoding") == "gzip"
    import gzip

    assert "Sign out (a@x.org)" in gzip.decompress(again.data).decode()
    assert (
        app.extensions["palimpsest.lbcache"].renders == renders
    )  # the board itself is not rendered again


def test_key_columns_by_default_counts_as_integers_and_empty_cells_say_why(app):
    dev = make_phase(app, "tric-binary", "dev")
    make_user(app, "a@x.org", team="alpha")
    make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.7})
    html = app.test_client().get("/tasks/tric-binary/leaderboard?phase=dev").get_data(as_text=True)
    head = html[html.index("<thead>") : html.index("</thead>")]
    shown = re.findall(r'<th data-type="num"(?! class="extra")[^>]*>([^<]+)<br><small>(\w+)', head)
    assert ("f1", "oov") in shown and ("f1", "iov") in shown
    assert 'class="extra"' in head and 'id="allcols"' in html  # every other column one click away
    assert not re.search(r"\d\.0000</td>", html.split("</thead>")[1].split("<td")[-1])
    assert "6.0000" not in html and ".0000 " not in html
    # an empty cell says why
    assert "—" not in html or 'class="why"' in html


def test_a_queued_submission_page_polls_and_my_submissions_shows_the_primary_score(app):
    import io
    import json

    from tasks.store import TaskStore

    make_user(app, "a@x.org", team="alpha")
    make_phase(app, "tric-binary", "dev")
    b = Browser(app.test_client())
    b.login("a@x.org")
    store = TaskStore("tric-binary", app.extensions["palimpsest.settings"].home)
    ids = [
        json.loads(x)["instanceID"]
        for x in store.public("dev", "inputs.jsonl").read_text().splitlines()
        if x
    ]
    data = "".join(
        json.dumps({"instanceID": x, "label": i % 2}) + "\n" for i, x in enumerate(ids)
    ).encode()
    r = b.post(
        "/tasks/tric-binary/submit",
        {
            "phase": "dev",
            "method_name": "m",
            "description": "d",
            "url": "",
            "show_publicly": "on",
            "file": (io.BytesIO(data), "p.jsonl"),
        },
        content_type="multipart/form-data",
    )
    sid = int(r.headers["Location"].rsplit("/", 1)[1])
    page = b.get(f"/submissions/{sid}").get_data(as_text=True)
    assert f'data-submission="{sid}" data-status="queued"' in page and "status.js" in page
    assert "<script>" not in page  # the CSP blocks inline scripts: the poll is a static file
    live = b.get(f"/submissions/status.json?ids={sid}").get_json()
    assert live == {"statuses": {str(sid): "queued"}, "final": False}
    assert ">queued</small>" in b.get("/submissions").get_data(as_text=True)
    _run_jobs(app)
    page = b.get(f"/submissions/{sid}").get_data(as_text=True)
    assert f'data-submission="{sid}" data-status="scored"' in page
    live = b.get(f"/submissions/status.json?ids={sid}").get_json()
    assert live == {"statuses": {str(sid): "scored"}, "final": True}
    with Session(engine_of(app)) as s:
        from server.models import Score

        v = s.exec(select(Score.primary_value).where(Score.submission_id == sid)).first()
    assert f"{v:.4f}" in b.get("/submissions").get_data(as_text=True)


def test_trotr_agreement_is_the_papers_and_a_reference_row(app, home):
    """Krippendorff's alpha (ordinal) and the weighted mean pairwise Spearman of TRoTR's judgments
    are the paper's .420 and .506; tric-ranking's board shows them as an unranked human row."""
    from click.testing import CliRunner

    from cli.main import main
    from tasks.store import TaskStore

    got = TaskStore("tric-ranking", home).manifest()["agreement"]
    assert (
        round(got["alpha_ordinal"], 3) == 0.420
        and round(got["weighted_mean_pairwise_spearman"], 3) == 0.506
    )
    assert got["pairs"] == 6300 and got["annotators"] == 4
    r = CliRunner().invoke(main, ["agreement", "tric-ranking", "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    assert '"alpha_ordinal": 0.420106' in r.output
    dev = make_phase(app, "tric-ranking", "dev")
    make_user(app, "a@x.org", team="alpha")
    make_submission(app, team=team_of(app, "alpha"), phase=dev, scores={"all": 0.7})
    data = app.test_client().get("/tasks/tric-ranking/leaderboard.json?phase=dev").get_json()
    human = [x for x in data["rows"] if x["row_type"] == "human"]
    assert len(human) == 1 and human[0]["rank"] is None and human[0]["submission_id"] is None
    assert human[0]["metrics"]["all/spearman"] == got["weighted_mean_pairwise_spearman"]
    assert "the paper" in human[0]["note"] and [x["row_type"] for x in data["rows"]] == [
        "team",
        "human",
    ]
    html = app.test_client().get("/tasks/tric-ranking/leaderboard?phase=dev").get_data(as_text=True)
    assert "reference, not ranked" in html
    csv_ = (
        app.test_client()
        .get("/tasks/tric-ranking/leaderboard.csv?phase=dev")
        .get_data(as_text=True)
    )
    assert ",human,Human agreement" in csv_


def test_trotr_filtered_kappa_factors_command_and_agreement_page(app, home):
    """The paper's filter recomputes its .709 / .811 over 3,821 pairs; the import caches the kappa
    family by factor; `palimpsest agreement --by` prints it (one JSON document with --json); the
    agreement page shows it with forest plots, free of inline script and style, and the human row
    links to it."""
    import json

    from click.testing import CliRunner

    from cli.main import main
    from tasks.agreement import load_agreement
    from tasks.store import TaskStore

    store = TaskStore("tric-ranking", home)
    got = store.manifest()["agreement"]
    f = got["filtered"]
    assert f["pairs"] == 3821 and round(f["alpha_ordinal"], 3) == 0.709
    assert round(f["weighted_mean_pairwise_spearman"], 3) == 0.811
    full = load_agreement(store.root)
    assert "factors" not in got and set(full["factors"]["binary"]) == {
        "book",
        "passage",
        "annotator_pair",
        "overlap",
    }
    assert sum(r["items"] for r in full["factors"]["binary"]["passage"]) == 6300
    assert full["kappa"]["binary"]["bootstrap"]["seed"] == 2024
    r = CliRunner().invoke(
        main, ["agreement", "tric-ranking", "--home", str(home), "--by", "book", "--json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["factor"] == "book" and doc["binary"] == full["factors"]["binary"]["book"]
    r = CliRunner().invoke(main, ["agreement", "tric-ranking", "--home", str(home), "--by", "pair"])
    assert r.exit_code != 0 and "annotator_pair, book, overlap, passage only" in r.output
    r = CliRunner().invoke(main, ["agreement", "tric-ranking", "--home", str(home), "--by", "book"])
    assert r.exit_code == 0 and "0.709" in r.output and "multi-kappa" in r.output
    assert "Hosea" in r.output
    r = CliRunner().invoke(main, ["agreement", "tric-ranking", "--home", str(home), "--bayes"])
    assert r.exit_code != 0 and "--bayes needs the release's judgments" in r.output
    c = app.test_client()
    page = c.get("/tasks/tric-ranking/agreement").get_data(as_text=True)
    assert "0.709" in page and "3821" in page and "multi-kappa" in page and "Hosea" in page
    assert "<script" not in page and "style=" not in page and "<style" not in page
    svg = c.get("/tasks/tric-ranking/agreement/book.svg")
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml" and b"Hosea" in svg.data
    assert c.get("/tasks/tric-ranking/agreement/nope.svg").status_code == 404
    assert c.get("/tasks/tric-ranking/agreement/curve.svg").status_code == 404  # no fit cached
    assert c.get("/tasks/loci-similes/agreement").status_code == 404
    # a cached fit (as `agreement --bayes` writes it; numbers made up here) is shown with its curve
    from tasks.agreement import BAYES_FILE

    def summary(m):
        return {
            "median": m,
            "mean": m,
            "50%": [m - 0.01, m + 0.01],
            "89%": [m - 0.03, m + 0.03],
            "95%": [m - 0.04, m + 0.04],
        }

    fitted = {
        "model": "multinomial logit (test)",
        "binarisation": "1-2 -> 0",
        "average": summary(0.381),
        "marginal": summary(0.377),
        "empirical": full["kappa"]["binary"]["multi_kappa"],
        "diagnostics": {
            "chains": 4,
            "warmup": 300,
            "samples": 700,
            "seed": 2024,
            "max_rhat": 1.004,
            "min_ess": 812.0,
            "divergences": 0,
            "observations": 15090,
            "seconds": 95.0,
        },
        "curve": {
            "covariate": "overlap",
            "points": [
                {
                    "z": z,
                    "value": z,
                    "average": summary(0.38 - 0.01 * z),
                    "marginal": summary(0.37 - 0.01 * z),
                }
                for z in (-2.0, 0.0, 2.0)
            ],
        },
    }
    # the session's shared data directory: the cached fit is taken away again whatever happens
    (store.root / BAYES_FILE).write_text(json.dumps(fitted), encoding="utf-8")
    try:
        page = c.get("/tasks/tric-ranking/agreement").get_data(as_text=True)
        assert "Bayesian multilevel model" in page and "0.381" in page and "1.0040" in page
        curve = c.get("/tasks/tric-ranking/agreement/curve.svg")
        assert curve.status_code == 200 and b"marginalised over books" in curve.data
        dev = make_phase(app, "tric-ranking", "dev")
        make_user(app, "b@x.org", team="beta")
        make_submission(app, team=team_of(app, "beta"), phase=dev, scores={"all": 0.7})
        html = c.get("/tasks/tric-ranking/leaderboard?phase=dev").get_data(as_text=True)
        assert 'href="/tasks/tric-ranking/agreement"' in html
    finally:
        (store.root / BAYES_FILE).unlink(missing_ok=True)
