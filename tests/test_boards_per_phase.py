"""Several boards per phase (issue 50): the example bundle's evaluation phase declares `prose`,
`verse` (Spearman on each genre) and `track-b` (the runs whose fact sheet says track B) beside its
default board. Runs land on exactly the boards they should; each board's order, intervals and rank
ranges equal a naive computation on that board's runs (scipy's Spearman on explicitly repeated
pairs, from the phase's one matrix of resamples); publication freezes every board; a bad
declaration is refused with its path."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from backbone import burst, make_team, submit
from boardkit import (  # noqa: F401  (the fixtures)
    EXPECTED,
    LABEL,
    PHASE,
    TASK,
    B,
    _app,
    _file,
    _forget_declared_tasks,
    _get,
    _gold,
    _naive_matrix,
    _partial,
    _predictions,
    _runs,
    site,
)
from browserkit import driver  # noqa: F401  (Chromium, its console read)
from bundlekit import _bundle
from sqlalchemy import select

from server.models import Phase


def _naive(b, board: dict, preds: dict[str, dict], subset: str) -> dict:
    """Intervals and rank ranges of a board's ranked rows, naively (`_naive_matrix`)."""
    ranked, M = _naive_matrix(b, board, preds, subset)
    lo, hi = np.percentile(M, 2.5, axis=1), np.percentile(M, 97.5, axis=1)
    ranks = np.array(
        [[1 + int((M[:, k] > M[i, k]).sum()) for k in range(B)] for i in range(len(M))]
    )
    rr_lo = np.floor(np.percentile(ranks, 2.5, axis=1)).astype(int)
    rr_hi = np.ceil(np.percentile(ranks, 97.5, axis=1)).astype(int)
    return {
        r["submission_id"]: ([lo[i], hi[i]], [int(rr_lo[i]), int(rr_hi[i])])
        for i, r in enumerate(ranked)
    }


def test_runs_land_on_their_boards_each_ranked_as_a_naive_computation_says(site):  # noqa: F811
    from scipy.stats import spearmanr

    runs = _runs(site)
    preds = {sid: pred for sid, pred in runs.values()}
    app = _app()
    gold = {g["pair_id"]: g for g in _gold(site)}
    with site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        from server.boards import stats

        units = stats._gold_part(site.engine, p, site.settings, "public")
    for name, want in EXPECTED.items():
        r = _get(app, None if name == "main" else name)
        assert r.status_code == 200, (name, r.get_data(as_text=True)[:300])
        board = r.get_json()
        assert board.get("board", "main") == name
        teams = {row["team"] for row in board["rows"] if row["row_type"] == "team"}
        assert teams == {LABEL[t] for t in want}, (name, teams)  # anonymous on every board
        if name == "main":
            continue
        subset = board["primary"]["subset"]
        assert board["statistics"]["status"] == "ready", name
        # the order: the board's value, computed naively from each run's file on the public part
        points = {}
        for row in board["rows"]:
            pred = preds[row["submission_id"]]
            ids = [
                u for u in gold if u in units and (subset == "all" or gold[u]["genre"] == subset)
            ]
            ids = [u for u in ids if u in pred]
            value = spearmanr([gold[u]["score"] for u in ids], [pred[u] for u in ids]).statistic
            assert row["metrics"][f"{subset}/spearman"] == pytest.approx(value, abs=1e-9)
            points[row["submission_id"]] = value
        order = [row["submission_id"] for row in board["rows"]]
        assert order == sorted(points, key=lambda k: -points[k])
        assert [row["rank"] for row in board["rows"]] == list(range(1, len(order) + 1))
        naive = _naive(site, board, preds, subset)
        for row in board["rows"]:
            ci, rr = naive[row["submission_id"]]
            assert row["ci"] == pytest.approx(ci, abs=1e-9), (name, row["team"])
            assert row["rank_range"] == rr, (name, row["team"])
        assert board["statistics"]["order"] == order
        assert board["statistics"]["seed"] == p.stats_seed


def test_a_partial_team_is_shown_as_not_covering_the_rest_of_the_macro(site):  # noqa: F811
    from server.boards import leaderboard as lb
    from server.domain import boards
    from tasks import get_task

    _runs(site)
    with site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        macro = boards.checked(
            s,
            get_task(TASK),
            [
                {
                    "name": "macro",
                    "title": "Macro",
                    "ranking": {"subset": "macro", "metric": "spearman"},
                }
            ],
        )[0]
        spec = boards.of_phase(type("P", (), {"boards": [macro]})())[0]
        board = lb.build_board(s, get_task(TASK), p, audience="organizer", board=spec)
    # a board ranked by a macro shows the one-genre teams unranked, saying what they cover, never
    # with a partial macro passed off as the macro
    assert {r.team for r in board.rows if r.rank is not None} == {"alpha", "beta", "delta", "theta"}
    partial = {r.team: r for r in board.rows if r.rank is None}
    assert set(partial) == {"gamma", "eps"}
    assert partial["eps"].why_empty.startswith("covers verse only, not prose: no macro over every")
    with site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        main = lb.build_board(s, get_task(TASK), p, audience="organizer")
    gamma = next(r for r in main.rows if r.team == "gamma")
    assert gamma.values["macro/spearman"] is None and gamma.rank is None
    assert gamma.values["prose/spearman"] is not None
    # on a board ranked by the macro, such a row says what it covers
    with site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        task = get_task(TASK)
        import dataclasses

        by_macro = dataclasses.replace(task, primary=("macro", "spearman"))
        board = lb.build_board(s, by_macro, p, audience="organizer")
    gamma = next(r for r in board.rows if r.team == "gamma")
    assert gamma.rank is None and gamma.values["macro/spearman"] is None
    assert gamma.why_empty.startswith("covers prose only, not verse: no macro over every genre")


def test_the_primary_run_rule_is_each_boards_own(site):  # noqa: F811
    """A team's marked primary run ranks on the boards it enters; on a board it does not enter,
    the team's latest run that does."""
    from server.domain.submissions import mark_primary

    team, user = make_team(site, "zeta")
    a = submit(
        site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.1, 7)), facts={"track": "A"}
    )
    bb = submit(
        site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.2, 8)), facts={"track": "B"}
    )
    burst(site)
    with site.session() as s:
        mark_primary(s, submission_id=a.id, team_id=team.id)
    app = _app()
    main = _get(app, None).get_json()
    trb = _get(app, "track-b").get_json()
    assert [(r["submission_id"], r["chosen_by"]) for r in main["rows"]] == [(a.id, "primary run")]
    assert [(r["submission_id"], r["chosen_by"]) for r in trb["rows"]] == [
        (bb.id, "latest scored run")
    ]


def test_an_unknown_board_is_a_404_naming_the_boards_that_exist(site):  # noqa: F811
    app = _app()
    for fmt in ("json", "html", "csv"):
        r = _get(app, "po<e>try%22", fmt)
        assert r.status_code == 404
        text = r.get_data(as_text=True)
        assert "main, prose, verse, track-b" in text, text[:400]
        assert "<e>" not in text  # the name is escaped on the page, never markup


def test_a_bad_declaration_is_refused_naming_its_path(site):  # noqa: F811
    from server.domain import boards
    from server.exceptions import BoardsInvalid
    from tasks import get_task

    bad = [
        {"name": "poetry", "title": "P", "ranking": {"subset": "poetry", "metric": "spearman"}},
        {"name": "Bad Name!", "title": "x", "ranking": {"metric": "spearman"}},
        {
            "name": "t",
            "title": "T",
            "ranking": {"metric": "spearman"},
            "filter": {"fact": "trak", "equals": ["B"]},
        },
        {
            "name": "u",
            "title": "U",
            "ranking": {"metric": "spearman"},
            "filter": {"fact": "track", "equals": ["C"]},
        },
    ]
    with site.session() as s, pytest.raises(BoardsInvalid) as e:
        boards.checked(s, get_task(TASK), bad, where="tasks[0].phases[1]")
    msg = e.value.message
    assert "tasks[0].phases[1].boards[0].ranking.subset: 'poetry' is not a declared subset" in msg
    assert "tasks[0].phases[1].boards[1].name:" in msg
    assert "boards[2].filter.fact: 'trak' is not a declared fact field" in msg
    assert "boards[3].filter.equals: 'C' not among the choices of track" in msg
    assert e.value.status == 422


# ----------------------------------------------------------------------------- the surfaces


def _shell(*args, env=None):
    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False)
    assert r.exit_code == 0, (args, r.output)
    return r


def _primary_pearson(spec, root):
    """Version 2 of the task: another primary metric (the published boards must not move)."""
    _partial(spec, root)
    spec["tasks"][0]["primary"] = {"subset": "all", "metric": "pearson"}


BOARDS = ("main", "prose", "verse", "track-b")


def test_api_and_cli_runs_land_on_their_boards_and_publication_freezes_every_board(
    served, tmp_path
):
    """Runs sent through the API and the CLI with their tracks land on their boards; the task's
    JSON lists the boards; publishing the phase freezes every board (JSON, CSV, LaTeX) byte for
    byte through a task update that rescores every run; a backup restored elsewhere serves the
    same bytes."""
    from apikit import _cli as remote
    from apikit import _h, _run_job, _submit
    from sqlmodel import Session
    from webkit import engine_of, update_phase

    url, tokens, home, app = served
    r = _shell("competitions", "create", str(_bundle(tmp_path, "v1", _partial)), "--json")
    assert json.loads(r.stdout)["tasks"] == [TASK]
    c, org = app.test_client(), _h(tokens["org"])
    with Session(engine_of(app)) as s:
        q = select(Phase.id).where(Phase.task_id == TASK, Phase.name == PHASE)
        pid = s.execute(q).scalar_one()
    update_phase(app, pid, opens_at=None, closes_at=None, daily_limit=None, total_limit=None)
    gold = [json.loads(x) for x in (home / "tasks" / TASK / "gold" / "test" / "gold.jsonl").open()]
    for team in ("alpha", "beta"):
        r = c.post(
            "/api/v1/competitions/sts-latin-2027/registration",
            json={"accept_terms": True},
            headers=_h(tokens[team]),
        )
        assert r.status_code == 200, r.json

    def preds(seed, genres=("prose", "verse")):
        rng = random.Random(seed)
        return _file(
            {g["pair_id"]: g["score"] + rng.gauss(0, 0.2) for g in gold if g["genre"] in genres}
        )

    # alpha, track A, through the API; beta, track B, through the CLI; beta's verse-only run
    # (track B, through the API) is on no board: its team's ranked run is its latest, and the
    # boards it would enter rank the run that has their value
    r = _submit(c, tokens["alpha"], TASK, preds(1), phase=PHASE, **{"fact.track": "A"})
    assert r.status_code == 201, r.json
    ids = {"alpha": r.json["id"]}
    f = tmp_path / "beta.jsonl"
    f.write_bytes(preds(2))
    got = remote(
        url, tokens["beta"], "submit", TASK, str(f), "--phase", PHASE, "--fact", "track=B", "--json"
    )
    ids["beta"] = json.loads(got.stdout)["id"]
    r = _submit(c, tokens["beta"], TASK, preds(3, ("verse",)), phase=PHASE, **{"fact.track": "B"})
    assert r.status_code == 201, r.json
    ids["beta-verse"] = r.json["id"]
    for sid in ids.values():
        assert _run_job(sid)["status"] == "scored"

    want = {
        "main": {ids["alpha"], ids["beta-verse"]},  # beta's latest run, unranked (no `all`)
        "prose": {ids["alpha"], ids["beta"]},
        "verse": {ids["alpha"], ids["beta-verse"]},
        "track-b": {ids["beta"]},
    }
    for name in BOARDS:
        q = "" if name == "main" else f"&board={name}"
        board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase={PHASE}{q}", headers=org).json
        assert {r["submission_id"] for r in board["rows"]} == want[name], name
        out = remote(url, tokens["org"], "leaderboard", TASK, "--phase", PHASE, "--board", name)
        assert name == "main" or f"board {board['title']}" in out.stdout
    task = c.get(f"/api/v1/tasks/{TASK}", headers=org).json
    (ev,) = [p for p in task["phases"] if p["name"] == PHASE]
    assert [b["name"] for b in ev["boards"]] == list(BOARDS)
    assert ev["boards"][3]["filter"] == {"fact": "track", "equals": ["B"]}
    # an unknown board: 404 naming the boards that exist, on the API and the CLI
    r = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase={PHASE}&board=poetry", headers=org)
    assert r.status_code == 404 and "main, prose, verse, track-b" in r.json["error"]["message"]
    bad = remote(url, tokens["org"], "leaderboard", TASK, "--board", "poetry", "--json", ok=False)
    assert bad.exit_code != 0 and "'poetry'" in json.loads(bad.stdout)["error"]["message"]

    # the API's phase edit: a bad declaration is a 422 naming its path (odd characters in a name,
    # a filter on a fact the competition does not declare, an undeclared subset); nothing changes
    for boards, where in (
        ([{"name": "../x<y>", "title": "x", "ranking": {"metric": "spearman"}}], "boards.0.name"),
        (
            [
                {
                    "name": "t",
                    "title": "T",
                    "ranking": {"metric": "spearman"},
                    "filter": {"fact": "gold", "equals": ["x"]},
                }
            ],
            "boards[0].filter.fact: 'gold' is not a declared fact field",
        ),
        (
            [{"name": "p", "title": "P", "ranking": {"subset": "poetry", "metric": "spearman"}}],
            "boards[0].ranking.subset: 'poetry' is not a declared subset",
        ),
        ([{"name": "main", "title": "M", "ranking": {"metric": "spearman"}}], "boards.0.name"),
    ):
        r = c.patch(f"/api/v1/tasks/{TASK}/phases/{PHASE}", json={"boards": boards}, headers=org)
        assert r.status_code == 422 and where in r.json["error"]["message"], r.json
        assert "Traceback" not in r.get_data(as_text=True)
    # the organizer's phase page: the declared boards as YAML; a bad list is refused on the form
    from webkit import Browser

    web = Browser(app.test_client())
    web.login("org@example.org", "correct horse")
    page = web.get(f"/organizer/phases/{pid}").get_data(as_text=True)
    assert "name: track-b" in page and "fact: track" in page
    form = {"public_fraction": "0.3", "daily_limit": "", "total_limit": "", "concurrent_limit": ""}
    for text, said in (
        ("- name: x\n  title: X\n  ranking: {subset: poetry, metric: spearman}\n", "poetry"),
        ("- name: [unclosed", "not YAML"),
    ):
        r = web.post(f"/organizer/phases/{pid}", data={**form, "boards": text})
        assert r.status_code == 400 and said in r.get_data(as_text=True), text
    ev = [
        p for p in c.get(f"/api/v1/tasks/{TASK}", headers=org).json["phases"] if p["name"] == PHASE
    ]
    assert [b["name"] for b in ev[0]["boards"]] == list(BOARDS)
    # a participant may not edit them
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}", json={"boards": []}, headers=_h(tokens["alpha"])
    )
    assert r.status_code == 403

    # publication: every board's final ranking, in version 1
    r = c.post(f"/api/v1/tasks/{TASK}/phases/{PHASE}/publish", headers=org, json={"close": True})
    assert r.status_code == 201, r.json

    def published():
        out = {}
        for name in BOARDS:
            q = "" if name == "main" else f"?board={name}"
            got = c.get(f"/api/v1/tasks/{TASK}/phases/{PHASE}/rankings/1{q}", headers=org)
            assert got.status_code == 200, (name, got.json)
            out[(name, "snapshot")] = got.get_data()
            for fmt in ("json", "csv", "tex"):
                q = "" if name == "main" else f"&board={name}"
                got = c.get(
                    f"/api/v1/tasks/{TASK}/phases/{PHASE}/export?format={fmt}{q}", headers=org
                )
                assert got.status_code == 200, (name, fmt)
                out[(name, fmt)] = got.get_data()
        return out

    before = published()
    assert json.loads(before[("track-b", "json")])["board"] == "track-b"
    assert {r["team"] for r in json.loads(before[("track-b", "json")])["rows"]} == {"beta"}
    assert b"board Track B" in before[("track-b", "tex")]
    # a task update (another primary) marks every run stale and rescores it: nothing published moves
    r = _shell(
        "competitions", "create", str(_bundle(tmp_path, "v2", _primary_pearson)), "--update",
        "--reason", "pearson", "--json",
    )  # fmt: skip
    rescored = [i for p in json.loads(r.stdout)["tasks"][0]["phases"] for i in p["rescoring"]]
    assert sorted(rescored) == sorted(ids.values())
    for sid in rescored:
        assert _run_job(sid)["status"] == "scored"
    assert published() == before
    # the boards change after publication (one removed, one added): version 1 keeps its own
    declared = json.loads(json.dumps(ev[0]["boards"][1:3]))
    declared.append(
        {"name": "verse-r", "title": "Verse r", "ranking": {"subset": "verse", "metric": "pearson"}}
    )
    r = c.patch(f"/api/v1/tasks/{TASK}/phases/{PHASE}", json={"boards": declared}, headers=org)
    assert r.status_code == 200, r.json
    assert [b["name"] for b in r.json["boards"]] == ["main", "prose", "verse", "verse-r"]
    assert published() == before
    r = c.get(f"/api/v1/tasks/{TASK}/phases/{PHASE}/rankings/1?board=verse-r", headers=org)
    assert r.status_code == 404
    assert "its boards: main, prose, track-b, verse" in r.json["error"]["message"]

    # a backup restored on another data directory serves every board's bytes
    out = tmp_path / "backups"
    out.mkdir()
    r = _shell("backup", str(out), "--json")
    archive = json.loads(r.stdout)["archive"]
    target = tmp_path / "target"
    secret = app.extensions["palimpsest.settings"].secret_key
    env = {"PALIMPSEST_HOME": str(target), "DATABASE_URL": "", "PALIMPSEST_SECRET_KEY": secret}
    rep = json.loads(_shell("restore", archive, "--json", env=env).stdout)
    assert rep["ok"], rep
    from server import create_app

    app2 = create_app(
        {
            "home": target,
            "env": "testing",
            "redis_url": "redis://127.0.0.1:1/0",
            "secret_key": secret,
        }
    )
    c = app2.test_client()
    assert published() == before


def test_a_web_run_lands_on_its_boards_and_the_chooser_works_at_1366_and_390(
    served,
    tmp_path,
    driver,  # noqa: F811  (browserkit's fixture)
):
    """A run uploaded on the web form with its track lands on the track's board; the board page's
    chooser lists the phase's boards, leads to each, and fits a phone's width (the console
    clean)."""
    from apikit import _h, _run_job, _submit
    from browserkit import _body, _errors, _fill, _go, _width
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    from webkit import update_phase

    url, tokens, home, app = served
    _shell("competitions", "create", str(_bundle(tmp_path, "v1", _partial)), "--json")
    from sqlmodel import Session
    from webkit import engine_of

    with Session(engine_of(app)) as s:
        q = select(Phase.id).where(Phase.task_id == TASK, Phase.name == PHASE)
        pid = s.execute(q).scalar_one()
    update_phase(app, pid, opens_at=None, closes_at=None, daily_limit=None, total_limit=None)
    c = app.test_client()
    for team in ("alpha", "beta"):
        r = c.post(
            "/api/v1/competitions/sts-latin-2027/registration",
            json={"accept_terms": True},
            headers=_h(tokens[team]),
        )
        assert r.status_code == 200, r.json
    gold = [json.loads(x) for x in (home / "tasks" / TASK / "gold" / "test" / "gold.jsonl").open()]
    rng = random.Random(5)
    f = tmp_path / "web.jsonl"
    f.write_bytes(_file({g["pair_id"]: g["score"] + rng.gauss(0, 0.1) for g in gold}))

    d = driver
    d.get(url + "/auth/login")
    _fill(d, "email", "beta@example.org")
    _fill(d, "password", "correct horse")
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    d.get(f"{url}/tasks/{TASK}/submit")
    Select(d.find_element(By.NAME, "phase")).select_by_value(PHASE)
    d.find_element(By.NAME, "file").send_keys(str(f))
    _fill(d, "method_name", "web-b")
    Select(d.find_element(By.NAME, "fact.track")).select_by_value("B")
    _go(d, d.find_element(By.XPATH, "//main//form//button[normalize-space()='Submit']"))
    assert "queued for scoring" in _body(d), _body(d)[:500]
    web_id = int(d.current_url.rstrip("/").rsplit("/", 1)[1])
    r = _submit(c, tokens["alpha"], TASK, f.read_bytes(), phase=PHASE, **{"fact.track": "A"})
    assert r.status_code == 201, r.json
    for sid in (web_id, r.json["id"]):
        assert _run_job(sid)["status"] == "scored"

    for width in ("wide", "phone"):
        _width(d, width)
        d.get(f"{url}/tasks/{TASK}/leaderboard?phase={PHASE}")
        nav = d.find_element(By.CSS_SELECTOR, "nav.board-chooser")
        links = nav.find_elements(By.TAG_NAME, "a")
        assert [a.text for a in links] == ["Main", "Prose", "Verse", "Track B"]
        assert nav.find_element(By.CSS_SELECTOR, "a[aria-current]").text == "Main"
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (width, overflow)
        # every tab is on the screen (they wrap on a phone), none hidden beyond its right edge
        right = d.execute_script("return document.documentElement.clientWidth")
        assert all(a.location["x"] + a.size["width"] <= right + 1 for a in links), width
        d.save_screenshot(str(tmp_path / f"boards-{width}.png"))
        _go(d, [a for a in links if a.text == "Track B"][0])
        assert "Board Track B" in _body(d)
        rows = d.find_elements(By.CSS_SELECTOR, "table tbody tr")
        assert len(rows) == 1 and "beta" in rows[0].text  # beta sees its own name
        assert d.find_element(By.CSS_SELECTOR, "nav.board-chooser a[aria-current]").text == (
            "Track B"
        )
        d.save_screenshot(str(tmp_path / f"track-b-{width}.png"))
        assert _errors(d) == []

    # the organizer's phase page, where the boards are edited as YAML: both widths, clean
    d.delete_all_cookies()
    d.get(url + "/auth/login")
    _fill(d, "email", "org@example.org")
    _fill(d, "password", "correct horse")
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    for width in ("wide", "phone"):
        _width(d, width)
        d.get(f"{url}/organizer/phases/{pid}")
        area = d.find_element(By.NAME, "boards")
        assert "name: track-b" in area.get_attribute("value")
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (width, overflow)
        d.save_screenshot(str(tmp_path / f"phase-page-{width}.png"))
        assert _errors(d) == []


def test_a_macros_groups_resampled_on_the_way_are_a_group_boards_own(site):  # noqa: F811
    """The phase's one matrix feeds every board: where the primary value is a macro over the
    groups, each group's resampled values are computed on the way and kept for the boards ranked
    by one group; they equal, bit for bit, what such a board computes on its own."""
    import dataclasses

    from scorer.bootstrap import Bootstrap
    from server.boards import stats
    from tasks import get_task
    from tasks.store import TaskStore

    runs = _runs(site)
    task = get_task(TASK)
    by_macro = dataclasses.replace(task, primary=("macro", "spearman"))
    store = TaskStore(TASK, site.settings.home)
    macro = Bootstrap(by_macro, store, "test", None)
    W = macro.weights(B, 7)
    for name in ("alpha", "gamma"):  # gamma covers prose only: its verse values are undefined
        sid, _ = runs[name]
        with site.session() as s:
            from server.models import Submission

            attempt = s.get(Submission, sid).score_attempt
        arrays = stats.load_units(site.settings, task, "test", sid, attempt)
        macro.samples(arrays, W)
        for genre in ("prose", "verse"):
            own = Bootstrap(task, store, "test", None, value=(genre, "spearman"))
            assert own.units == macro.units
            np.testing.assert_array_equal(macro.group_samples[genre], own.samples(arrays, W))
    assert np.isnan(macro.group_samples["verse"]).all()
