"""A full disk is a refusal, not a failure: with the data directory (and its SQLite database) on
a small tmpfs filled to the last byte, an upload answers 507 naming the full disk and reads do
not fail with a 500; nothing already recorded is lost, and once space is freed the same upload
is taken. (Mounting a tmpfs needs root: the test is skipped without it.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from apikit import _h, _submit, _tric_file


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", f"palimpsest-{uuid.uuid4().hex[:6]}", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()})")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path) -> int:
    """Write until the disk is full; the bytes written."""
    n = 0
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
                n += 65536
        except OSError:
            pass
    return n


def test_a_full_disk_answers_507_and_loses_nothing(small_disk, api_template, monkeypatch):
    from server import create_app

    template, tokens = api_template
    home = small_disk / "home"
    shutil.copytree(template, home, symlinks=True)
    monkeypatch.setenv("PALIMPSEST_HOME", str(home))
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = create_app({"home": home, "env": "testing", "redis_url": "redis://127.0.0.1:1/0"})
    c = app.test_client()
    tok = tokens["alpha"]
    first = _submit(c, tok, "tric-binary", _tric_file(home, 5), phase="test", method_name="m1")
    assert first.status_code == 201, first.json
    sid = first.json["id"]

    filler = small_disk / "filler"
    assert _fill(filler) > 0
    got = _submit(c, tok, "tric-binary", _tric_file(home, 3), phase="test", method_name="m2")
    assert got.status_code == 507, (got.status_code, got.get_data(as_text=True)[:500])
    assert got.json["error"]["code"] == "disk_full"
    assert "disk is full" in got.json["error"]["message"]
    for url in (f"/api/v1/submissions/{sid}", "/api/v1/tasks/tric-binary/leaderboard"):
        r = c.get(url, headers=_h(tok))
        assert r.status_code in (200, 507), (url, r.status_code)
    page = c.get("/tasks/tric-binary/leaderboard")
    assert page.status_code in (200, 507)

    os.unlink(filler)
    again = _submit(c, tok, "tric-binary", _tric_file(home, 3), phase="test", method_name="m2")
    assert again.status_code == 201, again.json
    mine = c.get(f"/api/v1/submissions/{sid}", headers=_h(tok))
    assert mine.status_code == 200 and mine.json["id"] == sid
    assert not list((home / "uploads").rglob(".*")), "a partial upload was left behind"
