"""A participant of a bundle task with the command line only, against `palimpsest serve` (real
HTTP, a worker beside it): the task's generated starting kit's steps run verbatim (only the token
filled in and the kit's file name given its content), so the downloaded folder validates and
scores a dev file offline with the site's numbers; a test file sent without a phase goes to the
phase on the test split (`evaluation`), and a dev file sent there is refused naming the split; a
new person signs up, registers and uploads with the command line only, the address confirmed by
a token mailed through a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import io
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK = "sts-latin-2027", "sts-latin"


class Mailbox:
    """What a real SMTP server (aiosmtpd on a local port) received."""

    def __init__(self):
        self.messages: list[dict] = []
        self.cond = threading.Condition()

    async def handle_DATA(self, server, session, envelope):
        from email import message_from_bytes, policy

        msg = message_from_bytes(envelope.content, policy=policy.default)
        with self.cond:
            self.messages.append(
                {"to": envelope.rcpt_tos, "body": msg.get_body(("plain",)).get_content()}
            )
            self.cond.notify_all()
        return "250 OK"

    def wait_for(self, to: str, timeout: float = 30.0) -> dict:
        with self.cond:
            self.cond.wait_for(lambda: any(to in m["to"] for m in self.messages), timeout)
            return next(m for m in self.messages if to in m["to"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(args, env, cwd, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _ok(r):
    assert r.returncode == 0, (r.args, r.stdout[-2000:], r.stderr[-2000:])
    return r


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example competition served with one worker; its development phase open, Ann approved
    in team Lexica."""
    from aiosmtpd.controller import Controller

    base = tmp_path_factory.mktemp("path")
    box = Mailbox()
    smtp = Controller(box, hostname="127.0.0.1", port=_free_port())
    smtp.start()
    server = {
        **os.environ,
        "PALIMPSEST_HOME": str(base / "server"),
        "PYTHONPATH": str(REPO),
        "PALIMPSEST_SMTP_HOST": "127.0.0.1",
        "PALIMPSEST_SMTP_PORT": str(smtp.port),
        "PALIMPSEST_SMTP_SECURITY": "none",
    }
    for k in ("REDIS_URL", "DATABASE_URL", "PALIMPSEST_SERVER", "PALIMPSEST_TOKEN"):
        server.pop(k, None)
    # no `db upgrade` of its own: a local command upgrades the embedded database it finds new
    for email in ("admin@example.org", "ann@example.org"):
        args = ["users", "create", "--email", email, "--password-stdin"]
        _ok(
            _cli(
                args + (["--admin"] if email.startswith("admin") else []),
                server,
                base,
                "pw x y z\n",
            )
        )
    _ok(
        _cli(["competitions", "create", str(EXAMPLE), "--owner", "admin@example.org"], server, base)
    )
    tokens = {
        who: _ok(
            _cli(["tokens", "create", "--email", f"{who}@example.org"], server, base)
        ).stdout.strip()
        for who in ("admin", "ann")
    }
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--workers", "1"],
        env=server,
        cwd=base,
        stdout=subprocess.DEVNULL,
        stderr=open(base / "serve.log", "w"),  # noqa: SIM115
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/api/v1/openapi.json", timeout=2).read()
            break
        except OSError:
            assert proc.poll() is None, (base / "serve.log").read_text()[-3000:]
            assert time.time() < deadline, "serve did not answer"
            time.sleep(0.3)

    def as_(who):
        env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(base / f"cfg-{who}")}
        env.pop("PALIMPSEST_HOME", None)
        env.update(PALIMPSEST_SERVER=url, PALIMPSEST_TOKEN=tokens[who])
        return env

    org = as_("admin")
    _ok(_cli(["organizer", "competitions", "edit", SLUG, "--state", "visible"], org, base))
    for phase in ("development",):  # evaluation opens in the last test
        _ok(
            _cli(
                ["organizer", "phases", "edit", TASK, phase, "--opens", "none", "--closes", "none"],
                org,
                base,
            )
        )
    ann = as_("ann")
    _ok(_cli(["register", SLUG, "--accept-terms"], ann, base))
    _ok(_cli(["organizer", "approve", SLUG, "ann@example.org"], org, base))
    _ok(_cli(["teams", "create", "Lexica", "--competition", SLUG], ann, base))
    yield {"url": url, "tokens": tokens, "base": base, "ann": ann, "mail": box}
    os.killpg(proc.pid, 15)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    smtp.stop()


def _kit_steps(url: str) -> tuple[str, list[str]]:
    with urllib.request.urlopen(f"{url}/tasks/{TASK}/starting-kit.zip", timeout=30) as r:
        z = zipfile.ZipFile(io.BytesIO(r.read()))
    readme = z.read(f"{TASK}-starting-kit/README.md").decode()
    (block,) = re.findall(r"## Steps\n\n```sh\n(.*?)```", readme, re.S)
    return readme, block.strip().splitlines()


def test_the_kits_steps_run_verbatim_and_score_offline_as_the_site_does(site):
    readme, steps = _kit_steps(site["url"])
    assert "https://SERVER" not in readme and f"--server {site['url']} " in readme
    work = site["base"] / "kit"
    work.mkdir()
    (work / "predictions.jsonl").write_bytes((EXAMPLE / "predictions-dev.jsonl").read_bytes())
    env = {
        k: v for k, v in site["ann"].items() if k not in ("PALIMPSEST_SERVER", "PALIMPSEST_TOKEN")
    }
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"  # `palimpsest` of this venv
    token = site["tokens"]["ann"]
    outputs = []
    for step in steps:  # each line as the kit writes it, the token filled in
        line = step.replace("YOUR_TOKEN", token)
        if line.startswith("palimpsest submit"):
            # the dev file goes to the dev split's phase, named (the default phase is the open
            # test phase where there is one, which refuses it)
            assert " --phase development " in line, line
            line = line.split("#")[0].strip() + " --json"
        r = subprocess.run(
            ["bash", "-c", f"set -euo pipefail; {line}"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        outputs.append(r.stdout)
    # the download carries the declaration: a fresh process knows the bundle task offline
    assert (work / "palimpsest-data" / "tasks" / TASK / "declaration.json").is_file()
    assert not (work / "palimpsest-data" / "tasks" / TASK / "gold").exists()
    offline = _ok(
        _cli(
            [
                "score",
                TASK,
                "predictions.jsonl",
                "--split",
                "dev",
                "--home",
                "palimpsest-data",
                "--json",
            ],
            env,
            work,
        )
    )
    offline = json.loads(offline.stdout)
    site_run = json.loads(outputs[-1])
    assert site_run["status"] == "scored", site_run
    assert site_run["scores"]["metrics"] == offline["metrics"]
    assert site_run["scores"]["primary"]["value"] == offline["primary"]["value"]
    status = json.loads(
        _ok(_cli(["status", str(site_run["id"]), "--json"], site["ann"], work)).stdout
    )
    assert status["phase"] == "development", status


def _test_file(path):
    rng = random.Random(3)
    rows = [
        json.loads(x)
        for x in (EXAMPLE / "sts-latin" / "test" / "inputs.jsonl").read_text().splitlines()
    ]
    path.write_text(
        "".join(json.dumps({"pair_id": r["pair_id"], "score": rng.random()}) + "\n" for r in rows)
    )
    return path


def test_the_cli_sends_a_test_file_to_evaluation_and_refuses_a_dev_file_there(site):
    work = site["base"] / "cli"
    work.mkdir()
    edit = [
        "organizer",
        "phases",
        "edit",
        TASK,
        "evaluation",
        "--opens",
        "none",
        "--closes",
        "none",
    ]
    org = {**site["ann"], "PALIMPSEST_TOKEN": site["tokens"]["admin"]}
    _ok(_cli(edit, org, work))
    fact = ["--fact", "system_description=overlap", "--fact", "external_data=no"]
    r = _cli(
        ["submit", TASK, str(EXAMPLE / "predictions-dev.jsonl"), "--phase", "evaluation", *fact],
        site["ann"],
        work,
    )
    assert r.returncode != 0
    assert "these ids are the dev split's" in r.stderr and "choose phase development" in r.stderr
    r = _ok(
        _cli(
            ["submit", TASK, str(_test_file(work / "test.jsonl")), *fact, "--json"],
            site["ann"],
            work,
        )
    )
    sub = json.loads(r.stdout)
    status = json.loads(_ok(_cli(["status", str(sub["id"]), "--json"], site["ann"], work)).stdout)
    assert status["phase"] == "evaluation", status


def test_a_person_signs_up_registers_and_uploads_with_the_command_line_only(site):
    work = site["base"] / "newcomer"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(work / "cfg")}
    for k in ("PALIMPSEST_HOME", "PALIMPSEST_SERVER", "PALIMPSEST_TOKEN"):
        env.pop(k, None)
    url = site["url"]
    r = _ok(_cli(["signup", "bo@example.org", "--server", url, "--competition", SLUG], env, work))
    assert "we sent a message to bo@example.org" in r.stdout
    body = site["mail"].wait_for("bo@example.org")["body"]
    (token,) = re.findall(r"--finish (\S+)", body)
    assert f"{url}/auth/register/{token}" in body  # the web's link finishes it too
    r = _cli(
        ["signup", "--server", url, "--finish", token + "x", "--password-stdin"],
        env,
        work,
        "a long passphrase\n",
    )
    assert r.returncode == 1 and "invalid or expired" in r.stderr
    r = _ok(
        _cli(
            ["signup", "--server", url, "--finish", token, "--password-stdin"],
            env,
            work,
            "a long passphrase\n",
        )
    )
    assert f"palimpsest register {SLUG}" in r.stdout
    assert oct((work / "cfg" / "palimpsest" / "config.json").stat().st_mode & 0o777) == "0o600"
    r = _cli(
        ["signup", "--server", url, "--finish", token, "--password-stdin"],
        env,
        work,
        "another one!\n",
    )
    assert r.returncode == 1 and "has an account already" in r.stderr  # the token makes one
    # the config the sign-up wrote is this command line's login from now on
    _ok(_cli(["register", SLUG, "--accept-terms"], env, work))
    org = {**site["ann"], "PALIMPSEST_TOKEN": site["tokens"]["admin"]}
    _ok(_cli(["organizer", "approve", SLUG, "bo@example.org"], org, work))
    _ok(_cli(["teams", "create", "Newcomers", "--competition", SLUG], env, work))
    r = _ok(
        _cli(
            [
                "submit",
                TASK,
                str(EXAMPLE / "predictions-dev.jsonl"),
                "--phase",
                "development",
                "--fact",
                "external_data=no",
                "--wait",
                "--json",
            ],
            env,
            work,
        )
    )
    run = json.loads(r.stdout)
    assert run["status"] == "scored"
    # the team deletes it: the organizer's board from the command line marks it, unranked
    _ok(_cli(["delete", str(run["id"])], env, work))
    r = _ok(_cli(["leaderboard", TASK, "--phase", "development"], org, work))
    marked = [x for x in r.stdout.splitlines() if "team: removed" in x]
    assert len(marked) == 1, r.stdout  # the one run deleted, marked and unranked
