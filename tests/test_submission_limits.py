"""Limits counted per team in one transaction: 20 parallel submissions, daily limit 5, exactly 5
in."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from backbone import burst, get, make_team, phase, set_phase, submit
from sqlalchemy import select


def _race(backend, team, user, n=20):
    from server.demo import predictions
    from server.exceptions import LimitReached

    data, name = predictions("tric-binary", "dev", backend.settings.home, 0.2, seed=3)
    barrier = threading.Barrier(n)
    accepted, refused, other = [], [], []

    def one(i):
        from server.domain.submissions import take_file

        barrier.wait()
        try:
            with backend.session() as s:
                sub = take_file(
                    s,
                    user=user,
                    team=team,
                    task_id="tric-binary",
                    phase="dev",
                    stream=data + b"\n" * i,
                    filename=name,
                    method_name=f"run {i}",
                    description="",
                    url="",
                    show_publicly=True,
                    settings=backend.settings,
                    dedupe=False,
                )
            accepted.append(sub.id)
        except LimitReached as e:
            refused.append(e)
        except Exception as e:  # noqa: BLE001
            other.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return accepted, refused, other


def test_twenty_parallel_submissions_against_a_daily_limit_of_five(backend):
    set_phase(backend, "tric-binary", "dev", daily_limit=5, total_limit=None, concurrent_limit=None)
    team, user = make_team(backend)
    accepted, refused, other = _race(backend, team, user)
    assert not other, other
    assert len(accepted) == 5 and len(refused) == 15
    e = refused[0]
    assert e.limit == "daily" and "5" in e.message and "00:00 UTC" in e.message
    assert e.next_allowed_at is not None and e.next_allowed_at.hour == 0


def test_failed_submissions_cost_nothing(backend):
    from server.exceptions import LimitReached

    set_phase(backend, "tric-binary", "dev", daily_limit=2, total_limit=3, concurrent_limit=None)
    team, user = make_team(backend)
    for _ in range(3):  # three invalid files: each refunded once it has failed
        submit(backend, team, user, data=b"garbage\n", filename="x.jsonl")
        burst(backend)
    ok = [submit(backend, team, user, noise=n) for n in (0.1, 0.2)]
    burst(backend)
    assert [get(backend, s.id).status for s in ok] == ["scored", "scored"]
    with pytest.raises(LimitReached) as e:
        submit(backend, team, user)
    assert e.value.limit == "daily"


def test_total_and_concurrent_limits(backend):
    from server.exceptions import LimitReached

    set_phase(backend, "tric-binary", "dev", daily_limit=None, total_limit=None, concurrent_limit=1)
    team, user = make_team(backend)
    submit(backend, team, user)
    with pytest.raises(LimitReached) as e:
        submit(backend, team, user, noise=0.3)
    assert e.value.limit == "concurrent" and "at once" in e.value.message
    burst(backend)
    set_phase(backend, "tric-binary", "dev", total_limit=2)
    submit(backend, team, user, noise=0.3)
    burst(backend)
    with pytest.raises(LimitReached) as e:
        submit(backend, team, user, noise=0.4)
    assert e.value.limit == "total" and e.value.next_allowed_at is None


def test_phase_window(backend):
    from server.exceptions import PhaseClosed
    from server.models import utcnow

    team, user = make_team(backend)
    soon = utcnow() + timedelta(hours=2)
    set_phase(backend, "tric-binary", "dev", opens_at=soon)
    with pytest.raises(PhaseClosed) as e:
        submit(backend, team, user)
    assert "opens at" in str(e.value) and e.value.next_allowed_at == soon
    set_phase(
        backend, "tric-binary", "dev", opens_at=None, closes_at=utcnow() - timedelta(minutes=1)
    )
    with pytest.raises(PhaseClosed) as e:
        submit(backend, team, user)
    assert "closed at" in str(e.value) and e.value.next_allowed_at is None


def test_organizers_and_baselines_are_not_limited(backend):
    set_phase(backend, "tric-binary", "dev", daily_limit=1, concurrent_limit=1)
    org_team, organizer = make_team(backend, organizer=True)
    base_team, base_user = make_team(backend, baseline=True)
    for i in range(3):
        submit(backend, org_team, organizer, noise=0.1 * i)
        submit(backend, base_team, base_user, noise=0.1 * i)


def test_quota_counts_like_the_limits(backend):
    from server.domain.submissions import quota
    from server.models import Phase, Team

    set_phase(backend, "tric-binary", "dev", daily_limit=5, total_limit=10, concurrent_limit=3)
    team, user = make_team(backend)
    submit(backend, team, user)
    submit(backend, team, user, data=b"bad\n", filename="x.jsonl")
    burst(backend)
    with backend.session() as s:
        ph = s.execute(
            select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "dev")
        ).scalar_one()
        q = quota(s, team=s.get(Team, team.id), phase=ph)
        assert quota(s, team_id=team.id, phase=ph) == q
    assert (q["daily_used"], q["daily_left"], q["total_left"], q["running"]) == (1, 4, 9, 0)


def test_parallel_retries_of_one_upload_make_one_submission(backend):
    """Deduplication is checked under the team lock: ten parallel uploads of the same file
    (a client retrying) give one submission; the others name it."""
    from server.demo import predictions
    from server.domain.submissions import take_file
    from server.exceptions import DuplicateSubmission

    set_phase(
        backend, "tric-binary", "dev", daily_limit=None, total_limit=None, concurrent_limit=None
    )
    team, user = make_team(backend)
    data, name = predictions("tric-binary", "dev", backend.settings.home, 0.2, seed=5)
    n = 10
    barrier = threading.Barrier(n)
    made, dupes, other = [], [], []

    def one():
        barrier.wait()
        try:
            with backend.session() as s:
                made.append(
                    take_file(
                        s,
                        user=user,
                        team=team,
                        task_id="tric-binary",
                        phase="dev",
                        stream=data,
                        filename=name,
                        settings=backend.settings,
                        dedupe=True,
                    ).id
                )
        except DuplicateSubmission as e:
            dupes.append(e.submission_id)
        except Exception as e:  # noqa: BLE001
            other.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not other, other
    assert len(made) == 1 and dupes == [made[0]] * (n - 1)


def test_the_one_query_counts_as_the_separate_counts_did(backend):
    """`limit_counts` (the duplicate, the limits and the invalid files in one query) against the
    counts each check made on its own, on runs and code runs of every status, day, removal and
    failure, of this team and phase and of others."""
    import itertools
    from datetime import datetime

    from server.domain import submissions as subs
    from server.models import CodeRun, Submission, utcnow

    team, _ = make_team(backend)
    other, _ = make_team(backend)
    ph = phase(backend, "tric-binary", "dev")
    other_ph = phase(backend, "tric-binary", "test")
    now = utcnow()
    today, yesterday = subs.day_start(now) + timedelta(minutes=1), now - timedelta(days=1, hours=1)
    statuses = ("queued", "running", "scored", "failed")
    kinds = (None, "invalid", "infra")
    removals = ((None, False), (now, False), (now, True))
    with backend.session() as s:
        n = 0
        for st, kind, (rm, by_team), when, sha in itertools.product(
            statuses, kinds, removals, (today, yesterday), ("aa", "bb")
        ):
            for t, p in ((team.id, ph.id), (team.id, other_ph.id), (other.id, ph.id)):
                n += 1
                s.add(
                    Submission(
                        team_id=t, task_id="tric-binary", phase_id=p, status=st,
                        failure_kind=kind if st == "failed" else None, removed_at=rm,
                        removed_by_team=by_team, created_at=when, file_sha256=f"{sha}{n % 3}",
                    )
                )  # fmt: skip
        for stage, kind, when, linked in itertools.product(
            ("queued", "running", "ran", "failed"), (None, "code", "infra"), (today, yesterday),
            (False, True),
        ):  # fmt: skip
            s.add(
                CodeRun(
                    team_id=team.id, task_id="tric-binary", phase_id=ph.id, stage=stage,
                    failure_kind=kind if stage == "failed" else None, archive_sha256="c",
                    created_at=when, submission_id=(
                        s.execute(select(Submission.id).limit(1)).scalar() if linked else None
                    ),
                )
            )  # fmt: skip
        s.commit()
    with backend.session() as s:
        from server.models import Phase

        p = s.get(Phase, ph.id)
        start = subs.day_start(now)
        rows = s.execute(select(Submission).where(Submission.team_id == team.id)).scalars().all()
        runs = s.execute(select(CodeRun).where(CodeRun.team_id == team.id)).scalars().all()
        mine = [r for r in rows if r.phase_id == p.id]
        quota = [r for r in mine if r.removed_at is None or r.removed_by_team]
        code = [r for r in runs if r.phase_id == p.id and r.submission_id is None]
        waiting = [r for r in code if r.stage in ("queued", "running")]
        charged = waiting + [r for r in code if r.stage == "failed" and r.failure_kind == "code"]

        def on(day: datetime) -> bool:
            return day >= start

        for sha in ("aa0", "aa1", "bb2", "zz"):
            got = subs.limit_counts(s, team.id, p, now, sha)
            assert got == {
                "pending": sum(r.status in subs.PENDING for r in quota) + len(waiting),
                "counted": sum(r.status in subs.COUNTED for r in quota) + len(charged),
                "today": sum(r.status in subs.COUNTED and on(r.created_at) for r in quota)
                + sum(on(r.created_at) for r in charged),
                "invalid": sum(
                    r.status == "failed" and r.failure_kind == "invalid" and on(r.created_at)
                    for r in mine
                ),
                "same": subs.duplicate_of(s, team.id, p.id, sha),
            }, sha
        assert subs.limit_counts(s, team.id, p, now)["same"] is None
        assert got["pending"] and got["counted"] and got["today"] and got["invalid"]
        # the upload's read under the team's lock: the phase as committed now and the same
        # counts, in one query (a team without a run in the phase: zeros, not no row)
        with backend.session() as elsewhere:  # an organizer changes the phase meanwhile
            elsewhere.get(Phase, ph.id).daily_limit = 7
            elsewhere.commit()
        for sha in ("aa0", "zz", None):
            read, counts = subs.phase_and_counts(s, team.id, p.id, now, sha)
            assert read is p and p.daily_limit == 7
            assert counts == subs.limit_counts(s, team.id, p, now, sha), sha
        _, none = subs.phase_and_counts(s, other.id, other_ph.id, now, "aa0")
        assert none == {"pending": 0, "counted": 0, "today": 0, "invalid": 0, "same": None}
