"""Versions of a split's gold: an assessment campaign's close writes a new one
(`server.actions.campaigns.close_campaign`), the previous files kept under
`<home>/tasks/<id>/gold-history/<split>/v<N>/` (never under `public/`), the manifest's checksum
updated so that `server.domain.provenance` sees every score under the old gold as stale.

Version 1 is the imported gold; it is recorded (`GoldVersion`) when a first version is written
after it. A links task's gold is `links.csv` (the original rows, then the accepted links) with
`judged.csv` beside it (the pairs judged not to be links: the scorer's condensed metrics read it);
a pair task's gold is `gold.jsonl` with the decided values in place of the old ones.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from sqlmodel import Session, select

from scorer.families import JUDGED
from server.db import after_commit, on_rollback
from server.models import GoldVersion
from tasks.base import unit_id
from tasks.store import TaskStore, tree_sha256

LINK_HEADER = ("query_id", "source_id")


def versions(s: Session, task_id: str, split: str | None = None) -> list[GoldVersion]:
    q = select(GoldVersion).where(GoldVersion.task_id == task_id)
    if split is not None:
        q = q.where(GoldVersion.split == split)
    return list(s.exec(q.order_by(GoldVersion.split, GoldVersion.version)))


def current(s: Session, task_id: str, split: str) -> GoldVersion | None:
    """The newest recorded version of a split's gold (None: only the imported one)."""
    got = versions(s, task_id, split)
    return got[-1] if got else None


def label(s: Session, task_id: str, split: str) -> str | None:
    """What a board says of the gold it ranks on: "gold v2 — extended by campaign 3" once the
    split has a version after the imported one; None before."""
    v = current(s, task_id, split)
    if v is None or v.version == 1:
        return None
    how = f"extended by campaign {v.campaign_id}" if v.campaign_id is not None else v.reason
    return f"gold v{v.version} — {how}"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def link_rows(path: Path) -> list[tuple[str, str]]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f)
        next(rows, None)
        return [(r[0], r[1]) for r in rows if len(r) >= 2]


def _csv_text(header, rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def links_gold(store: TaskStore, split: str, accepted, rejected) -> tuple[dict[str, str], int, int]:
    """The new gold files of a links split: `links.csv` with the accepted links appended in the
    same row format (its other columns left empty), `judged.csv` with the rejected pairs added
    (and the newly accepted ones taken out);
    returns (name -> text, links added, pairs judged negative added)."""
    path = store.gold(split, "links.csv")
    text = path.read_text(encoding="utf-8")
    with open(path, encoding="utf-8", newline="") as f:
        header = next(csv.reader(f), list(LINK_HEADER))
    have = set(link_rows(path))
    new = [x for x in sorted(set(accepted)) if x not in have]
    if new:
        if text and not text.endswith("\n"):
            text += "\n"
        pad = [""] * max(0, len(header) - 2)
        text += _csv_text(header, [(q, src, *pad) for q, src in new]).split("\n", 1)[1]
    # a pair judged not a link before and a link now (earlier campaigns' items are pooled again)
    # leaves judged.csv as it enters links.csv
    judged = [x for x in link_rows(store.gold(split, JUDGED)) if x not in set(new)]
    known = set(judged)
    neg = [x for x in sorted(set(rejected)) if x not in known and x not in have]
    return (
        {"links.csv": text, JUDGED: _csv_text(LINK_HEADER, judged + neg)},
        len(new),
        len(neg),
    )


def instances_gold(store: TaskStore, split: str, task, values: dict[str, float]):
    """The new `gold.jsonl` of a pair split: each decided instance's gold value replaced (an
    integer stays an integer where the value is one); returns (name -> text, values changed, 0)."""
    path = store.gold(split, "gold.jsonl")
    out, changed = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        key = unit_id(row, task.format.key)
        if key in values:
            old = row.get(task.gold_field)
            v = values[key]
            new = int(v) if isinstance(old, int) and float(v).is_integer() else v
            if new != old:
                changed += 1
            row[task.gold_field] = new
        out.append(json.dumps(row, ensure_ascii=False, separators=(", ", ": ")) + "\n")
    return {"gold.jsonl": "".join(out)}, changed, 0


def write_version(
    s: Session,
    store: TaskStore,
    split: str,
    files: dict[str, str],
    *,
    reason: str,
    campaign_id: int | None,
    added: int,
    judged_negative: int,
    actor_id: int | None,
) -> tuple[GoldVersion, Callable[[], None]]:
    """Keep the split's current gold files under gold-history, write `files` in their place,
    record the new checksum in the manifest and add the `GoldVersion` row; returns it and a
    function that undoes the files if the caller's commit fails."""
    gold_dir = store.root / "gold" / split
    parent_sha = store.gold_checksum(split)
    prev = current(s, store.task_id, split)
    if prev is None:  # the imported gold: version 1, recorded now that a second one comes
        prev = GoldVersion(
            task_id=store.task_id,
            split=split,
            version=1,
            sha256=parent_sha,
            reason="imported",
            created_at=_imported_at(store),
        )
        s.add(prev)
    kept = store.root / "gold-history" / split / f"v{prev.version}"
    previous = None  # a copy kept by an earlier close that did not commit: set aside, not lost
    if kept.exists():
        previous = kept.with_name(kept.name + ".before")
        if previous.exists():
            shutil.rmtree(previous)
        kept.rename(previous)
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(gold_dir, kept)
    manifest_before = store.manifest_path.read_text(encoding="utf-8")
    for name, text in files.items():
        _write(gold_dir / name, text)
    sha = tree_sha256(gold_dir)
    manifest = store.manifest()
    manifest.setdefault("gold_sha256", {})[split] = sha
    _write(
        store.manifest_path,
        json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
    )
    v = GoldVersion(
        task_id=store.task_id,
        split=split,
        version=prev.version + 1,
        sha256=sha,
        parent_sha256=parent_sha,
        reason=reason,
        campaign_id=campaign_id,
        added=added,
        judged_negative=judged_negative,
        created_by=actor_id,
    )
    s.add(v)

    done = []

    def undo() -> None:
        """Put the previous files, checksum and history back (the caller's transaction failed);
        once, however often it is called."""
        if done:
            return
        done.append(True)
        shutil.rmtree(gold_dir)
        shutil.copytree(kept, gold_dir)
        _write(store.manifest_path, manifest_before)
        shutil.rmtree(kept)
        if previous is not None:
            previous.rename(kept)

    def forget_previous() -> None:
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)

    on_rollback(s, undo)  # the files go back with the transaction, whoever rolls it back
    after_commit(s, forget_previous)
    return v, undo


def _imported_at(store: TaskStore) -> datetime:
    t = store.manifest_path.stat().st_mtime
    return datetime.fromtimestamp(t, timezone.utc).replace(tzinfo=None)
