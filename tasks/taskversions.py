"""Tasks that change after they are installed: an edited declaration (from an edited bundle, or
texts typed on a form) compared with the installed one, and applied.

What a change is decides what it does. Its texts (`TEXT_KEYS`, the format's descriptions and
example) are rewritten in place: no score depends on them. Anything else (the metrics, the
primary, the subsets, the format, the splits, the files, the gold) makes a new version of the
task: the declaration's `version` goes up, so that every score computed under the earlier one is
stale (`server.domain.provenance`) and is rescored. Either way the files are written through the
same
install as a new bundle's (the exposure rule, all or nothing), and a function is returned that
puts the previous files back if the caller's transaction fails.

A split whose gold file is unchanged keeps its gold folder as it is (with what an assessment
campaign added beside it, `judged.csv`); a split whose gold changed keeps the previous folder
under `gold-history/<split>/v<N>/`, as a campaign's close does (`server.domain.goldversions`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tasks import register_declared
from tasks.bundle import canonical, copy_into, declaration_text, install_one, stage_bundle
from tasks.bundle_models import TaskSpec, task_from_spec
from tasks.declared import declaration_path, read_declaration, task_from_declaration, touch
from tasks.store import TaskStore, tree_sha256

# What a task says of itself, changed in place: no score depends on it.
TEXT_KEYS = (
    "title",
    "description",
    "citation",
    "licence",
    "source",
    "unit",
    "group_name",
    "references",
    "paper_rows",
    "key_columns",
    # what the phases made from now on publish on (a phase keeps what it was made with)
    "published_on",
)
# Those a form or `PATCH /tasks/<id>` sets one by one (text, not lists).
EDITABLE_TEXTS = ("title", "description", "citation", "licence", "source", "unit", "group_name")
# Kept beside a split's gold by an assessment campaign's close; never part of a bundle.
CAMPAIGN_FILES = ("judged.csv",)


@dataclass
class Change:
    """What an edited declaration changes of an installed task."""

    task_id: str
    old_version: int
    new_version: int
    spec: TaskSpec  # the declaration to install (its version the new one)
    texts: list[str] = field(default_factory=list)
    declared: list[str] = field(default_factory=list)  # the versioned keys that differ
    files: list[str] = field(default_factory=list)  # public files added, removed or changed
    gold: list[str] = field(default_factory=list)  # the splits whose gold changed
    # the phases whose declared boards differ (written in place; the phases' own boards are
    # changed by the caller, `server.actions.tasks`)
    boards: list[str] = field(default_factory=list)

    @property
    def versioned(self) -> bool:
        return self.new_version != self.old_version

    @property
    def empty(self) -> bool:
        return not (self.versioned or self.texts or self.boards)

    def summary(self) -> dict:
        return {
            "texts": self.texts,
            "declared": self.declared,
            "files": self.files,
            "gold": self.gold,
        }


def installed_spec(task_id: str, home: Path) -> TaskSpec:
    """The installed declaration of a bundle task, with every default filled in."""
    return TaskSpec.model_validate(read_declaration(declaration_path(task_id, home)))


def _texts_of(d: dict) -> dict:
    fmt = d.get("format") or {}
    return {
        **{k: d.get(k) for k in TEXT_KEYS},
        "format.example": fmt.get("example"),
        "format.fields": [f.get("description") for f in fmt.get("fields") or []],
    }


def _versioned_of(d: dict) -> dict:
    d = copy.deepcopy(d)
    for k in (*TEXT_KEYS, "phases", "version"):
        d.pop(k, None)
    fmt = d.get("format") or {}
    fmt.pop("example", None)
    for f in fmt.get("fields") or []:
        f.pop("description", None)
    return d


def _digest(base: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of each file under `base` by its relative path."""
    if not base.is_dir():
        return {}
    return {
        p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(base.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def diff(spec: TaskSpec, root: Path, home: Path) -> Change:
    """What installing `spec` (a validated bundle's task, its files under `root`) would change of
    the installed task: texts, versioned keys, public files, gold. The new version is the
    installed one plus one when anything but texts changed (or the bundle's own, when higher)."""
    old = installed_spec(spec.id, home)
    a, b = old.model_dump(mode="json"), canonical(spec).model_dump(mode="json")
    ta, tb = _texts_of(a), _texts_of(b)
    va, vb = _versioned_of(a), _versioned_of(b)
    store = TaskStore(spec.id, home)
    with tempfile.TemporaryDirectory(prefix="task-version-") as tmp:
        stage_bundle(spec, root, copy_into(Path(tmp)))
        new_public, old_public = _digest(Path(tmp) / "public"), _digest(store.root / "public")
        splits = sorted(set(old.splits) | set(spec.splits))
        gold = [
            s
            for s in splits
            if _digest(Path(tmp) / "gold" / s) != _digest(store.root / "gold" / s, CAMPAIGN_FILES)
        ]
    files = sorted(
        f"public/{k}"
        for k in set(new_public) | set(old_public)
        if new_public.get(k) != old_public.get(k)
    )
    declared = sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))
    old_boards = {p["name"]: p.get("boards") or [] for p in a.get("phases") or []}
    boards = [
        p["name"]
        for p in b.get("phases") or []
        if (p.get("boards") or []) != old_boards.get(p["name"], [])
    ]
    version = old.version
    if declared or files or gold or spec.version > old.version:
        version = max(old.version + 1, spec.version)
    return Change(
        task_id=spec.id,
        old_version=old.version,
        new_version=version,
        spec=spec.model_copy(update={"version": version}),
        texts=[k for k in ta if ta[k] != tb[k]],
        declared=declared,
        files=files,
        gold=gold,
        boards=boards,
    )


def declared_boards(task_id: str, home: Path) -> dict[str, list[dict]]:
    """The boards the installed declaration gives each of its phases (BoardSpec JSON)."""
    spec = installed_spec(task_id, home)
    return {
        p.name: [b.model_dump(mode="json", exclude_none=True) for b in p.boards]
        for p in spec.phases
    }


def with_texts(task_id: str, home: Path, texts: dict) -> TaskSpec:
    """The installed declaration with `texts` (EDITABLE_TEXTS) in place: validated as a bundle's
    task is (pydantic's ValidationError names the key)."""
    data = read_declaration(declaration_path(task_id, home))
    data.update(texts)
    return TaskSpec.model_validate(data)


def write_texts(spec: TaskSpec, home: Path) -> Callable[[], None]:
    """Rewrite an installed task's declaration with new texts (nothing else may differ: the
    caller checked `diff`), register it and tell every process; returns the undo."""
    path = declaration_path(spec.id, home)
    before = path.read_text(encoding="utf-8")
    old_task = task_from_declaration(json.loads(before))
    _replace(path, declaration_text(spec))
    register_declared(task_from_spec(spec))
    touch(home)

    def undo() -> None:
        _replace(path, before)
        register_declared(old_task)
        touch(home)

    return undo


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


@dataclass
class Installed:
    """A new version written: each changed split's gold checksum before and after, and the
    functions that keep it (`done`) or put the previous files back (`undo`)."""

    gold_before: dict[str, str]
    gold_after: dict[str, str]
    undo: Callable[[], None]
    done: Callable[[], None]


def install_version(
    change: Change, root: Path, home: Path, origin: str, kept_as: dict[str, int]
) -> Installed:
    """Install `change.spec` (a new version) from the bundle files under `root` over the
    installed task: its files staged and checked as a new bundle's, the gold of the splits
    `change.gold` names replaced (the previous folder kept as `gold-history/<split>/v<N>`, N from
    `kept_as`), the other splits' gold folders kept as they are, the gold history carried."""
    store = TaskStore(change.task_id, home)
    old_task = task_from_declaration(read_declaration(declaration_path(change.task_id, home)))
    before = {s: store.gold_checksum(s) for s in change.gold if (store.root / "gold" / s).is_dir()}
    backup = Path(tempfile.mkdtemp(prefix=f".{change.task_id}-v{change.old_version}-",
                                   dir=store.root.parent))  # fmt: skip
    shutil.copytree(store.root, backup / "root", symlinks=True)
    task = task_from_spec(change.spec)

    def carry(st) -> None:
        history = store.root / "gold-history"
        if history.is_dir():
            shutil.copytree(history, st.tmp / "gold-history", symlinks=True)
        for old_gold in sorted((store.root / "gold").glob("*")):
            if not old_gold.is_dir():
                continue
            here = st.tmp / "gold" / old_gold.name
            if old_gold.name in change.gold:
                kept = st.tmp / "gold-history" / old_gold.name / f"v{kept_as[old_gold.name]}"
                if kept.exists():
                    shutil.rmtree(kept)
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(old_gold, kept)
            elif here.is_dir():  # unchanged: as it is, with a campaign's judged pairs
                shutil.rmtree(here)
                shutil.copytree(old_gold, here)

    try:
        install_one(change.spec, task, root, store, origin, derived=carry)
    except BaseException:
        shutil.rmtree(backup, ignore_errors=True)
        raise
    register_declared(task)
    touch(home)
    after = {s: tree_sha256(store.root / "gold" / s) for s in change.gold}

    def undo() -> None:
        if store.root.exists():
            shutil.rmtree(store.root)
        os.replace(backup / "root", store.root)
        shutil.rmtree(backup, ignore_errors=True)
        register_declared(old_task)
        touch(home)

    def done() -> None:
        shutil.rmtree(backup, ignore_errors=True)

    return Installed(before, after, undo, done)


__all__ = [
    "EDITABLE_TEXTS",
    "declared_boards",
    "TEXT_KEYS",
    "Change",
    "Installed",
    "diff",
    "install_version",
    "installed_spec",
    "with_texts",
    "write_texts",
]
