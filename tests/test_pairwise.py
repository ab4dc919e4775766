"""A board's full pairwise matrix as a file (`server.boards.pairwise`): built by a worker on
request from the rows' kept resamples, equal to the quadratic computation it replaces (the pairwise
loop of tests/test_rank_statistics.py), frozen with a published version, named as the board names
its teams (labels on an anonymous board), and served by streaming the file."""

from __future__ import annotations

import csv
import gzip
import io

import numpy as np
import pytest
from backbone import burst, make_team, phase, set_phase, submit
from boardkit import naive_board_statistics
from browserkit import driver  # noqa: F401  (Chromium, its console read)
from conftest import _make_backend

from server.domain import lifecycle, people, publication
from server.models import Competition, CompetitionTask, Phase, Submission
from tasks import get_task

TASK = "tric-binary"
URL = f"/tasks/{TASK}/leaderboard/significance.csv"


@pytest.fixture
def b(request, tmp_path, demo_home, monkeypatch):
    monkeypatch.setenv("PALIMPSEST_BOOTSTRAP_SAMPLES", "200")
    backend = _make_backend("embedded", request, tmp_path, demo_home, monkeypatch)
    backend.settings.bootstrap_samples = 200
    for name in ("dev", "test"):
        set_phase(backend, TASK, name, concurrent_limit=None, daily_limit=None)
    return backend


def _app():
    from server import create_app

    return create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})


def _runs(b, noises=(0.05, 0.1, 0.2, 0.2, 0.35, 0.5)):
    teams = []
    for n in noises:
        t, u = make_team(b)
        teams.append((t, u))
        submit(b, t, u, TASK, "dev", noise=n)
    burst(b)
    return teams


def _parse(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def _reference(b, board: dict, value=("all", "f1")) -> dict:
    """The quadratic computation on the ranked rows' kept resamples of `value`, in the board's
    order."""
    from server.boards import stats

    with b.session() as s:
        ph = s.get(Phase, phase(b, TASK, "dev").id)
        part = stats.Part.get(b.settings, b.engine, get_task(TASK), ph, "all")
        ranked = [r for r in board["rows"] if r["rank"] is not None]
        attempts = [s.get(Submission, r["submission_id"]).score_attempt for r in ranked]
    M = np.vstack(
        [
            part.samples(b.settings, r["submission_id"], a, compute=False, value=value)
            for r, a in zip(ranked, attempts, strict=True)
        ]
    )
    pts = np.array([r["metrics"]["/".join(value)] for r in ranked])
    ref = naive_board_statistics(M, pts, True)
    ref["teams"] = [r["team"] for r in ranked]
    return ref


def _team_name(b, board: dict) -> str:
    """The real name of the team of the board's last ranked row."""
    from server.models import Team

    with b.session() as s:
        sub = s.get(Submission, [r for r in board["rows"] if r["rank"]][-1]["submission_id"])
        return s.get(Team, sub.team_id).name


def _check(rows: list[dict], ref: dict) -> None:
    R = len(ref["teams"])
    assert len(rows) == R * (R - 1) // 2
    for line in rows:
        a, b_ = int(line["a"]), int(line["b"])
        assert 1 <= a < b_ <= R
        assert (line["team_a"], line["team_b"]) == (ref["teams"][a - 1], ref["teams"][b_ - 1])
        for k in ("p", "p_holm"):
            assert float(line[k]) == pytest.approx(ref[k][a - 1, b_ - 1], rel=1e-9, abs=1e-15)


def test_the_matrix_file_is_built_on_request_and_equals_the_quadratic_computation(b):
    from server.boards import pairwise, stats

    _runs(b)
    app = _app()
    c = app.test_client()
    board = c.get(f"/tasks/{TASK}/leaderboard.json?phase=dev").get_json()
    assert board["statistics"]["status"] == "ready"
    pid = phase(b, TASK, "dev").id
    # not built yet: the request asks a worker (here: none is asked, the app does not enqueue)
    r = c.get(f"{URL}?phase=dev")
    assert r.status_code == 202 and r.headers["Retry-After"]
    assert "being computed" in r.get_data(as_text=True)
    assert not (stats.stats_dir(b.settings.home) / "pairwise").exists()
    # a worker with the stats queue builds it from the rows' kept resamples
    pairwise.enqueue(b.settings, pid, None, conn=b.conn)
    burst(b, queues=("stats",))
    r = c.get(f"{URL}?phase=dev")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert "significance.csv" in r.headers["Content-Disposition"]
    assert r.data.startswith(b"a,team_a,b,team_b,p,p_holm\n")
    rows = _parse(r.data)
    ref = _reference(b, board)
    _check(rows, ref)
    # the board's own statistics say the same: each row against the next, rounded
    nb = board["statistics"]["neighbours"]["p_holm_next"]
    nxt = {int(x["a"]): float(x["p_holm"]) for x in rows if int(x["b"]) == int(x["a"]) + 1}
    assert [round(nxt[i + 1], 6) for i in range(len(nxt))] == nb[:-1]
    # gzipped as stored when the client takes gzip, the same bytes once decompressed
    z = c.get(f"{URL}?phase=dev", headers={"Accept-Encoding": "gzip"})
    assert z.headers["Content-Encoding"] == "gzip" and gzip.decompress(z.data) == r.data
    # the API answers the same file to a token (a team member's: the public board's matrix)
    from webkit import make_token, make_user

    member = make_user(app, "member@example.org", team=_team_name(b, board))
    h = {"Authorization": f"Bearer {make_token(app, member)}"}
    api = c.get(f"/api/v1/tasks/{TASK}/leaderboard/significance.csv?phase=dev", headers=h)
    assert api.status_code == 200 and api.data == r.data
    # the same version again: the ETag answers
    again = c.get(f"{URL}?phase=dev", headers={"If-None-Match": r.headers["ETag"]})
    assert again.status_code == 304
    # a new run is a new version: its matrix is asked for again
    t, u = make_team(b)
    submit(b, t, u, TASK, "dev", noise=0.15)
    burst(b, queues=("scoring",))
    assert c.get(f"{URL}?phase=dev").status_code == 202


def test_the_published_versions_matrix_is_frozen_with_it(b):
    from server.boards import pairwise

    teams = _runs(b)
    pid = phase(b, TASK, "dev").id
    app = _app()
    c = app.test_client()
    pairwise.compute_pairwise(pid, None, b.settings)
    live = c.get(f"{URL}?phase=dev").data
    board = c.get(f"/tasks/{TASK}/leaderboard.json?phase=dev").get_json()
    with b.session() as s:
        lifecycle.close(s, s.get(Phase, pid), actor=None)
    with b.session() as s:
        rv = publication.publish(
            s, s.get(Phase, pid), task=get_task(TASK), actor=None, settings=b.settings
        )
        version, sha = rv.version, rv.sha256
    frozen = pairwise.published_path(b.settings.home, pid, version, sha, None)
    assert frozen.is_file()
    # a backup keeps it with the snapshot (the caches under stats/ are left out)
    from server.backup.common import data_files

    kept = {rel for _, rel in data_files(b.settings.home, set())}
    assert frozen.relative_to(b.settings.home).as_posix() in kept
    r = c.get(f"{URL}?phase=dev")
    assert r.status_code == 200
    _check(_parse(r.data), _reference(b, board))
    assert r.data == live  # the same rows, resamples and values: the same file
    # the phase reopened and a better run scored: the published matrix stays as published
    with b.session() as s:
        lifecycle.edit_phase(s, s.get(Phase, pid), {"closes_at": None}, actor=None)
    submit(b, *teams[-1], TASK, "dev", noise=0.0)
    burst(b)
    assert c.get(f"{URL}?phase=dev").data == live
    assert c.get(f"{URL}?phase=dev&version={version}").data == live
    assert c.get(f"{URL}?phase=dev&version={version + 1}").status_code == 404


def test_a_declared_board_has_its_own_matrix(b):
    """`?board=`: the matrix of one of the phase's declared boards, ranked by its own value."""
    from server.boards import pairwise

    with b.session() as s:
        ph = s.get(Phase, phase(b, TASK, "dev").id)
        ph.boards = [{"name": "oov", "title": "OOV", "ranking": {"subset": "oov", "metric": "f1"}}]
        s.commit()
    _runs(b, noises=(0.05, 0.15, 0.3, 0.45))
    pid = phase(b, TASK, "dev").id
    c = _app().test_client()
    assert c.get(f"{URL}?phase=dev&board=oov").status_code == 202
    out = pairwise.compute_pairwise(pid, "oov", b.settings)
    assert out["rows"] == 4
    r = c.get(f"{URL}?phase=dev&board=oov")
    assert r.status_code == 200 and "dev-oov-significance.csv" in r.headers["Content-Disposition"]
    board = c.get(f"/tasks/{TASK}/leaderboard.json?phase=dev&board=oov").get_json()
    _check(_parse(r.data), _reference(b, board, ("oov", "f1")))
    # the main board's is another file, asked for apart
    assert c.get(f"{URL}?phase=dev").status_code == 202
    assert c.get(f"{URL}?phase=dev&board=nope").status_code == 404


def test_an_anonymous_board_names_no_team_in_its_matrix(b):
    from server.boards import pairwise

    with b.session() as s:
        comp = people.competition_of_task(s, TASK)
        if comp is None:
            comp = Competition(slug="anon", title="Anonymous", state="visible")
            s.add(comp)
            s.flush()
            s.add(CompetitionTask(competition_id=comp.id, task_id=TASK))
        comp.anonymous_board = True
        s.commit()
    teams = _runs(b, noises=(0.05, 0.2, 0.4))
    names = [t.name for t, _ in teams]
    pid = phase(b, TASK, "dev").id
    pairwise.compute_pairwise(pid, None, b.settings)
    app = _app()
    data = app.test_client().get(f"{URL}?phase=dev").get_data(as_text=True)
    assert "Team 1" in data and not any(n in data for n in names)


def test_the_significance_page_links_the_matrix_at_1366_and_390(
    b,
    tmp_path,
    driver,  # noqa: F811  (browserkit's fixture)
):
    """The significance page links the board's matrix file; the link leads to it once a worker
    has built it, and the page fits a laptop's and a phone's width with a clean console."""
    import threading

    from browserkit import _errors, _width
    from selenium.webdriver.common.by import By
    from werkzeug.serving import make_server

    from server.boards import pairwise

    _runs(b, noises=(0.05, 0.2, 0.4))
    pairwise.compute_pairwise(phase(b, TASK, "dev").id, None, b.settings)
    app = _app()
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}"
    try:
        d = driver
        for width in ("wide", "phone"):
            _width(d, width)
            d.get(f"{url}/tasks/{TASK}/leaderboard/significance?phase=dev")
            link = d.find_element(By.PARTIAL_LINK_TEXT, "Every pair's p-values")
            href = link.get_attribute("href")
            assert href.startswith(f"{url}{URL}?") and "phase=dev" in href
            overflow = d.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 1, (width, overflow)
            right = d.execute_script("return document.documentElement.clientWidth")
            assert link.location["x"] + link.size["width"] <= right + 1, width
            d.save_screenshot(str(tmp_path / f"significance-{width}.png"))
            assert _errors(d) == []
        r = app.test_client().get(href[len(url) :])
        assert r.status_code == 200 and len(_parse(r.data)) == 3
    finally:
        srv.shutdown()
