"""The Bayesian agreement model of an assessment campaign, on demand, in the worker: an organizer's
request is recorded and put on the agreement queue of a real Redis; a worker process fits it and the
stored posterior multi-kappa and diagnostics equal a direct `tasks.agreement_bayes.fit` on the table
that `agreement` measures, with the same seed; one fit at a time per campaign; a fit far too short
to converge is stored as not_converged with what failed and no figure; a queue that cannot be
reached fails the request plainly. The fits need numpyro (the `[agreement]` extra, which CI
installs): those parts are skipped without it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import redis
from campaign_world import world  # noqa: F401 — the fixture
from click.testing import CliRunner
from sqlmodel import Session, select
from webkit import engine_of

from server.actions import campaign_models as model_actions
from server.actions import campaigns as campaign_actions
from server.domain import judgments
from server.exceptions import LifecycleRefused, QueueUnreachable, UploadFieldsInvalid
from server.jobs.dispatch import KEY, Jobs
from server.models import AssessmentCampaign, AuditLog, CampaignModelFit, User
from tasks.agreement_bayes import NotConverged, fit

REPO = Path(__file__).resolve().parent.parent
ASSESSORS = ("a1", "a2", "org")
SETTINGS = {"chains": 4, "warmup": 1000, "samples": 1000}  # the model's defaults
# the worker's fit against a direct one: the plumbing, checked on a fit of half the defaults' draws
# (the model's convergence at its defaults is tests/test_agreement_bayes.py's) at a seed that
# converges with them on this table (SEED: largest R-hat 1.0056; seeds 0 and 2 too, 11 not:
# 1.011), so that its figures are stored and shown
FIT = {"chains": 4, "warmup": 500, "samples": 500}
SEED = 1


def _judged_campaign(world, seed: int = 5) -> int:  # noqa: F811
    """A second campaign on tric-binary/dev: every item to the three assessors, each right about
    a seeded truth with probability 0.85 (labels that agree more than chance, not always)."""
    app, users = world["app"], world["users"]
    rng = random.Random(seed)
    with Session(engine_of(app), expire_on_commit=False) as s:
        got = campaign_actions.open_campaign(
            s=s,
            actor=s.get(User, users["org"].id),
            task="tric-binary",
            phase="dev",
            depth=12,
            assessors=[f"{w}@x.org" for w in ASSESSORS],
            per_item=3,
            labels=["related", "unrelated"],
            seed=seed,
            via="cli",
        )
        truth = {it.id: rng.random() < 0.5 for it in got.items}
        for who in ASSESSORS:
            u = s.get(User, users[who].id)
            for it in campaign_actions.my_items(s=s, user=u, campaign=got.id).items:
                right = rng.random() < 0.85
                label = "related" if truth[it.item] == right else "unrelated"
                campaign_actions.judge(
                    s=s, user=u, campaign=got.id, item=it.item, label=label, via="cli"
                )
    return got.id


def _request(app, org, cid, redis=None, **kw):
    """The action on a session whose queues are `redis` (none: nothing is enqueued)."""
    jobs = Jobs(app.extensions["palimpsest.settings"], redis=redis, enabled=redis is not None)
    with Session(engine_of(app), expire_on_commit=False, info={KEY: jobs}) as s:
        return model_actions.request_bayes(
            s=s, actor=s.get(User, org.id), campaign=cid, via="cli", **kw
        )


def _queue(app, url):
    conn = redis.Redis.from_url(url)
    settings = app.extensions["palimpsest.settings"]
    return conn, settings


def _burst(settings, url):
    """A real worker process on the agreement queue until it is empty (its jobs run in forked
    work horses, as in production)."""
    env = {
        **os.environ,
        "REDIS_URL": url,
        "PALIMPSEST_HOME": str(settings.home),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    env.pop("DATABASE_URL", None)
    p = subprocess.run(
        [sys.executable, "-m", "server.jobs.worker", "--burst", "--queue", "agreement"],
        env=env,
        cwd=REPO,
        timeout=600,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr[-2000:]


@contextlib.contextmanager
def _served(app):
    """The app over real HTTP on a local port, for the command line's API client."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()


def _cli(url, token, *args):
    from cli.main import main

    env = {"PALIMPSEST_SERVER": url, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/nope"}
    return CliRunner().invoke(
        main, ["organizer", "campaign", "bayes", *map(str, args)], env=env, catch_exceptions=False
    )


def _api(app, token, method, path, body=None):
    c = app.test_client()
    return c.open(
        f"/api/v1{path}", method=method, json=body, headers={"Authorization": f"Bearer {token}"}
    )


def test_requests_are_bounded_refused_while_one_waits_and_fail_plainly_without_a_queue(
    world,  # noqa: F811
    redis_tcp_url,
):
    app, org, tokens = world["app"], world["users"]["org"], world["tokens"]
    # the matrix's campaign: six items judged by two of three assessors, all "unrelated"
    small = world["campaign"]
    with pytest.raises(LifecycleRefused, match="at least 5 such items") as e:
        _request(app, org, small)
    assert e.value.code == "too_few_items"
    cid = _judged_campaign(world)
    for bad in ({"chains": 9}, {"warmup": 5}, {"samples": 10**6}, {"seed": -1}):
        with pytest.raises(UploadFieldsInvalid, match=next(iter(bad))):
            _request(app, org, cid, **bad)
        r = _api(app, tokens["org"], "POST", f"/campaigns/{cid}/bayes", bad)
        assert r.status_code == 422, r.json
    # a queue that cannot be reached: the request is recorded as failed and said to be so
    unreachable = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    with pytest.raises(QueueUnreachable, match="the queue was not reachable") as e:
        _request(app, org, cid, redis=unreachable)
    conn, settings = _queue(app, redis_tcp_url)
    first = _request(app, org, cid, redis=conn, **SETTINGS)
    assert first.state == "queued" and first.seed == _campaign_seed(app, cid)
    assert conn.llen("rq:queue:agreement") == 1
    # one at a time: refused while it waits, through the action and through the API
    with pytest.raises(LifecycleRefused, match=f"fit {first.id} .* is still queued"):
        _request(app, org, cid, redis=conn)
    r = _api(app, tokens["org"], "POST", f"/campaigns/{cid}/bayes", {})
    assert r.status_code == 409 and r.json["error"]["code"] == "fit_running", r.json
    assert conn.llen("rq:queue:agreement") == 1
    got = _api(app, tokens["org"], "GET", f"/campaigns/{cid}/bayes").json
    assert [(f["id"], f["state"]) for f in got["fits"]] == [
        (first.id, "queued"),
        (first.id - 1, "failed"),
    ]
    assert "not reachable" in got["fits"][1]["error"]
    # the command line: the list as one JSON document, the refusal as one too, in one line of text
    with _served(app) as url:
        r = _cli(url, tokens["org"], cid, "--show", "--json")
        assert r.exit_code == 0 and json.loads(r.stdout) == got
        r = _cli(url, tokens["org"], cid, "--json")
        assert r.exit_code == 1 and json.loads(r.stdout)["error"]["code"] == "fit_running"
        r = _cli(url, tokens["org"], cid, "--show")
        assert f"fit {first.id} of campaign {cid}: queued (seed" in r.stdout
    # an assessor of the competition is refused; the requests were audited
    assert _api(app, tokens["a1"], "GET", f"/campaigns/{cid}/bayes").status_code in (403, 404)
    with Session(engine_of(app)) as s:
        actions = s.exec(select(AuditLog.action).where(AuditLog.actor_id == org.id)).all()
    assert actions.count("campaign_bayes_request") == 2


def _json_finite(value):
    """`value` as a JSON column gives it back: tuples as lists, a non-finite number as null."""
    if isinstance(value, dict):
        return {k: _json_finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _campaign_seed(app, cid) -> int:
    with Session(engine_of(app)) as s:
        return s.get(AssessmentCampaign, cid).seed


def test_the_worker_fits_what_a_direct_fit_gives_and_refuses_a_fit_that_did_not_converge(
    world,  # noqa: F811
    redis_tcp_url,
):
    pytest.importorskip("numpyro", reason="numpyro is the optional [agreement] extra")
    app, org, tokens = world["app"], world["users"]["org"], world["tokens"]
    cid = _judged_campaign(world)
    conn, settings = _queue(app, redis_tcp_url)
    requested = _request(app, org, cid, redis=conn, seed=SEED, **FIT)
    _burst(settings, redis_tcp_url)
    got = _api(app, tokens["org"], "GET", f"/campaigns/{cid}/bayes").json["fits"][0]
    assert got["id"] == requested.id and got["state"] == "done", (got["error"], got["result"])
    assert got["current"] is True and got["error"] == ""
    # the same table as the agreement measures, fitted directly with the same seed and settings
    with Session(engine_of(app)) as s:
        inputs = judgments.fit_inputs(s, s.get(AssessmentCampaign, cid))
        measured = campaign_actions.agreement(s=s, actor=None, campaign=cid)
    assert got["digest"] == inputs["digest"] and got["judgments"] == inputs["judgments"]
    assert got["result"]["items"] == measured.counts["complete_items"] == inputs["items"]
    assert list(inputs["groups"]) == ["stratum"] and inputs["covariates"] == {}
    direct = fit(inputs["table"], inputs["groups"], inputs["covariates"], seed=SEED, **FIT)
    r = got["result"]
    assert r["kappa"] == direct["average"] and r["marginal"] == direct["marginal"]
    timing = ("seconds", "cpu_seconds")
    assert {k: v for k, v in r["diagnostics"].items() if k not in timing} == {
        k: v for k, v in direct["diagnostics"].items() if k not in timing
    }
    assert r["diagnostics"]["max_rhat"] < 1.01 and r["diagnostics"]["divergences"] == 0
    assert (r["diagnostics"]["warmup"], r["diagnostics"]["samples"]) == (500, 500)
    with _served(app) as url:  # the command line waits for nothing: the newest fit is done
        out = _cli(url, tokens["org"], cid, "--show", "--wait", "--json")
        assert out.exit_code == 0 and json.loads(out.stdout)["result"] == r
        out = _cli(url, tokens["org"], cid, "--show")
        assert f"multi-kappa {r['kappa']['median']:.3f}" in out.stdout, out.stdout
    # the posterior median lies near the empirical multi-kappa of the same table
    emp = measured.overall["multi_kappa"]
    assert abs(r["kappa"]["median"] - emp["value"]) < 0.25, (r["kappa"], emp)
    # the organizer's page shows it, with its interval and diagnostics
    page = world["browsers"]["org"].get(f"/organizer/campaigns/{cid}").get_data(as_text=True)
    assert f"{r['kappa']['median']:.3f}" in page and "Fit the Bayesian model" in page
    assert f"{r['kappa']['95%'][0]:.3f}" in page and "divergent transitions" in page

    # a judgment changed since: the fit no longer describes the judgments stored now
    with Session(engine_of(app), expire_on_commit=False) as s:
        u = s.get(User, world["users"]["a1"].id)
        it = campaign_actions.my_items(s=s, user=u, campaign=cid).items[0]
        flip = "related" if it.label == "unrelated" else "unrelated"
        campaign_actions.judge(s=s, user=u, campaign=cid, item=it.item, label=flip, via="cli")
    got = _api(app, tokens["org"], "GET", f"/campaigns/{cid}/bayes").json["fits"][0]
    assert got["current"] is False

    # far too short to converge: stored as not_converged, what failed said, no figure kept, and
    # why: the refused fit's diagnostics, those a direct fit with the same seed and settings is
    # refused with (its R-hat, ESS, divergences and settings)
    short = _request(app, org, cid, redis=conn, seed=0, chains=2, warmup=10, samples=10)
    _burst(settings, redis_tcp_url)
    with Session(engine_of(app)) as s:
        row = s.get(CampaignModelFit, short.id)
        assert row.state == "not_converged", (row.state, row.error)
        assert "did not converge (largest R-hat" in row.error
        assert not {"kappa", "marginal", "kappa_pair_weighted", "by_level"} & set(row.result)
        kept = row.result["diagnostics"]
    with Session(engine_of(app)) as s:  # the judgments stored now (one was changed above)
        now = judgments.fit_inputs(s, s.get(AssessmentCampaign, cid))
    # (the refusal names R-hat and its bound: `fit`'s message, for every caller)
    with pytest.raises(
        NotConverged, match=r"did not converge \(largest R-hat .* must be below 1.01"
    ) as refused:
        fit(now["table"], now["groups"], now["covariates"], seed=0, chains=2, warmup=10, samples=10)
    want = _json_finite({k: v for k, v in refused.value.diagnostics.items() if k not in timing})
    assert want and {k: v for k, v in kept.items() if k not in timing} == want
    assert (kept["chains"], kept["warmup"], kept["samples"], kept["seed"]) == (2, 10, 10, 0)
    assert kept["max_rhat"] is None or kept["max_rhat"] >= 1.01 or kept["divergences"] > 0
    with _served(app) as url:  # the command line shows why, as the API stores it
        out = _cli(url, tokens["org"], cid, "--show", "--json")
        shown = json.loads(out.stdout)["fits"][0]
        assert shown["id"] == short.id and shown["result"]["diagnostics"] == kept
        out = _cli(url, tokens["org"], cid, "--show")
        assert "the refused fit: R-hat max" in out.stdout, out.stdout
    page = world["browsers"]["org"].get(f"/organizer/campaigns/{cid}").get_data(as_text=True)
    block = page.split('id="bayes"')[1]
    assert (
        "<strong>not converged</strong>" in block and "The fit did not converge (largest" in block
    )
    assert f"{r['kappa']['median']:.3f}" not in block
    assert 'id="bayes-refused-diagnostics">The refused fit: largest R-hat' in block
    assert f"{kept['divergences']} divergent transitions" in block.split("bayes-refused")[1]
    # the button asks for another fit (the worker is idle again)
    b = world["browsers"]["org"]
    resp = b.post(f"/organizer/campaigns/{cid}/bayes", {})
    assert resp.status_code == 302 and resp.headers["Location"].endswith("#bayes")
    with Session(engine_of(app)) as s:
        states = s.exec(
            select(CampaignModelFit.state)
            .where(CampaignModelFit.campaign_id == cid)
            .order_by(CampaignModelFit.id)
        ).all()
    assert states == ["done", "not_converged", "queued"]
    assert np.isfinite(r["expected_agreement"])
