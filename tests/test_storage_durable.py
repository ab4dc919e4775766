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


FORKED = """
import os, signal, sys
from pathlib import Path
from server.storage import uploads_dir, write_upload
home = Path(sys.argv[1])
_, _, _, synced = write_upload(home, b"a\\n", "a.jsonl")
synced()  # the parent's sync threads started
pid = os.fork()
if pid == 0:  # the child: a new file, synced within 10 s, or it dies of the alarm
    code = 1
    try:
        signal.alarm(10)
        k, _, _, done = write_upload(home, b"b\\n", "b.jsonl")
        done()
        code = 0 if (uploads_dir(home) / k).read_bytes() == b"b\\n" else 2
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_process_makes_its_uploads_durable_with_threads_of_its_own(tmp_path):
    """The threads that sync uploads are the process's: a worker forked after its parent stored a
    file (gunicorn forks once the app is loaded) starts its own, where the parent's would never
    run (its `synced()` would wait for ever); a failed sync is raised by `synced()`. The fork is
    made by a fresh interpreter (this one may hold other libraries' threads)."""
    import subprocess
    import sys

    import pytest

    from server.storage import write_upload

    got = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert got.returncode == 0, got.stderr[-2000:]
    # a sync that fails: raised where it is waited for, its temporary file removed
    real = os.replace

    def refuse(a, b):
        raise OSError(28, "No space left on device")

    os.replace = refuse
    try:
        _, _, _, done = write_upload(tmp_path, b"c\n", "c.jsonl")
        with pytest.raises(OSError, match="No space"):
            done()
    finally:
        os.replace = real
    assert not list((uploads_dir(tmp_path) / "tmp").iterdir())
