"""Hidden gold is hidden by construction (server.domain.exposure): no public download of any
imported task
labels an instance whose gold is hidden (checked over every split of every task, TRoTR included,
on the official releases and the project's synthetic ones), an import or a phase that would break
the rule is refused naming the splits and the count, and a phase cannot raise the public fraction
of its split's one partition."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from backbone import phase
from conftest import TROTR, _make_backend, need, own_tasks
from webkit import make_token, make_user

from server import models
from server.domain import lifecycle, partitions
from server.domain.exposure import ExposureRefused, check_home, check_tree
from server.exceptions import LifecycleRefused
from server.models import Phase
from tasks import all_tasks, get_task
from tasks.importers import import_task
from tasks.store import TaskStore
from tasks.trotr import CROSS_VALIDATED

SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])


def _table(name: str, data: bytes) -> list[dict]:
    text = data.decode("utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    if name.endswith((".csv", ".tsv")):
        return list(
            csv.DictReader(io.StringIO(text), delimiter="\t" if name[-3:] == "tsv" else ",")
        )
    return []


def _key(task, r: dict) -> tuple[str, ...] | None:
    """The fields that name a row's instance: the task's key, or a pair's `id` where a family's
    gold and inputs name their unit by it (spans: one gold row per document pair)."""
    for key in (tuple(task.format.key), ("id",)):
        if all(k in r for k in key):
            return key
    return None


def _hidden(task, home) -> dict[str, dict[str, dict]]:
    """{hidden split: {instance id: its gold row}}, read straight from the gold files."""
    st = TaskStore(task.id, home)
    out = {}
    for split in task.hidden_splits:
        d = st.root / "gold" / split
        rows = {}
        for p in sorted(d.glob("*")) if d.is_dir() else []:
            for r in _table(p.name, p.read_bytes()):
                key = _key(task, r)
                assert key is not None, (task.id, p.name, sorted(r))
                rows["/".join(str(r[k]) for k in key)] = r
        if rows:
            out[split] = rows
    return out


def _labels_in(task, hidden: dict[str, dict[str, dict]], name: str, data: bytes) -> int:
    """How many rows of a downloaded file name a hidden instance and carry a value of its gold."""
    n = 0
    for r in _table(name, data):
        key = _key(task, r)
        if key is None:
            continue
        i = "/".join(str(r[k]) for k in key)
        for rows in hidden.values():
            g = rows.get(i)
            if g is None:
                continue
            values = set(g) - {*key, task.group_field, "subset"}
            if not values or values & set(r):
                n += 1
    return n


def _downloads(client, token, task) -> dict[str, bytes]:
    """Every public download of a task: the web's zip of each split, the API's zip of each split
    and of everything; {archive/member: bytes}."""
    out = {}
    urls = [f"/tasks/{task.id}/data/{s}.zip" for s in task.splits]
    urls += [f"/api/v1/tasks/{task.id}/download?split={s}" for s in (*task.splits, "train")]
    urls.append(f"/api/v1/tasks/{task.id}/download")
    for url in urls:
        r = client.get(url, headers={"Authorization": f"Bearer {token}"})
        if r.status_code == 404:
            continue
        assert r.status_code == 200, (url, r.status_code, r.get_data(as_text=True)[:300])
        with zipfile.ZipFile(io.BytesIO(r.data)) as z:
            for m in z.namelist():
                out[f"{url}::{m}"] = z.read(m)
    return out


def test_no_public_download_labels_hidden_gold(app, home, demo_home):
    """Over every split of every task imported from the official releases (TRoTR held-out), and
    the synthetic ones: the rule finds nothing, and, read independently of it, no file of any
    download names a hidden instance with a value of its gold."""
    need(TROTR)
    assert check_home(home) == [] and check_home(demo_home) == []
    user = make_user(app, "reader@x.org", team="readers")
    token = make_token(app, user)
    c = app.test_client()
    checked = 0
    for task in all_tasks():
        hidden = _hidden(task, home)
        files = _downloads(c, token, task)
        assert files, task.id
        for name, data in files.items():
            assert _labels_in(task, hidden, name, data) == 0, (task.id, name)
            checked += 1
        if task.id in ("tric-binary", "tric-ranking"):
            assert len(hidden["test"]) == 411  # fold 1's test, whole
    assert checked > 20


def test_trotr_protocols_never_share_a_site(tmp_path):
    """Held-out: dev, train and a hidden test, no cv split; cross-validated: every fold public and
    no hidden split. Either way the rule holds; the old layout (cv beside test) is refused."""
    need(TROTR)
    held, cv = tmp_path / "held", tmp_path / "cv"
    for t in ("tric-binary", "tric-ranking"):
        m = import_task(t, held, source=TROTR, fold=1)
        assert m["splits"] == ["dev", "test"] and m["protocol"] == "held-out"
        assert "cv" in m["cross_validation"]["note"]
        m = import_task(t, cv, source=TROTR, fold=1, protocol=CROSS_VALIDATED)
        assert m["splits"] == ["dev", "cv"] and not (cv / "tasks" / t / "gold" / "test").exists()
    assert check_home(held) == [] and check_home(cv) == []
    # what the import used to publish: the folds' labels beside the hidden test of fold 1
    staged = tmp_path / "staged"
    shutil.copytree(held / "tasks" / "tric-binary", staged)
    shutil.copytree(cv / "tasks" / "tric-binary" / "public" / "cv", staged / "public" / "cv")
    with pytest.raises(ExposureRefused) as e:
        check_tree("tric-binary", staged)
    assert "the public cv files label 411 instance(s) of the hidden test split" in str(e.value)
    shutil.copytree(cv / "tasks" / "tric-binary" / "gold" / "cv", staged / "gold" / "cv")
    with pytest.raises(ExposureRefused, match="the cv split scores 411 instance"):
        check_tree("tric-binary", staged)


def test_two_tasks_naming_the_same_instances_are_checked_together(tmp_path):
    """tric-binary and tric-ranking label the same TRoTR pairs: one's public dev and train may
    not label the other's hidden test (another fold, or the other protocol), and the check runs
    whichever is imported second."""
    need(TROTR)
    home = tmp_path / "h"
    import_task("tric-binary", home, source=TROTR, fold=1)
    with pytest.raises(
        ExposureRefused, match="label 328 instance\\(s\\) of the hidden test split of tric-binary"
    ):
        import_task("tric-ranking", home, source=TROTR, fold=2)
    with pytest.raises(ExposureRefused, match="public cv files label 411 instance"):
        import_task("tric-ranking", home, source=TROTR, fold=1, protocol=CROSS_VALIDATED)
    assert not TaskStore("tric-ranking", home).exists()
    import_task("tric-ranking", home, source=TROTR, fold=1)  # the same fold, the same protocol
    assert check_home(home) == []


def test_a_violating_import_changes_nothing(tmp_path, monkeypatch):
    """An import whose files would label hidden instances is refused before it replaces the old
    task: the site keeps serving what it served."""
    need(TROTR)
    from tasks import bundle

    home = tmp_path / "h"
    import_task("tric-binary", home, source=TROTR, fold=1)
    before = TaskStore("tric-binary", home).manifest()
    # an importer whose bundle also publishes the test gold
    monkeypatch.setattr(bundle, "published", lambda split: True)
    with pytest.raises(ExposureRefused, match=r"public test files label 411 instance\(s\) of the"):
        import_task("tric-binary", home, source=TROTR, fold=1)
    assert TaskStore("tric-binary", home).manifest() == before
    assert not (home / "tasks" / "tric-binary" / "public" / "test" / "gold.jsonl").exists()
    assert not [p for p in (home / "tasks").iterdir() if p.name.startswith(".")]


def test_a_download_of_an_old_violating_site_is_refused(app, home):
    """Files a site holds from before the rule (cv labels beside the hidden test) are not served."""
    need(TROTR)
    import os

    site = Path(os.environ["PALIMPSEST_HOME"])
    own_tasks(site, ["tric-binary"])
    cv = site / "cv-site"
    import_task("tric-binary", cv, source=TROTR, fold=1, protocol=CROSS_VALIDATED)
    shutil.copytree(
        cv / "tasks" / "tric-binary" / "public" / "cv",
        site / "tasks" / "tric-binary" / "public" / "cv",
    )
    user = make_user(app, "late@x.org", team="late")
    token = make_token(app, user)
    c = app.test_client()
    r = c.get("/tasks/tric-binary/data/cv.zip")
    assert r.status_code == 409 and b"label 411 instance(s) of the hidden test split" in r.data
    r = c.get("/api/v1/tasks/tric-binary/download", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "exposes_hidden_gold"
    assert c.get("/tasks/tric-binary/data/dev.zip").status_code == 200  # the rest is served


@pytest.fixture(params=["embedded", SERVICES])
def b(request, tmp_path, demo_home, monkeypatch):
    return _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)


def test_a_second_phase_cannot_raise_the_public_fraction(b):
    """The allgold attack: a second phase on a hidden split at a public fraction of 1 (or any other
    than the split's) is refused, on creation and on edit; the default is the split's."""
    t = get_task("loci-similes")
    frac = phase(b, t.id, "test").public_fraction
    assert frac < 1
    with b.session() as s:
        for bad in (1.0, min(1.0, frac + 0.25), frac / 2):
            with pytest.raises(LifecycleRefused, match="one partition") as e:
                lifecycle.create_phase(
                    s, task=t, name="allgold", split="test", actor=None, public_fraction=bad
                )
            assert e.value.code == "partition_fixed" and "loci-similes/test" in e.value.message
        p = lifecycle.create_phase(s, task=t, name="post", split="test", actor=None)
        assert p.public_fraction == frac
        with pytest.raises(LifecycleRefused, match="one partition"):
            lifecycle.edit_phase(s, s.get(Phase, p.id), {"public_fraction": 1.0}, actor=None)
        assert partitions.split_fraction(s, t.id, "test") == frac
    # through the API too
    from server import create_app

    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    org = make_user(app, "org@x.org", organizer=True)
    token = make_token(app, org)
    r = app.test_client().post(
        f"/api/v1/tasks/{t.id}/phases",
        json={"name": "allgold", "split": "test", "public_fraction": 1.0},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 409 and "one partition" in r.get_data(as_text=True)


def test_a_phase_scoring_hidden_instances_in_public_is_refused(tmp_path):
    """A phase on a split without a private part whose gold holds instances of the hidden split."""
    need(TROTR)
    home, cv = tmp_path / "h", tmp_path / "cv"
    import_task("tric-binary", home, source=TROTR, fold=1)
    import_task("tric-binary", cv, source=TROTR, fold=1, protocol=CROSS_VALIDATED)
    # a site holding an old cv gold beside its hidden test (inputs only: the download is allowed)
    shutil.copytree(
        cv / "tasks" / "tric-binary" / "gold" / "cv", home / "tasks" / "tric-binary" / "gold" / "cv"
    )
    from sqlmodel import Session, create_engine

    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    models.schema().create_all(engine)
    with Session(engine) as s, pytest.raises(LifecycleRefused) as e:
        lifecycle.create_phase(
            s, task=get_task("tric-binary"), name="cv", split="cv", actor=None, home=home
        )
    assert e.value.code == "exposes_hidden_gold"
    assert "would score in public 411 instance(s) of the hidden test split" in e.value.message
