"""The site as organizers deploy it, tested as one: PostgreSQL, Redis, SeaweedFS as the object
store and an SMTP server, two web processes (gunicorn) and a scoring worker and the reconciler,
each on an empty data directory of its own, sharing only those services. An organizer creates a
bundle's competition over the API of one web process; teams register and upload through the API
of the other and the command line of the first; the organizer publishes the phase; the site is
backed up and the archive verified; everything is destroyed (the database, every data directory,
the bucket) and the archive restored into a fresh database, directory and bucket; two fresh web
processes on empty data directories then serve every published output byte for byte."""

from __future__ import annotations

import contextlib
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
from seaweed import seaweedfs  # noqa: F401 - the fixture
from storekit import _bucket

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
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


def _outputs(url: str, token: str, names: list[str]) -> dict[str, bytes]:
    """Every published output of the phase as a web process serves it (pages and API)."""
    import requests

    h = {"Authorization": f"Bearer {token}"}
    out = {}
    for name in names:
        out[f"{name}.json"] = requests.get(
            f"{url}/tasks/{TASK}/leaderboard.json", params={"phase": name}, timeout=60
        )
        out[f"{name}.csv"] = requests.get(
            f"{url}/tasks/{TASK}/leaderboard.csv", params={"phase": name}, timeout=60
        )
        out[f"{name}.api"] = requests.get(
            f"{url}/api/v1/tasks/{TASK}/phases/{name}/rankings/1", headers=h, timeout=60
        )
    for k, r in out.items():
        assert r.status_code == 200, (url, k, r.status_code, r.text[:500])
    return {k: r.content for k, r in out.items()}


def test_the_site_as_organizers_deploy_it(tmp_path, redis_tcp_url, seaweedfs, box):  # noqa: F811
    import requests
    from sqlalchemy import create_engine, update

    from server.models import User

    s3 = _bucket(seaweedfs)
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
        site.start("scoring", [*palimpsest, "worker", "--queue", "scoring", "--queue", "stats"])
        site.start("reconciler", [*palimpsest, "reconcile"])
        _wait_up(web_a, site)
        _wait_up(web_b, site)

        # the organizer creates the competition over web A's API, and opens it
        h_org = {"Authorization": f"Bearer {org}"}
        r = requests.post(
            f"{web_a}/api/v1/competitions/bundle",
            files={"bundle": ("bundle.zip", _zip(EXAMPLE))},
            headers=h_org,
            timeout=300,
        )
        assert r.status_code == 201, r.text
        slug = r.json()["id"]
        r = requests.patch(
            f"{web_b}/api/v1/competitions/{slug}", json={"state": "visible"}, headers=h_org
        )
        assert r.status_code == 200, r.text
        phases = ["development", "evaluation"]
        for name in phases:
            r = requests.patch(
                f"{web_b}/api/v1/tasks/{TASK}/phases/{name}",
                json={"opens_at": None, "closes_at": None},
                headers=h_org,
                timeout=60,
            )
            assert r.status_code == 200, r.text
        # a team through web B's API, another through web A with the command line
        runs = []
        for web, tok, uid in ((web_b, tok_a, a_id), (web_a, tok_b, b_id)):
            r = requests.post(
                f"{web}/api/v1/competitions/{slug}/registration",
                json={"accept_terms": True},
                headers={"Authorization": f"Bearer {tok}"},
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
        # their teams: one over web B's API, one with the command line on web A
        r = requests.post(
            f"{web_b}/api/v1/team",
            json={"name": "Team API", "competition": slug},
            headers={"Authorization": f"Bearer {tok_a}"},
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
        dev = (EXAMPLE / "predictions-dev.jsonl").read_bytes()
        r = requests.post(
            f"{web_b}/api/v1/tasks/{TASK}/submissions",
            files={"file": ("dev.jsonl", dev)},
            data={"phase": "development", "method_name": "api"},
            headers={"Authorization": f"Bearer {tok_a}"},
            timeout=120,
        )
        assert r.status_code in (201, 202), r.text
        runs.append(r.json()["id"])
        lines = dev.decode().splitlines()
        (mine / "p.jsonl").write_text("\n".join(reversed(lines)) + "\n")
        r = subprocess.run(
            [*palimpsest, "submit", TASK, "p.jsonl", "--phase", "development", "--wait"]
            + ["--method-name", "cli", "--json"],
            cwd=mine,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, (r.stdout, r.stderr[-3000:], site.stop())
        runs.append(json.loads(r.stdout)["id"])
        end = time.monotonic() + 600
        for rid in runs:
            while True:
                got = requests.get(
                    f"{web_a}/api/v1/submissions/{rid}", headers=h_org, timeout=60
                ).json()
                if got["status"] == "scored":
                    break
                assert got["status"] != "failed" and time.monotonic() < end, (got, site.stop())
                time.sleep(0.5)
        # the statistics' caches in the store (a board's page asks for them), then publication
        requests.get(f"{web_a}/tasks/{TASK}/leaderboard", params={"phase": "development"})
        r = requests.post(
            f"{web_b}/api/v1/tasks/{TASK}/phases/development/publish",
            json={"close": True},
            headers=h_org,
            timeout=300,
        )
        assert r.status_code == 201, r.text
        published = ["development"]
        before = _outputs(web_a, org, published)
        assert _outputs(web_b, org, published) == before

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
        assert json.loads(r.stdout)["checks"]["published_rankings"] == len(published)

        # everything destroyed: the processes, the database, every data directory, the bucket
        site.stop()
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
        site = Site(tmp_path / "restored", env2)
        stack.callback(site.stop)
        web_c, web_d = site.web("web-c"), site.web("web-d")
        _wait_up(web_c, site)
        _wait_up(web_d, site)
        for web in (web_c, web_d):
            assert _outputs(web, org, published) == before, web
        logs = site.stop()
        assert "Traceback" not in logs, logs


def _empty_bucket(s3: dict) -> None:
    """The bucket's objects deleted and the bucket itself."""
    import boto3
    from botocore.config import Config

    c = boto3.client(
        "s3",
        endpoint_url=s3["PALIMPSEST_S3_ENDPOINT"],
        aws_access_key_id=s3["PALIMPSEST_S3_ACCESS_KEY"],
        aws_secret_access_key=s3["PALIMPSEST_S3_SECRET_KEY"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    bucket = s3["PALIMPSEST_S3_BUCKET"]
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            c.delete_object(Bucket=bucket, Key=o["Key"])
    c.delete_bucket(Bucket=bucket)
