"""Assessment campaigns on a pair task, the example bundle's STS-Latin: the decided labels
(numbers) become the instances' gold values in a new gold version; a tie waits for an
organizer; every run is rescored under the new gold; the exported gold re-installs through the
bundle installer as the same gold (same checksum)."""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session, select
from webkit import engine_of, make_token, make_user, update_phase

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK, PHASE, SPLIT = "sts-latin-2027", "sts-latin", "evaluation", "test"
LABELS = ["0", "0.5", "1"]
ASSESSORS = ("p1@x.org", "p2@x.org", "p3@x.org")


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own (the bundle installs its task here, never among the
    session's), whose tasks/ links each of the session's imported tasks."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    for t in (home / "tasks").iterdir():
        (d / "tasks" / t.name).symlink_to(t, target_is_directory=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_task():
    """The example task forgotten before and after (a test of another module on this worker may
    have declared it in this process: the registry is the process's)."""
    from tasks import unregister_declared

    unregister_declared(TASK)
    yield
    unregister_declared(TASK)


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_a_pair_task_campaign_closes_into_new_gold_values(app, tmp_path):
    from server.actions import competitions as comp
    from server.domain import people
    from server.jobs.scoring import score_submission
    from server.models import Phase, Score, Submission
    from tasks import unregister_declared
    from tasks.bundle import install_tasks, read_bundle, write_bundle_zip
    from tasks.store import TaskStore, tree_sha256

    c = app.test_client()
    home = Path(app.extensions["palimpsest.settings"].home)
    admin = make_user(app, "admin@x.org", organizer=True)
    tokens = {"admin": make_token(app, admin)}
    spec = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
    zipped = tmp_path / "sts.zip"
    write_bundle_zip(spec, EXAMPLE, zipped)
    r = c.post(
        "/api/v1/competitions/bundle",
        data={"bundle": (io.BytesIO(zipped.read_bytes()), "sts.zip")},
        headers=_h(tokens["admin"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    with Session(engine_of(app)) as s:
        competition = comp.find(s, SLUG)
        for email in ASSESSORS:
            u = make_user(app, email)
            people.grant(s, competition.id, s.merge(u), people.ASSESSOR)
            s.commit()
            tokens[email] = make_token(app, u)
        phase = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).one()
    update_phase(app, phase.id, opens_at=None, closes_at=None)  # open now
    store = TaskStore(TASK, home)
    gold_before = _jsonl(store.gold(SPLIT, "gold.jsonl"))
    sha_before = store.gold_checksum(SPLIT)

    # three baseline runs, scored by the worker's job
    ids = []
    inputs = _jsonl(store.public(SPLIT, "inputs.jsonl"))
    for k, method in enumerate(("overlap", "length", "random")):
        rng = random.Random(k)
        body = "".join(
            json.dumps({"pair_id": row["pair_id"], "score": rng.random()}) + "\n" for row in inputs
        )
        r = c.post(
            f"/api/v1/tasks/{TASK}/submissions",
            headers=_h(tokens["admin"]),
            data={
                "file": (io.BytesIO(body.encode()), "run.jsonl"),
                "phase": PHASE,
                "baseline": "true",
                "method_name": method,
            },
            content_type="multipart/form-data",
        )
        assert r.status_code == 201, r.json
        ids.append(r.json["id"])
        assert score_submission(ids[-1])["status"] == "scored"

    # a campaign of two instances per genre, numeric labels
    r = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns",
        headers=_h(tokens["admin"]),
        json={"depth": 2, "assessors": list(ASSESSORS), "labels": LABELS, "seed": 3},
    )
    assert r.status_code == 201, r.json
    cid, items = r.json["id"], r.json["items"]
    assert sorted(i["factors"]["stratum"] for i in items) == ["prose", "prose", "verse", "verse"]
    # item 0 unanimous, item 1 a majority, item 2 a three-way tie, item 3 a majority
    plan = [("1", "1", "1"), ("0.5", "0.5", "0"), ("0", "0.5", "1"), ("0", "1", "0")]
    for it, labels in zip(items, plan, strict=True):
        for email, label in zip(ASSESSORS, labels, strict=True):
            r = c.put(
                f"/api/v1/campaigns/{cid}/items/{it['id']}/judgment",
                headers=_h(tokens[email]),
                json={"label": label},
            )
            assert r.status_code == 200, r.json
    d = c.get(f"/api/v1/campaigns/{cid}/disagreements", headers=_h(tokens["admin"])).json
    assert [x["item"] for x in d["items"]] == [i["id"] for i in items[1:]]
    assert d["items"][1]["counts"] == {"0": 1, "0.5": 1, "1": 1}
    assert d["items"][1]["majority"] is None
    a = c.post(
        f"/api/v1/campaigns/{cid}/adjudicate", headers=_h(tokens["admin"]), json={"majority": True}
    ).json
    assert {x["item"]: x["label"] for x in a["decided"]} == {
        items[1]["id"]: "0.5",
        items[3]["id"]: "0",
    }
    assert a["ties"] == [items[2]["id"]] and a["undecided"] == 1
    r = c.post(f"/api/v1/campaigns/{cid}/close", headers=_h(tokens["admin"]))
    assert (
        r.status_code == 409
        and f"{items[2]['id']} ({items[2]['key']})" in r.json["error"]["message"]
    )
    r = c.post(
        f"/api/v1/campaigns/{cid}/adjudicate",
        headers=_h(tokens["admin"]),
        json={"item": items[2]["id"], "label": "0.5", "reason": "the middle of three readings"},
    )
    assert r.status_code == 200, r.json
    closed = c.post(f"/api/v1/campaigns/{cid}/close", headers=_h(tokens["admin"]))
    assert closed.status_code == 200, closed.json
    closed = closed.json
    decided = {items[0]["key"]: 1.0, items[1]["key"]: 0.5, items[2]["key"]: 0.5}
    decided[items[3]["key"]] = 0.0
    gold_after = _jsonl(store.gold(SPLIT, "gold.jsonl"))
    expected = [{**row, "score": decided.get(row["pair_id"], row["score"])} for row in gold_before]
    assert gold_after == expected
    changed = sum(
        1
        for row in gold_before
        if row["pair_id"] in decided and row["score"] != decided[row["pair_id"]]
    )
    assert changed > 0
    g = closed["gold"]
    assert (g["version"], g["parent_sha256"], g["added"]) == (2, sha_before, changed)
    assert g["sha256"] == store.gold_checksum(SPLIT) != sha_before
    assert closed["rescoring"] == sorted(ids) and closed["published"] == []

    # the worker rescores every run under the new gold
    for sid in closed["rescoring"]:
        assert score_submission(sid)["status"] == "scored"
    with Session(engine_of(app)) as s:
        for sid in ids:
            sub = s.get(Submission, sid)
            shas = {
                x.gold_sha256
                for x in s.exec(
                    select(Score).where(
                        Score.submission_id == sid, Score.attempt == sub.score_attempt
                    )
                )
            }
            assert not sub.stale and shas == {g["sha256"]}

    # the export: pseudonymised judgments, decisions, the gold; no qrels for a pair task
    files = c.get(f"/api/v1/campaigns/{cid}/export", headers=_h(tokens["admin"])).json["files"]
    assert "qrels.txt" not in files and "@" not in files["judgments.csv"]
    rows = list(csv.reader(io.StringIO(files["judgments.csv"])))[1:]
    assert len(rows) == 12 and {r[1] for r in rows} == {"A1", "A2", "A3"}
    decisions = {
        r[0]: (r[1], r[2]) for r in list(csv.reader(io.StringIO(files["decisions.csv"])))[1:]
    }
    assert decisions[items[2]["key"]] == ("0.5", "organizer")
    assert decisions[items[0]["key"]] == ("1", "unanimous")
    assert files["gold/gold.jsonl"].encode() == store.gold(SPLIT, "gold.jsonl").read_bytes()
    # ... and re-installs through the bundle installer as the same gold
    copy = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, copy)
    (copy / "sts-latin" / "test" / "test-gold.jsonl").write_text(
        files["gold/gold.jsonl"], encoding="utf-8"
    )
    unregister_declared(TASK)
    other = tmp_path / "other-home"
    assert install_tasks(read_bundle(copy, home=other), other) == [TASK]
    again = TaskStore(TASK, other)
    assert (
        again.gold(SPLIT, "gold.jsonl").read_bytes() == store.gold(SPLIT, "gold.jsonl").read_bytes()
    )
    assert again.gold_checksum(SPLIT) == tree_sha256(store.root / "gold" / SPLIT) == g["sha256"]
