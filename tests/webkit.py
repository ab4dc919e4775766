"""Helpers for the web tests: users, teams, phases, submissions and scores made directly, and a
client that fills in the CSRF token of the session it carries."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import Session, select

from server.domain.accounts import create_user, hash_token, new_invite_code
from server.models import ApiToken, Phase, Score, Submission, Team, TeamMember, User, utcnow

PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def engine_of(app):
    return app.extensions["palimpsest.engine"]


def make_user(
    app, email: str, *, team: str | None = None, organizer: bool = False, baseline: bool = False
) -> User:
    """A user, in a team of that name (created when new) when `team` is given."""
    with Session(engine_of(app), expire_on_commit=False) as s:
        u = create_user(s, email=email, password=PASSWORD, is_admin=organizer)
        if team is not None:
            t = s.exec(select(Team).where(Team.name == team)).first()
            if t is None:
                t = Team(name=team, invite_code=new_invite_code(), is_baseline=baseline)
                s.add(t)
                s.flush()
            s.add(TeamMember(team_id=t.id, user_id=u.id))
        s.commit()
        s.refresh(u)
        return u


def team_of(app, name: str) -> Team:
    with Session(engine_of(app), expire_on_commit=False) as s:
        return s.exec(select(Team).where(Team.name == name)).one()


def make_phase(app, task_id: str, name: str, split: str | None = None, **kw) -> Phase:
    with Session(engine_of(app), expire_on_commit=False) as s:
        p = s.exec(select(Phase).where(Phase.task_id == task_id, Phase.name == name)).first()
        if p is None:
            p = Phase(
                task_id=task_id,
                name=name,
                split=split or name,
                partition_seed=1234,
                public_fraction=1.0 if (split or name) != "test" else 0.5,
            )
        for k, v in kw.items():
            setattr(p, k, v)
        s.add(p)
        s.commit()
        s.refresh(p)
        return p


def update_phase(app, phase_id: int, **kw) -> None:
    with Session(engine_of(app)) as s:
        p = s.get(Phase, phase_id)
        for k, v in kw.items():
            setattr(p, k, v)
        p.revision = (p.revision or 0) + 1
        s.add(p)
        s.commit()


def provenance_for(task, split: str = "test") -> dict:
    """The provenance a score needs to be current (the imported gold of the tests' data
    directory)."""
    import os

    from server.domain.provenance import current_provenance

    prov = current_provenance(task, split, os.environ.get("PALIMPSEST_HOME"))
    return prov or {
        "task_version": task.version,
        "gold_sha256": "0" * 64,
        "scorer_version": "0.1.0",
    }


def result_for(task, value: float, part: str = "all", split: str = "test") -> dict:
    """A scoring contract result with every metric of every subset; the primary one is `value`."""
    metrics = {
        sub: {
            m: (value if (sub, m) == task.primary else round(value / 2 + 0.01 * i, 6))
            for i, m in enumerate(task.metrics)
        }
        for sub in task.subsets
    }
    return {
        "task": task.id,
        "split": "test",
        "primary": {
            "name": task.primary[1],
            "subset": task.primary[0],
            "value": value,
            "greater_is_better": task.greater_is_better,
        },
        "metrics": metrics,
        "notes": [],
        "signature": f"test|part:{part}",
        "provenance": provenance_for(task, split),
    }


def make_submission(
    app,
    *,
    team: Team,
    phase: Phase,
    scores: dict[str, float] | None = None,
    status: str | None = None,
    method: str = "m",
    created_at: datetime | None = None,
    **kw,
) -> Submission:
    """A submission row and, for `scores` {part: primary value}, its Score rows (attempt 1)."""
    from tasks import get_task

    task = get_task(phase.task_id)
    with Session(engine_of(app), expire_on_commit=False) as s:
        sub = Submission(
            team_id=team.id,
            task_id=phase.task_id,
            phase_id=phase.id,
            status=status or ("scored" if scores else "queued"),
            file_sha256="f" * 64,
            method_name=method,
            created_at=created_at or utcnow(),
            is_baseline=kw.pop("is_baseline", team.is_baseline),
            **kw,
        )
        if scores:
            sub.score_attempt = 1
            sub.attempts = 1
        s.add(sub)
        s.flush()
        for part, v in (scores or {}).items():
            r = result_for(task, v, part, phase.split)
            prov = r["provenance"]
            s.add(
                Score(
                    submission_id=sub.id,
                    attempt=1,
                    part=part,
                    result=r,
                    primary_value=v,
                    task_version=prov["task_version"],
                    gold_sha256=prov["gold_sha256"],
                    scorer_version=prov["scorer_version"],
                )
            )
        # what the lifecycle does with every change a board shows: bump the phase's revision
        s.execute(update(Phase).where(Phase.id == phase.id).values(revision=Phase.revision + 1))
        s.commit()
        s.refresh(sub)
        return sub


def make_token(app, user: User) -> str:
    from server.domain.accounts import new_token

    plain, digest = new_token()
    with Session(engine_of(app)) as s:
        s.add(ApiToken(user_id=user.id, token_sha256=digest, prefix=plain[:10]))
        s.commit()
    assert hash_token(plain) == digest
    return plain


class Browser:
    """A test client that signs in and sends each form with its session's CSRF token."""

    def __init__(self, client):
        self.c = client

    def get(self, url, **kw):
        return self.c.get(url, **kw)

    def token(self) -> str:
        page = self.c.get("/auth/login").get_data(as_text=True)
        return _CSRF.search(page).group(1)

    def post(self, url, data=None, *, csrf: bool = True, **kw):
        data = dict(data or {})
        if csrf:
            data.setdefault("csrf_token", self.token())
        return self.c.post(url, data=data, **kw)

    def login(self, email: str, password: str = PASSWORD):
        r = self.post("/auth/login", {"email": email, "password": password})
        assert r.status_code == 302, r.get_data(as_text=True)[:500]
        return r


def later(minutes: int) -> datetime:
    return utcnow() + timedelta(minutes=minutes)
