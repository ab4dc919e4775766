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
import threading
from collections.abc import Callable
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
    key, sha, size, synced = write_upload(home, data, filename, max_bytes)
    synced()
    return key, sha, size


def write_upload(
    home: Path, data: bytes | BinaryIO, filename: str | None = None, max_bytes: int | None = None
) -> tuple[str, str, int, Callable[[], None]]:
    """Store bytes or a stream, hashed as they are written, and make it durable in a thread of its
    own while the caller goes on; returns (storage_key, sha256, size, synced). `synced()` waits
    until the file is durable under its name (its data synced to disk, then renamed into place,
    then the rename synced), raising what that raised: the caller calls it before it commits a
    row that names the file (an upload's request spends that wait on its database work instead).
    Until then the file may not be under its name yet. Raises UploadTooLarge."""
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
        sha = h.hexdigest()
        key = f"{sha[:2]}/{sha}{safe_suffix(filename)}"
        dest = base / key
        if dest.exists():  # the same bytes, stored (and synced) before
            os.unlink(tmp)
            return key, sha, size, _done
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    failed: list[BaseException] = []

    def sync() -> None:
        try:
            _sync_into_place(tmp, dest, base)
        except BaseException as e:  # noqa: BLE001 — raised by `synced` in the caller's thread
            failed.append(e)
            if os.path.exists(tmp):
                os.unlink(tmp)

    t = threading.Thread(target=sync, name="palimpsest-upload-sync", daemon=True)
    t.start()

    def synced() -> None:
        t.join()
        if failed:
            raise failed[0]

    return key, sha, size, synced


def _done() -> None:
    pass


def _sync_into_place(tmp: str, dest: Path, base: Path) -> None:
    """A written upload made durable under its name: its data synced, then renamed into place
    (atomic: a reader sees the whole file or none), then the rename synced, so that after a power
    cut a name never stands for a file whose data is not on disk."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    new_dir = not dest.parent.is_dir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, dest)
    _fsync_dir(dest.parent)
    if new_dir:
        _fsync_dir(base)
