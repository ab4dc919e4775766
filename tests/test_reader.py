"""The safe reader: size limits, gzip/zip (bombs included), encodings and format sniffing."""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc
import zipfile

import pytest

from scorer.errors import SubmissionInvalid
from scorer.reader import DEFAULT_LIMITS, Limits, iter_records, load, read_bytes, sniff_format

MiB = 1024 * 1024
ROWS = b'{"instanceID": "a", "label": 1}\n{"instanceID": "b", "label": 0}\n'


def refused(path, limits=DEFAULT_LIMITS) -> str:
    with pytest.raises(SubmissionInvalid) as e:
        load(path, limits)
    return str(e.value)


def zeros_zip(path, size: int, name: str = "sub.jsonl", lie_size: int | None = None):
    """A zip of one member of `size` zero bytes; `lie_size` rewrites its declared size."""
    chunk = b"0" * MiB
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size = size
        with z.open(info, "w") as f:
            for _ in range(size // MiB):
                f.write(chunk)
    if lie_size is not None:
        data = bytearray(path.read_bytes())
        cd = data.index(b"PK\x01\x02")  # central directory: uncompressed size at +24
        struct.pack_into("<I", data, cd + 24, lie_size)
        if data[6] & 0x08 == 0:  # local header sizes too, unless a data descriptor holds them
            struct.pack_into("<I", data, 22, lie_size)
        path.write_bytes(bytes(data))
    return path


def zeros_gzip(path, size: int):
    chunk = b"0" * MiB
    with gzip.GzipFile(path, "wb", mtime=0, compresslevel=1) as f:
        for _ in range(size // MiB):
            f.write(chunk)
    return path


@pytest.mark.parametrize(
    "name, text, fmt",
    [
        ("sub.jsonl", '{"a": 1}\n', "jsonl"),
        ("sub.ndjson", '{"a": 1}\n', "jsonl"),
        ("sub.csv", "a,b\n1,2\n", "csv"),
        ("sub.tsv", "a\tb\n1\t2\n", "tsv"),
        ("sub.txt", '{"a": 1}\n', "jsonl"),
        ("sub.txt", "a\tb\n1\t2\n", "tsv"),
        ("sub.txt", "a,b\n1,2\n", "csv"),
        ("noext", "\n\n  a,b\n", "csv"),
    ],
)
def test_sniff_format(name, text, fmt):
    assert sniff_format(name, text) == fmt


def test_plain_gzip_and_zip_give_the_same_text(tmp_path):
    plain = tmp_path / "sub.jsonl"
    plain.write_bytes(ROWS)
    gz = tmp_path / "sub.jsonl.gz"
    gz.write_bytes(gzip.compress(ROWS))
    zp = tmp_path / "sub.zip"
    with zipfile.ZipFile(zp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("folder/sub.jsonl", ROWS)
    texts = [load(p) for p in (plain, gz, zp)]
    assert {t.text for t in texts} == {ROWS.decode()}
    assert [t.name for t in texts] == ["sub.jsonl", "sub.jsonl", "sub.jsonl"]
    assert {t.format for t in texts} == {"jsonl"}


def test_utf8_bom_is_accepted(tmp_path):
    p = tmp_path / "sub.csv"
    p.write_bytes(b"\xef\xbb\xbfinstanceID,label\na,1\n")
    header, rows = iter_records(load(p).text, "csv")
    assert header == ["instanceID", "label"]
    assert [r for _, r in rows] == [{"instanceID": "a", "label": "1"}]


@pytest.mark.parametrize(
    "data, line",
    [
        (b'{"a": "\xff"}\n', 1),
        (b'{"a": 1}\n{"a": 2}\n{"a": "caf\xe9"}\n', 3),
        (b"\xfe\xff\x00{", 1),  # UTF-16 is not UTF-8
    ],
)
def test_bad_utf8_names_the_line(tmp_path, data, line):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(data)
    with pytest.raises(SubmissionInvalid) as e:
        load(p)
    assert e.value.problems[0].line == line
    assert "UTF-8" in str(e.value)


@pytest.mark.parametrize("data", [b"", b"   \n\n\t\n"])
def test_empty_file(tmp_path, data):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(data)
    assert "empty" in refused(p)


def test_nul_byte_is_refused(tmp_path):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(b'{"a": 1}\n\x00\x00\n')
    with pytest.raises(SubmissionInvalid) as e:
        load(p)
    assert e.value.problems[0].line == 2


def test_missing_file_and_directory(tmp_path):
    assert "cannot read" in refused(tmp_path / "nope.jsonl")
    assert "not a file" in refused(tmp_path)


def test_file_over_the_size_limit(tmp_path):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(ROWS * 10)
    msg = refused(p, Limits(max_bytes=100))
    assert "over the limit" in msg and "100 bytes" in msg
    assert load(p, Limits(max_bytes=len(ROWS) * 10)).text  # at the limit is fine


def test_uncompressed_limit_applies_to_plain_files(tmp_path):
    p = tmp_path / "sub.jsonl"
    p.write_bytes(ROWS)
    assert "over the limit" in refused(p, Limits(max_uncompressed_bytes=len(ROWS) - 1))


def test_zip_with_two_files(tmp_path):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a.jsonl", ROWS)
        z.writestr("b.jsonl", ROWS)
    msg = refused(p)
    assert "exactly one file" in msg and "a.jsonl" in msg and "b.jsonl" in msg


def test_empty_zip(tmp_path):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w"):
        pass
    assert "exactly one file" in refused(p)


def test_zip_directories_do_not_count_as_files(tmp_path):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("dir/", b"")
        z.writestr("dir/sub.jsonl", ROWS)
    assert load(p).text == ROWS.decode()


@pytest.mark.parametrize(
    "member", ["../x.jsonl", "a/../../x.jsonl", "/etc/x.jsonl", "..\\x.jsonl", "C:/x.jsonl"]
)
def test_zip_member_outside_the_archive(tmp_path, member):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w") as z:
        # ZipInfo keeps the name as given (writestr with a str would strip a leading slash)
        z.writestr(zipfile.ZipInfo(member), ROWS)
    with zipfile.ZipFile(p) as z:
        assert z.infolist()[0].filename == member
    assert "outside" in refused(p)
    assert not (tmp_path.parent / "x.jsonl").exists()


def test_corrupt_zip_and_gzip(tmp_path):
    p = tmp_path / "sub.zip"
    p.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    assert "zip" in refused(p)
    g = tmp_path / "sub.jsonl.gz"
    g.write_bytes(gzip.compress(ROWS)[:-12])  # truncated
    assert "gzip" in refused(g)
    g.write_bytes(b"\x1f\x8b" + b"garbage" * 5)
    assert "gzip" in refused(g)


def test_zip_crc_mismatch_is_refused(tmp_path):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        z.writestr("sub.jsonl", ROWS)
    data = p.read_bytes()
    i = data.index(b'"instanceID"')
    p.write_bytes(data[:i] + b"X" + data[i + 1 :])
    assert "cannot be extracted" in refused(p)


def _bounded(fn, seconds: float = 1.5, megabytes: int = 24):
    """Run fn and check it took about a second at most and a few megabytes of Python memory."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < seconds, f"took {elapsed:.2f}s"
    assert peak < megabytes * MiB, f"peak {peak / MiB:.1f} MiB"


def test_zip_bomb_declared_size_is_refused_before_extracting(tmp_path):
    p = zeros_zip(tmp_path / "bomb.zip", 64 * MiB)
    assert p.stat().st_size < MiB
    limits = Limits(max_uncompressed_bytes=4 * MiB)

    def check():
        msg = refused(p, limits)
        assert "uncompressed" in msg and "over the limit" in msg

    _bounded(check, megabytes=2)


def test_zip_bomb_lying_about_its_size_is_refused(tmp_path):
    p = zeros_zip(tmp_path / "liar.zip", 64 * MiB, lie_size=1000)
    limits = Limits(max_uncompressed_bytes=4 * MiB)
    _bounded(lambda: refused(p, limits))


def test_gzip_bomb_is_refused_while_streaming(tmp_path):
    p = zeros_gzip(tmp_path / "bomb.jsonl.gz", 64 * MiB)
    assert p.stat().st_size < MiB
    limits = Limits(max_uncompressed_bytes=4 * MiB)

    def check():
        msg = refused(p, limits)
        assert "over the limit" in msg

    _bounded(check)


def test_gzip_at_the_limit_is_read(tmp_path):
    p = tmp_path / "sub.jsonl.gz"
    p.write_bytes(gzip.compress(ROWS))
    data, name = read_bytes(p, Limits(max_uncompressed_bytes=len(ROWS)))
    assert data == ROWS and name == "sub.jsonl"
    with pytest.raises(SubmissionInvalid):
        read_bytes(p, Limits(max_uncompressed_bytes=len(ROWS) - 1))


def test_encrypted_zip_member_is_refused(tmp_path):
    p = tmp_path / "sub.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        z.writestr("sub.jsonl", ROWS)
    data = bytearray(p.read_bytes())
    data[6] |= 0x01  # local header flags
    cd = data.index(b"PK\x01\x02")
    data[cd + 8] |= 0x01  # central directory flags
    p.write_bytes(bytes(data))
    assert "encrypted" in refused(p)


def test_jsonl_rows_and_bad_lines():
    text = '{"a": 1}\n\nnot json\n[1, 2]\n{"a": 2}\r\n'
    _, rows = iter_records(text, "jsonl")
    rows = list(rows)
    assert [line for line, _ in rows] == [1, 3, 4, 5]
    assert rows[0][1] == {"a": 1} and rows[3][1] == {"a": 2}
    assert "not valid JSON" in rows[1][1].message
    assert "expected a JSON object" in rows[2][1].message


def test_csv_rows_with_wrong_column_counts_and_quoted_newlines():
    text = 'a,b\n1,2\n"x\ny",3\n4\n5,6,7\n'
    header, rows = iter_records(text, "csv")
    rows = list(rows)
    assert header == ["a", "b"]
    assert rows[0] == (2, {"a": "1", "b": "2"})
    assert rows[1] == (4, {"a": "x\ny", "b": "3"})  # the line where the row ends
    assert rows[2][0] == 5 and "expected 2 columns" in rows[2][1].message
    assert rows[3][0] == 6 and "found 3" in rows[3][1].message
