"""A competition from the TRoTR release, through its importer and bundle, on the embedded default
(SQLite). Each repetition starts from an empty data directory and times, in one process:

- import: `import_task("tric-binary", fold 1)`, the importer turning the release into the task's
  bundle (its spec and files) and installing it (declaration, exposure rule, the swap), the human
  agreement (bootstrap) included, as `palimpsest tasks import` does;
- competition: the same import, then the competition made with it (`create_competition`);
- clone: that competition exported as a bundle zip, gold included, and created again from it
  under a new id (`clone_competition`: reading and checking every file, installing the copy).

The ratio is competition / import. The figures are medians of N, wall time and the process's CPU
time (what a loaded machine does not inflate), with the peak memory of the process (ru_maxrss) at
the end. Nearly all of the import is the human agreement's bootstrap (`tasks.agreement`).

    python3 benchmarks/trotr_bundle.py [--n 3] [--release ../shared/data/trotr]

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

TASK = "tric-binary"


def one(release: Path, with_competition: bool) -> dict[str, float]:
    from sqlmodel import Session

    from server.actions import bundles as bundle_actions
    from server.actions import competitions as comp_actions
    from server.db import get_engine
    from server.migrate import upgrade
    from server.settings import Settings
    from tasks import unregister_declared
    from tasks.importers import import_task

    out = {}
    with tempfile.TemporaryDirectory(prefix="palimpsest-bench-") as d:
        settings = Settings(home=Path(d))
        upgrade(settings)
        engine = get_engine(settings.sqlalchemy_url())
        with Session(engine) as s:
            t0, c0 = time.perf_counter(), time.process_time()
            import_task(TASK, settings.home, source=release, fold=1)
            out["import"] = time.perf_counter() - t0
            out["import_cpu"] = time.process_time() - c0
            if with_competition:
                comp_actions.create_competition(
                    s=s, actor=None, via="bench", competition="trotr-2027", title="TRoTR",
                    tasks=[TASK],
                )  # fmt: skip
                out["competition"] = time.perf_counter() - t0
                out["competition_cpu"] = time.process_time() - c0
                t1 = time.perf_counter()
                bundle_actions.clone_competition(
                    s=s, actor=None, competition="trotr-2027", new_id="trotr-2028", via="bench",
                    settings=settings,
                )  # fmt: skip
                out["clone"] = time.perf_counter() - t1
                unregister_declared(f"{TASK}-trotr-2028")
        engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--release", type=Path, default=REPO.parent / "shared" / "data" / "trotr")
    args = ap.parse_args()
    one(args.release, True)  # warm: imports, compiled statements
    runs = [one(args.release, False) for _ in range(args.n)]
    plain = [r["import"] for r in runs]
    full = [one(args.release, True) for _ in range(args.n)]
    med = {k: statistics.median(r[k] for r in full) for k in ("competition", "clone")}
    out = {
        "import_s": {"median": round(statistics.median(plain), 2), "max": round(max(plain), 2)},
        "import_cpu_s": round(statistics.median(r["import_cpu"] for r in runs), 2),
        "competition_cpu_s": round(statistics.median(r["competition_cpu"] for r in full), 2),
        "competition_s": {
            "median": round(med["competition"], 2),
            "max": round(max(r["competition"] for r in full), 2),
        },
        "clone_s": {
            "median": round(med["clone"], 2),
            "max": round(max(r["clone"] for r in full), 2),
        },
        "ratio_competition_to_import": round(med["competition"] / statistics.median(plain), 3),
        "n": args.n,
        "bar_s": 10,
        "under_bar": max(r["competition"] for r in full) < 10,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "database": "sqlite (embedded default)",
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
