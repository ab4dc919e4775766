"""The upload is one transaction, by construction: each step of the one intake
(`server.actions.submissions.submit`) failing in turn -- the store push and the file's sync to
disk (each done in a thread, waited for at the commit), the team's lock, the insert, making it the
primary run, the enqueue, the commit -- leaves nothing behind, in the database or the data
directory, queues nothing, and the retry succeeds as a first upload would, with the primary run
set. On the embedded default (SQLite) and on PostgreSQL.

And a race's loser keeps its action's transaction: `decide_member` holds the team's lock while a
registration made in the same action loses a race (a savepoint, not a rollback of the whole), so
parallel approvals never pass the team's cap."""

from __future__ import annotations

import hashlib
import io
import threading
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from seaweed import s3_client, seaweedfs  # noqa: F401 - the fixture
from sqlalchemy import select, text
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session
from storekit import _bucket

from server import api_models as m
from server import models
from server.actions import submissions as sub_actions
from server.db import ForeignTransactionControl, lock_row, savepoint, transaction
from server.demo import predictions
from server.exceptions import StoreUnreachable, TeamRefused
from server.jobs.dispatch import KEY, Jobs
from server.models import Phase, Submission, Team, TeamMember, User

TASK = "tric-binary"


class Injected(RuntimeError):
    """The failure put into one step of the upload."""


class Recorder(Jobs):
    """The session's queues, recording what is handed to them after the commit."""

    def __init__(self, settings):
        super().__init__(settings, enabled=False)
        self.scored: list[int] = []
        self.uploads: list[str | None] = []  # the storage key each is queued with

    def score_now(self, submission_id, upload=None, **_):
        self.scored.append(submission_id)
        self.uploads.append(upload)
        return True


def _db_state(engine) -> dict:
    models.load_all()
    with Session(engine) as s:
        return {
            t.name: sorted(repr(tuple(r)) for r in s.execute(select(t)).all())
            for t in models.schema().sorted_tables
        }


def _dir_state(home) -> dict:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.is_symlink() and "redis" not in p.name
    }


def _team(backend) -> tuple[Team, User]:
    with backend.session() as s:
        team = Team(name=f"team-{uuid.uuid4().hex[:6]}", invite_code=uuid.uuid4().hex)
        user = User(email=f"{uuid.uuid4().hex[:8]}@example.org", password_hash="x")
        s.add_all([team, user])
        s.flush()
        s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
    return team, user


def _once(monkeypatch, target, name, replacement):
    """Replace `target.name` by `replacement` for one call, then put the original back."""
    real = getattr(target, name)
    state = {"fired": False}

    def wrapper(*a, **kw):
        if state["fired"]:
            return real(*a, **kw)
        state["fired"] = True
        return replacement(real, *a, **kw)

    monkeypatch.setattr(target, name, wrapper)
    return state


def _raise(exc):
    def replacement(real, *a, **kw):
        raise exc

    return replacement


def _arm(step, monkeypatch):
    """Make `step` of the upload fail once; returns what says it fired and the error expected."""
    import server.domain.lifecycle
    import server.domain.submissions
    import server.objectstore

    if step == "store push":  # into a real store, in a thread, waited for at the commit
        fault = StoreUnreachable("the object store is unreachable (injected)")
        return _once(
            monkeypatch, server.objectstore, "push_upload", _raise(fault)
        ), StoreUnreachable
    if step == "sync":  # the file made durable under its name, waited for at the commit
        import server.storage

        return _once(
            monkeypatch, server.storage, "_sync_into_place", _raise(Injected("sync"))
        ), Injected
    if step == "lock":
        return _once(
            monkeypatch, server.domain.submissions, "lock_row", _raise(Injected("lock"))
        ), Injected
    if step == "insert":
        state = {"fired": False}
        real = OrmSession.flush

        def flush(self, *a, **kw):
            if not state["fired"] and any(isinstance(o, Submission) for o in self.new):
                state["fired"] = True
                raise Injected("the insert failed")
            return real(self, *a, **kw)

        monkeypatch.setattr(OrmSession, "flush", flush)
        return state, Injected
    if step == "set_primary":
        return _once(
            monkeypatch, server.domain.lifecycle, "set_primary", _raise(Injected("primary"))
        ), Injected
    if step == "enqueue":
        return _once(monkeypatch, Recorder, "score", _raise(Injected("enqueue"))), Injected
    if step == "commit":
        state = {"fired": False}
        real = OrmSession.commit

        def commit(self):
            if not state["fired"]:
                state["fired"] = True
                raise Injected("the commit failed")
            return real(self)

        monkeypatch.setattr(OrmSession, "commit", commit)
        return state, Injected
    raise AssertionError(step)


STEPS = ("store push", "sync", "lock", "insert", "set_primary", "enqueue", "commit")
# the settings of a site on a store, by the environment variables that name them
_S3_FIELDS = {
    "s3_bucket": "PALIMPSEST_S3_BUCKET",
    "s3_endpoint": "PALIMPSEST_S3_ENDPOINT",
    "s3_access_key": "PALIMPSEST_S3_ACCESS_KEY",
    "s3_secret_key": "PALIMPSEST_S3_SECRET_KEY",
}


def _upload(backend, user, data, name, queues):
    fields = m.UploadFields(phase="dev", method_name="m", primary=True)
    with Session(backend.engine, expire_on_commit=False, info={KEY: queues}) as s:
        import io

        sub, duplicate = sub_actions.submit(
            s=s,
            user=s.merge(user),
            task_id=TASK,
            fields=fields,
            stream=io.BytesIO(data),
            filename=name,
            settings=backend.settings,
        )
        return sub, duplicate


def test_each_step_of_the_upload_failing_leaves_nothing_and_the_retry_is_a_first_upload(
    backend,
    monkeypatch,
    seaweedfs,  # noqa: F811
):
    """One team uploads a new file per step; each first attempt fails at that step, the retry
    goes through. The phase allows exactly as many runs as there are steps: a failed attempt that
    left a row (or a counted one) would make the last retry refused. The store's step runs on a
    site with a store (a bucket of the session's SeaweedFS), whose retry puts the file there."""
    bucket = _bucket(seaweedfs)
    with backend.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == "dev")).scalar_one()
        p.total_limit, p.daily_limit, p.concurrent_limit = len(STEPS), None, None
        s.add(p)
    team, user = _team(backend)
    made = []
    for k, step in enumerate(STEPS):
        data, name = predictions(TASK, "dev", backend.settings.home, 0.1 + k / 50, seed=k)
        before = (_db_state(backend.engine), _dir_state(backend.settings.home))
        queues = Recorder(backend.settings)
        with monkeypatch.context() as on_store:
            if step == "store push":
                for field, var in _S3_FIELDS.items():
                    on_store.setattr(backend.settings, field, bucket[var])
            with monkeypatch.context() as mp:
                fired, expect = _arm(step, mp)
                with pytest.raises(expect):
                    _upload(backend, user, data, name, queues)
            assert fired["fired"], f"the upload never reached its {step}"
            after = (_db_state(backend.engine), _dir_state(backend.settings.home))
            changed = [t for t in before[0] if before[0][t] != after[0][t]]
            assert not changed, f"{step}: {changed} changed"
            assert after[1] == before[1], f"{step}: files left {set(after[1]) - set(before[1])}"
            assert queues.scored == [], f"{step}: queued {queues.scored}"
            # the retry: a first upload, not a duplicate of a half-made one, primary, queued once
            queues = Recorder(backend.settings)
            sub, duplicate = _upload(backend, user, data, name, queues)
        if step == "store push":  # the retry's file is in the store, byte for byte
            got = s3_client(bucket).get_object(
                Bucket=bucket["PALIMPSEST_S3_BUCKET"], Key=f"uploads/{sub.storage_key}"
            )
            assert got["Body"].read() == data
        assert not duplicate, step
        assert queues.scored == [sub.id], step
        assert queues.uploads == [sub.storage_key], step  # its file's copy may go with its job
        with Session(backend.engine) as s:
            got = s.get(Submission, sub.id)
            assert got.is_primary and got.status == "queued", step
            primaries = s.execute(
                select(Submission.id).where(
                    Submission.team_id == team.id, Submission.is_primary.is_(True)
                )
            ).all()
            assert [r[0] for r in primaries] == [sub.id], step
        made.append(sub.id)
    assert len(set(made)) == len(STEPS)
    # and the phase is full now: the limit counted every retry, and nothing else
    data, name = predictions(TASK, "dev", backend.settings.home, 0.9, seed=99)
    from server.exceptions import LimitReached

    with pytest.raises(LimitReached):
        _upload(backend, user, data, name, Recorder(backend.settings))


def test_a_system_upload_checks_the_invalid_file_limit_too(backend, monkeypatch):
    """The file and the system path share every rule: a team over its daily count of invalid
    files is refused a system as it is refused a file (the system path once skipped it)."""
    from server.exceptions import LimitReached

    monkeypatch.setattr(backend.settings, "invalid_daily_limit", 1)
    with backend.session() as s:
        p = s.execute(select(Phase).where(Phase.task_id == TASK, Phase.name == "dev")).scalar_one()
        p.accepts, p.total_limit, p.daily_limit, p.concurrent_limit = "both", None, None, None
        s.add(p)
        phase_id = p.id
    team, user = _team(backend)
    with backend.session() as s:
        s.add(
            Submission(
                team_id=team.id,
                user_id=user.id,
                task_id=TASK,
                phase_id=phase_id,
                status="failed",
                failure_kind="invalid",
                file_sha256="0" * 64,
                storage_key="00/" + "0" * 64 + ".jsonl",
                size=1,
            )
        )
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("system.yaml", "command: [python3, run.py]\nruntime: python\n")
        zf.writestr("run.py", "print(1)\n")
    for system, stream, name in (
        (False, b'{"x": 1}\n', "p.jsonl"),
        (True, buf.getvalue(), "s.zip"),
    ):
        with Session(backend.engine, info={KEY: Recorder(backend.settings)}) as s:
            with pytest.raises(LimitReached, match="invalid files"):
                sub_actions.submit(
                    s=s,
                    user=s.merge(user),
                    task_id=TASK,
                    fields=m.UploadFields(phase="dev"),
                    stream=io.BytesIO(stream),
                    filename=name,
                    settings=backend.settings,
                    system=system,
                )


# ------------------------------------------------------------------ the action's transaction


def test_a_commit_or_rollback_inside_an_action_is_refused(backend):
    """Only the action ends its transaction: a commit or a rollback issued inside it raises, and
    nothing of the action stays (every other way: tests/test_transaction_table.py)."""
    for what in ("commit", "rollback"):
        with Session(backend.engine) as s:
            with pytest.raises(ForeignTransactionControl, match=what):
                with transaction(s):
                    s.add(Team(name=f"refused-{what}", invite_code=f"refused-{what}"))
                    s.flush()
                    getattr(s, what)()
        with Session(backend.engine) as s:
            assert s.execute(select(Team).where(Team.name == f"refused-{what}")).first() is None


def test_a_race_loser_keeps_the_action_s_lock_and_writes(backend):
    """The loser of a first-writer-wins insert undoes its own insert only (a savepoint): what the
    action wrote before stays, and so does its lock on the team's row (PostgreSQL: another
    transaction cannot take it)."""
    from sqlalchemy.exc import IntegrityError

    team, _user = _team(backend)
    with Session(backend.engine) as s:
        with transaction(s):
            lock_row(s, Team, team.id)
            s.add(Team(name="kept", invite_code="kept-code"))
            s.flush()
            with pytest.raises(IntegrityError):
                with savepoint(s):
                    s.add(Team(name=team.name, invite_code="another"))  # the name is taken
            if backend.kind == "services":  # the row lock is still this transaction's
                with backend.engine.connect() as other:
                    with pytest.raises(Exception, match="lock"):
                        other.execute(
                            text("SELECT id FROM team WHERE id = :i FOR UPDATE NOWAIT"),
                            {"i": team.id},
                        )
    with Session(backend.engine) as s:
        assert s.execute(select(Team).where(Team.name == "kept")).first() is not None


def test_parallel_approvals_with_racing_registrations_never_pass_the_team_cap(backend):
    """A team of a competition capped at two has its captain and four people waiting to join,
    none registered yet (the competition registers implicitly, so each approval registers the
    person in the approving action, first writer wins). The captain's approvals race each other
    and the people's own registrations; rounds of them leave at most two members, and every
    approval either made a member or was refused as full."""
    from server.domain import people

    with backend.session() as s:
        comp = people.ensure_competition(s, TASK)
        comp.approval, comp.team_size_cap, comp.terms_version = "auto", 2, 0
        s.add(comp)
        cid = comp.id
    for _round in range(3):
        with backend.session() as s:
            comp = s.get(models.Competition, cid)
            team = Team(
                name=f"capped-{uuid.uuid4().hex[:6]}",
                invite_code=uuid.uuid4().hex,
                competition_id=cid,
            )
            captain = User(email=f"c-{uuid.uuid4().hex[:8]}@example.org", password_hash="x")
            waiting = [
                User(email=f"w{i}-{uuid.uuid4().hex[:8]}@example.org", password_hash="x")
                for i in range(4)
            ]
            s.add_all([team, captain, *waiting])
            s.flush()
            s.add(
                TeamMember(team_id=team.id, user_id=captain.id, role="captain", competition_id=cid)
            )
            for w in waiting:
                s.add(
                    TeamMember(
                        team_id=team.id,
                        user_id=w.id,
                        role="member",
                        status="pending",
                        competition_id=cid,
                    )
                )
            people.ensure_registration(s, captain, comp)
            team_id, captain_id, waiting_ids = team.id, captain.id, [w.id for w in waiting]
        outcomes, errors = _race(backend, cid, captain_id, waiting_ids)
        assert not errors, errors
        with Session(backend.engine) as s:
            active = s.execute(
                select(TeamMember.user_id).where(
                    TeamMember.team_id == team_id, TeamMember.status == "active"
                )
            ).all()
            regs = s.execute(
                select(models.Registration.user_id).where(
                    models.Registration.competition_id == cid,
                    models.Registration.user_id.in_(waiting_ids),
                )
            ).all()
        assert len(active) == 2, active
        assert sorted(outcomes) == ["member"] + ["team_full"] * 3, outcomes
        assert sorted(r[0] for r in regs) == sorted(waiting_ids)  # one each, whoever won


def _race(backend, cid, captain_id, waiting_ids):
    """Each waiting person registers (inserted, not yet committed) while the captain approves
    them all at once: on PostgreSQL an approval's own registration of the person waits on the
    person's uncommitted one and loses (first writer wins) under the team's lock."""
    from server.actions import teams as team_actions
    from server.domain import people

    pg = backend.kind == "services"
    flushed = threading.Barrier(len(waiting_ids) + 1)
    outcomes, errors = [], []

    def approve(uid):
        try:
            with Session(backend.engine) as s:
                team_actions.decide_member(
                    s=s,
                    captain=s.get(User, captain_id),
                    competition=s.get(models.Competition, cid),
                    user_id=uid,
                    approve=True,
                )
            outcomes.append("member")
        except TeamRefused as e:
            outcomes.append(e.code)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def register(uid):
        try:
            with Session(backend.engine) as s:
                with transaction(s):
                    people.ensure_registration(s, s.get(User, uid), s.get(models.Competition, cid))
                    s.flush()
                    if pg:  # SQLite: one writer at a time, the registrations go one by one
                        flushed.wait(30)
                    time.sleep(0.5)  # the approvals meanwhile insert the same registration
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    registering = [threading.Thread(target=register, args=(u,)) for u in waiting_ids]
    for t in registering:
        t.start()
    if pg:
        flushed.wait(30)
    approving = [threading.Thread(target=approve, args=(u,)) for u in waiting_ids]
    for t in approving:
        t.start()
    for t in registering + approving:
        t.join(120)
    return outcomes, errors


def test_every_surface_reads_what_an_upload_carries_from_one_declaration(tmp_path):
    """A field every upload carries is declared once (m.UploadFields): the web's form builds its
    inputs from it (label, bound, kind), the remote `submit` its flags, the API reads its body into
    it and answers with what the run keeps, and the intake stores `row()` as the run's columns
    (docs/extending.md measures adding one: the declaration, its column and migration, one line in
    the API's answer and one on the run's page)."""
    from cli.participant.submit import submit, upload_options
    from server.web.forms import SubmitForm, SystemForm, UploadForm

    carried = m.UploadFields.carried()
    assert carried == ["method_name", "description", "url", "show_publicly"]
    assert UploadForm.DECLARED == (*carried, "primary")
    for form in (SubmitForm, SystemForm):
        for name in UploadForm.DECLARED:
            declared = m.UploadFields.model_fields[name]
            assert getattr(form, name).args[0] == declared.title, (form, name)
    assert SubmitForm.description.kwargs["render_kw"]["maxlength"] == 5000
    assert SubmitForm.url.kwargs["render_kw"]["type"] == "url"
    # the remote command's flags: one per declared field, `--private` setting show_publicly to no
    assert [o.name for o in upload_options()] == [*carried, "primary"]
    folder = tmp_path / "system"
    folder.mkdir()
    args = ["tric-binary", "--code", str(folder)]
    ctx = submit.make_context("submit", [*args, "--private", "--url", "https://x.org/p"])
    assert ctx.params["show_publicly"] is False and ctx.params["url"] == "https://x.org/p"
    assert submit.make_context("submit", [*args]).params["show_publicly"] is True
    # what the run keeps: a column of the run per carried field, and the API's answer names each
    fields = m.UploadFields(method_name="  a b ", url=" https://x.org ", primary=True)
    assert list(fields.row()) == carried and fields.row()["method_name"] == "a b"
    assert set(carried) <= set(Submission.model_fields) and set(carried) <= set(
        m.SubmissionOut.model_fields
    )


def test_every_file_enters_through_one_core_with_one_exemption_rule():
    """One intake all the way down: a file is stored, admitted and added only by
    `submissions.take_file` (the action's file path, a blind run's output, the demo, the test kits
    and the benchmarks call it), a system only by the action; the old second intake is gone, and
    the phase's limits are waived by one rule (`exempt_from_limits`) or by a caller that says why
    (`exempt=True`, commented). Read from the source, so a new caller that stores and admits a
    file by itself fails here."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    callers: dict[str, set[str]] = {"store": set(), "admit": set(), "add_submission": set()}
    for path in root.glob("[sbct]*/**/*.py"):
        if ".venv" in path.parts:
            continue
        text_ = path.read_text()
        rel = str(path.relative_to(root))
        assert "create_submission" not in text_ or rel == "tests/test_upload_intake.py", rel
        for node in ast.walk(ast.parse(text_)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name, base = node.func.attr, node.func.value
                if name in callers and getattr(base, "id", "") == "submissions":
                    callers[name].add(rel)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in callers:
                    callers[node.func.id].add(rel)
    # the core's own steps (called inside server/domain/submissions.py), and the action's system
    # branch (a system is stored and admitted as a system: its archive, its compute budget)
    assert callers["store"] == {"server/domain/submissions.py", "server/actions/submissions.py"}
    assert callers["admit"] == {"server/domain/submissions.py", "server/actions/submissions.py"}
    assert callers["add_submission"] == {"server/domain/submissions.py"}


def test_the_one_exemption_rule(backend):
    """The rule both branches of the intake (file and system) ask: a baseline team's upload, or
    one asked as a baseline, is held to no limit, whether or not the upload asked as one; a plain
    team's is."""
    from server.domain.submissions import exempt_from_limits

    with Session(backend.engine) as s:
        team = Team(
            name=f"b-{uuid.uuid4().hex[:6]}", invite_code=uuid.uuid4().hex, is_baseline=True
        )
        plain = Team(name=f"p-{uuid.uuid4().hex[:6]}", invite_code=uuid.uuid4().hex)
        s.add_all([team, plain])
        s.flush()
        assert exempt_from_limits(s, user=None, team=team, task_id="tric-binary")
        assert exempt_from_limits(s, user=None, team=plain, task_id="tric-binary", baseline=True)
        assert not exempt_from_limits(s, user=None, team=plain, task_id="tric-binary")
        s.rollback()


def test_the_upload_request_reads_and_writes_in_a_bounded_number_of_statements(api_env):
    """The API's upload request, for a token first used in the minute (its mark written), counted
    at the database: who asks, the team and the phases, the team's lock, the phase with every
    count, the row, the answer's place in the queue; nothing read twice, nothing per row of the
    file or per waiting run. A new read on the upload's path fails here: make it part of one of
    these, or take it off the request."""
    from sqlalchemy import event

    app, tokens, home = api_env
    c = app.test_client()
    gold = (home / f"tasks/{TASK}/gold/test/gold.jsonl").read_text().splitlines()

    def upload(token, flip):
        import io
        import json

        rows = [json.loads(line) for line in gold]
        data = "".join(
            json.dumps({"instanceID": g["instanceID"], "label": g["label"] ^ (i % flip == 0)})
            + "\n"
            for i, g in enumerate(rows)
        ).encode()
        return c.post(
            f"/api/v1/tasks/{TASK}/submissions",
            data={"phase": "test", "method_name": "m", "file": (io.BytesIO(data), "p.jsonl")},
            headers={"Authorization": f"Bearer {token}"},
        )

    assert len(gold) > 400  # a file of TRoTR's test length: nothing grows with its rows
    # each team's first upload (its registration in the competition made then), and the
    # process's slow-moving estimate inputs read once
    for name in ("alpha", "beta"):
        first = upload(tokens[name], 3)
        assert first.status_code == 201, first.json
    engine = app.extensions["palimpsest.engine"]
    with engine.begin() as conn:  # the token's mark due again: as for its first use in the minute
        conn.execute(text("UPDATE apitoken SET last_used_at = NULL"))
    seen: list[str] = []

    def count(conn, cursor, statement, *a):
        seen.append(" ".join(statement.split())[:120])

    event.listen(engine, "before_cursor_execute", count)
    try:
        r = upload(tokens["beta"], 5)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert r.status_code == 201 and r.json["queue"]["position"] == 3, r.json
    # the token and its user; its mark; the task's competition; the person's role there and
    # registration; the membership with its team; the phases; the team's lock (SQLite's BEGIN
    # IMMEDIATE, PostgreSQL's SELECT ... FOR UPDATE); the phase with every count; the row; the
    # queue, in one read
    assert len(seen) <= 11, "\n".join(seen)
    assert sum(st.startswith("SELECT competition.id") for st in seen) == 1, seen
    assert sum(st.startswith("UPDATE apitoken") for st in seen) == 1, seen


@given(
    data=st.binary(max_size=300),
    limit=st.integers(min_value=0, max_value=200),
    reads=st.lists(st.integers(min_value=-1, max_value=120), max_size=6),
)
def test_a_small_uploads_bytes_are_read_once_and_the_stream_gives_the_same_file(data, limit, reads):
    """The intake reads a file of at most `limit` bytes whole (put into a site's store from memory)
    and hands on a stream of the same bytes, whatever the sizes it is read in (-1: the rest)."""
    from server.domain.submissions import _whole_if_small

    stream, small = _whole_if_small(io.BytesIO(data), limit)
    assert small == (data if len(data) <= limit else None)
    src = io.BytesIO(stream) if isinstance(stream, bytes) else stream
    got = b""
    for n in reads:
        chunk = src.read(n)
        assert len(chunk) == (len(data) - len(got) if n < 0 else min(n, len(data) - len(got)))
        got += chunk
    got += src.read()
    assert got == data and src.read() == b"" and src.read(5) == b""
