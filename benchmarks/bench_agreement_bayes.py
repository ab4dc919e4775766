"""The Bayesian agreement model on TRoTR's binarised judgments, fitted with several seeds: does it
converge for every seed, in what time, CPU and memory, and how far apart are the seeds' figures?

    python benchmarks/bench_agreement_bayes.py [--trotr ../shared/data/trotr/TRoTR]
        [--seeds 1-10] [--parallel 1] [--option correlated=false ...] [--json out.json]
        [--compile-cache DIR]
    python benchmarks/bench_agreement_bayes.py --table out.json [more.json ...]

Each fit runs in its own process (`palimpsest agreement`'s path: tasks.agreement.trotr_bayes with
the model's defaults unless `--option` says otherwise), so its whole-process CPU time and peak
memory (the child's ru_maxrss) are its own. Printed per seed: whether its first attempt converged
and whether it was refitted, the divergent transitions (the reported attempt's and the first's),
wall seconds, the process's CPU seconds, the CPU per leapfrog step (the process's CPU over both
attempts' steps: compilation and imports included), peak MB, the largest R-hat, the smallest bulk
ESS, the mean number of leapfrog steps a draw, and the posterior median multi-kappa for an average
book; then the machine's CPU model and the summary against the goals (every seed converges, the
first attempt for at least 19 of 20; under 60 s of CPU and 1 GB each; the average-book kappa's
spread over seeds within 0.01) and the load average (1 minute) as each fit ended: on a shared
machine a fit's CPU seconds grow with the load. A refused fit is reported as such, with its
message.

Each fit compiles its programs (cold) unless `--compile-cache DIR` names a directory for jax's
compiled programs (`tasks.agreement_bayes.keep_compiled`, as `palimpsest agreement --bayes` keeps
them by default): then each row says how many programs the fit compiled and wrote there (the
directory's new entries) and how many it held before, so a fit that compiled nothing ran warm;
an empty directory gives the first fit cold and the later ones warm (the first attempt's program
serves every seed; the refit's every refitted seed). JAX_COMPILATION_CACHE_DIR is not passed on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOALS = {"cpu_seconds": 60.0, "peak_mb": 1024.0, "kappa_spread": 0.01}

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tasks.agreement import trotr_bayes
from tasks.agreement_bayes import NotConverged
opts = json.loads(sys.argv[4])
try:
    g = trotr_bayes(sys.argv[2], seed=int(sys.argv[3]), **opts)
except NotConverged as e:
    print(json.dumps({"converged": False, "error": str(e)}))
else:
    print(json.dumps({"converged": True, "diagnostics": g["diagnostics"],
                      "average": g["average"], "marginal": g["marginal"],
                      "average_pair_weighted": g["average_pair_weighted"],
                      "empirical": g["empirical"], "model": g["model"]}))
"""


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def start(trotr: Path, seed: int, options: dict) -> tuple[subprocess.Popen, float]:
    judgments = trotr / "judgments" / "TRoTR.tsv"
    cmd = [sys.executable, "-c", CHILD, str(REPO), str(judgments), str(seed), json.dumps(options)]
    # cold unless --compile-cache says where (options' compile_cache): never the caller's cache
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env), time.monotonic()


def cache_entries(directory: Path | None) -> int | None:
    """The compiled programs jax keeps in `directory` (its `*-cache` files: beside each, jax
    writes an access-time stamp); None where no directory is used."""
    if directory is None:
        return None
    return sum(1 for _ in directory.glob("*-cache")) if directory.is_dir() else 0


def finish(p: subprocess.Popen, t0: float, seed: int) -> dict:
    # os.wait4: this child's own CPU time and peak memory
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    out = p.stdout.read()
    p.stdout.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    row = {
        "seed": seed,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_mb": round(usage.ru_maxrss / 1024, 0),
        # the machine's load average (1 min) as the fit ended: a shared machine's CPU seconds
        # grow with it (docs/agreement.md)
        "load": round(os.getloadavg()[0], 1),
    }
    try:
        got = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return row | {
            "converged": False,
            "error": f"the fit's process failed (exit {p.returncode})",
        }
    if not got["converged"]:
        return row | got
    d = got["diagnostics"]
    row = row | {
        "converged": True,
        "max_rhat": round(d["max_rhat"], 4),
        "min_ess": round(d["min_ess"], 0),
        "min_ess_at": d.get("min_ess_at"),
        "divergences": d["divergences"],
        "mean_leapfrog_steps": round(d["mean_leapfrog_steps"], 1),
        "fit_cpu_seconds": d["cpu_seconds"],
        "cells": d["cells"],
        "kappa": round(got["average"]["median"], 4),
        "kappa_sd": round(got["average"]["sd"], 4),
        "kappa_95": [round(x, 4) for x in got["average"]["95%"]],
        "marginal": round(got["marginal"]["median"], 4),
        "kappa_pair_weighted": round(got["average_pair_weighted"]["median"], 4),
        "empirical": round(got["empirical"]["value"], 4),
        "settings": {
            k: d[k]
            for k in (
                "chains",
                "warmup",
                "samples",
                "target_accept",
                "correlated",
                "bins",
                "centred",
                "around",
                "sparse_below",
                "dense_mass",
                "alpha_about",
            )
            if k in d
        },
        # the first attempt, where it was refused and the fit was run again (its CPU included)
        "retried": d.get("retried"),
        "first_attempt": "converged" if not d.get("retried") else "diverged",
    }
    # the process's CPU over the fit's leapfrog steps (compilation and imports included: an
    # upper bound on a step's cost)
    row["us_per_step"] = round(1e6 * row["cpu_seconds"] / leapfrog_steps(row), 1)
    return row


def cpu_model() -> str:
    """The machine's CPU model (/proc/cpuinfo's first `model name`), and its logical CPUs."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return f"unknown ({os.cpu_count()} CPUs)"
    name = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if "model name" in line),
        "unknown",
    )
    return f"{name} ({os.cpu_count()} CPUs)"


def leapfrog_steps(row: dict) -> float:
    """A fit's leapfrog steps, both attempts: each attempt's chains x (warm-up + kept draws) x
    its mean steps a kept draw (numpyro counts the kept draws' steps; the warm-up's are taken at
    the same mean)."""
    s = row["settings"]
    steps = s["chains"] * (s["warmup"] + s["samples"]) * row["mean_leapfrog_steps"]
    first = row.get("retried")
    if first:
        steps += s["chains"] * (first["warmup"] + first["samples"]) * first["mean_leapfrog_steps"]
    return steps


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("converged")]
    kappas = [r["kappa"] for r in ok]
    return {
        "fits": len(rows),
        "converged": len(ok),
        "max_cpu_seconds": max(r["cpu_seconds"] for r in rows),
        "max_peak_mb": max(r["peak_mb"] for r in rows),
        "kappa_spread": round(max(kappas) - min(kappas), 4) if kappas else None,
        "first_attempt_converged": sum(r.get("first_attempt") == "converged" for r in ok),
        "refitted": sum(bool(r.get("retried")) for r in ok),
        "over_cpu_goal": [r["seed"] for r in rows if r["cpu_seconds"] > GOALS["cpu_seconds"]],
        "load": [
            min((r["load"] for r in rows if "load" in r), default=None),
            max((r["load"] for r in rows if "load" in r), default=None),
        ],
        "us_per_step": [
            min((r["us_per_step"] for r in ok), default=None),
            max((r["us_per_step"] for r in ok), default=None),
        ],
        "machine": cpu_model(),
        "min_ess": min((r["min_ess"] for r in ok), default=None),
        "max_rhat": max((r["max_rhat"] for r in ok), default=None),
        # the fits whose 95 % interval for an average book holds the empirical multi-kappa
        # (eq. 7-8 on the same table)
        "empirical_inside_95": sum(
            r["kappa_95"][0] <= r["empirical"] <= r["kappa_95"][1] for r in ok
        ),
        "goals": GOALS,
    }


def markdown(rows: list[dict]) -> str:
    """The docs' per-seed table (docs/agreement.md) from the rows of one or more runs."""
    head = (
        "| seed | first attempt | refit | divergences (first attempt) | CPU (process) | "
        "µs a leapfrog step | load | peak memory | largest R-hat | smallest bulk ESS (where) | "
        "leapfrog steps a draw | posterior multi-kappa, average book: median [95 %] |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    cached = any("compiled" in r for r in rows)
    if cached:  # --compile-cache: what each fit compiled (0: it ran warm)
        top, rule = head.split("\n")
        head = f"{top} programs compiled (held before) |\n{rule} --- |"
    out = []
    for r in sorted(rows, key=lambda r: r["seed"]):
        if not r.get("converged"):
            out.append(
                f"| {r['seed']} | refused: {r.get('error', '').split('; no figure')[0]} | | | "
                f"{r['cpu_seconds']} s | | {r.get('load', '')} | {r['peak_mb']:,.0f} MB | | | | |"
            )
            continue
        low, high = r["kappa_95"]
        retried = r.get("retried")
        first = "converged" if not retried else f"diverged at {retried['target_accept']}"
        refit = f"yes, at {r['settings']['target_accept']}" if retried else "no"
        divergent = f"{r['divergences']} ({retried['divergences'] if retried else 0})"
        out.append(
            f"| {r['seed']} | {first} | {refit} | {divergent} | {r['cpu_seconds']} s | "
            f"{r['us_per_step']:.0f} | {r.get('load', '')} | {r['peak_mb']:,.0f} MB | "
            f"{r['max_rhat']:.4f} | {r['min_ess']:,.0f} ({r['min_ess_at']}) | "
            f"{r['mean_leapfrog_steps']:.0f} | {r['kappa']:.3f} [{low:.3f}, {high:.3f}] |"
        )
    if cached:
        out = [
            f"{line} {r['compiled']} ({r['cache_held']}) |" if "compiled" in r else f"{line} |"
            for line, r in zip(out, sorted(rows, key=lambda r: r["seed"]), strict=True)
        ]
    return "\n".join([head, *out])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--trotr", type=Path, default=REPO.parent / "shared" / "data" / "trotr" / "TRoTR"
    )
    ap.add_argument("--seeds", default="1-10", help="Ranges a-b and seeds, comma-separated.")
    ap.add_argument("--parallel", type=int, default=1, help="Fits at once (default 1).")
    ap.add_argument("--option", action="append", default=[], help="A fit setting, key=value.")
    ap.add_argument("--json", type=Path, help="Also write the rows and the summary here.")
    ap.add_argument(
        "--compile-cache",
        type=Path,
        help="Keep jax's compiled programs in this directory (default: none, every fit cold); "
        "each row then says how many programs its fit compiled.",
    )
    ap.add_argument(
        "--table",
        type=Path,
        nargs="+",
        help="Fit nothing: print the docs' per-seed table and the summary from these --json files.",
    )
    a = ap.parse_args()
    if a.table:
        rows = [r for f in a.table for r in json.loads(f.read_text())["rows"]]
        print(markdown(rows))
        print(json.dumps(summary(sorted(rows, key=lambda r: r["seed"])), indent=1))
        return
    seeds = []
    for part in a.seeds.split(","):  # "1-20", "6", "1-5,7"
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    options = {k: _value(v) for k, v in (o.split("=", 1) for o in a.option)}
    if a.compile_cache is not None:
        a.compile_cache = a.compile_cache.resolve()
        options["compile_cache"] = str(a.compile_cache)
        if a.parallel > 1:
            sys.exit(
                "--compile-cache: one fit at a time (--parallel 1), so each row's count is its own"
            )
    print(f"machine: {cpu_model()}; load before: {os.getloadavg()}", flush=True)
    rows, running, todo = [], [], list(seeds)
    while todo or running:
        before = cache_entries(a.compile_cache)
        while todo and len(running) < a.parallel:
            s = todo.pop(0)
            running.append((s, *start(a.trotr, s, options)))
        s, p, t0 = running.pop(0)
        row = finish(p, t0, s)
        if before is not None:
            row["cache_held"] = before
            row["compiled"] = cache_entries(a.compile_cache) - before
        rows.append(row)
        print(json.dumps(row), flush=True)
    rows.sort(key=lambda r: r["seed"])
    got = summary(rows)
    got["load_after"] = os.getloadavg()
    got["own_children_cpu_seconds"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime, 1
    )
    print(json.dumps(got, indent=1))
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "summary": got}, indent=1) + "\n")


if __name__ == "__main__":
    main()
