"""The site as organizers deploy it, tested as one: PostgreSQL, Redis, SeaweedFS as the object
store and an SMTP server, two web processes (gunicorn), a scoring worker, a code worker (its
systems run in bubblewrap) and the reconciler, each on an empty data directory of its own, sharing
only those services. An organizer creates a bundle's competition (a blind code phase among its
phases) over the API of one web process; teams register and upload through the API of the other
and the command line of the first, and a team's system runs blind on the code worker; the
organizer updates the task while the site runs (both web processes and the workers see the new
version: the runs are rescored under it), reviews and releases the run, and publishes three
phases, six boards in all; the site is backed up and the archive verified; everything is
destroyed (the database, every data directory, the bucket) and the archive restored into a fresh
database, directory and bucket; two fresh web processes on empty data directories then serve every
published output byte for byte, the released run as before."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import build_schema, fresh_pg_database
from livekit import _free_port, _people
from mailkit import box  # noqa: F401 - the fixture
from seaweed import s3_client, seaweedfs  # noqa: F401 - the fixture
from storekit import _bucket

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SYSTEM = REPO / "examples" / "system-sts-latin"
TASK = "sts-latin"
SECRET = "production-shaped-" * 4


def _zip(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder).as_posix())
    return buf.getvalue()


class Site:
    """The site's processes, each started on a data directory of its own."""

    def __init__(self, base: Path, env: dict):
        self.base, self.env, self.procs = base, env, []

    def start(self, name: str, argv: list[str]) -> Path:
        home = self.base / name
        home.mkdir(parents=True)
        env = {**self.env, "PALIMPSEST_HOME": str(home)}
        log = self.base / f"{name}.log"
        p = subprocess.Popen(
            argv,
            env=env,
            cwd=REPO,
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((name, p, log))
        return home

    def web(self, name: str) -> str:
        port = _free_port()
        self.start(
            name,
            [sys.executable, "-m", "gunicorn", "-w", "1", "-k", "gthread", "--threads", "4"]
            + ["-b", f"127.0.0.1:{port}", "--timeout", "300", "server:create_app()"],
        )
        return f"http://127.0.0.1:{port}"

    def stop(self) -> str:
        logs = ""
        for name, p, log in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
            logs += f"--- {name}\n" + log.read_text()[-4000:]
        self.procs = []
        return logs


def _wait_up(url: str, site: Site, deadline: float = 300) -> None:
    import requests

    end = time.monotonic() + deadline
    while True:
        try:
            requests.get(url + "/api/v1/openapi.json", timeout=5)
            return
        except requests.RequestException:
            assert time.monotonic() < end, site.stop()
            time.sleep(0.3)


def _outputs(url: str, token: str, boards: list[tuple[str, str]]) -> dict[str, bytes]:
    """Every published output of every board (phase, board) as a web process serves it (the
    board's JSON and CSV pages and the API's published ranking)."""
    import requests

    h = {"Authorization": f"Bearer {token}"}
    out = {}
    for phase, board in boards:
        q = {"phase": phase, **({"board": board} if board != "main" else {})}
        at = f"{phase}/{board}"
        out[f"{at}.json"] = requests.get(
            f"{url}/tasks/{TASK}/leaderboard.json", params=q, timeout=60
        )
        out[f"{at}.csv"] = requests.get(f"{url}/tasks/{TASK}/leaderboard.csv", params=q, timeout=60)
        out[f"{at}.api"] = requests.get(
            f"{url}/api/v1/tasks/{TASK}/phases/{phase}/rankings/1",
            params={k: v for k, v in q.items() if k == "board"},
            headers=h,
            timeout=60,
        )
    for k, r in out.items():
        assert r.status_code == 200, (url, k, r.status_code, r.text[:500])
    return {k: r.content for k, r in out.items()}


def _bundle(to: Path, *, version: int) -> Path:
    """The example bundle with its phases open now (a year either side), its `systems` phase
    blind; version 2: a new title and one dev gold value changed (a new version of the task)."""
    shutil.copytree(EXAMPLE, to)
    y = (to / "competition.yaml").read_text()
    for old in ("2027-01-10T00:00:00Z", "2027-03-01T00:00:00Z"):
        y = y.replace(f'opens: "{old}"', 'opens: "2026-01-01T00:00:00Z"')
    for old in ("2027-03-01T00:00:00Z", "2027-03-15T23:59:00Z"):
        y = y.replace(f'closes: "{old}"', 'closes: "2028-01-01T00:00:00Z"')
    y = y.replace("        total_limit: 10\n", "        total_limit: 10\n        blind: true\n")
    assert y.count("        blind: true\n") == 1 and y.count("2026-01-01") == 3, y
    if version == 2:
        y = y.replace("    version: 1\n", "    version: 2\n")
        y = y.replace('title: "STS-Latin: how', 'title: "STS-Latin (v2): how')
        gold = to / TASK / "dev" / "dev-gold.jsonl"
        lines = gold.read_text().splitlines()
        row = json.loads(lines[0])
        row["score"] = round(1 - row["score"], 3)
        lines[0] = json.dumps(row)
        gold.write_text("\n".join(lines) + "\n")
    (to / "competition.yaml").write_text(y)
    return to


def _scores(engine, ids: list[int]) -> dict[int, tuple[str, list[int]]]:
    """Each submission's status and the task versions of its scores."""
    from sqlalchemy import select

    from server.models import Score, Submission

    with engine.connect() as c:
        status = dict(
            c.execute(select(Submission.id, Submission.status).where(Submission.id.in_(ids))).all()
        )
        versions: dict[int, list[int]] = {i: [] for i in ids}
        for sid, v in c.execute(
            select(Score.submission_id, Score.task_version).where(Score.submission_id.in_(ids))
        ).all():
            versions[sid].append(v)
    return {i: (status[i], sorted(set(versions[i]))) for i in ids}


def _until(what, ok, site: Site, deadline: float = 600, pause: float = 0.25):
    """Poll `what()` until `ok(got)`; fails with the processes' logs at the deadline."""
    end = time.monotonic() + deadline
    while True:
        got = what()
        if ok(got):
            return got
        assert time.monotonic() < end, (got, site.stop())
        time.sleep(pause)


def test_the_site_as_organizers_deploy_it(tmp_path, redis_tcp_url, seaweedfs, box):  # noqa: F811
    import requests
    from sqlalchemy import create_engine, update

    from server.jobs import sandbox
    from server.models import User

    if sandbox.available():  # the code worker's sandbox (bubblewrap)
        from conftest import service_missing

        service_missing(sandbox.available())
    laps = [("start", time.monotonic())]
    s3 = _bucket(seaweedfs)
    v1 = _bundle(tmp_path / "bundle-v1", version=1)
    v2 = _bundle(tmp_path / "bundle-v2", version=2)
    with contextlib.ExitStack() as stack:
        _name, url = stack.enter_context(fresh_pg_database("palimpsest_site_"))
        build_schema(url)
        engine = create_engine(url)
        stack.callback(engine.dispose)
        (org_id, org), (a_id, tok_a), (b_id, tok_b) = _people(engine, 3, "site")
        with engine.begin() as c:
            c.execute(update(User).where(User.id == org_id).values(is_admin=True))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
        env.update(
            s3,
            DATABASE_URL=url,
            REDIS_URL=redis_tcp_url,
            PALIMPSEST_SECRET_KEY=SECRET,
            PALIMPSEST_SMTP_HOST="127.0.0.1",
            PALIMPSEST_SMTP_PORT=str(box.port),
            PALIMPSEST_SMTP_SECURITY="none",
            PALIMPSEST_BASE_URL="http://palimpsest.test",
            PYTHONPATH=str(REPO),
        )
        site = Site(tmp_path / "site", env)
        stack.callback(site.stop)
        web_a, web_b = site.web("web-a"), site.web("web-b")
        palimpsest = [sys.executable, "-m", "cli.main"]
        site.start(
            "scoring",
            [*palimpsest, "worker", "--queue", "boards", "--queue", "scoring", "--queue", "stats"],
        )
        code_home = site.start("code", [*palimpsest, "worker", "--queue", "runs"])
        site.start("reconciler", [*palimpsest, "reconcile"])
        _wait_up(web_a, site)
        _wait_up(web_b, site)
        laps.append(("site up", time.monotonic()))

        # the organizer creates the competition over web A's API (its phases open now, the code
        # phase blind), and opens it over web B's
        h_org = {"Authorization": f"Bearer {org}"}
        h_a, h_b = {"Authorization": f"Bearer {tok_a}"}, {"Authorization": f"Bearer {tok_b}"}
        r = requests.post(
            f"{web_a}/api/v1/competitions/bundle",
            files={"bundle": ("bundle.zip", _zip(v1))},
            headers=h_org,
            timeout=300,
        )
        assert r.status_code == 201, r.text
        slug = r.json()["id"]
        r = requests.patch(
            f"{web_b}/api/v1/competitions/{slug}", json={"state": "visible"}, headers=h_org
        )
        assert r.status_code == 200, r.text
        # a team through web B's API, another through web A with the command line
        for web, h, uid in ((web_b, h_a, a_id), (web_a, h_b, b_id)):
            r = requests.post(
                f"{web}/api/v1/competitions/{slug}/registration",
                json={"accept_terms": True},
                headers=h,
                timeout=60,
            )
            assert r.status_code == 200, r.text
            if r.json()["status"] != "approved":  # the bundle asks for the organizer's approval
                r = requests.post(
                    f"{web}/api/v1/competitions/{slug}/participants/{uid}/approve",
                    json={},
                    headers=h_org,
                    timeout=60,
                )
                assert r.status_code == 200, r.text
        r = requests.post(
            f"{web_b}/api/v1/team",
            json={"name": "Team API", "competition": slug},
            headers=h_a,
            timeout=60,
        )
        assert r.status_code in (200, 201), r.text
        mine = tmp_path / "cli"
        mine.mkdir()
        cli_env = {**env, "PALIMPSEST_SERVER": web_a, "PALIMPSEST_TOKEN": tok_b}
        cli_env["XDG_CONFIG_HOME"] = str(mine)
        r = subprocess.run(
            [*palimpsest, "teams", "create", "Team CLI", "--competition", slug],
            cwd=mine,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
        laps.append(("competition, teams", time.monotonic()))

        # uploads: the dev file over web B's API; the dev file reordered and the test split's
        # predictions (Track B) with the command line on web A
        dev = (EXAMPLE / "predictions-dev.jsonl").read_bytes()
        r = requests.post(
            f"{web_b}/api/v1/tasks/{TASK}/submissions",
            files={"file": ("dev.jsonl", dev)},
            data={"phase": "development", "method_name": "api"},
            headers=h_a,
            timeout=120,
        )
        assert r.status_code in (200, 201, 202), r.text
        uploads = [r.json()["id"]]
        lines = dev.decode().splitlines()
        (mine / "p.jsonl").write_text("\n".join(reversed(lines)) + "\n")
        subprocess.run(
            [
                sys.executable,
                str(SYSTEM / "predict.py"),
                str(EXAMPLE / TASK / "test" / "inputs.jsonl"),
            ]
            + [str(mine / "t.jsonl")],
            check=True,
        )
        for f, phase, more in (
            ("p.jsonl", "development", []),
            (
                "t.jsonl",
                "evaluation",
                ["--fact", "system_description=overlap", "--fact", "track=B"],
            ),
        ):
            r = subprocess.run(
                [*palimpsest, "submit", TASK, f, "--phase", phase, "--method-name", "cli"]
                + [*more, "--json"],
                cwd=mine,
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert r.returncode == 0, (r.stdout, r.stderr[-3000:], site.stop())
            uploads.append(json.loads(r.stdout)["id"])
        _until(
            lambda: _scores(engine, uploads),
            lambda got: all(st == "scored" for st, _v in got.values()),
            site,
        )
        laps.append(("uploads scored", time.monotonic()))

        # the organizer updates the task while the site runs (web B's API): version 2, a new
        # title, one dev gold value changed; both web processes serve the new declaration and the
        # scoring worker rescores every run under it
        r = requests.post(
            f"{web_b}/api/v1/tasks/{TASK}/versions",
            files={"bundle": ("bundle.zip", _zip(v2))},
            data={"reason": "a gold value corrected"},
            headers=h_org,
            timeout=300,
        )
        assert r.status_code == 200, r.text
        for web in (web_a, web_b):
            got = _until(
                lambda web=web: requests.get(
                    f"{web}/api/v1/tasks/{TASK}", headers=h_a, timeout=60
                ).json(),
                lambda got: got.get("version") == 2,
                site,
                deadline=30,
            )
            assert got["title"].startswith("STS-Latin (v2)"), got
        # a system to the blind phase, through web A's API, after the update: the code worker (on
        # a directory of its own) runs it in bubblewrap on version 2's inputs
        from cli.participant.submit import zip_system

        code = zip_system(SYSTEM, tmp_path / "system.zip").read_bytes()
        r = requests.post(
            f"{web_a}/api/v1/tasks/{TASK}/runs",
            files={"code": ("system.zip", code)},
            data={"phase": "systems", "method_name": "overlap"},
            headers=h_a,
            timeout=120,
        )
        assert r.status_code == 201, r.text
        rid = r.json()["id"]
        run = _until(
            lambda: requests.get(f"{web_b}/api/v1/runs/{rid}", headers=h_org, timeout=60).json(),
            lambda got: (
                got["stage"] == "failed"
                or (got["stage"] == "ran" and got.get("submission_status") in ("scored", "failed"))
            ),
            site,
        )
        assert run["stage"] == "ran" and run["submission_status"] == "scored", (run, site.stop())
        assert run["resources"]["status"] == "ok" and run["cpu_seconds"] > 0, run
        # blind: its team reads nothing of it before the review
        seen = requests.get(f"{web_a}/api/v1/runs/{rid}", headers=h_a, timeout=60).json()
        assert seen.get("log") is None and "LAT-test" not in json.dumps(seen), seen
        assert (code_home / "tasks" / TASK / "declaration.json").is_file()
        hidden = (EXAMPLE / TASK / "test" / "test-gold.jsonl").read_bytes()
        held = [f for f in code_home.rglob("*") if f.is_file() and not f.is_symlink()]
        assert not [f for f in held if f.read_bytes() == hidden], held  # never the hidden gold
        ran = [*uploads, run["submission"]]
        _until(
            lambda: _scores(engine, ran),
            lambda got: (
                all(st == "scored" and v == [2] for st, v in got.values())
                or all(st == "scored" and 2 in v for st, v in got.values())
            ),
            site,
        )
        # rescored with version 2's gold (fetched from the store), not labelled so: the dev run's
        # score moved; the code worker read version 2's declaration
        from sqlalchemy import select

        from server.models import Score

        with engine.connect() as c:
            got = c.execute(
                select(Score.task_version, Score.part, Score.primary_value).where(
                    Score.submission_id == uploads[0]
                )
            ).all()
        by = {v: {(part, x) for w, part, x in got if w == v} for v in (1, 2)}
        assert by[1] and by[2] and by[1] != by[2], got
        said = json.loads((code_home / "tasks" / TASK / "declaration.json").read_text())
        assert said["version"] == 2, said
        laps.append(("update, system ran, rescored", time.monotonic()))
        # the organizer reviews the run on web B and releases it; its team reads it on web A
        r = requests.post(
            f"{web_b}/api/v1/runs/{rid}/review", json={"decision": "release"}, headers=h_org
        )
        assert r.status_code == 200 and r.json()["reviewed"], r.text
        released = requests.get(f"{web_a}/api/v1/runs/{rid}", headers=h_a, timeout=60).json()
        assert released["log"] is not None and released["submission_status"] == "scored", released

        # the statistics' caches in the store (a board's page asks for them), then publication of
        # the three phases: six boards (the evaluation phase's prose, verse and Track B beside
        # each phase's main board)
        for phase in ("development", "evaluation", "systems"):
            requests.get(f"{web_a}/tasks/{TASK}/leaderboard", params={"phase": phase}, timeout=300)
            r = requests.post(
                f"{web_b}/api/v1/tasks/{TASK}/phases/{phase}/publish",
                json={"close": True},
                headers=h_org,
                timeout=300,
            )
            assert r.status_code == 201, r.text
        boards = [("development", "main"), ("systems", "main")]
        boards += [("evaluation", b) for b in ("main", "prose", "verse", "track-b")]
        before = _outputs(web_a, org, boards)
        assert _outputs(web_b, org, boards) == before
        shown = list(csv.DictReader(io.StringIO(before["systems/main.csv"].decode())))
        assert str(run["submission"]) in [row["submission_id"] for row in shown], shown
        laps.append(("reviewed, published", time.monotonic()))

        # the backup, from an operator's machine of its own, and its check
        operator = {**env, "PALIMPSEST_HOME": str(tmp_path / "operator")}
        archives = tmp_path / "archives"
        archives.mkdir()
        r = subprocess.run(
            [*palimpsest, "backup", str(archives), "--json"],
            env=operator,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
        archive = json.loads(r.stdout)["archive"]
        r = subprocess.run(
            [*palimpsest, "backup", "verify", archive, "--json"],
            env=operator,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, (json.loads(r.stdout or "{}").get("problems"), r.stderr[-3000:])
        assert json.loads(r.stdout)["checks"]["published_rankings"] == 3
        laps.append(("backup, verify", time.monotonic()))

        # everything destroyed: the processes, the database, every data directory, the bucket
        logs = site.stop()
        assert "Traceback" not in logs, logs
        engine.dispose()
        shutil.rmtree(tmp_path / "site")
        shutil.rmtree(tmp_path / "operator", ignore_errors=True)
        _empty_bucket(s3)
    # restored from a fresh machine's directory into a fresh database and bucket
    with contextlib.ExitStack() as stack:
        _name, url2 = stack.enter_context(fresh_pg_database("palimpsest_restored_"))
        s3b = _bucket(seaweedfs)
        env2 = {**env, **s3b, "DATABASE_URL": url2}
        r = subprocess.run(
            [*palimpsest, "restore", archive, "--json"],
            env={**env2, "PALIMPSEST_HOME": str(tmp_path / "fresh")},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
        assert json.loads(r.stdout)["ok"]
        shutil.rmtree(tmp_path / "fresh")  # the store is the truth: no directory is kept
        laps.append(("restore", time.monotonic()))
        site = Site(tmp_path / "restored", env2)
        stack.callback(site.stop)
        web_c, web_d = site.web("web-c"), site.web("web-d")
        _wait_up(web_c, site)
        _wait_up(web_d, site)
        for web in (web_c, web_d):
            assert _outputs(web, org, boards) == before, web
            # the released run, as its team read it, and the task at version 2
            again = requests.get(f"{web}/api/v1/runs/{rid}", headers=h_a, timeout=60).json()
            assert again["log"] == released["log"] and again["stage"] == "ran", again
            got = requests.get(f"{web}/api/v1/tasks/{TASK}", headers=h_a, timeout=60).json()
            assert got["version"] == 2, got
        logs = site.stop()
        assert "Traceback" not in logs, logs
        laps.append(("restored site serves", time.monotonic()))
    print(" ".join(f"{n}: {t - p:.1f} s;" for (_, p), (n, t) in zip(laps, laps[1:], strict=False)))


def _empty_bucket(s3: dict) -> None:
    """The bucket's objects deleted and the bucket itself."""
    c = s3_client(s3)
    bucket = s3["PALIMPSEST_S3_BUCKET"]
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            c.delete_object(Bucket=bucket, Key=o["Key"])
    c.delete_bucket(Bucket=bucket)
