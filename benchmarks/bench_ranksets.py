"""Rank sets (`scorer.ranksets`, the max-t procedure of Mogstad, Romano, Shaikh and Wilhelm):
their coverage beside the percentile rank ranges' on simulated boards, and their cost at a
board's sizes.

    python3 benchmarks/bench_ranksets.py coverage [--boards 200] [--rows 20] [--items 500]
        [--B 1000] [--gap 0.2] [--seed 2026] [--p0 0.7]
    python3 benchmarks/bench_ranksets.py cost [--rows 50,500,2000] [--B 1000]

`coverage`: boards of R systems on n items, true accuracies `gap` standard errors apart around
`p0` (0.2: dense; 1 with --p0 0.5: sparse, every accuracy inside (0, 1)), each system's items
correct independently; B paired resamples of the items per board. Prints, per row, how often the
percentile rank range (`rank_range`), the marginal rank set and the simultaneous set hold the
row's true rank, the simultaneous sets' joint coverage and the sets' mean widths.
`cost`: the time of the marginal and the simultaneous sets of a board of R rows (rows spread
from clearly apart to nearly equal, a shared difficulty per resample), beside the rank ranges'
and the pairwise p-values' (`rank_statistics`), one BLAS thread.
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

from scorer import bootstrap as bs  # noqa: E402
from scorer import ranksets as rs  # noqa: E402


def boards(n_boards, R, n, B, gap, seed, p0=0.7):
    rng = np.random.default_rng(seed)
    se = np.sqrt(p0 * (1 - p0) / n)
    acc = p0 + gap * se * (np.arange(R)[::-1] - (R - 1) / 2)
    for _ in range(n_boards):
        correct = (rng.random((R, n)) < acc[:, None]).astype(np.float64)
        W = rng.multinomial(n, np.full(n, 1.0 / n), size=B).astype(np.float64)
        yield (correct @ W.T) / n, correct.mean(axis=1)


def coverage(a) -> None:
    truth = np.arange(1, a.rows + 1)
    held = {k: np.zeros(a.rows) for k in ("range", "marginal", "simultaneous")}
    width = {k: 0.0 for k in held}
    joint = {k: 0 for k in held}
    t0 = time.process_time()
    for samples, points in boards(a.boards, a.rows, a.items, a.B, a.gap, a.seed, a.p0):
        got = rs.rank_sets(samples, points, True)
        sets = {
            "range": np.array(bs.rank_ranges(bs.resample_ranks(samples, True))),
            "marginal": np.array(got["marginal"]),
            "simultaneous": np.array(got["simultaneous"]),
        }
        for k, s in sets.items():
            inside = (s[:, 0] <= truth) & (truth <= s[:, 1])
            held[k] += inside
            joint[k] += bool(inside.all())
            width[k] += float((s[:, 1] - s[:, 0] + 1).mean())
    cpu = time.process_time() - t0
    print(
        f"{a.boards} boards, {a.rows} rows, {a.items} items, B = {a.B}, "
        f"{a.gap} standard errors apart, seed {a.seed}: {cpu:.1f} s of CPU"
    )
    print("kind          best   worst  min    mean   all at once  mean width")
    for k in held:
        c = held[k] / a.boards
        print(
            f"{k:<13} {c[0]:.3f}  {c[-1]:.3f}  {c.min():.3f}  {c.mean():.3f}  "
            f"{joint[k] / a.boards:.3f}        {width[k] / a.boards:.2f}"
        )


def spread_board(R, B, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 0.02, B)
    level = np.sort(rng.uniform(0.4, 0.9, R))[::-1]
    samples = level[:, None] + base[None, :] + rng.normal(0, 0.01, (R, B))
    return samples, samples.mean(axis=1) + rng.normal(0, 0.001, R)


def cost(a) -> None:
    rs.rank_sets(*spread_board(3, 10), True)  # compiled (or loaded from numba's cache)
    print("rows  B     rank_statistics  marginal  marginal+simultaneous  peak RSS")
    for R in [int(x) for x in a.rows.split(",")]:
        samples, points = spread_board(R, a.B)
        t0 = time.process_time()
        bs.rank_statistics(samples, points, True)
        t_stats = time.process_time() - t0
        t0 = time.process_time()
        rs.rank_sets(samples, points, True, simultaneous=False)
        t_marg = time.process_time() - t0
        t0 = time.process_time()
        rs.rank_sets(samples, points, True)
        t_both = time.process_time() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{R:<5} {a.B:<5} {t_stats:>8.2f} s      {t_marg:>6.2f} s  {t_both:>8.2f} s"
            f"             {rss:.0f} MB"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("coverage")
    c.add_argument("--boards", type=int, default=200)
    c.add_argument("--rows", type=int, default=20)
    c.add_argument("--items", type=int, default=500)
    c.add_argument("--B", type=int, default=1000)
    c.add_argument("--gap", type=float, default=0.2)
    c.add_argument("--seed", type=int, default=2026)
    c.add_argument("--p0", type=float, default=0.7, help="the accuracies' centre")
    k = sub.add_parser("cost")
    k.add_argument("--rows", default="50,500,2000")
    k.add_argument("--B", type=int, default=1000)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    (coverage if a.what == "coverage" else cost)(a)


if __name__ == "__main__":
    main()
