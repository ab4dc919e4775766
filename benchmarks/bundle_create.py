"""Creating a competition from a bundle on the embedded default (SQLite): the example bundle
(`examples/bundle-sts-latin`, a directory and its zip), from the call to the competition committed:
reading and checking every file, installing the task's files through the exposure rule, writing
the competition, its pages, settings and phases. Each run starts from an empty data directory; the
figure is the median of N, with the peak memory of the process (ru_maxrss) at the end.

    python3 benchmarks/bundle_create.py [--n 5]

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

EXAMPLE = REPO / "examples" / "bundle-sts-latin"


def one(source: Path) -> float:
    import yaml
    from sqlmodel import Session

    from server.actions import bundles as bundle_actions
    from server.db import get_engine
    from server.migrate import upgrade
    from server.settings import Settings
    from tasks import unregister_declared

    with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as d:
        settings = Settings(home=Path(d))
        upgrade(settings)
        engine = get_engine(settings.sqlalchemy_url())
        spec = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
        with Session(engine) as s:
            t0 = time.perf_counter()
            bundle_actions.create_from_bundle(
                s=s, actor=None, source=source, via="bench", settings=settings
            )
            took = time.perf_counter() - t0
        engine.dispose()
        for t in spec["tasks"]:
            unregister_declared(t["id"])
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5)
    args = ap.parse_args()
    import yaml

    from tasks.bundle import write_bundle_zip

    with tempfile.TemporaryDirectory(prefix="palimpsest-zip-") as d:
        zipped = Path(d) / "bundle.zip"
        spec = yaml.safe_load((EXAMPLE / "competition.yaml").read_text(encoding="utf-8"))
        write_bundle_zip(spec, EXAMPLE, zipped)
        one(EXAMPLE)  # warm: imports and compiled statements
        out = {}
        for name, source in (("directory", EXAMPLE), ("zip", zipped)):
            times = [one(source) for _ in range(args.n)]
            out[name] = {
                "median_s": round(statistics.median(times), 3),
                "max_s": round(max(times), 3),
                "n": args.n,
            }
        out["zip_bytes"] = zipped.stat().st_size
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["database"] = "sqlite (embedded default)"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
