"""Uploads stored content-addressed (sha256) under the data directory, written atomically.

A stored name is `<sha256><suffix>` where the suffix comes from a fixed allow-list (it helps the
scorer tell CSV from TSV and finds the name inside a .gz); nothing of the client's name is kept
on disk.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import BinaryIO

from server.exceptions import UploadTooLarge

CHUNK = 1024 * 1024
_BASE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".tab", ".txt")


def safe_suffix(filename: str | None) -> str:
    """The allow-listed suffix of a client's file name ('.csv.gz', '.zip', '.jsonl' or '')."""
    name = (filename or "").lower().strip()
    if name.endswith(".zip"):
        return ".zip"
    gz = name.endswith(".gz")
    if gz:
        name = name[:-3]
    base = next((s for s in _BASE_SUFFIXES if name.endswith(s)), "")
    return base + (".gz" if gz else "")


def uploads_dir(home: Path) -> Path:
    return Path(home) / "uploads"


def path_for(home: Path, storage_key: str) -> Path:
    """The file of a stored upload; `storage_key` is what `store_upload` returned."""
    parts = Path(storage_key).parts
    if len(parts) != 2 or ".." in parts or storage_key.startswith("/"):
        raise ValueError(f"bad storage key {storage_key!r}")
    return uploads_dir(home) / storage_key


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_upload(
    home: Path, data: bytes | BinaryIO, filename: str | None = None, max_bytes: int | None = None
) -> tuple[str, str, int]:
    """Store bytes or a stream; returns (storage_key, sha256, size). Raises UploadTooLarge."""
    stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    base = uploads_dir(home)
    tmpdir = base / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix="up-")
    try:
        with os.fdopen(fd, "wb") as f:
            while chunk := stream.read(CHUNK):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise UploadTooLarge(f"the upload is over the limit of {max_bytes} bytes")
                h.update(chunk)
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        sha = h.hexdigest()
        key = f"{sha[:2]}/{sha}{safe_suffix(filename)}"
        dest = base / key
        new_dir = not dest.parent.is_dir()
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            os.unlink(tmp)
        else:
            os.replace(tmp, dest)  # atomic: a reader sees the whole file or none
            # the rename durable too, before the row that names the file is committed: after a
            # power cut the file's data (fsynced above) would be there under no name at all
            _fsync_dir(dest.parent)
            if new_dir:
                _fsync_dir(base)
        return key, sha, size
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
