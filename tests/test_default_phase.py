"""The phase an upload goes to when it names none follows the phases' splits and dates, not their
names: the example bundle's phases are `development` (dev) and `evaluation` (test), and a test
file sent without a phase is stored in `evaluation` on the web (the form proposes it) and the API;
a file of the other split's ids is refused at once, naming that split and the phase to choose,
and nothing is stored. (The CLI, which asks the API, in tests/test_participant_path.py.)"""

from __future__ import annotations

import io
import json
import random
import re
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_token, make_user, update_phase

from server.domain.phase_choice import default_phase
from server.models import Phase, Submission, User, utcnow
from tasks.bundle import write_bundle_zip
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
DEV_FILE = EXAMPLE / "predictions-dev.jsonl"
SLUG, TASK = "sts-latin-2027", "sts-latin"
FACT = {"fact.system_description": "word overlap", "fact.external_data": "no"}


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own (the bundle installs its task here, never among the
    session's), linking each of the session's imported tasks."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    for t in (home / "tasks").iterdir():
        (d / "tasks" / t.name).symlink_to(t, target_is_directory=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


@pytest.fixture(params=["app", pytest.param("pg_app", marks=pytest.mark.postgres)])
def site(request, tmp_path):
    """The example competition, visible, with Ann approved in team Lexica and both the
    development and the evaluation phase open: (app, ann's token)."""
    app = request.getfixturevalue(request.param)
    admin = make_user(app, "admin@x.org", organizer=True)
    ann = make_user(app, "ann@x.org")
    admin_t, ann_t = make_token(app, admin), make_token(app, ann)
    c = app.test_client()
    spec = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
    write_bundle_zip(spec, EXAMPLE, tmp_path / "good.zip")
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO((tmp_path / "good.zip").read_bytes()), "good.zip")},
        headers=_h(admin_t),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    calls = [
        ("patch", f"/api/v1/competitions/{SLUG}", {"state": "visible"}, admin_t),
        ("post", f"/api/v1/competitions/{SLUG}/registration", {"accept_terms": True}, ann_t),
        ("post", f"/api/v1/competitions/{SLUG}/participants/ann@x.org/approve", {}, admin_t),
    ]
    for method, url, body, token in calls:
        r = getattr(c, method)(url, json=body, headers=_h(token))
        assert r.status_code in (200, 201), (url, r.json)
    with Session(engine_of(app)) as s:  # the team (the web's form; the API's in test_teams)
        from server.actions import competitions as comp
        from server.actions.teams import create_team

        who = s.exec(select(User).where(User.email == "ann@x.org")).one()
        create_team(s=s, user=who, name="Lexica", competition=comp.find(s, SLUG))
    with Session(engine_of(app)) as s:
        phases = {p.name: p.id for p in s.exec(select(Phase).where(Phase.task_id == TASK))}
    assert {"development", "evaluation"} <= set(phases)  # no phase is called test or dev
    for name in ("development", "evaluation"):
        update_phase(app, phases[name], opens_at=None, closes_at=None)
    return app, ann_t


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _test_file() -> bytes:
    rng = random.Random(7)
    rows = [
        json.loads(x)
        for x in (EXAMPLE / "sts-latin" / "test" / "inputs.jsonl").read_text().splitlines()
    ]
    return "".join(
        json.dumps({"pair_id": r["pair_id"], "score": round(rng.random(), 3)}) + "\n" for r in rows
    ).encode()


def _stored(app) -> list[tuple[int, str]]:
    with Session(engine_of(app)) as s:
        subs = s.exec(select(Submission).order_by(Submission.id)).all()
        names = {p.id: p.name for p in s.exec(select(Phase))}
        return [(x.id, names[x.phase_id]) for x in subs]


def test_the_api_stores_a_test_file_without_a_phase_in_evaluation(site):
    app, token = site
    c = app.test_client()
    r = c.post(
        f"/api/v1/tasks/{TASK}/submissions",
        data={"file": (io.BytesIO(_test_file()), "test.jsonl"), **FACT},
        headers=_h(token),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    assert _stored(app) == [(r.json["id"], "evaluation")]


def test_the_api_refuses_a_dev_file_sent_to_evaluation_naming_the_split(site):
    app, token = site
    c = app.test_client()
    for phase in ("evaluation", None):  # named, or chosen by default
        data = {"file": (io.BytesIO(DEV_FILE.read_bytes()), "dev.jsonl"), **FACT}
        if phase:
            data["phase"] = phase
        r = c.post(
            f"/api/v1/tasks/{TASK}/submissions",
            data=data,
            headers=_h(token),
            content_type="multipart/form-data",
        )
        assert r.status_code == 422, r.json
        err = r.json["error"]
        assert err["code"] == "wrong_split", err
        assert "these ids are the dev split's" in err["message"]
        assert "choose phase development" in err["message"]
    assert _stored(app) == []  # nothing stored, nothing counted
    r = c.post(
        f"/api/v1/tasks/{TASK}/submissions",
        data={"file": (io.BytesIO(DEV_FILE.read_bytes()), "dev.jsonl"), "phase": "development"},
        headers=_h(token),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json


def test_a_file_above_the_check_is_judged_by_its_beginning(site, monkeypatch):
    """A file larger than what the intake reads (a large upload's completion: above 64 MiB) is
    no longer left to the scorer: its beginning, cut at a line, is checked by the same rule (rows
    refused on its phase's split, none on another's; ids it does not reach do not count). A test
    file that large still goes in; a compressed one is left to the scorer."""
    import gzip

    from server.domain import phase_choice

    monkeypatch.setattr(phase_choice, "CHECK_BYTES", 500)  # the files below are larger
    app, token = site
    c = app.test_client()

    def send(body: bytes, name: str, phase: str = "evaluation"):
        return c.post(
            f"/api/v1/tasks/{TASK}/submissions",
            data={"file": (io.BytesIO(body), name), "phase": phase, **FACT},
            headers=_h(token),
            content_type="multipart/form-data",
        )

    dev = DEV_FILE.read_bytes()
    assert min(len(dev), len(_test_file()), len(gzip.compress(dev))) > 500
    r = send(DEV_FILE.read_bytes(), "dev.jsonl")
    assert r.status_code == 422 and r.json["error"]["code"] == "wrong_split", r.json
    assert "choose phase development" in r.json["error"]["message"]
    assert _stored(app) == []
    r = send(_test_file(), "test.jsonl")
    assert r.status_code == 201, r.json
    r = send(gzip.compress(DEV_FILE.read_bytes()), "dev.jsonl.gz")
    assert r.status_code == 201, r.json  # not read here: the scorer names its problems


def test_a_file_of_no_split_is_left_to_the_scorer(site):
    """A file that fits neither split is stored and fails in the scorer with every problem, as
    before: the refusal is for a file that fits another split, not a guess."""
    app, token = site
    r = app.test_client().post(
        f"/api/v1/tasks/{TASK}/submissions",
        data={"file": (io.BytesIO(b'{"pair_id": "nope", "score": 1}\n'), "x.jsonl"), **FACT},
        headers=_h(token),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json


def test_the_form_proposes_evaluation_and_refuses_a_dev_file_there(site):
    app, _ = site
    web = Browser(app.test_client())
    web.login("ann@x.org")
    page = web.get(f"/tasks/{TASK}/submit").get_data(as_text=True)
    selected = re.search(r'<option[^>]*selected[^>]*value="([^"]+)"', page) or re.search(
        r'<option[^>]*value="([^"]+)"[^>]*selected', page
    )
    assert selected and selected.group(1) == "evaluation", page[:3000]
    r = web.post(
        f"/tasks/{TASK}/submit",
        {"phase": "evaluation", "file": (io.BytesIO(DEV_FILE.read_bytes()), "dev.jsonl"), **FACT},
        content_type="multipart/form-data",
    )
    assert r.status_code == 422
    assert "these ids are the dev split&#39;s" in r.get_data(as_text=True) or (
        "these ids are the dev split's" in r.get_data(as_text=True)
    )
    assert "choose phase development" in r.get_data(as_text=True)
    assert _stored(app) == []
    r = web.post(
        f"/tasks/{TASK}/submit",
        {"phase": "evaluation", "file": (io.BytesIO(_test_file()), "test.jsonl"), **FACT},
        content_type="multipart/form-data",
    )
    assert r.status_code == 302, r.get_data(as_text=True)[:2000]
    assert [p for _, p in _stored(app)] == ["evaluation"]


def _phase(name, split, *, opens=None, closes=None, accepts="predictions"):
    return Phase(
        task_id="t", name=name, split=split, opens_at=opens, closes_at=closes, accepts=accepts
    )


@pytest.mark.parametrize(
    "phases, accepts, want",
    [
        # by split, whatever the names and the order they were made in
        ([("a", "dev"), ("b", "test")], "predictions", "b"),
        ([("evaluation", "test"), ("development", "dev")], "predictions", "evaluation"),
        ([("test", "dev"), ("dev", "test")], "predictions", "dev"),  # names mislead: ignored
        # a closed test phase leaves the open dev one
        ([("development", "dev"), ("evaluation!", "test")], "predictions", "development"),
        # a phase that takes systems is not proposed for a file, and the other way round
        ([("systems", "test", "code"), ("evaluation", "test")], "predictions", "evaluation"),
        ([("evaluation", "test"), ("systems", "test", "code")], "code", "systems"),
        # none open: the last one made (its refusal says it is closed)
        ([("a!", "dev"), ("b!", "test")], "predictions", "b!"),
        # another split name: after test and dev
        ([("x", "extra"), ("d", "dev")], "predictions", "d"),
        ([("x", "extra")], "predictions", "x"),
    ],
)
def test_the_default_follows_splits_and_dates(phases, accepts, want):
    now = utcnow()
    made = []
    for spec in phases:
        name, split, *kind = spec
        closed = name.endswith("!")  # closed a day ago
        made.append(
            _phase(
                name,
                split,
                closes=now - timedelta(days=1) if closed else None,
                accepts=kind[0] if kind else "predictions",
            )
        )
    assert default_phase(made, accepts=accepts, now=now).name == want


def test_the_split_check_reads_the_same_beginning_of_a_short_and_a_long_file(tmp_path, monkeypatch):
    """The request's split check validates an upload's first CHECK_ROWS lines (within
    CHECK_BYTES), in memory: a 411-row file (TRoTR fold 1's test file's length) and a 60-row one
    of the same shape cost it the same rows, and a file of another split is still refused from
    them, compressed too (read whole where it is small)."""
    from server.demo import import_demo_tasks, predictions
    from server.domain import phase_choice
    from tasks import get_task

    import_demo_tasks(tmp_path, n_pairs=822)  # a dev split of 411 ids, a test split of 822
    task = get_task("tric-binary")
    dev, test = _phase("development", "dev"), _phase("evaluation", "test")
    seen = []
    validate = phase_choice.validate_bytes

    def spy(task_id, data, name, split, home):
        seen.append(data.count(b"\n"))
        return validate(task_id, data, name, split, home)

    monkeypatch.setattr(phase_choice, "validate_bytes", spy)
    long_file = predictions("tric-binary", "dev", tmp_path, 0.3, 0)[0]
    assert long_file.count(b"\n") == 411
    read = []
    for body in (long_file, b"".join(long_file.splitlines(keepends=True)[:60])):
        seen.clear()
        phase_choice.refuse_other_split(
            task, tmp_path, dev, [dev, test], io.BytesIO(body), "p.jsonl"
        )
        read.append(list(seen))
    # the same rows, within the bound
    assert read[0] == read[1] == [phase_choice.CHECK_ROWS], read
    with pytest.raises(Exception, match="choose phase development"):
        phase_choice.refuse_other_split(task, tmp_path, test, [dev, test], io.BytesIO(long_file))
    import gzip

    small = b"".join(long_file.splitlines(keepends=True)[:20])
    with pytest.raises(Exception, match="choose phase development"):
        phase_choice.refuse_other_split(
            task, tmp_path, test, [dev, test], io.BytesIO(gzip.compress(small)), "p.jsonl.gz"
        )


@pytest.mark.parametrize(
    "body, cap, want",
    [
        (b"a\nb\nc", 100, b"a\nb\nc"),  # a short file whole, its last line unended
        (b"".join(b"%d\n" % i for i in range(20)), 100, b"0\n1\n2\n3\n4\n5\n6\n7\n"),
        (b"x" * 30 + b"\n" + b"y" * 80, 50, b"x" * 30 + b"\n"),  # cut at a line end within cap
        (b"x" * 80 + b"\nz\n", 50, None),  # no line ends within cap: no whole row
    ],
)
def test_the_split_check_takes_whole_rows_only(body, cap, want):
    from server.domain import phase_choice

    assert phase_choice.CHECK_ROWS == 8
    assert phase_choice._first_rows(body[: cap + 1], cap) == want
