"""The full crawl: tests/test_crawl.py with PALIMPSEST_CRAWL=full (every page a role reaches, up to
45 a role, in the order found, and the busy competition's 200 runs), where the suite crawls a
seeded sample. Its wall time and CPU time (the test process and its children: the demo server,
its worker, Chromium), and the pages each role visited.

    python3 benchmarks/crawl.py [--sample] [--seed N] [--json out.json]

`--sample` times the suite's sample instead (`--seed`: which sample).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", action="store_true", help="the suite's sample, not the full crawl")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (with --sample)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args(argv)
    env = {**os.environ, "PALIMPSEST_CRAWL_SEED": str(a.seed)}
    env.pop("PALIMPSEST_CRAWL", None)
    if not a.sample:
        env["PALIMPSEST_CRAWL"] = "full"
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-n", "0", "-p", "no:cacheprovider"]
    cmd.append("tests/test_crawl.py")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"crawled (\d+) \+ (\d+) \+ (\d+) pages in (\d+) s", p.stdout)
    got = {
        "crawl": "sample" if a.sample else "full",
        "seed": a.seed if a.sample else None,
        "passed": p.returncode == 0,
        "wall_s": round(wall, 1),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "pages": dict(
            zip(("anonymous", "participant", "organizer"), map(int, m.groups()[:3]), strict=True)
        )
        if m
        else None,
        "crawling_s": int(m.group(4)) if m else None,
        "load": os.getloadavg()[0],
    }
    print(json.dumps(got))
    if a.json:
        a.json.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
    if p.returncode:
        print(p.stdout[-3000:], p.stderr[-2000:], file=sys.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
