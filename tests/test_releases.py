"""Data released per phase (server.domain.download_rule): one rule for the web's zips, the API's
download and
the CLI's `download`; a symlink planted in public/ is refused by all; every public folder has a
link on the task page; the starting kit; a downloaded directory scores dev offline."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from datetime import timedelta

import pytest
from click.testing import CliRunner
from conftest import own_tasks
from webkit import make_phase, make_token, make_user

from server.models import utcnow
from tasks.store import TaskStore

TASK = "tric-binary"


@pytest.fixture
def own(app, web_home, home):
    """The app with a private copy of the task's files (the session's are shared)."""
    own_tasks(web_home, [TASK])
    return TaskStore(TASK, web_home)


def _names(data: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.namelist()


def _serve(app):
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_port}"


def _cli(env: dict, *args: str):
    from cli.main import main

    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_a_split_is_refused_before_its_phase_opens_on_the_web_the_api_and_the_cli(
    app, own, tmp_path, monkeypatch
):
    opens = (utcnow() + timedelta(days=10)).replace(microsecond=0)
    make_phase(app, TASK, "dev", opens_at=None)
    make_phase(app, TASK, "test", opens_at=opens, closes_at=opens + timedelta(days=5))
    ann = make_user(app, "ann@x.org", team="Readers")
    org = make_user(app, "org@x.org", organizer=True)
    h = {"Authorization": f"Bearer {make_token(app, ann)}"}
    c = app.test_client()
    when = opens.strftime("%Y-%m-%d %H:%M")

    r = c.get(f"/tasks/{TASK}/data/test.zip")
    assert r.status_code == 403 and when in r.get_data(as_text=True)
    assert c.get(f"/tasks/{TASK}/data/dev.zip").status_code == 200
    r = c.get(f"/api/v1/tasks/{TASK}/download?split=test", headers=h)
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "not_released"
    assert when in r.get_json()["error"]["message"]
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=h)  # the rest, saying what is withheld
    names = _names(r.data)
    assert r.status_code == 200 and not [n for n in names if n.startswith("public/test/")]
    assert [n for n in names if n.startswith("public/dev/")]
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(r.data)).read("task.json"))
    assert manifest["withheld"] == {"test": opens.isoformat() + "Z"}
    page = c.get(f"/tasks/{TASK}").get_data(as_text=True)
    assert f"released {when}" in page and f"/tasks/{TASK}/data/test.zip" not in page

    # an organizer prepares: served to them before the date
    oh = {"Authorization": f"Bearer {make_token(app, org)}"}
    assert c.get(f"/api/v1/tasks/{TASK}/download?split=test", headers=oh).status_code == 200

    srv, url = _serve(app)
    try:
        env = {
            "PALIMPSEST_SERVER": url,
            "PALIMPSEST_TOKEN": h["Authorization"][7:],
            "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
            "PALIMPSEST_HOME": str(own.home),  # a server's data directory: not written to
        }
        monkeypatch.chdir(tmp_path)
        r = _cli(env, "download", TASK, "--split", "test")
        assert r.exit_code == 1 and "not released" in r.output and when in r.output
        r = _cli(env, "download", TASK)
        assert (
            r.exit_code == 0 and f"not released yet: test (from {opens.isoformat()}Z)" in r.output
        )
        got = tmp_path / "palimpsest-data" / "tasks" / TASK
        assert (got / "public" / "dev" / "inputs.jsonl").is_file()
        assert not (got / "public" / "test").exists() and not (got / "gold").exists()
        # into a server's own copy: refused, nothing overwritten
        before = (own.root / "task.json").read_bytes()
        r = _cli(env, "download", TASK, "--home", str(own.home))
        assert r.exit_code == 1 and "server's copy" in r.output
        assert (own.root / "task.json").read_bytes() == before

        # the organizer releases the test inputs now (before the phase opens)
        r = c.patch(
            f"/api/v1/tasks/{TASK}/phases/test",
            json={"inputs_at": (utcnow() - timedelta(minutes=1)).isoformat()},
            headers=oh,
        )
        assert r.status_code == 200 and r.get_json()["inputs_at"]
        assert c.get(f"/tasks/{TASK}/data/test.zip").status_code == 200
        assert c.get(f"/api/v1/tasks/{TASK}/download?split=test", headers=h).status_code == 200
        r = _cli(env, "download", TASK, "--split", "test")
        assert r.exit_code == 0 and (got / "public" / "test" / "inputs.jsonl").is_file()
        assert f"/tasks/{TASK}/data/test.zip" in c.get(f"/tasks/{TASK}").get_data(as_text=True)
    finally:
        srv.shutdown()


def test_a_symlink_planted_in_public_is_refused_by_the_web_and_the_api(app, own, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("Zq9-OUTSIDE-7x\n")
    (own.root / "public" / "test" / "leak.jsonl").symlink_to(outside / "secret.txt")
    (own.root / "public" / "test" / "linked").symlink_to(outside, target_is_directory=True)
    (own.root / "public" / "evil").symlink_to(outside, target_is_directory=True)
    ann = make_user(app, "ann@x.org", team="Readers")
    h = {"Authorization": f"Bearer {make_token(app, ann)}"}
    c = app.test_client()
    urls = (
        f"/tasks/{TASK}/data/test.zip",
        f"/api/v1/tasks/{TASK}/download?split=test",
        f"/api/v1/tasks/{TASK}/download",
    )
    for url in urls:
        r = c.get(url, headers=h)
        assert r.status_code == 200, url
        with zipfile.ZipFile(io.BytesIO(r.data)) as z:
            names = z.namelist()
            assert not [n for n in names if "leak" in n or "linked" in n or "evil" in n], url
            assert all(b"Zq9-OUTSIDE-7x" not in z.read(n) for n in names)
    assert c.get(f"/tasks/{TASK}/data/evil.zip").status_code == 404
    assert c.get(f"/api/v1/tasks/{TASK}/download?split=evil", headers=h).status_code == 404
    # a link to the hidden gold itself: never in any answer
    gold = own.root / "gold" / "test" / "gold.jsonl"
    (own.root / "public" / "test" / "leak.jsonl").unlink()
    (own.root / "public" / "test" / "leak.jsonl").symlink_to(gold)
    for url in urls:
        r = c.get(url, headers=h)
        if r.status_code == 200:
            with zipfile.ZipFile(io.BytesIO(r.data)) as z:
                assert all(z.read(n) != gold.read_bytes() for n in z.namelist()), url


def test_every_public_folder_has_a_link_and_a_bundle_kit_is_shown(app, own):
    extra = own.root / "public" / "lexicon"
    extra.mkdir()
    (extra / "words.tsv").write_text("word\tsense\n")
    c = app.test_client()
    page = c.get(f"/tasks/{TASK}").get_data(as_text=True)
    for area in ("train", "lexicon", "dev", "test"):  # the import's training data too
        assert f"/tasks/{TASK}/data/{area}.zip" in page
        assert c.get(f"/tasks/{TASK}/data/{area}.zip").status_code == 200
    r = c.get(f"/tasks/{TASK}/data/lexicon.zip")
    assert _names(r.data) == [f"{TASK}-lexicon/words.tsv"]
    # generated kit until the task carries its own
    assert f"/tasks/{TASK}/starting-kit.zip" in page and "Starting kit:" in page
    kit = own.root / "public" / "starting_kit"
    kit.mkdir()
    (kit / "README.md").write_text("# Our own kit\n\nRun <script>x()</script> `make`.\n")
    (kit / "run.sh").write_text("echo hi\n")
    page = c.get(f"/tasks/{TASK}").get_data(as_text=True)
    assert "Our own kit" in page and "<script>x()" not in page
    assert f"/tasks/{TASK}/data/starting_kit.zip" in page
    r = c.get(f"/tasks/{TASK}/data/starting_kit.zip")
    assert sorted(_names(r.data)) == [
        f"{TASK}-starting_kit/README.md",
        f"{TASK}-starting_kit/run.sh",
    ]


@pytest.mark.parametrize("task_id", ["tric-binary", "str", "loci-similes", "swissgov-rsd"])
def test_the_generated_starting_kit_follows_the_spec(app, task_id):
    from tasks import get_task

    t = get_task(task_id)
    r = app.test_client().get(f"/tasks/{task_id}/starting-kit.zip")
    assert r.status_code == 200
    with zipfile.ZipFile(io.BytesIO(r.data)) as z:
        files = {n.split("/", 1)[1]: z.read(n).decode() for n in z.namelist()}
    assert set(files) == {"README.md", "format.json", f"example-predictions.{t.format.native}"}
    assert files[f"example-predictions.{t.format.native}"] == t.format.example
    readme = files["README.md"]
    assert f"palimpsest validate {task_id}" in readme
    assert f"palimpsest baselines run --task {task_id} --system lexical" in readme
    assert ("palimpsest score" in readme) == ("dev" in t.splits)
    assert [f["name"] for f in json.loads(files["format.json"])["fields"]] == [
        f.name for f in t.format.fields
    ]


def test_a_downloaded_directory_scores_dev_offline(app, home, tmp_path):
    """`score --split dev --home <downloaded>`: the dev gold published beside the inputs."""
    from cli.main import main
    from scorer import score_file

    ann = make_user(app, "ann@x.org", team="Readers")
    r = app.test_client().get(
        f"/api/v1/tasks/{TASK}/download",
        headers={"Authorization": f"Bearer {make_token(app, ann)}"},
    )
    dest = tmp_path / "dl" / "tasks" / TASK
    with zipfile.ZipFile(io.BytesIO(r.data)) as z:
        z.extractall(dest)
    assert not (dest / "gold").exists() and (dest / "public" / "dev" / "gold.jsonl").is_file()
    rows = [json.loads(x) for x in (dest / "public" / "dev" / "gold.jsonl").open()]
    pred = tmp_path / "pred.jsonl"
    pred.write_text(
        "".join(
            json.dumps(
                {"instanceID": x["instanceID"], "label": 1 - x["label"] if i % 3 else x["label"]}
            )
            + "\n"
            for i, x in enumerate(rows)
        )
    )
    offline = score_file(TASK, pred, "dev", tmp_path / "dl")
    assert offline["metrics"] == score_file(TASK, pred, "dev", home)["metrics"]
    out = CliRunner().invoke(
        main, ["score", TASK, str(pred), "--split", "dev", "--home", str(tmp_path / "dl"), "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["metrics"] == offline["metrics"]
