"""An upload's multipart body is decoded as Werkzeug decodes it, with no pattern compiled per
request (server/web/multipart.py): each boundary search returns what Werkzeug's own pattern for
that boundary returns, on generated bodies; a served app's form parser builds the decoder; a
body with many boundaries parses to the same fields and files."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from server.web.multipart import BoundaryDecoder, BoundarySearch

LINE_BREAK = rb"(?:\r\n|\n|\r)"


def werkzeugs(boundary: bytes, *, line_break_optional: bool):
    """The two patterns Werkzeug 3.1 compiles per body (`MultipartDecoder.__init__`)."""
    lead = LINE_BREAK + (b"?" if line_break_optional else b"")
    return re.compile(
        rb"%s--%s(--[^\S\n\r]*%s?|[^\S\n\r]*%s)"
        % (lead, re.escape(boundary), LINE_BREAK, LINE_BREAK),
        re.MULTILINE,
    )


# bodies made of the pieces a boundary's search turns on (line breaks, dashes, blanks, the
# boundary itself, letters), so that most hold a boundary with something before and after it
BOUNDARY = st.sampled_from([b"a", b"ab", b"-", b"--", b"a-", b"-a", b"ba b", b"x"])
PIECES = [b"\r\n", b"\r", b"\n", b"--", b"-", b" ", b"\t", b"a", b"b", b"x", None]


def bodies(boundary: bytes):
    piece = st.sampled_from(PIECES).map(lambda x: boundary if x is None else x)
    return st.lists(piece, max_size=14).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), boundary=BOUNDARY, optional=st.booleans())
def test_each_search_finds_what_werkzeugs_pattern_finds(data, boundary, optional):
    """From any position (a search resumes where the last chunk's ended): a line break before the
    boundary counts only where it lies after that position."""
    body = data.draw(bodies(boundary))
    pos = data.draw(st.integers(0, len(body)))
    ours = BoundarySearch(boundary, line_break_optional=optional).search(bytearray(body), pos)
    theirs = werkzeugs(boundary, line_break_optional=optional).search(bytearray(body), pos)
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None, (body, boundary, optional, pos)
        assert (ours.start(), ours.end(), ours.group(1)) == (
            theirs.start(),
            theirs.end(),
            theirs.group(1),
        )


def test_every_short_body_from_every_position_as_werkzeugs_pattern():
    """Every body of up to four pieces (line breaks, dashes, a blank, a letter, the boundary),
    searched from each position, for a boundary of letters and one with a dash: the same match
    as Werkzeug's pattern, or none."""
    import itertools

    def same(body, boundary, optional, pos):
        ours = BoundarySearch(boundary, line_break_optional=optional).search(body, pos)
        theirs = werkzeugs(boundary, line_break_optional=optional).search(body, pos)
        if theirs is None:
            return ours is None
        return ours is not None and (ours.start(), ours.end(), ours.group(1)) == (
            theirs.start(),
            theirs.end(),
            theirs.group(1),
        )

    checked = 0
    for boundary in (b"a", b"-a"):
        pieces = [b"\r\n", b"\r", b"\n", b"--", b"-", b" ", b"a", boundary]
        for n in range(5):
            for parts in itertools.product(pieces, repeat=n):
                body = bytearray(b"".join(parts))
                for pos in range(len(body) + 1):
                    for optional in (True, False):
                        assert same(body, boundary, optional, pos), (body, boundary, optional, pos)
                        checked += 1
    assert checked > 100_000


def test_the_same_searches_as_the_base_decoder():
    """The decoder's two searches are Werkzeug's, with what it reads of the boundary."""
    from werkzeug.sansio.multipart import MultipartDecoder

    base, ours = (
        MultipartDecoder(b"xyz", 1000, max_parts=9),
        BoundaryDecoder(b"xyz", 1000, max_parts=9),
    )
    assert ours.boundary == base.boundary and ours.max_parts == 9
    assert ours.max_form_memory_size == 1000 and ours.state == base.state
    body = bytearray(b"pre\r\n--xyz\r\nhead: 1\r\n\r\ndata\r\n--xyz--\r\n")
    for name in ("preamble_re", "boundary_re"):
        a, b = getattr(base, name).search(body), getattr(ours, name).search(body)
        assert (a.start(), a.end(), a.group(1)) == (b.start(), b.end(), b.group(1))


def test_a_served_apps_form_parser_builds_it_and_a_body_parses_the_same():
    import io

    import werkzeug.formparser
    from werkzeug.sansio.multipart import MultipartDecoder
    from werkzeug.test import EnvironBuilder

    from server.web import multipart

    multipart.install()
    assert werkzeug.formparser.MultipartDecoder is BoundaryDecoder
    fields = {f"f{i}": f"value {i}\r\n--not-the-boundary\n" for i in range(30)}
    files = {
        f"file{i}": (io.BytesIO(b"line\r\n" * 200 + b"--b\r\n" * 3), f"n{i}.jsonl")
        for i in range(3)
    }
    env = EnvironBuilder(method="POST", data={**fields, **files}).get_environ()
    body = env["wsgi.input"].read()

    def parse(decoder):
        from werkzeug.wrappers import Request

        werkzeug.formparser.MultipartDecoder = decoder
        try:
            req = Request(
                EnvironBuilder(
                    method="POST",
                    input_stream=io.BytesIO(body),
                    content_type=env["CONTENT_TYPE"],
                    content_length=len(body),
                ).get_environ()
            )
            return dict(req.form), {k: (f.filename, f.read()) for k, f in req.files.items()}
        finally:
            werkzeug.formparser.MultipartDecoder = BoundaryDecoder

    assert parse(BoundaryDecoder) == parse(MultipartDecoder)
    form, got = parse(BoundaryDecoder)
    assert form == fields and got["file1"] == ("n1.jsonl", b"line\r\n" * 200 + b"--b\r\n" * 3)
