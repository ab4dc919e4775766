"""Zip archives read in bounded work: every member checked before anything is written.

Refused: a file over its size, too many members, too many bytes once inflated (counted while
writing, so a lying header stops there too), a member compressed past a ratio (a bomb), a path
outside the archive, a symbolic link, an encrypted member, and whatever `refuse` names.
"""

from __future__ import annotations

import posixpath
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MiB = 1024 * 1024


@dataclass(frozen=True)
class ZipLimits:
    max_zip_bytes: int = 64 * MiB
    max_unzipped_bytes: int = 512 * MiB
    max_files: int = 2000
    max_ratio: int = 100  # uncompressed / compressed, per member over 1 MiB
    noun: str = "archive"  # what the messages call it: "a path outside the bundle"


class ZipRefused(ValueError):
    """The archive breaks a bound; `problems` lists (member or archive name, what is wrong)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{n}: {m}" for n, m in problems))


def _mib(n: int) -> str:
    return f"{n / MiB:g} MiB"


def _outside(n: str) -> bool:
    norm = posixpath.normpath(n.replace("\\", "/"))
    return (
        n.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", n) is not None
        or norm == ".."
        or norm.startswith("../")
        or "/../" in f"/{n.replace(chr(92), '/')}/"
    )


def check(
    source: Path, limits: ZipLimits, refuse: Callable[[str], str | None] | None = None
) -> tuple[list[tuple[str, str]], list[zipfile.ZipInfo]]:
    """The problems of the archive at `source` and its file members, reading only its directory."""
    name = source.name
    size = source.stat().st_size
    if size > limits.max_zip_bytes:
        return [(name, f"{size} bytes: over the limit of {_mib(limits.max_zip_bytes)}")], []
    try:
        with zipfile.ZipFile(source) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        return [(name, f"not a readable zip archive ({e})")], []
    out: list[tuple[str, str]] = []
    members = [i for i in infos if not i.is_dir()]
    if len(members) > limits.max_files:
        out.append((name, f"{len(members)} files: over the limit of {limits.max_files:,}"))
    total = sum(i.file_size for i in members)
    if total > limits.max_unzipped_bytes:
        out.append((name, f"{total} bytes uncompressed: over {_mib(limits.max_unzipped_bytes)}"))
    for i in infos:
        n = i.filename
        if _outside(n):
            out.append((n, f"a path outside the {limits.noun} (refused)"))
            continue
        if stat.S_ISLNK(i.external_attr >> 16):
            out.append((n, "a symbolic link (refused)"))
        if i.flag_bits & 0x1:
            out.append((n, "encrypted (refused)"))
        if refuse is not None and (why := refuse(n)):
            out.append((n, why))
        if i.file_size > MiB and i.file_size > limits.max_ratio * max(i.compress_size, 1):
            ratio = i.file_size // max(i.compress_size, 1)
            out.append(
                (n, f"compressed {ratio} to 1: a zip bomb (refused above {limits.max_ratio} to 1)")
            )
    return out, members


def extract(source: Path, dest: Path, limits: ZipLimits, refuse=None) -> None:
    """Check the archive, then write its files under `dest`; raises ZipRefused naming each
    problem."""
    problems, members = check(source, limits, refuse)
    if problems:
        raise ZipRefused(problems)
    write(source, members, dest, limits)


def write(source: Path, members: list[zipfile.ZipInfo], dest: Path, limits: ZipLimits) -> None:
    """Write checked `members` under `dest`, counting the bytes inflated (a lying header stops at
    the limit)."""
    written = 0
    try:
        with zipfile.ZipFile(source) as zf:
            for info in members:
                target = dest / posixpath.normpath(info.filename.replace("\\", "/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as out:
                    while chunk := src.read(MiB):
                        written += len(chunk)
                        if written > limits.max_unzipped_bytes:
                            raise ZipRefused(
                                [
                                    (
                                        source.name,
                                        f"over {_mib(limits.max_unzipped_bytes)} uncompressed",
                                    )
                                ]
                            )
                        out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as e:
        raise ZipRefused([(source.name, f"cannot be extracted ({e})")]) from None
