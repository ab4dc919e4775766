"""Names people choose (a team's): normalised before they are checked, so that what reads alike
is alike. NFKC first (full-width, ligatures, compatibility forms), no invisible character (zero
widths, bidi overrides and isolates, a byte-order mark: Unicode's format controls) and a
skeleton that maps the Latin look-alikes of Cyrillic, Greek and Armenian letters, and digits
that pass for letters, to one letter, for the reserved-name and the uniqueness checks (a
`Bаselines` with a Cyrillic а reads as `Baselines`)."""

from __future__ import annotations

import unicodedata

# the letters of other scripts that print as a Latin letter (Unicode's confusables, the common
# subset for these scripts), and the digits that pass for one
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


def skeleton(name: str) -> str:
    """What `name` reads as: casefolded, accents dropped, look-alike letters mapped to one
    (`_LOOKALIKES`), spaces and punctuation dropped. Two names of one skeleton read alike."""
    folded = unicodedata.normalize("NFKD", normalise(name)).casefold()
    kept = "".join(c for c in folded if not unicodedata.combining(c))
    return "".join(c for c in kept.translate(_MAP) if c.isalnum())
