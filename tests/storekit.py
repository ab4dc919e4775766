"""A whole site built, served and read back: the backup, object store and reconciler tests'
worlds."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from backbone import (
    burst,
    make_team,
    submit,
)
from seaweed import s3_client, s3_env, seaweedfs  # noqa: F401 - the fixture
from sqlalchemy import select
from sqlmodel import Session

from server.actions import adjudication


def _bucket(info) -> dict:
    """A fresh bucket of the session's SeaweedFS, as the settings' environment."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_client(s3_env(info)).create_bucket(Bucket=name)
    return {**s3_env(info), "PALIMPSEST_S3_BUCKET": name}


# scoring the test split takes ~2 s of CPU: long enough that a job is still running 0.3 s after
# it starts and outlives a 1 s job timeout, short enough that its runs stay cheap
DOCS, TOKENS = 20, 8000


@pytest.fixture(scope="session")
def big_home(tmp_path_factory, demo_home) -> Path:
    """swissgov-rsd at a size whose scoring takes seconds, and the demo tasks beside it (copied
    from the run's demo home); built once per run, shared by the xdist workers."""
    import shutil

    from conftest import built_once

    from tasks.demo import sentence, write_jsonl
    from tasks.importers import import_task

    def build(h: Path) -> None:
        shutil.copytree(demo_home / "tasks", h / "tasks")
        src = h / "release" / "SwissGov-RSD"
        gold = src / "data" / "evaluation" / "gold_labels"
        rng = random.Random(0)
        for split, n in (("dev", 1), ("test", DOCS)):
            for lang in ("de", "fr", "it"):
                rows = []
                for i in range(n):
                    ta, tb = sentence(rng, TOKENS), sentence(rng, TOKENS)
                    rows.append(
                        {
                            "id": f"admin_{lang}_{split}_{i}",
                            "text_a": ta,
                            "text_b": tb,
                            "labels_a": [round(rng.random(), 3) for _ in range(TOKENS)],
                            "labels_b": [round(rng.random(), 3) for _ in range(TOKENS)],
                        }
                    )
                write_jsonl(gold / split / f"gold_admin_{lang}.jsonl", rows)
        import_task("swissgov-rsd", h, source=src)
        shutil.rmtree(h / "release")

    return built_once(tmp_path_factory, "big-home", build)


@pytest.fixture(scope="session")
def big_predictions(big_home) -> bytes:
    from server.demo import predictions

    return predictions("swissgov-rsd", "test", big_home, 0.2, seed=5)[0]


def _load(b, team, user, big_predictions, n_small=3):
    big = submit(
        b,
        team,
        user,
        "swissgov-rsd",
        "test",
        data=big_predictions,
        filename="big.jsonl",
        exempt=True,
    )
    small = [
        submit(b, team, user, "tric-binary", "dev", noise=0.1 * i, exempt=True)
        for i in range(n_small)
    ]
    return [big.id] + [s.id for s in small]


TASK, PHASE = "tric-binary", "test"


def _phase(s, name=PHASE):
    from server.models import Phase

    return s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == name)).scalar_one()


def _build(b) -> dict:
    """Teams and runs, a closed and published phase, a campaign closed into gold version 2, the
    runs rescored under it and a second published version."""
    from server.actions import campaigns
    from server.domain import lifecycle, people, publication
    from tasks import get_task

    runs = []
    for i, noise in enumerate((0.05, 0.2, 0.35)):
        team, user = make_team(b, f"team-{i}")
        runs.append(submit(b, team, user, TASK, PHASE, noise=noise).id)
        submit(b, team, user, TASK, "dev", noise=noise)
    burst(b)
    assessors = []
    with b.session() as s:
        comp = people.ensure_competition(s, TASK)
        for k in range(3):
            _, u = make_team(b, f"assessor-{k}")
            u = s.merge(u)
            people.grant(s, comp.id, u, people.ASSESSOR)
            s.commit()
            assessors.append(u)
        lifecycle.close(s, _phase(s), actor=None)
    with b.session() as s:
        publication.publish(s, _phase(s), task=get_task(TASK), actor=None, settings=b.settings)
    with b.session() as s:
        opened = campaigns.open_campaign(
            s=s,
            actor=None,
            task=TASK,
            phase=PHASE,
            depth=2,
            assessors=[u.email for u in assessors],
            per_item=3,
            labels=["0", "1"],
            positive=["1"],
            seed=3,
            via="cli",
            allow_participants=True,  # the drill's assessors are its teams' members
        )
        for k, u in enumerate(assessors):
            mine = campaigns.my_items(s=s, user=s.merge(u), campaign=opened.id)
            for j, it in enumerate(mine.items):
                label = opened.labels[(j + k) % 2 if k < 2 else 0]
                campaigns.judge(
                    s=s,
                    user=s.merge(u),
                    campaign=opened.id,
                    item=it.item,
                    label=label,
                    via="cli",
                )
        adjudication.adjudicate(s=s, actor=None, campaign=opened.id, majority=True, via="cli")
        adjudication.close_campaign(
            s=s,
            actor=None,
            campaign=opened.id,
            via="cli",
        )
    burst(b)  # the rescoring under the new gold
    with b.session() as s:
        rv = publication.publish(
            s, _phase(s), task=get_task(TASK), actor=None, settings=b.settings, reason="new gold"
        )
        assert rv.version == 2
    return {"runs": runs}


def _state(engine) -> dict:
    """What the drill compares: every published output, run, judgment and gold version."""
    from server.models import (
        AssessmentCampaign,
        CampaignDecision,
        GoldVersion,
        Judgment,
        RankingVersion,
        Submission,
        Team,
    )

    with Session(engine) as s:
        return {
            "rankings": [
                (
                    r.task_id,
                    r.phase_name,
                    r.version,
                    r.sha256,
                    r.body_json,
                    r.body_csv,
                    r.body_latex,
                )
                for r in s.execute(select(RankingVersion).order_by(RankingVersion.id)).scalars()
            ],
            "runs": [
                (r.id, r.team_id, r.status, r.storage_key)
                for r in s.execute(select(Submission).order_by(Submission.id)).scalars()
            ],
            "judgments": [
                (j.id, j.assignment_id, j.label)
                for j in s.execute(select(Judgment).order_by(Judgment.id)).scalars()
            ],
            "decisions": [
                (d.id, d.item_id, d.label, d.rule)
                for d in s.execute(select(CampaignDecision).order_by(CampaignDecision.id)).scalars()
            ],
            "campaigns": [
                (c.id, c.state)
                for c in s.execute(
                    select(AssessmentCampaign).order_by(AssessmentCampaign.id)
                ).scalars()
            ],
            "gold": [
                (g.task_id, g.split, g.version, g.sha256)
                for g in s.execute(select(GoldVersion).order_by(GoldVersion.id)).scalars()
            ],
            "teams": sorted(s.execute(select(Team.name)).scalars()),
        }


def _served(home, url, secret) -> dict[str, bytes]:
    """The published ranking as the restored site serves it (pages and API)."""
    from server import create_app

    app = create_app(
        {
            "home": home,
            "env": "testing",
            "database_url": url,
            "redis_url": None,
            "secret_key": secret,
            "PALIMPSEST_ENQUEUE": False,
        }
    )
    c = app.test_client()
    out = {}
    for form in ("json", "csv"):
        r = c.get(f"/tasks/{TASK}/leaderboard.{form}?phase={PHASE}")
        out[form] = (r.status_code, r.data)
    return out
