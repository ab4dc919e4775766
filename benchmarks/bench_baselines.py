"""Encoding throughput and the wall time of every baseline of every task, as `baselines run` does them.

    python benchmarks/bench_baselines.py [--device auto] [--batch-size 32] [--json out.json]

Imports every task from ../shared/data (TRoTR fold 1) into a temporary data directory, measures
all-MiniLM-L6-v2's encoding throughput on the TRoTR tweets (a fresh model, no cache), the exact
top-k by chunked matrix products at a given scale, then runs every system that has a model here
(lexical, bi-encoder, bi-encoder-mask, diffalign, retrieve; the cross-encoder systems need weights
that cannot be had on this machine) and reports each run's seconds and the total.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("PALIMPSEST_SHARED_DATA", REPO.parent / "shared" / "data"))


def import_all(home: Path) -> None:
    from tasks.importers import import_task

    for t in ("tric-binary", "tric-ranking", "trac"):
        import_task(t, home, source=SHARED / "trotr" / "TRoTR", fold=1)
    import_task("swissgov-rsd", home, source=SHARED / "swissgov-rsd")
    loci = SHARED / "loci-similes"
    import_task("loci-similes", home, query=loci / "hieronymus_samples.csv", source=loci / "vergil_samples.csv",
                gold=loci / "ground_truth.csv")


def tweets() -> list[str]:
    rows = [json.loads(x) for x in (SHARED / "trotr" / "TRoTR" / "raw_data.jsonl").read_text(encoding="utf-8").splitlines()
            if x.strip()]
    key = next(k for k in ("sentence", "context", "text") if k in rows[0])
    return [r[key] for r in rows]


def throughput(device: str, batch_size: int) -> dict:
    from baselines.models import BiEncoder

    texts = tweets()
    enc = BiEncoder(None, device=device, batch_size=batch_size, progress=False)
    enc.encode(texts[:64])  # warm-up
    enc._cache.clear()
    t0 = time.perf_counter()
    enc.encode(texts)
    s = time.perf_counter() - t0
    return {"model": enc.name, "device": enc.device, "batch_size": batch_size, "sentences": len(texts),
            "seconds": round(s, 2), "sentences_per_s": round(len(texts) / s, 1)}


def topk_speed(n_q: int, n_s: int, device: str, dim: int = 384, k: int = 10) -> dict:
    import numpy as np

    from baselines.systems import top_k

    rng = np.random.default_rng(0)
    q = rng.standard_normal((n_q, dim), dtype=np.float32)
    s = rng.standard_normal((n_s, dim), dtype=np.float32)
    t0 = time.perf_counter()
    top_k(q, s, k, device)
    return {"queries": n_q, "sources": n_s, "k": k, "seconds": round(time.perf_counter() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--topk-scale", type=int, default=20000, help="queries = sources = this many")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from baselines.run import run_baselines
    from baselines.systems import Options

    report = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                         f"load average {os.getloadavg()[0]:.1f} at start"}
    report["throughput"] = throughput(a.device, a.batch_size)
    print(json.dumps(report["throughput"]), flush=True)
    report["topk"] = topk_speed(a.topk_scale, a.topk_scale, report["throughput"]["device"])
    print(json.dumps(report["topk"]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        import_all(home)
        t0 = time.perf_counter()
        results = run_baselines(None, None, Options(device=a.device, batch_size=a.batch_size, progress=False),
                                home / "out", home, log=lambda m: print(m, file=sys.stderr, flush=True))
        total = time.perf_counter() - t0
    report["runs"] = [{"task": r["task"], "system": r["system"], "seconds": r["seconds"],
                       "primary": r["scores"]["primary"]["value"]} for r in results]
    report["total_seconds"] = round(total, 1)
    report["load_average_end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(report, indent=2))
    if a.json:
        a.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
