"""Scoring PAN text alignment: a run of 100,000 detections over 10,000 document pairs, validated
and scored by `palimpsest score pan-text-alignment RUN --json` in a process of its own (CPU time
and peak memory of the whole process, as /usr/bin/time reports them), JSON Lines and PAN XML.

    python benchmarks/bench_pan.py [--pairs 10000] [--detections 100000] [--work DIR]

The corpus is generated (`tasks.pan.generate`, seed 0) and imported once into DIR/home; the run
is the gold's cases cut into pieces with shifted ends plus random detections, 100,000 in all.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks import pan  # noqa: E402
from tasks.importers import import_task  # noqa: E402
from tasks.store import TaskStore  # noqa: E402

TASK = "pan-text-alignment"


def _run_rows(home: Path, n: int, rng: random.Random) -> list[tuple]:
    st = TaskStore(TASK, home)
    pairs = [json.loads(x) for x in st.public("test", "pairs.jsonl").read_text().splitlines()]
    length = {}
    for line in st.public("test", "documents.jsonl").read_text().splitlines():
        r = json.loads(line)
        length[r["id"]] = len(r["text"])
    gold = [json.loads(x) for x in st.gold("test", "gold.jsonl").read_text().splitlines()]
    rows = []
    for p, g in zip(pairs, gold, strict=True):
        t, s = p["suspicious"], p["source"]
        for c in g["cases"]:
            k = rng.randint(1, 8)
            for j in range(k):
                a = c["this_offset"] + j * c["this_length"] // k
                b = c["this_offset"] + (j + 1) * c["this_length"] // k
                if b > a:
                    rows.append((t, s, a, b - a, c["source_offset"], c["source_length"]))
    while len(rows) < n:
        p = rng.choice(pairs)
        t, s = p["suspicious"], p["source"]
        to, so = rng.randrange(length[t] - 1), rng.randrange(length[s] - 1)
        tl = rng.randint(1, min(400, length[t] - to))
        sl = rng.randint(1, min(400, length[s] - so))
        rows.append((t, s, to, tl, so, sl))
    return rows[:n]


def _timed(cmd: list[str], env: dict) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env, timeout=600
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
    err = out.stderr

    def field(name):
        return float(re.search(rf"{name}: ([0-9.]+)", err).group(1))

    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(field(r"User time \(seconds\)") + field(r"System time \(seconds\)"), 2),
        "peak_rss_mib": round(field(r"Maximum resident set size \(kbytes\)") / 1024, 1),
        "plagdet": json.loads(out.stdout)["metrics"]["all"]["plagdet"],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--detections", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-pan-"))
    home = work / "home"
    corpus = work / "corpus"
    if not TaskStore(TASK, home).exists():
        n = a.pairs // 2
        t0 = time.perf_counter()
        pan.generate(corpus, seed=0, n_susp=n, n_src=n, pairs_per_susp=2)
        import_task(TASK, home, source=corpus)
        print(f"corpus: {a.pairs} pairs generated and imported in {time.perf_counter() - t0:.0f} s")
    rows = _run_rows(home, a.detections, random.Random(0))
    jl = work / "run.jsonl"
    jl.write_text(pan.jsonl_detections(rows), encoding="utf-8")
    by_pair: dict = {}
    for t, s, *v in rows:
        by_pair.setdefault((t, s), []).append(v)
    xml = work / "run.xml"
    xml.write_text(
        "<run>\n"
        + "".join(pan.detection_xml(t, s, v) for (t, s), v in by_pair.items())
        + "</run>\n",
        encoding="utf-8",
    )
    env = {"PALIMPSEST_HOME": str(home), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"}
    exe = str(Path(sys.executable).with_name("palimpsest"))
    out = {"pairs": a.pairs, "detections": len(rows)}
    for name, path in (("jsonl", jl), ("xml", xml)):
        _timed([exe, "score", TASK, str(path), "--json"], env)  # warm the page cache
        out[name] = _timed([exe, "score", TASK, str(path), "--json"], env)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
