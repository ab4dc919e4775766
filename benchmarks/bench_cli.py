"""The server's local commands, each a whole `palimpsest` process: wall time and CPU time (user +
system, from the child's own rusage), the median of N runs, with `palimpsest --help` and a remote
command's start-up for reference.

    python3 benchmarks/bench_cli.py [--runs 5] [--json out.json] [--repo CHECKOUT]

`--repo` runs another checkout's `palimpsest` (an earlier commit, for a before and after).

On a fresh data directory with the synthetic demo tasks, one organizer, a competition and a token;
each command runs once unmeasured first (Python writes its bytecode caches then), then N times.
Commands that create something get a new name each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (label, arguments with {i} for the run's number, standard input)
COMMANDS = [
    ("--help", ["--help"], None),
    ("tasks (remote; no server: refused)", ["tasks"], None),
    ("settings", ["settings"], None),
    ("db current", ["db", "current"], None),
    ("db upgrade (at head)", ["db", "upgrade"], None),
    ("db stamp head", ["db", "stamp", "head"], None),
    (
        "users create",
        ["users", "create", "--email", "u{i}@example.org", "--password-stdin"],
        "correct horse battery\n",
    ),
    ("users reset-link", ["users", "reset-link", "org@example.org"], None),
    ("users sign-out", ["users", "sign-out", "org@example.org"], None),
    ("tokens create", ["tokens", "create", "--email", "org@example.org"], None),
    ("competitions list", ["competitions", "list"], None),
    ("competitions list --json", ["competitions", "list", "--json"], None),
    (
        "competitions create (empty)",
        ["competitions", "create", "c{i}", "--title", "C {i}"],
        None,
    ),
    ("competitions export", ["competitions", "export", "bench", "-o", "{tmp}/e{i}.zip"], None),
    ("competitions clone", ["competitions", "clone", "bench", "k{i}"], None),
    ("phases list", ["phases", "list"], None),
    ("phases set", ["phases", "set", "tric-binary", "dev", "--daily-limit", "{i}"], None),
    ("phases freeze, unfreeze (in turn)", ["phases", "{freeze}", "tric-binary", "dev"], None),
    ("rankings show (none published: refused)", ["rankings", "show", "tric-binary", "test"], None),
    ("reconcile --once", ["reconcile", "--once"], None),
]


def env_for(home: Path, repo: Path = REPO) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PYTHONDONTWRITEBYTECODE")
    }
    env.update(
        PALIMPSEST_HOME=str(home), PYTHONPATH=str(repo), PALIMPSEST_SERVER="http://127.0.0.1:9"
    )
    return env


def one(args: list[str], stdin: str | None, env: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one whole process."""
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=env["PYTHONPATH"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if stdin:
        p.stdin.write(stdin)
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def set_up(home: Path, env: dict) -> None:
    from server.demo import import_demo_tasks

    import_demo_tasks(home, only_missing=False)
    for args, stdin in (
        (["db", "upgrade"], None),
        (
            ["users", "create", "--email", "org@example.org", "--password-stdin", "--organizer"],
            "correct horse battery\n",
        ),
        (["competitions", "create", "bench", "--title", "Bench", "--task", "tric-binary"], None),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=env,
            cwd=env["PYTHONPATH"],
            input=stdin,
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise SystemExit(f"palimpsest {' '.join(args)}: {r.stderr or r.stdout}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose commands run")
    ap.add_argument("--only", action="append", help="commands whose label starts so (repeatable)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="palimpsest-bench-cli-"))
    home = tmp / "home"
    env = env_for(home, a.repo.resolve())
    set_up(home, env)
    rows, n = [], 0
    for label, args, stdin in COMMANDS:
        if a.only and not any(label.startswith(o) for o in a.only):
            continue
        samples = []
        for _ in range(a.runs + 1):  # the first run writes the bytecode caches: not counted
            n += 1
            turn = "freeze" if n % 2 else "unfreeze"
            samples.append(one([x.format(i=n, tmp=tmp, freeze=turn) for x in args], stdin, env))
        walls, cpus, codes = zip(*samples[1:], strict=True)
        rows.append(
            {
                "command": label,
                "wall_s": round(statistics.median(walls), 3),
                "cpu_s": round(statistics.median(cpus), 3),
                "exit": sorted(set(codes)),
            }
        )
        r = rows[-1]
        print(f"{label:<42} wall {r['wall_s']:6.3f} s  cpu {r['cpu_s']:6.3f} s  exit {r['exit']}")
    out = {
        "runs": a.runs,
        "python": sys.version.split()[0],
        "repo": env["PYTHONPATH"],
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "commands": rows,
    }
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
