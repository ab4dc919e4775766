"""Loci Similes: links between Latin query segments and the source segments they reuse."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

from tasks.base import Task
from tasks.bundle import ReleaseBundle
from tasks.errors import ReleaseError
from tasks.release import read_table
from tasks.store import TaskStore


def _segments(path: Path, role: str) -> list[tuple[str, str]]:
    out, seen = [], {}
    for line, r in read_table(Path(path), ("seg_id", "text"), ","):
        sid = r["seg_id"]
        if not sid.strip() or "\n" in sid or "\r" in sid:
            raise ReleaseError(path, f"empty or multi-line seg_id in the {role} file", line)
        if sid in seen:
            raise ReleaseError(path, f"seg_id {sid!r} repeats line {seen[sid]}", line)
        seen[sid] = line
        out.append((sid, r["text"]))
    if not out:
        raise ReleaseError(path, f"the {role} file has no segments")
    return out


def _csv(rows, header) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


HELD_OUT, CROSS_VALIDATED = "held-out", "cross-validated"
CV_SEED = "loci-similes:5-fold"
"""The seed of the cross-validated protocol's folds (the paper publishes none)."""


def cv_folds(links, queries, folds: int, seed: str = CV_SEED) -> dict[str, int]:
    """Each query's fold (1..folds). The positives are dealt by query, so that a query's links
    are held out together: the linked queries sorted, shuffled with `random.Random(seed)`, each
    in turn to the fold holding the fewest links so far (the lowest-numbered on a tie); then the
    queries without a link, sorted, shuffled with `random.Random(seed + ":unlinked")` and dealt
    to the folds in turn. A fold's test set is its queries against every source."""
    n_links: dict[str, int] = {}
    for q, _ in links:
        n_links[q] = n_links.get(q, 0) + 1
    linked = sorted(n_links)
    random.Random(seed).shuffle(linked)
    held = [0] * folds
    out: dict[str, int] = {}
    for q in linked:
        f = min(range(folds), key=lambda i: (held[i], i))
        held[f] += n_links[q]
        out[q] = f + 1
    rest = sorted(q for q in queries if q not in n_links)
    random.Random(seed + ":unlinked").shuffle(rest)
    for i, q in enumerate(rest):
        out[q] = i % folds + 1
    return out


def import_loci(task: Task, *, query, source, gold, store: TaskStore, protocol=None, **_) -> dict:
    """Build loci-similes from locisimiles CSVs: `seg_id,text` twice and
    `query_id,source_id,label`. With `protocol="cross-validated"`, the paper's five folds of the
    positives (`cv_folds`) make the cross-validated split instead of the hidden test split (every
    fold's links are the others' training data, so none of them is secret)."""
    protocol = protocol or HELD_OUT
    if protocol not in (HELD_OUT, CROSS_VALIDATED):
        raise ReleaseError(
            Path(gold), f"unknown protocol {protocol!r} ({HELD_OUT} or {CROSS_VALIDATED})"
        )
    queries = _segments(query, "query")
    sources = _segments(source, "source")
    qset, sset = {q for q, _ in queries}, {s for s, _ in sources}
    links, seen = [], set()
    gold = Path(gold)
    for line, r in read_table(gold, ("query_id", "source_id", "label"), ","):
        q, s, label = r["query_id"], r["source_id"], r["label"].strip().lower()
        if q not in qset:
            raise ReleaseError(gold, f"query_id {q!r} is not in the query file", line)
        if s not in sset:
            raise ReleaseError(gold, f"source_id {s!r} is not in the source file", line)
        if label in ("0", "0.0", "", "no_match", "no match", "negative", "none", "false"):
            continue
        if (q, s) in seen:
            raise ReleaseError(gold, f"link ({q!r}, {s!r}) appears twice", line)
        seen.add((q, s))
        links.append((q, s))
    cv = task.cross_validation if protocol == CROSS_VALIDATED else None
    split = cv.split if cv is not None else "test"
    with ReleaseBundle(task, store) as b:
        b.write_text(split, "queries.csv", _csv(queries, ("seg_id", "text")))
        b.write_text(split, "sources.csv", _csv(sources, ("seg_id", "text")))
        # the scorer's id index (index/<split>/*.txt) is the install's: every links task has one
        b.write_text(split, "links.csv", _csv(links, ("query_id", "source_id")))
        counts = {"queries": len(queries), "sources": len(sources), "links": len(links)}
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "locisimiles CSV",
            "protocol": protocol,
            "splits": [split],
            "counts": {split: counts},
        }
        if cv is not None:
            fold_of = cv_folds(links, [q for q, _ in queries], cv.folds)
            b.write_text(
                split,
                "folds.csv",
                _csv([(q, fold_of[q]) for q, _ in queries], ("query_id", "fold")),
            )
            # each fold's training positives: the links of the other folds
            b.write_text(
                split,
                "train.csv",
                _csv(
                    [
                        (f, q, s)
                        for f in range(1, cv.folds + 1)
                        for q, s in links
                        if fold_of[q] != f
                    ],
                    ("fold", "query_id", "source_id"),
                ),
            )
            per_fold = {
                str(f): {
                    "queries": sum(1 for q in fold_of.values() if q == f),
                    "links": sum(1 for q, _ in links if fold_of[q] == f),
                }
                for f in range(1, cv.folds + 1)
            }
            manifest["cross_validation"] = {
                "split": split,
                "folds": list(range(1, cv.folds + 1)),
                "counts": per_fold,
                "seed": CV_SEED,
                "note": "",
            }
        return b.install(manifest)
