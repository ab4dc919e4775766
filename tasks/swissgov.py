"""SwissGov-RSD: token-level recognition of semantic differences between related documents."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.base import Task
from tasks.bundle import ReleaseBundle
from tasks.errors import ReleaseError
from tasks.release import locate, read_jsonl
from tasks.store import TaskStore

LANGS = {"de": "en-de", "fr": "en-fr", "it": "en-it"}
PAIRS = tuple(LANGS.values())


def _labels(path: Path, line: int, r: dict, side: str) -> list[float]:
    if not isinstance(r[f"text_{side}"], str):
        raise ReleaseError(path, f"text_{side} must be a string", line)
    v = r[f"labels_{side}"]
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise ReleaseError(path, f"labels_{side} is not a JSON list", line) from None
    if not isinstance(v, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v
    ):
        raise ReleaseError(path, f"labels_{side} must be a list of numbers", line)
    n_tokens = len(r[f"text_{side}"].split())
    if len(v) != n_tokens:
        raise ReleaseError(
            path,
            f"{r['id']}: labels_{side} has {len(v)} values, text_{side} has {n_tokens} tokens",
            line,
        )
    return [float(x) for x in v]


def _annotators(base: Path) -> dict[str, str]:
    """Each document's annotator (`annotator_tag` of the full gold, 1 or 2 of its language pair;
    the dev and test files, the same documents, leave it out), by id; {} without the full gold."""
    out: dict[str, str] = {}
    for lang in LANGS:
        path = base / "full" / f"gold_admin_{lang}.jsonl"
        if not path.is_file():
            continue
        for _line, r in read_jsonl(path, ("id",)):
            if r.get("annotator_tag") is not None:
                out[str(r["id"])] = str(r["annotator_tag"])
    return out


def import_swissgov(task: Task, *, source, store: TaskStore, test_split: str = "test", **_) -> dict:
    """Build swissgov-rsd from a SwissGov-RSD checkout: test and dev splits, three language pairs.

    `test_split="full"` is the paper's Table 3 setting: all 224 documents per language pair are
    the hidden test. The dev documents are among them, so no dev split is published then (its
    labels would be test labels).
    """
    if test_split not in ("test", "full"):
        raise ReleaseError(source, f"test_split must be 'test' or 'full', not {test_split!r}")
    root = locate(Path(source), "data/evaluation/gold_labels", "SwissGov-RSD")
    base = root / "data" / "evaluation" / "gold_labels"
    counts: dict = {}
    annotator_of, notes = _annotators(base), []
    with ReleaseBundle(task, store) as b:
        splits = (("test", "full"),) if test_split == "full" else (("dev", "dev"), ("test", "test"))
        for split, folder in splits:
            inputs, gold, seen = [], [], {}
            counts[split] = {}
            for lang, pair in LANGS.items():
                path = base / folder / f"gold_admin_{lang}.jsonl"
                n = 0
                for line, r in read_jsonl(path, ("id", "text_a", "text_b", "labels_a", "labels_b")):
                    if not isinstance(r["id"], (str, int)) or isinstance(r["id"], bool):
                        raise ReleaseError(path, f"id must be a string, found {r['id']!r}", line)
                    rid = str(r["id"])
                    if rid in seen:
                        raise ReleaseError(path, f"id {rid!r} repeats ({seen[rid]})", line)
                    seen[rid] = f"{path.name}, line {line}"
                    la, lb = _labels(path, line, r, "a"), _labels(path, line, r, "b")
                    inputs.append(
                        {"id": rid, "pair": pair, "text_a": r["text_a"], "text_b": r["text_b"]}
                    )
                    g = {"id": rid, "pair": pair, "labels_a": la, "labels_b": lb}
                    if r.get("annotator_tag") is not None or rid in annotator_of:
                        # who annotated the document (1 or 2 of its pair): Table 7's subsets
                        g["annotator"] = str(r.get("annotator_tag") or annotator_of[rid])
                    gold.append(g)
                    n += 1
                counts[split][pair] = n
            b.write_jsonl(split, "inputs.jsonl", inputs)
            b.write_jsonl(split, "gold.jsonl", gold)  # dev's is public: the spec says so
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "SwissGov-RSD",
            "test_split": test_split,
            "splits": [s for s, _ in splits],
            "counts": counts,
        }
        if not annotator_of:
            notes.append(
                "no annotator_tag (gold_labels/full/ absent): the annotators' subsets are empty"
            )
        if notes:
            manifest["notes"] = notes
        if (root / "annotations" / "annotations_raw").is_dir():  # the human ceiling the board shows
            # numpy, scipy and krippendorff load only when an import computes human rows
            from tasks.agreement_swissgov import swissgov_agreement

            try:
                manifest["agreement"] = swissgov_agreement(root)
            except (
                ReleaseError,
                KeyError,
                ValueError,
                TypeError,
            ) as e:  # the task itself imported fine
                manifest["notes"] = [*notes, f"human agreement not computed: {e}"]
        return b.install(manifest)
