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
import functools
import json
from dataclasses import dataclass
from pathlib import Path

from tasks import all_tasks, get_task
from tasks.base import Task
from tasks.errors import ExposureRefused, PalimpsestError  # noqa: F401  (named here too)
from tasks.store import TaskStore

# the files a download holds that can label an instance (others: README, licences)
TABLES = (".jsonl", ".csv", ".tsv")


@dataclass(frozen=True)
class Exposure:
    """Which instances of a task are labelled in public, hidden, and scored, by split."""

    task_id: str
    labelled: dict[str, frozenset[str]]
    hidden: dict[str, frozenset[str]]
    gold: dict[str, frozenset[str]]
    # tasks built from one release with one key name the same instances (tric-binary and
    # tric-ranking): one's public labels may reveal the other's hidden gold
    namespace: tuple = ()

    def leaks(self, area: str, of: Exposure | None = None) -> dict[str, int]:
        """{hidden split (of this task, or of `of`): how many of its instances this task's public
        `area` labels}, nonzero only."""
        out = {}
        for split, ids in (of or self).hidden.items():
            n = len(ids & self.labelled.get(area, frozenset()))
            if n:
                out[split] = n
        return out

    def scored_in_public(self, split: str, of: Exposure | None = None) -> dict[str, int]:
        """{hidden split (of this task, or of `of`): how many of its instances a phase scoring
        this task's `split` wholly in public would score}, nonzero only."""
        out = {}
        for hidden_split, ids in (of or self).hidden.items():
            if of is None and hidden_split == split:
                continue
            n = len(ids & self.gold.get(split, frozenset()))
            if n:
                out[hidden_split] = n
        return out

    def violations(self, of: Exposure | None = None) -> list[str]:
        """Every breach of the rule (against this task's hidden gold, or `of`'s), as a sentence
        naming the splits and the count."""
        whose = f" of {of.task_id}" if of is not None else ""
        out = []
        for area in sorted(self.labelled):
            for split, n in self.leaks(area, of).items():
                out.append(
                    f"{self.task_id}: the public {area} files label {n} instance(s) of the "
                    f"hidden {split} split{whose}"
                )
        for split in sorted(self.gold):
            if split in self.hidden:
                continue
            for hidden_split, n in self.scored_in_public(split, of).items():
                out.append(
                    f"{self.task_id}: the {split} split scores {n} instance(s) of the hidden "
                    f"{hidden_split} split{whose} in public"
                )
        return out

    def all_violations(self, others: list[Exposure]) -> list[str]:
        """This task's breaches, and those between it and the tasks sharing its instances."""
        out = self.violations()
        for o in others:
            if o.task_id != self.task_id and o.namespace and o.namespace == self.namespace:
                out += self.violations(o) + o.violations(self)
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
    """The tables of a folder, as a download serves them: regular files inside it, no link."""
    if not base.is_dir() or base.is_symlink():
        return []
    real = base.resolve()
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and p.suffix in TABLES and not p.is_symlink() and real in p.resolve().parents
    )


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
    try:
        source = json.loads((root / "task.json").read_text(encoding="utf-8")).get("source")
    except (OSError, ValueError):
        source = None
    return Exposure(task.id, labelled, hidden, gold, (source, key) if source else ())


@functools.lru_cache(maxsize=64)
def _cached(task_id: str, root: str, stamp: int) -> Exposure:
    return exposure_of_tree(get_task(task_id), Path(root))


def exposure(task: Task, home) -> Exposure:
    """The exposure of an imported task (cached until its next import). Cached by the task folder's
    real path: data directories whose tasks/ link the same imported folder (a test's, each
    linking a session's imports) share one computation."""
    store = TaskStore(task.id, home)
    stamp = store.manifest_path.stat().st_mtime_ns if store.exists() else 0
    return _cached(task.id, str(store.root.resolve()), stamp)


def _imported(home, but: str | None = None) -> list[Exposure]:
    return [
        exposure(t, home) for t in all_tasks() if t.id != but and TaskStore(t.id, home).exists()
    ]


def check_tree(task_id: str, root: Path, home=None) -> None:
    """Refuse an import whose files would break the rule, alone or beside the tasks of `home`
    that share its instances (called before they replace the old)."""
    ex = exposure_of_tree(get_task(task_id), Path(root))
    others = _imported(home, but=task_id) if home is not None else []
    found = ex.all_violations(others)
    if found:
        siblings = [
            o.task_id
            for o in others
            if o.namespace == ex.namespace
            and ex.namespace
            and (ex.violations(o) or o.violations(ex))
        ]
        hint = (
            f"; {', '.join(siblings)} name the same instances: import them from the same fold and "
            f"protocol (to switch a site, delete {Path(home) / 'tasks'}/<task> of each first)"
            if siblings
            else ""
        )
        raise ExposureRefused(
            "refused: the import would reveal hidden gold; "
            + "; ".join(found)
            + f" (nothing was changed{hint}; see docs/hidden-gold.md)"
        )


def check_download(task: Task, home, areas: list[str]) -> None:
    """Refuse a download of public `areas` that label an instance whose gold is hidden."""
    ex = exposure(task, home)
    found = [
        f"the public {area} files label {n} instance(s) of the hidden {split} split"
        for area in areas
        for split, n in ex.leaks(area).items()
    ]
    for o in _imported(home, but=task.id):
        if o.namespace and o.namespace == ex.namespace:
            found += [
                f"the public {area} files label {n} instance(s) of the hidden {split} split of "
                f"{o.task_id}"
                for area in areas
                for split, n in ex.leaks(area, o).items()
            ]
    if found:
        raise ExposureRefused(f"{task.id}: not served: " + "; ".join(found))


def check_phase(task: Task, home, split: str) -> None:
    """Refuse a phase that would score a hidden split's private instances in public: a phase on a
    split without a private part whose gold holds instances of a hidden split."""
    if task.has_private_part(split):
        return  # its own public fraction is the partition's rule (server.domain.partitions)
    if not TaskStore(task.id, home).exists():
        return
    ex = exposure(task, home)
    found = {f"{s} split": n for s, n in ex.scored_in_public(split).items()}
    for o in _imported(home, but=task.id):
        if o.namespace and o.namespace == ex.namespace:
            found |= {
                f"{s} split of {o.task_id}": n for s, n in ex.scored_in_public(split, o).items()
            }
    if found:
        raise ExposureRefused(
            f"{task.id}: a phase on the {split} split would score in public "
            + "; ".join(f"{n} instance(s) of the hidden {s}" for s, n in found.items())
        )


def check_home(home) -> list[str]:
    """Every breach of the rule over every imported task of a data directory (`palimpsest check`
    and the tests)."""
    done = _imported(home)
    out = []
    for i, ex in enumerate(done):
        out += ex.all_violations(done[i + 1 :])
    return out
