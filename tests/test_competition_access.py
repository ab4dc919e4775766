"""Who may reach the organizer routes of a competition: the access matrix.

Two competitions, A (task tric-binary) and B (task swissgov-rsd), and seven people: an anonymous
visitor, a participant of A (registered, in a team, with a submission), an assessor of A, an
organizer of B, an organizer of A, an owner of A and a site administrator.

The routes are not listed here: every organizer route of the web app is found by walking
`app.url_map` (the rules under /organizer/ and /competitions/<competition>/, classed by the check
their view is wrapped in), and every API operation by reading the OpenAPI description (the
"organizers" tag, and every change under /competitions/{competition_id}). A new route is so
covered the day it is added; a route the walk cannot place (no organizer check, or a URL argument
with no value for A below) fails the test until it is placed. Each is asked with GET and POST as
each person, with A's ids:
- everyone who does not organize A (the participant, the assessor, B's organizer) gets 403 or
  404, never a success and never a 500, and leaves no row in the audit log;
- A's organizer, A's owner and the administrator get through (a success, a redirect, or a 4xx
  answer about the request, never 403);
- the few routes that name no competition (the dashboard, the lists, the audit log) let B's
  organizer in but show nothing of A, and list for each person what the API lists for them (the
  audit entries, every team's runs, a team's members: server.actions.reads).
"""

from __future__ import annotations

import re

import pytest
from sqlmodel import Session, select
from webkit import Browser, engine_of, make_phase, make_submission, make_token, make_user

from server.actions import campaigns as campaign_actions
from server.actions import competitions as comp
from server.domain import people
from server.models import AuditLog, Registration, Team, TeamMember, User, utcnow
from server.web import auth

DENIED = ("participant", "assessor", "org_b")
ALLOWED = ("org_a", "owner_a", "admin")
MARK = "method-of-comp-a-7f3"  # the method name of A's submission: shown to A's organizers only

# Routes of the walked prefixes that are not organizer routes, each with why:
WEB_PUBLIC = {
    "competitions.show_page",  # /competitions/<competition>/<page>: a public page of it
    "competitions.register",  # a participant's own registration
    "competitions.mail_preferences",  # a registered person's own mail preferences
}
# Operations under /competitions/{competition_id} that are not organizer operations:
API_NOT_ORGANIZER = {
    ("/competitions/{competition_id}", "get"),  # anyone reads a visible competition
    ("/competitions/{competition_id}/registration", "get"),  # a participant's own registration
    ("/competitions/{competition_id}/registration", "post"),
    ("/competitions/{competition_id}/announcements", "get"),  # read as the competition is
    ("/competitions/{competition_id}/mail", "get"),  # a registered person's own preferences
    ("/competitions/{competition_id}/mail", "put"),
}
# The assessment campaigns' operations (tag "assessment"): each is either an organizer
# operation (walked like the others, on a campaign of A) or an assessor's own, with why:
# Operations of the walked ones that ask for more than organizing A, each with why:
API_ADMIN_ONLY = {
    ("/baselines/runs", "get"),  # the baselines queue of every task: site administrators
    ("/competitions/{competition_id}/clone", "post"),  # a new competition: site administrators
}
API_OWNER_ONLY = {
    ("/competitions/{competition_id}/roles", "post"),  # invitations: A's owners
    ("/competitions/{competition_id}/roles/{user_id}", "delete"),  # revocations: A's owners
}
WEB_OWNER_ONLY = {
    ("roles.people", "POST"),  # the invitation form: A's owners
    ("roles.revoke", "POST"),
}
# Assessment campaigns: the organizers' operations are walked with the others (a campaign names
# its competition); an assessor's own pages and operations are not organizer routes (who sees
# what there: tests/test_campaign_pages.py, a matrix over the roles).
WEB_ASSESSOR = {
    "campaigns.assess",  # /campaigns/<campaign_id>/assess: the signed-in assessor's own items
    "campaigns.judge",  # their judgment of one of them
}
API_ASSESSMENT_ORGANIZER = {
    ("/tasks/{task_id}/phases/{phase_name}/campaigns", "post"),
    ("/tasks/{task_id}/phases/{phase_name}/campaigns", "get"),
    ("/campaigns/{campaign_id}", "get"),
    ("/campaigns/{campaign_id}/agreement", "get"),
    ("/campaigns/{campaign_id}/bayes", "post"),
    ("/campaigns/{campaign_id}/bayes", "get"),
    ("/campaigns/{campaign_id}/disagreements", "get"),
    ("/campaigns/{campaign_id}/adjudicate", "post"),
    ("/campaigns/{campaign_id}/close", "post"),
    ("/campaigns/{campaign_id}/export", "get"),
}
API_ASSESSOR = {
    ("/campaigns", "get"),  # the campaigns that give the signed-in person items
    ("/campaigns/{campaign_id}/items", "get"),  # an assessor's own items
    ("/campaigns/{campaign_id}/items/{item_id}/judgment", "put"),  # their own judgment
}


def _wrapper_code(decorator):
    return decorator(lambda: None).__code__


ORGANIZER_CHECK = _wrapper_code(auth.organizer_required)
ADMIN_CHECK = _wrapper_code(auth.admin_required)


@pytest.fixture
def world(app):
    """A and B, the people, their tokens and signed-in browsers, and A's ids."""
    admin = make_user(app, "admin@x.org", organizer=True)
    users = {
        "participant": make_user(app, "participant@x.org", team="team-a"),
        "assessor": make_user(app, "assessor@x.org"),
        "org_b": make_user(app, "org-b@x.org"),
        "org_a": make_user(app, "org-a@x.org"),
        "owner_a": make_user(app, "owner-a@x.org"),
        "admin": admin,
    }
    with Session(engine_of(app), expire_on_commit=False) as s:
        for slug, task in (("comp-a", "tric-binary"), ("comp-b", "swissgov-rsd")):
            comp.create_competition(
                s=s,
                actor=s.get(User, admin.id),
                via="cli",
                competition=slug,
                title=f"Competition {slug[-1].upper()}",
                state="visible",
                tasks=[task],
            )
        a, b = comp.find(s, "comp-a"), comp.find(s, "comp-b")
        for who, cid, role in (
            ("assessor", a.id, people.ASSESSOR),
            ("org_b", b.id, people.ORGANIZER),
            ("org_a", a.id, people.ORGANIZER),
            ("owner_a", a.id, people.OWNER),
        ):
            people.grant(s, cid, s.get(User, users[who].id), role)
        s.add(
            Registration(
                competition_id=a.id,
                user_id=users["participant"].id,
                status="approved",
                terms_accepted_at=utcnow(),
            )
        )
        team = s.exec(select(Team).where(Team.name == "team-a")).one()
        team.competition_id = a.id
        for m in s.exec(select(TeamMember).where(TeamMember.team_id == team.id)):
            m.competition_id = a.id
            s.add(m)
        s.add(team)
        s.commit()
        a_id = a.id
    phase = make_phase(app, "tric-binary", "dev")
    make_phase(app, "swissgov-rsd", "dev")
    with Session(engine_of(app)) as s:  # an assessment campaign of A, its assessor A's
        campaign = campaign_actions.open_campaign(
            s=s,
            actor=None,
            task="tric-binary",
            phase="dev",
            depth=2,
            assessors=["assessor@x.org"],
            per_item=1,
            seed=1,
            via="cli",
        )
    sub = make_submission(app, team=team, phase=phase, scores={"all": 0.5}, method=MARK)
    with Session(engine_of(app)) as s:  # an audit row of A, which B's organizer must not read
        comp.set_page(
            s=s,
            actor=s.get(User, users["owner_a"].id),
            via="web",
            competition="comp-a",
            page="overview",
            title="Overview",
            body_markdown="A",
        )
    browsers = {"anonymous": Browser(app.test_client())}
    tokens = {"anonymous": None}
    for who, u in users.items():
        browsers[who] = Browser(app.test_client())
        browsers[who].login(u.email)
        tokens[who] = make_token(app, u)
    ids = {
        "task_id": "tric-binary",
        "phase_id": phase.id,
        "phase_name": "dev",
        "submission_id": sub.id,
        "competition": "comp-a",
        "competition_id": "comp-a",
        "fmt": "csv",
        "version": 1,
        "campaign_id": campaign.id,
        # a phase's action; a decision on a participant (who is approved already)
        "action": lambda url: "approve" if "/participants/" in url else "freeze",
        "name": "freeze",  # the web's phase action by name
        # the participant: who has no role to revoke, and whom organizers may decide on
        "user_id": users["participant"].id,
    }
    return {
        "app": app,
        "users": users,
        "browsers": browsers,
        "tokens": tokens,
        "ids": ids,
        "a_id": a_id,
    }


def _fill(template: str, ids: dict, pattern: str) -> str:
    def sub(mo):
        name = mo.group(1)
        assert name in ids, f"{template}: no value for <{name}> of competition A; add one to ids"
        value = ids[name]
        return str(value(template) if callable(value) else value)

    return re.sub(pattern, sub, template)


def _audit_by(app, user_ids) -> list:
    with Session(engine_of(app)) as s:
        return [
            (a.actor_id, a.action, a.target)
            for a in s.exec(select(AuditLog).where(AuditLog.actor_id.in_(list(user_ids))))
        ]


# ----------------------------------------------------------------------------- the web


def _web_routes(app) -> list[tuple[str, str, str, str]]:
    """(endpoint, method, URL with A's ids, kind) of every organizer route: kind "organizer"
    (checked against the competition the URL names), "anything" (names none: filtered by what
    the person organizes) or "admin"."""
    out = []
    for rule in app.url_map.iter_rules():
        r = rule.rule
        if rule.endpoint.startswith("campaigns.") and not r.startswith("/organizer/"):
            assert rule.endpoint in WEB_ASSESSOR, f"{r} ({rule.endpoint}): classify it"
            continue
        if not (r.startswith("/organizer/") or r.startswith("/competitions/<competition>/")):
            continue
        if rule.endpoint in WEB_PUBLIC:
            continue
        fn = app.view_functions[rule.endpoint]
        if fn.__code__ is ADMIN_CHECK:
            kind = "admin"
        elif fn.__code__ is ORGANIZER_CHECK:
            kind = "organizer" if rule.arguments else "anything"
        else:
            raise AssertionError(
                f"{r} ({rule.endpoint}) has neither organizer_required nor admin_required: wrap "
                "it, or add it to WEB_PUBLIC with the reason"
            )
        for method in sorted(rule.methods & {"GET", "POST"}):
            out.append((rule.endpoint, method, r, kind))
    return out


def _web_call(b: Browser, method: str, url: str):
    return b.get(url) if method == "GET" else b.post(url, {})


def test_every_organizer_page_of_a_refuses_everyone_who_does_not_organize_it(world):
    app, ids = world["app"], world["ids"]
    routes = _web_routes(app)
    names = {e for e, *_ in routes}
    # the walk found the organizer pages of every kind (a sanity check on the walk itself)
    assert {"organizer.edit_phase", "organizer.hide", "competitions.edit", "roles.people"} <= names
    assert {"organizer.dashboard", "organizer.queue"} <= names
    assert {"campaigns.campaign", "campaigns.phase_campaigns"} <= names
    assert {"campaigns.adjudicate", "campaigns.close", "campaigns.export"} <= names
    checked = 0
    for endpoint, method, template, kind in routes:
        url = _fill(template, ids, r"<(?:\w+:)?(\w+)>")
        r = _web_call(world["browsers"]["anonymous"], method, url)
        assert r.status_code in (302, 403, 404), (endpoint, method, "anonymous", r.status_code)
        if r.status_code == 302:
            assert "/auth/login" in r.headers["Location"], (endpoint, method)
        for who in DENIED + (("org_a", "owner_a") if kind == "admin" else ()):
            r = _web_call(world["browsers"][who], method, url)
            body = r.get_data(as_text=True)
            if kind == "anything" and who == "org_b":
                # B's organizer has pages that name no competition; they show nothing of A
                assert r.status_code < 500 and r.status_code != 403, (endpoint, method, who)
                assert MARK not in body and "comp-a" not in body, (endpoint, method, who)
            else:
                assert r.status_code in (403, 404), (endpoint, method, who, r.status_code)
            checked += 1
    assert _audit_by(app, [world["users"][w].id for w in DENIED]) == []
    for endpoint, method, template, kind in routes:
        url = _fill(template, ids, r"<(?:\w+:)?(\w+)>")
        for who in ALLOWED if kind != "admin" else ("admin",):
            if (endpoint, method) in WEB_OWNER_ONLY and who == "org_a":
                assert _web_call(world["browsers"][who], method, url).status_code == 403
                continue
            r = _web_call(world["browsers"][who], method, url)
            assert r.status_code < 500 and r.status_code != 403, (
                endpoint,
                method,
                who,
                r.status_code,
                r.get_data(as_text=True)[:300],
            )
            checked += 1
    assert checked > 40


def test_the_pages_that_name_no_competition_show_a_to_its_organizers_as_the_api_does(world):
    b = world["browsers"]
    for url in ("/organizer/submissions", "/organizer/submissions?task=tric-binary"):
        assert MARK in b["org_a"].get(url).get_data(as_text=True)
        assert MARK not in b["org_b"].get(url).get_data(as_text=True)
    assert "comp-a/overview" in b["owner_a"].get("/organizer/audit").get_data(as_text=True)
    assert "comp-a/overview" not in b["org_b"].get("/organizer/audit").get_data(as_text=True)
    _the_reads_that_depend_on_who_asks_answer_the_same_on_the_web_and_the_api(world)


# ----------------------------------------------------------------------------- the API


def _api_ops(spec) -> list[tuple[str, str, bool, set]]:
    """(path, method, names a competition, the statuses it declares) of every organizer
    operation and every operation under /competitions/{competition_id} (but API_NOT_ORGANIZER),
    from the OpenAPI description."""
    out = []
    for path, ops in spec["paths"].items():
        for method, o in ops.items():
            mine = path.startswith("/competitions/{competition_id}")
            mine = mine and (path, method) not in API_NOT_ORGANIZER
            if "assessment" in o.get("tags", []):
                assert (path, method) in API_ASSESSMENT_ORGANIZER | API_ASSESSOR, (
                    f"{method} {path}: classify it in API_ASSESSMENT_ORGANIZER or API_ASSESSOR"
                )
                mine = (path, method) in API_ASSESSMENT_ORGANIZER
            if "organizers" in o.get("tags", []) or mine:
                names = bool(
                    re.search(r"\{(task_id|submission_id|competition_id|campaign_id)\}", path)
                )
                out.append((path, method, names, set(o["responses"])))
    return out


def _api_call(c, method, url, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return c.open(f"/api/v1{url}", method=method.upper(), json={}, headers=headers)


def test_every_organizer_operation_on_a_refuses_everyone_who_does_not_organize_it(world):
    app, ids, tokens = world["app"], world["ids"], world["tokens"]
    c = app.test_client()
    ops = _api_ops(c.get("/api/v1/openapi.json").json)
    paths = {p for p, *_ in ops}
    assert {
        "/tasks/{task_id}/phases/{phase_name}",
        "/submissions/{submission_id}/visibility",
        "/competitions/{competition_id}",
        "/competitions/{competition_id}/pages/{page}",
        "/competitions/{competition_id}/roles",
        "/audit",
        "/campaigns/{campaign_id}/agreement",
    } <= paths
    ids = {**ids, "page": "overview"}
    for path, method, names, _declared in ops:
        url = _fill(path, ids, r"\{(\w+)\}")
        r = _api_call(c, method, url, None)
        assert r.status_code == 401, (method, path, "anonymous", r.status_code)
        for who in DENIED:
            r = _api_call(c, method, url, tokens[who])
            if not names and (path, method) not in API_ADMIN_ONLY and who == "org_b":
                assert r.status_code == 200, (method, path, who, r.status_code)
                assert MARK not in r.get_data(as_text=True) and "comp-a" not in r.get_data(
                    as_text=True
                )
                continue
            assert r.status_code in (403, 404), (method, path, who, r.status_code, r.json)
    assert _audit_by(app, [world["users"][w].id for w in DENIED]) == []
    for path, method, _names, declared in ops:
        url = _fill(path, ids, r"\{(\w+)\}")
        for who in ALLOWED:
            r = _api_call(c, method, url, tokens[who])
            refused = (path, method) in API_ADMIN_ONLY and who != "admin"
            refused |= (path, method) in API_OWNER_ONLY and who == "org_a"
            if refused:
                assert r.status_code == 403, (method, path, who, r.status_code)
                continue
            # a declared failure of a service (503: no queue here) is an answer, a 500 never
            ok = r.status_code < 500 or str(r.status_code) in declared
            assert ok and r.status_code not in (403, 500), (
                method,
                path,
                who,
                r.status_code,
                r.get_data(as_text=True)[:300],
            )


# ----------------------------------------------------------------------------- web and API agree

_AUDIT_ROW = re.compile(r"<tr><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>")
_RUN_ROW = re.compile(r'<tr id="sub-(\d+)">')
_MEMBERS = re.compile(r"<h2>{}</h2>\s*<ul>(.*?)</ul>", re.S)
_MEMBER = re.compile(r"<li>([^<\s]+)")


def _web_members(html: str, heading: str) -> list[str]:
    got = re.search(_MEMBERS.pattern.format(heading), html, re.S)
    return _MEMBER.findall(got.group(1)) if got else []


def _the_reads_that_depend_on_who_asks_answer_the_same_on_the_web_and_the_api(world):
    """The audit entries, the organizers' run list and a team's members, asked by each person on
    the web and through the API: the same entries, runs and members (server.actions.reads), or a
    refusal on both."""
    app, b, tokens = world["app"], world["browsers"], world["tokens"]
    c = app.test_client()
    make_submission(  # a run of B, which A's organizers must not list
        app,
        team=make_user(app, "team-b@x.org", team="team-b") and _team(app, "team-b"),
        phase=make_phase(app, "swissgov-rsd", "dev"),
        scores={"all": 0.5},
        method="b-run",
    )
    seen_runs = {}
    for who in ("participant", "assessor", "org_b", "org_a", "owner_a", "admin"):
        h = {"Authorization": f"Bearer {tokens[who]}"}
        web = b[who].get("/organizer/audit?all=1")
        api = c.get("/api/v1/audit?all=1&limit=500", headers=h)
        if who in ("participant", "assessor"):
            assert web.status_code == 403 and api.status_code == 403, who
        else:
            assert web.status_code == 200 and api.status_code == 200, who
            entries = [(e["action"], e["target"]) for e in api.json["items"]]
            assert _AUDIT_ROW.findall(web.get_data(as_text=True)) == entries, who
            assert entries or who == "org_b"
        web = b[who].get("/organizer/submissions")
        api = c.get("/api/v1/submissions?mine=0&limit=500", headers=h)
        assert api.status_code == 200
        if who in ("participant", "assessor"):
            assert web.status_code == 403, who  # and the API lists their own team's runs only
            continue
        runs = [int(x) for x in _RUN_ROW.findall(web.get_data(as_text=True))]
        assert runs == [r["id"] for r in api.json["items"]], who
        seen_runs[who] = runs
    assert len(seen_runs["admin"]) == 2 and seen_runs["org_a"] == seen_runs["owner_a"]
    assert len(seen_runs["org_a"]) == 1 and seen_runs["org_b"] != seen_runs["org_a"]
    # a team's members: in A's team, and through a team of every competition asked in A
    solo = make_user(app, "solo@x.org", team="solo-team")
    b["solo"], tokens["solo"] = Browser(app.test_client()), make_token(app, solo)
    b["solo"].login(solo.email)
    for who, team in (("participant", ["participant@x.org"]), ("solo", ["solo@x.org"])):
        html = b[who].get("/team/?competition=comp-a").get_data(as_text=True)
        api = c.get(
            "/api/v1/team?competition=comp-a", headers={"Authorization": f"Bearer {tokens[who]}"}
        ).json
        active = [m["email"] for m in api["members"] if m["status"] == "active"]
        waiting = [m["email"] for m in api["members"] if m["status"] == "pending"]
        assert _web_members(html, "Members") == active == team, who
        assert _web_members(html, "Waiting to join") == waiting == [], who


def _team(app, name: str) -> Team:
    with Session(engine_of(app), expire_on_commit=False) as s:
        return s.exec(select(Team).where(Team.name == name)).one()
