"""Loci Similes: links between Latin query segments and the source segments they reuse."""

from __future__ import annotations

import csv
import io
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


def import_loci(task: Task, *, query, source, gold, store: TaskStore, **_) -> dict:
    """Build loci-similes from locisimiles CSVs: `seg_id,text` twice and
    `query_id,source_id,label`."""
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
    with ReleaseBundle(task, store) as b:
        b.write_text("test", "queries.csv", _csv(queries, ("seg_id", "text")))
        b.write_text("test", "sources.csv", _csv(sources, ("seg_id", "text")))
        # the scorer's id index (index/test/*.txt) is the install's: every links task has one
        b.write_text("test", "links.csv", _csv(links, ("query_id", "source_id")))

        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "locisimiles CSV",
            "splits": ["test"],
            "counts": {
                "test": {"queries": len(queries), "sources": len(sources), "links": len(links)}
            },
        }
        return b.install(manifest)
