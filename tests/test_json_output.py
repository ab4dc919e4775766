"""Every `--json` command prints exactly one JSON document on stdout, whatever happens; status and
progress go to stderr. Each command runs in a real process (stdout and stderr apart), forked from
one that loaded the command line and its libraries once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import loci_files, write_submission

REPO = Path(__file__).resolve().parent.parent


# One Python process loads the command line and the libraries its commands use (the app's
# import is ~3 s of CPU a process), then forks a process for each command: each has its own
# stdout and stderr (files on descriptors 1 and 2), its own exit status, its own state from a
# parent that ran no command. What loading printed is checked too: nothing on stdout.
RUNNER = r"""
import json, os, sys, traceback
import cli.main
import numpy, scipy.stats, scorer  # noqa: F401
try:  # the server's dependencies (the organizer's commands)
    import alembic, sqlalchemy, sqlmodel, server.settings  # noqa: F401
except ImportError:
    pass
print("ready", file=sys.stderr, flush=True)
for line in sys.stdin:
    spec = json.loads(line)
    out = os.open(spec["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(spec["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    sys.stdout.flush(), sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(out, 1), os.dup2(err, 2)
        sys.stdin.close()
        sys.argv = ["palimpsest", *spec["args"]]
        code = 0
        try:
            cli.main.main(spec["args"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(code)
    os.close(out), os.close(err)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class Palimpsest:
    """`palimpsest ARGS` in a process of its own, forked from one that loaded the command line."""

    def __init__(self, home: Path, tmp_path: Path):
        env = {
            **os.environ,
            "PALIMPSEST_HOME": str(home),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "PALIMPSEST_DEBUG": "",
            "PYTHONPATH": str(REPO),
        }
        for k in ("PALIMPSEST_SERVER", "PALIMPSEST_TOKEN"):
            env.pop(k, None)
        self.dir = tmp_path / "runs"
        self.dir.mkdir()
        self.n = 0
        self.loaded = self.dir / "loaded.out"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.dir / "loaded.err", "wb"),
            text=True,
        )

    def __call__(self, args) -> subprocess.CompletedProcess:
        self.n += 1
        out, err = self.dir / f"{self.n}.out", self.dir / f"{self.n}.err"
        spec = {"args": list(map(str, args)), "out": str(out), "err": str(err)}
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.strip().lstrip("-").isdigit(), (
            line,
            (self.dir / "loaded.err").read_text()[-2000:],
        )
        return subprocess.CompletedProcess(
            args, int(line), out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
        )

    def close(self):
        self.proc.stdin.close()
        rest = self.proc.stdout.read()
        assert self.proc.wait(60) == 0, (self.dir / "loaded.err").read_text()[-2000:]
        # loading the command line and its libraries printed nothing on stdout
        assert rest == "", rest


@pytest.fixture
def palimpsest(loci_home, tmp_path):
    run = Palimpsest(loci_home, tmp_path)
    try:
        yield run
    finally:
        run.close()


def one_document(p: subprocess.CompletedProcess):
    assert p.stdout.strip(), f"nothing on stdout; stderr: {p.stderr[-500:]}"
    doc = json.loads(p.stdout)  # raises on anything before or after the one document
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    return doc


@pytest.fixture
def loci_home(tmp_path) -> Path:
    from tasks.importers import import_task

    h = tmp_path / "home"
    f = loci_files()
    import_task("loci-similes", h, query=f["query"], source=f["source"], gold=f["gold"])
    return h


def test_each_json_command_prints_one_document(palimpsest, tmp_path):
    import csv

    with open(loci_files()["gold"], encoding="utf-8", newline="") as f:
        rows = [
            {"query_id": r["query_id"], "source_id": r["source_id"], "score": 0.5}
            for r in csv.DictReader(f)
        ]
    good = write_submission(tmp_path / "good", rows, "csv")
    bad = write_submission(
        tmp_path / "bad", rows + [{"query_id": "nope", "source_id": "x", "score": 1}], "csv"
    )
    cases = [
        (["tasks", "--json"], 0),
        (["tasks", "list", "--json"], 0),
        (["tasks", "show", "loci-similes", "--json"], 0),
        (["validate", "loci-similes", good, "--json"], 0),
        (["validate", "loci-similes", bad, "--json"], 1),
        (["validate", "tric-binary", good, "--json"], 2),  # not imported: an error, as JSON
        (["score", "loci-similes", good, "--json"], 0),
        (["score", "loci-similes", bad, "--json"], 1),
        (["score", "loci-similes", tmp_path / "missing.csv", "--json"], 1),
        # participant commands without a server: the error as JSON
        (["submissions", "--json"], 1),
        (["status", "1", "--json"], 1),
        (["leaderboard", "loci-similes", "--json"], 1),
        (["submit", "loci-similes", good, "--json"], 1),
        # baselines: the model-based systems are left out or run, with their status on stderr
        (["baselines", "run", "--task", "loci-similes", "--out", tmp_path / "out", "--json"], 0),
    ]
    for args, code in cases:
        p = palimpsest(args)
        assert p.returncode == code, (args, p.returncode, p.stdout[-500:], p.stderr[-500:])
        doc = one_document(p)
        if code:
            assert isinstance(doc, dict) and ("error" in doc or doc.get("valid") is False), (
                args,
                doc,
            )
    runs = doc  # the last case's document: `baselines run`'s runs
    assert {r["system"] for r in runs} >= {"lexical"}
    assert all(r["scores"]["task"] == "loci-similes" for r in runs)


def test_organizer_json_commands_print_one_document(palimpsest):
    pytest.importorskip(
        "sqlmodel", reason="the server's dependencies are not installed: pip install -e ."
    )
    for args in (
        ["db", "upgrade"],
        ["phases", "set", "loci-similes", "test", "--opens", "2026-01-01T00:00Z"],
    ):
        p = palimpsest(args)
        assert p.returncode == 0, (args, p.stderr[-500:])
    for args in (
        ["phases", "close", "loci-similes", "test", "--json"],
        ["phases", "freeze", "loci-similes", "test", "--json"],
        ["phases", "unfreeze", "loci-similes", "test", "--json"],
        ["phases", "publish", "loci-similes", "test", "--json"],
        ["rankings", "show", "loci-similes", "test", "--json"],
    ):
        p = palimpsest(args)
        assert p.returncode == 0, (args, p.stderr[-500:])
        assert isinstance(one_document(p), dict), args
