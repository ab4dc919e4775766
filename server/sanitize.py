"""Organizers' Markdown made safe to show: rendered by `markdown`, then sanitized by `nh3`.

What comes out has no script, no style, no event handler attribute, no image or embedded
content, and only links whose address is http(s) or relative; the page's Content Security Policy
(`default-src 'self'`) is the second line of defence, not the first.
"""

from __future__ import annotations

import markdown
import nh3

# the most Markdown a page may hold: rendering is linear in it, but a page is read on every visit
MAX_MARKDOWN = 200_000

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


def render_markdown(text: str) -> str:
    """The sanitized HTML of an organizer's Markdown (raw HTML in it is sanitized too)."""
    html = markdown.markdown(text, extensions=EXTENSIONS, output_format="html")
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
