"""Loci Similes in the tests: a generated release, its files, our scores and a brute-force
reference."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from scorer import score_validated, validate_file


def write_csv(path: Path, header, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def read_csv(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))[1:]


def ours(home: Path, sub: Path, only=None) -> dict:
    v = validate_file("loci-similes", sub, home=home)
    return score_validated(v, home=home, only=only)


def generated_release(
    dir: Path, seed: int, n_q: int, n_s: int, n_gold: int
) -> tuple[dict, list, list, list]:
    rng = np.random.default_rng(seed)
    qids = [f"hier. epist. {i // 7 + 1}.{i % 7}" for i in range(n_q)]
    sids = [f"verg. aen. {j // 11 + 1}.{j % 11}" for j in range(n_s)]
    gold = sorted(
        {(qids[int(rng.integers(n_q // 2))], sids[int(rng.integers(n_s))]) for _ in range(n_gold)}
    )
    files = {
        "query": write_csv(dir / "q.csv", ("seg_id", "text"), [(q, "arma virumque") for q in qids]),
        "source": write_csv(dir / "s.csv", ("seg_id", "text"), [(s, "cano troiae") for s in sids]),
        "gold": write_csv(
            dir / "g.csv", ("query_id", "source_id", "label"), [(q, s, 1) for q, s in gold]
        ),
    }
    return files, qids, sids, gold


def brute_force(run: dict, gold: set, queries: list[str], n_sources: int, k: int) -> dict:
    """Every query's sources sorted one by one as trec_eval ranks them (descending float32 score,
    ties by descending source id in byte order), the first k kept, the pairs counted."""
    tp = fp = fn = 0
    f1s, pooled = [], [0, 0, 0]  # F1 per gold query; TP, FP, FN of the gold queries
    for q in queries:
        ranked = sorted(
            run.get(q, {}).items(),
            key=lambda item: (float(np.float32(item[1])), item[0].encode("utf-8")),
            reverse=True,
        )
        top = {s for s, _ in ranked[:k]}
        g = {s for (gq, s) in gold if gq == q}
        t = len(top & g)
        tp, fp, fn = tp + t, fp + len(top) - t, fn + len(g) - t
        if g:
            pooled = [pooled[0] + t, pooled[1] + len(top) - t, pooled[2] + len(g) - t]
            p = t / len(top) if top else 0.0
            r = t / len(g)
            f1s.append(2 * p * r / (p + r) if p + r else 0.0)
    n = len(queries) * n_sources
    t, f_p, f_n = pooled
    pm = t / (t + f_p) if t + f_p else 0.0
    rm = t / (t + f_n) if t + f_n else 0.0
    return {
        "predictions": tp + fp,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "f1": sum(f1s) / len(f1s) if f1s else None,
        "f1_micro": 2 * pm * rm / (pm + rm) if pm + rm else 0.0,
        "fpr_e4": fp / n * 1e4,
        "smr_e4": (fp + fn) / n * 1e4,
    }
