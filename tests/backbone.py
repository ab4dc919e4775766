"""Helpers for the scoring-backbone tests: teams, submissions, workers and waiting."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from sqlalchemy import select

REPO = Path(__file__).resolve().parent.parent


def make_team(backend, name=None, *, organizer=False, baseline=False):
    from server.models import Team, User

    with backend.session() as s:
        t = Team(
            name=name or f"team-{uuid.uuid4().hex[:8]}",
            invite_code=uuid.uuid4().hex,
            is_baseline=baseline,
        )
        s.add(t)
        s.flush()
        u = User(
            email=f"{uuid.uuid4().hex[:8]}@example.org",
            password_hash="x",
            is_admin=organizer,
        )
        s.add(u)
        s.flush()
        from server.models import TeamMember

        s.add(TeamMember(team_id=t.id, user_id=u.id, role="captain"))
        s.commit()
        return t, u


def phase(backend, task_id, name):
    from server.models import Phase

    with backend.session() as s:
        return s.execute(
            select(Phase).where(Phase.task_id == task_id, Phase.name == name)
        ).scalar_one()


def set_phase(backend, task_id, name, **values):
    from server.models import Phase

    with backend.session() as s:
        p = s.execute(
            select(Phase).where(Phase.task_id == task_id, Phase.name == name)
        ).scalar_one()
        for k, v in values.items():
            setattr(p, k, v)
        s.add(p)
        s.commit()
        return p


def submit(
    backend,
    team,
    user,
    task_id="tric-binary",
    phase_name="dev",
    data=None,
    *,
    noise=0.1,
    filename="predictions.jsonl",
    enqueue=True,
    home=None,
    **kw,
):
    from server.demo import predictions
    from server.domain.submissions import take_file
    from server.jobs.dispatch import jobs

    if data is None:
        data, filename = predictions(
            task_id,
            phase(backend, task_id, phase_name).split,
            home or backend.settings.home,
            noise,
            seed=1,
        )
    with backend.session() as s:
        sub = take_file(
            s,
            user=user,
            team=team,
            task_id=task_id,
            phase=phase_name,
            stream=data,
            filename=filename,
            method_name="m",
            description="d",
            url="",
            show_publicly=True,
            settings=backend.settings,
            **{"dedupe": False} | kw,  # each call a run of its own, unless asked
        )
        if enqueue:  # queued for scoring once the session commits
            jobs(s).score(s, sub.id)
        return sub


def get(backend, submission_id):
    from server.models import Submission

    with backend.session() as s:
        return s.get(Submission, submission_id)


def scores(backend, submission_id):
    from server.models import Score

    with backend.session() as s:
        return s.execute(select(Score).where(Score.submission_id == submission_id)).scalars().all()


def burst(backend, queues=("scoring", "stats", "baselines")):
    """Run every queued job in-process (RQ's SimpleWorker in burst mode)."""
    from server.jobs.worker import build_worker

    build_worker(backend.settings, queues, backend.conn, simple=True).work(burst=True)


def child_env(backend) -> dict:
    from server.jobs.supervisor import child_env as worker_env

    env = worker_env(backend.settings)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def worker_process(backend, *args, env=None, log=None) -> subprocess.Popen:
    """A real `python -m server.jobs.worker` process in its own process group (output to `log` or a
    pipe)."""
    out = open(log, "ab") if log else subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "server.jobs.worker", *args],
        env=env or child_env(backend),
        cwd=REPO,
        start_new_session=True,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def kill_group(proc: subprocess.Popen) -> None:
    """kill -9 a worker and its work horse at once (RQ's horse runs in a session of its own)."""
    import signal

    import psutil

    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        victims = []
    for pid in [proc.pid] + [c.pid for c in victims]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)


def wait_for(predicate, timeout=60.0, every=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(every)
    return predicate()


def statuses(backend, ids):
    return [get(backend, i).status for i in ids]


def all_final(backend, ids):
    return all(st in ("scored", "failed") for st in statuses(backend, ids))
