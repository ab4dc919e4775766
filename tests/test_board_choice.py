"""A ranked run per board (issue 61): a team chooses which of its runs stands on a declared board
(the action behind the web form and `POST /api/v1/submissions/<id>/primary` with `{"board":
NAME}`), whatever its primary run; the other boards keep today's rule; a run the board's filter
keeps out, an unknown board and a published phase are refused; publication freezes the choice;
the submission page offers the boards at 1366 and 390 px."""

from __future__ import annotations

import pytest
from backbone import burst, make_team, submit
from boardkit import (  # noqa: F401  (the fixtures)
    PHASE,
    TASK,
    _app,
    _file,
    _forget_declared_tasks,
    _get,
    _predictions,
    site,
)
from browserkit import driver  # noqa: F401  (Chromium, its console read)
from sqlalchemy import select

from server.models import BoardRanking, Phase


def _rows(app, board):
    got = _get(app, board).get_json()
    return {r["submission_id"]: r for r in got["rows"] if r["row_type"] == "team"}


def test_a_team_chooses_its_ranked_run_per_board(site, driver):  # noqa: F811
    from browserkit import _errors, _width
    from webkit import PASSWORD, Browser

    from server.actions import submissions as actions
    from server.domain import accounts
    from server.exceptions import LifecycleRefused, NotFound
    from server.models import User

    team, user = make_team(site, "alpha")
    with site.session() as s:
        accounts.set_password(s, s.get(User, user.id), PASSWORD)
        s.commit()
    good = submit(site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.05, 1)))
    late = submit(site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.3, 2)))
    burst(site)

    def choose(sid, board):
        with site.session() as s:
            got = actions.choose_primary(
                s=s, submission_id=sid, actor=s.get(User, user.id), board=board
            )
            return got.id

    app = _app()
    # today's rule: the latest run on every board
    for board in (None, "prose", "verse"):
        assert set(_rows(app, board)) == {late.id}, board
    assert choose(good.id, "prose") == good.id
    prose = _rows(app, "prose")
    assert set(prose) == {good.id} and prose[good.id]["chosen_by"] == "chosen for this board"
    assert set(_rows(app, "verse")) == {late.id}  # the other boards keep the rule
    assert set(_rows(app, None)) == {late.id}
    # choosing again moves it back (the API: {"board": NAME}); the primary run does not override
    # a board's choice
    from webkit import make_token

    h = {"Authorization": f"Bearer {make_token(app, user)}"}
    c = app.test_client()
    r = c.post(f"/api/v1/submissions/{late.id}/primary", json={"board": "prose"}, headers=h)
    assert r.status_code == 200, r.json
    assert set(_rows(app, "prose")) == {late.id}
    r = c.post(f"/api/v1/submissions/{late.id}/primary", json={"board": "nope"}, headers=h)
    assert r.status_code == 404 and "no board 'nope'" in r.get_data(as_text=True)
    r = c.post(f"/api/v1/submissions/{late.id}/primary", headers=h)  # no body: the phase's
    assert r.status_code == 200 and r.json["is_primary"] is True
    choose(good.id, "prose")
    choose(late.id, None)  # the phase's primary run
    assert set(_rows(app, "prose")) == {good.id} and set(_rows(app, None)) == {late.id}
    # refused: a board the run's fact sheet keeps out, an unknown board
    with pytest.raises(LifecycleRefused, match="not on the track-b board"):
        choose(good.id, "track-b")
    with pytest.raises(NotFound, match="no board 'nope'"):
        choose(good.id, "nope")

    # the submission page offers the boards the run may stand on (Chromium, both widths)
    web = Browser(app.test_client())
    web.login(user.email)
    page = web.get(f"/submissions/{good.id}").get_data(as_text=True)
    assert 'name="board"' in page and "Chosen as your ranked run on: Prose" in page
    assert "Track B" not in page.split('name="board"')[1].split("</select>")[0]
    r = web.post(f"/submissions/{late.id}/primary", data={"board": "verse"})
    assert r.status_code in (302, 303)
    assert set(_rows(app, "verse")) == {late.id}
    import threading

    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}"
        from browserkit import _fill, _go
        from selenium.webdriver.common.by import By

        driver.get(url + "/auth/login")
        _fill(driver, "email", user.email)
        _fill(driver, "password", PASSWORD)
        _go(driver, driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
        for width in ("phone", "wide"):
            _width(driver, width)
            driver.get(f"{url}/submissions/{good.id}")
            assert driver.find_element(By.NAME, "board")
            overflow = driver.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, (width, overflow)
            assert _errors(driver) == []
    finally:
        srv.shutdown()

    # publication freezes the choice: the published prose board ranks the chosen run
    from server.domain import publication
    from tasks import get_task

    with site.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        publication.prepare(s, p)
        publication.publish(
            s, p, task=get_task(TASK), actor=None, settings=site.settings, close_first=True
        )
        s.commit()
    import json

    with site.session() as s:
        snap = json.loads(
            s.execute(select(BoardRanking).where(BoardRanking.board == "prose"))
            .scalar_one()
            .body_json
        )
    assert [r["submission_id"] for r in snap["rows"] if r["row_type"] == "team"] == [good.id]
    with pytest.raises(LifecycleRefused, match="published"):
        choose(late.id, "prose")


def test_each_command_line_chooses_and_every_surface_ranks_the_choice_through_an_update(
    site,  # noqa: F811
    tmp_path,
):
    """The organizers' two command lines choose a team's ranked run for it (`palimpsest organizer
    primary` over the API, `palimpsest runs primary` at the server's shell) through the team's own
    action: a reason required and audited beside the organizer, the board's filter checked, one
    who organizes nothing refused; the team's own command line (`palimpsest primary --board`)
    too. Every surface (the board's JSON, CSV, the API, the command line's board) ranks the chosen
    run, and a task update (a new version: every run rescored) keeps each choice."""
    import csv
    import io
    import json
    import threading

    from apikit import _cli, _one_json
    from bundlekit import _bundle
    from click.testing import CliRunner
    from webkit import make_token
    from werkzeug.serving import make_server

    from cli.main import main
    from server.models import AuditLog

    team, user = make_team(site, "alpha")
    _, org = make_team(site, "organizers", organizer=True)
    _, other = make_team(site, "beta")
    good = submit(site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.05, 1)))
    late = submit(site, team, user, TASK, PHASE, data=_file(_predictions(site, 0.3, 2)))
    burst(site)
    app = _app()
    tok, tok_other, tok_team = make_token(app, org), make_token(app, other), make_token(app, user)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}"

    def everywhere(board):
        """The ranked team runs of a board on each surface."""
        got = {"json": set(_rows(app, board))}
        table = csv.DictReader(io.StringIO(_get(app, board, "csv").get_data(as_text=True)))
        got["csv"] = {int(x["submission_id"]) for x in table if x["row_type"] == "team"}
        q = f"?phase={PHASE}" + (f"&board={board}" if board else "")
        r = app.test_client().get(
            f"/api/v1/tasks/{TASK}/leaderboard{q}", headers={"Authorization": f"Bearer {tok}"}
        )
        got["api"] = {x["submission_id"] for x in r.json["rows"] if x["row_type"] == "team"}
        args = ("leaderboard", TASK, "--phase", PHASE, "--json")
        out = _one_json(_cli(url, tok_team, *args, *(("--board", board) if board else ())))
        got["cli"] = {x["submission_id"] for x in out["rows"] if x["row_type"] == "team"}
        return got

    try:
        args = ("organizer", "primary", str(good.id), "--board", "prose")
        got = _one_json(_cli(url, tok, *args, "--reason", "asked by mail", "--json"))
        assert got["id"] == good.id
        assert set(_rows(app, "prose")) == {good.id} and set(_rows(app, "verse")) == {late.id}
        r = _cli(url, tok, *args, "--reason", "  ", ok=False)  # a reason of nothing
        assert r.exit_code == 1 and "Say why" in r.output
        r = _cli(url, tok_other, "organizer", "primary", str(late.id), "--board", "prose",
                 "--reason", "ours now", ok=False)  # fmt: skip
        assert r.exit_code == 1 and set(_rows(app, "prose")) == {good.id}
        r = _cli(url, tok, "organizer", "primary", str(good.id), "--board", "track-b",
                 "--reason", "x", ok=False)  # fmt: skip
        assert r.exit_code == 1 and "not on the track-b board" in r.output

        home = str(site.settings.home)
        shell = ["runs", "primary", str(late.id), "--board", "prose", "--reason", "at the shell"]
        r = CliRunner().invoke(main, [*shell, "--json", "--home", home])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["id"] == late.id and json.loads(r.output)["board"] == "prose"
        assert set(_rows(app, "prose")) == {late.id}
        r = CliRunner().invoke(
            main, ["runs", "primary", str(good.id), "--reason", "the phase's", "--home", home]
        )
        assert r.exit_code == 0, r.output
        assert set(_rows(app, None)) == {good.id} and set(_rows(app, "verse")) == {good.id}
        with site.session() as s:
            logged = s.execute(
                select(AuditLog)
                .where(AuditLog.action.in_(("submission.board_choice", "submission.primary")))
                .order_by(AuditLog.id)
            ).scalars()
            got = [(a.actor_id, a.details.get("board"), a.details.get("reason")) for a in logged]
        assert got == [
            (org.id, "prose", "asked by mail"),
            (None, "prose", "at the shell"),
            (None, None, "the phase's"),
        ]
        # the team's own command line: its later run on the verse board
        out = _one_json(_cli(url, tok_team, "primary", str(late.id), "--board", "verse", "--json"))
        assert out["id"] == late.id
        want = {None: {good.id}, "prose": {late.id}, "verse": {late.id}}
        for board, runs in want.items():
            assert everywhere(board) == dict.fromkeys(("json", "csv", "api", "cli"), runs), board

        # a task update (a metric added: a new version, every run scored again) keeps the choices
        from server.actions import tasks as task_actions
        from server.models import Score

        def more_metrics(spec, root):
            spec["tasks"][0]["partial_groups"] = True
            spec["tasks"][0]["metrics"] = ["spearman", "pearson", "n", "kendall"]

        with site.session() as s:
            task_actions.update_from_bundle(
                s=s,
                actor=None,
                source=_bundle(tmp_path, "updated", edit=more_metrics),
                via="test",
                settings=site.settings,
            )
            s.commit()
        burst(site)
        with site.session() as s:
            versions = {sc.task_version for sc in s.execute(select(Score)).scalars()}
        assert max(versions) > min(versions)  # rescored under the new version
        for board, runs in want.items():
            assert everywhere(board) == dict.fromkeys(("json", "csv", "api", "cli"), runs), board
    finally:
        srv.shutdown()
