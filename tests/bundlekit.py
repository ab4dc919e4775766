"""The example bundle, copied and edited: the task-version and backup tests' competition."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"


def _bundle(tmp_path: Path, name: str = "bundle", edit=None) -> Path:
    """A copy of the example (registration automatic), edited by `edit(spec, root)`."""
    root = tmp_path / name
    shutil.copytree(EXAMPLE, root)
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    spec["registration"]["approval"] = "auto"
    spec["state"] = "visible"
    # runs without a fact sheet (the track, which the track-b board filters on, is optional)
    spec["fact_fields"] = [f for f in spec["fact_fields"] if f["key"] == "track"]
    if edit is not None:
        edit(spec, root)
    (root / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root
