"""Speed and memory of the offline scorer (validation + scoring, reading the file included).

Usage (from the repository root; see README.md, "Figures: the offline scorer"):

    pip install -e '.[bench]' && pip install --no-deps locisimiles==2.1.3
    python3 benchmarks/bench_scorer.py [--runs 5] [--out benchmarks/out] [--shared ../shared/data]

It imports every task from the official releases into `<out>/home` (SwissGov-RSD with its full
224-pair-per-language release as the test split), generates Loci Similes at the paper's scale
and one submission per task, then times `scorer.validate_file` + `scorer.score_validated` in
fresh subprocesses: the first call of a fresh process (task files not yet cached; imports done
and timed apart) and warm calls (the same process, task files cached, as in a long-lived
worker). Peak memory is the child's ru_maxrss. It then runs the reference implementations
(locisimiles' IntertextEvaluator, SwissGov-RSD's nlpstats evaluation) on the same inputs and
prints a Markdown table of the figures, the ratios and the agreement of the values.
Generated files stay under `<out>` (git-ignored); nothing is committed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SEED = 20260121
N_QUERIES, N_SOURCES, N_GOLD, N_PRED = 83_116, 88_019, 545, 1_000_000
GOLD_HIT = 0.8  # share of gold links the generated submission predicts

TARGETS = {  # seconds: the bars each task's scoring must meet
    "swissgov-rsd": 1.0,
    "loci-similes": 0.5,
    "loci-top100": 5.0,
    "loci-top100-gz": 5.0,
    "tric-binary": 0.05,
    "tric-ranking": 0.05,
    "trac": 0.05,
}
TASK_OF = {"loci-top100": "loci-similes", "loci-top100-gz": "loci-similes"}  # benchmark -> task
RSS_MB = {"loci-similes": 500, "loci-top100": 1536, "loci-top100-gz": 1536}

# A Latin vocabulary for segments that look like the corpora (only the ids matter for scoring).
LATIN = (
    "arma virum que cano troiae qui primus ab oris italiam fato profugus lavinia venit litora "
    "multum ille et terris iactatus alto vi superum saevae memorem iunonis ob iram dat sine mente "
    "sonum deus nobis haec otia fecit o decus italiae virgo quas dicere grates quasve referre "
    "parem nunc dimittis servum tuum domine secundum verbum in pace quia viderunt oculi mei "
    "salutare ecclesia fides caritas spes gratia peccatum scriptura apostolus propheta evangelium "
    "dominus christus sanctus spiritus mundus caelum terra mare ignis aqua lux tenebrae vita mors "
    "anima corpus virtus vitium amor odium bellum pax rex regnum urbs roma populus senatus consul "
    "imperium gloria fama fortuna natura ratio"
).split()


# ---------------------------------------------------------------- data


def _latin(rng: random.Random, lo: int, hi: int) -> str:
    words = rng.choices(LATIN, k=rng.randint(lo, hi))
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(".;:?!")


def make_loci(base: Path) -> dict:
    """Corpora of the paper's size, 545 gold links and 1,000,000 scored predicted links."""
    base.mkdir(parents=True, exist_ok=True)
    paths = {k: base / f"{k}.csv" for k in ("queries", "sources", "gold", "submission")}
    if all(p.exists() for p in paths.values()):
        return paths
    rng = random.Random(SEED)
    works = ["hier. epist.", "hier. adv. iovin.", "hier. in is.", "lact. inst.", "lact. de ira"]
    queries = [f"{works[i % len(works)]} {i // 500 + 1}.{i % 500 + 1}" for i in range(N_QUERIES)]
    authors = [
        "verg. aen.",
        "verg. georg.",
        "verg. ecl.",
        "cic. off.",
        "hor. carm.",
        "ov. met.",
        "lucr.",
        "sall. cat.",
        "ter. andr.",
        "stat. theb.",
    ]
    sources = [
        f"{authors[i % len(authors)]} {i // 1000 + 1}.{i % 1000 + 1}" for i in range(N_SOURCES)
    ]
    for path, ids, lo, hi in (
        (paths["queries"], queries, 4, 40),
        (paths["sources"], sources, 6, 30),
    ):
        with path.open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
            w.writerow(("seg_id", "text"))
            w.writerows((i, _latin(rng, lo, hi)) for i in ids)
    gold = set()
    while len(gold) < N_GOLD:
        gold.add((rng.randrange(N_QUERIES), rng.randrange(N_SOURCES)))
    gold = sorted(gold)
    with paths["gold"].open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(("query_id", "source_id", "label"))
        w.writerows((queries[q], sources[s], 1) for q, s in gold)
    # About 12 predicted sources per query (a top-k retriever), with 80% of the gold links among
    # them at a high score; the rest are random sources.
    hits = set(rng.sample(gold, round(GOLD_HIT * N_GOLD)))
    links = {(q, s): 0.5 + rng.random() / 2 for q, s in hits}
    per_query, extra = divmod(N_PRED - len(links), N_QUERIES)
    for q in range(N_QUERIES):
        k = per_query + (q < extra)
        while k:
            s = rng.randrange(N_SOURCES)
            if (q, s) not in links:
                links[(q, s)] = rng.random()
                k -= 1
    assert len(links) == N_PRED, len(links)
    with paths["submission"].open("w", encoding="utf-8", newline="") as f:
        f.write("query_id,source_id,score\n")
        f.writelines(f'"{queries[q]}","{sources[s]}",{sc:.6f}\n' for (q, s), sc in links.items())
    return paths


TOP_K = 100  # a retrieval-only run as in the paper's Table 3, at k = 100


def make_loci_topk(base: Path, loci: dict, k: int = TOP_K) -> dict:
    """A top-k run over the generated corpora: k scored sources for every query (8.3 M links at
    k = 100), 80% of the gold links among them; as plain CSV and gzip-compressed."""
    import gzip

    import numpy as np

    paths = {"csv": base / f"top{k}.csv", "gz": base / f"top{k}.csv.gz"}
    if all(p.exists() for p in paths.values()):
        return paths
    with loci["queries"].open(encoding="utf-8", newline="") as f:
        queries = [r[0] for r in list(csv.reader(f))[1:]]
    with loci["sources"].open(encoding="utf-8", newline="") as f:
        sources = [r[0] for r in list(csv.reader(f))[1:]]
    sidx = {s: i for i, s in enumerate(sources)}
    qidx = {q: i for i, q in enumerate(queries)}
    with loci["gold"].open(encoding="utf-8", newline="") as f:
        gold = [(qidx[r[0]], sidx[r[1]]) for r in list(csv.reader(f))[1:]]
    rng = np.random.default_rng(SEED)
    nq, ns = len(queries), len(sources)
    # k distinct sources per query: a random start and a random stride below ns / k
    start = rng.integers(0, ns, nq)[:, None]
    stride = rng.integers(1, ns // k, nq)[:, None]
    src = (start + stride * np.arange(k)[None, :]) % ns
    score = np.round(rng.random((nq, k)), 6)
    for q, s in gold:
        if rng.random() < GOLD_HIT and s not in src[q]:
            src[q, int(rng.integers(k))] = s
    lines = ["query_id,source_id,score\n"]
    with paths["csv"].open("w", encoding="utf-8", newline="") as f:
        f.write("query_id,source_id,score\n")
        for q in range(nq):
            qq = queries[q]
            f.write(
                "".join(
                    f'"{qq}","{sources[s]}",{sc:.6f}\n'
                    for s, sc in zip(src[q].tolist(), score[q].tolist(), strict=True)
                )
            )
    del lines
    with paths["csv"].open("rb") as f, gzip.open(paths["gz"], "wb", compresslevel=6) as g:
        while chunk := f.read(1 << 24):
            g.write(chunk)
    return paths


def prepare(out: Path, shared: Path) -> dict:
    """Import the tasks into <out>/home and write one submission per task; returns their paths."""
    from tasks.importers import import_task

    home = out / "home"
    sub = out / "submissions"
    sub.mkdir(parents=True, exist_ok=True)
    trotr = shared / "trotr" / "TRoTR"
    for tid in ("tric-binary", "tric-ranking", "trac"):
        if not (home / "tasks" / tid / "task.json").exists():
            import_task(tid, home, source=trotr, fold=1)
    if not (home / "tasks" / "swissgov-rsd" / "task.json").exists():
        import_task("swissgov-rsd", home, source=shared / "swissgov-rsd", test_split="full")
    loci = make_loci(out / "loci")
    if not (home / "tasks" / "loci-similes" / "task.json").exists():
        import_task(
            "loci-similes", home, query=loci["queries"], source=loci["sources"], gold=loci["gold"]
        )

    rng = random.Random(SEED)
    files = {}

    def jsonl(name, rows):
        p = sub / name
        if not p.exists():
            with p.open("w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        return p

    def rows_of(tid, name):
        with (home / "tasks" / tid / "public" / "test" / name).open(encoding="utf-8") as f:
            return [json.loads(x) for x in f]

    files["tric-binary"] = jsonl(
        "tric-binary.jsonl",
        (
            {"instanceID": r["instanceID"], "label": rng.randint(0, 1)}
            for r in rows_of("tric-binary", "inputs.jsonl")
        ),
    )
    files["tric-ranking"] = jsonl(
        "tric-ranking.jsonl",
        (
            {"instanceID": r["instanceID"], "score": round(rng.uniform(1, 4), 4)}
            for r in rows_of("tric-ranking", "inputs.jsonl")
        ),
    )
    files["trac"] = jsonl(
        "trac.jsonl",
        (
            {"target": r["target"], "score": round(rng.random(), 4)}
            for r in rows_of("trac", "targets.jsonl")
        ),
    )
    # SwissGov-RSD: a noisy copy of the gold (so the correlations are far from 0), 4 decimals.
    gold = {r["id"]: r for r in rows_of_gold(home)}
    files["swissgov-rsd"] = jsonl(
        "swissgov-rsd.jsonl",
        (
            {
                "id": r["id"],
                "labels_a": [
                    round(max(0.0, x) + rng.random(), 4) for x in gold[r["id"]]["labels_a"]
                ],
                "labels_b": [
                    round(max(0.0, x) + rng.random(), 4) for x in gold[r["id"]]["labels_b"]
                ],
            }
            for r in rows_of("swissgov-rsd", "inputs.jsonl")
        ),
    )
    files["loci-similes"] = loci["submission"]
    topk = make_loci_topk(out / "loci", loci)
    files["loci-top100"], files["loci-top100-gz"] = topk["csv"], topk["gz"]
    return {"home": home, "files": files, "loci": loci}


def rows_of_gold(home: Path) -> list[dict]:
    with (home / "tasks" / "swissgov-rsd" / "gold" / "test" / "gold.jsonl").open(
        encoding="utf-8"
    ) as f:
        return [json.loads(x) for x in f]


# ---------------------------------------------------------------- the child process


def peak_rss_kb() -> int:
    """This process's peak resident set size in KiB.

    VmHWM, where Linux has it: ru_maxrss survives fork+exec, so a child would report its parent's
    peak when that was higher.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(task_id: str, path: str, home: str, warm: int) -> None:
    """In a fresh process: time the imports, the first validate+score, then `warm` more calls."""
    t0 = time.perf_counter()
    import scipy.stats  # noqa: F401  (imported on first use by the correlations)

    try:  # imported on first use by the link reader, once per worker process
        import pyarrow.compute  # noqa: F401
        import pyarrow.csv  # noqa: F401
    except ImportError:
        pass

    import scorer
    import scorer.families  # noqa: F401
    import tasks  # noqa: F401

    t_import = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    result = scorer.score_validated(scorer.validate_file(task_id, path, home=home), home=home)
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_first = peak_rss_kb()
    warms, warms_cpu = [], []
    for _ in range(warm):
        t0, c0 = time.perf_counter(), time.process_time()
        scorer.score_validated(scorer.validate_file(task_id, path, home=home), home=home)
        warms.append(time.perf_counter() - t0)
        warms_cpu.append(time.process_time() - c0)
    json.dump(
        {
            "import": t_import,
            "first": first,
            "first_cpu": first_cpu,
            "warm": warms,
            "warm_cpu": warms_cpu,
            "rss_kb": rss_first,
            "primary": result["primary"]["value"],
            "metrics": result["metrics"],
        },
        sys.stdout,
    )


def run_child(task_id: str, path: Path, home: Path, warm: int) -> dict:
    task_id = TASK_OF.get(task_id, task_id)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, __file__, "--child", task_id, str(path), str(home), str(warm)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"child for {task_id} failed:\n{p.stderr}")
    out = json.loads(p.stdout)
    out["process"] = wall
    return out


# The same child for this checkout and another (`--against`): a whole process, its CPU read by
# the parent; what it prints is compared between the two.
TURN_CHILD = """
import json, sys
import scorer, scorer.families
task, path, home = sys.argv[1:4]
res = scorer.score_validated(scorer.validate_file(task, path, home=home), home=home)
json.dump({k: res.get(k) for k in ("metrics", "cuts", "primary")}, sys.stdout)
"""


def whole_process(task_id: str, path: Path, home: Path, checkout: Path) -> dict:
    """One fresh process of `checkout` validating and scoring `path`: its wall and CPU time
    (user + system, read from the parent's rusage of its children) and its result."""
    task_id = TASK_OF.get(task_id, task_id)
    env = dict(os.environ, PYTHONPATH=str(checkout))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", TURN_CHILD, task_id, str(path), str(home)],
        capture_output=True,
        text=True,
        cwd=checkout,
        env=env,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"child of {checkout} for {task_id} failed:\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "result": json.loads(p.stdout)}


def turns(task_id: str, path: Path, home: Path, others: list[Path], runs: int) -> list[str]:
    """This checkout and each of `others` in turns (the order rotates each round), `runs`
    processes each: the median whole-process CPU and wall of each, the ratio of this one's CPU
    to each other's, and whether their results agree to the last digit (the metrics, and the
    ranking cuts where both compute them)."""
    checkouts = [REPO, *others]
    got: list[list[dict]] = [[] for _ in checkouts]
    for i in range(runs):
        for j in range(len(checkouts)):
            c = (i + j) % len(checkouts)
            got[c].append(whole_process(task_id, path, home, checkouts[c]))
    med = statistics.median
    cpu = [med(r["cpu"] for r in g) for g in got]
    wall = [med(r["wall"] for r in g) for g in got]
    mine = got[0][0]["result"]
    lines = []
    for c in range(len(checkouts)):
        res = got[c][0]["result"]
        same = all(r["result"] == res for r in got[c]) and res["metrics"] == mine["metrics"]
        if res.get("cuts") is not None and mine.get("cuts") is not None:
            same = same and res["cuts"] == mine["cuts"]
        lines.append(
            f"| {task_id} | {checkouts[c]} | {cpu[c]:.2f} s | {wall[c]:.2f} s | "
            f"{cpu[c] / cpu[0]:.2f} | {'yes' if same else 'NO'} |"
        )
    return lines


def measure(task_id: str, path: Path, home: Path, runs: int, warm: int) -> dict:
    """Median figures over `runs` fresh processes."""
    res = [run_child(task_id, path, home, warm) for _ in range(runs)]
    med = statistics.median
    return {
        "process": med(r["process"] for r in res),
        "import": med(r["import"] for r in res),
        "first": med(r["first"] for r in res),
        "first_cpu": med(r["first_cpu"] for r in res),
        "warm": med(w for r in res for w in r["warm"]) if warm else None,
        "warm_cpu": med(w for r in res for w in r["warm_cpu"]) if warm else None,
        "rss_mb": max(r["rss_kb"] for r in res) / 1024,
        "metrics": res[0]["metrics"],
        "primary": res[0]["primary"],
    }


# ---------------------------------------------------------------- references


def ref_swissgov(submission: Path, home: Path) -> dict:
    """SwissGov-RSD's scripts/evaluate_predictions_admin.py metric path on our files.

    Per language: concatenate side a, and side b unless its gold is all -1, drop gold -1 tokens,
    then nlpstats' correlate(level="global") for Spearman and Kendall, and the script's
    bootstrap(..., n_resamples=1) whose spread it prints as "±".
    """
    import numpy as np
    from nlpstats.correlations import bootstrap, correlate

    t0 = time.perf_counter()
    with submission.open(encoding="utf-8") as f:
        preds = {r["id"]: r for r in map(json.loads, f)}
    out = {}
    for pair in ("en-de", "en-fr", "en-it"):
        gold = [r for r in rows_of_gold(home) if r["pair"] == pair]
        pl, gl = [], []
        for g in gold:
            p = preds[g["id"]]
            pl.extend(p["labels_a"])
            gl.extend(g["labels_a"])
            if not all(x == -1 for x in g["labels_b"]):
                pl.extend(p["labels_b"])
                gl.extend(g["labels_b"])
        fp = [p for p, g in zip(pl, gl, strict=True) if g != -1]
        fg = [g for p, g in zip(pl, gl, strict=True) if g != -1]
        pa, ga = np.expand_dims(np.array(fp), 0), np.expand_dims(np.array(fg), 0)
        vals = {}
        for coef in ("spearman", "kendall"):
            r = correlate(pa, ga, level="global", coefficient=coef)
            b = bootstrap(
                pa, ga, level="global", coefficient=coef, resampling_method="inputs", n_resamples=1
            )
            vals[coef] = float(r)
            vals[coef + "_pm"] = float(max(b.upper - r, r - b.lower))
        out[pair] = vals
    return {"seconds": time.perf_counter() - t0, "values": out}


def _load_locisimiles_evaluator():
    """locisimiles.evaluator without the package's heavy imports (torch, chromadb, ...).

    The package's __init__ imports every pipeline; the evaluator itself needs only pandas,
    locisimiles.document, locisimiles.ground_truth and the CandidateJudge dataclass, so a bare
    package module and a `locisimiles.pipeline` stub holding just those names stand in.
    """
    import importlib.util
    import types

    spec = importlib.util.find_spec("locisimiles")
    if spec is None:
        return None
    pkg_dir = Path(spec.origin).parent
    pkg = types.ModuleType("locisimiles")
    pkg.__path__ = [str(pkg_dir)]
    sys.modules["locisimiles"] = pkg
    pipe = types.ModuleType("locisimiles.pipeline")
    pipe.__path__ = [str(pkg_dir / "pipeline")]
    sys.modules["locisimiles.pipeline"] = pipe
    from locisimiles.pipeline._types import CandidateJudge, CandidateJudgeOutput

    pipe.CandidateJudge, pipe.CandidateJudgeOutput = CandidateJudge, CandidateJudgeOutput
    pipe.Pipeline = pipe.TwoStagePipeline = object
    from locisimiles import evaluator

    return evaluator


class _FixedPipeline:
    """A 'pipeline' that returns a submission's links, read from our CSV, as CandidateJudge
    lists."""

    def __init__(self, submission: Path, source_doc, keep_queries=None):
        from locisimiles.pipeline._types import CandidateJudge

        segs = {sid: source_doc[sid] for sid in source_doc.ids()}
        self.out: dict = {}
        with submission.open(encoding="utf-8", newline="") as f:
            r = csv.reader(f)
            next(r)
            for q, s, sc in r:
                if keep_queries is None or q in keep_queries:
                    self.out.setdefault(q, []).append(CandidateJudge(segs[s], None, float(sc)))

    def run(self, *, query, source, top_k):
        return self.out


def ref_loci(loci: dict, sample: int, agree_queries: int, out: Path, home: Path) -> dict | None:
    """IntertextEvaluator at full scale (construction timed, per-query cost sampled and
    extrapolated), and its micro-averaged numbers beside ours on a reduced instance it can
    finish."""
    ev_mod = _load_locisimiles_evaluator()
    if ev_mod is None:
        return None
    from locisimiles.document import Document

    quiet = contextlib.redirect_stdout(io.StringIO())
    t0 = time.perf_counter()
    qdoc, sdoc = Document(str(loci["queries"])), Document(str(loci["sources"]))
    pipe = _FixedPipeline(loci["submission"], sdoc)
    with quiet:
        ev = ev_mod.IntertextEvaluator(
            query_doc=qdoc,
            source_doc=sdoc,
            ground_truth=str(loci["gold"]),
            pipeline=pipe,
            top_k=N_SOURCES - 1,
            threshold=float("-inf"),
        )
    construct = time.perf_counter() - t0
    rng = random.Random(SEED)
    ids = qdoc.ids()
    picked = rng.sample(ids, sample)
    t0 = time.perf_counter()
    for q in picked:
        ev.evaluate_single_query(q)
    per_query = (time.perf_counter() - t0) / sample
    # evaluate(average="micro") evaluates every query once, and the gold queries once more.
    n_evals = len(ids) + len(ev.query_ids_with_match())
    full = {
        "construct": construct,
        "per_query": per_query,
        "n_evals": n_evals,
        "extrapolated": construct + per_query * n_evals,
        "sample": sample,
    }
    del ev, pipe

    # Agreement on a reduced instance: `agree_queries` queries with a gold link and as many
    # without, all sources, their gold and predicted links. Ours is imported into its own home.
    small = out / "loci-small"
    small.mkdir(parents=True, exist_ok=True)
    with loci["gold"].open(encoding="utf-8", newline="") as f:
        gold_rows = list(csv.reader(f))[1:]
    gold_q = sorted({r[0] for r in gold_rows})[:agree_queries]
    keep = set(gold_q)
    keep |= {q for q in ids[: 4 * agree_queries] if q not in keep}
    gold_rows = [r for r in gold_rows if r[0] in keep]
    gold_q = sorted({r[0] for r in gold_rows})  # the evaluator's query_ids_with_match()
    with (small / "gold.csv").open("w", encoding="utf-8", newline="") as g:
        w = csv.writer(g, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(("query_id", "source_id", "label"))
        w.writerows(gold_rows)
    with (
        loci["queries"].open(encoding="utf-8", newline="") as f,
        (small / "queries.csv").open("w", encoding="utf-8", newline="") as g,
    ):
        r, w = csv.reader(f), csv.writer(g, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(next(r))
        w.writerows(row for row in r if row[0] in keep)
    with (
        loci["submission"].open(encoding="utf-8", newline="") as f,
        (small / "submission.csv").open("w", encoding="utf-8", newline="") as g,
    ):
        r, w = csv.reader(f), csv.writer(g, lineterminator="\n")
        w.writerow(next(r))
        w.writerows(row for row in r if row[0] in keep)
    from scorer import score_file
    from tasks.importers import import_task

    shome = small / "home"
    import_task(
        "loci-similes",
        shome,
        query=small / "queries.csv",
        source=loci["sources"],
        gold=small / "gold.csv",
    )
    ours = score_file("loci-similes", small / "submission.csv", home=shome)["metrics"]["all"]
    qdoc = Document(str(small / "queries.csv"))
    pipe = _FixedPipeline(small / "submission.csv", sdoc)
    t0 = time.perf_counter()
    with quiet:
        ev = ev_mod.IntertextEvaluator(
            query_doc=qdoc,
            source_doc=sdoc,
            ground_truth=str(small / "gold.csv"),
            pipeline=pipe,
            top_k=N_SOURCES - 1,
            threshold=float("-inf"),
        )
        macro = ev.evaluate(average="macro").iloc[0].to_dict()
        micro = ev.evaluate(average="micro").iloc[0].to_dict()
    small_seconds = time.perf_counter() - t0
    return {
        "full": full,
        "ours": ours,
        "macro": macro,
        "micro": micro,
        "n_queries": len(qdoc.ids()),
        "n_gold_queries": len(gold_q),
        "small_seconds": small_seconds,
    }


def ref_ir(loci: dict, ours: dict) -> dict | None:
    """trec_eval (ir_measures' pytrec_eval provider) on the same run: recall, AP and nDCG at
    10 and 100, and RR (trec_eval's recip_rank, cut at k here), averaged over the gold queries."""
    try:
        import ir_measures
        from ir_measures import AP, RR, R, nDCG
    except ImportError:
        return None
    t0 = time.perf_counter()
    qrels: dict = {}
    with loci["gold"].open(encoding="utf-8", newline="") as f:
        for q, s_, _ in list(csv.reader(f))[1:]:
            qrels.setdefault(q, {})[s_] = 1
    run: dict = {}
    with loci["submission"].open(encoding="utf-8", newline="") as f:
        r = csv.reader(f)
        next(r)
        for q, s_, sc in r:
            run.setdefault(q, {})[s_] = float(sc)
    cut = (10, 100)
    per: dict = {}
    for m in ir_measures.pytrec_eval.iter_calc(
        [m @ k for k in cut for m in (R, AP, nDCG)] + [RR], qrels, run
    ):
        per.setdefault(str(m.measure), {})[m.query_id] = m.value
    gq = sorted(qrels)
    theirs = {}
    for k in cut:
        for name, key in (("recall", f"R@{k}"), ("map", f"AP@{k}"), ("ndcg", f"nDCG@{k}")):
            theirs[f"{name}@{k}"] = sum(per.get(key, {}).get(q, 0.0) for q in gq) / len(gq)
        theirs[f"mrr@{k}"] = sum(
            x if x and 1 / x <= k + 1e-9 else 0.0 for x in (per["RR"].get(q, 0.0) for q in gq)
        ) / len(gq)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "theirs": theirs, "ours": {k: ours[k] for k in theirs}}


# ---------------------------------------------------------------- report


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def report(fig: dict, refs: dict, args) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    lines = [
        f"Machine: {os.cpu_count()} CPU cores, Python {platform.python_version()}, "
        f"{platform.machine()}; medians of {args.runs} fresh processes"
        f" (warm: median of {args.runs} x {args.warm} calls); load average at the end "
        f"{'/'.join(f'{x:.1f}' for x in load) if load else 'unknown'} (1/5/15 min).",
        "",
        "| task | input | target | first call, fresh process: wall (CPU) | warm call: wall (CPU) | "
        "whole process (start, imports, first call) | imports | peak RSS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    inputs = {
        "swissgov-rsd": "full release, 672 document pairs, {n} scored tokens ({size})",
        "loci-similes": "83,116 x 88,019 segments, 545 gold links, 1,000,000 scored links ({size})",
        "loci-top100": "the same corpora, a top-100 run: 8,311,600 scored links, CSV ({size})",
        "loci-top100-gz": "the same top-100 run, CSV .gz ({size})",
        "tric-binary": "test fold 1, {n} instances",
        "tric-ranking": "test fold 1, {n} instances",
        "trac": "{n} targets",
    }
    for tid, f in fig.items():
        n = f["metrics"].get("macro", f["metrics"].get("all", {})).get("n")
        size = f"{f['size'] / 2**20:.0f} MiB"
        mark = "yes" if f["first"] <= TARGETS[tid] else "NO"
        rss = f"{f['rss_mb']:.0f} MB"
        if tid in RSS_MB:
            rss += f" ({'under' if f['rss_mb'] < RSS_MB[tid] else 'OVER'} {RSS_MB[tid]} MB)"
        lines.append(
            f"| {tid} | {inputs[tid].format(n=f'{n:,}' if n else '?', size=size)} | "
            f"<= {fmt_s(TARGETS[tid])} ({mark}) | {fmt_s(f['first'])} ({fmt_s(f['first_cpu'])}) | "
            f"{fmt_s(f['warm'])} ({fmt_s(f['warm_cpu'])}) | "
            f"{fmt_s(f['process'])} | {fmt_s(f['import'])} | {rss} |"
        )
    lines.append("")
    if "swissgov" in refs:
        r = refs["swissgov"]
        ours = fig["swissgov-rsd"]["metrics"]
        lines += [
            'SwissGov-RSD reference (nlpstats `correlate(level="global")`, the metric path of '
            "upstream scripts/evaluate_predictions_admin.py, reading the same files): "
            f"{fmt_s(r['seconds'])} vs ours {fmt_s(fig['swissgov-rsd']['first'])} first call "
            f"= **{r['seconds'] / fig['swissgov-rsd']['first']:.1f}x** "
            f"({r['seconds'] / fig['swissgov-rsd']['warm']:.1f}x against our warm call).",
            "",
            "| pair | spearman (ours) | spearman (nlpstats) | kendall (ours) | kendall (nlpstats) "
            '| upstream "±" (spearman, 1 resample) |',
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for pair, v in r["values"].items():
            lines.append(
                f"| {pair} | {ours[pair]['spearman']:.6f} | {v['spearman']:.6f} | "
                f"{ours[pair]['kendall']:.6f} | {v['kendall']:.6f} | {v['spearman_pm']:.4f} |"
            )
        diff = max(
            abs(ours[p][c] - v[c]) for p, v in r["values"].items() for c in ("spearman", "kendall")
        )
        lines += ["", f"Largest difference: {diff:.2e}.", ""]
    if "loci" in refs and refs["loci"]:
        r = refs["loci"]
        full = r["full"]
        lines += [
            "Loci Similes reference (locisimiles 2.1.3 `IntertextEvaluator.evaluate()`, "
            "predictions passed as the CandidateJudge lists a pipeline returns, threshold -inf so "
            "every submitted link counts): building it from the same CSVs took "
            f"{fmt_s(full['construct'])}; `evaluate_single_query` took {fmt_s(full['per_query'])} "
            f"per query (mean of {full['sample']} random queries; each call rebuilds the set of "
            "all 1,000,000 links and walks all 88,019 sources). `evaluate` makes "
            f"{full['n_evals']:,} such calls (every query, then the gold queries again), so a full "
            f"run is extrapolated linearly to **{full['extrapolated'] / 3600:.1f} h = "
            f"{full['extrapolated'] / fig['loci-similes']['first']:,.0f}x** our first call (not "
            "run to the end).",
            "",
            f"Agreement on a reduced instance it finishes ({r['n_queries']:,} queries, of which "
            f"{r['n_gold_queries']} have a gold link, x 88,019 sources; "
            f"{fmt_s(r['small_seconds'])} for the evaluator's two `evaluate` calls):",
            "",
            "| metric | ours | locisimiles | difference |",
            "| --- | --- | --- | --- |",
        ]
        diffs = []
        pairs = [
            (m, m, "macro") for m in ("precision", "recall", "f1", "accuracy", "smr", "fpr", "fnr")
        ]
        pairs += [(f"{m}_micro", m, "micro") for m in ("precision", "recall", "f1")]
        pairs += [(m, m, "micro") for m in ("smr", "fpr", "fnr")]
        pairs += [(m, m, "macro") for m in ("tp", "fp", "fn", "tn")]
        for ours_key, their_key, avg in pairs:
            a, b = r["ours"][ours_key], r[avg][their_key]
            diffs.append(abs(a - b))
            f = (
                (lambda x: f"{int(x):,}")
                if ours_key in ("tp", "fp", "fn", "tn")
                else (lambda x: f"{x:.12g}")
            )
            lines.append(
                f'| {ours_key} | {f(a)} | {f(b)} (`average="{avg}"` {their_key}) | '
                f"{abs(a - b):.1e} |"
            )
        lines += ["", f"Largest difference: {max(diffs):.1e}.", ""]
    if refs.get("ir"):
        r = refs["ir"]
        lines += [
            "IR ranking metrics reference (ir_measures 0.4 with its pytrec_eval provider, i.e. "
            "trec_eval: `R@k`, `AP@k`, `nDCG@k`, and `RR` cut at k; the same 1,000,000-link run "
            f"read with the csv module into its dicts): {fmt_s(r['seconds'])} vs ours "
            f"{fmt_s(fig['loci-similes']['first'])} first call (reading, validation and every "
            f"metric) = **{r['seconds'] / fig['loci-similes']['first']:.1f}x**.",
            "",
            "| metric | ours | trec_eval |",
            "| --- | --- | --- |",
        ]
        for k, v in r["theirs"].items():
            lines.append(f"| {k} | {r['ours'][k]:.12g} | {v:.12g} |")
        diff = max(abs(r["ours"][k] - v) for k, v in r["theirs"].items())
        lines += ["", f"Largest difference: {diff:.1e}.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per task (median)")
    ap.add_argument("--warm", type=int, default=5, help="warm calls per process")
    ap.add_argument("--only", nargs="*", default=list(TARGETS), help="tasks to measure")
    ap.add_argument("--no-references", action="store_true")
    ap.add_argument(
        "--ref-sample", type=int, default=30, help="queries timed in IntertextEvaluator"
    )
    ap.add_argument(
        "--ref-queries",
        type=int,
        default=50,
        help="gold queries (and as many others) of the agreement instance",
    )
    ap.add_argument(
        "--against",
        type=lambda x: Path(x).resolve(),
        nargs="+",
        help="other checkouts (git worktrees of earlier commits): each task of --only is scored "
        "by this one and each of them in turns, --runs whole processes each; their CPU, its "
        "ratio to this one's and whether the results agree are printed (nothing else is run)",
    )
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], args.child[2], int(args.child[3]))
        return
    t0 = time.perf_counter()
    data = prepare(args.out, args.shared)
    print(f"prepared data in {args.out} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if args.against:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        lines = [
            f"load average at the start: {load}; medians of {args.runs} processes each, in turns",
            "",
            "| task | checkout | whole process: CPU | wall | CPU / this checkout's | same "
            "metrics and cuts |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for tid in args.only:
            got = turns(tid, data["files"][tid], data["home"], args.against, args.runs)
            lines += got
            print("\n".join(got), file=sys.stderr)
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print("\n".join([*lines, "", f"load average at the end: {load}"]))
        return
    fig = {}
    for tid in args.only:
        fig[tid] = measure(tid, data["files"][tid], data["home"], args.runs, args.warm)
        fig[tid]["size"] = data["files"][tid].stat().st_size
        print(
            f"{tid}: first {fmt_s(fig[tid]['first'])}, warm {fmt_s(fig[tid]['warm'])}",
            file=sys.stderr,
        )
    refs = {}
    if not args.no_references:
        if "swissgov-rsd" in fig:
            runs = [
                ref_swissgov(data["files"]["swissgov-rsd"], data["home"]) for _ in range(args.runs)
            ]
            refs["swissgov"] = {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "values": runs[0]["values"],
            }
        if "loci-similes" in fig:
            refs["loci"] = ref_loci(
                data["loci"], args.ref_sample, args.ref_queries, args.out, data["home"]
            )
            refs["ir"] = ref_ir(data["loci"], fig["loci-similes"]["metrics"]["all"])
    print(report(fig, refs, args))


if __name__ == "__main__":
    main()
