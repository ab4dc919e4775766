"""Where an imported task lives on disk: public inputs apart from gold, plus a manifest."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def default_home() -> Path:
    """The data directory: $PALIMPSEST_HOME, else $XDG_DATA_HOME/palimpsest (~/.local/share)."""
    env = os.environ.get("PALIMPSEST_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(xdg) / "palimpsest"


class TaskStore:
    """The files of one imported task under `<home>/tasks/<id>/`.

    public/<split>/...  may be downloaded by participants (dev gold is public);
    gold/<split>/...    never leaves the server.
    """

    def __init__(
        self,
        task_id: str,
        home: Path | str | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ):
        self.task_id = task_id
        self.home = Path(home) if home is not None else default_home()
        self.root = self.home / "tasks" / task_id
        # called with the staged files of an import before they replace the old ones; raising
        # leaves the old ones in place (tasks.importers checks the exposure rule there)
        self.before_commit = before_commit

    @property
    def manifest_path(self) -> Path:
        return self.root / "task.json"

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def public(self, split: str, name: str) -> Path:
        return self.root / "public" / split / name

    def gold(self, split: str, name: str) -> Path:
        """The split's gold file; in a directory made by `palimpsest download` (no gold/ there),
        the published copy beside the split's inputs (the dev gold): scoring works offline."""
        p = self.root / "gold" / split / name
        if not p.exists() and not (self.root / "gold").exists():
            published = self.root / "public" / split / name
            if published.is_file():
                return published
        return p

    def public_files(self, split: str | None = None) -> list[Path]:
        base = self.root / "public" if split is None else self.root / "public" / split
        return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []

    def gold_checksum(self, split: str) -> str:
        """sha256 over every gold file of a split (names and bytes), for score signatures."""
        recorded = self.manifest().get("gold_sha256", {}).get(split)
        return recorded or tree_sha256(self.root / "gold" / split)


def tree_sha256(base: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(base.rglob("*")) if base.exists() else []:
        if p.is_file():
            h.update(p.relative_to(base).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()


def write_jsonl(p: Path, rows) -> Path:
    """Rows as JSON Lines, as every import writes them (the same rows give the same bytes)."""
    with p.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(", ", ": ")))
            f.write("\n")
    return p


class StagedImport:
    """Writes a task into a temporary directory, then swaps it in at once.

    Importing twice gives the same files; a failed import leaves the old task untouched.
    """

    def __init__(self, store: TaskStore):
        self.store = store
        self.store.root.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{store.task_id}-", dir=store.root.parent))

    def path(self, area: str, split: str, name: str) -> Path:
        p = self.tmp / area / split / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write_jsonl(self, area: str, split: str, name: str, rows) -> Path:
        return write_jsonl(self.path(area, split, name), rows)

    def write_text(self, area: str, split: str, name: str, text: str) -> Path:
        p = self.path(area, split, name)
        p.write_text(text, encoding="utf-8", newline="\n")
        return p

    def commit(self, manifest: dict) -> None:
        gold = self.tmp / "gold"
        manifest = dict(manifest)
        manifest["gold_sha256"] = (
            {d.name: tree_sha256(d) for d in sorted(gold.iterdir()) if d.is_dir()}
            if gold.is_dir()
            else {}
        )
        (self.tmp / "task.json").write_text(
            json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        if self.store.before_commit is not None:  # the exposure rule (tasks.importers sets it)
            self.store.before_commit(self.tmp)
        old = None
        if self.store.root.exists():
            old = self.store.root.with_name(self.tmp.name + ".old")
            os.replace(self.store.root, old)
        os.replace(self.tmp, self.store.root)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "StagedImport":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
