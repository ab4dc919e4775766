"""The campaign pages without a browser: who reaches what (a matrix over every campaign web route
and every campaign API route, and the roles: anonymous, a participant, an assessor of the
campaign, an assessor of the competition not assigned to it, the organizer of another
competition, the campaign's organizer), what an assessor's answers never contain (runs, scores,
other assessors' labels and comments), the forms' refusals, and the shared-word highlighting."""

from __future__ import annotations

import re
from pathlib import Path

import campaign_world
import pytest
from campaign_world import MARK, SCORE, SECRET
from conftest import own_tasks
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_user

from server.actions import adjudication, campaign_exports
from server.actions import campaigns as campaign_actions
from server.actions import competitions as comp
from server.domain import people
from server.models import CampaignAssignment, Judgment, Team, User
from server.web.campaigns import highlight, pair_texts

# the fixtures the tests below request, from the helper module that holds them
world = campaign_world.world

WHO = ("anonymous", "participant", "a1", "a2", "a3", "org_b", "org")


def _web_routes(app) -> list[tuple[str, str, str]]:
    """(endpoint, method, rule) of every campaign page: the campaigns blueprint, walked."""
    return [
        (r.endpoint, m, r.rule)
        for r in app.url_map.iter_rules()
        if r.endpoint.startswith("campaigns.")
        for m in sorted(r.methods & {"GET", "POST"})
    ]


def _api_routes(app) -> list[tuple[str, str]]:
    spec = app.test_client().get("/api/v1/openapi.json").json
    return [
        (path, method)
        for path, ops in spec["paths"].items()
        if "/campaigns" in path
        for method in ops
    ]


def _leaks(body: str, world) -> list[str]:
    """What an assessor's answer must not contain: the run, its score, others' comments."""
    sub = world["sub"]
    bad = [MARK, str(SCORE), *SECRET.values(), f"/submissions/{sub.id}"]
    bad += [f'"runs": [{sub.id}]', f'"run": [{sub.id}]']
    return [x for x in bad if x in body]


def test_every_campaign_route_as_every_role(world):
    app, cid = world["app"], world["campaign"]
    item = world["a1_items"][0]
    ids = {
        "campaign_id": cid,
        "item_id": item,
        "phase_id": world["phase"].id,
        "task_id": "tric-binary",
        "phase_name": "dev",
    }
    web = _web_routes(app)
    assert {e for e, *_ in web} == {
        "campaigns.assess",
        "campaigns.judge",
        "campaigns.phase_campaigns",
        "campaigns.campaign",
        "campaigns.adjudicate",
        "campaigns.close",
        "campaigns.export",
        "campaigns.bayes",
    }
    # what each role gets from each page: (GET, POST) status classes
    organizer_pages = {
        "campaigns.phase_campaigns",
        "campaigns.campaign",
        "campaigns.adjudicate",
        "campaigns.close",
        "campaigns.export",
        "campaigns.bayes",
    }
    seen = 0
    for endpoint, method, rule in web:
        url = re.sub(r"<(?:\w+:)?(\w+)>", lambda mo: str(ids[mo.group(1)]), rule)
        for who in WHO:
            b = world["browsers"][who]
            data = {"label": "related", "comment": "by the matrix"} if method == "POST" else None
            r = b.get(url) if method == "GET" else b.post(url, data)
            body = r.get_data().decode("utf-8", "replace")  # the export is a zip
            assert r.status_code < 500, (endpoint, method, who, r.status_code)
            if who == "anonymous":
                assert r.status_code == 302 and "/auth/login" in r.headers["Location"]
            elif who == "org":  # a close is refused (409): a1 has not judged
                assert r.status_code in (200, 302, 400, 404, 409), (endpoint, method, who)
            elif who in ("participant", "org_b") and "campaign_id" in rule:
                # no role in A: the campaign does not exist for them
                assert r.status_code == 404, (endpoint, method, who, r.status_code)
            elif who in ("participant", "org_b"):  # a phase's page, as every organizer page
                assert r.status_code == 403, (endpoint, method, who, r.status_code)
            elif endpoint in organizer_pages:  # A's assessors: not theirs
                assert r.status_code in (403, 404), (endpoint, method, who, r.status_code)
            elif who == "a3":  # an assessor with no item here
                if method == "GET":
                    assert r.status_code == 200 and "No items of this campaign" in body
                else:
                    assert r.status_code == 404, (endpoint, method, who, r.status_code)
            else:  # a1 and a2 on their own page
                assert r.status_code in (200, 302, 404), (endpoint, method, who, r.status_code)
            if who in ("a1", "a2", "a3"):
                leaks = _leaks(body, world)
                if who == "a2":  # a2 reads their own comment, nobody else's
                    leaks = [x for x in leaks if x != SECRET["a2"]]
                assert leaks == [], (endpoint, method, who, leaks)
            seen += 1
    api = _api_routes(app)
    assert len(api) >= 5, api
    c = app.test_client()
    for path, method in api:
        url = re.sub(r"\{(\w+)\}", lambda mo: str(ids[mo.group(1)]), path)
        organizer_op = not re.search(r"/items", path) and path != "/campaigns"
        for who in WHO:
            token = world["tokens"][who]
            h = {"Authorization": f"Bearer {token}"} if token else {}
            opening = path.endswith("/campaigns") and method == "post"
            body = {"depth": 2, "assessors": ["a1@x.org"], "per_item": 1} if opening else None
            body = body or {"label": "related"}
            r = c.open(f"/api/v1{url}", method=method.upper(), json=body, headers=h)
            body = r.get_data(as_text=True)
            assert r.status_code < 500, (path, method, who, r.status_code)
            if who == "anonymous":
                assert r.status_code == 401, (path, method, who, r.status_code)
            elif who in ("participant", "org_b") and "{campaign_id}" in path:
                assert r.status_code == 404, (path, method, who, r.status_code)
            elif who in ("participant", "org_b", "a1", "a2", "a3") and organizer_op:
                assert r.status_code in (403, 404), (path, method, who, r.status_code)
            elif who == "a3" and method == "put":
                assert r.status_code == 404, (path, method, who, r.status_code)
            if who in ("a1", "a2", "a3"):
                leaks = _leaks(body, world)
                if who == "a2":
                    leaks = [x for x in leaks if x != SECRET["a2"]]
                assert leaks == [], (path, method, who, leaks)
            seen += 1
    assert seen >= 4 * len(WHO)


def test_an_assessor_judges_on_the_page_without_javascript(world):
    app, cid = world["app"], world["campaign"]
    b = world["browsers"]["a1"]
    items = world["a1_items"]
    page = b.get(f"/campaigns/{cid}/assess").get_data(as_text=True)
    assert f"0 of {len(items)} judged" in page
    assert "<strong>the topic</strong>" in page  # the guideline, rendered
    # a click (a form POST) judges and goes on to the next item not judged
    r = b.post(f"/campaigns/{cid}/assess/{items[0]}", {"label": "related", "comment": "close"})
    assert r.status_code == 302 and r.headers["Location"].endswith(f"item={items[1]}")
    page = b.get(f"/campaigns/{cid}/assess").get_data(as_text=True)
    assert f"1 of {len(items)} judged" in page
    assert f'action="/campaigns/{cid}/assess/{items[1]}"' in page  # resumed where it stopped
    # a label the campaign did not declare: the page again, the field named, the comment typed
    # kept; a control character: the app-wide refusal of such input; nothing stored either way
    r = b.post(f"/campaigns/{cid}/assess/{items[1]}", {"label": "maybe", "comment": "hm-kept"})
    assert r.status_code == 400 and "one of related, unrelated" in r.get_data(as_text=True)
    assert ">hm-kept</textarea>" in r.get_data(as_text=True)
    r = b.post(f"/campaigns/{cid}/assess/{items[1]}", {"label": "related", "comment": "a\x07b"})
    assert r.status_code == 400 and "not allowed in this field" in r.get_data(as_text=True)
    with Session(engine_of(app)) as s:
        got = s.exec(
            select(CampaignAssignment.item_id, Judgment.label, Judgment.comment)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
            .where(CampaignAssignment.user_id == world["users"]["a1"].id)
        ).all()
    assert [tuple(x) for x in got] == [(items[0], "related", "close")]


def test_a_closed_campaign_takes_no_judgment_on_the_page(world):
    from server.models import AssessmentCampaign

    app, cid = world["app"], world["campaign"]
    with Session(engine_of(app)) as s:
        c = s.get(AssessmentCampaign, cid)
        c.state = "closed"
        s.add(c)
        s.commit()
    b = world["browsers"]["a1"]
    page = b.get(f"/campaigns/{cid}/assess").get_data(as_text=True)
    assert "This campaign is closed" in page
    r = b.post(f"/campaigns/{cid}/assess/{world['a1_items'][0]}", {"label": "related"})
    assert r.status_code == 409 and "takes no judgments" in r.get_data(as_text=True)


def test_the_organizer_opens_a_campaign_and_reads_its_agreement(world):
    app = world["app"]
    b = world["browsers"]["org"]
    pid = world["phase"].id
    page = b.get(f"/organizer/phases/{pid}").get_data(as_text=True)
    assert f"/organizer/phases/{pid}/campaigns" in page
    # bad input: the form again, each field saying what is wrong, never a 500
    for data, said in (
        ({"depth": "0", "per_item": "1", "assessors": "a1@x.org"}, "at least 1"),
        ({"depth": "x", "per_item": "1", "assessors": "a1@x.org"}, "Not a valid integer"),
        ({"depth": "2", "per_item": "1", "assessors": "nobody@x.org"}, "not assessors of"),
        ({"depth": "2", "per_item": "3", "assessors": "a1@x.org"}, "between 1 and the number"),
        ({"depth": "2", "per_item": "1", "assessors": "a1@x.org", "labels": "a\na"}, "repeat"),
        ({"depth": "2", "per_item": "1", "assessors": ""}, "name at least one assessor"),
    ):
        r = b.post(f"/organizer/phases/{pid}/campaigns", data)
        assert r.status_code == 400, (data, r.status_code)
        assert said in r.get_data(as_text=True), (data, said)
    r = b.post(
        f"/organizer/phases/{pid}/campaigns",
        {"depth": "2", "per_item": "2", "assessors": "a1@x.org, a3@x.org", "seed": "3"},
    )
    assert r.status_code == 302, r.get_data(as_text=True)[:500]
    new_id = int(r.headers["Location"].rsplit("/", 1)[1])
    listing = b.get(f"/organizer/phases/{pid}/campaigns").get_data(as_text=True)
    assert f"campaign {new_id}" in listing and f"campaign {world['campaign']}" in listing
    # the first campaign's page: counts, progress, and the agreement the action computes
    cid = world["campaign"]
    with Session(engine_of(app)) as s:
        org = s.get(User, world["users"]["org"].id)
        ag = campaign_actions.agreement(s=s, actor=org, campaign=cid, by="stratum")
        shown = campaign_actions.show_campaign(s=s, actor=org, campaign=cid)
    page = b.get(f"/organizer/campaigns/{cid}?by=stratum").get_data(as_text=True)
    mk = ag.overall["multi_kappa"]
    if mk["value"] is None:
        assert 'data-measure="multi_kappa">—' in page
    else:
        assert f"{mk['value']:.3f}" in page
    for lv in ag.levels:
        assert f">{lv['level']}<" in page
    for x in shown.assessors:
        assert f"{x.judged} of {x.assigned}" in page
    r = b.get(f"/organizer/campaigns/{cid}?by=nonsense")
    assert r.status_code == 400 and "is not a factor of this campaign" in r.get_data(as_text=True)


def test_the_assessor_finds_the_campaign_on_the_home_page(world):
    cid = world["campaign"]
    page = world["browsers"]["a1"].get("/").get_data(as_text=True)
    assert f"/campaigns/{cid}/assess" in page
    assert f"0 of {len(world['a1_items'])} judged" in page
    assert f"/campaigns/{cid}/assess" not in world["browsers"]["a3"].get("/").get_data(as_text=True)
    # the same through the API
    c = world["app"].test_client()
    for who, want in (
        ("a1", [(cid, 0, len(world["a1_items"]))]),
        ("a2", [(cid, len(world["a1_items"]), len(world["a1_items"]))]),
        ("a3", []),
        ("participant", []),
        ("org_b", []),
    ):
        r = c.get("/api/v1/campaigns", headers={"Authorization": f"Bearer {world['tokens'][who]}"})
        assert r.status_code == 200, (who, r.json)
        assert [(x["campaign"], x["judged"], x["total"]) for x in r.json["items"]] == want, who


@pytest.mark.parametrize(
    ("text", "other", "expected"),
    [
        ("Love one another", "love thy neighbour", "<mark>Love</mark> one another"),
        ("a <b> & c", "b c", "a &lt;<mark>b</mark>&gt; &amp; <mark>c</mark>"),
        ("nothing shared", "at all", "nothing shared"),
        ("", "x", ""),
        ("x y x", None, "x y x"),
    ],
)
def test_shared_words_are_marked_in_escaped_text(text, other, expected):
    assert str(highlight(text, other)) == expected


def test_a_pair_tasks_two_texts():
    row = {"instanceID": "p1", "lemma": "L", "context1": "first text", "context2": "second"}
    a, b, rest = pair_texts(row)
    assert (a, b) == (("context1", "first text"), ("context2", "second"))
    assert rest == {"instanceID": "p1", "lemma": "L"}
    a, b, rest = pair_texts({"id": "x", "text_a": "A", "text_b": "B B"})
    assert (a[0], b[0]) == ("text_a", "text_b")
    a, b, rest = pair_texts({"id": "x", "left": "a long text", "right": "longer text here"})
    assert (a[0], b[0]) == ("left", "right")


def test_a_links_campaign_shows_the_query_and_the_candidate_and_no_run(app):
    """A links campaign (Loci Similes), its rows written here as the pool writes them: the
    assessor reads the query and the candidate source with their texts and shared words
    marked, never the runs that proposed them; the organizer reads the agreement by run."""
    from server.domain.campaign_pool import overlap_bucket, segments, source_work
    from server.models import AssessmentCampaign, CampaignItem
    from server.settings import get_settings
    from tasks.store import TaskStore

    admin = make_user(app, "admin@x.org", organizer=True)
    a1, a2 = make_user(app, "a1@x.org"), make_user(app, "a2@x.org")
    org = make_user(app, "org@x.org", team="lorg-team")
    with Session(engine_of(app), expire_on_commit=False) as s:
        comp.create_competition(
            s=s,
            actor=s.get(User, admin.id),
            via="cli",
            competition="loci",
            title="Loci",
            state="visible",
            tasks=["loci-similes"],
        )
        cid = comp.find(s, "loci").id
        for u, role in ((a1, people.ASSESSOR), (a2, people.ASSESSOR), (org, people.ORGANIZER)):
            people.grant(s, cid, s.get(User, u.id), role)
        s.commit()
    phase = make_phase(app, "loci-similes", "test")
    with Session(engine_of(app), expire_on_commit=False) as s:
        team = s.exec(select(Team).where(Team.name == "lorg-team")).one()
    runs = [
        make_submission(app, team=team, phase=phase, scores={"all": SCORE}, method=MARK).id
        for _ in range(2)
    ]
    store = TaskStore("loci-similes", get_settings().home)
    qtext = segments(store, "test", "queries.csv")
    stext = segments(store, "test", "sources.csv")
    pairs = [(q, src) for q in sorted(qtext)[:2] for src in sorted(stext)[:2]]
    with Session(engine_of(app), expire_on_commit=False) as s:
        c = AssessmentCampaign(
            competition_id=cid,
            task_id="loci-similes",
            phase_id=phase.id,
            depth=1,
            assessors_per_item=2,
            labels=["reference", "no reference"],
            seed=5,
            runs=runs,
        )
        s.add(c)
        s.flush()
        for pos, (q, src) in enumerate(pairs):
            it = CampaignItem(
                campaign_id=c.id,
                key=f"{q}\t{src}",
                position=pos,
                factors={
                    "run": runs[: 1 + pos % 2],
                    "source_work": source_work(src),
                    "overlap": overlap_bucket(qtext[q], stext[src]),
                    "query_had_gold": "no",
                },
            )
            s.add(it)
            s.flush()
            for u in (a1, a2):
                s.add(
                    CampaignAssignment(campaign_id=c.id, item_id=it.id, user_id=u.id, position=pos)
                )
        s.commit()
        camp = c.id
        for it in campaign_actions.my_items(s=s, user=a2, campaign=camp).items:
            campaign_actions.judge(
                s=s,
                user=a2,
                campaign=camp,
                item=it.item,
                label="reference",
                via="cli",
                comment=SECRET["a2"],
            )
    b1, bo = Browser(app.test_client()), Browser(app.test_client())
    b1.login("a1@x.org")
    bo.login("org@x.org")
    marked = 0
    for it in campaign_actions.my_items(s=Session(engine_of(app)), user=a1, campaign=camp).items:
        page = b1.get(f"/campaigns/{camp}/assess?item={it.item}").get_data(as_text=True)
        assert "Query" in page and "Candidate source" in page and it.query_text
        marked += "<mark>" in page.split("<main>", 1)[1].split("are <mark>marked")[0]
        assert str(highlight(it.query_text, it.candidate_text)) in page
        assert str(highlight(it.candidate_text, it.query_text)) in page
        for bad in (MARK, str(SCORE), SECRET["a2"], *(f"/submissions/{r}" for r in runs)):
            assert bad not in page, bad
        r = b1.post(f"/campaigns/{camp}/assess/{it.item}", {"label": "reference"})
        assert r.status_code == 302
    assert marked, "no shared word marked on any item"
    page = bo.get(f"/organizer/campaigns/{camp}?by=run").get_data(as_text=True)
    for r in runs:
        assert f"run {r}" in page and f"/submissions/{r}" in page


@pytest.fixture
def own_tric(world):
    """tric-binary's files copied into this test's data directory (a close writes a new gold
    version there, never into the session's import), the other tasks linked."""

    from server.settings import get_settings

    home = Path(get_settings().home)
    own_tasks(home, ["tric-binary"], symlinks=True)
    return home


def _plan(k: int) -> tuple[str, ...]:
    """The three assessors' labels of the k-th item: unanimous, two majorities either way, and
    the last item left incomplete (one judgment missing)."""
    return (("1", "1", "1"), ("1", "1", "0"), ("0", "1", "0"), ("1", "0", "0"))[k % 4]


def test_the_organizer_adjudicates_closes_and_exports_on_the_page(world, own_tric):
    import io
    import zipfile

    from markupsafe import escape

    from server.exceptions import LifecycleRefused

    app = world["app"]
    users = world["users"]
    b = world["browsers"]["org"]
    who = ("a1", "a2", "org")
    with Session(engine_of(app), expire_on_commit=False) as s:
        org = s.get(User, users["org"].id)
        got = campaign_actions.open_campaign(
            s=s,
            actor=org,
            task="tric-binary",
            phase="dev",
            depth=2,
            assessors=[f"{w}@x.org" for w in who],
            per_item=3,
            labels=["1", "0"],
            seed=11,
            via="cli",
        )
        cid = got.id
        items = [it.id for it in got.items]
        assert len(items) >= 3
        for k, iid in enumerate(items):
            for w, label in zip(who, _plan(k), strict=True):
                if k == len(items) - 1 and w == "org":
                    continue  # the last item: not all in
                campaign_actions.judge(
                    s=s,
                    user=s.get(User, users[w].id),
                    campaign=cid,
                    item=iid,
                    label=label,
                    comment="",
                    via="cli",
                )
        expect = adjudication.disagreements(s=s, actor=org, campaign=cid)
    url = f"/organizer/campaigns/{cid}"
    page = b.get(url).get_data(as_text=True)
    assert 'id="adjudication"' in page and "Apply the majority rule" in page
    listed = re.findall(r'<tr id="item-(\d+)" data-item', page)
    assert [int(x) for x in listed] == [x.item for x in expect.items]
    assert {x.item for x in expect.items} == {
        iid for k, iid in enumerate(items) if len(set(_plan(k))) > 1 or k == len(items) - 1
    }
    row = page.split(f'<tr id="item-{expect.items[0].item}"', 1)[1].split("</tr>", 1)[0]
    for label, n in expect.items[0].counts.items():
        assert f'data-count="{label}">{n}<' in row
    assert f"<strong>{expect.counts['undecided']} still need a decision</strong>" in page

    # closing is refused while an item is undecided: the page again, the items named as the
    # action names them
    with Session(engine_of(app)) as s:
        with pytest.raises(LifecycleRefused) as refused:
            adjudication.close_campaign(
                s=s, actor=s.get(User, users["org"].id), campaign=cid, via="cli"
            )
        s.rollback()
    r = b.post(f"{url}/close", {})
    assert r.status_code == 409
    said = refused.value.message
    assert str(escape(said[:1].upper() + said[1:])) in r.get_data(as_text=True)

    # the majority rule in one click: every complete item gets its strict majority label
    r = b.post(f"{url}/adjudicate", {"majority": "1"})
    assert r.status_code == 302 and r.headers["Location"].endswith(url)
    with Session(engine_of(app)) as s:
        after = adjudication.disagreements(s=s, actor=s.get(User, users["org"].id), campaign=cid)
    by_item = {x.item: x for x in after.items}
    for k, iid in enumerate(items[:-1]):
        labels = _plan(k)
        if len(set(labels)) > 1:
            win = max(set(labels), key=labels.count)
            assert (by_item[iid].decision, by_item[iid].rule) == (win, "majority"), k
    assert by_item[items[-1]].decision is None  # not all in: left for a person

    # an overrule without a reason: the page again, the field named, the label kept
    target = next(x for x in after.items if x.rule == "majority")
    other = "0" if target.decision == "1" else "1"
    r = b.post(f"{url}/adjudicate", {"item": str(target.item), "label": other, "reason": " "})
    body = r.get_data(as_text=True)
    assert r.status_code == 400 and "an organizer&#39;s decision needs a reason" in body
    assert f'<option value="{other}" selected>' in body.split(f'id="item-{target.item}"')[1]
    for bad, code in (
        ({"item": "x", "label": "1", "reason": "r"}, 400),
        ({"item": str(target.item), "label": "maybe", "reason": "r"}, 400),
        ({"item": "999999", "label": "1", "reason": "r"}, 404),
    ):
        r = b.post(f"{url}/adjudicate", bad)
        assert r.status_code == code, (bad, r.status_code)
        assert 'id="adjudication"' in r.get_data(as_text=True)
    reason = "the guideline counts a shared lemma as related"
    r = b.post(f"{url}/adjudicate", {"item": str(target.item), "label": other, "reason": reason})
    assert r.status_code == 302
    r = b.post(f"{url}/adjudicate", {"item": str(items[-1]), "label": "1", "reason": "decided"})
    assert r.status_code == 302
    page = b.get(url).get_data(as_text=True)
    row = page.split(f'<tr id="item-{target.item}"', 1)[1].split("</tr>", 1)[0]
    assert f"<strong>{other}</strong> (organizer): {reason}" in row

    # now the close is accepted: the new gold version on the page, as the action recorded it
    r = b.post(f"{url}/close", {})
    assert r.status_code == 302, r.get_data(as_text=True)[:500]
    page = b.get(url).get_data(as_text=True)
    with Session(engine_of(app)) as s:
        versions = adjudication.gold_versions(
            s=s, actor=s.get(User, users["org"].id), task="tric-binary"
        )
    mine = [v for v in versions if v.campaign == cid]
    assert len(mine) == 1
    assert f"gold <strong>v{mine[0].version}</strong>" in page and mine[0].sha256[:16] in page
    assert f"Campaign {cid} closed: gold v{mine[0].version}" in page  # the flash
    assert "Close the campaign</button>" not in page and "Apply the majority" not in page
    r = b.post(f"{url}/adjudicate", {"majority": "1"})
    assert r.status_code == 409 and "its decisions are final" in r.get_data(as_text=True)

    # the export: a zip of exactly the action's files
    r = b.get(f"{url}/export.zip")
    assert r.status_code == 200 and r.mimetype == "application/zip"
    assert f"campaign-{cid}-tric-binary.zip" in r.headers["Content-Disposition"]
    with Session(engine_of(app)) as s:
        files = campaign_exports.export_files(s=s, actor=s.get(User, users["org"].id), campaign=cid)
    z = zipfile.ZipFile(io.BytesIO(r.data))
    assert {n: z.read(n) for n in z.namelist()} == files
    assert "decisions.csv" in files and "@x.org" not in files["judgments.csv"].decode()


def test_condensed_metrics_on_the_submission_page_and_not_on_the_board(world):
    """A result's `condensed` block (the scorer writes it once a campaign judged pairs): its
    values beside the ordinary ones with the unjudged count, where the page shows the run's
    scores (the organizers, the run's own team); never on the public board."""
    from server.models import Score

    app = world["app"]
    phase = make_phase(app, "loci-similes", "test", public_fraction=1.0)
    make_user(app, "lp@x.org", team="loci-team")  # a team of the task (no competition of it)
    with Session(engine_of(app), expire_on_commit=False) as s:
        team = s.exec(select(Team).where(Team.name == "loci-team")).one()
    sub = make_submission(app, team=team, phase=phase, scores={"all": 0.4321}, method="cond-run")
    with Session(engine_of(app)) as s:
        sc = s.exec(select(Score).where(Score.submission_id == sub.id)).one()
        ordinary = sc.result["metrics"]["all"]
        # the condensed values of this run: each ordinary ranking value, a little higher
        cond = {m: round(v + 0.1234, 6) for m, v in ordinary.items() if "@" in m}
        sc.result = {
            **sc.result,
            "condensed": {"metrics": {"all": cond}, "unjudged": 37, "judged": 5, "notes": []},
        }
        s.add(sc)
        s.commit()
    admin, own = Browser(app.test_client()), Browser(app.test_client())
    admin.login("admin@x.org")
    own.login("lp@x.org")
    for who, b in (("admin", admin), ("the run's team", own)):
        page = b.get(f"/submissions/{sub.id}").get_data(as_text=True)
        assert 'id="condensed-all"' in page, who
        assert 'data-unjudged="37">37 predictions unjudged</strong>, 5 judged' in page, who
        for m, v in cond.items():
            row = page.split(f'data-condensed="{m}">', 1)
            assert len(row) == 2 and row[1].startswith(f"{v:.4f}<"), (who, m)
            assert (
                row[0]
                .rsplit("<tr>", 1)[1]
                .endswith(f'<td>{m}</td><td class="num">{ordinary[m]:.4f}</td><td class="num" ')
            ), (who, m)
    for who in ("a3", "participant"):
        r = world["browsers"][who].get(f"/submissions/{sub.id}")
        assert r.status_code in (403, 404) and "condensed" not in r.get_data(as_text=True), who
    for b in (Browser(app.test_client()), admin):
        board = b.get("/tasks/loci-similes/leaderboard").get_data(as_text=True)
        assert "cond-run" in board
        assert "condensed" not in board.lower() and f"{cond['map@10']:.4f}" not in board
