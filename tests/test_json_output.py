"""Every `--json` command prints exactly one JSON document on stdout, whatever happens; status and
progress go to stderr. Each command runs in a real process (stdout and stderr apart)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import loci_files, write_submission

REPO = Path(__file__).resolve().parent.parent


def palimpsest(args, home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PALIMPSEST_HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PALIMPSEST_DEBUG": "",
        "PYTHONPATH": str(REPO),
    }
    for k in ("PALIMPSEST_SERVER", "PALIMPSEST_TOKEN"):
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


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


def test_each_json_command_prints_one_document(loci_home, tmp_path):
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
    h = loci_home
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
        p = palimpsest(args, h, tmp_path)
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


def test_organizer_json_commands_print_one_document(loci_home, tmp_path):
    pytest.importorskip(
        "sqlmodel", reason="the server's dependencies are not installed: pip install -e ."
    )
    h = loci_home
    for args in (
        ["db", "upgrade"],
        ["phases", "set", "loci-similes", "test", "--opens", "2026-01-01T00:00Z"],
    ):
        p = palimpsest(args, h, tmp_path)
        assert p.returncode == 0, (args, p.stderr[-500:])
    for args in (
        ["phases", "close", "loci-similes", "test", "--json"],
        ["phases", "freeze", "loci-similes", "test", "--json"],
        ["phases", "unfreeze", "loci-similes", "test", "--json"],
        ["phases", "publish", "loci-similes", "test", "--json"],
        ["rankings", "show", "loci-similes", "test", "--json"],
    ):
        p = palimpsest(args, h, tmp_path)
        assert p.returncode == 0, (args, p.stderr[-500:])
        assert isinstance(one_document(p), dict), args
