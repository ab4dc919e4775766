"""Reading a submission file safely: size limits, gzip/zip, encoding, format and rows.

Nothing here trusts the file: archives are inspected before anything is extracted, sizes are
capped while streaming, and every failure becomes a `SubmissionInvalid` naming what was wrong.
"""

from __future__ import annotations

import csv
import gc
import gzip
import io
import itertools
import json
import os
import posixpath
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

from scorer.errors import Problem, SubmissionInvalid

if TYPE_CHECKING:  # for the annotations only: participant commands must start fast
    import numpy as np

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Upper bounds on what a submission may weigh, on disk and once decompressed. The server
    passes its settings' limits in (`Settings.limits()`); these defaults serve the offline CLI."""

    # 1 GiB admits a Loci Similes top-100 run (8.3 M scored links, about 400 MiB of CSV)
    max_bytes: int = 1024 * MiB
    max_uncompressed_bytes: int = 1024 * MiB


DEFAULT_LIMITS = Limits()

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": None,
}


@dataclass
class Text:
    """A decoded submission: its text, the name of the file inside any archive, and its format."""

    text: str
    name: str
    format: str  # "jsonl", "csv" or "tsv"


def _refuse(message: str) -> SubmissionInvalid:
    return SubmissionInvalid([Problem(message)])


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _zip_member(path: Path, limits: Limits) -> tuple[zipfile.ZipInfo, str]:
    """The one member of a zip archive that may be read, and its base name; refuses the rest."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise _refuse(f"not a readable zip archive ({e})") from None
    with zf:
        members = [i for i in zf.infolist() if not i.is_dir()]
        if len(members) != 1:
            names = ", ".join(i.filename for i in members[:5]) or "nothing"
            raise _refuse(
                f"a zip archive must hold exactly one file; this one holds {len(members)} ({names})"
            )
        info = members[0]
        name = info.filename
        norm = posixpath.normpath(name.replace("\\", "/"))
        if name.startswith(("/", "\\")) or norm.startswith("..") or ":" in name.split("/")[0]:
            raise _refuse(f"the archive member {name!r} has a path outside the archive")
        if info.flag_bits & 0x1:
            raise _refuse(f"the archive member {name!r} is encrypted")
        if info.file_size > limits.max_uncompressed_bytes:
            raise _refuse(
                f"the archive member {name!r} is {_human(info.file_size)} uncompressed, over the "
                f"limit of {_human(limits.max_uncompressed_bytes)}"
            )
        return info, posixpath.basename(norm)


def _read_zip(path: Path, limits: Limits) -> tuple[bytes, str]:
    info, name = _zip_member(path, limits)
    # ZipExtFile stops at the declared size and checks the CRC, so a lying header fails here; the
    # member is read in chunks, counted, so that nothing past the limit is ever held
    buf = bytearray()
    try:
        with zipfile.ZipFile(path) as zf, zf.open(info) as f:
            while chunk := f.read(4 * MiB):
                buf += chunk
                if len(buf) > limits.max_uncompressed_bytes:
                    raise _refuse(
                        f"the archive member is over the limit of "
                        f"{_human(limits.max_uncompressed_bytes)}"
                    )
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as e:
        raise _refuse(f"the archive member {info.filename!r} cannot be extracted ({e})") from None
    return bytes(buf), name


def _read_gzip(path: Path, limits: Limits) -> tuple[bytes, str]:
    # First pass counts without keeping anything: a gzip bomb costs a few MB and stops at the limit.
    total = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(4 * MiB):
                total += len(chunk)
                if total > limits.max_uncompressed_bytes:
                    raise _refuse(
                        "the gzip file is over the limit of "
                        f"{_human(limits.max_uncompressed_bytes)} uncompressed"
                    )
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (gzip.BadGzipFile, zlib.error, EOFError, OSError) as e:
        raise _refuse(f"not a readable gzip file ({e})") from None
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    return data, name


def _opened(path: Path, limits: Limits):
    """The file's stat and first four bytes, once its size is checked against the limits."""
    try:
        st = path.stat()
    except OSError as e:
        raise _refuse(f"cannot read {path}: {e.strerror or e}") from None
    if not path.is_file():
        raise _refuse(f"{path} is not a file")
    if st.st_size > limits.max_bytes:
        raise _refuse(
            f"the file is {_human(st.st_size)}, over the limit of {_human(limits.max_bytes)}"
        )
    if st.st_size == 0:
        raise _refuse("the file is empty")
    with path.open("rb") as f:
        return st, f.read(4)


def read_bytes(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> tuple[bytes, str]:
    """Return the submission's uncompressed bytes and the name of the file they came from."""
    path = Path(path)
    st, magic = _opened(path, limits)
    if magic[:2] == b"\x1f\x8b":
        data, name = _read_gzip(path, limits)
    elif magic in (b"PK\x03\x04", b"PK\x05\x06"):
        data, name = _read_zip(path, limits)
    else:
        data, name = path.read_bytes(), path.name
        if len(data) > limits.max_uncompressed_bytes:
            raise _refuse(f"the file is over the limit of {_human(limits.max_uncompressed_bytes)}")
    return data, name


def decode(data: bytes) -> str:
    """Decode UTF-8 (a BOM is allowed); a bad byte is reported with its line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SubmissionInvalid(
            [Problem(f"not valid UTF-8: byte 0x{data[e.start]:02x} at column {col}", line=line)]
        ) from None


def sniff_format(name: str, text: str) -> str:
    """The format from the file's extension, else from its first non-blank line."""
    ext = os.path.splitext(name.lower())[1]
    fmt = FORMATS.get(ext)
    if fmt:
        return fmt
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("{"):
            return "jsonl"
        return "tsv" if "\t" in s else "csv"
    return "jsonl"


def load(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Text:
    """Read, decompress, decode and identify a submission file."""
    data, name = read_bytes(path, limits)
    return as_text(data, name)


def as_text(data: bytes, name: str) -> Text:
    """Decode and identify a submission's uncompressed bytes (`name`: the file they came from):
    what `load` does once the file is read."""
    text = decode(data)
    del data
    if not text.strip():
        raise _refuse("the file is empty")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise SubmissionInvalid(
            [Problem("the file holds a NUL byte: is it a binary file?", line=line)]
        )
    return Text(text, name, sniff_format(name, text))


class _LimitedRaw(io.RawIOBase):
    """A binary stream that refuses to give more than `limit` bytes (a bomb stops there)."""

    def __init__(self, f, limit: int, what: str):
        self.f, self.limit, self.total, self.what = f, limit, 0, what

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self.f.read(len(b))
        except (gzip.BadGzipFile, zlib.error, EOFError, zipfile.BadZipFile) as e:
            raise SubmissionInvalid(
                [Problem(f"{self.what} cannot be read to its end ({e})")]
            ) from None
        self.total += len(data)
        if self.total > self.limit:
            raise _refuse(f"{self.what} is over the limit of {_human(self.limit)} uncompressed")
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self.f.close()
            zf = getattr(self.f, "_palimpsest_zip", None)
            if zf is not None:
                zf.close()
        finally:
            super().close()


def open_text(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Text:
    """Like `load`, but `text` is a stream of decoded lines, read as it is consumed: memory grows
    with what the consumer keeps, never with the file, and a reader that stops early (after the
    problem cap) never decompresses the rest. For the row-by-row readers of large files."""
    path = Path(path)
    _, magic = _opened(path, limits)
    if magic[:2] == b"\x1f\x8b":
        name, what = (
            (path.name[:-3] if path.name.lower().endswith(".gz") else path.name),
            "the gzip file",
        )

        def raw():
            return gzip.open(path, "rb")
    elif magic in (b"PK\x03\x04", b"PK\x05\x06"):
        info, name = _zip_member(path, limits)
        what = "the archive member"

        def raw():
            zf = zipfile.ZipFile(path)
            member = zf.open(info)
            member._palimpsest_zip = zf  # closed with the member's stream
            return member
    else:
        name, what = path.name, "the file"

        def raw():
            return path.open("rb")

    def opener():
        return io.BufferedReader(_LimitedRaw(raw(), limits.max_uncompressed_bytes, what), 1 << 20)

    binary = opener()
    try:  # the first 64 KiB that are not blank (the format is sniffed from them)
        first = b""
        while chunk := binary.read(1 << 20):
            first = (first + chunk).lstrip(b"\xef\xbb\xbf \t\r\n")[: 64 * 1024]
            if first:
                break
    finally:
        binary.close()
    if not first:
        raise _refuse("the file is empty")
    head = first.decode("utf-8", "replace")
    return Text(
        _Decoded(
            lambda: io.TextIOWrapper(opener(), encoding="utf-8-sig", errors="strict", newline="")
        ),
        name,
        sniff_format(name, head),
    )


class _Decoded:
    """The lines of a file, read afresh at each pass (a reader may make two); a byte that is not
    UTF-8 becomes a SubmissionInvalid naming its line."""

    def __init__(self, open_stream):
        self.open_stream = open_stream

    def __iter__(self):
        stream, n = self.open_stream(), 0
        try:
            for line in stream:
                n += 1
                yield line
        except UnicodeDecodeError as e:
            raise SubmissionInvalid(
                [Problem(f"not valid UTF-8: byte 0x{e.object[e.start]:02x}", line=n + 1)]
            ) from None
        finally:
            stream.close()


class BadRow:
    """A row that could not be parsed; carries the reason."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message


def _lines(text) -> Iterator[str]:
    """The lines of a text one at a time (never a list of all of them: a file of millions of
    short bad lines must not cost memory for each); `text` is a str or a stream of lines."""
    if not isinstance(text, str):
        for line in text:
            yield line.rstrip("\r\n") if line.endswith("\n") else line
        return
    start, find = 0, text.find
    while True:
        end = find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list) -> dict:
    # a key given twice in one object would otherwise be read silently, the last one winning
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def iter_jsonl(text: str) -> Iterator[tuple[int, dict | BadRow]]:
    """(line number, object) for every non-blank line; unparseable lines, and objects naming a
    key twice, become BadRow."""
    loads = json.JSONDecoder(object_pairs_hook=_unique_pairs).decode
    for i, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except _DuplicateKey as e:
            yield i, BadRow(f"the key {str(e.args[0])[:80]!r} appears twice in this object")
            continue
        except json.JSONDecodeError as e:
            yield i, BadRow(f"not valid JSON ({e.msg} at column {e.colno})")
            continue
        except RecursionError:
            yield i, BadRow("not valid JSON here: nested too deeply")
            continue
        except (ValueError, OverflowError, TypeError) as e:  # e.g. an integer of more digits than
            yield i, BadRow(f"not valid JSON here ({str(e).split(';')[0]})")  # Python converts
            continue
        # (nothing broader: a job's timeout or CPU limit raised inside the parser is not the line's)
        if not isinstance(obj, dict):
            yield i, BadRow(f"expected a JSON object, found {type(obj).__name__}")
            continue
        yield i, obj


def csv_reader(text, fmt: str):
    """A csv.reader over the text (a str, or a stream of lines) for 'csv' or 'tsv'."""
    src = io.StringIO(text, newline="") if isinstance(text, str) else iter(text)
    if fmt == "tsv":
        return csv.reader(src, delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(src)


def iter_table(text: str, fmt: str) -> tuple[list[str], Iterator[tuple[int, list[str] | BadRow]]]:
    """The header and an iterator of (line number, cells) of a CSV or TSV text."""
    reader = csv_reader(text, fmt)
    header: list[str] = []
    try:
        for header in reader:
            if any(c.strip() for c in header):
                break
    except csv.Error as e:
        raise SubmissionInvalid(
            [Problem(f"cannot parse the header ({e})", line=reader.line_num)]
        ) from None
    header = [h.strip() for h in header]
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]

    def rows():
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                yield reader.line_num, BadRow(f"cannot parse the row ({e})")
                continue
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue
            yield reader.line_num, cells

    return header, rows()


def iter_records(
    text: str, fmt: str
) -> tuple[list[str] | None, Iterator[tuple[int, dict | BadRow]]]:
    """Rows as dicts for any format: JSON objects, or header-keyed CSV/TSV cells (strings)."""
    if fmt == "jsonl":
        return None, iter_jsonl(text)
    header, rows = iter_table(text, fmt)

    def records():
        n = len(header)
        for line, cells in rows:
            if isinstance(cells, BadRow):
                yield line, cells
            elif len(cells) != n:
                yield (
                    line,
                    BadRow(f"expected {n} columns ({', '.join(header)}), found {len(cells)}"),
                )
            else:
                yield line, dict(zip(header, cells, strict=True))

    return header, records()


COLUMN_CHUNK = 1_000  # rows; small enough that a chunk stays in cache between parsing and lookups


def link_columns(
    reader, ncol: int, iq: int, isrc: int, isc: int | None, qidx: dict, sidx: dict
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The rest of a well-formed link table as arrays (query index, source index, score), or
    None at the first row that is not: a parse error, a blank line, a wrong number of cells,
    an unknown id, a score that `float` refuses or that is not finite.

    The fast path of validation: it works on chunks of rows with C-level loops and keeps no
    per-row Python objects. On None the caller reads the file again row by row to report every
    problem, so a valid file gives exactly what the row-by-row reader gives.
    """
    qs, ss, scs = [], [], []
    qget, sget = qidx.get, sidx.get
    was_enabled = gc.isenabled()
    gc.disable()  # the chunks make no reference cycles; collecting them costs more than parsing
    try:
        while chunk := list(itertools.islice(reader, COLUMN_CHUNK)):
            n = len(chunk)
            if any(map(ncol.__ne__, map(len, chunk))):
                return None
            cols = list(zip(*chunk, strict=True))
            del chunk
            try:
                qs.append(np.fromiter(map(qget, cols[iq]), np.int64, n))
                ss.append(np.fromiter(map(sget, cols[isrc]), np.int64, n))
                if isc is not None:
                    sc = np.fromiter(map(float, cols[isc]), np.float64, n)
                    if not np.isfinite(sc).all():
                        return None
                    scs.append(sc)
            except (TypeError, ValueError):  # None for an unknown id, or a bad number
                return None
    except csv.Error:
        return None
    finally:
        if was_enabled:
            gc.enable()
    empty_i, empty_f = np.empty(0, np.int64), np.empty(0, np.float64)
    q = np.concatenate(qs) if qs else empty_i
    s = np.concatenate(ss) if ss else empty_i
    sc = (np.concatenate(scs) if scs else empty_f) if isc is not None else None
    return q, s, sc


# ---------------------------------------------------------------- link tables, columnar

ARROW_BLOCK = 32 * MiB  # the largest block parsed at once (pyarrow parses blocks in parallel)


class _Counted:
    """A binary file whose reads are counted: reading past `limit` bytes raises (a gzip bomb
    stops there)."""

    def __init__(self, f, limit: int):
        self.f, self.limit, self.total, self.over = f, limit, 0, False
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n if n is not None and n >= 0 else self.limit + 1 - self.total)
        self.total += len(data)
        if self.total > self.limit:
            self.over = True
            raise OSError("over the uncompressed limit")
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
        self.f.close()


def id_array(ids_bytes: bytes):
    """A pyarrow binary array of newline-terminated ids, built from buffers (no Python objects)."""
    # heavy: pyarrow loads only when a link table is read
    import pyarrow as pa

    buf = np.frombuffer(ids_bytes, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    offsets = np.zeros(nl.size + 1, dtype=np.int64)
    offsets[1:] = nl + 1
    data = buf[buf != 10]
    offsets -= np.arange(nl.size + 1)  # one newline fewer before each id
    return pa.Array.from_buffers(
        pa.large_binary(), nl.size, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _link_header(first: bytes, fmt: str) -> list[str] | None:
    """The column names of a link table's first line, or None when it is not a plain header."""
    try:
        line = first.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8")
    except UnicodeDecodeError:
        return None
    cells = next(csv_reader(line.lstrip("\ufeff"), fmt), [])
    header = [c.strip() for c in cells]
    if (
        len(set(header)) != len(header)
        or not {"query_id", "source_id"} <= set(header)
        or not set(header) <= {"query_id", "source_id", "score"}
    ):
        return None
    return header


def _np(arr, dtype):
    """A pyarrow array without nulls as a numpy view of its data buffer (`to_numpy` would import
    pandas, a second or so)."""
    dtype = np.dtype(dtype)
    return np.frombuffer(
        arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize
    )


def _index_in(col, known):
    """Each value's position in `known` (a hash join) as int32, or None if any value is not there;
    `col` is an array or a chunked array."""
    # heavy: pyarrow loads only when a link table is read
    import pyarrow.compute as pc

    idx = pc.index_in(col, value_set=known)
    if idx.null_count:
        return None
    chunks = getattr(idx, "chunks", [idx])
    return np.concatenate([_np(c, "int32") for c in chunks]) if chunks else np.empty(0, np.int32)


def arrow_links(path: str | Path, qknown, sknown, limits: Limits = DEFAULT_LIMITS):
    """A well-formed CSV/TSV link table as (query index, source index, score or None, format),
    read with pyarrow's multithreaded CSV reader and mapped to indices by hash joins
    (`pyarrow.compute.index_in`) against the known ids `qknown`/`sknown` (binary arrays).

    Returns None when the file is not such a table, or holds anything the row-by-row reader would
    report (an unknown id, a bad or non-finite score, a wrong number of cells, bad quoting,
    JSON Lines): the caller then reads it with `load` and reports every problem by line. Size
    limits are enforced as `read_bytes` does, with the same messages.
    """
    # heavy: pyarrow loads only when a link table is read
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = Path(path)
    st, magic = _opened(path, limits)
    counted = None
    if magic[:2] == b"\x1f\x8b":
        name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
        try:
            with gzip.open(path, "rb") as g:
                first = g.read(64 * 1024)
        except (gzip.BadGzipFile, zlib.error, EOFError, OSError):
            return None
        try:  # ISA-L's inflate is about 3x zlib's here; the standard library's otherwise
            from isal.igzip import open as gz_open
        except ImportError:
            gz_open = gzip.open
        counted = _Counted(gz_open(path, "rb"), limits.max_uncompressed_bytes)
        source = pa.PythonFile(counted, mode="r")
    elif magic in (b"PK\x03\x04", b"PK\x05\x06"):
        data, name = _read_zip(path, limits)
        first, source = data[: 64 * 1024], pa.BufferReader(data)
    else:
        if st.st_size > limits.max_uncompressed_bytes:
            raise _refuse(f"the file is over the limit of {_human(limits.max_uncompressed_bytes)}")
        name = path.name
        with path.open("rb") as f:
            first = f.read(64 * 1024)
        source = pa.OSFile(str(path))
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    fmt = FORMATS.get(os.path.splitext(name.lower())[1])
    if fmt is None:
        s = first.lstrip()
        fmt = (
            "jsonl"
            if s.startswith(b"{") or not s
            else "tsv"
            if b"\t" in s.split(b"\n", 1)[0]
            else "csv"
        )
    header = _link_header(first, fmt) if fmt != "jsonl" else None
    if header is None:
        source.close()
        return None
    types = {"query_id": pa.binary(), "source_id": pa.binary(), "score": pa.float64()}
    has_score = "score" in header
    # blocks are parsed in parallel: at least 8 of them, so that a small file uses both cores too
    size = st.st_size * (5 if counted is not None else 1)  # a .gz inflates about 5x
    block = max(MiB, min(ARROW_BLOCK, size // 8))
    try:
        table = pacsv.read_csv(
            source,
            read_options=pacsv.ReadOptions(skip_rows=1, column_names=header, block_size=block),
            parse_options=pacsv.ParseOptions(
                delimiter="\t" if fmt == "tsv" else ",",
                quote_char=False if fmt == "tsv" else '"',
                newlines_in_values=False,
                ignore_empty_lines=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError, ValueError):
        if counted is not None and counted.over:
            raise _refuse(
                f"the gzip file is over the limit of {_human(limits.max_uncompressed_bytes)} "
                "uncompressed"
            ) from None
        return None
    finally:
        source.close()
    # the two hash joins at once (pyarrow releases the GIL)
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(_index_in, table.column(c), k)
            for c, k in (("query_id", qknown), ("source_id", sknown))
        ]
        q, s = (j.result() for j in jobs)
    if q is None or s is None:
        return None
    sc = None
    if has_score:
        sc = np.concatenate(
            [_np(c, np.float64) for c in table.column("score").chunks] or [np.empty(0)]
        )
        if not np.isfinite(sc).all():
            return None
    del table
    return q.astype(np.int64), s.astype(np.int64), sc, fmt
