"""Competitions from bundles on the server: the example bundle creates its competition through the
server's shell, the API and the administrators' upload form; a participant then scores on it
through the web and the CLI; a broken bundle gets one report naming every problem and nothing is
created (no competition row, no task files); export then create (a clone) gives the same gold ids
and the same board for the same files."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_token, make_user

from server.models import Competition, Submission
from tasks.bundle import write_bundle_zip
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
PREDICTIONS = EXAMPLE / "predictions-dev.jsonl"
SLUG, TASK = "sts-latin-2027", "sts-latin"


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own whose tasks/ links each of the session's imported tasks: a
    bundle installs its task here, never among the session's."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    for t in (home / "tasks").iterdir():
        (d / "tasks" / t.name).symlink_to(t, target_is_directory=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    """A declared task lives in one test's data directory: unregister it after."""
    yield
    from tasks import unregister_declared

    for task_id in (TASK, f"{TASK}-sts-latin-2028"):
        unregister_declared(task_id)


def _zip_of(root: Path, out: Path) -> Path:
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    write_bundle_zip(spec, root, out)
    return out


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _broken(tmp_path: Path) -> Path:
    """The example with six problems at once."""
    root = tmp_path / "broken"
    shutil.copytree(EXAMPLE, root)
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    t = spec["tasks"][0]
    t["metrics"] = ["spearmann", "pearson", "n"]  # unknown, near "spearman"
    t["greater_is_better"] = "sometimes"  # a schema error
    t["splits"]["dev"]["inputs"] = ["sts-latin/dev/missing.jsonl"]  # a missing file
    t["splits"]["test"]["inputs"] = ["../outside.jsonl"]  # a path out of the bundle
    (root / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def _nothing_made(app, home: Path) -> None:
    with Session(engine_of(app)) as s:
        assert s.exec(select(Competition).where(Competition.slug == SLUG)).first() is None
    assert not (home / "tasks" / TASK).exists()


def test_the_shell_creates_the_example_and_refuses_a_broken_one_naming_every_problem(
    tmp_path, monkeypatch
):
    from cli.main import main

    home = tmp_path / "h"
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    r = CliRunner().invoke(main, ["competitions", "create", str(_broken(tmp_path)), "--json"])
    assert r.exit_code == 1
    err = json.loads(r.stdout)["error"]  # one JSON document, every problem in it
    text = json.dumps(err["problems"])
    assert err["code"] == "invalid_bundle" and err["total"] >= 4, err
    for needle in ("spearman", "greater_is_better", "missing.jsonl", "outside"):
        assert needle in text, (needle, text)
    assert any(p["line"] for p in err["problems"])  # the YAML ones name their line
    assert not (home / "tasks" / TASK).exists()
    r = CliRunner().invoke(main, ["competitions", "create", str(EXAMPLE), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert (got["id"], got["state"], got["tasks"]) == (SLUG, "draft", [TASK])
    assert [p["slug"] for p in got["pages"]] == [
        "overview",
        "data",
        "evaluation",
        "terms",
        "timeline",
    ]
    assert got["settings"]["approval"] == "manual" and got["settings"]["terms_version"] == 1
    assert [f["key"] for f in got["settings"]["fact_fields"]] == [
        "system_description",
        "external_data",
        "track",
    ]
    r = CliRunner().invoke(main, ["phases", "list", TASK, "--json"])
    assert r.exit_code == 0, r.output
    assert sorted(p["name"] for p in json.loads(r.stdout)) == [
        "development",
        "evaluation",
        "systems",
    ]
    # a second time: the id and the task are taken, and said so
    r = CliRunner().invoke(main, ["competitions", "create", str(EXAMPLE)])
    assert r.exit_code == 1 and "already installed on this server" in r.stderr


def test_the_api_and_the_upload_form_create_it_and_a_participant_scores(app, tmp_path):
    from server.jobs.scoring import score_submission

    admin = make_user(app, "admin@x.org", organizer=True)
    ann = make_user(app, "ann@x.org")
    tokens = {"admin": make_token(app, admin), "ann": make_token(app, ann)}
    home = Path(app.extensions["palimpsest.settings"].home)
    c = app.test_client()

    # the upload form refuses the broken bundle, listing every problem; nothing is made
    admin_web = Browser(app.test_client())
    admin_web.login("admin@x.org")
    broken = _zip_of(_broken(tmp_path), tmp_path / "broken.zip")
    r = admin_web.post(
        "/competitions/new/bundle",
        {"bundle": (io.BytesIO(broken.read_bytes()), "broken.zip")},
        content_type="multipart/form-data",
    )
    page = r.get_data(as_text=True)
    assert r.status_code == 422 and "spearman" in page and "outside" in page
    _nothing_made(app, home)
    # a participant may not upload
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(broken.read_bytes()), "b.zip")},
        headers=_h(tokens["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 403
    # the API with the broken one: 422 naming every problem
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(broken.read_bytes()), "b.zip")},
        headers=_h(tokens["admin"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 422 and r.json["error"]["code"] == "invalid_bundle"
    assert r.json["error"]["total"] >= 4
    _nothing_made(app, home)
    # the API with the example: 201, the administrator its owner
    good = _zip_of(EXAMPLE, tmp_path / "good.zip")
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(good.read_bytes()), "good.zip")},
        headers=_h(tokens["admin"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    assert r.json["id"] == SLUG and r.json["role"] == "admin"  # and its owner:
    with Session(engine_of(app)) as s:
        from server.actions import competitions as comp
        from server.domain import people

        assert people.role_of(s, admin, comp.find(s, SLUG).id) == "owner"

    # the participant registers, is approved, forms a team and scores on the dev phase (web)
    r = c.patch(
        f"/api/v1/competitions/{SLUG}", json={"state": "visible"}, headers=_h(tokens["admin"])
    )
    assert r.status_code == 200
    r = c.post(
        f"/api/v1/competitions/{SLUG}/registration",
        json={"accept_terms": True},
        headers=_h(tokens["ann"]),
    )
    assert r.status_code == 200 and r.json["status"] == "pending"
    r = c.post(
        f"/api/v1/competitions/{SLUG}/participants/ann@x.org/approve",
        json={},
        headers=_h(tokens["admin"]),
    )
    assert r.status_code == 200, r.json
    r = c.post(
        "/api/v1/team", json={"name": "Lexica", "competition": SLUG}, headers=_h(tokens["ann"])
    )
    assert r.status_code == 201, r.json
    from webkit import update_phase

    with Session(engine_of(app)) as s:
        from server.models import Phase

        dev = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.split == "dev")).one()
    update_phase(app, dev.id, opens_at=None, closes_at=None)  # open now
    web = Browser(app.test_client())
    web.login("ann@x.org")
    r = web.post(
        f"/tasks/{TASK}/submit",
        {
            "phase": dev.name,
            "file": (io.BytesIO(PREDICTIONS.read_bytes()), "predictions-dev.jsonl"),
            "method_name": "overlap",
        },
        content_type="multipart/form-data",
    )
    assert r.status_code == 302, r.get_data(as_text=True)[:2000]
    with Session(engine_of(app)) as s:
        (sub,) = s.exec(select(Submission)).all()
    assert score_submission(sub.id)["status"] == "scored"
    r = c.get(f"/api/v1/submissions/{sub.id}", headers=_h(tokens["ann"]))
    assert r.json["status"] == "scored" and -1 <= r.json["scores"]["primary"]["value"] <= 1


def test_export_then_create_gives_the_same_gold_and_the_same_board(app, tmp_path):
    from server.actions import bundles as bundle_actions

    admin = make_user(app, "admin@x.org", organizer=True)
    settings = app.extensions["palimpsest.settings"]
    home = Path(settings.home)
    with Session(engine_of(app)) as s:
        bundle_actions.create_from_bundle(
            s=s, actor=admin, source=EXAMPLE, via="test", settings=settings
        )
        out = bundle_actions.export_competition(
            s=s,
            actor=admin,
            competition=SLUG,
            out=tmp_path / "export.zip",
            include_gold=True,
            settings=settings,
        )
        without = bundle_actions.export_competition(
            s=s,
            actor=admin,
            competition=SLUG,
            out=tmp_path / "public.zip",
            include_gold=False,
            settings=settings,
        )
    with zipfile.ZipFile(without) as z:
        names = z.namelist()
        assert "sts-latin/dev/gold.jsonl" in names  # the dev gold is public
        assert not [n for n in names if n.startswith("sts-latin/test/") and "gold" in n]
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        assert "competition.yaml" in names and any(n.endswith("pages/terms.md") for n in names)
    # a clone: the same gold ids byte for byte, under a new id
    with Session(engine_of(app)) as s:
        cloned = bundle_actions.clone_competition(
            s=s,
            actor=admin,
            competition=SLUG,
            new_id="sts-latin-2028",
            via="test",
            settings=settings,
        )
    assert cloned.id == "sts-latin-2028" and cloned.tasks == [f"{TASK}-sts-latin-2028"]
    old, new = home / "tasks" / TASK / "gold", home / "tasks" / cloned.tasks[0] / "gold"
    assert sorted(p.relative_to(old).as_posix() for p in old.rglob("*") if p.is_file()) == sorted(
        p.relative_to(new).as_posix() for p in new.rglob("*") if p.is_file()
    )
    for f in old.rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (new / f.relative_to(old)).read_bytes(), f
    # the same file scores the same on both
    from scorer import score_file

    a = score_file(TASK, PREDICTIONS, split="dev", home=home)
    b = score_file(cloned.tasks[0], PREDICTIONS, split="dev", home=home)
    assert a["metrics"] == b["metrics"] and a["primary"]["value"] == b["primary"]["value"]


def test_the_offline_scorer_knows_a_bundles_task_in_the_home_it_is_given(tmp_path, monkeypatch):
    from cli.main import main
    from tasks.bundle import install_tasks, read_bundle

    home = tmp_path / "elsewhere"
    install_tasks(read_bundle(EXAMPLE, home=home), home)
    from tasks import unregister_declared

    unregister_declared(TASK)  # a new process: it knows only the built-in tasks
    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path / "default"))
    args = ["score", TASK, str(PREDICTIONS), "--split", "dev", "--home", str(home), "--json"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["primary"]["name"] == "spearman"
    r = CliRunner().invoke(main, ["score", "sts-latn", str(PREDICTIONS), "--home", str(home)])
    assert r.exit_code == 2 and "did you mean 'sts-latin'?" in r.output
