"""Tracks (issue 50, item 3): a competition's choice fact `track` with rules the server checks at
upload on every surface (a 422 naming the fact that breaks the rule, nothing stored), and an
organizer's move of a run to another track with a reason: one action, audited, the phase's
boards built again, on the run's page, the API and both command lines; a team never moves its
own run; 20 moves of one run at once on PostgreSQL leave an unbroken audit chain."""

from __future__ import annotations

import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from apikit import _cli, _h, _one_json, _submit, _tric_file
from browserkit import driver  # noqa: F401  (Chromium, its console read)
from click.testing import CliRunner
from pydantic import ValidationError
from sqlmodel import Session, select

from server import api_models as m
from server.actions import competitions as comp
from server.actions import submissions as sub_actions
from server.domain import people
from server.domain.facts import check_facts
from server.exceptions import LifecycleRefused, UploadFieldsInvalid
from server.models import AuditLog, Phase, Submission, Team, TeamMember, User
from tasks.builtin import builtin_spec
from tasks.bundle_models import CompetitionSpec, FactField
from tests.webkit import Browser

TRACK = {
    "key": "track",
    "label": "Track",
    "kind": "choice",
    "choices": ["A", "B", "C"],
    "rules": [
        {
            "when": ["B"],
            "fact": "training_files",
            "forbid": ["train"],
            "message": "Track B trains on no labelled data",
        },
        {"when": ["C"], "fact": "training_files", "only": ["none"]},
    ],
}
FILES = {"key": "training_files", "label": "Training files", "kind": "text"}
FIELDS = [TRACK, FILES]


def _engine(app):
    return app.extensions["palimpsest.engine"]


def _declare(app, fields=FIELDS) -> str:
    """Put tric-binary in a competition whose fact sheet has the track (the server's shell)."""
    with Session(_engine(app), expire_on_commit=False) as s:
        c = people.ensure_competition(s, "tric-binary")
        s.commit()
        comp.edit_competition(
            s=s,
            actor=None,
            via="test",
            competition=c.slug,
            settings=m.CompetitionSettings(fact_fields=[m.FactField(**f) for f in fields]),
        )
        return c.slug


def _subs(app) -> list[Submission]:
    with Session(_engine(app)) as s:
        return list(s.exec(select(Submission).order_by(Submission.id)))


def _facts(**kw) -> dict:
    return {f"fact.{k}": v for k, v in kw.items()}


# ----------------------------------------------------------------------------- the rules


def test_rules_are_checked_with_the_sheet_naming_the_fact():
    assert check_facts(FIELDS, "test", {"track": "A", "training_files": "train, dev"}) == {
        "track": "A",
        "training_files": "train, dev",
    }
    with pytest.raises(UploadFieldsInvalid) as e:
        check_facts(FIELDS, "test", {"track": "B", "training_files": "dev, Train"})
    msg = e.value.fields["facts.training_files"]
    assert "Track B forbids declaring train" in msg and "no labelled data" in msg
    assert set(e.value.fields) == {"facts.training_files"}
    assert check_facts(FIELDS, "test", {"track": "B", "training_files": "dev"})["track"] == "B"
    assert check_facts(FIELDS, "test", {"track": "B"}) == {"track": "B"}  # nothing declared
    # `only`: an unanswered fact breaks it, so does a value outside it
    with pytest.raises(UploadFieldsInvalid, match="allows only none .*unanswered"):
        check_facts(FIELDS, "test", {"track": "C"})
    with pytest.raises(UploadFieldsInvalid, match=r"allows only none .*\(not dev, train\)"):
        check_facts(FIELDS, "test", {"track": "C", "training_files": "dev,Train"})
    assert check_facts(FIELDS, "test", {"track": "C", "training_files": "none"})


def test_a_rule_is_declared_on_a_choice_naming_its_choices_and_another_fact():
    with pytest.raises(ValidationError, match="only a choice field"):
        FactField(key="x", label="X", kind="text", rules=[TRACK["rules"][0]])
    with pytest.raises(ValidationError, match="'D' is not among the choices"):
        FactField(**{**TRACK, "rules": [{**TRACK["rules"][0], "when": ["D"]}]})
    with pytest.raises(ValidationError, match="one of forbid, only or forbid_board_subset"):
        FactField(**{**TRACK, "rules": [{"when": ["B"], "fact": "training_files"}]})
    both = {"when": ["C"], "fact": "training_files", "forbid": ["x"], "forbid_board_subset": True}
    with pytest.raises(ValidationError, match="one of forbid, only or forbid_board_subset"):
        FactField(**{**TRACK, "rules": [both]})
    with pytest.raises(ValidationError, match=r"fact_fields\.0\.rules\.0\.fact: 'nope'"):
        m.CompetitionSettings(
            fact_fields=[
                m.FactField(**{**TRACK, "rules": [{**TRACK["rules"][0], "fact": "nope"}]}),
                m.FactField(**FILES),
            ]
        )
    assert "rules" in CompetitionSpec.model_json_schema()["$defs"]["FactField"]["properties"]
    # a bundle's fact sheet: the same check, with the path of the rule
    other = {**TRACK, "key": "lane", "rules": [{"when": ["A"], "fact": "track", "only": ["Z"]}]}
    bad = {**TRACK, "rules": [*TRACK["rules"], both]}
    with pytest.raises(ValidationError, match=r"fact_fields\.0\.rules\.2\n.*one of forbid, only"):
        CompetitionSpec.model_validate(
            {"id": "c", "title": "C", "fact_fields": [bad, FILES], "tasks": [builtin_spec("trac")]}
        )
    with pytest.raises(ValidationError, match=r"fact_fields\.2\.rules\.0\.only: 'Z' not among"):
        CompetitionSpec.model_validate(
            {
                "id": "c",
                "title": "C",
                "fact_fields": [TRACK, FILES, other],
                "tasks": [builtin_spec("trac")],
            }
        )


# ----------------------------------------------------------------------------- at upload


def test_every_surface_refuses_a_run_that_breaks_its_tracks_rule(served, tmp_path):
    url, tokens, home, app = served
    _declare(app)
    c = app.test_client()
    bad = _facts(track="B", training_files="train")
    # the API
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", **bad)
    assert r.status_code == 422, r.json
    assert "facts.training_files: Track B forbids declaring train" in r.json["error"]["message"]
    # the web form
    b = Browser(app.test_client())
    b.login("beta@example.org", "correct horse")  # (two runs of a team at once: its limit)
    page = b.get("/tasks/tric-binary/submit?phase=test").get_data(as_text=True)
    assert '<select name="fact.track"' in page and 'name="fact.training_files"' in page
    r = b.post(
        "/tasks/tric-binary/submit",
        {
            "phase": "test",
            "method_name": "m",
            **bad,
            "file": (io.BytesIO(_tric_file(home)), "p.jsonl"),
        },
        content_type="multipart/form-data",
    )
    assert r.status_code == 422 and "Track B forbids declaring train" in r.get_data(as_text=True)
    # the command line
    pred = tmp_path / "p.jsonl"
    pred.write_bytes(_tric_file(home))
    r = _cli(
        url, tokens["alpha"], "submit", "tric-binary", str(pred), "--phase", "test",
        "--fact", "track=B", "--fact", "training_files=train", ok=False,
    )  # fmt: skip
    assert r.exit_code == 1 and "facts.training_files: Track B forbids" in r.stderr
    assert _subs(app) == []  # nothing stored by any refusal
    # each surface names its track: the API, the form, the CLI
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test",
                **_facts(track="A", training_files="train"))  # fmt: skip
    assert r.status_code == 201, r.json
    r = b.post(
        "/tasks/tric-binary/submit",
        {"phase": "test", "method_name": "w", **_facts(track="B", training_files="dev"),
         "file": (io.BytesIO(_tric_file(home, 3)), "p.jsonl")},
        content_type="multipart/form-data",
    )  # fmt: skip
    assert r.status_code == 302
    pred.write_bytes(_tric_file(home, 7))
    got = _one_json(
        _cli(url, tokens["alpha"], "submit", "tric-binary", str(pred), "--phase", "test",
             "--fact", "track=C", "--fact", "training_files=none", "--json")
    )  # fmt: skip
    assert [s.facts["track"] for s in _subs(app)] == ["A", "B", "C"]
    assert got["id"] == _subs(app)[-1].id


# ----------------------------------------------------------------------------- moving a run


def _audits(app, sub_id: int) -> list[AuditLog]:
    with Session(_engine(app)) as s:
        q = select(AuditLog).where(
            AuditLog.action == "submission.track", AuditLog.target == f"submission:{sub_id}"
        )
        return list(s.exec(q.order_by(AuditLog.id)))


def _revision(app, sub_id: int) -> int:
    with Session(_engine(app)) as s:
        return s.get(Phase, s.get(Submission, sub_id).phase_id).revision or 0


def test_an_organizer_moves_a_run_a_team_never_does(served, tmp_path):
    url, tokens, home, app = served
    _declare(app)
    c = app.test_client()
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test",
                **_facts(track="B", training_files="dev"))  # fmt: skip
    sid = r.json["id"]
    before = _revision(app, sid)
    # the team that made it cannot move it: 403, nothing changes, nothing audited
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=_h(tokens["alpha"]),
               json={"track": "A", "reason": "we meant A"})  # fmt: skip
    assert r.status_code == 403 and _subs(app)[0].facts["track"] == "B"
    with Session(_engine(app), expire_on_commit=False) as s:
        alpha = s.exec(select(User).where(User.email == "alpha@example.org")).one()
        with pytest.raises(Exception) as e:  # the action itself refuses, whatever the surface
            sub_actions.move_track(s=s, submission_id=sid, track="A", reason="x", actor=alpha,
                                   settings=None)  # fmt: skip
        assert getattr(e.value, "code", "") == "not_organizer" or "organiz" in str(e.value)
    assert _audits(app, sid) == [] and _revision(app, sid) == before
    # the organizer: a reason is needed, the choice must exist, the rules hold
    org = _h(tokens["org"])
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=org, json={"track": "A"})
    assert r.status_code == 422 and "reason" in r.json["error"]["message"]
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=org, json={"track": "Z", "reason": "x"})
    assert r.status_code == 422 and "facts.track" in r.json["error"]["message"]
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=org, json={"track": "C", "reason": "x"})
    assert r.status_code == 422
    assert "facts.training_files: Track C allows only none" in r.json["error"]["message"]
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=org, json={"track": "B", "reason": "x"})
    assert r.status_code == 409 and "track B already" in r.json["error"]["message"]
    assert _audits(app, sid) == [] and _revision(app, sid) == before
    # the move: the sheet changes, the rest of it kept; audited; the phase's boards rebuilt
    r = c.post(f"/api/v1/submissions/{sid}/track", headers=org,
               json={"track": "A", "reason": "trained on the train split after all"})  # fmt: skip
    assert r.status_code == 200, r.json
    assert r.json["facts"] == {"track": "A", "training_files": "dev"}
    assert _subs(app)[0].facts == {"track": "A", "training_files": "dev"}
    (a,) = _audits(app, sid)
    assert a.details["old"] == "B" and a.details["new"] == "A" and a.details["via"] == "api"
    assert a.details["reason"] == "trained on the train split after all"
    assert _revision(app, sid) == before + 1
    # the remote organizer command, then the local one
    got = _one_json(
        _cli(url, tokens["org"], "organizer", "move-track", str(sid), "--to", "B",
             "--reason", "back to B", "--json")
    )  # fmt: skip
    assert got["facts"]["track"] == "B"
    r = _cli(url, tokens["alpha"], "organizer", "move-track", str(sid), "--to", "A",
             "--reason", "mine", ok=False)  # fmt: skip
    assert r.exit_code == 1 and _subs(app)[0].facts["track"] == "B"
    from cli.main import main

    r = CliRunner().invoke(
        main,
        ["runs", "move-track", str(sid), "--to", "A", "--reason", "at the shell", "--json",
         "--home", str(home)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"id": sid, "facts": {"track": "A", "training_files": "dev"}}
    r = CliRunner().invoke(
        main, ["runs", "move-track", str(sid), "--to", "A", "--reason", "again", "--home",
               str(home)],
    )  # fmt: skip
    assert r.exit_code != 0 and "track A already" in r.output
    assert [x.details["new"] for x in _audits(app, sid)] == ["A", "B", "A"]
    assert [x.details["via"] for x in _audits(app, sid)] == ["api", "api", "cli"]
    assert _revision(app, sid) == before + 3


def test_the_runs_page_moves_it_for_an_organizer_only(api_env):
    app, tokens, home = api_env
    _declare(app)
    c = app.test_client()
    sid = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test",
                  **_facts(track="A", training_files="train")).json["id"]  # fmt: skip
    team = Browser(app.test_client())
    team.login("alpha@example.org", "correct horse")
    page = team.get(f"/submissions/{sid}").get_data(as_text=True)
    assert 'data-track="A"' in page and "track-move" not in page  # shown, not movable
    r = team.post(f"/organizer/submissions/{sid}/track", {"track": "C", "reason": "x"})
    assert r.status_code in (302, 403, 404) and _subs(app)[0].facts["track"] == "A"
    org = Browser(app.test_client())
    org.login("org@example.org", "correct horse")
    page = org.get(f"/submissions/{sid}").get_data(as_text=True)
    assert 'class="inline track-move"' in page and '<option value="C">C</option>' in page
    # moving into B breaks its rule (train declared): refused on the page, nothing changes
    r = org.post(f"/organizer/submissions/{sid}/track", {"track": "B", "reason": "why not",
                                                        "field": "track"})  # fmt: skip
    assert r.status_code == 302
    page = org.get(f"/submissions/{sid}").get_data(as_text=True)
    assert "Refused." in page and "Track B forbids declaring train" in page
    assert _subs(app)[0].facts["track"] == "A"
    r = org.post(f"/organizer/submissions/{sid}/track",
                 {"track": "B", "reason": "", "field": "track"})  # fmt: skip
    assert "Say why" in org.get(f"/submissions/{sid}").get_data(as_text=True)
    with Session(_engine(app)) as s:  # the declared fact changed so that B allows it
        s.get(Submission, sid).facts = {"track": "A", "training_files": "dev"}
        s.commit()
    r = org.post(f"/organizer/submissions/{sid}/track",
                 {"track": "B", "reason": "no labelled data used", "field": "track"})  # fmt: skip
    assert r.status_code == 302
    assert 'data-track="B"' in org.get(f"/submissions/{sid}").get_data(as_text=True)
    assert [a.details["via"] for a in _audits(app, sid)] == ["web"]


def test_a_competition_without_a_track_says_so():
    from server.domain.tracks import track_field

    with pytest.raises(LifecycleRefused, match="declares no track"):
        track_field([FILES])
    assert track_field([FILES, {**TRACK, "key": "lane"}])["key"] == "lane"  # its only choice
    with pytest.raises(LifecycleRefused, match="name the track field"):
        track_field([{**TRACK, "key": "lane"}, {**TRACK, "key": "other"}])
    with pytest.raises(LifecycleRefused, match="not a choice field"):
        track_field(FIELDS, "training_files")


# ----------------------------------------------------------------------------- a crowd


@pytest.mark.postgres
def test_twenty_moves_of_one_run_at_once_leave_an_unbroken_audit_chain(pg_app):
    """20 organizers' moves of one run at once (A, B, C in turn), each its own session and
    transaction on PostgreSQL: each either moves the run or is refused as unchanged; the audit
    entries form one chain (each one's `old` the previous one's `new`, the first's the upload's
    track, the last's `new` the run's track now), one per move, and the phase's revision rose
    by exactly that many."""
    engine = pg_app.extensions["palimpsest.engine"]
    with Session(engine, expire_on_commit=False) as s:
        c = people.ensure_competition(s, "tric-binary")
        c.fact_fields = FIELDS
        phase = Phase(task_id="tric-binary", name="test", split="test")
        team = Team(name="t", invite_code="c-t")
        s.add_all([c, phase, team])
        s.commit()
        u = User(email="u@example.org", password_hash="x")
        s.add(u)
        s.commit()
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        sub = Submission(
            task_id="tric-binary", phase_id=phase.id, team_id=team.id, user_id=u.id,
            file_name="p.jsonl", file_sha256="0" * 64, storage_key="k", size=1,
            status="scored", facts={"track": "A", "training_files": "none"},
        )  # fmt: skip
        s.add(sub)
        s.commit()
        sid, pid, rev0 = sub.id, phase.id, phase.revision or 0
    barrier = threading.Barrier(20)

    def move(i: int) -> str:
        with Session(engine, expire_on_commit=False) as s:
            barrier.wait()
            try:
                sub_actions.move_track(
                    s=s, submission_id=sid, track="ABC"[i % 3], reason=f"move {i}",
                    actor=None, settings=None, via="test",
                )  # fmt: skip
                return "moved"
            except LifecycleRefused as e:
                assert e.code == "unchanged", e
                return "unchanged"

    with ThreadPoolExecutor(20) as pool:
        got = list(pool.map(move, range(20)))
    moved = got.count("moved")
    assert moved + got.count("unchanged") == 20 and moved >= 2
    with Session(engine) as s:
        chain = list(
            s.exec(
                select(AuditLog).where(AuditLog.action == "submission.track").order_by(AuditLog.id)
            )
        )
        now = s.get(Submission, sid).facts
        rev = s.get(Phase, pid).revision or 0
    assert len(chain) == moved and rev == rev0 + moved
    olds = [a.details["old"] for a in chain]
    news = [a.details["new"] for a in chain]
    assert olds[0] == "A" and olds[1:] == news[:-1] and news[-1] == now["track"]
    assert all(o != n for o, n in zip(olds, news, strict=True))
    assert now["training_files"] == "none"  # the rest of the sheet kept by every move


def test_the_move_on_the_runs_page_at_1366_and_390(served, driver, tmp_path):  # noqa: F811
    """The organizer's run page shows its track and the move's form: it fits a laptop's and a
    phone's width, the console stays clean, and the move it makes is the run's new track."""
    from browserkit import _body, _errors, _fill, _go, _width
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url, tokens, home, app = served
    _declare(app)
    sid = _submit(app.test_client(), tokens["alpha"], "tric-binary", _tric_file(home),
                  phase="test", **_facts(track="B", training_files="dev")).json["id"]  # fmt: skip
    d = driver
    d.get(url + "/auth/login")
    _fill(d, "email", "org@example.org")
    _fill(d, "password", "correct horse")
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    for width in ("wide", "phone"):
        _width(d, width)
        d.get(f"{url}/submissions/{sid}")
        form = d.find_element(By.CSS_SELECTOR, "form.track-move")
        assert form.is_displayed()
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, (width, overflow)
        right = d.execute_script("return document.documentElement.clientWidth")
        button = form.find_element(By.TAG_NAME, "button")
        assert button.location["x"] + button.size["width"] <= right + 1, width
        assert _errors(d) == [], width
        d.save_screenshot(str(tmp_path / f"run-track-{width}.png"))
    Select(d.find_element(By.NAME, "track")).select_by_value("A")
    _fill(d, "reason", "trained on Track A's data")
    _go(d, d.find_element(By.CSS_SELECTOR, "form.track-move button"))
    assert f"Submission #{sid} moved to track A." in _body(d)
    assert d.find_element(By.CSS_SELECTOR, "[data-track]").get_attribute("data-track") == "A"
    assert _errors(d) == []
    assert [a.details["reason"] for a in _audits(app, sid)] == ["trained on Track A's data"]


def test_a_recorded_baseline_names_its_track_locally_and_remotely(served, tmp_path):
    """`palimpsest baselines run --record|--server URL --fact track=B`: the baseline entry carries
    the track, its rules checked as any upload's (a Track B run declaring `train` is refused)."""
    from baselines.errors import BaselineError
    from cli.baselines import record_remote
    from server.actions.baselines import record_baseline

    url, tokens, home, app = served
    _declare(app)
    f = tmp_path / "lexical.jsonl"
    f.write_bytes(_tric_file(home, 4))
    result = {"task": "tric-binary", "system": "lexical", "model": None, "file": str(f)}
    got = record_baseline(result, home=home, phases=["test"], facts={"track": "B"})
    assert [s.facts for s in _subs(app) if s.id == got[0]["submission_id"]] == [{"track": "B"}]
    f.write_bytes(_tric_file(home, 6))
    with pytest.raises(UploadFieldsInvalid, match="Track B forbids declaring train"):
        record_baseline(result, home=home, phases=["test"],
                        facts={"track": "B", "training_files": "train"})  # fmt: skip
    sheet = {"track": "C", "training_files": "none"}
    got = record_remote(result, url, tokens["org"], ["test"], facts=sheet)
    assert [s.facts for s in _subs(app) if s.id == got[0]["submission_id"]] == [
        {"track": "C", "training_files": "none"}
    ]
    with pytest.raises(BaselineError, match="Track C allows only none"):
        f.write_bytes(_tric_file(home, 8))
        record_remote(result, url, tokens["org"], ["test"], facts={"track": "C"})
    r = CliRunner().invoke(
        __import__("cli.main", fromlist=["main"]).main,
        ["baselines", "run", "--task", "tric-binary", "--fact", "track=B", "--home", str(home)],
    )
    assert r.exit_code == 2 and "--fact goes with a recorded run" in r.output


# ----------------------------------------------------------------------------- a board's language


CROSS = {
    **TRACK,
    "rules": [
        {
            "when": ["C"],
            "fact": "labelled_subsets",
            "forbid_board_subset": True,
            "message": "Track C uses no labelled data of the subset it is ranked on",
        }
    ],
}
LABELLED = {"key": "labelled_subsets", "label": "Labelled subsets used", "kind": "text"}
C_BOARDS = [
    {
        "name": f"c-{sub}",
        "title": f"Track C: {sub}",
        "ranking": {"subset": sub, "metric": "f1"},
        "filter": {"fact": "track", "equals": ["C"]},
    }
    for sub in ("oov", "iov")
]


def test_a_cross_lingual_run_stays_off_the_board_of_the_data_it_used(served, tmp_path):
    """Track C's rule (`forbid_board_subset`): a run declaring labelled data of the subset a Track
    C board ranks on stays off that board and is ranked on the track's others; runs sent through
    the API, the web form and the command line, and an organizer's move into the track, each
    land on exactly the boards the rule leaves them."""
    from apikit import _run_job

    url, tokens, home, app = served
    _declare(app, [CROSS, LABELLED])
    c, org = app.test_client(), _h(tokens["org"])
    r = c.patch("/api/v1/tasks/tric-binary/phases/test", json={"boards": C_BOARDS}, headers=org)
    assert r.status_code == 200, r.json

    def on_board(name):
        r = c.get(f"/api/v1/tasks/tric-binary/leaderboard?phase=test&board={name}", headers=org)
        assert r.status_code == 200, r.json
        return {x["submission_id"] for x in r.json["rows"] if x["row_type"] == "team"}

    # the API: alpha learned from oov's labels
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test",
                **_facts(track="C", labelled_subsets="OOV"))  # fmt: skip
    assert r.status_code == 201, r.json
    api = r.json["id"]
    # the web form: beta from iov's
    b = Browser(app.test_client())
    b.login("beta@example.org", "correct horse")
    r = b.post(
        "/tasks/tric-binary/submit",
        {"phase": "test", "method_name": "w", **_facts(track="C", labelled_subsets="iov"),
         "file": (io.BytesIO(_tric_file(home, 3)), "p.jsonl")},
        content_type="multipart/form-data",
    )  # fmt: skip
    assert r.status_code == 302, r.get_data(as_text=True)[:500]
    web = _subs(app)[-1].id
    for sid in (api, web):
        assert _run_job(sid)["status"] == "scored"
    assert on_board("c-oov") == {web} and on_board("c-iov") == {api}
    # the command line: alpha again, from neither: its latest run enters both
    pred = tmp_path / "p.jsonl"
    pred.write_bytes(_tric_file(home, 7))
    got = _one_json(
        _cli(url, tokens["alpha"], "submit", "tric-binary", str(pred), "--phase", "test",
             "--fact", "track=C", "--fact", "labelled_subsets=none", "--json")
    )  # fmt: skip
    assert _run_job(got["id"])["status"] == "scored"
    assert on_board("c-oov") == {web, got["id"]} and on_board("c-iov") == {got["id"]}
    # an organizer moves beta's run out of Track C and back: the rule follows the track
    for track, want in (("A", set()), ("C", {web})):
        r = c.post(f"/api/v1/submissions/{web}/track", headers=org,
                   json={"track": track, "reason": f"to {track}"})  # fmt: skip
        assert r.status_code == 200, r.json
        assert on_board("c-oov") - {got["id"]} == want and on_board("c-iov") == {got["id"]}
