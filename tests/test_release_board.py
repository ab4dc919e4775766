"""A phase's release rule on its live public board (issue 61): under the ladder a team row shows
what its ranked run releases given the team's runs before it (scorer.release, the same function
the climber test checks), ranked by it, with the intervals, other columns, p-values and figures
withheld; `rounded` shows the value rounded to its interval's resolution; the organizers' view,
the private part and the published ranking are exact; each row says how many runs the team
made; a rule the phase does not offer is refused. The parameter-free ladder (`ladder-paired`)
shows what the team's run releases against its best by the paired bootstrap, equal to the rule
applied to resamples computed here naively."""

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
from sqlalchemy import select

from scorer.release import Rule, released
from server.models import Phase, Score


def _phase(b):
    with b.session() as s:
        return s.execute(
            select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)
        ).scalar_one()


def _set_rule(b, rule):
    from server.domain import lifecycle

    with b.session() as s:
        p = s.get(Phase, _phase(b).id)
        lifecycle.edit_phase(s, p, {"release_rule": rule}, actor=None)
        s.commit()


def _competition_ranks(ranked: list[dict]) -> list[int]:
    """The ranks of two team rows sorted by the value they show: 1 and 2, or 1 and 1 when they
    show the same value. (The public part is drawn with a seed of its own for each site, so two
    teams' released values, on the ladder's steps of 0.05, may fall on the same step.)"""
    assert len(ranked) == 2
    a, b = (r["metrics"]["all/spearman"] for r in ranked)
    return [1, 1 if a == b else 2]


def test_the_ladder_and_rounding_on_the_live_board_and_publication_exact(site):  # noqa: F811
    from server.domain.lifecycle import LifecycleRefused

    with pytest.raises(LifecycleRefused, match="exact, ladder, ladder-paired, rounded"):
        _set_rule(site, "best")
    with pytest.raises(LifecycleRefused, match="eta"):
        _set_rule(site, {"rule": "ladder", "eta": 2})
    _set_rule(site, {"rule": "ladder", "eta": 0.05})
    # one team climbs with four runs (noisier, slightly better, much better, worse); another
    # submits once
    climber, u1 = make_team(site, "climber")
    ids = [
        submit(site, climber, u1, TASK, PHASE, data=_file(_predictions(site, noise, k))).id
        for k, noise in enumerate((0.4, 0.38, 0.1, 0.3))
    ]
    other, u2 = make_team(site, "other")
    oid = submit(site, other, u2, TASK, PHASE, data=_file(_predictions(site, 0.2, 9))).id
    burst(site)
    with site.session() as s:
        exact = {
            sid: v
            for sid, v in s.execute(
                select(Score.submission_id, Score.primary_value).where(Score.part == "public")
            )
        }
    app = _app()
    board = _get(app, None).get_json()
    assert board["release_rule"] == {"rule": "ladder", "eta": 0.05}
    rows = {r["submission_id"]: r for r in board["rows"] if r["row_type"] == "team"}
    want = released([exact[i] for i in ids], Rule("ladder", 0.05))
    mine = rows[ids[-1]]  # the team's latest run ranks: it shows the best released value
    assert mine["metrics"]["all/spearman"] == pytest.approx(want[-1], abs=1e-12)
    assert want[-1] != exact[ids[-1]]
    assert mine["runs"] == 4
    assert all(v is None for k, v in mine["metrics"].items() if k != "all/spearman")
    assert mine["ci"] is None and "release rule" in mine["ci_note"]
    assert board["statistics"].get("p_holm") is None
    ranked = sorted(rows.values(), key=lambda r: -r["metrics"]["all/spearman"])
    assert [r["rank"] for r in ranked] == _competition_ranks(ranked)
    c = app.test_client()
    q = f"?phase={PHASE}"
    assert c.get(f"/tasks/{TASK}/leaderboard/significance{q}").status_code == 404
    assert c.get(f"/tasks/{TASK}/leaderboard/plot.svg{q}").status_code == 404
    page = _get(app, None, "html").get_data(as_text=True)
    assert "Released scores" in page and "4 runs" in page

    # the team's own run (its page and the API read shown_scores): no exact public score
    from server.domain.submissions import shown_scores
    from server.models import Submission, User

    with site.session() as s:
        ph = s.get(Phase, _phase(site).id)
        sub = s.get(Submission, ids[-1])
        shown = shown_scores(s, s.get(User, u1.id), sub, ph, site.settings.secret_key)
        assert shown and all(x.primary_value is None and x.result.get("withheld") for x in shown)
        from server.domain import notices

        _, body = notices.compose(s, site.settings, sub)  # the mail saying it was scored
        assert "as the phase releases it" in body and f"{exact[ids[-1]]:.4f}" not in body

    # the organizers' view: exact
    from server.boards import leaderboard as lb
    from tasks import get_task

    with site.session() as s:
        org = lb.build_board(s, get_task(TASK), s.get(Phase, _phase(site).id), audience="organizer")
    got = {r.submission_id: r.values["all/spearman"] for r in org.rows if r.row_type == "team"}
    assert got[ids[-1]] == pytest.approx(exact[ids[-1]], abs=1e-12)

    # rounded: to the resolution of each row's interval, ranked by it
    from scorer.release import resolution
    from server.boards import stats

    _set_rule(site, "rounded")
    pending = _get(app, None).get_json()  # no interval yet: no value shown
    assert all(r["metrics"]["all/spearman"] is None for r in pending["rows"])
    stats.compute_board_stats(_phase(site).id, site.settings)  # the new version's statistics
    board = _get(app, None).get_json()
    assert board["release_rule"] == "rounded"

    body = stats.read_board_stats(
        site.settings,
        _phase(site).id,
        stats.phase_version(site.settings, site.engine, get_task(TASK), _phase(site).id),
    )
    for r in board["rows"]:
        if r["row_type"] != "team":
            continue
        lo, hi = body["rows"][str(r["submission_id"])]["ci"]
        step = resolution((hi - lo) / 2)
        v = exact[r["submission_id"]]
        assert r["metrics"]["all/spearman"] == pytest.approx(round(v / step) * step, abs=1e-12)
        assert r["ci"] is None

    # the parameter-free ladder: a run is released (rounded to 1/n) only when it beats the team's
    # best by the standard error of their paired difference over the phase's resamples; each
    # run's resamples computed here by scipy on explicitly repeated copies of each resample
    from boardkit import _naive_matrix

    _set_rule(site, "ladder-paired")
    pending = _get(app, None).get_json()  # not yet compared: no value shown
    assert pending["release_rule"] == "ladder-paired"
    assert all(r["metrics"]["all/spearman"] is None for r in pending["rows"])
    stats.compute_board_stats(_phase(site).id, site.settings)
    board = _get(app, None).get_json()
    preds = {
        sid: _predictions(site, noise, k)
        for sid, (k, noise) in zip(ids, enumerate((0.4, 0.38, 0.1, 0.3)), strict=True)
    }
    preds[oid] = _predictions(site, 0.2, 9)
    fake = {"rows": [{"submission_id": sid, "rank": 1} for sid in [*ids, oid]]}
    _, M = _naive_matrix(site, fake, preds, "all")
    with site.session() as s:
        n = len(
            stats._gold_part(site.engine, s.get(Phase, _phase(site).id), site.settings, "public")
        )
    want = released([exact[i] for i in ids], Rule("ladder-paired"), samples=list(M[:4]), n_units=n)
    rows = {r["submission_id"]: r for r in board["rows"] if r["row_type"] == "team"}
    assert rows[ids[-1]]["metrics"]["all/spearman"] == pytest.approx(want[-1], abs=1e-12)
    assert want[-1] == pytest.approx(round(exact[ids[2]] * n) / n)  # the best run, rounded
    assert want[-1] != exact[ids[-1]] and rows[ids[-1]]["runs"] == 4
    assert rows[oid]["metrics"]["all/spearman"] == pytest.approx(round(exact[oid] * n) / n)
    assert all(r["ci"] is None and "release rule" in r["ci_note"] for r in rows.values())
    ranked = sorted(rows.values(), key=lambda r: -r["metrics"]["all/spearman"])
    assert [r["rank"] for r in ranked] == _competition_ranks(ranked)
    assert board["statistics"].get("p_holm") is None

    # publication: the private part, exact, its statistics shown
    from server.domain import publication

    with site.session() as s:
        p = s.get(Phase, _phase(site).id)
        publication.prepare(s, p)
        publication.publish(
            s, p, task=get_task(TASK), actor=None, settings=site.settings, close_first=True
        )
        s.commit()
    board = _get(app, None).get_json()
    assert "release_rule" not in board
    with site.session() as s:
        private = {
            sid: v
            for sid, v in s.execute(
                select(Score.submission_id, Score.primary_value).where(Score.part == "private")
            )
        }
    for r in board["rows"]:
        if r["row_type"] == "team":
            assert r["metrics"]["all/spearman"] == pytest.approx(private[r["submission_id"]])
            assert r["ci"] is not None
    with site.session() as s:  # published: the run's exact scores
        ph = s.get(Phase, _phase(site).id)
        shown = shown_scores(
            s, s.get(User, u1.id), s.get(Submission, ids[-1]), ph, site.settings.secret_key
        )
        assert shown and all(x.primary_value is not None for x in shown)


def test_a_bundle_names_a_phase_release_rule():
    from pydantic import ValidationError

    from tasks.bundle_models import PhaseSpec

    assert PhaseSpec(name="t", split="test", release_rule="ladder").release_rule == "ladder"
    got = PhaseSpec(name="t", split="test", release_rule={"rule": "ladder", "eta": 0.02})
    assert got.release_rule == {"rule": "ladder", "eta": 0.02}
    got = PhaseSpec(name="t", split="test", release_rule="ladder-paired")
    assert got.release_rule == "ladder-paired"
    with pytest.raises(ValidationError, match="release rule"):
        PhaseSpec(name="t", split="test", release_rule="best")
