"""Predict how related two sentences are by the overlap of their words (Jaccard's coefficient).

Usage: python3 predict.py INPUTS.jsonl PREDICTIONS.jsonl. Reads the pairs {pair_id, sentence1,
sentence2, ...} and writes one {"pair_id": ..., "score": ...} per pair, the format of the task.
Run it yourself on the dev inputs exactly as the site runs it on the hidden test inputs.
"""

import json
import sys


def words(text: str) -> set[str]:
    return {w.strip(".,;:!?").lower() for w in text.split()} - {""}


def main(inputs: str, out: str) -> None:
    with open(inputs, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for line in f:
            if not line.strip():
                continue
            pair = json.loads(line)
            a, b = words(pair["sentence1"]), words(pair["sentence2"])
            score = len(a & b) / len(a | b) if a | b else 0.0
            w.write(json.dumps({"pair_id": pair["pair_id"], "score": round(score, 6)}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
