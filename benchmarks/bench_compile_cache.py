"""What keeping the compiled sampler saves: two identical Bayesian agreement fits in one process,
without and with jax's persistent compilation cache (`tasks.agreement_bayes.keep_compiled`).

    python benchmarks/bench_compile_cache.py [--chains 4] [--warmup 500] [--samples 1000]

Each side runs in a fresh process (jax reads its cache setting once), on the same generated table
(four annotators, binary labels, six books, a covariate; the shape of tests/test_agreement_bayes.py)
with the same seed. Printed per fit: wall and CPU seconds; then whether every figure of the
second fit equals the first's (it must: the same program runs, compiled or read back).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import numpy as np
from tasks.agreement_bayes import fit
from tasks.agreement_measures import Table

chains, warmup, samples = (int(x) for x in sys.argv[1:4])
rng = np.random.default_rng(1)
items, books = 300, 6
book = rng.integers(0, books, size=items)
overlap = rng.random(items)
truth = rng.random(items) < 0.4
right = 0.65 + 0.25 * book / (books - 1)
values = np.empty((items, 4))
for x in range(4):
    ok = rng.random(items) < right
    values[:, x] = np.where(ok, truth, ~truth).astype(float)
values[rng.random((items, 4)) < 0.05] = np.nan
keep = (~np.isnan(values)).sum(axis=1) >= 2
table = Table(values)
out = []
for _ in range(2):
    wall, cpu = time.monotonic(), time.process_time()
    got = fit(table, {"book": book[keep]}, {"overlap": overlap[keep]}, seed=3, chains=chains,
              warmup=warmup, samples=samples, curve="overlap")
    out.append({"wall": time.monotonic() - wall, "cpu": time.process_time() - cpu,
                "figures": [got["average"], got["marginal"], got["curve"]]})
print(json.dumps(out))
"""


def side(cache: str | None, chains: int, warmup: int, samples: int) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    if cache:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
    env["PYTHONPATH"] = str(REPO)
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(chains), str(warmup), str(samples)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if run.returncode:
        sys.exit(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--samples", type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, cache in (("without the cache", None), ("with the cache", tmp)):
            fits = side(cache, a.chains, a.warmup, a.samples)
            same = fits[0]["figures"] == fits[1]["figures"]
            print(
                f"{name:18}  first fit {fits[0]['wall']:5.1f} s wall {fits[0]['cpu']:5.1f} s CPU"
                f"   second fit {fits[1]['wall']:5.1f} s wall {fits[1]['cpu']:5.1f} s CPU"
                f"   same figures: {same}"
            )


if __name__ == "__main__":
    main()
