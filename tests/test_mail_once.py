"""Mail at most once after the SMTP server accepted it: a sender process killed with SIGKILL in
the middle of a batch of 31 leaves at most the message in flight to be sent again, and the next
run (at once, not after a lease) sends the rest. Against a real SMTP server (aiosmtpd on a local
port) and a real sender process, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mailkit import Mailbox, _free_port
from sqlmodel import Session, select

from server import models
from server.db import get_engine
from server.jobs import outbox
from server.models import OutgoingMail
from server.settings import Settings

REPO = Path(__file__).resolve().parent.parent
N = 31
KILL_AFTER = 5

SENDER = """
import json, sys
from server.jobs import outbox
from server.db import get_engine
from server.settings import Settings
cfg = json.loads(sys.argv[1])
settings = Settings(**cfg["settings"])
outbox.deliver_due(get_engine(cfg["url"]), settings)
"""


class SlowMailbox(Mailbox):
    """Accepts every message, a little slowly (so that a kill lands inside a batch)."""

    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(0.05)
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def slow_box():
    from aiosmtpd.controller import Controller

    b = SlowMailbox()
    ctl = Controller(b, hostname="127.0.0.1", port=_free_port())
    ctl.start()
    b.port = ctl.port
    yield b
    ctl.stop()


def _url(request, kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'mail.db'}"
    url = request.getfixturevalue("pg_server_url")
    eng = get_engine(url)
    models.schema().drop_all(eng)
    return url


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_sender_killed_mid_batch_sends_at_most_one_twice_and_the_rest_at_once(
    request, kind, tmp_path, slow_box
):
    url = _url(request, kind, tmp_path)
    eng = get_engine(url)
    models.schema().create_all(eng)
    with Session(eng) as s:
        outbox.queue_many(
            s,
            [
                {
                    "to": f"p{i:02d}@example.org",
                    "subject": "Test data released",
                    "body": "The test phase is open.\n",
                    "dedup_key": f"announcement:1:{i}",
                    "kind": "announcement",
                }
                for i in range(N)
            ],
        )
        s.commit()
    mail = dict(
        home=str(tmp_path),
        smtp_host="127.0.0.1",
        smtp_port=slow_box.port,
        smtp_security="none",
        base_url="http://palimpsest.test",
        mail_from="org@palimpsest.test",
        mail_max_attempts=3,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-c", SENDER, json.dumps({"url": url, "settings": mail})],
        env=env,
        cwd=REPO,
        stderr=subprocess.PIPE,
    )
    got = slow_box.wait(KILL_AFTER, timeout=60)
    assert len(got) >= KILL_AFTER, proc.stderr.read().decode() if proc.poll() is not None else ""
    os.kill(proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    proc.wait(10)
    before = len(slow_box.messages)
    with Session(eng) as s:
        marked = len(s.exec(select(OutgoingMail).where(OutgoingMail.status == "sent")).all())
    # every accepted message but the one in flight is marked sent already
    assert before - 1 <= marked <= before, (before, marked)
    assert before < N  # the kill landed inside the batch
    # the next run, at once: the dead sender's claim is recognised, the rest goes out now
    stats = outbox.deliver_all(eng, Settings(**mail))
    slow_box.wait(N, timeout=60)
    delay = time.monotonic() - killed_at
    time.sleep(0.3)  # a late duplicate would arrive now
    counts = Counter(m["to"][0] for m in slow_box.messages)
    duplicates = sum(n - 1 for n in counts.values())
    print(
        f"{kind}: killed after {before} of {N} accepted ({marked} marked sent); next run "
        f"{stats}; every message delivered {delay:.2f} s after the kill; {duplicates} duplicate(s)"
    )
    assert set(counts) == {f"p{i:02d}@example.org" for i in range(N)}
    assert duplicates <= 1, counts
    assert stats["released"] == N - marked
    assert delay < 30  # not the lease
    with Session(eng) as s:
        rows = s.exec(select(OutgoingMail)).all()
        assert {r.status for r in rows} == {"sent"}


def test_a_live_senders_claim_is_kept_and_a_dead_ones_on_this_machine_is_not(tmp_path):
    eng = get_engine(f"sqlite:///{tmp_path / 'mail.db'}")
    models.schema().create_all(eng)
    assert outbox.sender_alive(outbox.sender_id()) is True
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    host, pid, started = outbox.sender_id().split("|")
    assert outbox.sender_alive(f"{host}|{p.pid}|{started}") is False
    assert outbox.sender_alive(f"{host}|{os.getpid()}|1") is False  # the pid used again
    assert outbox.sender_alive(f"elsewhere|{os.getpid()}|{started}") is None  # the lease tells
    with Session(eng) as s:
        outbox.queue_many(
            s,
            [
                {"to": f"q{i}@x.org", "subject": "s", "body": "b", "dedup_key": f"k{i}"}
                for i in range(3)
            ],
        )
        s.commit()
    outbox.claim(eng, limit=1)  # this process: alive
    outbox.claim(eng, limit=1, claimer=f"{host}|{p.pid}|{started}")  # a dead one
    outbox.claim(eng, limit=1, claimer="elsewhere|1|1")  # another machine: its lease holds
    assert outbox.release_stuck(eng) == 1
