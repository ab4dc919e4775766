"""An assessment campaign's world (a task, a phase, runs and assessors) and the naive pool the
campaign tests compare with."""

from __future__ import annotations

import csv
import io
import random

import pytest
from apikit import _h, _run_job
from click.testing import CliRunner
from sqlmodel import Session

from tests.conftest import LOCI

TASK, PHASE = "loci-similes", "test"


ASSESSORS = ("a1@example.org", "a2@example.org", "a3@example.org")


def _read(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))[1:]


def _csv(rows) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(("query_id", "source_id", "score"))
    w.writerows(rows)
    return buf.getvalue().encode()


def _runs() -> dict[str, list[tuple[str, str, float]]]:
    """Three runs over every query x source pair, each with its own seeded scores: one boosts the
    gold links, one scores in steps of 0.25 (ties, broken by descending source id), one with a
    link left out per query; and a later run of beta's that is not its primary run."""
    queries = [r[0] for r in _read(LOCI / "hieronymus_samples.csv")]
    sources = [r[0] for r in _read(LOCI / "vergil_samples.csv")]
    gold = {(r[0], r[1]) for r in _read(LOCI / "ground_truth.csv")}
    out = {}
    for name, seed in (("alpha", 1), ("beta", 2), ("gamma", 3), ("beta-late", 4)):
        rng = random.Random(seed)
        rows = []
        for q in queries:
            for s in sources:
                x = rng.random()
                if name == "alpha" and (q, s) in gold:
                    x += 1.0
                if name == "beta":
                    x = round(x * 4) / 4
                if name == "gamma" and s == sources[0]:
                    continue
                if name == "beta-late":
                    x = 5.0 if s == sources[-1] else 0.0
                rows.append((q, s, x))
        out[name] = rows
    return out


def _naive_pool(runs, depth: int) -> set[str]:
    """Each run's top-`depth` per query, the gold links among them included."""
    pool = set()
    for rows in runs:
        by_q: dict[str, list[tuple[float, str]]] = {}
        for q, s, x in rows:
            by_q.setdefault(q, []).append((x, s))
        for q, cands in by_q.items():
            # descending score, ties by descending source id
            cands.sort(reverse=True)
            pool |= {(q, s) for _, s in cands[:depth]}
    return {f"{q}\t{s}" for q, s in pool}


@pytest.fixture()
def world(served):  # noqa: F811
    """The served app with three scored runs on loci-similes/test (beta's primary run is its
    earlier one), three assessors and an organizer of its competition, an organizer of another
    competition (tric-binary's) and a participant (alpha)."""
    from server.domain import people
    from server.domain.accounts import create_token, create_user
    from server.models import Team, TeamMember

    url, tokens, home, app = served
    engine = app.extensions["palimpsest.engine"]
    with Session(engine, expire_on_commit=False) as s:
        loci = people.ensure_competition(s, TASK)
        tric = people.ensure_competition(s, "tric-binary")
        team = Team(name="gamma", invite_code="code-gamma")
        s.add(team)
        s.commit()
        u = create_user(s, email="gamma@example.org", password="correct horse")
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        s.commit()
        _, tokens["gamma"] = create_token(s, user=u)
        for email in ASSESSORS + ("a4@example.org",):
            u = create_user(s, email=email, password="correct horse")
            people.grant(s, loci.id, u, people.ASSESSOR)
            s.commit()
            _, tokens[email.split("@")[0]] = create_token(s, user=u)
        for name, comp in (("lorg", loci), ("torg", tric)):
            u = create_user(s, email=f"{name}@example.org", password="correct horse")
            people.grant(s, comp.id, u, people.ORGANIZER)
            s.commit()
            _, tokens[name] = create_token(s, user=u)
        s.commit()
    c = app.test_client()
    runs = _runs()
    ids = {}
    for name in ("alpha", "beta", "gamma", "beta-late"):
        token = tokens[name.split("-")[0]]
        r = c.post(
            f"/api/v1/tasks/{TASK}/submissions",
            headers=_h(token),
            data={"file": (io.BytesIO(_csv(runs[name])), "run.csv"), "phase": PHASE},
            content_type="multipart/form-data",
        )
        assert r.status_code == 201, r.json
        ids[name] = r.json["id"]
        assert _run_job(ids[name])["status"] == "scored"
    r = c.post(f"/api/v1/submissions/{ids['beta']}/primary", headers=_h(tokens["beta"]))
    assert r.status_code == 200, r.json
    return {
        "url": url,
        "tokens": tokens,
        "app": app,
        "c": c,
        "runs": runs,
        "ids": ids,
        "home": home,
    }


def _cli(url, token, *args, ok=True):
    from cli.main import main

    r = CliRunner().invoke(
        main,
        list(args),
        env={"PALIMPSEST_SERVER": url, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nope"},
        catch_exceptions=False,
    )
    if ok:
        assert r.exit_code == 0, (args, r.output)
    return r


def _vote(email: str, key: str) -> str:
    """A deterministic judgment: a quarter of the items unanimously links, a quarter unanimously
    not, the rest split two to one (either way)."""
    h = sum(ord(ch) for ch in key)
    if h % 4 < 2:
        return ("reference", "no reference")[h % 4]
    return ("reference", "no reference")[(h + ASSESSORS.index(email)) % 2]


def _open_and_judge(world, depth=1):  # noqa: F811
    c, tokens = world["c"], world["tokens"]
    body = {"depth": depth, "assessors": list(ASSESSORS), "per_item": 3, "seed": 7}
    for bad in (["maybe"], ["reference", "no reference"]):  # not a label; every label
        r = c.post(
            f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns",
            headers=_h(tokens["lorg"]),
            json={**body, "positive": bad},
        )
        assert r.status_code == 422 and "positive" in r.json["error"]["message"], r.json
    r = c.post(
        f"/api/v1/tasks/{TASK}/phases/{PHASE}/campaigns", headers=_h(tokens["lorg"]), json=body
    )
    assert r.status_code == 201, r.json
    opened = r.json
    assert opened["positive"] == ["reference"]  # the first label, by default
    runs = world["runs"]
    keys = {it["key"] for it in opened["items"]}
    assert keys == _naive_pool([runs["alpha"], runs["beta"], runs["gamma"]], depth)
    item_of = {it["key"]: it["id"] for it in opened["items"]}
    for a in ASSESSORS:
        for key, iid in item_of.items():
            r = c.put(
                f"/api/v1/campaigns/{opened['id']}/items/{iid}/judgment",
                headers=_h(tokens[a.split("@")[0]]),
                json={"label": _vote(a, key)},
            )
            assert r.status_code == 200, r.json
    return opened, item_of
