"""A competition's people at scale, on the embedded default (SQLite): 1,000 approved participants
in 300 teams, then

1. the competition page (`GET /competitions/<id>`) and `GET /api/v1/competitions/<id>`, median of
   N requests each, and the participants list (`GET /api/v1/competitions/<id>/participants`, its
   first page of 50 with their teams);
2. the announcement request (`POST /api/v1/competitions/<id>/announcements`): the time until it
   returns, with one queued message per participant;
3. delivery of the queue to a local SMTP server (aiosmtpd), checking that every participant got
   exactly one message.

    python3 benchmarks/competition_people.py [--participants 1000] [--teams 300] [--n 30]

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SLUG = "bench"
# the participants list's route (its answer must be 200 to be measured)
PARTICIPANTS = "/api/v1/competitions/{slug}/participants"


class Mailbox:
    """What the local SMTP server received: recipient -> count."""

    def __init__(self):
        self.count: Counter = Counter()
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            for rcpt in envelope.rcpt_tos:
                self.count[rcpt] += 1
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed(app, participants: int, teams: int) -> tuple[str, list[str]]:
    """The competition, its owner (a site administrator, with an API token), its participants
    (approved, each in one of `teams` teams of the competition). Returns (token, emails)."""
    from sqlalchemy import insert
    from sqlmodel import Session, select

    from server.actions import competitions as comp
    from server.domain.accounts import create_user, new_invite_code, new_token
    from server.models import ApiToken, Registration, Team, TeamMember, User, utcnow

    engine = app.extensions["palimpsest.engine"]
    with Session(engine, expire_on_commit=False) as s:
        admin = create_user(s, email="owner@bench.example.org", password="x" * 16, is_admin=True)
        plain, digest = new_token()
        s.add(ApiToken(user_id=admin.id, token_sha256=digest, prefix=plain[:10]))
        s.commit()
        comp.create_competition(
            s=s, actor=admin, via="bench", competition=SLUG, title="Bench", state="visible"
        )
        c = comp.find(s, SLUG)
        now = utcnow()
        # the accounts' password hashes are not what is measured: one shared dummy hash
        first = admin.id + 1
        emails = [f"p{i:05d}@bench.example.org" for i in range(participants)]
        s.execute(
            insert(User),
            [
                {"id": first + i, "email": e, "password_hash": "x", "created_at": now}
                for i, e in enumerate(emails)
            ],
        )
        team_rows = [
            {
                "name": f"bench-team-{t:04d}",
                "invite_code": new_invite_code(),
                "competition_id": c.id,
                "created_at": now,
            }
            for t in range(teams)
        ]
        s.execute(insert(Team), team_rows)
        team_ids = list(s.exec(select(Team.id).where(Team.competition_id == c.id)))
        s.execute(
            insert(Registration),
            [
                {
                    "competition_id": c.id,
                    "user_id": first + i,
                    "status": "approved",
                    "decided_at": now,
                    "created_at": now,
                }
                for i in range(participants)
            ],
        )
        s.execute(
            insert(TeamMember),
            [
                {
                    "competition_id": c.id,
                    "team_id": team_ids[i % teams],
                    "user_id": first + i,
                    "role": "captain" if i < teams else "member",
                    "status": "active",
                    "created_at": now,
                }
                for i in range(participants)
            ],
        )
        s.commit()
    return plain, emails


def timed(fn, n: int) -> dict:
    fn()  # warm
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "median_ms": round(statistics.median(times) * 1000, 2),
        "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1000, 2),
        "n": n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--participants", type=int, default=1000)
    ap.add_argument("--teams", type=int, default=300)
    ap.add_argument("--n", type=int, default=30, help="requests per GET figure")
    args = ap.parse_args()

    from aiosmtpd.controller import Controller

    from server import create_app
    from server.jobs import outbox
    from server.migrate import upgrade
    from server.settings import Settings

    box = Mailbox()
    ctl = Controller(box, hostname="127.0.0.1", port=free_port())
    ctl.start()
    with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as tmp:
        home = Path(tmp)
        os.environ["PALIMPSEST_HOME"] = str(home)
        for var in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(var, None)
        mail = dict(
            smtp_host="127.0.0.1",
            smtp_port=ctl.port,
            smtp_security="none",
            base_url="http://bench.example.org",
        )
        upgrade(Settings(home=home))  # the schema from the migrations, as `palimpsest serve` does
        app = create_app({"home": home, "env": "testing", "PALIMPSEST_ENQUEUE": False, **mail})
        t0 = time.perf_counter()
        token, emails = seed(app, args.participants, args.teams)
        seeded = time.perf_counter() - t0
        c = app.test_client()
        auth = {"Authorization": f"Bearer {token}"}

        def get(url, headers=None):
            def go():
                r = c.get(url, headers=headers)
                assert r.status_code == 200, (url, r.status_code)

            return go

        figures = {
            "competition_page": timed(get(f"/competitions/{SLUG}"), args.n),
            "competition_api": timed(get(f"/api/v1/competitions/{SLUG}"), args.n),
        }
        plist = PARTICIPANTS.format(slug=SLUG)
        if c.get(plist, headers=auth).status_code == 200:
            figures["participants_api"] = timed(get(plist, auth), args.n)
        else:
            figures["participants_api"] = None  # the route is not in this branch

        t0 = time.perf_counter()
        r = c.post(
            f"/api/v1/competitions/{SLUG}/announcements",
            headers=auth,
            json={"title": "Benchmark", "body_markdown": "The **test** phase is open."},
        )
        announce_s = time.perf_counter() - t0
        assert r.status_code == 201, r.get_data(as_text=True)
        recipients = r.json["recipients"]

        engine = app.extensions["palimpsest.engine"]
        t0 = time.perf_counter()
        delivered = outbox.deliver_all(engine, app.extensions["palimpsest.settings"])
        deliver_s = time.perf_counter() - t0
        deadline = time.monotonic() + 30
        while sum(box.count.values()) < len(emails) and time.monotonic() < deadline:
            time.sleep(0.05)
        once = all(box.count[e] == 1 for e in emails)
        extra = sorted(set(box.count) - set(emails))
    ctl.stop()
    print(
        json.dumps(
            {
                "database": "sqlite (embedded default)",
                "participants": args.participants,
                "teams": args.teams,
                "seed_s": round(seeded, 2),
                **figures,
                "announcement": {
                    "request_ms": round(announce_s * 1000, 1),
                    "recipients": recipients,
                },
                "delivery": {
                    "seconds": round(deliver_s, 2),
                    "per_second": round(delivered["sent"] / deliver_s, 1) if deliver_s else None,
                    **{k: v for k, v in delivered.items() if k in ("sent", "retry", "failed")},
                },
                "every_participant_exactly_one_mail": once and not extra,
            }
        )
    )


if __name__ == "__main__":
    main()
