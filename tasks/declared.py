"""Tasks declared by competition bundles: each installed one keeps its declaration beside its
files (`<home>/tasks/<id>/declaration.json`, a `TaskSpec` of tasks/bundle_models.py as JSON), so
that any process (a worker, the CLI) finds it in the data directory without the bundle.

The declaration was validated when it was installed; reading it back needs no pydantic (which
every `palimpsest` command would otherwise load at start)."""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path

from tasks.base import (
    CrossValidation,
    Field,
    PaperRow,
    Reference,
    Slice,
    SubmissionFormat,
    Task,
)

DECLARATION = "declaration.json"
BUNDLE_IMPORTER = "tasks.bundle:import_declared"
log = logging.getLogger(__name__)


def task_from_declaration(d: dict) -> Task:
    """The `Task` of a declaration (a `TaskSpec` as JSON)."""
    fmt = d["format"]
    splits = d["splits"]
    return Task(
        id=d["id"],
        version=d["version"],
        title=d["title"],
        description=d["description"],
        citation=d["citation"],
        licence=d["licence"],
        source=d["source"],
        kind=d["family"],
        format=SubmissionFormat(
            fields=tuple(
                Field(f["name"], f["kind"], f["description"], tuple(f["aliases"]))
                for f in fmt["fields"]
            ),
            native=fmt["native"],
            example=fmt["example"],
            key=tuple(fmt["key"]),
            optional=tuple(fmt["optional"]),
            max_bytes=fmt["max_bytes"],
        ),
        metrics=tuple(d["metrics"]),
        subsets=tuple(d["subsets"]),
        primary=(d["primary"]["subset"], d["primary"]["metric"]),
        greater_is_better=d["greater_is_better"],
        splits=tuple(splits),
        importer=BUNDLE_IMPORTER,
        import_help=(
            f"{d['id']} was installed from a competition bundle; re-installing it rewrites its "
            "files from the stored copy (or install the bundle again)"
        ),
        secondary=tuple((s["subset"], s["metric"], s["greater_is_better"]) for s in d["secondary"]),
        group_field=d["group_field"],
        group_name=d["group_name"],
        partial_groups=d["partial_groups"],
        unit=d["unit"],
        gold_value=d["gold_value"],
        references=tuple(
            Reference(
                r["name"], r["subset"], r["metric"], r["value"], r["source"], r["note"], r["split"]
            )
            for r in d["references"]
        ),
        hidden_splits=tuple(s for s, sp in splits.items() if sp["hidden"]),
        # what declarations written before these keys existed leave out
        key_columns=tuple(d.get("key_columns") or ()),
        published_on=d.get("published_on") or "private",
        cross_validation=CrossValidation(**cv) if (cv := d.get("cross_validation")) else None,
        paper_rows=tuple(
            PaperRow(
                r["team"],
                r["method"],
                r["split"],
                tuple(r["values"].items()),
                r["source"],
                r["note"],
            )
            for r in d.get("paper_rows") or ()
        ),
        cut_at=tuple(d.get("cut_at") or ()),
        slices=tuple(Slice(**sl) for sl in d.get("slices") or ()),
        phase_boards=tuple(
            (ph["name"], json.dumps(ph["boards"], sort_keys=True))
            for ph in d.get("phases") or ()
            if ph.get("boards")
        ),
    )


def declaration_path(task_id: str, home: Path) -> Path:
    return Path(home) / "tasks" / task_id / DECLARATION


def read_declaration(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _stamp(home: Path) -> int:
    try:
        return (Path(home) / "tasks").stat().st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=16)
def _declared(home: str, stamp: int) -> tuple[Task, ...]:
    out = []
    base = Path(home) / "tasks"
    for p in sorted(base.glob(f"*/{DECLARATION}")) if stamp else []:
        try:
            out.append(task_from_declaration(read_declaration(p)))
        # one broken file hides one task, not the others
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("%s: not a task declaration (%s)", p, e)
    return tuple(out)


def touch(home: Path) -> None:
    """Say that a declaration in `home` changed in place (a task's texts, a new version): every
    process reads the declarations again at its next look (`declared_tasks`)."""
    base = Path(home) / "tasks"
    if base.is_dir():
        os.utime(base)
        _declared.cache_clear()


def declared_tasks(home: Path) -> tuple[Task, ...]:
    """The bundle-declared tasks installed in `home` (read again when a task comes or goes)."""
    return _declared(str(Path(home)), _stamp(home))
