"""A bundle's starting kit may carry code (a baseline script, a notebook): the server never runs
it and serves it as a file, within the bounds every bundle file has; Python anywhere else in a
bundle is still refused, in a folder and in a zip."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from webkit import Browser, engine_of, make_token, make_user

from tasks.bundle import BundleInvalid, read_bundle, write_bundle_zip
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK = "sts-latin-2027", "sts-latin"
BASELINE = "import json\nprint(json.dumps({'pair_id': 'x', 'score': 0.5}))\n"
SYSTEM_YAML = "command: python baseline.py\n"
NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture
def web_home(tmp_path, home) -> Path:
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


def _with_kit(tmp_path: Path, stray: bool = False) -> Path:
    root = tmp_path / "kitted"
    shutil.copytree(EXAMPLE, root)
    (root / "kit").mkdir()
    (root / "kit" / "README.md").write_text("# Kit\n\nRun `python baseline.py`.\n")
    (root / "kit" / "baseline.py").write_text(BASELINE)
    (root / "kit" / "explore.ipynb").write_text(NOTEBOOK)
    # a folder of its own, and a second file of one base name in it
    (root / "kit" / "system").mkdir()
    (root / "kit" / "system" / "system.yaml").write_text(SYSTEM_YAML)
    (root / "kit" / "system" / "README.md").write_text("# Nested readme zq\n")
    if stray:
        (root / "kit" / "hook.py").write_text("print('not in the kit list')\n")
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    spec["tasks"][0]["public_files"] = {
        "starting_kit": [
            "kit/README.md",
            "kit/baseline.py",
            "kit/explore.ipynb",
            "kit/system/system.yaml",
            "kit/system/README.md",
        ]
    }
    (root / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def _zip(root: Path, out: Path) -> Path:
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    write_bundle_zip(spec, root, out)
    return out


def test_a_kit_with_code_reads_as_a_folder_and_as_a_zip(tmp_path):
    root = _with_kit(tmp_path)
    b = read_bundle(root)
    assert b.spec.tasks[0].public_files["starting_kit"][1] == "kit/baseline.py"
    z = read_bundle(_zip(root, tmp_path / "k.zip"), work_dir=tmp_path / "w")
    assert z.spec == b.spec


def test_python_outside_the_kit_is_still_refused(tmp_path):
    root = _with_kit(tmp_path, stray=True)
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    assert "kit/hook.py: a bundle carries no Python outside its starting kit" in str(e.value)
    out = tmp_path / "stray.zip"
    with zipfile.ZipFile(_zip(_with_kit(tmp_path / "z"), out), "a") as zf:
        zf.writestr("kit/hook.py", "print()\n")
    work = tmp_path / "w"
    work.mkdir()
    with pytest.raises(BundleInvalid) as e:
        read_bundle(out, work_dir=work)
    assert "kit/hook.py: a bundle carries no Python outside its starting kit" in str(e.value)
    assert not list(work.rglob("*.py"))  # refused before anything was extracted
    # a kit file named in the list but outside the manifest's bounds of a bundle file
    root = _with_kit(tmp_path / "big")
    (root / "kit" / "baseline.py").write_bytes(b"\xff\xfe not utf-8\n")
    with pytest.raises(BundleInvalid) as e:
        read_bundle(root)
    assert "kit/baseline.py" in str(e.value) and "not UTF-8" in str(e.value)


def test_the_competition_is_created_and_its_kit_downloads_with_the_code(app, tmp_path):
    admin = make_user(app, "admin@x.org", organizer=True)
    token = make_token(app, admin)
    c = app.test_client()
    data = _zip(_with_kit(tmp_path), tmp_path / "k.zip").read_bytes()
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(data), "k.zip")},
        headers={"Authorization": f"Bearer {token}"},
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    assert engine_of(app) is not None
    r = c.get(
        f"/api/v1/tasks/{TASK}/download?split=starting_kit",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    z = zipfile.ZipFile(io.BytesIO(r.get_data()))
    names = set(z.namelist())
    assert "public/starting_kit/baseline.py" in names, names
    assert z.read("public/starting_kit/baseline.py").decode() == BASELINE
    assert "public/starting_kit/explore.ipynb" in names
    # the kit's folders kept: in the API's download, the web's zip, the task page and the export
    assert z.read("public/starting_kit/system/system.yaml").decode() == SYSTEM_YAML
    assert z.read("public/starting_kit/system/README.md") == b"# Nested readme zq\n"
    assert z.read("public/starting_kit/README.md").startswith(b"# Kit")
    web = Browser(app.test_client())  # (the competition is a draft: its people see it)
    web.login("admin@x.org")
    r = web.get(f"/tasks/{TASK}/data/starting_kit.zip")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    zipped = zipfile.ZipFile(io.BytesIO(r.get_data()))
    assert zipped.read(f"{TASK}-starting_kit/system/system.yaml").decode() == SYSTEM_YAML
    page = web.get(f"/tasks/{TASK}").get_data(as_text=True)
    assert "python baseline.py" in page and "Nested readme zq" not in page  # the kit's own
    from tasks.bundle import export_task

    out = tmp_path / "exported"
    spec = export_task(
        TASK, Path(app.extensions["palimpsest.settings"].home), out, include_gold=False
    )
    kit = spec["public_files"]["starting_kit"]
    assert f"{TASK}/starting_kit/system/system.yaml" in kit, kit
    assert (out / TASK / "starting_kit" / "system" / "system.yaml").read_text() == SYSTEM_YAML


def test_the_loci_importers_help_names_the_releases_three_files():
    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(main, ["tasks", "import", "--help"])
    text = " ".join(r.output.split())
    for name in ("hieronymus_samples.csv", "vergil_samples.csv", "ground_truth.csv"):
        assert name in text, text
    docs = " ".join((REPO / "docs" / "tasks.md").read_text(encoding="utf-8").split())
    assert (
        "--query hieronymus_samples.csv --source vergil_samples.csv --gold ground_truth.csv" in docs
    )
