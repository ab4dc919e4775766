"""Writes the data of the example bundle `bundle-pan-alignment/`: two made-up corpora in PAN's text
alignment layout (no real corpus; `tasks.pan.generate`, seeded: the same files on every run),
turned into the spans family's files, and a plausible run on the dev split.

    python examples/make_bundle_pan.py [--out examples/bundle-pan-alignment]

dev: 24 document pairs with public gold; test: 40 pairs whose gold is hidden; each pair's
obfuscation (none, random, translation, or no-plagiarism) in its gold row, which the boards per
obfuscation select by (`slices` in competition.yaml).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tasks import pan  # noqa: E402

SIZES = {"dev": (12, 1), "test": (20, 2)}  # suspicious documents, seed


def _write(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "bundle-pan-alignment")
    out = ap.parse_args(argv).out
    for split, (n, seed) in SIZES.items():
        with tempfile.TemporaryDirectory() as tmp:
            pan.generate(Path(tmp), seed=seed, n_susp=n, n_src=n, pairs_per_susp=2)
            pairs, docs, gold = pan.spans_rows(pan.read_corpus(Path(tmp)))
        base = out / "pan-align" / split
        _write(base / "pairs.jsonl", pairs)
        _write(base / "documents.jsonl", docs)
        _write(base / f"{split}-gold.jsonl", gold)
        if split == "dev":  # the gold's cases, a fifth left out, the rest cut short at the start
            rng = random.Random("pan-align:dev-run")
            rows = [
                (p["suspicious"], p["source"], c["this_offset"] + 20, c["this_length"] - 20)
                + (c["source_offset"], c["source_length"])
                for p, g in zip(pairs, gold, strict=True)
                for c in g["cases"]
                if rng.random() > 0.2
            ]
            (out / "predictions-dev.jsonl").write_text(pan.jsonl_detections(rows), encoding="utf-8")


if __name__ == "__main__":
    main()
