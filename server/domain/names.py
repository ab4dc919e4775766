"""Names people choose (a team's): normalised before they are checked, so that what reads alike
is alike. NFKC first (full-width, ligatures, compatibility forms), no invisible character (zero
widths, bidi overrides and isolates, a byte-order mark: Unicode's format controls) and a
skeleton for the reserved-name and the uniqueness checks: Unicode's confusables table (UTS #39,
`confusables.txt`, as the `confusable_homoglyphs` package ships it) maps every look-alike to its
prototype (a `Bаselines` with a Cyrillic а reads as `Baselines`, `rn` as `m`), then case, accents,
spaces and punctuation are dropped, and digits that pass for letters mapped to them.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from importlib.resources import files

# after the confusables table and case folding: the letters and digits that still pass for one
# another in a name (`1`, `l` and `I` for `i`, `0` for `o`, `5` for `s`), and the Latin look-alikes
# of Cyrillic, Greek and Armenian letters the table keeps apart
_LOOKALIKES = {
    "a": "аɑαа",
    "b": "Ьвβ",
    "c": "сϲς",
    "d": "ԁ",
    "e": "еєεҽ",
    "g": "ɡ",
    "h": "һհ",
    "i": "іιӏıɩ1l|",
    "j": "јϳ",
    "k": "кκ",
    "m": "м",
    "n": "пηո",
    "o": "оοօσ0",
    "p": "рρ",
    "q": "ԛզ",
    "r": "г",
    "s": "ѕʂ5",
    "t": "т",
    "u": "υսц",
    "v": "ѵν",
    "w": "ѡԝω",
    "x": "хχ",
    "y": "уүγ",
    "z": "ᴢ",
}
_MAP = {ord(c): letter for letter, chars in _LOOKALIKES.items() for c in chars}


def invisible(name: str) -> str | None:
    """The first invisible character of `name` (a format control: U+200B-U+200F, U+202A-U+202E,
    U+2060-U+2069, U+FEFF, U+00AD...; or a private-use, unassigned or surrogate code point), or
    None."""
    for c in name or "":
        if unicodedata.category(c) in ("Cf", "Co", "Cn", "Cs"):
            return c
    return None


def normalise(name: str) -> str:
    """`name` in NFKC with each run of white space one space, ends trimmed."""
    return " ".join(unicodedata.normalize("NFKC", name or "").split())


@functools.cache
def prototypes() -> dict[str, str]:
    """Unicode's confusables table as a map from each look-alike character to its prototype (what
    UTS #39's skeleton writes for it). The package keeps the table both ways (each prototype
    lists its look-alikes); a character with one entry whose other side has several, or that is
    a sequence, is the look-alike; where two characters name only each other the direction is
    not kept, and both map to one of them (`_rank`: the same skeleton either way)."""
    raw = json.loads((files("confusable_homoglyphs") / "confusables.json").read_text("utf-8"))

    def plain(x: str) -> str:  # the table's left-to-right marks around right-to-left letters
        return x.replace("\u200e", "")

    near = {plain(k): {plain(e["c"]) for e in v} for k, v in raw.items()}
    out = {}
    for k, others in near.items():
        if len(k) != 1 or len(others) != 1:
            continue
        (proto,) = others
        if proto == k or not proto:
            continue
        if k.isalnum() and not any(c.isalnum() for c in proto):
            continue  # a letter the table likens to punctuation stays a letter of the name
        if len(proto) > 1 or len(near.get(proto, ())) > 1 or _rank(proto) < _rank(k):
            out[k] = proto
    return out


def _rank(c: str) -> tuple:
    """Of two characters that name only each other, the prototype is the first by this: a letter
    or digit before a symbol, a character NFKC keeps before one it replaces, then code point."""
    return (not c.isalnum(), unicodedata.normalize("NFKC", c) != c, c)


def _confusables(text: str) -> str:
    """`text` with each look-alike written as its prototype, until nothing changes (a prototype
    sequence's own characters mapped too)."""
    table = prototypes()
    for _ in range(4):
        mapped = "".join(table.get(c, c) for c in text)
        if mapped == text:
            break
        text = mapped
    return text


def skeleton(name: str) -> str:
    """What `name` reads as: casefolded, the letters and digits that pass for one another mapped
    to one (`_LOOKALIKES`), look-alikes mapped to their prototype by Unicode's confusables table,
    casefolded and mapped again, accents, spaces and punctuation dropped. Two names of one
    skeleton read alike."""
    text = unicodedata.normalize("NFKD", normalise(name)).casefold().translate(_MAP)
    text = _confusables(text)
    folded = unicodedata.normalize("NFKD", text).casefold().translate(_MAP)
    kept = "".join(c for c in folded if not unicodedata.combining(c))
    return "".join(c for c in kept if c.isalnum())
