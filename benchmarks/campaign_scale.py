"""An assessment campaign at Loci Similes' scale: pool, assign and rescore three top-100 runs.

The corpora are the paper's size (83,116 query and 88,019 source segments, made-up Latin, as
`bench_scorer.make_loci` writes them, with 545 gold links); three runs of 100 scored sources per
query (8.3 M links each): the first as `bench_scorer.make_loci_topk` draws it, the other two
sharing `--shared` of its links per query and drawing the rest anew (systems that agree on most
candidates, as retrieval systems on one corpus do). Stages, each in a child process of its own
(its wall time and peak RSS):

- pool: `server.domain.campaign_pool.pool_links` (read and validate each run, top-k per query,
  union, minus gold, the factors: proposing runs, source work, shared words, gold query);
- assign + write: `server.domain.campaign_pool.write_items` (the balanced seeded assignment to three
  assessors, three each, and the bulk INSERTs of items and assignments) and the commit, into
  SQLite (the embedded default) or the database of `--database-url`;
- rescore: the scorer on each run against a gold grown by `--accepted` links (what the worker does
  for every run after a campaign closes), one run after another as one worker would.

    python benchmarks/campaign_scale.py --out /work/bench-campaign
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing as mp
import os
import platform
import random
import resource
import shutil
import sys
import time
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

SEED = 20261124
TASK = "loci-similes"


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_runs(out: Path, loci: dict, n_runs: int, k: int, shared: float) -> list[Path]:
    """Run 1 as bench_scorer draws a top-k run; runs 2.. keep `shared` of its sources per query
    and draw the others (distinct per query), with new scores."""
    from bench_scorer import make_loci_topk

    first = make_loci_topk(out, loci, k)["csv"]
    paths = [first]
    with loci["queries"].open(encoding="utf-8", newline="") as f:
        queries = [r[0] for r in list(csv.reader(f))[1:]]
    with loci["sources"].open(encoding="utf-8", newline="") as f:
        sources = [r[0] for r in list(csv.reader(f))[1:]]
    nq, ns = len(queries), len(sources)
    base = None
    for r in range(1, n_runs):
        path = out / f"top{k}-run{r + 1}.csv"
        paths.append(path)
        if path.exists():
            continue
        if base is None:  # run 1's sources per query, in file order
            sidx = {s: i for i, s in enumerate(sources)}
            base = np.empty((nq, k), dtype=np.int64)
            with first.open(encoding="utf-8", newline="") as f:
                rows = csv.reader(f)
                next(rows)
                for n, row in enumerate(rows):
                    base[n // k, n % k] = sidx[row[1]]
        rng = np.random.default_rng(SEED + r)
        src = base.copy()
        fresh = rng.random((nq, k)) >= shared
        src[fresh] = rng.integers(0, ns, int(fresh.sum()))
        score = np.round(rng.random((nq, k)), 6)
        with path.open("w", encoding="utf-8") as f:
            f.write("query_id,source_id,score\n")
            for q in range(nq):
                seen = set()
                qq = queries[q]
                lines = []
                for s, sc in zip(src[q].tolist(), score[q].tolist(), strict=True):
                    if s in seen:
                        continue
                    seen.add(s)
                    lines.append(f'"{qq}","{sources[s]}",{sc:.6f}\n')
                f.write("".join(lines))
    return paths


def _engine(url: str):
    from sqlmodel import create_engine

    from server import models  # the tables (every one: models.schema())

    engine = create_engine(url)
    models.schema().drop_all(engine)
    models.schema().create_all(engine)
    return engine


def stage_pool_and_write(home: str, url: str, runs: list[str], depth: int, q) -> None:
    os.environ["PALIMPSEST_HOME"] = home
    from sqlmodel import Session

    from server.domain import campaign_pool  # the pool loads numpy: here, not at collection
    from server.models import AssessmentCampaign, Competition, Phase, User
    from tasks import get_task

    engine = _engine(url)
    with Session(engine) as s:
        users = [User(email=f"a{i}@example.org", password_hash="x") for i in (1, 2, 3)]
        comp = Competition(slug="loci", title="Loci", state="visible")
        s.add_all([*users, comp])
        s.flush()
        phase = Phase(task_id=TASK, name="test", split="test")
        s.add(phase)
        s.flush()
        subs = [SimpleNamespace(id=i + 1, storage_key=key) for i, key in enumerate(runs)]
        task = get_task(TASK)
        t0 = time.perf_counter()
        pool = campaign_pool.pool_links(s, task, phase, depth, Path(home), subs)
        t_pool = time.perf_counter() - t0
        rss_pool = peak_mib()
        print(f"pool: {len(pool):,} items in {t_pool:.1f} s", file=sys.stderr, flush=True)
        c = AssessmentCampaign(
            competition_id=comp.id, task_id=TASK, phase_id=phase.id, depth=depth, seed=SEED,
            labels=["reference", "no reference"], runs=[x.id for x in subs],
        )  # fmt: skip
        s.add(c)
        s.flush()
        t0 = time.perf_counter()
        campaign_pool.write_items(s, c.id, pool, [u.id for u in users], 3, SEED)
        s.commit()
        t_write = time.perf_counter() - t0
        by_runs: dict[int, int] = {}
        for lst in pool.columns["run"]:
            by_runs[len(lst)] = by_runs.get(len(lst), 0) + 1
    engine.dispose()
    q.put(
        {
            "items": len(pool),
            "items_by_number_of_runs": dict(sorted(by_runs.items())),
            "assignments": 3 * len(pool),
            "pool_s": t_pool,
            "pool_peak_mib": rss_pool,
            "assign_write_s": t_write,
            "peak_mib": peak_mib(),
        }
    )


def stage_rescore(home: str, runs: list[str], q) -> None:
    import scorer
    from server.storage import path_for

    out = []
    for key in runs:
        t0 = time.perf_counter()
        res = scorer.score_file(TASK, path_for(Path(home), key), "test", home)
        out.append({"s": time.perf_counter() - t0, "map@100": res["metrics"]["all"].get("map@100")})
    q.put({"runs": out, "peak_mib": peak_mib()})


def child(fn, *args) -> dict:
    """Run a stage in a fresh process (its own peak RSS); its figures, or its failure."""
    import queue

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(*args, q))
    t0 = time.perf_counter()
    p.start()
    while True:
        try:
            got = q.get(timeout=1)
            break
        except queue.Empty:
            if not p.is_alive():
                raise SystemExit(
                    f"the stage {fn.__name__} failed (exit code {p.exitcode})"
                ) from None
    p.join()
    got["wall_s"] = time.perf_counter() - t0
    return got


def grow_gold(home: Path, accepted: int) -> None:
    """Add `accepted` links (drawn from run 1's candidates) to the gold, as closing would."""
    gold = home / "tasks" / TASK / "gold" / "test" / "links.csv"
    orig = gold.with_suffix(".orig")
    if not orig.exists():
        shutil.copyfile(gold, orig)
    shutil.copyfile(orig, gold)
    qids = (home / "tasks" / TASK / "index" / "test" / "query_ids.txt").read_text().split("\n")
    sids = (home / "tasks" / TASK / "index" / "test" / "source_ids.txt").read_text().split("\n")
    rng = random.Random(SEED)
    with gold.open("a", encoding="utf-8", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for _ in range(accepted):
            w.writerow((rng.choice(qids[:-1]), rng.choice(sids[:-1]), 1))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-campaign"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--shared", type=float, default=0.8)
    ap.add_argument("--accepted", type=int, default=1000)
    ap.add_argument("--database-url", default=None, help="default: a SQLite file in --out")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--reuse-pool", action="store_true", help="take the pool stage's figures from a former run"
    )
    args = ap.parse_args(argv)
    from bench_scorer import make_loci

    from tasks.importers import import_task

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    loci = make_loci(out / "loci")
    home = out / "home"
    if not (home / "tasks" / TASK / "task.json").exists():
        import_task(TASK, home, query=loci["queries"], source=loci["sources"], gold=loci["gold"])
    files = make_runs(out / "loci", loci, args.runs, args.k, args.shared)
    # the runs as stored uploads (links into the uploads directory), as the server keeps them
    from server.storage import path_for

    runs = []
    for i, f in enumerate(files):
        key = f"bench/run{i + 1}.csv"
        dest = path_for(home, key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        dest.symlink_to(f.resolve())
        runs.append(key)
    url = args.database_url or f"sqlite:///{out / 'campaign.sqlite'}"
    sizes = [sum(1 for _ in open(f, "rb")) - 1 for f in files]
    saved = out / f"pool-{args.runs}x{args.k}-d{args.depth}-{url.split(':', 1)[0]}.json"
    if args.reuse_pool and saved.exists():  # the figures of an earlier run of the same stage
        pool = json.loads(saved.read_text())
    else:
        pool = child(stage_pool_and_write, str(home), url, runs, args.depth)
        saved.write_text(json.dumps(pool))
    grow_gold(home, args.accepted)
    rescore = child(stage_rescore, str(home), runs)
    fig = {
        "date": date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        "command": "python benchmarks/campaign_scale.py " + " ".join(argv or sys.argv[1:]),
        "database": url.split(":", 1)[0],
        "links_per_run": sizes,
        "depth": args.depth,
        "pool": pool,
        "rescore": rescore,
    }
    if args.json:
        print(json.dumps(fig, indent=2))
        return
    print(f"{fig['date']}, {fig['machine']}, {fig['database']}")
    print(f"runs: {', '.join(f'{n:,}' for n in sizes)} links; depth {args.depth}")
    print(
        f"pool: {pool['items']:,} items {pool['items_by_number_of_runs']} in {pool['pool_s']:.1f} s"
        f" (peak {pool['pool_peak_mib']:.0f} MiB)"
    )
    print(
        f"assign + write: {pool['assignments']:,} assignments in {pool['assign_write_s']:.1f} s "
        f"(stage peak {pool['peak_mib']:.0f} MiB)"
    )
    each = ", ".join(f"{r['s']:.1f} s" for r in rescore["runs"])
    tot = sum(r["s"] for r in rescore["runs"])
    print(f"rescore: {each} (total {tot:.1f} s, peak {rescore['peak_mib']:.0f} MiB)")


if __name__ == "__main__":
    main()
