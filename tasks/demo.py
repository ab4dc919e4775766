"""Synthetic releases of the tasks (never the official files) and plausible submissions for them,
for the demo server and the tests. Each task's declaration names its makers (`Task.demo`)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

WORDS = (
    "river stone light garden word voice bread house road fire letter mountain city star "
    "harvest door window shepherd lamp seed field tree sea wind path"
).split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def table(path: Path, header, rows, delimiter=",") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _gold_rows(store, split: str) -> list[dict]:
    return [
        json.loads(line)
        for line in store.gold(split, "gold.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _jsonl_bytes(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


# ---------------------------------------------------------- TRoTR (tric-binary, tric-ranking, trac)


def write_trotr(root: Path, n_pairs: int = 120, seed: int = 1, folds: int = 3) -> Path:
    """A made-up TRoTR checkout: `folds` folds with train/dev/test pairs (fold 1 drawn first; each
    later fold re-splits the same pairs, as the release's folds do), TRaC gold, uses and
    instances."""
    rng = random.Random(seed)
    targets = [f"Demo passage {i}: {sentence(rng, 3)}" for i in range(8)]
    uses = []
    for t_i, t in enumerate(targets):
        for u in range(5):
            uses.append((f"u{t_i}_{u}", f"{sentence(rng, 6)} {t} {sentence(rng, 4)}", "7:20", t))
    by_target = {t: [u for u in uses if u[3] == t] for t in targets}
    counter = 0
    drawn = {}
    for split, n in (("train", n_pairs // 2), ("dev", n_pairs // 2), ("test", n_pairs)):
        rows = []
        for _ in range(n):
            t = rng.choice(targets)
            a, b = rng.sample(by_target[t], 2)
            counter += 1
            score = round(rng.uniform(1, 4), 3)
            rows.append(
                {
                    "instanceID": f"pair_{counter}_(Demo {targets.index(t)})",
                    "dataID1": a[0],
                    "dataID2": b[0],
                    "lemma": t,
                    "context1": a[1],
                    "context2": b[1],
                    "indices_target_token1": a[2],
                    "indices_target_token2": b[2],
                    "indices_target_sentence1": "0:80",
                    "indices_target_sentence2": "0:80",
                    "score": score,
                    "oov": targets.index(t) % 2 == 0,
                }
            )
        drawn[split] = rows
    pool = drawn["train"] + drawn["dev"] + drawn["test"]
    for fold in range(1, max(1, folds) + 1):
        if fold > 1:  # the same pairs, split again
            order = random.Random(seed * 1000 + fold).sample(pool, len(pool))
            a, b = n_pairs // 2, n_pairs
            drawn = {"train": order[:a], "dev": order[a:b], "test": order[b:]}
        _write_trotr_fold(root / "datasets" / f"FOLD_{fold}" / "pair-by-line", drawn)
    _write_trotr_rest(root, rng, targets, uses, by_target)
    return root


def _write_trotr_fold(pl: Path, drawn: dict) -> None:
    for split, rows in drawn.items():
        for kind in ("binary", "ranking"):
            clean = [
                {k: v for k, v in r.items() if k not in ("score", "oov")}
                | {"label": int(r["score"] >= 2.5) if kind == "binary" else r["score"]}
                for r in rows
            ]
            write_jsonl(pl / f"{split}.{kind}.jsonl", clean)
            if split != "train":
                write_jsonl(
                    pl / f"{split}.oov.{kind}.jsonl",
                    [c for c, r in zip(clean, rows, strict=True) if r["oov"]],
                )
                write_jsonl(
                    pl / f"{split}.iov.{kind}.jsonl",
                    [c for c, r in zip(clean, rows, strict=True) if not r["oov"]],
                )


def _write_trotr_rest(root: Path, rng: random.Random, targets, uses, by_target) -> None:
    table(
        root / "datasets" / "trac_gold_scores.tsv",
        ("lemma", "topic_variation"),
        [(t, round(rng.uniform(0, 1), 4)) for t in targets],
        "\t",
    )
    table(
        root / "data" / "uses.tsv",
        ("dataID", "context", "indices_target_token", "lemma"),
        uses,
        "\t",
    )
    inst = []
    for t in targets:
        us = by_target[t]
        for i in range(len(us) - 1):
            inst.append((f"inst_{us[i][0]}_{us[i + 1][0]}", f"{us[i][0]},{us[i + 1][0]}"))
    table(root / "data" / "instances.tsv", ("instanceID", "dataIDs"), inst, "\t")


def trotr_release(root: Path, size: int = 120) -> dict:
    return {"source": write_trotr(root / "TRoTR", n_pairs=size), "fold": 1}


def keyed_predictions(
    task, store, split: str, noise: float, rng: random.Random
) -> tuple[bytes, str]:
    """One value per gold unit: a binary label flipped with probability `noise`, or the gold value
    with Gaussian noise scaled to the gold's spread."""
    task = task.for_split(split)  # on a cross-validated split the key includes the fold
    keys = task.format.key
    value = next(f for f in task.format.fields if f.name not in keys)
    gold = _gold_rows(store, split)
    values = [float(g[task.gold_field]) for g in gold]
    spread = (max(values) - min(values)) if values else 1.0
    out = []
    for g in gold:
        v = g[task.gold_field]
        ids = {k: g[k] for k in keys}
        if value.kind == "label01":
            out.append({**ids, value.name: v if rng.random() > noise else 1 - v})
        else:
            out.append({**ids, value.name: v + rng.gauss(0, spread * noise)})
    return _jsonl_bytes(out), "predictions.jsonl"


# ---------------------------------------------------------------- SwissGov-RSD


def write_swissgov(root: Path, docs: int = 3, seed: int = 2) -> Path:
    rng = random.Random(seed)
    base = root / "data" / "evaluation" / "gold_labels"
    for split, n in (("dev", max(1, docs - 1)), ("test", docs)):
        for lang in ("de", "fr", "it"):
            rows = []
            for i in range(n):
                ta, tb = sentence(rng, rng.randint(20, 40)), sentence(rng, rng.randint(20, 40))
                rows.append(
                    {
                        "id": f"admin_{lang}_{split}_{i}",
                        "text_a": ta,
                        "text_b": tb,
                        "labels_a": [round(rng.random(), 3) for _ in ta.split()],
                        "labels_b": [round(rng.random(), 3) for _ in tb.split()],
                    }
                )
            write_jsonl(base / split / f"gold_admin_{lang}.jsonl", rows)
    return root


def swissgov_release(root: Path, size: int = 120) -> dict:
    return {"source": write_swissgov(root / "SwissGov-RSD")}


def token_predictions(
    task, store, split: str, noise: float, rng: random.Random
) -> tuple[bytes, str]:
    out = [
        {
            "id": g["id"],
            "labels_a": [x + rng.gauss(0, 2 * noise) for x in g["labels_a"]],
            "labels_b": [x + rng.gauss(0, 2 * noise) for x in g["labels_b"]],
        }
        for g in _gold_rows(store, split)
    ]
    return _jsonl_bytes(out), "predictions.jsonl"


# ---------------------------------------------------------------- Loci Similes


def write_loci(root: Path, seed: int = 3) -> dict:
    rng = random.Random(seed)
    queries = [(f"hier. demo {i}", sentence(rng, 12)) for i in range(15)]
    sources = [(f"verg. demo {j}", sentence(rng, 12)) for j in range(30)]
    links = [(q, s, 1) for q, _ in queries for s, _ in rng.sample(sources, rng.randint(0, 2))]
    links += [(queries[0][0], s, 0) for s, _ in sources[:3] if (queries[0][0], s, 1) not in links]
    paths = {
        "query": root / "queries.csv",
        "source": root / "sources.csv",
        "gold": root / "gold.csv",
    }
    table(paths["query"], ("seg_id", "text"), queries)
    table(paths["source"], ("seg_id", "text"), sources)
    table(paths["gold"], ("query_id", "source_id", "label"), links)
    return paths


def loci_release(root: Path, size: int = 120) -> dict:
    return write_loci(root / "loci")


def link_predictions(
    task, store, split: str, noise: float, rng: random.Random
) -> tuple[bytes, str]:
    gold = list(
        csv.DictReader(io.StringIO(store.gold(split, "links.csv").read_text(encoding="utf-8")))
    )
    qs = (
        store.root.joinpath("index", split, "query_ids.txt")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    ss = (
        store.root.joinpath("index", split, "source_ids.txt")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    rows = [
        (g["query_id"], g["source_id"], round(1 - rng.random() * noise, 3))
        for g in gold
        if rng.random() > noise
    ]
    rows += [
        (rng.choice(qs), rng.choice(ss), round(rng.random() * noise, 3))
        for _ in range(int(10 * noise))
    ]
    rows = list({(q, s): (q, s, v) for q, s, v in rows}.values())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(("query_id", "source_id", "score"))
    w.writerows(rows)
    return buf.getvalue().encode(), "links.csv"
