"""A participant's system as an archive: its files and the manifest `system.yaml` that says how
to run it. Read in bounded work, like bundles and prediction files: the zip's members are checked
before anything is written, the manifest is small, plain YAML (no anchors or aliases, shallow) and
every problem is named with its YAML path or member.

```yaml
command: [python3, predict.py, /input, /output/predictions.jsonl]
runtime: python          # the site's Python; or `image` with `image: name@sha256:...`
output: predictions.jsonl
resources: {wall_seconds: 600, cpu_seconds: 600, memory_mb: 2048, gpu: false}
```
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from server.exceptions import SystemRefused
from tasks.errors import PalimpsestError
from tasks.safezip import ZipLimits, ZipRefused, extract

MANIFEST = "system.yaml"
MiB = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024
MAX_DEPTH = 8
IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]{0,250}@sha256:[0-9a-f]{64}")
# NUL and the other control characters: refused in every string of the manifest and in member
# names (a file name holding one cannot be written, and a word holding one cannot be exec'd)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
LIMITS = ZipLimits(max_zip_bytes=256 * MiB, max_unzipped_bytes=1024 * MiB, max_files=10_000)


class SystemInvalid(PalimpsestError):
    """A code submission that cannot be run; `problems` lists (where, what is wrong)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{w}: {m}" for w, m in problems))

    def to_list(self) -> list[dict]:
        return [{"where": w, "message": m} for w, m in self.problems]


class Resources(BaseModel):
    """What the system asks for; the phase's own limits cap each."""

    model_config = ConfigDict(extra="forbid")
    wall_seconds: float = Field(600, gt=0, le=24 * 3600)
    cpu_seconds: int = Field(600, gt=0, le=24 * 3600)
    memory_mb: int = Field(2048, ge=64, le=256 * 1024)
    gpu: bool = False


class SystemManifest(BaseModel):
    """system.yaml: how to run the system on a split's inputs."""

    model_config = ConfigDict(extra="forbid")
    command: list[str] = Field(min_length=1, max_length=64)
    runtime: Literal["python", "image"] = "python"
    image: Optional[str] = Field(
        None, description="runtime image: the container image, by digest (name@sha256:...)"
    )
    output: str = "predictions.jsonl"
    resources: Resources = Resources()

    @field_validator("command")
    @classmethod
    def _plain(cls, v: list[str]) -> list[str]:
        for i, a in enumerate(v):
            if not a or len(a) > 4096:
                raise ValueError("each word is a non-empty string of at most 4,096 characters")
            if CONTROL.search(a):
                raise ValueError(f"word {i} holds a control character (NUL, a newline, ...)")
        return v

    @model_validator(mode="after")
    def _image(self):
        if self.runtime == "image":
            if not self.image or not IMAGE.fullmatch(self.image):
                raise ValueError(
                    "runtime image needs `image`, named by its digest: name@sha256:<64 hex digits>"
                )
        elif self.image is not None:
            raise ValueError("`image` goes with `runtime: image`")
        return self

    @field_validator("output")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or "/" in v or "\\" in v or v in (".", "..") or len(v) > 255:
            raise ValueError("a file name in /output, without a folder (e.g. predictions.jsonl)")
        if CONTROL.search(v):
            raise ValueError("a file name without control characters (NUL, a newline, ...)")
        return v


def _control_in_member(name: str) -> str | None:
    if CONTROL.search(name):
        return "a member name with a control character (NUL, a newline, ...) (refused)"
    return None


def _yaml_shape(text: str) -> list[tuple[str, str]]:
    """Anchors, aliases and nesting past MAX_DEPTH, found from the parser's events (nothing is
    built, so an alias bomb costs what its text costs)."""
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            line = f"{MANIFEST}, line {ev.start_mark.line + 1}"
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                return [(line, "anchors and aliases are not allowed in system.yaml")]
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return [(line, f"nested deeper than {MAX_DEPTH} levels")]
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{MANIFEST}, line {mark.line + 1}" if mark else MANIFEST
        return [(where, f"not valid YAML ({getattr(e, 'problem', None) or e})")]
    return []


def read_manifest(root: Path) -> SystemManifest:
    """The manifest of the system unpacked at `root`, or SystemInvalid naming every problem."""
    path = root / MANIFEST
    if not path.is_file() or path.is_symlink():
        raise SystemInvalid([(MANIFEST, "missing: the archive's top level needs system.yaml")])
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise SystemInvalid([(MANIFEST, f"over {MAX_MANIFEST_BYTES} bytes")])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SystemInvalid([(MANIFEST, "not UTF-8 text")]) from None
    if problems := _yaml_shape(text):
        raise SystemInvalid(problems)
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise SystemInvalid([(MANIFEST, "a mapping with `command` (a list of words) is expected")])
    try:
        return SystemManifest.model_validate(data)
    except ValidationError as e:
        raise SystemInvalid(
            [
                (f"{MANIFEST}: {'.'.join(str(p) for p in err['loc']) or '(top)'}", err["msg"])
                for err in e.errors()
            ]
        ) from None


def _open_up(root: Path) -> None:
    """Folders 0755 and files 0644 (0755 where executable): the sandbox's user reads them."""
    for d, _dirs, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            p = Path(d, f)
            if not p.is_symlink():
                p.chmod(0o755 if os.access(p, os.X_OK) else 0o644)


def unpack(source: Path, dest: Path) -> SystemManifest:
    """The system at `source` (a zip or a folder) copied to `dest` (new) and its manifest read."""
    source = Path(source)
    dest = Path(dest)
    if source.is_dir():
        total = 0
        for p in source.rglob("*"):
            if p.is_symlink():
                raise SystemInvalid([(str(p.relative_to(source)), "a symbolic link (refused)")])
            if p.is_file():
                total += p.stat().st_size
        if total > LIMITS.max_unzipped_bytes:
            raise SystemInvalid([(source.name, f"{total} bytes: over the limit")])
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    elif source.is_file() and zipfile.is_zipfile(source):
        dest.mkdir(parents=True)
        try:
            extract(source, dest, LIMITS, refuse=_control_in_member)
        except ZipRefused as e:
            raise SystemInvalid(e.problems) from None
        tops = list(dest.iterdir())
        if not (dest / MANIFEST).exists() and len(tops) == 1 and (tops[0] / MANIFEST).is_file():
            # one top folder holding the system: its files move up (the folder renamed first, so
            # that a member named like the folder does not land on it)
            inner = tops[0].rename(dest.with_name(dest.name + ".top"))
            try:
                for p in inner.iterdir():
                    p.rename(dest / p.name)
            finally:
                shutil.rmtree(inner, ignore_errors=True)
    else:
        raise SystemInvalid([(source.name, "a zip archive or a folder holding system.yaml")])
    manifest = read_manifest(dest)
    _open_up(dest)
    return manifest


def runnable(archive: Path, *, run_images: bool) -> SystemManifest:
    """The manifest of an uploaded system this site can run, unpacked once into a scratch folder;
    raises SystemRefused naming every problem (of the archive, of system.yaml, or a container
    image where the site runs its Python runtime only)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            manifest = unpack(archive, Path(tmp) / "code")
        except SystemInvalid as e:
            raise SystemRefused(
                [{"line": None, "id": w, "message": msg} for w, msg in e.problems]
            ) from None
    if manifest.runtime == "image" and not run_images:
        raise SystemRefused(
            [
                {
                    "line": None,
                    "id": "system.yaml: runtime",
                    "message": "this site runs systems in its Python runtime only "
                    "(`runtime: python`); container images are not accepted",
                }
            ]
        )
    return manifest
