"""The assessment page in Chromium, at 390 px and at 1366 px: an assessor finds the campaign on
the home page, judges items with the keys (1..9 for a label, J/K for next and previous) and with
a click and a comment, leaves and comes back to the first item not judged, and the progress says
so; what is stored is what was pressed. The organizer's campaign page shows the agreement the
`agreement` action computes. The console stays clean and nothing is wider than the window.

Skipped where chromium is missing (failing under CI=true, as the other browser tests).
"""

from __future__ import annotations

import os
import re

import pytest
from browserkit import SHOTS, _body, _errors, _fill, _go, _sign_in, _width, driver, live  # noqa: F401  (live: the server)  # noqa: F401  (driver: Chromium, console read)
from sqlmodel import Session, select
from webkit import engine_of, make_phase, make_user

from server.actions import adjudication
from server.actions import campaigns as campaign_actions
from server.actions import competitions as comp
from server.domain import people
from server.models import CampaignAssignment, Judgment, User

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LABELS = ["related", "unrelated", "unsure"]


@pytest.fixture
def campaign(app):
    """A campaign on tric-binary/dev: 3 items per stratum, each judged by both assessors; a2 has
    judged all of theirs already."""
    admin = make_user(app, "admin@x.org", organizer=True)
    for email in ("a1@x.org", "a2@x.org", "org@x.org"):
        make_user(app, email)
    with Session(engine_of(app), expire_on_commit=False) as s:
        comp.create_competition(
            s=s,
            actor=s.get(User, admin.id),
            via="cli",
            competition="comp-a",
            title="Competition A",
            state="visible",
            tasks=["tric-binary"],
        )
        a = comp.find(s, "comp-a")
        users = {}
        for email, role in (
            ("a1@x.org", people.ASSESSOR),
            ("a2@x.org", people.ASSESSOR),
            ("org@x.org", people.ORGANIZER),
        ):
            users[email] = s.exec(select(User).where(User.email == email)).one()
            people.grant(s, a.id, users[email], role)
        s.commit()
    make_phase(app, "tric-binary", "dev")
    with Session(engine_of(app), expire_on_commit=False) as s:
        got = campaign_actions.open_campaign(
            s=s,
            actor=s.get(User, users["org@x.org"].id),
            task="tric-binary",
            phase="dev",
            depth=3,
            assessors=["a1@x.org", "a2@x.org"],
            per_item=2,
            labels=LABELS,
            guideline="Are the two uses of the passage about **the same topic**?",
            seed=11,
            via="cli",
        )
        a2 = s.get(User, users["a2@x.org"].id)
        for k, it in enumerate(campaign_actions.my_items(s=s, user=a2, campaign=got.id).items):
            campaign_actions.judge(
                s=s, user=a2, campaign=got.id, item=it.item, label=LABELS[k % 2], via="cli"
            )
        a1 = s.get(User, users["a1@x.org"].id)
        order = [i.item for i in campaign_actions.my_items(s=s, user=a1, campaign=got.id).items]
    return {"id": got.id, "order": order, "users": users}


def _key(d, key: str, loads: bool = True) -> None:
    """Press a key on the page (not in a field); wait for the page it opens."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def gone(_):
        # the old page's root is stale once the new page is there; chromedriver sometimes says so
        # with an inspector error ("Node ... does not belong to the document") instead (as in
        # tests/test_browser.py's _go)
        try:
            return EC.staleness_of(old)(_)
        except WebDriverException:
            return True

    old = d.find_element(By.TAG_NAME, "html")
    d.find_element(By.TAG_NAME, "h1").click()  # the focus on the page, out of any field
    d.switch_to.active_element.send_keys(key)
    if loads:
        WebDriverWait(d, 20).until(gone)
        WebDriverWait(d, 20).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )


def _shown_item(d) -> int:
    from selenium.webdriver.common.by import By

    action = d.find_element(By.ID, "judge").get_attribute("action")
    return int(re.search(r"/assess/(\d+)$", action).group(1))


def _check(d, name: str) -> None:
    """The console is clean, nothing is wider than the window; a screenshot when asked for."""
    assert _errors(d) == [], (d.current_url, name)
    overflow = d.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, f"{d.current_url} is {overflow}px wider than the {name} window"
    if os.environ.get("PALIMPSEST_SCREENSHOTS_ALL"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", d.current_url.split("/", 3)[-1].lower()).strip("-")
        d.save_screenshot(str(SHOTS / f"assess-{name}-{slug[:60]}.png"))


def test_an_assessor_judges_with_keys_and_clicks_and_resumes(app, live, driver, campaign):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d, cid, order = driver, campaign["id"], campaign["order"]
    total = len(order)
    assert total == 6  # 3 items in each of tric-binary's two strata, both assessors on each
    pressed: dict[int, tuple[str, str]] = {}

    _width(d, "phone")
    _sign_in(d, live, "a1@x.org")
    # the way in: the home page lists the campaign and the progress
    d.get(live + "/")
    assert f"Campaign {cid}" in _body(d) and f"0 of {total} judged" in _body(d)
    _go(d, d.find_element(By.LINK_TEXT, f"Campaign {cid}"))
    _check(d, "phone")
    assert _shown_item(d) == order[0]
    assert f"0 of {total} judged" in _body(d)
    assert "the same topic" in _body(d)  # the guideline, rendered
    assert d.find_elements(By.CSS_SELECTOR, ".side mark"), "no shared word is marked"

    # keys: 1 judges the first item "related" and goes on; 2 judges the second "unrelated"
    _key(d, "1")
    pressed[order[0]] = ("related", "")
    assert _shown_item(d) == order[1] and f"1 of {total} judged" in _body(d)
    _key(d, "2")
    pressed[order[1]] = ("unrelated", "")
    assert _shown_item(d) == order[2] and f"2 of {total} judged" in _body(d)
    _check(d, "phone")
    # K and the left arrow go back, J and the right arrow forward; a judged item shows its label
    _key(d, "k")
    assert _shown_item(d) == order[1] and "your label: unrelated" in _body(d)
    _key(d, Keys.ARROW_LEFT)
    assert _shown_item(d) == order[0]
    _key(d, "j")
    _key(d, Keys.ARROW_RIGHT)
    assert _shown_item(d) == order[2]
    # a digit typed into the comment is text, not a judgment
    box = d.find_element(By.NAME, "comment")
    box.send_keys("seen 3 times")
    assert _shown_item(d) == order[2]

    # at 1366 px: a click on a label with the comment typed
    _width(d, "wide")
    _check(d, "wide")
    _go(d, d.find_element(By.XPATH, "//button[@name='label'][@value='unsure']"))
    pressed[order[2]] = ("unsure", "seen 3 times")
    assert _shown_item(d) == order[3] and f"3 of {total} judged" in _body(d)

    # leave and come back: the page opens at the first item not judged
    d.get(live + "/")
    assert f"3 of {total} judged" in _body(d)
    d.get(live + f"/campaigns/{cid}/assess")
    assert _shown_item(d) == order[3] and f"3 of {total} judged" in _body(d)
    _check(d, "wide")
    # judge an earlier one again (through the previous link), then the rest with the keys
    _key(d, "k")
    _key(d, "2")
    pressed[order[2]] = ("unrelated", "seen 3 times")  # the comment stays with the item
    assert _shown_item(d) == order[3]
    for k, item in enumerate(order[3:]):
        _key(d, str(k % 3 + 1))
        pressed[item] = (LABELS[k % 3], "")
    assert f"{total} of {total} judged" in _body(d)
    assert f"You have judged all {total} items" in _body(d)
    progress = d.find_element(By.TAG_NAME, "progress")
    assert progress.get_attribute("value") == str(total)
    _check(d, "wide")

    with Session(engine_of(app)) as s:
        stored = s.exec(
            select(CampaignAssignment.item_id, Judgment.label, Judgment.comment)
            .join(Judgment, Judgment.assignment_id == CampaignAssignment.id)
            .where(CampaignAssignment.user_id == campaign["users"]["a1@x.org"].id)
        ).all()
    assert {i: (lab, com) for i, lab, com in stored} == pressed

    # the organizer's page: the agreement the action computes, overall and by stratum
    with Session(engine_of(app)) as s:
        org = s.get(User, campaign["users"]["org@x.org"].id)
        ag = campaign_actions.agreement(s=s, actor=org, campaign=cid, by="stratum")
    assert ag.counts["complete_items"] == total
    _sign_in(d, live, "org@x.org")
    for name in ("phone", "wide"):
        _width(d, name)
        d.get(live + f"/organizer/campaigns/{cid}?by=stratum")
        _check(d, name)
        cell = d.find_element(By.CSS_SELECTOR, '#agreement td[data-measure="multi_kappa"]').text
        mk = ag.overall["multi_kappa"]
        assert cell.startswith(f"{mk['value']:.3f}"), (cell, mk)
        if mk["low"] is not None:
            assert f"[{mk['low']:.3f}, {mk['high']:.3f}]" in cell
        rows = d.find_elements(By.CSS_SELECTOR, "#levels tbody tr")
        assert len(rows) == len(ag.levels)
        for row, lv in zip(rows, ag.levels, strict=True):
            assert lv["level"] in row.text
            got = row.find_element(By.CSS_SELECTOR, 'td[data-measure="multi_kappa"]').text
            v = lv["multi_kappa"]["value"]
            want = "—" if v is None else f"{v:.3f}"
            assert got.startswith(want), (got, lv)
        assert f"{total} of {total}" in d.find_element(By.ID, "assessors").text
        assert f"Over the {ag.overall['items']} items every assigned assessor" in _body(d)
    # the phase's campaigns and the form that opens one, at both widths
    d.find_element(By.PARTIAL_LINK_TEXT, "dev").click()
    for name in ("phone", "wide"):
        _width(d, name)
        d.get(d.current_url)
        _check(d, name)
        assert f"campaign {cid}" in _body(d) and "Open the campaign" in _body(d)


def test_the_organizer_adjudicates_on_the_page(app, live, driver, campaign):  # noqa: F811
    """A second campaign judged by three (one item not all in): the organizer's page lists the
    items needing a decision with each label's count; one click applies the majority rule, a
    label and a reason decide the item left; at both widths, the console clean."""
    from selenium.webdriver.common.by import By

    d = driver
    users = campaign["users"]
    who = ("a1@x.org", "a2@x.org", "org@x.org")
    plan = (("related", "related", "unrelated"), ("unrelated", "related", "unrelated"))
    with Session(engine_of(app), expire_on_commit=False) as s:
        org = s.get(User, users["org@x.org"].id)
        got = campaign_actions.open_campaign(
            s=s,
            actor=org,
            task="tric-binary",
            phase="dev",
            depth=2,
            assessors=list(who),
            per_item=3,
            labels=LABELS,
            seed=5,
            via="cli",
        )
        cid, items = got.id, [it.id for it in got.items]
        for k, iid in enumerate(items):
            for email, label in zip(who, plan[k % 2], strict=True):
                if k == len(items) - 1 and email == "org@x.org":
                    continue  # the last item: not all in
                campaign_actions.judge(
                    s=s,
                    user=s.get(User, users[email].id),
                    campaign=cid,
                    item=iid,
                    label=label,
                    via="cli",
                )
        before = adjudication.disagreements(s=s, actor=org, campaign=cid)
    assert [x.item for x in before.items] == items
    _sign_in(d, live, "org@x.org")
    for name in ("phone", "wide"):
        _width(d, name)
        d.get(live + f"/organizer/campaigns/{cid}")
        _check(d, name)
        rows = d.find_elements(By.CSS_SELECTOR, "#disagreements tbody tr[data-item]")
        assert [int(r.get_attribute("data-item")) for r in rows] == items
        assert f"{len(items)} still need a decision" in _body(d)
        assert d.find_element(By.ID, "close-form").is_displayed()
        assert d.find_element(By.LINK_TEXT, "Download the export").is_displayed()
    # one click: the majority rule
    _width(d, "phone")
    _go(d, d.find_element(By.XPATH, "//button[text()='Apply the majority rule']"))
    _check(d, "phone")
    assert f"The majority rule decided {len(items) - 1} items" in _body(d)
    for k, iid in enumerate(items[:-1]):
        cell = d.find_element(By.CSS_SELECTOR, f"#item-{iid} td.decision").text
        win = max(set(plan[k % 2]), key=plan[k % 2].count)
        assert cell == f"{win} (majority): majority rule", cell
    # closing is refused while the item left has no decision: the page says which
    _go(d, d.find_element(By.XPATH, "//button[text()='Close the campaign']"))
    # the console's one line: the refusal's own status (409), no script error
    errors = _errors(d)
    assert len(errors) == 1 and "/close - " in errors[0] and "status of 409" in errors[0], errors
    _check(d, "phone")
    refused = d.find_element(By.ID, "close-refused").text
    assert f"1 item(s) have no decision yet: {items[-1]} (" in refused, refused
    # the item left: a label and a reason
    _width(d, "wide")
    last = items[-1]
    d.find_element(By.ID, f"reason-{last}").send_keys("the guideline's second rule")
    d.find_element(By.CSS_SELECTOR, f"#label-{last} option[value='unsure']").click()
    _go(d, d.find_element(By.CSS_SELECTOR, f"#item-{last} form.decide button"))
    _check(d, "wide")
    cell = d.find_element(By.CSS_SELECTOR, f"#item-{last} td.decision").text
    assert cell == "unsure (organizer): the guideline's second rule", cell
    assert "0 still need a decision" in _body(d)
    with Session(engine_of(app)) as s:
        after = adjudication.disagreements(
            s=s, actor=s.get(User, users["org@x.org"].id), campaign=cid
        )
    assert after.counts["undecided"] == 0 and after.counts["decided"] == len(items)


def test_the_condensed_metrics_on_a_submission_page(app, live, driver):  # noqa: F811
    """A links run's page with a `condensed` block in its result: the table fits a phone's
    width and the console stays clean."""
    from selenium.webdriver.common.by import By
    from webkit import make_submission

    from server.models import Score, Team

    make_user(app, "admin@x.org", organizer=True)
    make_user(app, "lp@x.org", team="loci-team")
    phase = make_phase(app, "loci-similes", "test", public_fraction=1.0)
    with Session(engine_of(app), expire_on_commit=False) as s:
        team = s.exec(select(Team).where(Team.name == "loci-team")).one()
    sub = make_submission(app, team=team, phase=phase, scores={"all": 0.4321})
    with Session(engine_of(app)) as s:
        sc = s.exec(select(Score).where(Score.submission_id == sub.id)).one()
        cond = {m: v + 0.05 for m, v in sc.result["metrics"]["all"].items() if "@" in m}
        sc.result = {**sc.result, "condensed": {"metrics": {"all": cond}, "unjudged": 12}}
        s.add(sc)
        s.commit()
    for email in ("admin@x.org", "lp@x.org"):
        _sign_in(d := driver, live, email)
        for name in ("phone", "wide"):
            _width(d, name)
            d.get(live + f"/submissions/{sub.id}")
            assert _errors(d) == [], (email, name)
            # the condensed table fits the window (the ordinary scores table of a task with 27
            # metrics is wider than a laptop's: it is not this check's)
            right = d.execute_script(
                "return document.getElementById('condensed-all').getBoundingClientRect().right"
                " - document.documentElement.clientWidth"
            )
            assert right <= 1, (email, name, right)
            if os.environ.get("PALIMPSEST_SCREENSHOTS_ALL"):
                d.find_element(By.ID, "condensed-all").location_once_scrolled_into_view  # noqa: B018
                SHOTS.mkdir(parents=True, exist_ok=True)
                d.save_screenshot(str(SHOTS / f"condensed-{name}-{email.split('@')[0]}.png"))
            cells = d.find_elements(By.CSS_SELECTOR, "#condensed-all td[data-condensed]")
            assert len(cells) == len(cond) and "12 predictions unjudged" in _body(d)
