"""An upload's file is durable before the row that names it: its bytes fsynced, then the rename
that gives it its name, by an fsync of the directory it lands in (and of the uploads directory
when that directory is new)."""

from __future__ import annotations

import os
import stat

from server.storage import store_upload, uploads_dir


def test_the_file_and_its_name_are_synced_before_store_upload_returns(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):  # the real call, and what it was called on
        st = os.fstat(fd)
        synced.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    key, sha, size = store_upload(tmp_path, b"id\tlabel\n1\t0\n", "run.tsv")
    dest = uploads_dir(tmp_path) / key
    assert dest.read_bytes() == b"id\tlabel\n1\t0\n"
    inode = lambda p: os.stat(p).st_ino  # noqa: E731
    # the data first, then the directory the rename wrote, then (a new one) its parent's entry
    assert synced == [
        ("file", inode(dest)),
        ("dir", inode(dest.parent)),
        ("dir", inode(uploads_dir(tmp_path))),
    ]
    # the same bytes again: stored and synced before, so nothing written, renamed or synced
    synced.clear()
    assert store_upload(tmp_path, b"id\tlabel\n1\t0\n", "run.tsv")[0] == key
    assert synced == []
    assert not list((uploads_dir(tmp_path) / "tmp").iterdir())
    # other bytes under a directory that exists: its entry synced, the parent's not needed
    synced.clear()
    other = b"id\tlabel\n1\t1\n"
    k2 = store_upload(tmp_path, other, "run.tsv")[0]
    kinds = [kind for kind, _ in synced]
    if (uploads_dir(tmp_path) / k2).parent == dest.parent:
        assert kinds == ["file", "dir"]
    else:
        assert kinds == ["file", "dir", "dir"]
