"""Writes the data of the example bundle `bundle-sts-latin/`: made-up sentence pairs in a
pseudo-Latin (no real corpus), each scored for relatedness by construction, deterministically
(seeded): the same files on every run.

    python examples/make_bundle_sts.py [--out examples/bundle-sts-latin]

dev: 150 pairs with public gold; test: 250 pairs whose gold is hidden; and
predictions-dev.jsonl, a plausible submission for the dev split (the gold with noise).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

NOUNS = (
    "aqua lapis lux hortus verbum vox panis domus via ignis littera mons urbs stella messis "
    "porta fenestra pastor lucerna semen ager arbor mare ventus semita"
).split()
VERBS = "videt amat portat quaerit audit dicit facit servat colit legit".split()
ADJECTIVES = "magnus parvus antiquus novus clarus obscurus altus longus".split()
GENRES = ("prose", "verse")
SIZES = {"dev": 150, "test": 250}


def _sentence(rng: random.Random, genre: str) -> list[str]:
    n = rng.randint(2, 4) if genre == "prose" else rng.randint(3, 5)
    words = [rng.choice(NOUNS) for _ in range(n)]
    words.insert(rng.randrange(len(words)), rng.choice(VERBS))
    if genre == "verse":
        words.insert(0, rng.choice(ADJECTIVES))
    return words


def _pair(rng: random.Random, genre: str) -> tuple[str, str, float]:
    """Two sentences sharing a random share of their words, scored by that share plus noise."""
    a = _sentence(rng, genre)
    keep = rng.random()
    b = [w if rng.random() < keep else rng.choice(NOUNS + VERBS) for w in a]
    if genre == "verse":
        b.reverse()
    score = min(1.0, max(0.0, round(keep + rng.gauss(0, 0.12), 3)))
    return " ".join(a).capitalize() + ".", " ".join(b).capitalize() + ".", score


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def write(out: Path, seed: int = 2027) -> None:
    rng = random.Random(seed)
    for split, size in SIZES.items():
        inputs, gold = [], []
        for i in range(size):
            genre = GENRES[i % len(GENRES)]
            s1, s2, score = _pair(rng, genre)
            pid = f"LAT-{split}-{i:04d}"
            inputs.append({"pair_id": pid, "genre": genre, "sentence1": s1, "sentence2": s2})
            gold.append({"pair_id": pid, "genre": genre, "score": score})
        _jsonl(out / "sts-latin" / split / "inputs.jsonl", inputs)
        _jsonl(out / "sts-latin" / split / f"{split}-gold.jsonl", gold)
        if split == "dev":
            noisy = random.Random(seed + 1)
            _jsonl(
                out / "predictions-dev.jsonl",
                (
                    {"pair_id": g["pair_id"], "score": round(g["score"] + noisy.gauss(0, 0.2), 3)}
                    for g in gold
                ),
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "bundle-sts-latin")
    ap.add_argument("--seed", type=int, default=2027)
    args = ap.parse_args()
    write(args.out, args.seed)


if __name__ == "__main__":
    main()
