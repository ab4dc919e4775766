"""Invariants under races, against a served app (gunicorn, 4 processes of 5 threads: 20 requests
at once), on SQLite and PostgreSQL. Each race is 20 real parallel requests released together by a
barrier:

- a team's size cap (3): 20 joins at once leave 3 members;
- with the captain's approval: 20 joins leave at most cap rows, and 20 approvals at once make
  at most cap members, none left pending for good;
- the last owner: two owners removing each other at once (10 requests each) leave one;
- a phase's submission quota (3): 20 uploads at once of 20 different files are 3 runs.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from livekit import _at_once, _code, _codes, _people, _seq, gunicorn_site
from sqlmodel import Session, select

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
N = 20


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(request, home, tmp_path_factory, private_redis_url):
    """A gunicorn serving the app on a fresh database of the kind; yields (url, engine, home)."""
    yield from gunicorn_site(
        request, tmp_path_factory, private_redis_url, name="races", secret="r", tasks_from=home
    )


def _competition(eng, slug: str, **fields) -> int:
    from server.models import Competition

    with Session(eng) as s:
        c = Competition(slug=slug, title=slug, state="visible", data_public=True, **fields)
        s.add(c)
        s.commit()
        return c.id


def _call(url: str, token: str, method: str = "POST", body: dict | None = None):
    req = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _team(eng, cid: int, captain: int, name: str) -> tuple[int, str]:
    from server.models import Team, TeamMember

    with Session(eng) as s:
        t = Team(name=name, invite_code=f"code-{name}", competition_id=cid)
        s.add(t)
        s.flush()
        s.add(TeamMember(competition_id=cid, team_id=t.id, user_id=captain, role="captain"))
        s.commit()
        return t.id, t.invite_code


def _members(eng, team_id: int) -> list:
    from server.models import TeamMember

    with Session(eng) as s:
        return list(s.exec(select(TeamMember).where(TeamMember.team_id == team_id)))


def test_twenty_joins_at_once_keep_the_team_size_cap(served):
    eng, web = served["engine"], served["url"]
    slug = f"cap-{next(_seq)}"
    cid = _competition(eng, slug, team_size_cap=3)
    (captain, _), *joiners = _people(eng, N + 1, "cap")
    tid, code = _team(eng, cid, captain, f"capped-{slug}")
    got = _at_once(
        [
            lambda tok=tok: _call(
                f"{web}/api/v1/team/join", tok, body={"invite_code": code, "competition": slug}
            )
            for _, tok in joiners
        ]
    )
    rows = _members(eng, tid)
    print(f"{served['kind']}: cap 3, {N} joins at once: {_codes(got)}; {len(rows)} members")
    assert len(rows) == 3, [(r.user_id, r.status) for r in rows]
    assert sum(1 for st, _ in got if st == 200) == 2
    assert all(st == 409 and _code(b) == "team_full" for st, b in got if st != 200), got


def test_joins_waiting_for_the_captain_never_pass_the_cap_nor_wait_for_good(served):
    eng, web = served["engine"], served["url"]
    slug = f"appr-{next(_seq)}"
    cid = _competition(eng, slug, team_size_cap=3, join_needs_captain=True)
    (captain, ctok), *joiners = _people(eng, N + 1, "appr")
    tid, code = _team(eng, cid, captain, f"approved-{slug}")
    got = _at_once(
        [
            lambda tok=tok: _call(
                f"{web}/api/v1/team/join", tok, body={"invite_code": code, "competition": slug}
            )
            for _, tok in joiners
        ]
    )
    rows = _members(eng, tid)
    pending = [r.user_id for r in rows if r.status == "pending"]
    assert len(rows) == 3 and len(pending) == 2, [(r.user_id, r.status) for r in rows]
    # the captain approves each waiting person 10 times at once
    got2 = _at_once(
        [
            lambda uid=uid: _call(
                f"{web}/api/v1/team/members/{uid}?competition={slug}&approve=1", ctok
            )
            for uid in pending
            for _ in range(N // 2)
        ]
    )
    rows = _members(eng, tid)
    print(
        f"{served['kind']}: cap 3 with approval, {N} joins: {_codes(got)}; {N} approvals: "
        f"{_codes(got2)}; {len(rows)} rows, "
        f"{sum(r.status == 'pending' for r in rows)} pending"
    )
    assert len(rows) == 3 and {r.status for r in rows} == {"active"}, rows
    assert sum(1 for st, _ in got2 if st == 200) == 2, got2


def test_two_owners_removing_each_other_at_once_leave_one(served):
    from server.models import CompetitionRole

    eng, web = served["engine"], served["url"]
    slug = f"own-{next(_seq)}"
    cid = _competition(eng, slug)
    (a, atok), (b, btok) = _people(eng, 2, "own")
    with Session(eng) as s:
        s.add(CompetitionRole(competition_id=cid, user_id=a, role="owner"))
        s.add(CompetitionRole(competition_id=cid, user_id=b, role="owner"))
        s.commit()
    got = _at_once(
        [
            lambda: _call(f"{web}/api/v1/competitions/{slug}/roles/{b}", atok, "DELETE"),
            lambda: _call(f"{web}/api/v1/competitions/{slug}/roles/{a}", btok, "DELETE"),
        ]
        * (N // 2)
    )
    with Session(eng) as s:
        owners = list(
            s.exec(
                select(CompetitionRole.user_id).where(
                    CompetitionRole.competition_id == cid, CompetitionRole.role == "owner"
                )
            )
        )
    print(
        f"{served['kind']}: two owners removing each other ({N} requests): {_codes(got)}; "
        f"owners {owners}"
    )
    assert len(owners) == 1, owners
    assert 500 not in [st for st, _ in got]


def test_twenty_uploads_at_once_keep_the_phase_quota(served):
    from server.demo import predictions
    from server.domain.submissions import ensure_phases
    from server.models import Phase, Submission

    eng, web, home = served["engine"], served["url"], served["home"]
    os.environ["PALIMPSEST_HOME"] = str(home)
    with Session(eng) as s:
        ensure_phases(s)
        p = s.exec(select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "dev")).one()
        p.total_limit, p.daily_limit, p.concurrent_limit = 3, None, None
        s.add(p)
        s.commit()
    ((captain, tok),) = _people(eng, 1, "quota")
    from server.domain.people import ensure_competition
    from server.models import Competition

    with Session(eng) as s:
        c = ensure_competition(s, "tric-binary")
        s.commit()
        cid = c.id
        assert s.get(Competition, cid).state == "visible"
    tid, _ = _team(eng, cid, captain, f"quota-{next(_seq)}")
    files = [predictions("tric-binary", "dev", home, noise=0.3, seed=i) for i in range(N)]

    def upload(data: bytes, name: str):
        b = "----palimpsest-race"
        part = f"--{b}\r\nContent-Disposition: form-data; "
        body = (
            (
                f'{part}name="phase"\r\n\r\ndev\r\n'
                f'{part}name="method_name"\r\n\r\nrace\r\n'
                f'{part}name="file"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{b}--\r\n".encode()
        )
        req = urllib.request.Request(
            f"{web}/api/v1/tasks/tric-binary/submissions",
            data=body,
            headers={
                "Authorization": f"Bearer {tok}",
                "Content-Type": f"multipart/form-data; boundary={b}",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    got = _at_once([lambda f=f: upload(*f) for f in files])
    with Session(eng) as s:
        runs = list(s.exec(select(Submission).where(Submission.team_id == tid)))
    print(f"{served['kind']}: quota 3, {N} uploads at once: {_codes(got)}; {len(runs)} runs")
    assert len(runs) == 3, len(runs)
    assert sum(1 for st, _ in got if st in (200, 201, 202)) == 3, _codes(got)
