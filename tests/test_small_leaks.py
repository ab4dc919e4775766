"""Smaller leaks and bindings: the download's task.json says nothing of a hidden split's gold;
accepting the terms is bound to the version read (web form, API, CLI) and only JSON true accepts;
a clone keeps judged.csv and the gold history; a mailed invitation's link is not handed back
(tests/test_roles.py)."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from apikit import _h, _setup, _terms
from sqlmodel import Session, select
from webkit import Browser

from server.domain import people
from server.models import Registration, User


def test_the_download_says_nothing_of_a_hidden_splits_gold(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    manifest = json.loads((home / "tasks" / "loci-similes" / "task.json").read_text())
    assert manifest["counts"]["test"]["links"] > 0  # what the server knows
    r = c.get("/api/v1/tasks/loci-similes/download", headers=_h(tokens["alpha"]))
    assert r.status_code == 200, r.json
    shipped = json.loads(zipfile.ZipFile(io.BytesIO(r.data)).read("task.json"))
    assert "test" not in (shipped.get("counts") or {})
    assert "links" not in json.dumps(shipped.get("counts") or {})
    assert "gold_sha256" not in shipped


def test_accepting_the_terms_is_bound_to_the_version_read(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    slug = _setup(app, data_public=False)
    _terms(c, tokens["org"], slug, "Do not share the gold.")
    url = f"/api/v1/competitions/{slug}/registration"
    # only JSON true accepts
    for v in ("yes", "true", 1, "1", "on"):
        r = c.post(url, json={"accept_terms": v}, headers=_h(tokens["alpha"]))
        assert r.status_code == 422 and "accept_terms" in r.json["error"]["message"], (v, r.json)
    # the web page shows version 1; the terms change before the form is sent
    web = Browser(app.test_client())
    web.login("beta@example.org", "correct horse")
    page = web.get(f"/competitions/{slug}").get_data(as_text=True)
    shown = re.search(r'name="terms_version" value="(\d+)"', page)
    assert shown and shown.group(1) == "1"
    _terms(c, tokens["org"], slug, "Do not share the gold, nor the test inputs.")
    r = web.post(
        f"/competitions/{slug}/register", {"accept_terms": "1", "terms_version": shown.group(1)}
    )
    assert r.status_code == 302
    with Session(app.extensions["palimpsest.engine"]) as s:
        beta = s.exec(select(User).where(User.email == "beta@example.org")).one()
        c_id = people.competition_of_task(s, "tric-binary").id
        assert people.registration(s, beta, c_id) is None  # version 2 never shown: nothing
    page = web.get(f"/competitions/{slug}").get_data(as_text=True)
    assert "changed since you read them" in page
    # the API: the version read, or 409
    r = c.post(url, json={"accept_terms": True, "terms_version": 1}, headers=_h(tokens["beta"]))
    assert r.status_code == 409 and r.json["error"]["code"] == "terms_changed"
    r = c.post(url, json={"accept_terms": True, "terms_version": 2}, headers=_h(tokens["beta"]))
    assert r.status_code == 200 and r.json["terms_version"] == 2, r.json
    with Session(app.extensions["palimpsest.engine"]) as s:
        reg = s.exec(select(Registration).where(Registration.user_id == beta.id)).one()
        assert reg.terms_version == 2


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own linking the session's imported tasks, loci-similes copied (its
    gold gets a new version here)."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    for t in (home / "tasks").iterdir():
        if t.name == "loci-similes":
            shutil.copytree(t, d / "tasks" / t.name, symlinks=False)
        else:
            (d / "tasks" / t.name).symlink_to(t, target_is_directory=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared("loci-similes-clone-2028")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}  # fmt: skip


def test_a_clone_keeps_judged_pairs_and_the_gold_history(app, tmp_path):
    from webkit import engine_of, make_user

    from server.actions import bundles as bundle_actions
    from server.actions import competitions as comp_actions
    from server.domain import goldversions
    from server.models import GoldVersion
    from tasks.store import TaskStore

    admin = make_user(app, "admin@x.org", organizer=True)
    settings = app.extensions["palimpsest.settings"]
    home = Path(settings.home)
    store = TaskStore("loci-similes", home)
    queries = [ln.split(",")[0] for ln in store.public("test", "queries.csv").read_text(
        encoding="utf-8").splitlines()[1:3]]  # fmt: skip
    sources = [ln.split(",")[0] for ln in store.public("test", "sources.csv").read_text(
        encoding="utf-8").splitlines()[1:3]]  # fmt: skip
    gold = set(goldversions.link_rows(store.gold("test", "links.csv")))
    pairs = [(q, s_) for q in queries for s_ in sources if (q, s_) not in gold]
    with Session(engine_of(app)) as s:
        files, added, neg = goldversions.links_gold(store, "test", pairs[:1], pairs[1:3])
        goldversions.write_version(
            s, store, "test", files, reason="by hand", campaign_id=None, added=added,
            judged_negative=neg, actor_id=None,
        )  # fmt: skip
        s.commit()
        assert (store.root / "gold" / "test" / "judged.csv").is_file()
        comp_actions.create_competition(
            s=s, actor=admin, via="test", competition="loci", title="Loci", tasks=["loci-similes"]
        )
        cloned = bundle_actions.clone_competition(
            s=s, actor=admin, competition="loci", new_id="clone-2028", via="test", settings=settings
        )
        new = TaskStore(cloned.tasks[0], home)
        assert _tree(store.root / "gold") == _tree(new.root / "gold")  # judged.csv with it
        assert _tree(store.root / "gold-history") == _tree(new.root / "gold-history")
        assert new.gold_checksum("test") == store.gold_checksum("test")
        q = select(GoldVersion).where(GoldVersion.task_id == new.task_id)
        versions = s.exec(q.order_by(GoldVersion.version)).all()
        assert [v.version for v in versions] == [1, 2]
        assert versions[-1].sha256 == new.gold_checksum("test")
        assert goldversions.current(s, new.task_id, "test").version == 2


def test_a_pair_judged_again_a_link_leaves_judged_csv(tmp_path):
    """Earlier campaigns' items are pooled again: a pair rejected once and accepted now moves
    from judged.csv to links.csv; a gold link rejected stays gold."""
    from server.domain import goldversions
    from tasks.store import TaskStore

    store = TaskStore("t", tmp_path)
    gold = store.root / "gold" / "test"
    gold.mkdir(parents=True)
    (gold / "links.csv").write_text("query_id,source_id\nq1,s1\n", encoding="utf-8")
    (gold / "judged.csv").write_text("query_id,source_id\nq2,s2\nq3,s3\n", encoding="utf-8")
    files, added, neg = goldversions.links_gold(
        store, "test", accepted=[("q2", "s2")], rejected=[("q1", "s1"), ("q4", "s4")]
    )
    assert files["links.csv"] == "query_id,source_id\nq1,s1\nq2,s2\n"
    assert files["judged.csv"] == "query_id,source_id\nq3,s3\nq4,s4\n"
    assert (added, neg) == (1, 1)
