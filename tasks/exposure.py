"""The exposure rule: no instance whose gold is hidden may carry a label anyone can download, and
none may be scored wholly in public by a phase on another split.

For an imported task the rule knows, from its files alone:

- `labelled[area]`: the instances a public download labels (`public/<area>/`: a split's inputs,
  public gold, the training data); a row labels an instance when it names it (the task's key) and
  carries one of the gold's value fields (a link, for a task whose gold is a set of links);
- `hidden[split]`: the instances of a split whose gold has a private part (`Task.hidden_splits`);
- `gold[split]`: the instances every split's gold scores.

It is checked when a task is imported (before the new files replace the old: a violating import
leaves the site as it was), when a phase is created or edited, and on every download; a violation
is refused with a message naming the splits and the number of instances.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from tasks.base import Task
from tasks.errors import PalimpsestError
from tasks.store import TaskStore

# the files a download holds that can label an instance (others: README, licences)
TABLES = (".jsonl", ".csv", ".tsv")


class ExposureRefused(PalimpsestError):
    """An import, phase or download that would reveal hidden gold."""


@dataclass(frozen=True)
class Exposure:
    """Which instances of a task are labelled in public, hidden, and scored, by split."""

    task_id: str
    labelled: dict[str, frozenset[str]]
    hidden: dict[str, frozenset[str]]
    gold: dict[str, frozenset[str]]

    def leaks(self, area: str) -> dict[str, int]:
        """{hidden split: how many of its instances the public `area` labels}, nonzero only."""
        out = {}
        for split, ids in self.hidden.items():
            n = len(ids & self.labelled.get(area, frozenset()))
            if n:
                out[split] = n
        return out

    def scored_in_public(self, split: str) -> dict[str, int]:
        """{hidden split: how many of its instances a phase scoring `split` wholly in public
        would score}, nonzero only."""
        out = {}
        for hidden_split, ids in self.hidden.items():
            if hidden_split == split:
                continue
            n = len(ids & self.gold.get(split, frozenset()))
            if n:
                out[hidden_split] = n
        return out

    def violations(self) -> list[str]:
        """Every breach of the rule, as a sentence naming the splits and the count."""
        out = []
        for area in sorted(self.labelled):
            for split, n in self.leaks(area).items():
                out.append(
                    f"{self.task_id}: the public {area} files label {n} instance(s) of the "
                    f"hidden {split} split"
                )
        for split in sorted(self.gold):
            if split in self.hidden:
                continue
            for hidden_split, n in self.scored_in_public(split).items():
                out.append(
                    f"{self.task_id}: the {split} split scores {n} instance(s) of the hidden "
                    f"{hidden_split} split in public"
                )
        return out


def _rows(path: Path):
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    if isinstance(row, dict):
                        yield row
        return
    with path.open(encoding="utf-8", newline="") as f:
        yield from csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ",")


def _ids(rows, key: tuple[str, ...], value_fields: frozenset[str] | None) -> frozenset[str]:
    """The instance ids of the rows that name one (`key`) and, when `value_fields` is given, carry
    one of those fields."""
    out = set()
    for row in rows:
        if not all(k in row for k in key):
            continue
        if value_fields and not (value_fields & row.keys()):
            continue
        out.add("/".join(str(row[k]) for k in key))
    return frozenset(out)


def _tables(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in TABLES)


def exposure_of_tree(task: Task, root: Path) -> Exposure:
    """The exposure of a task's files under `root` (`<home>/tasks/<id>` or an import's staging)."""
    key = task.format.key  # the plain task's key: a fold is not part of an instance's identity
    not_values = {task.group_field, "subset", *key}
    if task.cross_validation is not None:
        not_values.add(task.cross_validation.field)
    gold: dict[str, frozenset[str]] = {}
    values: set[str] = set()
    for d in sorted((root / "gold").iterdir()) if (root / "gold").is_dir() else []:
        ids: set[str] = set()
        for p in _tables(d):
            rows = list(_rows(p))
            ids |= _ids(rows, key, None)
            for row in rows[:50]:
                values |= set(row) - not_values
        gold[d.name] = frozenset(ids)
    value_fields = frozenset(values)  # empty: the gold is a set of links, and a listed one labels
    labelled = {
        d.name: frozenset().union(*(_ids(_rows(p), key, value_fields) for p in _tables(d)))
        for d in (sorted((root / "public").iterdir()) if (root / "public").is_dir() else [])
        if d.is_dir()
    }
    hidden = {s: ids for s, ids in gold.items() if task.has_private_part(s)}
    return Exposure(task.id, labelled, hidden, gold)


_CACHE: dict[tuple[str, str], tuple[int, Exposure]] = {}


def exposure(task: Task, home) -> Exposure:
    """The exposure of an imported task (cached until its next import)."""
    store = TaskStore(task.id, home)
    stamp = store.manifest_path.stat().st_mtime_ns if store.exists() else 0
    key = (task.id, str(store.root))
    got = _CACHE.get(key)
    if got is None or got[0] != stamp:
        got = (stamp, exposure_of_tree(task, store.root))
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = got
    return got[1]


def check_tree(task: Task, root: Path) -> None:
    """Refuse an import whose files would break the rule (called before they replace the old)."""
    found = exposure_of_tree(task, Path(root)).violations()
    if found:
        raise ExposureRefused(
            "refused: the import would reveal hidden gold; " + "; ".join(found) + " (nothing was "
            "changed; see docs/hidden-gold.md)"
        )


def check_download(task: Task, home, areas: list[str]) -> None:
    """Refuse a download of public `areas` that label an instance whose gold is hidden."""
    ex = exposure(task, home)
    found = [
        f"the public {area} files label {n} instance(s) of the hidden {split} split"
        for area in areas
        for split, n in ex.leaks(area).items()
    ]
    if found:
        raise ExposureRefused(f"{task.id}: not served: " + "; ".join(found))


def check_phase(task: Task, home, split: str) -> None:
    """Refuse a phase that would score a hidden split's private instances in public: a phase on a
    split without a private part whose gold holds instances of a hidden split."""
    if task.has_private_part(split):
        return  # its own public fraction is the partition's rule (server.partitions)
    if not TaskStore(task.id, home).exists():
        return
    found = exposure(task, home).scored_in_public(split)
    if found:
        raise ExposureRefused(
            f"{task.id}: a phase on the {split} split would score in public "
            + "; ".join(f"{n} instance(s) of the hidden {s} split" for s, n in found.items())
        )
