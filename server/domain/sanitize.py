"""Organizers' Markdown made safe to show: rendered by `markdown`, then sanitized by `nh3`.

What comes out has no script, no style, no event handler attribute, no image or embedded
content, and only links whose address is http(s) or relative; the page's Content Security Policy
(`default-src 'self'`) is the second line of defence, not the first.
"""

from __future__ import annotations

import html
import re

# The most Markdown a page may hold, and the most '[' in it: Python-Markdown's link pattern takes
# time that grows with (number of '[') x (length) on unclosed links ('[x](' x 10,000: 13.5 s),
# so both are bounded; a page is rendered once, when it is saved (under 2 s at these limits).
MAX_MARKDOWN = 50_000
MAX_BRACKETS = 500

TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
}
ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
}
URL_SCHEMES = {"http", "https"}
EXTENSIONS = ["tables", "fenced_code", "sane_lists"]


# Python-Markdown recurses once per level of a nested list or quote, and its time grows with the
# square of the depth (2,000 nested list items: 33 s, then a RecursionError); these bound both
MAX_INDENT = 64  # leading columns of a line (a tab counts 4)
MAX_QUOTE_DEPTH = 16  # leading '>' of a line
_LEAD = re.compile(r"^[ \t>]*", re.M)


class MarkdownTooDeep(ValueError):
    """Markdown nested deeper, or with more links, than the renderer may follow."""


def nesting_problem(text: str) -> str | None:
    """What makes `text` too costly to render (naming its line where there is one), or None;
    linear time."""
    if text.count("[") > MAX_BRACKETS:
        return f"more than {MAX_BRACKETS} '[' (links); link to fewer places from one page"
    for n, mo in enumerate(_LEAD.finditer(text), 1):
        lead = mo.group(0)
        if lead.count(">") > MAX_QUOTE_DEPTH:
            return f"line {n}: quotes nested more than {MAX_QUOTE_DEPTH} deep"
        if len(lead.replace("\t", "    ")) - lead.count(">") > MAX_INDENT:
            return f"line {n}: indented more than {MAX_INDENT} columns (a list nested too deep)"
    return None


def check_markdown(text: str) -> None:
    """Raise MarkdownTooDeep, saying why, when `text` is too costly to render."""
    problem = nesting_problem(text)
    if problem is not None:
        raise MarkdownTooDeep(problem)


def render_markdown(text: str) -> str:
    """The sanitized HTML of an organizer's Markdown (raw HTML in it is sanitized too); Markdown
    too costly to render is shown as escaped text."""
    if nesting_problem(text) is not None:
        return f"<pre>{html.escape(text)}</pre>"
    try:
        return _render(text)
    except RecursionError:
        return f"<pre>{html.escape(text)}</pre>"


def _render(text: str) -> str:
    # the renderer and the sanitizer load with the first page rendered: a local command that
    # only lists competitions (`palimpsest competitions list`) does not load them
    import markdown
    import nh3

    rendered = markdown.markdown(text, extensions=EXTENSIONS, output_format="html")
    return nh3.clean(
        rendered,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
