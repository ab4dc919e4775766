"""Overall boards (`scorer.overall`): the cost of carrying the boards' resamples through a rule,
and of the significance page's "better on at least k of K boards" matrix.

    python3 benchmarks/bench_overall.py [--rows 200,2000] [--boards 12,36] [--B 1000]
        [--won-rows 60]

For each size: the time and peak memory of `combine` on R teams x K boards x B resamples (a
tenth of the teams missing each board, `missing: last`), for each rule; then `boards_won` on a
board of `--won-rows` ranked rows (the most its statistics compute it for). One BLAS thread.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from scorer.overall import RULES, boards_won, combine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="200,2000")
    ap.add_argument("--boards", default="12,36")
    ap.add_argument("--B", type=int, default=1000)
    ap.add_argument("--won-rows", type=int, default=60)
    a = ap.parse_args()
    rng = np.random.default_rng(2026)
    print("rows boards rule seconds peak_MB")
    for R in map(int, a.rows.split(",")):
        for K in map(int, a.boards.split(",")):
            X = rng.normal(size=(K, R, a.B))
            present = rng.random((K, R)) > 0.1
            for rule in RULES:
                t = time.perf_counter()
                combine(X, present, [True] * K, rule, "last")
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"{R} {K} {rule} {time.perf_counter() - t:.2f} {peak:.0f}")
            del X
    R, K = a.won_rows, min(map(int, a.boards.split(",")))
    X = rng.normal(size=(K, R, a.B)) + np.linspace(0, 3, R)[None, :, None]
    V = X.mean(axis=2)
    t = time.perf_counter()
    boards_won(V, X, np.ones((K, R), dtype=bool), [True] * K)
    print(f"boards_won {R} rows x {K} boards: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
