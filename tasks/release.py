"""Reading official release files, with errors that name the file and line."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator

from tasks.errors import ReleaseError


def need_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ReleaseError(path, f"missing: expected {what}")
    return path


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict]]:
    """(line, object) for every non-blank line, requiring the given keys."""
    need_file(path, "a JSON Lines file")
    try:
        with path.open(encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as e:
                    raise ReleaseError(path, f"not valid JSON ({e.msg})", i) from None
                if not isinstance(obj, dict):
                    raise ReleaseError(path, "expected a JSON object", i)
                missing = [k for k in required if k not in obj]
                if missing:
                    raise ReleaseError(path, f"missing field(s) {', '.join(missing)}", i)
                yield i, obj
    except UnicodeDecodeError as e:
        raise ReleaseError(path, f"not valid UTF-8 ({e.reason})") from None


def read_table(
    path: Path, required: tuple[str, ...], delimiter: str | None = None
) -> Iterator[tuple[int, dict]]:
    """(line, row) of a CSV/TSV file with a header; the delimiter is sniffed from the header."""
    need_file(path, "a CSV/TSV file with columns " + ", ".join(required))
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            first = f.readline()
            f.seek(0)
            if delimiter is None:
                delimiter = "\t" if "\t" in first else ","
            if delimiter == "\t":
                reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            else:
                reader = csv.reader(f, delimiter=delimiter)
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                raise ReleaseError(path, "the file is empty", 1) from None
            missing = [c for c in required if c not in header]
            if missing:
                raise ReleaseError(
                    path,
                    f"the header lacks column(s) {', '.join(missing)} (found {', '.join(header)})",
                    1,
                )
            end = reader.line_num
            try:
                for cells in reader:
                    # a quoted field may hold newlines: a row is located by the line it starts on
                    start, end = end + 1, reader.line_num
                    if not cells or (len(cells) == 1 and not cells[0].strip()):
                        continue
                    if len(cells) != len(header):
                        raise ReleaseError(
                            path, f"expected {len(header)} columns, found {len(cells)}", start
                        )
                    yield start, dict(zip(header, cells, strict=True))
            except csv.Error as e:
                raise ReleaseError(path, f"cannot parse ({e})", reader.line_num) from None
    except UnicodeDecodeError as e:
        raise ReleaseError(path, f"not valid UTF-8 ({e.reason})") from None


def as_float(path: Path, line: int, field: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ReleaseError(path, f"{field} is not a number: {value!r}", line) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise ReleaseError(path, f"{field} is not finite", line)
    return v


def locate(root: Path, marker: str, *candidates: str) -> Path:
    """The directory under `root` (itself or one of `candidates`) that holds `marker`."""
    root = Path(root)
    for c in ("", *candidates):
        d = root / c if c else root
        if (d / marker).exists():
            return d
    raise ReleaseError(root, f"not a release checkout: {marker} not found under it")
