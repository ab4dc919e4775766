"""Every board of a phase has its significance page and its figures (issue 50), live and
published, and `backup verify` rebuilds every board's published ranking. On the example bundle's
evaluation phase with its `prose`, `verse` and `track-b` boards, each board's pairwise p-values
(Holm) and clusters equal a naive computation on that board's runs (the pairwise loop of
tests/test_rank_statistics.py on the resamples computed by scipy in
tests/test_boards_per_phase.py), the page lists them, anonymous like the board, and the figures
answer for each board with that board's rows only. The pages looked at in Chromium at 1366 and
390 px, their console read."""

from __future__ import annotations

import re
import threading

import numpy as np
from boardkit import (  # noqa: F401  (the fixtures)
    EXPECTED,
    LABEL,
    PHASE,
    TASK,
    _app,
    _forget_declared_tasks,
    _get,
    _naive_matrix,
    _runs,
    naive_board_statistics,
    site,
)
from browserkit import driver  # noqa: F401  (Chromium, its console read)
from helpers import printed_as
from sqlalchemy import select

from server.models import Phase

DECLARED = ("prose", "verse", "track-b")


def _page_pvalues(html: str) -> tuple[list[str], list[list[str | None]]]:
    """The first matrix of the significance page: each row's label and its cells as shown (None:
    the diagonal)."""
    html = html.split("<h2>The public part</h2>")[0]
    table = html.split('<table class="pvalues">', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    labels, cells = [], []
    for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        labels.append(re.search(r"<th>\d+\. (.*?)</th>", tr).group(1))
        tds = re.findall(r"<td.*?</td>", tr)
        cells.append([None if "muted" in c else re.sub(r"<.*?>", "", c) for c in tds])
    return labels, cells


def _check_board(b, board: dict, html: str, preds: dict, part: str) -> None:
    """The board's p-values and clusters against the naive computation on its ranked runs; the
    significance page shows those p-values, its rows named as the board names them."""
    subset = board["primary"]["subset"]
    key = f"{subset}/{board['primary']['metric']}"
    ranked, M = _naive_matrix(b, board, preds, subset, part)
    points = np.array([r["metrics"][key] for r in ranked], dtype=float)
    want = naive_board_statistics(M, points, True)
    st = board["statistics"]
    name = board.get("board", "main")
    assert st["status"] == "ready", name
    assert st["order"] == [r["submission_id"] for r in ranked], name
    assert st["teams"] == [r["team"] for r in ranked], name
    np.testing.assert_allclose(st["p"], want["p"], atol=1e-6, err_msg=name)
    np.testing.assert_allclose(st["p_holm"], want["p_holm"], atol=1e-6, err_msg=name)
    assert [r["cluster"] for r in ranked] == want["cluster"], name
    labels, cells = _page_pvalues(html)
    assert labels == [r["team"] for r in ranked], name
    for i, row in enumerate(cells):
        # the page prints the board's own p-values; the naive ones agree at the printed precision
        assert row == [None if i == j else f"{st['p_holm'][i][j]:.3f}" for j in range(len(row))]
        for j, shown in enumerate(row):
            if shown is not None:
                assert printed_as(shown, want["p_holm"][i][j], 3), (name, i, j, shown)


def _with_value(board: dict) -> set[str]:
    """The teams a board's figures show: its rows with a value to rank by."""
    key = f"{board['primary']['subset']}/{board['primary']['metric']}"
    return {r["team"] for r in board["rows"] if r["metrics"].get(key) is not None}


def _publish(b) -> None:
    from server.domain import publication
    from tasks import get_task

    with b.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).scalar_one()
        publication.publish(
            s, p, task=get_task(TASK), actor=None, settings=b.settings, close_first=True
        )
        s.commit()


def test_every_boards_significance_and_figures_live_and_published(site, driver, tmp_path):  # noqa: F811
    from browserkit import _errors, _width
    from selenium.webdriver.common.by import By

    runs = _runs(site)
    preds = {sid: pred for sid, pred in runs.values()}
    app = _app()
    c = app.test_client()
    sig = f"/tasks/{TASK}/leaderboard/significance?phase={PHASE}"
    plot = f"/tasks/{TASK}/leaderboard/plot.svg?phase={PHASE}"
    seen_p = {}
    for name in ("main", *DECLARED):
        q = "" if name == "main" else f"&board={name}"
        board = _get(app, None if name == "main" else name).get_json()
        page = c.get(sig + q)
        assert page.status_code == 200, name
        html = page.get_data(as_text=True)
        _check_board(site, board, html, preds, "public")
        seen_p[name] = board["statistics"]["p_holm"]
        # anonymous like the board: labels, never a team's name
        assert all(re.fullmatch(r"Team \d+", t) for t in _page_pvalues(html)[0]), name
        # the board page links its own significance page and figures
        board_page = _get(app, None if name == "main" else name, "html").get_data(as_text=True)
        assert (sig + q).replace("&", "&amp;") in board_page, name
        assert (plot + q).replace("&", "&amp;") in board_page, name
        # the figures: the board's rows only (gamma covers prose only, eps verse only)
        svg = c.get(plot + q)
        assert svg.status_code == 200 and svg.mimetype == "image/svg+xml", name
        text = svg.get_data(as_text=True)
        assert not any(t in text for t in ("alpha", "gamma", "theta")), name
        for team in EXPECTED["main"]:
            assert (LABEL[team] in text) == (LABEL[team] in _with_value(board)), (name, team)
        if name != "main":
            assert f"board {board['title']}" in text, name
        assert c.get(f"/tasks/{TASK}/leaderboard/plot.pdf?phase={PHASE}{q}").status_code == 200
    # the boards differ: each page is its own board's, not the main board's
    assert seen_p["prose"] != seen_p["verse"] != seen_p["main"]
    for url in (sig, plot):
        r = c.get(url + "&board=poetry")
        assert r.status_code == 404 and "main, prose, verse, track-b" in r.get_data(as_text=True)

    # published: from each board's snapshot (version 1), on the private part; the names shown
    _publish(site)
    app = _app()
    c = app.test_client()
    for name in ("main", *DECLARED):
        q = "" if name == "main" else f"&board={name}"
        board = c.get(f"/tasks/{TASK}/leaderboard.json?phase={PHASE}{q}&version=1").get_json()
        assert board["ranking"]["version"] == 1 and board.get("board", "main") == name
        html = c.get(f"{sig}{q}&version=1").get_data(as_text=True)
        _check_board(site, board, html, preds, "private")
        assert "<h2>The public part</h2>" in html, name
        newest = c.get(sig + q).get_data(as_text=True)  # without a version: the newest
        assert _page_pvalues(newest) == _page_pvalues(html), name
        assert c.get(f"{sig}{q}&version=2").status_code == 404
        text = c.get(f"{plot}{q}&version=1").get_data(as_text=True)
        for team in EXPECTED["main"]:
            assert (f">{team}" in text) == (team in _with_value(board)), (name, team)

    # the pages in Chromium, at a laptop's and a phone's width: links followed, console clean
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}"
    try:
        d = driver
        for width in ("wide", "phone"):
            _width(d, width)
            for name in DECLARED:
                d.get(f"{url}/tasks/{TASK}/leaderboard?phase={PHASE}&board={name}")
                d.find_element(By.LINK_TEXT, "Pairwise p-values").click()
                assert f"board={name}" in d.current_url
                h = d.find_element(By.CSS_SELECTOR, "main").text
                assert "Board " in h and "The public part" in h, h[:300]
                overflow = d.execute_script(
                    "return document.documentElement.scrollWidth"
                    " - document.documentElement.clientWidth"
                )
                assert overflow <= 1, (width, name, overflow)
                d.save_screenshot(str(tmp_path / f"significance-{name}-{width}.png"))
                d.get(f"{url}/tasks/{TASK}/leaderboard/plot.svg?phase={PHASE}&board={name}")
                assert _errors(d) == [], (width, name)
    finally:
        srv.shutdown()


def test_backup_verify_rebuilds_every_boards_published_ranking(
    site,  # noqa: F811  (the fixture)
    tmp_path,
    monkeypatch,
):
    """A backup of a site whose evaluation phase was published with its declared boards verifies,
    each board's ranking rebuilt byte for byte; a BoardRanking row changed in the backup's
    database (its sha256, CSV and LaTeX made to agree, the archive signed again, as one holding
    the key could) fails, naming the board; one changed without its sha256 fails too, naming it."""
    import hashlib
    import json
    import sqlite3

    from backupkit import _cli, _rewrite

    from server.boards import leaderboard as lb

    _runs(site)
    _publish(site)
    secret = site.settings.secret_key
    monkeypatch.setenv("PALIMPSEST_SECRET_KEY", secret)
    out = tmp_path / "backups"
    out.mkdir()
    r = _cli("backup", str(out), "--json")
    assert r.exit_code == 0, r.output
    archive = json.loads(r.stdout)["archive"]
    r = _cli("backup", "verify", archive, "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert v["ok"] and not v["problems"], v["problems"]
    assert v["checks"]["published_rankings"] == 1
    assert v["checks"]["published_board_rankings"] == len(DECLARED)

    def tamper(board: str, *, consistent: bool):
        def change(name, data, m):
            if name != "database/palimpsest.sqlite3":
                return data
            db = tmp_path / f"tampered-{board}.sqlite3"
            db.write_bytes(data)
            con = sqlite3.connect(db)
            (body_json,) = con.execute(
                "SELECT body_json FROM boardranking WHERE board = ?", (board,)
            ).fetchone()
            body = json.loads(body_json)
            row = body["rows"][0]
            key = f"{body['primary']['subset']}/{body['primary']['metric']}"
            row["metrics"][key] = round(row["metrics"][key] + 0.01, 6)  # a better score
            new = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            sets = {"body_json": new}
            if consistent:
                sets.update(
                    sha256=hashlib.sha256(new.encode("utf-8")).hexdigest(),
                    body_csv=lb.snapshot_csv(body),
                    body_latex=lb.snapshot_latex(body),
                )
            cols = ", ".join(f"{k} = ?" for k in sets)
            con.execute(f"UPDATE boardranking SET {cols} WHERE board = ?", (*sets.values(), board))
            con.commit()
            con.close()
            data = db.read_bytes()
            m["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            return data

        bad = tmp_path / f"tampered-{board}.tar"
        _rewrite(archive, bad, change, key=secret)
        r = _cli("backup", "verify", str(bad), "--json")
        assert r.exit_code == 1, r.output
        return json.loads(r.stdout)["problems"]

    where = f"{TASK}/{PHASE} version 1 board"
    problems = tamper("verse", consistent=True)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{where} verse: rebuilt from the restored data it differs")
    problems = tamper("track-b", consistent=False)
    assert any(
        f"{where} track-b: its JSON does not have its recorded sha256" in p for p in problems
    )
