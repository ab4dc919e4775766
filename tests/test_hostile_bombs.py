"""The bombs of the hostile-uploads benchmark are refused as the file's fault, by the offline
scorer and through the real API and worker (a short run of benchmarks/hostile_uploads.py)."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.mark.parametrize("task_id", ["tric-binary", "loci-similes"])
def test_every_bomb_is_refused_as_invalid(home, tmp_path, task_id):
    from hostile_uploads import bombs

    from scorer import SubmissionInvalid, validate_file

    for label, (data, name) in bombs(
        task_id, b"", "p.csv" if task_id == "loci-similes" else "p.jsonl"
    ).items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(SubmissionInvalid) as e:
            validate_file(task_id, p, "test", home)
        assert e.value.problems and all(len(x.message) <= 400 for x in e.value.problems), label


def test_a_link_file_the_columnar_reader_refuses_is_streamed_and_stops_early(home, tmp_path):
    """1 GiB of '{}' lines, gzipped: read row by row as a stream, stopped after the problem cap,
    never decompressed whole."""
    from hostile_uploads import gzip_bomb

    from scorer import SubmissionInvalid, validate_file

    p = tmp_path / "p.jsonl.gz"
    p.write_bytes(gzip_bomb())  # the benchmark's bomb, compressed once for the module's tests
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("loci-similes", p, "test", home)
    assert "validation stopped at line 1000" in e.value.problems[0].message


def test_a_row_task_refuses_a_file_over_its_declared_size(home, tmp_path):
    import gzip

    from scorer import SubmissionInvalid, validate_file

    p = tmp_path / "p.jsonl.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"{}\n" * (70 * 1024 * 1024 // 3))
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("tric-binary", p, "test", home)
    assert "over the limit of 64.0 MiB" in str(e.value)


@pytest.mark.slow
def test_hostile_uploads_through_the_api_short_run():
    from hostile_uploads import run

    # every bomb, a few files per task; the child-process figures of each bomb (`alone`) are the
    # benchmark's, not checked here (`python3 benchmarks/hostile_uploads.py` runs the full sweep)
    r = run(per_task=6, seed=3, workers=1, bombs_too=True, alone=False)
    assert not r["http_500"] and 500 not in r["http"]
    assert not r["infra"], r["infra"]
    assert r["longest_report_bytes"] <= 64 * 1024
    assert not r["gold_in_messages"]
    assert r["login_throttled_at"] is not None and r["login_throttled_at"] <= 10
    assert all(
        b.get("status") in (None, "failed") and b.get("failure_kind") in (None, "invalid")
        for b in r["bombs"].values()
    ), r["bombs"]
