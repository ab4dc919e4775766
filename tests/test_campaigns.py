"""Assessment campaigns, first slice: a campaign over three ranked runs of the Loci Similes sample
pools exactly the expected links (computed here from the three files and the gold), three
assessors judge them through the CLI and the API, the agreement equals a hand computation from
the stored judgments, and an assessor sees neither runs, scores nor anyone else's judgments (a
matrix over the campaign routes and the roles)."""

from __future__ import annotations

import itertools
import json

import campaignkit
import pytest
from apikit import _h
from campaignkit import ASSESSORS, PHASE, TASK, _cli, _naive_pool, _read
from sqlmodel import Session, select

from scorer.pooling import balanced_assignment
from server.domain import judgments
from server.domain.campaign_pool import overlap_bucket, source_work
from tests.conftest import LOCI

# the fixtures the tests below request, from the helper module that holds them
world = campaignkit.world


def _label_for(email: str, key: str) -> str:
    """A deterministic, disagreeing judgment."""
    h = sum(ord(ch) for ch in email + key)
    return "reference" if h % 3 == 0 else "no reference"


def _naive_kappa(judgments: dict[str, dict[str, str]], labels: list[str]) -> float:
    """Multi-kappa by hand when every assessor judged every item: observed agreement is the mean
    share of agreeing pairs per item; expected, the mean over assessor pairs of the chance that
    both pick the same label, each from their own distribution."""
    assessors = sorted(judgments)
    items = sorted(judgments[assessors[0]])
    pairs = list(itertools.combinations(assessors, 2))
    a_o = sum(
        sum(judgments[x][i] == judgments[y][i] for x, y in pairs) / len(pairs) for i in items
    ) / len(items)

    def p(a, lab):
        return sum(judgments[a][i] == lab for i in items) / len(items)

    a_e = sum(sum(p(x, lab) * p(y, lab) for lab in labels) for x, y in pairs) / len(pairs)
    return (a_o - a_e) / (1 - a_e)


def test_a_campaign_pools_assigns_is_judged_and_measured(world):
    url, tokens, c, runs = world["url"], world["tokens"], world["c"], world["runs"]
    # a person who is no assessor of the competition is named as missing, nothing is made
    r = _cli(
        url, tokens["lorg"], "organizer", "campaign", "open", TASK, PHASE, "--depth", "2",
        "--assessor", "a1@example.org", "--assessor", "alpha@example.org", "--json", ok=False,
    )  # fmt: skip
    err = json.loads(r.stdout)["error"]
    assert r.exit_code == 1 and err["status"] == 422 and "alpha@example.org" in err["message"]
    assert "a1@example.org" not in err["message"]

    args = ["--depth", "2", "--assessors", "3", "--seed", "7", "--json"]
    for a in ASSESSORS:
        args += ["--assessor", a]
    opened = json.loads(
        _cli(url, tokens["lorg"], "organizer", "campaign", "open", TASK, PHASE, *args).stdout
    )
    expected = _naive_pool([runs["alpha"], runs["beta"], runs["gamma"]], 2)
    keys = {it["key"] for it in opened["items"]}
    assert keys == expected and len(keys) > 10
    # beta's later run is not its primary run: not pooled
    assert sorted(opened["runs"]) == sorted(world["ids"][n] for n in ("alpha", "beta", "gamma"))
    assert opened["counts"] == {"items": len(keys), "assignments": 3 * len(keys), "judgments": 0}
    assert [a["assigned"] for a in opened["assessors"]] == [len(keys)] * 3
    # the factors: proposing runs, source work, overlap, whether the query had a gold link
    gold = {(r[0], r[1]) for r in _read(LOCI / "ground_truth.csv")}
    gold_q = {q for q, _ in gold}
    # the gold links the runs proposed are in the pool (alpha boosts every gold link)
    assert {f"{q}\t{s}" for q, s in gold} & keys
    for it in opened["items"]:
        q, s = it["key"].split("\t")
        f = it["factors"]
        assert f["query_had_gold"] == ("yes" if q in gold_q else "no")
        assert f["gold"] == ("yes" if (q, s) in gold else "no")
        assert f["source_work"] == source_work(s) and f["overlap"] in ("0", "1", "2-3", "4+")
        assert set(f["run"]) <= set(opened["runs"]) and f["run"]
    cid = opened["id"]
    item_of = {it["key"]: it["id"] for it in opened["items"]}

    # each assessor sees their items in their own order, with texts, and nothing else
    views = {}
    for a in ASSESSORS:
        who = a.split("@")[0]
        v = json.loads(_cli(url, tokens[who], "assess", str(cid), "--json").stdout)
        assert v["total"] == len(keys) and v["judged"] == 0
        assert {f"{i['query']}\t{i['candidate']}" for i in v["items"]} == keys
        for i in v["items"]:
            assert set(i) <= {
                "item", "position", "query", "candidate", "query_text", "candidate_text",
                "label", "comment", "judged_at",
            }  # fmt: skip
            assert i["query_text"] and i["candidate_text"]
        views[a] = [i["item"] for i in v["items"]]
    # the orders differ from one another and from the pool's order
    assert len({tuple(o) for o in views.values()}) == 3
    assert all(o != sorted(o) for o in views.values())

    # judging: a1 through the CLI, a2 and a3 through the API; a bad label names the field
    r = _cli(url, tokens["a1"], "assess", str(cid), "--item", str(views[ASSESSORS[0]][0]),
             "--label", "maybe", "--json", ok=False)  # fmt: skip
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["status"] == 422
    assert "label" in json.loads(r.stdout)["error"]["message"]
    stored: dict[str, dict[str, str]] = {a: {} for a in ASSESSORS}
    for a in ASSESSORS:
        who = a.split("@")[0]
        for key, iid in sorted(item_of.items()):
            label = _label_for(a, key)
            if who == "a1":
                got = json.loads(
                    _cli(
                        url,
                        tokens[who],
                        "assess",
                        str(cid),
                        "--item",
                        str(iid),
                        "--label",
                        label,
                        "--comment",
                        "seen",
                        "--json",
                    ).stdout  # fmt: skip
                )
            else:
                # first the other label, then the right one: judging again replaces it
                other = "reference" if label == "no reference" else "no reference"
                c.put(
                    f"/api/v1/campaigns/{cid}/items/{iid}/judgment",
                    headers=_h(tokens[who]),
                    json={"label": other},
                )
                got = c.put(
                    f"/api/v1/campaigns/{cid}/items/{iid}/judgment",
                    headers=_h(tokens[who]),
                    json={"label": label},
                ).json
            assert got["label"] == label and got["item"] == iid
            stored[a][key] = label
        # another assessor's view still shows only their own labels
        if who == "a1":
            v = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens["a2"])).json
            assert all(i["label"] is None for i in v["items"])
    v = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens["a1"])).json
    assert v["judged"] == len(keys) and {i["comment"] for i in v["items"]} == {"seen"}

    # the agreement equals the hand computation from the stored judgments
    from server.models import AssessmentCampaign, CampaignAssignment, CampaignItem, Judgment, User

    with Session(world["app"].extensions["palimpsest.engine"]) as s:
        rows = s.exec(
            select(User.email, CampaignItem.key, Judgment.label)
            .join(CampaignAssignment, CampaignAssignment.user_id == User.id)
            .join(CampaignItem, CampaignItem.id == CampaignAssignment.item_id)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
            .where(CampaignAssignment.campaign_id == cid)
        ).all()
        labels = s.get(AssessmentCampaign, cid).labels
    from_db: dict[str, dict[str, str]] = {a: {} for a in ASSESSORS}
    for email, key, label in rows:
        from_db[email][key] = label
    assert from_db == stored
    ag = json.loads(
        _cli(url, tokens["lorg"], "organizer", "campaign", "agreement", str(cid), "--json").stdout
    )
    assert ag["counts"] == {
        "items": len(keys),
        "complete_items": len(keys),
        "assignments": 3 * len(keys),
        "judgments": 3 * len(keys),
    }
    mk = ag["overall"]["multi_kappa"]
    assert mk["value"] == pytest.approx(_naive_kappa(from_db, labels), abs=1e-12)
    # every assessor judged every item: the pair-weighted generalisation equals eq. 7-8
    weighted = ag["overall"]["multi_kappa_weighted"]["value"]
    assert weighted == pytest.approx(_naive_kappa(from_db, labels), abs=1e-12)
    assert mk["low"] <= mk["value"] <= mk["high"]
    # by a factor: each level equals the hand computation on its items
    ag = c.get(
        f"/api/v1/campaigns/{cid}/agreement?by=query_had_gold", headers=_h(tokens["lorg"])
    ).json
    factor = {it["key"]: it["factors"]["query_had_gold"] for it in opened["items"]}
    for lv in ag["levels"]:
        level = lv["level"]
        sub = {a: {k: v for k, v in d.items() if factor[k] == level} for a, d in from_db.items()}
        n = len(next(iter(sub.values())))
        assert lv["items"] == n
        if lv["multi_kappa"]["value"] is not None:
            assert lv["multi_kappa"]["value"] == pytest.approx(_naive_kappa(sub, labels), abs=1e-12)
    by_run = c.get(f"/api/v1/campaigns/{cid}/agreement?by=run", headers=_h(tokens["lorg"])).json
    assert {lv["level"] for lv in by_run["levels"]} <= {f"run {i}" for i in opened["runs"]}
    r = c.get(f"/api/v1/campaigns/{cid}/agreement?by=colour", headers=_h(tokens["lorg"]))
    assert r.status_code == 422 and "by" in r.json["error"]["message"]
    # what the Bayesian model fits: the source work (the paper's book, first), the proposing runs
    # (its retrieval method, one level per set of runs), Known (the query had a gold link) and the
    # overlap bucket, each item's from its factors as the pool stored them
    with Session(world["app"].extensions["palimpsest.engine"]) as s:
        inputs = judgments.fit_inputs(s, s.get(AssessmentCampaign, cid))
    by_id = {it["id"]: it["factors"] for it in opened["items"]}
    kept = inputs["table"].n_items
    assert kept == len(keys) and list(inputs["groups"]) == ["source_work", "proposed_by"]
    # the table's rows: the items by their ids as text (every one fully judged)
    fs = [by_id[i] for i in sorted(by_id, key=str)]
    assert inputs["groups"]["source_work"].tolist() == [f["source_work"] for f in fs]
    want = ["runs " + "+".join(map(str, sorted(f["run"]))) for f in fs]
    assert inputs["groups"]["proposed_by"].tolist() == want and len(set(want)) > 1
    assert inputs["covariates"]["known"].tolist() == [
        1.0 if f["query_had_gold"] == "yes" else 0.0 for f in fs
    ]
    order = {"0": 0.0, "1": 1.0, "2-3": 2.0, "4+": 3.0}
    assert inputs["covariates"]["overlap"].tolist() == [order[f["overlap"]] for f in fs]
    # the text output
    out = _cli(url, tokens["lorg"], "organizer", "campaign", "agreement", str(cid)).stdout
    assert f"{len(keys)} of {len(keys)} items fully judged" in out and "multi-kappa" in out

    # a second campaign on the same task keeps the first one's items (judged blind again); loads
    # are balanced
    opened2 = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns",
        headers=_h(tokens["org"]),
        json={"depth": 3, "assessors": list(ASSESSORS[:2]) + ["a4@example.org"], "per_item": 2},
    ).json
    expected2 = _naive_pool([runs["alpha"], runs["beta"], runs["gamma"]], 3)
    assert keys < expected2
    assert {it["key"] for it in opened2["items"]} == expected2
    loads = [a["assigned"] for a in opened2["assessors"]]
    assert sum(loads) == 2 * len(expected2) and max(loads) - min(loads) <= 1


def test_who_sees_what_in_a_campaign(world):
    """The matrix: each campaign route as each role. Assessors, a participant and another
    competition's organizer get 403 or 404 on every organizer route; only the assigned assessor
    judges an item; nobody's items show runs, scores or others' judgments."""
    c, tokens = world["c"], world["tokens"]
    opened = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns",
        headers=_h(tokens["lorg"]),
        json={"depth": 1, "assessors": ["a1@example.org", "a2@example.org"], "per_item": 1},
    )
    assert opened.status_code == 201, opened.json
    cid = opened.json["id"]
    mine = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens["a1"])).json["items"]
    theirs = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens["a2"])).json["items"]
    assert mine and theirs and not {i["item"] for i in mine} & {i["item"] for i in theirs}
    item = mine[0]["item"]
    r = c.put(
        f"/api/v1/campaigns/{cid}/items/{item}/judgment",
        headers=_h(tokens["a1"]),
        json={"label": "reference", "comment": "a1's secret"},
    )
    assert r.status_code == 200

    organizer_routes = [
        (
            "post",
            f"/tasks/{TASK}/phases/{PHASE}/campaigns",
            {"depth": 1, "assessors": ["a1@example.org"], "per_item": 1},
        ),  # noqa: E501
        ("get", f"/tasks/{TASK}/phases/{PHASE}/campaigns", None),
        ("get", f"/campaigns/{cid}", None),
        ("get", f"/campaigns/{cid}/agreement", None),
        ("get", f"/campaigns/{cid}/agreement?by=run", None),
    ]
    for who in ("a1", "a2", "a4", "alpha", "torg"):
        for method, path, body in organizer_routes:
            r = getattr(c, method)(f"/api/v1{path}", headers=_h(tokens[who]), json=body)
            assert r.status_code in (403, 404), (who, method, path, r.status_code, r.json)
            assert "secret" not in r.get_data(as_text=True)
    # the second slice's organizer routes: refused alike, before anything is decided or written
    organizer_writes = [
        ("get", f"/campaigns/{cid}/disagreements", None),
        ("post", f"/campaigns/{cid}/adjudicate", {"majority": True}),
        ("post", f"/campaigns/{cid}/close", {}),
        ("get", f"/campaigns/{cid}/export", None),
    ]
    for who in ("a1", "a2", "a4", "alpha", "torg"):
        for method, path, body in organizer_writes:
            r = getattr(c, method)(f"/api/v1{path}", headers=_h(tokens[who]), json=body)
            assert r.status_code in (403, 404), (who, method, path, r.status_code, r.json)
            assert "secret" not in r.get_data(as_text=True)
    for method, path, body in organizer_writes:
        assert getattr(c, method)(f"/api/v1{path}", json=body).status_code == 401
    shown = c.get(f"/api/v1/campaigns/{cid}/disagreements", headers=_h(tokens["lorg"]))
    assert shown.status_code == 200 and shown.json["counts"]["decided"] == 0
    for who in ("lorg", "org"):
        for method, path, body in organizer_routes[1:]:
            r = getattr(c, method)(f"/api/v1{path}", headers=_h(tokens[who]), json=body)
            assert r.status_code == 200, (who, path, r.json)
    for method, path, _ in organizer_routes:
        assert getattr(c, method)(f"/api/v1{path}").status_code == 401

    # the assessor's routes: people with no role in the competition are told there is none
    for who in ("alpha", "torg"):
        r = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens[who]))
        assert r.status_code == 404, who
    judge = f"/api/v1/campaigns/{cid}/items/{item}/judgment"
    for who in ("a2", "a4", "alpha", "torg", "lorg"):
        r = c.put(judge, headers=_h(tokens[who]), json={"label": "no reference"})
        assert r.status_code == 404, (who, r.status_code)
    assert c.put(f"/api/v1/campaigns/{cid + 99}/items/{item}/judgment", headers=_h(tokens["a1"]),
                 json={"label": "reference"}).status_code == 404  # fmt: skip
    # what an assessor's view holds: texts and their own judgment only
    for who in ("a1", "a2", "a4", "lorg"):
        body = c.get(f"/api/v1/campaigns/{cid}/items", headers=_h(tokens[who])).get_data(
            as_text=True
        )
        for word in ('"run"', '"factors"', '"score', '"overlap"', "alpha", "gamma"):
            assert word not in body, (who, word)
        assert ("a1's secret" in body) == (who == "a1")
    # the organizers see the judgments counted, the proposing runs, never through an assessor
    shown = c.get(f"/api/v1/campaigns/{cid}", headers=_h(tokens["lorg"])).json
    assert shown["counts"]["judgments"] == 1 and all("run" in i["factors"] for i in shown["items"])


def assign(keys: list[str], assessors: list[int], per_item: int, seed: int) -> dict:
    """Each assessor's keys in their own order, as `balanced_assignment` deals them."""
    item, who, pos = balanced_assignment(len(keys), len(assessors), per_item, seed)
    got: dict[int, dict[int, str]] = {a: {} for a in assessors}
    for i, w, p in zip(item.tolist(), who.tolist(), pos.tolist(), strict=True):
        got[assessors[w]][p] = keys[i]
    return {a: [v[p] for p in sorted(v)] for a, v in got.items()}


def test_assignment_is_balanced_distinct_and_shuffled():
    keys = [f"k{i:02d}" for i in range(17)]
    got = assign(keys, [1, 2, 3, 4, 5], 3, seed=11)
    loads = [len(v) for v in got.values()]
    assert sum(loads) == 51 and max(loads) - min(loads) <= 1
    per_key = {k: sum(k in v for v in got.values()) for k in keys}
    assert set(per_key.values()) == {3}
    assert all(len(set(v)) == len(v) for v in got.values())
    assert any(v != sorted(v) for v in got.values())
    assert assign(keys, [1, 2, 3, 4, 5], 3, seed=11) == got  # the seed decides
    assert overlap_bucket("arma uirumque cano", "Arma cano") == "2-3"
    assert overlap_bucket("a b", "c d") == "0"


def test_a_pair_task_campaign_samples_each_stratum_with_its_seed(world):
    """tric-binary: `depth` instances per subset (iov, oov), drawn with the campaign's seed, for
    re-judgment; the assessor sees the instance's public input fields."""
    from server.domain import people
    from server.models import User

    c, tokens, app = world["c"], world["tokens"], world["app"]
    with Session(app.extensions["palimpsest.engine"]) as s:
        comp = people.ensure_competition(s, "tric-binary")
        u = s.exec(select(User).where(User.email == "a1@example.org")).one()
        people.grant(s, comp.id, u, people.ASSESSOR)
        s.commit()
    body = {"depth": 2, "assessors": ["a1@example.org"], "per_item": 1, "seed": 5}
    r = c.post(
        "/api/v1/tasks/tric-binary/phases/test/campaigns", headers=_h(tokens["torg"]), json=body
    )
    assert r.status_code == 201, r.json
    items = r.json["items"]
    assert sorted(i["factors"]["stratum"] for i in items) == ["iov", "iov", "oov", "oov"]
    # a second campaign on the task leaves out the items of the first
    again = c.post(
        "/api/v1/tasks/tric-binary/phases/test/campaigns", headers=_h(tokens["torg"]), json=body
    ).json
    assert not {i["key"] for i in items} & {i["key"] for i in again["items"]}
    mine = c.get(f"/api/v1/campaigns/{r.json['id']}/items", headers=_h(tokens["a1"])).json
    assert {i["query"] for i in mine["items"]} == {i["key"] for i in items}
    assert all(i["fields"]["instanceID"] == i["query"] for i in mine["items"])
    assert all("label" not in i["fields"] for i in mine["items"])  # no gold in the inputs
    # the loci organizer does not organize tric-binary
    r = c.post(
        "/api/v1/tasks/tric-binary/phases/test/campaigns", headers=_h(tokens["lorg"]), json=body
    )
    assert r.status_code == 403


def _top(rows, depth: int) -> set[tuple[str, str]]:
    by_q: dict[str, list[tuple[float, str]]] = {}
    for q, s, x in rows:
        by_q.setdefault(q, []).append((x, s))
    return {(q, s) for q, cands in by_q.items() for _, s in sorted(cands, reverse=True)[:depth]}


def test_an_assessor_who_takes_part_learns_no_gold_from_the_pool(world):
    """alpha's run ranks every gold link first. alpha, made an assessor too, is refused (API,
    CLI, web) unless the organizer overrides; once let in, alpha's own top-K minus the items
    alpha is shown holds no gold link (the gold links stay in the pool, judged blind); the
    organizers see alpha named and every assessor measured against the gold links. A suspended
    participant's run is not pooled."""
    from server.domain import people
    from server.models import Registration, User

    url, tokens, c, runs, app = (
        world["url"],
        world["tokens"],
        world["c"],
        world["runs"],
        world["app"],
    )
    engine = app.extensions["palimpsest.engine"]
    with Session(engine) as s:
        comp = people.ensure_competition(s, TASK)
        alpha = s.exec(select(User).where(User.email == "alpha@example.org")).one()
        people.grant(s, comp.id, alpha, people.ASSESSOR)
        gamma = s.exec(select(User).where(User.email == "gamma@example.org")).one()
        reg = s.exec(
            select(Registration).where(
                Registration.competition_id == comp.id, Registration.user_id == gamma.id
            )
        ).first() or Registration(competition_id=comp.id, user_id=gamma.id)
        reg.status = "suspended"
        s.add(reg)
        s.commit()
    body = {"depth": 3, "assessors": ["alpha@example.org", "a1@example.org"], "per_item": 1}
    path = f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns"
    r = c.post(path, headers=_h(tokens["lorg"]), json=body)
    assert r.status_code == 409 and r.json["error"]["code"] == "assessor_participates"
    assert "alpha@example.org" in r.json["error"]["message"]
    r = _cli(url, tokens["lorg"], "organizer", "campaign", "open", TASK, PHASE, "--depth", "3",
             "--assessor", "alpha@example.org", "--assessors", "1", "--json", ok=False)  # fmt: skip
    assert r.exit_code == 1 and json.loads(r.stdout)["error"]["status"] == 409
    with app.test_client() as client:
        from webkit import Browser

        from server.models import Phase

        web = Browser(client)
        web.login("lorg@example.org", "correct horse")
        with Session(engine) as s:
            pid = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).one().id
        form = {"depth": "3", "per_item": "1", "assessors": "alpha@example.org"}
        page = web.post(f"/organizer/phases/{pid}/campaigns", data=form)
        assert page.status_code == 409 and b"alpha@example.org" in page.data
        page = web.post(
            f"/organizer/phases/{pid}/campaigns", data=form | {"allow_participants": "y"}
        )
        assert page.status_code == 302
        shown = web.get(page.headers["Location"])
        assert b'id="participants"' in shown.data and b"alpha@example.org" in shown.data

    # every assessor judges every item: alpha is shown the whole pool
    r = c.post(
        path,
        headers=_h(tokens["lorg"]),
        json=body | {"allow_participants": True, "per_item": 2},
    )
    assert r.status_code == 201, r.json
    opened = r.json
    assert opened["participants"] == ["alpha@example.org"]
    # gamma is suspended: its run is not pooled
    assert world["ids"]["gamma"] not in opened["runs"] and world["ids"]["alpha"] in opened["runs"]
    assert {it["key"] for it in opened["items"]} == _naive_pool([runs["alpha"], runs["beta"]], 3)

    gold = {(r_[0], r_[1]) for r_ in _read(LOCI / "ground_truth.csv")}
    own = _top(runs["alpha"], 3)
    assert own & gold  # alpha's top links hold gold links: the attack had something to find
    mine = c.get(f"/api/v1/campaigns/{opened['id']}/items", headers=_h(tokens["alpha"])).json
    theirs = c.get(f"/api/v1/campaigns/{opened['id']}/items", headers=_h(tokens["a1"])).json
    shown_pairs = {(i["query"], i["candidate"]) for i in mine["items"]}
    assert (own - shown_pairs) & gold == set()
    assert own <= shown_pairs

    # the organizers measure each assessor against the gold links they judged
    n_gold = 0
    for who, got in (("alpha", mine), ("a1", theirs)):
        for i in got["items"]:
            label = (
                "reference"
                if (i["query"], i["candidate"]) in gold and who == "a1"
                else ("no reference")
            )
            n_gold += who == "a1" and (i["query"], i["candidate"]) in gold
            r = c.put(
                f"/api/v1/campaigns/{opened['id']}/items/{i['item']}/judgment",
                headers=_h(tokens[who]),
                json={"label": label},
            )
            assert r.status_code in (200, 201), r.json
    got = c.get(f"/api/v1/campaigns/{opened['id']}", headers=_h(tokens["lorg"])).json
    per = {a["email"]: a for a in got["assessors"]}
    assert per["a1@example.org"]["gold_judged"] == per["a1@example.org"]["gold_agreed"] == n_gold
    assert per["alpha@example.org"]["gold_agreed"] == 0
    assert per["alpha@example.org"]["gold_judged"] == len(shown_pairs & gold) == n_gold
    # an assessor sees nothing of it
    assert "gold" not in json.dumps(mine)
