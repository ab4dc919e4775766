"""A multipart body's boundaries found without compiling a pattern per request.

Werkzeug's multipart decoder (`werkzeug.sansio.multipart.MultipartDecoder`) compiles two regular
expressions for each body, each with that body's boundary written into it. A client draws a new
boundary for every request, so Python's pattern cache never serves one, and every upload paid two
compilations: 0.25-0.39 ms of CPU a request (2026-12-04, 2-core AMD EPYC), a tenth of an upload's
own work on top of an authenticated GET's, and the largest single step of its form's parse.

`BoundaryDecoder` is that decoder with the two searches done by `bytes.find` of `--<boundary>`
and one pattern compiled once for what may follow it; each search returns what Werkzeug's pattern
returns (the leftmost match, its start, end and first group: `tests/test_multipart.py` checks
them against Werkzeug's own patterns on generated bodies). `install` has Werkzeug's form parser
build it (the parser names its decoder as a module global, `werkzeug.formparser.MultipartDecoder`).
"""

from __future__ import annotations

import re

import werkzeug.formparser
from werkzeug.sansio.multipart import MultipartDecoder

# what follows `--<boundary>` in Werkzeug's patterns: the epilogue's `--` with trailing blanks and
# an optional line break, or trailing blanks and a line break (its group 1)
_LINE_BREAK = rb"(?:\r\n|\n|\r)"
_AFTER = re.compile(rb"(--[^\S\n\r]*%s?|[^\S\n\r]*%s)" % (_LINE_BREAK, _LINE_BREAK))


class Found:
    """A boundary found: what the decoder reads of a match (`start`, `end`, `group(1)`)."""

    __slots__ = ("_start", "_end", "_after")

    def __init__(self, start: int, end: int, after: bytes) -> None:
        self._start, self._end, self._after = start, end, after

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def group(self, n: int) -> bytes:
        if n != 1:
            raise IndexError("no such group")
        return self._after


class BoundarySearch:
    """`re.compile(rb"%s?--%s(...)" % (LINE_BREAK, re.escape(boundary), ...)).search` (the line
    break before it optional: the preamble's end) or with the line break required (a part's
    end), with no pattern compiled for the boundary."""

    __slots__ = ("_needle", "_optional")

    def __init__(self, boundary: bytes, *, line_break_optional: bool) -> None:
        self._needle = b"--" + boundary
        self._optional = line_break_optional

    def search(self, data, pos: int = 0) -> Found | None:
        needle = self._needle
        i = data.find(needle, pos)
        while i != -1:
            after = _AFTER.match(data, i + len(needle))
            if after is not None:
                # the line break just before, within the searched part: the leftmost start wins
                # (`\r\n` over its `\n` alone), as the pattern's search tries starts in order
                lead = 0
                if i - 2 >= pos and data[i - 2 : i] == b"\r\n":
                    lead = 2
                elif i - 1 >= pos and data[i - 1 : i] in (b"\r", b"\n"):
                    lead = 1
                if lead or self._optional:
                    return Found(i - lead, after.end(), after.group(1))
            i = data.find(needle, i + 1)
        return None


class BoundaryDecoder(MultipartDecoder):
    """Werkzeug's decoder with its two boundary searches `BoundarySearch`es. The base is built
    for an empty boundary (its two patterns then the same on every call, compiled once and read
    from Python's pattern cache after), then given the body's boundary."""

    def __init__(
        self,
        boundary: bytes,
        max_form_memory_size: int | None = None,
        *,
        max_parts: int | None = None,
    ) -> None:
        super().__init__(b"", max_form_memory_size, max_parts=max_parts)
        self.boundary = boundary
        self.preamble_re = BoundarySearch(boundary, line_break_optional=True)
        self.boundary_re = BoundarySearch(boundary, line_break_optional=False)


def install() -> None:
    """Werkzeug's form parser builds `BoundaryDecoder`s (for every app of the process)."""
    werkzeug.formparser.MultipartDecoder = BoundaryDecoder
