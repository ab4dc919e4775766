"""Boards whose cost follows the teams: one render serves every team whose view is the public
board (a team gets its own only where it differs: its ranked run not shown publicly, its own name
on an anonymous board), renders shared by the site's processes through Redis, and the ranked run of
each team chosen in the database exactly as the rule in Python chooses it."""

from __future__ import annotations

import pytest
from browserkit import driver, live  # noqa: F401  (fixtures: Chromium, the served app)
from helpers import board_json
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of

from server.boards import leaderboard as lb
from server.models import Phase, Submission, Team, utcnow
from tasks import get_task


@pytest.fixture
def teams(app):
    for name in ["alpha", "beta", "gamma", "delta"]:
        make_user(app, f"{name}@x.org", team=name)
    make_user(app, "base@x.org", team="Baselines", baseline=True)
    return {n: team_of(app, n) for n in ["alpha", "beta", "gamma", "delta", "Baselines"]}


def _signed_in(app, email):
    b = Browser(app.test_client())
    b.login(email)
    return b.c


def test_one_render_serves_every_team_whose_view_is_the_public_one(app, client, teams):
    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9})
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.8})
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.7}, show_publicly=False)
    cache = app.extensions["palimpsest.lbcache"]
    public = board_json(client)
    assert [r["team"] for r in public["rows"]] == ["alpha", "beta"]
    assert cache.renders == 1
    # alpha, beta and delta (no run) see the public board: the same render
    for who in ("alpha", "beta", "delta"):
        assert board_json(_signed_in(app, f"{who}@x.org")) == public
    assert cache.renders == 1
    # gamma's ranked run is not public: gamma sees it, marked, in a render of its own
    rows = board_json(_signed_in(app, "gamma@x.org"))["rows"]
    assert [(r["team"], r.get("note")) for r in rows] == [
        ("alpha", None),
        ("beta", None),
        ("gamma", "not public"),
    ]
    assert cache.renders == 2
    # the pages too
    html = _signed_in(app, "beta@x.org").get("/tasks/tric-binary/leaderboard?phase=dev")
    assert html.status_code == 200 and "beta@x.org" in html.get_data(as_text=True)
    assert cache.renders == 3  # the HTML once, for the public and every team like it


def test_one_render_serves_every_team_on_a_declared_board_too(app, teams):
    """A declared board takes the same path as the default one: one render for every team whose
    view of that board is the public one, a render of its own for a team whose ranked run on that
    board is not shown publicly; which run that is follows the board's own filter and value (a
    team's non-public run that does not enter the board leaves its view the public one)."""
    boards = [
        {"name": "oov", "title": "OOV", "ranking": {"subset": "oov", "metric": "f1"}},
        {
            "name": "track-b",
            "title": "Track B",
            "ranking": {"subset": "all", "metric": "f1"},
            "filter": {"fact": "track", "equals": ["B"]},
        },
    ]
    dev = make_phase(app, "tric-binary", "dev", boards=boards)
    b = {"facts": {"track": "B"}}
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9}, **b)
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.8}, **b)
    # gamma: a public run on track B, then a later one on track A not shown publicly (its ranked
    # run on the default board and on oov, not on track-b)
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.6}, **b)
    make_submission(
        app,
        team=teams["gamma"],
        phase=dev,
        scores={"all": 0.7},
        show_publicly=False,
        facts={"track": "A"},
    )
    cache = app.extensions["palimpsest.lbcache"]

    def get(client, board):
        r = client.get(f"/tasks/tric-binary/leaderboard.json?phase=dev&board={board}")
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
        return r.get_json()

    anonymous = app.test_client()
    oov = get(anonymous, "oov")
    assert [r["team"] for r in oov["rows"]] == ["alpha", "beta"] and oov["board"] == "oov"
    trb = get(anonymous, "track-b")
    assert [r["team"] for r in trb["rows"]] == ["alpha", "beta", "gamma"]
    assert cache.renders == 2
    # alpha, beta and delta (no run) see each public board: its one render
    for who in ("alpha", "beta", "delta"):
        c = _signed_in(app, f"{who}@x.org")
        assert get(c, "oov") == oov and get(c, "track-b") == trb
    assert cache.renders == 2
    # gamma's ranked run on oov is not public: gamma sees it, marked, in a render of its own
    gamma = _signed_in(app, "gamma@x.org")
    rows = get(gamma, "oov")["rows"]
    assert [(r["team"], r.get("note")) for r in rows] == [
        ("alpha", None),
        ("beta", None),
        ("gamma", "not public"),
    ]
    assert cache.renders == 3
    # on track-b gamma's ranked run is its public one: the public render
    assert get(gamma, "track-b") == trb
    assert cache.renders == 3
    # the default board: gamma's ranked run there is the non-public one, as before
    assert [r.get("note") for r in board_json(gamma)["rows"]][-1] == "not public"
    assert cache.renders == 4


def test_renders_are_shared_by_the_sites_processes(app, teams, redis_tcp_url, web_home):

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9})

    def process():
        return _site_process(web_home, redis_tcp_url, PALIMPSEST_ENQUEUE=False)

    one, two = process(), process()
    first = one.test_client().get("/tasks/tric-binary/leaderboard.csv?phase=dev")
    assert one.extensions["palimpsest.lbcache"].renders == 1
    again = two.test_client().get("/tasks/tric-binary/leaderboard.csv?phase=dev")
    assert again.data == first.data and two.extensions["palimpsest.lbcache"].renders == 0
    # a new score moves the version: rendered once more, then shared again
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.95})
    moved = two.test_client().get("/tasks/tric-binary/leaderboard.csv?phase=dev")
    assert moved.data != first.data and two.extensions["palimpsest.lbcache"].renders == 1
    assert one.test_client().get("/tasks/tric-binary/leaderboard.csv?phase=dev").data == moved.data
    assert one.extensions["palimpsest.lbcache"].renders == 1


def _naive_choice(s, phase, parts):
    """The rule as the board applied it in Python over every run: per team the marked primary run
    else the latest (by creation, then id), per baseline method the newest; hidden and removed
    runs and runs without a score on a ranked part left out."""
    from server.models import Score

    scored = set(s.exec(select(Score.submission_id).where(Score.part.in_(parts))))
    chosen, baselines = {}, {}
    q = select(Submission, Team).join(Team, Team.id == Submission.team_id)
    for sub, team in s.exec(q.where(Submission.phase_id == phase.id)):
        if sub.removed_at is not None or sub.hidden or sub.id not in scored:
            continue
        if sub.status != "scored":
            continue
        if sub.is_baseline or team.is_baseline:
            key = (team.id, sub.method_name)
            cur = baselines.get(key)
            if cur is None or (sub.created_at, sub.id) > (cur.created_at, cur.id):
                baselines[key] = sub
            continue
        cur = chosen.get(team.id)
        if cur is None or (sub.is_primary, sub.created_at, sub.id) > (
            cur.is_primary,
            cur.created_at,
            cur.id,
        ):
            chosen[team.id] = sub
    return sorted(x.id for x in [*chosen.values(), *baselines.values()])


def test_the_ranked_run_chosen_in_sql_is_the_rules_choice(app, teams):
    import random

    dev = make_phase(app, "tric-binary", "dev")
    rng = random.Random(4)
    names = ["alpha", "beta", "gamma", "delta"]
    for i in range(60):
        team = teams[rng.choice(names)]
        make_submission(
            app,
            team=team,
            phase=dev,
            scores={"all": rng.random()},
            method=f"m{i % 3}",
            is_primary=rng.random() < 0.1,
            hidden=rng.random() < 0.1,
            removed_at=utcnow() if rng.random() < 0.05 else None,
            status="scored" if rng.random() < 0.9 else "failed",
        )
    for i in range(6):
        make_submission(
            app,
            team=teams["Baselines"],
            phase=dev,
            scores={"all": rng.random()},
            method=f"b{i % 2}",
        )
    with Session(engine_of(app)) as s:
        phase = s.get(Phase, dev.id)
        got = lb._ranked_runs(s, phase, ("public", "all"), set(), False, None)
        want = _naive_choice(s, phase, ("public", "all"))
        assert sorted(sub.id for sub, _ in got) == want
        board = lb.build_board(s, get_task("tric-binary"), phase)
        assert sorted(r.submission_id for r in board.rows) == want


def test_a_large_boards_statistics_keep_the_neighbours_not_the_matrix(app, client, teams):
    """Beyond 60 ranked rows the board's statistics hold, per row, the p-values against the next
    row and against its cluster's best (not the R x R matrix), and the significance page lists
    them; the JSON stays proportional to the rows."""
    import json

    import numpy as np

    from scorer.bootstrap import FULL_MATRIX_ROWS
    from server.boards import stats

    dev = make_phase(app, "tric-binary", "dev")
    n = FULL_MATRIX_ROWS + 5
    for i in range(n):
        make_user(app, f"t{i}@x.org", team=f"t{i}")
        make_submission(app, team=team_of(app, f"t{i}"), phase=dev, scores={"all": i / n})
    task = get_task("tric-binary")
    with Session(engine_of(app)) as s:
        board = lb.build_board(s, task, s.get(Phase, dev.id))
    rng = np.random.default_rng(0)
    by_id = {r.submission_id: r.values["all/f1"] for r in board.rows}

    class Part:  # the resamples of a phase: each row's score plus paired noise
        part, B, seed, task = "all", 200, 1, get_task("tric-binary")
        boot = type("Boot", (), {"clusters": None})()
        shared = rng.normal(0, 0.02, 200)

        def samples(self, settings, sid, attempt, *, compute=True, value=None):
            return by_id[sid] + self.shared + rng.normal(0, 0.004, 200)

    settings = app.extensions["palimpsest.settings"]
    body = stats.statistics(settings, Part(), board)
    assert body["p"] is None and body["p_holm"] is None
    nb = body["neighbours"]
    assert all(len(nb[k]) == n for k in ("p_next", "p_holm_next", "p_head", "p_holm_head"))
    assert nb["p_next"][-1] is None and sum(x is None for x in nb["p_head"]) == max(
        r["cluster"] for r in body["rows"].values()
    )
    eng = engine_of(app)
    version = stats.phase_version(settings, eng, task, dev.id)
    path = stats.board_path(settings.home, dev.id, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    data = board_json(client)
    assert data["statistics"]["status"] == "ready" and data["statistics"]["p_holm"] is None
    assert len(data["statistics"]["neighbours"]["p_holm_next"]) == n
    page = client.get("/tasks/tric-binary/leaderboard/significance?phase=dev")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "against its cluster" in html
    # a row per ranked run in the p-values' table and in the rank sets' (with their headers), no
    # R x R matrix
    assert html.count("<tr>") == 2 * (n + 1)


def _app_with_interval(web_home, seconds: float):
    """Another app of the same site whose boards are rendered at most once per `seconds`."""
    return _site_process(
        web_home, None, seconds, PALIMPSEST_ENQUEUE=False, PALIMPSEST_SHARED_RENDERS=False
    )


def test_a_burst_of_scores_renders_each_board_once_per_interval(app, teams, web_home):
    """Views during a burst of new scores are served the last render while the next is built: a
    cold board is rendered once for every concurrent view, then at most once per interval however
    fast the scores move; once the interval has passed the board shows every score."""
    import threading
    import time

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    interval = 2.0
    site = _app_with_interval(web_home, interval)
    cache, url = site.extensions["palimpsest.lbcache"], "/tasks/tric-binary/leaderboard.json"
    got, errors = [], []

    def view(n):
        c = site.test_client()
        for _ in range(n):
            r = c.get(f"{url}?phase=dev")
            (got if r.status_code == 200 else errors).append(r.get_json() or r.status_code)

    cold = [threading.Thread(target=view, args=(1,)) for _ in range(6)]
    for t in cold:
        t.start()
    for t in cold:
        t.join()
    assert not errors and len(got) == 6 and all(g == got[0] for g in got)
    assert cache.renders == 1  # six views of a cold board: one render

    done = threading.Event()

    def keep_viewing():
        view(1)
        while not done.is_set():
            view(1)

    viewers = [threading.Thread(target=keep_viewing) for _ in range(4)]
    t0 = time.monotonic()
    for t in viewers:
        t.start()
    for i in range(12):  # twelve scores, each a new version of the board
        make_submission(app, team=teams["beta"], phase=dev, scores={"all": (10 + i) / 100})
    done.set()
    for t in viewers:
        t.join()
    elapsed = time.monotonic() - t0
    assert not errors and len(got) > 6
    assert cache.renders - 1 <= elapsed // interval + 1, (cache.renders, elapsed)
    assert site.extensions["palimpsest.lbbuilt"].builds == cache.renders
    time.sleep(interval)
    rows = site.test_client().get(f"{url}?phase=dev").get_json()["rows"]
    assert [(r["team"], r["metrics"]["all/f1"]) for r in rows] == [("alpha", 0.5), ("beta", 0.21)]


def test_statistics_arriving_are_attached_without_building_the_board_again(app, client, teams):
    import json

    from server.boards import stats

    dev = make_phase(app, "tric-binary", "dev")
    sub = make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9})
    assert board_json(client)["statistics"]["status"] == "pending"
    built = app.extensions["palimpsest.lbbuilt"]
    assert built.builds == 1
    settings = app.extensions["palimpsest.settings"]
    version = stats.phase_version(settings, engine_of(app), get_task("tric-binary"), dev.id)
    path = stats.board_path(settings.home, dev.id, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"ci": [0.8, 0.95], "rank_range": [1, 1], "cluster": 1}
    path.write_text(json.dumps({"rows": {str(sub.id): row}, "B": 10, "seed": 1, "unit": "pair"}))
    data = board_json(client)
    assert data["statistics"]["status"] == "ready" and data["rows"][0]["ci"] == [0.8, 0.95]
    assert app.extensions["palimpsest.lbcache"].renders == 2 and built.builds == 1


def test_a_hidden_team_sees_the_public_board_plus_its_own_row(app, client, teams):
    """A team whose ranked run is not public sees the public board (built once for everyone)
    with its own row in its place, ranked where it stands, in every format; no one else sees that
    row. On an anonymous board each team sees its own name and no one else's."""
    from server.domain import people
    from server.models import Competition, CompetitionTask

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.8})
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.6})
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.7}, show_publicly=False)
    built = app.extensions["palimpsest.lbbuilt"]
    gamma, beta = _signed_in(app, "gamma@x.org"), _signed_in(app, "beta@x.org")
    url = "/tasks/tric-binary/leaderboard"
    seen = [(r["team"], r["rank"], r.get("note")) for r in board_json(gamma)["rows"]]
    assert seen == [("alpha", 1, None), ("gamma", 2, "not public"), ("beta", 2, None)]
    assert gamma.get(f"{url}.csv?phase=dev").get_data(as_text=True).count("gamma") == 1
    assert 'class="tag warn">not public<' in gamma.get(f"{url}?phase=dev").get_data(as_text=True)
    for other in (client, beta):
        assert [r["team"] for r in board_json(other)["rows"]] == ["alpha", "beta"]
        for fmt in (".csv", "", ".json"):
            assert "gamma" not in other.get(f"{url}{fmt}?phase=dev").get_data(as_text=True)
    assert built.builds == 1  # the public board, built once for the three views of each

    with Session(engine_of(app)) as s:
        comp = people.competition_of_task(s, "tric-binary")
        if comp is None:
            comp = Competition(slug="anon", title="Anonymous", state="visible")
            s.add(comp)
            s.flush()
            s.add(CompetitionTask(competition_id=comp.id, task_id="tric-binary"))
        comp.anonymous_board = True
        s.commit()
    make_submission(app, team=teams["delta"], phase=dev, scores={"all": 0.5})
    public = [r["team"] for r in board_json(client)["rows"]]
    assert public == ["Team 1", "Team 2", "Team 4"]
    assert [r["team"] for r in board_json(beta)["rows"]] == ["Team 1", "beta", "Team 4"]
    assert [r["team"] for r in board_json(gamma)["rows"]] == ["Team 1", "gamma", "Team 2", "Team 4"]
    page = beta.get(f"{url}?phase=dev").get_data(as_text=True)
    assert "beta" in page and "alpha" not in page and "gamma" not in page


def test_a_hidden_teams_page_is_the_public_render_with_its_own_row_put_in(app, teams, web_home):
    """A hidden team's page is not a render of its own: the public render of the same version,
    its own row rendered alone and put in its place (and its anonymous row taken out), byte for
    byte the page a whole render of its board gives (a second process of the site that renders
    whole pages). The public page is then served to everyone without a render."""
    import re

    from flask import template_rendered

    from server.domain import people
    from server.models import Competition, CompetitionTask

    dev = make_phase(app, "tric-binary", "dev")
    scores = [("alpha", 0.8, 1), ("beta", 0.6, 1), ("gamma", 0.7, 0), ("delta", 0.5, 1)]
    for name, v, shown in scores:
        make_submission(app, team=teams[name], phase=dev, scores={"all": v}, show_publicly=shown)
    whole = _site_process(web_home, PALIMPSEST_SPLICE=False)
    url = "/tasks/tric-binary/leaderboard?phase=dev"
    rendered: list[str] = []

    def note(_, template, context, **extra):
        rendered.append(template.name)

    template_rendered.connect(note, app)  # held by `note` while the test runs

    def page(a, email):
        c = Browser(a.test_client())
        c.login(email)
        c.c.get("/")  # the sign-in's message shown
        got = c.c.get(url).get_data(as_text=True)
        return re.sub(r'name="csrf_token" value="[^"]*"', "", got)

    for anonymous in (False, True):
        if anonymous:
            with Session(engine_of(app)) as s:
                comp = people.competition_of_task(s, "tric-binary")
                if comp is None:
                    comp = Competition(slug="anon", title="Anonymous", state="visible")
                    s.add(comp)
                    s.flush()
                    s.add(CompetitionTask(competition_id=comp.id, task_id="tric-binary"))
                comp.anonymous_board = True
                s.commit()
        for who in ("gamma", "beta"):  # gamma's run not public; beta named on an anonymous board
            if who == "beta" and not anonymous:
                continue
            rendered.clear()
            spliced = page(app, f"{who}@x.org")
            # the public page of this version rendered once (by the first team's view)
            assert rendered.count("leaderboard/board.html") == (who == "gamma")
            assert rendered.count("leaderboard/_row.html") == 1  # the team's own row alone
            assert spliced == page(whole, f"{who}@x.org")
            assert spliced.count(f">{who}<") == 1 or f"<td>{who}" in spliced
            rendered.clear()
            public = app.test_client().get(url).get_data(as_text=True)
            assert "leaderboard/board.html" not in rendered  # the render the team's page made
            assert who not in re.sub(r"<nav>.*?</nav>", "", public, flags=re.S)
        make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9})  # a new version


def _site_process(web_home, redis_url=None, interval=None, **extra):
    """One web process of the site on the test's data directory (its renders shared through Redis
    when given one, its boards rendered at most once per `interval` when given one)."""
    from server import create_app

    config = {"home": web_home, "env": "testing", "database_url": None, "redis_url": redis_url}
    if interval is not None:
        config["board_refresh_seconds"] = interval
    return create_app(config | extra)


def test_the_sites_processes_render_a_board_once_per_interval(app, teams, redis_tcp_url, web_home):
    """With an interval, one process of the site renders the next version (a claim in the shared
    Redis) and the others serve its render, or the last one, until the interval has passed."""
    import time

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.9})
    interval = 1.5

    def process():
        return _site_process(web_home, redis_tcp_url, interval, PALIMPSEST_ENQUEUE=False)

    one, two = process(), process()
    url = "/tasks/tric-binary/leaderboard.csv?phase=dev"

    def renders(a):
        return a.extensions["palimpsest.lbcache"].renders

    first = one.test_client().get(url)
    assert two.test_client().get(url).data == first.data
    assert (renders(one), renders(two)) == (1, 0)
    make_submission(app, team=teams["beta"], phase=dev, scores={"all": 0.95})
    stale = one.test_client().get(url)  # within the interval: the last render, its own ETag
    assert stale.data == first.data and stale.headers["ETag"] == first.headers["ETag"]
    time.sleep(interval)
    moved = one.test_client().get(url)
    assert b"beta" in moved.data and moved.headers["ETag"] != first.headers["ETag"]
    assert two.test_client().get(url).data == moved.data  # the site's render, not its own
    assert (renders(one), renders(two)) == (2, 0)
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.5})
    assert two.test_client().get(url).data == moved.data  # the interval again
    assert b"gamma" not in one.test_client().get(url).data
    time.sleep(interval)
    assert b"gamma" in two.test_client().get(url).data
    assert b"gamma" in one.test_client().get(url).data
    assert renders(one) + renders(two) == 3


def test_views_during_a_stream_of_scores_never_render_after_the_first(
    app, teams, redis_tcp_url, web_home, monkeypatch
):
    """With renders off the request path, a view that finds its board due serves the last render
    and queues the next on the boards queue (one job however many views ask); the worker renders
    it into the site's shared renders. During a stream of new scores no view renders after the
    board's first, and every score reaches the board once the worker has run and an interval
    passed."""
    import time

    from server.jobs import board_jobs
    from server.jobs.queue import BOARDS, connect, get_queue
    from server.jobs.worker import build_worker

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.5})
    interval = 0.3

    def process():
        return _site_process(web_home, redis_tcp_url, interval)

    web, worker_app = process(), process()
    monkeypatch.setattr(board_jobs, "_APP", worker_app)  # the worker's own app, as it builds it
    settings = worker_app.extensions["palimpsest.settings"]
    queue = get_queue(BOARDS, connect(settings), settings)
    rendered = {"web": lambda: web.extensions["palimpsest.lbcache"].renders}
    rendered["worker"] = lambda: worker_app.extensions["palimpsest.lbcache"].renders
    page, api = web.test_client(), "/tasks/tric-binary/leaderboard.json?phase=dev"

    def work():  # the site's worker, which runs a render in its own process (no horse forked)
        build_worker(settings, (BOARDS,)).work(burst=True, logging_level="WARNING")

    first = page.get(api).get_json()
    assert [r["metrics"]["all/f1"] for r in first["rows"]] == [0.5]
    assert rendered["web"]() == 1  # a board never rendered: in the request, once
    seen = []
    for i in range(8):  # eight scores, each a new version of the board, viewed in between
        make_submission(app, team=teams["beta"], phase=dev, scores={"all": (10 + i) / 100})
        time.sleep(interval / 2)
        for _ in range(3):
            seen.append(page.get(api).get_json())
        assert queue.count <= 1  # asked for however many views found it due
        if i % 3 == 2:
            work()
    assert rendered["web"]() == 1, "a view rendered the board during the stream"
    assert 1 <= rendered["worker"]() <= 4
    assert len(seen) == 24 and all(s["rows"] for s in seen)
    work()
    time.sleep(interval)
    page.get(api)  # due again: the last render's interval passed, the next one asked for
    work()
    time.sleep(interval)
    rows = page.get(api).get_json()["rows"]
    assert [(r["team"], r["metrics"]["all/f1"]) for r in rows] == [("alpha", 0.5), ("beta", 0.17)]
    assert rendered["web"]() == 1

    # the worker's render of the page is the page a request renders, byte for byte
    board_jobs.render_board_job("tric-binary", "html", "public", "dev", None, None)
    third = process()  # another web process: the page from the site's renders, not rendered
    served = third.test_client().get("/tasks/tric-binary/leaderboard?phase=dev")
    assert third.extensions["palimpsest.lbcache"].renders == 0
    alone = _site_process(web_home, PALIMPSEST_SHARED_RENDERS=False)
    assert served.data == alone.test_client().get("/tasks/tric-binary/leaderboard?phase=dev").data
    assert rendered["worker"]() >= 2 and alone.extensions["palimpsest.lbcache"].renders == 1


def test_a_render_made_elsewhere_is_served_at_once_and_a_view_renders_only_without_a_worker():
    """The render cache with renders asked for elsewhere: a due board is asked for once per
    interval (served its last render meanwhile); the render made elsewhere is served as soon as it
    is in the site's renders, before the interval has passed; asked for and not come within the
    cache's patience (no worker), the view renders it itself."""
    from server.boards.render_cache import RenderCache

    class Shared:  # the site's renders as SharedRenders keeps them (newest per key, a claim)
        def __init__(self):
            self.d, self.claimed = {}, {}

        def latest(self, key):
            return self.d.get(key)

        def version(self, key):
            return self.d[key][0] if key in self.d else None

        def put(self, key, version, value):
            self.d[key] = (version, value)

        def claim(self, key, seconds):
            if clock[0] < self.claimed.get(key, -1.0):
                return False
            self.claimed[key] = clock[0] + seconds
            return True

    clock, shared, asked, k = [100.0], Shared(), [], ("t", "dev", "public", "json", None)
    web, worker = RenderCache(shared=shared, interval=5), RenderCache(shared=shared, interval=5)
    web.clock = worker.clock = lambda: clock[0]

    def view(version):
        return web.lookup(k, version, lambda: version.encode(), "s", refresh=ask)

    def ask():
        asked.append(clock[0])
        return True

    assert view("v1") == ("v1", b"v1") and web.renders == 1  # never rendered: in the request
    clock[0] += 6
    assert view("v2") == ("v1", b"v1") and len(asked) == 1  # due: asked for, the last served
    clock[0] += 0.25
    assert view("v3") == ("v1", b"v1") and len(asked) == 1  # asked once per interval
    worker.render_now(k, "v3", lambda: b"v3", "s")
    clock[0] += 1
    assert view("v4") == ("v3", b"v3")  # come: served at once, not an interval later
    assert view("v4") == ("v3", b"v3") and len(asked) == 1 and web.renders == 1
    clock[0] += 5
    assert view("v5") == ("v3", b"v3") and len(asked) == 2  # due again
    for _ in range(5):  # no worker renders it: the last render, asked for each interval
        clock[0] += 5
        assert view("v6")[0] == "v3" and web.renders == 1
    assert len(asked) == 7
    clock[0] += 10  # 35 s since it was first asked for (the cache's patience: 30 s)
    assert view("v7") == ("v7", b"v7") and web.renders == 2  # past the patience: rendered here


def test_a_hidden_teams_spliced_page_in_chromium(app, teams, live, driver):  # noqa: F811
    """The hidden team's page (the public render with its row put in) at 390 and 1366 px: its
    own row is there, marked, the console is clean and nothing is wider than the window."""
    from browserkit import _look, _sign_in
    from selenium.webdriver.common.by import By

    dev = make_phase(app, "tric-binary", "dev")
    make_submission(app, team=teams["alpha"], phase=dev, scores={"all": 0.8})
    make_submission(app, team=teams["gamma"], phase=dev, scores={"all": 0.7}, show_publicly=False)
    url = f"{live}/tasks/tric-binary/leaderboard?phase=dev"
    driver.get(url)  # the public page, rendered first
    _sign_in(driver, live, "gamma@x.org")
    _look(driver, url, [])
    rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "table.board tbody tr")]
    assert len(rows) == 2 and "gamma" in rows[1] and "not public" in rows[1], rows
