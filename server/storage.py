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
from concurrent.futures import ThreadPoolExecutor
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
    try:
        fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix="up-")
    except FileNotFoundError:  # the first upload of this data directory
        tmpdir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix="up-")
    h = hashlib.sha256()
    size = 0
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

    def sync() -> None:
        try:
            _sync_into_place(tmp, dest, base)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise  # by `synced`, in the caller's thread

    done = _syncer().submit(sync)
    return key, sha, size, done.result


# the threads that make uploads durable, started once per process (a forked worker starts its
# own): handing a file to one costs a queue's put, where a thread started per upload cost the
# request some 0.4 ms of CPU (docs/benchmarks.md)
SYNC_THREADS = 4
_sync_pool: tuple[int, ThreadPoolExecutor] | None = None
_sync_lock = threading.Lock()


def _syncer() -> ThreadPoolExecutor:
    global _sync_pool
    got = _sync_pool
    if got is not None and got[0] == os.getpid():
        return got[1]
    with _sync_lock:
        if _sync_pool is None or _sync_pool[0] != os.getpid():
            pool = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="palimpsest-upload-sync")
            _sync_pool = (os.getpid(), pool)
        return _sync_pool[1]


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
