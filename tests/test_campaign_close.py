"""Assessment campaigns, second slice: a campaign over three runs of the Loci Similes sample is
judged by three assessors, adjudicated (the majority rule in one step, one item overruled with a
reason), closed into a new gold version (the accepted links added, the rejected ones recorded in
`judged.csv`), every run is rescored under it by the worker while the published ranking stays byte
for byte until an organizer publishes a new version, and the export holds the same gold."""

from __future__ import annotations

import csv
import json
from urllib.parse import unquote

import numpy as np
import pytest
from apikit import _h, _run_job
from campaignkit import (  # noqa: F401 — the fixtures
    ASSESSORS,
    PHASE,
    TASK,
    _cli,
    _csv,
    _naive_pool,
    _open_and_judge,
    _vote,
    world,
)
from sqlmodel import Session, select


def _rows(path) -> list[tuple[str, ...]]:
    with open(path, encoding="utf-8", newline="") as f:
        return [tuple(r) for r in list(csv.reader(f))[1:]]


def _naive_map(run, gold: set, judged: set | None, k: int) -> float:
    """MAP@k by hand over the queries with a gold link: each query's predictions ranked by score
    (as float32, trec_eval's precision) descending, ties by source id descending; with `judged`,
    the condensed list (predictions neither gold nor judged dropped first)."""
    n_gold: dict[str, int] = {}
    for q, _s in gold:
        n_gold[q] = n_gold.get(q, 0) + 1
    aps = []
    for q, n in n_gold.items():
        cands = [
            (float(np.float32(x)), s.encode())
            for qq, s, x in run
            if qq == q and (judged is None or (q, s) in gold or (q, s) in judged)
        ]
        cands.sort(reverse=True)
        hits, ap = 0, 0.0
        for rank, (_x, s) in enumerate(cands[:k], start=1):
            if (q, s.decode()) in gold:
                hits += 1
                ap += hits / rank
        aps.append(ap / n)
    return sum(aps) / len(aps)


def test_adjudicate_close_rescore_publish_and_export(world, tmp_path, capsys):  # noqa: F811
    from server.models import GoldVersion, Score, Submission
    from tasks.store import TaskStore, tree_sha256

    url, tokens, c, app, home = (world[k] for k in ("url", "tokens", "c", "app", "home"))
    engine = app.extensions["palimpsest.engine"]
    store = TaskStore(TASK, home)
    gold_before = _rows(store.gold(PHASE, "links.csv"))
    sha_before = store.gold_checksum(PHASE)
    opened, item_of = _open_and_judge(world)
    cid = opened["id"]
    votes = {k: [_vote(a, k) for a in ASSESSORS] for k in item_of}
    disagreeing = {k for k, v in votes.items() if len(set(v)) > 1}
    assert disagreeing and len(disagreeing) < len(votes)  # both kinds of item in the pool

    # the disagreements: exactly the non-unanimous items, each label counted
    d = json.loads(
        _cli(
            url, tokens["lorg"], "organizer", "campaign", "disagreements", str(cid), "--json"
        ).stdout
    )
    assert {i["key"] for i in d["items"]} == disagreeing
    for i in d["items"]:
        assert i["counts"] == {x: votes[i["key"]].count(x) for x in set(votes[i["key"]])}
        assert i["complete"] and i["decision"] is None
    assert d["counts"]["unanimous"] == len(votes) - len(disagreeing)
    assert d["counts"]["undecided"] == len(disagreeing)
    # an assessor is not told
    r = c.get(f"/api/v1/campaigns/{cid}/disagreements", headers=_h(tokens["a1"]))
    assert r.status_code in (403, 404)

    # closing is refused while an item has no decision, naming how many
    r = _cli(url, tokens["lorg"], "organizer", "campaign", "close", str(cid), "--json", ok=False)
    err = json.loads(r.stdout)["error"]
    assert r.exit_code == 1 and err["status"] == 409
    assert f"{len(disagreeing)} item(s) have no decision" in err["message"]

    # the phase's final ranking is published before the gold grows
    r = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/publish",
        headers=_h(tokens["lorg"]),
        json={"close": True},
    )
    assert r.status_code == 201, r.json
    published = c.get(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/rankings/1", headers=_h(tokens["lorg"])
    ).get_data()

    board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase={PHASE}", headers=_h(tokens["lorg"]))
    assert board.status_code == 200 and "gold" not in board.json  # the imported gold: unsaid
    # the majority rule in one step (three assessors, two labels: never a tie)
    a = json.loads(
        _cli(
            url,
            tokens["lorg"],
            "organizer",
            "campaign",
            "adjudicate",
            str(cid),
            "--majority",
            "--json",
        ).stdout  # fmt: skip
    )
    majority = {k: max(set(v), key=v.count) for k, v in votes.items()}
    assert {x["key"]: x["label"] for x in a["decided"]} == {k: majority[k] for k in disagreeing}
    assert {x["rule"] for x in a["decided"]} == {"majority"} and a["ties"] == []
    assert a["undecided"] == 0
    # one item overruled by an organizer: a reason is required
    overruled = sorted(k for k in disagreeing if majority[k] == "no reference")[0]
    r = _cli(url, tokens["lorg"], "organizer", "campaign", "adjudicate", str(cid), "--item",
             str(item_of[overruled]), "--label", "reference", "--json", ok=False)  # fmt: skip
    assert json.loads(r.stdout)["error"]["status"] == 422 and "reason" in r.stdout
    a = json.loads(
        _cli(
            url,
            tokens["lorg"],
            "organizer",
            "campaign",
            "adjudicate",
            str(cid),
            "--item",
            str(item_of[overruled]),
            "--label",
            "reference",
            "--reason",
            "a clear allusion",
            "--json",
        ).stdout  # fmt: skip
    )
    assert a["decided"][0]["rule"] == "organizer" and a["decided"][0]["label"] == "reference"
    # the majority rule again leaves the organizer's decision alone
    c.post(f"/api/v1/campaigns/{cid}/adjudicate", headers=_h(tokens["lorg"]),
           json={"majority": True})  # fmt: skip
    final = dict(majority)
    final[overruled] = "reference"
    # every decision is in the audit log
    audit = c.get("/api/v1/audit?action=campaign_decide", headers=_h(tokens["org"])).json
    logged = [e for e in audit["items"] if e["action"] == "campaign_decide"]
    assert len(logged) == len(disagreeing) + 1

    # close: a new gold version with the accepted links, the rejected ones in judged.csv
    closed = json.loads(
        _cli(url, tokens["lorg"], "organizer", "campaign", "close", str(cid), "--json").stdout
    )
    # the gold links in the pool were judged blind too: a gold link stays gold whatever its
    # decision, and only new links are added or recorded as judged
    old = {tuple(x[:2]) for x in gold_before}
    assert any(tuple(k.split("\t")) in old for k in final)
    accepted = sorted(
        tuple(k.split("\t"))
        for k, lab in final.items()
        if lab == "reference" and tuple(k.split("\t")) not in old
    )
    rejected = sorted(
        tuple(k.split("\t"))
        for k, lab in final.items()
        if lab != "reference" and tuple(k.split("\t")) not in old
    )
    assert _rows(store.gold(PHASE, "links.csv")) == gold_before + accepted
    assert _rows(store.gold(PHASE, "judged.csv")) == rejected
    assert not (store.root / "public" / PHASE / "judged.csv").exists()
    # the public download still passes the exposure rule and holds no judged pair
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=_h(tokens["alpha"]))
    assert r.status_code == 200 and b"judged" not in r.get_data()
    g = closed["gold"]
    assert g["version"] == 2 and g["parent_sha256"] == sha_before
    assert g["sha256"] == store.gold_checksum(PHASE) != sha_before
    assert g["reason"] == f"gold extended by campaign {cid}"
    assert (g["added"], g["judged_negative"]) == (len(accepted), len(rejected))
    assert closed["decisions"] == {
        "majority": len(disagreeing) - 1,
        "organizer": 1,
        "unanimous": len(votes) - len(disagreeing),
    }
    # the previous gold is kept, outside public/
    kept = store.root / "gold-history" / PHASE / "v1"
    assert _rows(kept / "links.csv") == gold_before and tree_sha256(kept) == sha_before
    with Session(engine) as s:
        versions = s.exec(select(GoldVersion).order_by(GoldVersion.version)).all()
        assert [(v.version, v.sha256) for v in versions] == [(1, sha_before), (2, g["sha256"])]
        phase_runs = sorted(sub.id for sub in s.exec(select(Submission)) if sub.status == "queued")
    assert closed["rescoring"] == sorted(world["ids"].values()) == phase_runs
    assert closed["published"] == [
        {
            "phase": PHASE,
            "version": 1,
            "command": f'palimpsest organizer publish {TASK} {PHASE} --reason "gold extended by '
            f'campaign {cid}"',
        }
    ]
    out = _cli(url, tokens["lorg"], "organizer", "campaign", "show", str(cid)).stdout
    assert "(closed)" in out
    # the text forms
    from cli.campaigns import _close_lines

    capsys.readouterr()
    _close_lines(closed)
    text = capsys.readouterr().out
    assert f"campaign {cid} closed: gold v2 of {TASK}/{PHASE}" in text
    assert "stays as published" in text and f'campaign {cid}"' in text
    out = _cli(url, tokens["lorg"], "organizer", "campaign", "disagreements", str(cid)).stdout
    assert "0 still need a decision" in out and f"item {item_of[overruled]}:" in out
    assert "-> reference (organizer)" in out
    # a closed campaign takes no judgment and no decision
    r = c.post(f"/api/v1/campaigns/{cid}/adjudicate", headers=_h(tokens["lorg"]),
               json={"majority": True})  # fmt: skip
    assert r.status_code == 409

    # the worker rescores every run under the new gold
    for sid in closed["rescoring"]:
        assert _run_job(sid)["status"] == "scored"
    with Session(engine) as s:
        for sid in closed["rescoring"]:
            sub = s.get(Submission, sid)
            assert not sub.stale
            score = s.exec(
                select(Score).where(Score.submission_id == sid, Score.attempt == sub.score_attempt)
            ).first()
            assert score.gold_sha256 == g["sha256"]
    # beside the ordinary metrics, the condensed ones (judged items only) equal a naive
    # computation from the run's file, the new gold and the judged pairs
    gold_now = set(_rows(store.gold(PHASE, "links.csv")))
    judged_now = set(_rows(store.gold(PHASE, "judged.csv")))
    from scorer import score_file

    for name in ("alpha", "beta", "gamma"):
        run = world["runs"][name]
        path = tmp_path / f"{name}.csv"
        path.write_bytes(_csv(run))
        result = score_file(TASK, path, PHASE, home)
        cond = result["condensed"]
        unjudged = [r for r in run if (r[0], r[1]) not in gold_now | judged_now]
        assert cond["unjudged"] == len(unjudged) and cond["judged"] == len(run) - len(unjudged)
        for k in (10, 100):
            assert cond["metrics"]["all"][f"map@{k}"] == pytest.approx(
                _naive_map(run, gold_now, judged_now, k), abs=1e-12
            )
            assert result["metrics"]["all"][f"map@{k}"] == pytest.approx(
                _naive_map(run, gold_now, None, k), abs=1e-12
            )
        assert cond["metrics"]["all"]["map@100"] != result["metrics"]["all"]["map@100"]
    with Session(engine) as s:  # the worker's results carry them too, by part
        for sid in closed["rescoring"]:
            sub = s.get(Submission, sid)
            for res in s.exec(
                select(Score.result).where(
                    Score.submission_id == sid, Score.attempt == sub.score_attempt
                )
            ):
                assert (
                    res["condensed"]["unjudged"] >= 0
                    and "map@10" in res["condensed"]["metrics"]["all"]
                )
    # the published ranking stays byte for byte until an organizer publishes a new version
    again = c.get(f"/api/v1/tasks/{TASK}/phases/{PHASE}/rankings/1", headers=_h(tokens["lorg"]))
    assert again.get_data() == published
    r = c.post(f"/api/v1/tasks/{TASK}/phases/{PHASE}/publish", headers=_h(tokens["lorg"]), json={})
    assert r.status_code == 409
    r = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/publish",
        headers=_h(tokens["lorg"]),
        json={"reason": f"gold extended by campaign {cid}"},
    )
    assert r.status_code == 201 and r.json["ranking"]["version"] == 2
    v2 = c.get(f"/api/v1/tasks/{TASK}/phases/{PHASE}/rankings/2", headers=_h(tokens["lorg"]))
    assert v2.get_data() != published
    # the new version says which gold version it ranks on, in the JSON and on the page
    assert v2.json["gold"] == f"gold v2 — extended by campaign {cid}"
    board = c.get(f"/api/v1/tasks/{TASK}/leaderboard?phase={PHASE}", headers=_h(tokens["lorg"]))
    assert board.json["gold"] == v2.json["gold"] and "gold" not in json.loads(published)
    page = c.get(f"/tasks/{TASK}/leaderboard?phase={PHASE}").get_data(as_text=True)
    assert f"Ranked on gold v2 — extended by campaign {cid}." in page

    # the export: pseudonymised judgments, decisions, the gold, qrels, the agreement
    dest = tmp_path / "export"
    got = json.loads(
        _cli(
            url,
            tokens["lorg"],
            "organizer",
            "campaign",
            "export",
            str(cid),
            "-o",
            str(dest),
            "--json",
        ).stdout  # fmt: skip
    )
    assert len(got["written"]) == len(list(p for p in dest.rglob("*") if p.is_file()))
    out = _cli(url, tokens["lorg"], "organizer", "campaign", "export", str(cid), "-o",
               str(tmp_path / "again")).stdout  # fmt: skip
    assert out.split() == [p.replace(str(dest), str(tmp_path / "again")) for p in got["written"]]
    judgments = _rows(dest / "judgments.csv")
    assert len(judgments) == 3 * len(votes)
    assert {r[1] for r in judgments} == {"A1", "A2", "A3"}
    assert "@" not in (dest / "judgments.csv").read_text()
    by_alias: dict[str, dict[str, str]] = {}
    for key, alias, label, _comment, _at in judgments:
        by_alias.setdefault(alias, {})[key] = label
    # A1..A3 in the order of the assessors' accounts
    assert [by_alias[f"A{k + 1}"] for k in range(3)] == [
        {key: _vote(a, key) for key in votes} for a in ASSESSORS
    ]
    decisions = {r[0]: (r[1], r[2]) for r in _rows(dest / "decisions.csv")}
    assert {k: v[0] for k, v in decisions.items()} == final
    assert decisions[overruled] == ("reference", "organizer")
    # the exported gold re-imports as the same gold: same bytes, same checksum
    for name in ("links.csv", "judged.csv"):
        assert (dest / "gold" / name).read_bytes() == store.gold(PHASE, name).read_bytes()
    assert tree_sha256(dest / "gold") == g["sha256"]
    qrels = [
        [unquote(x) for x in line.split()] for line in (dest / "qrels.txt").read_text().splitlines()
    ]
    assert all(len(q) == 4 and q[1] == "0" for q in qrels)
    assert {(q[0], q[2]) for q in qrels if q[3] == "1"} == set(gold_before + accepted)
    assert {(q[0], q[2]) for q in qrels if q[3] == "0"} == set(rejected)
    ag = c.get(f"/api/v1/campaigns/{cid}/agreement", headers=_h(tokens["lorg"])).json
    assert json.loads((dest / "agreement.json").read_text()) == ag
    assert "<svg" in (dest / "agreement.svg").read_text()
