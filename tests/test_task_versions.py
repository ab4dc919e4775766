"""Tasks that change after they are created (issue 33, item 4): the example bundle's competition
is created, two teams score on it and the development phase's ranking is published; then an edited
bundle (another primary metric, a changed dev gold) applied with `competitions create --update`
makes version 2 of the task: every run is marked stale and rescored under version 2 by the
scoring job, the two versions are never ranked together, version 1's published ranking stays
byte for byte, and the phase page says what the change did. An invalid update is refused with
its YAML paths and changes nothing; a change of texts alone rescoring nothing; an archived task
takes no run and keeps its own."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
import yaml
from apikit import _h, _run_job, _submit
from bundlekit import _bundle
from click.testing import CliRunner
from sqlmodel import Session, func, select
from webkit import Browser, engine_of, update_phase

from server.models import (
    AuditLog,
    GoldVersion,
    Phase,
    RankingVersion,
    Score,
    Submission,
    TaskVersion,
)
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK = "sts-latin-2027", "sts-latin"


@pytest.fixture(autouse=True)
def _forget_declared_task():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


def _cli(*args, ok=True):
    from cli.main import main

    r = CliRunner().invoke(main, list(args))
    assert (r.exit_code == 0) == ok, r.output
    return r


def _predictions(home: Path, split: str, seed: int) -> bytes:
    """A prediction for every pair of the split: the word overlap's stand-in, a hash."""
    rows = []
    for line in (home / "tasks" / TASK / "public" / split / "inputs.jsonl").open():
        pid = json.loads(line)["pair_id"]
        h = hashlib.sha256(f"{seed}:{pid}".encode()).digest()
        rows.append(json.dumps({"pair_id": pid, "score": h[0] / 255}))
    return ("\n".join(rows) + "\n").encode()


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def world(api_env, tmp_path):
    """The competition made from the example by the server's shell, both of its first phases
    open, alpha and beta registered, each with a scored run on the development phase (alpha with
    the example's predictions, beta with hashed ones) and one on the evaluation phase."""
    app, tokens, home = api_env
    r = _cli("competitions", "create", str(_bundle(tmp_path, "v1")), "--json")
    assert json.loads(r.stdout)["tasks"] == [TASK]
    c = app.test_client()
    with Session(engine_of(app)) as s:
        phases = {p.name: p.id for p in s.exec(select(Phase).where(Phase.task_id == TASK))}
    for name in ("development", "evaluation"):
        update_phase(app, phases[name], opens_at=None, closes_at=None)
    runs = {}
    for team in ("alpha", "beta"):
        r = c.post(
            f"/api/v1/competitions/{SLUG}/registration",
            json={"accept_terms": True},
            headers=_h(tokens[team]),
        )
        assert r.status_code == 200 and r.json["status"] == "approved", r.json
        dev = (EXAMPLE / "predictions-dev.jsonl").read_bytes() if team == "alpha" else None
        for phase, split in (("development", "dev"), ("evaluation", "test")):
            data = dev if (dev and split == "dev") else _predictions(home, split, len(team))
            r = _submit(c, tokens[team], TASK, data, phase=phase, method_name=f"{team}-m")
            assert r.status_code == 201, r.json
            assert _run_job(r.json["id"])["status"] == "scored"
            runs[(team, phase)] = r.json["id"]
    return {"app": app, "tokens": tokens, "home": home, "c": c, "phases": phases, "runs": runs}


def _publish_development(w) -> bytes:
    c, org = w["c"], _h(w["tokens"]["org"])
    r = c.post(
        f"/api/v1/tasks/{TASK}/phases/development/publish", headers=org, json={"close": True}
    )
    assert r.status_code == 201, r.json
    got = c.get(f"/api/v1/tasks/{TASK}/phases/development/rankings/1", headers=org)
    assert got.status_code == 200
    return got.get_data()


def _version_2(spec, root):
    """Another primary metric (pearson), and one pair of the dev gold scored otherwise."""
    t = spec["tasks"][0]
    t["primary"] = {"subset": "all", "metric": "pearson"}
    t["title"] = "STS-Latin, version 2"
    gold = root / "sts-latin" / "dev" / "dev-gold.jsonl"
    lines = gold.read_text().splitlines()
    row = json.loads(lines[0])
    row["score"] = 0.0 if row["score"] > 0.5 else 1.0
    lines[0] = json.dumps(row)
    gold.write_text("\n".join(lines) + "\n")


def test_an_edited_bundle_makes_version_2_rescored_with_version_1s_ranking_byte_identical(
    world, tmp_path
):
    from server.models import Submission as Sub
    from tasks import _DECLARED, get_task
    from tasks.store import TaskStore

    app, c, home, org = world["app"], world["c"], world["home"], _h(world["tokens"]["org"])
    engine = engine_of(app)
    published = _publish_development(world)
    with Session(engine) as s:
        rv1 = s.exec(select(RankingVersion)).one()
        frozen = (rv1.body_json, rv1.body_csv, rv1.body_latex, rv1.sha256)
    store = TaskStore(TASK, home)
    gold_v1 = store.gold_checksum("dev")
    held = get_task(TASK)  # what a worker that loaded the task before holds
    assert held.version == 1 and held.primary == ("all", "spearman")

    r = _cli(
        "competitions", "create", str(_bundle(tmp_path, "v2", _version_2)), "--update",
        "--reason", "pearson, as the paper", "--json",
    )  # fmt: skip
    got = json.loads(r.stdout)
    (t,) = got["tasks"]
    assert (t["task"], t["previous_version"], t["version"], t["versioned"]) == (TASK, 1, 2, True)
    assert t["declared"] == ["primary"] and t["gold"] == ["dev"] and "title" in t["texts"]
    assert t["files"] == ["public/dev/gold.jsonl"]  # the dev gold's published copy
    effects = {p["phase"]: p for p in t["phases"]}
    runs = world["runs"]
    dev_runs = sorted(runs[(team, "development")] for team in ("alpha", "beta"))
    assert effects["development"]["rescoring"] == dev_runs
    assert effects["development"]["stale"] == 2 and effects["development"]["published"] == [1]
    assert [r["rank"] for r in effects["development"]["before"]] == [1, 2]
    assert effects["evaluation"]["stale"] == 2  # every run under version 1, whatever its gold
    # the task is version 2 here and in a process that held version 1 (a worker)
    assert get_task(TASK).version == 2 and get_task(TASK).primary == ("all", "pearson")
    _DECLARED[TASK] = held
    assert get_task(TASK).version == 2
    decl = json.loads((home / "tasks" / TASK / "declaration.json").read_text())
    assert decl["version"] == 2 and store.manifest()["version"] == 2
    # the dev gold is version 2, the first kept outside public/
    with Session(engine) as s:
        gv = s.exec(select(GoldVersion).where(GoldVersion.task_id == TASK)).all()
        assert [(v.split, v.version, v.sha256) for v in gv] == [
            ("dev", 1, gold_v1),
            ("dev", 2, store.gold_checksum("dev")),
        ]
        assert [(v.version, v.reason) for v in s.exec(select(TaskVersion))] == [
            (1, "as created"),
            (2, "pearson, as the paper"),
        ]
    kept = store.root / "gold-history" / "dev" / "v1" / "gold.jsonl"
    assert kept.read_bytes() == (EXAMPLE / "sts-latin" / "dev" / "dev-gold.jsonl").read_bytes()
    assert store.gold_checksum("dev") != gold_v1

    # before rescoring, the live board ranks nobody: version 1's scores are never ranked with 2's
    board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase=evaluation", headers=org).json
    assert [r["rank"] for r in board["rows"] if r["row_type"] == "team"] == [None, None]
    # the scoring job rescores every run under version 2
    queued = sorted(i for p in t["phases"] for i in p["rescoring"])
    assert queued == sorted(runs.values())
    for sid in queued:
        assert _run_job(sid)["status"] == "scored"
    with Session(engine) as s:
        for sid in queued:
            sub = s.get(Sub, sid)
            assert not sub.stale
            scores = s.exec(
                select(Score).where(Score.submission_id == sid, Score.attempt == sub.score_attempt)
            ).all()
            assert scores and {x.task_version for x in scores} == {2}
            assert {x.result["primary"]["name"] for x in scores} == {"pearson"}
    board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase=evaluation", headers=org).json
    assert sorted(r["rank"] for r in board["rows"] if r["row_type"] == "team") == [1, 2]
    assert board["primary"]["metric"] == "pearson"

    # version 1's published ranking: byte for byte, on the API and in the database
    again = c.get(f"/api/v1/tasks/{TASK}/phases/development/rankings/1", headers=org)
    assert again.get_data() == published
    assert json.loads(published)["primary"]["metric"] == "spearman"
    with Session(engine) as s:
        rv = s.exec(select(RankingVersion)).one()
        assert (rv.body_json, rv.body_csv, rv.body_latex, rv.sha256) == frozen

    # the API says the task's versions; the phase page what the change did to its board
    state = c.get(f"/api/v1/tasks/{TASK}/versions", headers=org).json
    assert state["version"] == 2 and [v["version"] for v in state["versions"]] == [1, 2]
    assert state["versions"][1]["changes"]["declared"] == ["primary"]
    web = Browser(app.test_client())
    web.login("org@example.org", "correct horse")
    page = web.get(f"/organizer/phases/{world['phases']['development']}").get_data(as_text=True)
    assert "Version 2 of the task" in page and "pearson, as the paper" in page
    assert "2 run(s) marked stale" in page and "published ranking stays" in page
    # the rank-change table names the metric of each side's values (the primary changed)
    assert "Rank before (all/spearman)" in page and "Rank now (all/pearson)" in page, page

    # the same bundle again changes nothing
    r = _cli("competitions", "create", str(tmp_path / "v2"), "--update", "--json")
    assert json.loads(r.stdout)["tasks"][0]["versioned"] is False
    assert json.loads(r.stdout)["tasks"][0]["texts"] == []


def test_an_invalid_update_is_refused_with_its_yaml_paths_and_changes_nothing(world, tmp_path):
    app, home = world["app"], world["home"]
    engine = engine_of(app)

    def broken(spec, root):
        t = spec["tasks"][0]
        t["metrics"] = ["spearmann", "pearson", "n"]
        t["primary"] = {"subset": "all", "metric": "pearson"}
        del t["splits"]["dev"]  # the development phase scores on it
        t["phases"] = [p for p in t["phases"] if p["split"] != "dev"]

    def counts():
        with Session(engine) as s:
            return tuple(
                s.exec(select(func.count()).select_from(model)).one()
                for model in (TaskVersion, GoldVersion, AuditLog, Score)
            ) + tuple(sorted((x.id, x.stale, x.status) for x in s.exec(select(Submission))))

    files, before = _tree(home / "tasks" / TASK), counts()
    r = _cli("competitions", "create", str(_bundle(tmp_path, "bad", broken)), "--update",
             "--json", ok=False)  # fmt: skip
    err = json.loads(r.stdout)["error"]
    where = {p["id"]: p for p in err["problems"]}
    assert err["code"] == "invalid_bundle"
    assert "did you mean 'spearman'" in where["tasks[0].metrics[0]"]["message"]
    assert where["tasks[0].metrics[0]"]["line"]  # its line in competition.yaml

    # the valid part refused too, with what only the database knows, when the rest is right
    def only_the_split(spec, root):
        broken(spec, root)
        spec["tasks"][0]["metrics"] = ["spearman", "pearson", "n"]

    r = _cli("competitions", "create", str(_bundle(tmp_path, "bad2", only_the_split)),
             "--update", "--json", ok=False)  # fmt: skip
    err = json.loads(r.stdout)["error"]
    assert [p["id"] for p in err["problems"]] == ["tasks[0].splits"]
    assert "the development phase scores on the dev split" in err["problems"][0]["message"]
    # a competition that is not there, through the API
    c, org = world["c"], _h(world["tokens"]["org"])
    other = _bundle(tmp_path, "other", lambda s, r: s.update(id="sts-latin-2099"))
    from tasks.bundle import write_bundle_zip

    z = tmp_path / "other.zip"
    write_bundle_zip(yaml.safe_load((other / "competition.yaml").read_text()), other, z)
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(z.read_bytes()), "b.zip"), "update": "1"},
        headers=org,
        content_type="multipart/form-data",
    )
    assert r.status_code == 422 and "create it from the bundle first" in r.json["error"]["message"]
    # a participant may not
    z2 = tmp_path / "same.zip"
    same = _bundle(tmp_path, "same", _version_2)
    write_bundle_zip(yaml.safe_load((same / "competition.yaml").read_text()), same, z2)
    r = c.post(
        f"/api/v1/tasks/{TASK}/versions",
        data={"bundle": (io.BytesIO(z2.read_bytes()), "b.zip")},
        headers=_h(world["tokens"]["alpha"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 403
    assert _tree(home / "tasks" / TASK) == files and counts() == before
    from tasks import get_task

    assert get_task(TASK).version == 1


def test_texts_change_in_place_and_nothing_is_stale(world, served, tmp_path):
    app, c, home, org = world["app"], world["c"], world["home"], _h(world["tokens"]["org"])
    url, token = served[0], world["tokens"]["org"]
    r = c.patch(f"/api/v1/tasks/{TASK}", headers=org, json={"title": "x" * 301})
    assert r.status_code == 422 and r.json["error"]["problems"][0]["id"] == "title"
    r = _remote(url, token, "organizer", "task", "edit", TASK, "--title", "STS-Latin (renamed)",
                "--unit", "pair", "--json")  # fmt: skip
    assert json.loads(r.stdout)["version"] == 1
    assert c.get(f"/api/v1/tasks/{TASK}", headers=org).json["title"] == "STS-Latin (renamed)"
    r = c.patch(f"/api/v1/tasks/{TASK}", headers=_h(world["tokens"]["alpha"]), json={"title": "a"})
    assert r.status_code == 403

    def described(spec, root):
        spec["tasks"][0]["description"] = "Each item pairs two sentences; a new description."

    r = _remote(url, token, "organizer", "competitions", "create",
                str(_bundle(tmp_path, "d", described)), "--update", "--json")  # fmt: skip
    (t,) = json.loads(r.stdout)["tasks"]
    # the bundle's title is the old one: texts from the bundle, in place
    assert t["versioned"] is False and set(t["texts"]) == {"title", "description"}
    with Session(engine_of(app)) as s:
        assert not [x for x in s.exec(select(Submission)) if x.stale or x.status != "scored"]
        assert s.exec(select(func.count()).select_from(TaskVersion)).one() == 0
    decl = json.loads((home / "tasks" / TASK / "declaration.json").read_text())
    assert decl["version"] == 1 and decl["description"].endswith("a new description.")
    board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase=development", headers=org).json
    assert sorted(r["rank"] for r in board["rows"] if r["row_type"] == "team") == [1, 2]
    # the phase page's form: a title too long is refused naming it, a description is saved
    web = Browser(app.test_client())
    web.login("org@example.org", "correct horse")
    back = f"/organizer/phases/{world['phases']['development']}"
    r = web.post(f"/organizer/tasks/{TASK}/texts", {"title": "t" * 301, "next": back})
    assert r.status_code == 302 and r.headers["Location"].endswith(back)
    page = web.get(back).get_data(as_text=True)
    assert "Refused" in page and "title:" in page
    r = web.post(f"/organizer/tasks/{TASK}/texts", {"description": "From the form.", "next": back})
    page = web.get(back).get_data(as_text=True)
    assert "nothing is rescored" in page and "From the form." in page
    with Session(engine_of(app)) as s:
        assert not [x for x in s.exec(select(Submission)) if x.stale]


def _remote(url, token, *args, ok=True):
    from cli.main import main

    env = {"PALIMPSEST_SERVER": url, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nope"}
    r = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert (r.exit_code == 0) == ok, (args, r.output)
    return r


def test_an_archived_task_takes_no_run_and_keeps_its_own(world, served, tmp_path):
    app, c, home, tokens = world["app"], world["c"], world["home"], world["tokens"]
    url, org = served[0], _h(tokens["org"])
    r = c.post(f"/api/v1/tasks/{TASK}/archive", headers=_h(tokens["alpha"]), json={})
    assert r.status_code == 403
    r = _remote(url, tokens["org"], "organizer", "task", "archive", TASK, "--reason", "ended",
                "--json")  # fmt: skip
    first = json.loads(r.stdout)
    assert first["archived"] is True, first
    assert sorted(first["phases_closed"]) == ["development", "evaluation", "systems"]
    again = c.post(f"/api/v1/tasks/{TASK}/archive", headers=org, json={})
    assert again.status_code == 200 and again.json["phases_closed"] == []
    assert again.json["archived_at"] == first["archived_at"]
    shown = _remote(url, tokens["org"], "organizer", "task", "show", TASK).stdout
    assert f"{TASK} version 1, archived" in shown
    # no new run; no phase opens again or is added
    r = _submit(c, tokens["alpha"], TASK, _predictions(home, "dev", 9), phase="development")
    assert r.status_code == 409 and r.json["error"]["code"] == "phase_closed"
    r = c.patch(f"/api/v1/tasks/{TASK}/phases/development", headers=org, json={"closes_at": None})
    assert r.status_code == 409 and "archived" in r.json["error"]["message"]
    r = c.post(f"/api/v1/tasks/{TASK}/phases", headers=org, json={"name": "late", "split": "dev"})
    assert r.status_code == 409 and "archived" in r.json["error"]["message"]
    # its runs and files are kept; a new version is refused
    with Session(engine_of(app)) as s:
        assert sorted(x.id for x in s.exec(select(Submission)) if x.status == "scored") == sorted(
            world["runs"].values()
        )
    assert (home / "tasks" / TASK / "gold" / "test").is_dir()
    r = _cli("competitions", "create", str(_bundle(tmp_path, "v2", _version_2)), "--update",
             "--json", ok=False)  # fmt: skip
    assert "is archived" in r.stdout


# ----------------------------------------------------------------------------- after a change


def test_verify_passes_on_an_archive_taken_after_a_task_update(world, tmp_path):
    """A ranking published under task version 1, then a version 2 with another primary metric:
    the archive verifies (exit 0); the ranking's stored bytes are checked, and the report says
    it is not rebuilt from the version 2 data, and why."""
    _publish_development(world)
    _cli(
        "competitions", "create", str(_bundle(tmp_path, "v2", _version_2)), "--update",
        "--reason", "pearson", "--json",
    )  # fmt: skip
    out = tmp_path / "backups"
    out.mkdir()
    r = _cli("backup", str(out), "--json")
    r = _cli("backup", "verify", json.loads(r.stdout)["archive"], "--json")
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["checks"]["published_rankings"] == 1
    (note,) = rep["checks"]["not_rebuilt"]
    assert f"{TASK}/development version 1: published before task version 2" in note


# ----------------------------------------------------------------------------- boards of a phase


def _eval_boards(edit_boards):
    """An edit of the example: the evaluation phase's boards as `edit_boards(boards)` returns."""

    def edit(spec, root):
        (ev,) = [p for p in spec["tasks"][0]["phases"] if p["name"] == "evaluation"]
        ev["boards"] = edit_boards(ev["boards"])

    return edit


def _zip(tmp_path: Path, name: str, edit) -> Path:
    from tasks.bundle import write_bundle_zip

    root = _bundle(tmp_path, name, edit)
    z = tmp_path / f"{name}.zip"
    write_bundle_zip(yaml.safe_load((root / "competition.yaml").read_text()), root, z)
    return z


VERSE_R = {
    "name": "verse-r",
    "title": "Verse r",
    "ranking": {"subset": "verse", "metric": "pearson"},
}


def _added_changed_removed(boards):
    """verse-r added, prose ranked by Pearson, track-b removed."""
    out = []
    for b in boards:
        if b["name"] == "prose":
            out.append({**b, "ranking": {"subset": "prose", "metric": "pearson"}})
        elif b["name"] != "track-b":
            out.append(b)
    return [*out, VERSE_R]


def test_an_update_changes_the_phases_boards_and_never_a_published_one(world, served, tmp_path):
    """The example's evaluation phase published with its four boards; an edited bundle adds a
    board, ranks another by another metric and removes a third: the live boards change (the
    chooser's list, the rows' order), every published board stays byte for byte. The same update
    from the web, the API and the CLI through the API; a refused one (a board filtering on a fact
    the competition does not ask) leaves nothing behind."""
    app, c, home, tokens = world["app"], world["c"], world["home"], world["tokens"]
    url, org = served[0], _h(tokens["org"])
    engine = engine_of(app)
    r = c.post(f"/api/v1/tasks/{TASK}/phases/evaluation/publish", headers=org, json={"close": True})
    assert r.status_code == 201, r.json
    published_boards = ("main", "prose", "verse", "track-b")

    def published():
        out = {}
        for name in published_boards:
            q = "" if name == "main" else f"board={name}"
            got = c.get(f"/api/v1/tasks/{TASK}/phases/evaluation/rankings/1?{q}", headers=org)
            assert got.status_code == 200, (name, got.json)
            out[(name, "snapshot")] = got.get_data()
            for fmt in ("json", "csv", "tex"):
                got = c.get(
                    f"/api/v1/tasks/{TASK}/phases/evaluation/export?format={fmt}&{q}", headers=org
                )
                assert got.status_code == 200, (name, fmt)
                out[(name, fmt)] = got.get_data()
        return out

    def live():
        task = c.get(f"/api/v1/tasks/{TASK}", headers=org).json
        (ev,) = [p for p in task["phases"] if p["name"] == "evaluation"]
        return {b["name"]: b for b in ev["boards"]}

    def board(name):
        r = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase=evaluation&board={name}", headers=org)
        got = r.json
        if r.status_code == 200:
            got["primary"].pop("greater_is_better")
        return r.status_code, got

    def rebuilt(name):
        """The live board as the next publication would publish it (the page of a published phase
        shows its published ranking)."""
        from server.boards import leaderboard as lb
        from server.domain import boards
        from tasks import get_task

        with Session(engine) as s:
            p = s.get(Phase, world["phases"]["evaluation"])
            got = lb.build_board(
                s, get_task(TASK), p, audience="organizer", board=boards.resolve(p, name)
            )
        (key,) = [c.key for c in got.columns if c.primary]
        ranked = [r for r in got.rows if r.row_type == "team" and r.rank is not None]
        return {
            "primary": {"subset": got.primary.subset, "metric": got.primary.metric},
            "ranked": [(r.rank, r.values[key]) for r in ranked],
        }

    before = published()
    assert list(live()) == ["main", "prose", "verse", "track-b"]
    assert rebuilt("prose")["primary"] == {"subset": "prose", "metric": "spearman"}

    # a refused update: a board filtering on a fact the bundle declares but the competition does
    # not ask (facts change with `competitions edit`), beside a text change: nothing changes
    def bad(spec, root):
        spec["fact_fields"].append(
            {"key": "era", "label": "Era", "kind": "choice", "choices": ["old", "new"]}
        )
        spec["tasks"][0]["description"] = "A description that must not be written."
        _eval_boards(
            lambda bs: [
                *bs,
                {**VERSE_R, "name": "era-old", "filter": {"fact": "era", "equals": ["old"]}},
            ]
        )(spec, root)

    def counts():
        with Session(engine) as s:
            phases = [
                (p.name, p.revision, p.boards) for p in s.exec(select(Phase).order_by(Phase.id))
            ]
            return s.exec(select(func.count()).select_from(AuditLog)).one(), phases

    files, was = _tree(home / "tasks" / TASK), counts()
    r = _cli("competitions", "create", str(_bundle(tmp_path, "bad", bad)), "--update", "--json",
             ok=False)  # fmt: skip
    err = json.loads(r.stdout)["error"]
    assert [p["id"] for p in err["problems"]] == ["tasks[0].phases[1].boards[3].filter.fact"]
    assert "'era' is not a declared fact field" in err["problems"][0]["message"]
    r = c.post(
        f"/api/v1/tasks/{TASK}/versions",
        data={"bundle": (io.BytesIO(_zip(tmp_path, "bad-z", bad).read_bytes()), "b.zip")},
        headers=org,
        content_type="multipart/form-data",
    )
    assert r.status_code == 422, r.json
    assert r.json["error"]["problems"][0]["id"] == "tasks[0].phases[1].boards[3].filter.fact"
    assert _tree(home / "tasks" / TASK) == files and counts() == was

    # the server's shell: one added, one re-ranked, one removed
    edited = _bundle(tmp_path, "a", _eval_boards(_added_changed_removed))
    r = _cli("competitions", "create", str(edited), "--update", "--json")
    (t,) = json.loads(r.stdout)["tasks"]
    assert t["versioned"] is False and t["texts"] == []
    assert t["boards"] == [
        {"phase": "evaluation", "added": ["verse-r"], "removed": ["track-b"], "changed": ["prose"]}
    ]
    assert list(live()) == ["main", "prose", "verse", "verse-r"]
    assert board("track-b")[0] == 404
    prose = rebuilt("prose")
    assert prose["primary"] == {"subset": "prose", "metric": "pearson"}
    values = [v for _, v in prose["ranked"]]
    assert len(values) == 2 and values == sorted(values, reverse=True), prose
    assert values != [v for _, v in rebuilt("verse")["ranked"]]
    code, verse_r = board("verse-r")
    assert code == 200 and {
        r["submission_id"] for r in verse_r["rows"] if r["row_type"] == "team"
    } == {world["runs"][("alpha", "evaluation")], world["runs"][("beta", "evaluation")]}
    decl = json.loads((home / "tasks" / TASK / "declaration.json").read_text())
    (ev,) = [p for p in decl["phases"] if p["name"] == "evaluation"]
    assert [b["name"] for b in ev["boards"]] == ["prose", "verse", "verse-r"]
    with Session(engine) as s:
        edits = [
            a for a in s.exec(select(AuditLog).where(AuditLog.action == "phase.edit"))
            if "boards" in ((a.details or {}).get("after") or {})
        ]  # fmt: skip
    assert len(edits) == 1 and edits[0].details["via"] == "cli"
    assert published() == before
    # the same bundle again changes nothing
    r = _cli("competitions", "create", str(tmp_path / "a"), "--update", "--json")
    assert json.loads(r.stdout)["tasks"][0]["boards"] == []

    # the API: verse-r removed again
    z = _zip(tmp_path, "b", _eval_boards(lambda bs: _added_changed_removed(bs)[:-1]))
    r = c.post(
        f"/api/v1/tasks/{TASK}/versions",
        data={"bundle": (io.BytesIO(z.read_bytes()), "b.zip")},
        headers=org,
        content_type="multipart/form-data",
    )
    assert r.status_code == 200, r.json
    assert r.json["tasks"][0]["boards"] == [
        {"phase": "evaluation", "added": [], "removed": ["verse-r"], "changed": []}
    ]
    assert list(live()) == ["main", "prose", "verse"]
    # the CLI through the API: track-b back, prose by Spearman again (the example's boards)
    z = _zip(tmp_path, "c", None)
    r = _remote(url, tokens["org"], "organizer", "task", "version", TASK, str(z))
    assert "the evaluation phase's boards: added track-b; changed prose" in r.stdout, r.stdout
    assert list(live()) == ["main", "prose", "verse", "track-b"]
    assert rebuilt("prose")["primary"]["metric"] == "spearman"
    # the organizer's page: verse ranked by Pearson
    web = Browser(app.test_client())
    web.login("org@example.org", "correct horse")
    back = f"/organizer/phases/{world['phases']['evaluation']}"

    def verse_pearson(bs):
        return [
            {**b, "ranking": {"subset": "verse", "metric": "pearson"}}
            if b["name"] == "verse"
            else b
            for b in bs
        ]

    z = _zip(tmp_path, "d", _eval_boards(verse_pearson))
    r = web.post(
        f"/organizer/tasks/{TASK}/version",
        {"bundle": (io.BytesIO(z.read_bytes()), "b.zip"), "next": back},
        content_type="multipart/form-data",
    )
    assert r.status_code == 302, r.get_data(as_text=True)
    page = web.get(back).get_data(as_text=True)
    assert "the evaluation phase&#39;s boards: changed verse" in page, page
    assert rebuilt("verse")["primary"] == {"subset": "verse", "metric": "pearson"}
    assert published() == before


def test_a_participant_is_told_their_downloaded_copy_is_of_an_older_version(
    world, served, tmp_path
):
    """`palimpsest submit` says on stderr when the task's downloaded copy (what `validate` and
    `score` read offline) is of an older version than the server's; nothing while it is not."""
    from cli.main import main

    url, token, home = served[0], world["tokens"]["alpha"], world["home"]
    copy = tmp_path / "copy"
    env = {
        "PALIMPSEST_SERVER": url,
        "PALIMPSEST_TOKEN": token,
        "XDG_CONFIG_HOME": "/nope",
        "PALIMPSEST_DOWNLOADS": str(copy),
    }

    def run(*args):
        r = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
        assert r.exit_code == 0, (args, r.output)
        return r

    update_phase(world["app"], world["phases"]["development"], concurrent_limit=None)
    run("download", TASK)
    assert (copy / "tasks" / TASK / "declaration.json").is_file()
    for n, seed in enumerate((7, 8)):
        f = tmp_path / f"p{seed}.jsonl"
        f.write_bytes(_predictions(home, "dev", seed))
        r = run("submit", TASK, str(f), "--phase", "development", "--json")
        json.loads(r.stdout)  # one JSON document on stdout, the note on stderr
        stale = "is version 1; the task is now version 2" in r.stderr
        assert stale == (n == 1), r.stderr
        if n == 0:
            _cli("competitions", "create", str(_bundle(tmp_path, "v2", _version_2)), "--update",
                 "--json")  # fmt: skip
    run("download", TASK)  # downloaded again: nothing to say
    f = tmp_path / "p9.jsonl"
    f.write_bytes(_predictions(home, "dev", 9))
    assert "version" not in run("submit", TASK, str(f), "--phase", "development").stderr
