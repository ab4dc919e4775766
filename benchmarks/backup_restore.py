"""Backup, verify and restore of a site with 10,000 runs, the Loci Similes top-100 file among them.

    python benchmarks/backup_restore.py [--runs 10000] [--out /tmp/palimpsest-bench-backup]

The site: the demo tasks imported into a data directory on SQLite, one team, 10,000 distinct
tric-binary runs stored as uploads (their rows bulk-inserted), and the generated Loci Similes
top-100 run (8.3 M links, gzip; `benchmarks/bench_scorer.py` makes it) as one more upload. While
`palimpsest backup` runs, a thread keeps uploading runs through `take_file`, as the site
does for each request; the script reports how many went in during the backup and the slowest
one. Then `palimpsest backup verify` and `palimpsest restore` into a fresh data directory, each
timed in this process (figures in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/palimpsest-bench-backup"))
    a = ap.parse_args()
    out = a.out
    site = out / "site"
    if site.exists():
        shutil.rmtree(site)
    for d in ("archives", "restored"):
        if (out / d).is_file():
            (out / d).unlink()
        shutil.rmtree(out / d, ignore_errors=True)
    site.mkdir(parents=True)
    (out / "archives").mkdir()
    os.environ["PALIMPSEST_HOME"] = str(site)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)

    from benchmarks.bench_scorer import make_loci, make_loci_topk
    from server import backup as bk
    from server.demo import import_demo_tasks, predictions
    from server.domain.submissions import ensure_phases, take_file
    from server.migrate import prepare
    from server.models import Phase, Submission, Team, TeamMember, User
    from server.settings import Settings
    from server.storage import store_upload

    t = time.monotonic()
    import_demo_tasks(site, only_missing=False)
    settings = Settings.from_env(home=site)
    engine = prepare(settings)
    from sqlmodel import Session, select

    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s)
        team = Team(name="bench", invite_code="bench")
        user = User(email="bench@example.org", password_hash="x")
        s.add_all([team, user])
        s.flush()
        s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
        s.commit()
        dev = s.execute(
            select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "dev")
        ).scalar_one()
        dev.concurrent_limit = None
        dev.daily_limit = None
        dev.total_limit = None
        s.commit()
        loci_phase = s.execute(
            select(Phase).where(Phase.task_id == "loci-similes", Phase.name == "test")
        ).scalar_one()
        base, name = predictions("tric-binary", dev.split, site, 0.2, seed=1)
        rows = []
        for i in range(a.runs - 1):
            data = base + f'{{"instanceID": "bench-{i}", "label": 0}}\n'.encode()
            key, sha, size = store_upload(site, data, name)
            rows.append(
                dict(
                    team_id=team.id,
                    user_id=user.id,
                    task_id="tric-binary",
                    phase_id=dev.id,
                    status="scored",
                    file_sha256=sha,
                    storage_key=key,
                    size=size,
                    file_name=name,
                )
            )
        loci = make_loci(out / "loci")
        top = make_loci_topk(out / "loci", loci)["gz"]
        with open(top, "rb") as f:
            key, sha, size = store_upload(site, f, "top100.csv.gz")
        rows.append(
            dict(
                team_id=team.id,
                user_id=user.id,
                task_id="loci-similes",
                phase_id=loci_phase.id,
                status="scored",
                file_sha256=sha,
                storage_key=key,
                size=size,
                file_name="top100.csv.gz",
            )
        )
        s.execute(Submission.__table__.insert(), rows)
        s.commit()
    print(f"site built in {time.monotonic() - t:.1f} s: {a.runs} runs, top-100 file {size} bytes")

    # uploads go on while the backup runs
    stop = threading.Event()
    lat: list[float] = []

    def uploads():
        k = 0
        while not stop.is_set():
            data = base + f'{{"instanceID": "during-{k}", "label": 1}}\n'.encode()
            t0 = time.monotonic()
            with Session(engine, expire_on_commit=False) as s2:
                take_file(
                    s2,
                    user=s2.get(User, user.id),
                    team=s2.get(Team, team.id),
                    task_id="tric-binary",
                    phase="dev",
                    stream=data,
                    filename=name,
                    method_name="m",
                    description="",
                    url="",
                    show_publicly=True,
                    settings=settings,
                    dedupe=False,
                )
                s2.commit()
            lat.append(time.monotonic() - t0)
            k += 1
            time.sleep(0.05)

    th = threading.Thread(target=uploads)
    th.start()
    t0 = time.monotonic()
    try:
        m = bk.backup(settings, out / "archives")
    finally:
        stop.set()
        th.join()
    t_backup = time.monotonic() - t0
    archive = Path(m["archive"])
    print(
        f"backup: {t_backup:.1f} s, {archive.stat().st_size / 2**20:.0f} MiB, "
        f"{len(m['members'])} members; {len(lat)} uploads accepted during it "
        f"(slowest {max(lat) * 1000:.0f} ms)"
        if lat
        else f"backup: {t_backup:.1f} s (no upload finished during it)"
    )
    t0 = time.monotonic()
    rep = bk.verify(settings, archive)
    print(f"verify: {time.monotonic() - t0:.1f} s, ok={rep.ok} {rep.problems[:3]}")
    target = Settings(home=out / "restored", database_url=None, secret_key=settings.secret_key)
    t0 = time.monotonic()
    rep = bk.restore(target, archive)
    print(f"restore: {time.monotonic() - t0:.1f} s, ok={rep.ok} {rep.problems[:3]}")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
