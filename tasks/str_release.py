"""Reading STR's upstream release (SemEval-2024 Task 1, Tracks A, B and C): its tracks, languages
and pair files.

Shared by the task's importer (tasks/semrel.py) and its human rows (tasks/agreement_str.py).
"""

from __future__ import annotations

from pathlib import Path

from tasks.errors import ReleaseError
from tasks.release import as_float, read_table

TRACK_LANGUAGES = {
    "A": ("amh", "arq", "ary", "eng", "esp", "hau", "kin", "mar", "tel"),
    "B": ("afr", "amh", "arb", "arq", "ary", "eng", "esp", "hau", "hin", "ind", "kin", "pan"),
    "C": ("afr", "amh", "arb", "arq", "ary", "eng", "esp", "hau", "hin", "ind", "kin", "pan"),
}
"""Each track's languages, by their upstream codes (the folders of `Track A/`, `Track B/`,
`Track C/` at commit 3c5941d): A supervised (with `<lang>_train.csv`), B unsupervised (no
labelled relatedness data), C cross-lingual (no labelled data in the target language). A
language's dev and test files are the same in every track that has it."""
TRACKS = tuple(TRACK_LANGUAGES)
LANGUAGES = tuple(sorted({lang for langs in TRACK_LANGUAGES.values() for lang in langs}))
"""Every track's languages (14)."""

SOURCES = ("Formality", "Goodreads", "ParaNMT", "SNLI", "STS", "Stance", "Wikipedia")
"""STR-2022's sources (its file's `SourceID`, the paper's Table 2 and Table 6)."""


COLUMNS = ("PairID", "Text")


def str_base(source: Path) -> Path:
    """The folder of one folder per language: `Track A` of a checkout, or that folder itself."""
    for d in (source / "Track A", source):
        if d.is_dir() and any(
            (d / lang).is_dir() and any((d / lang).glob(f"{lang}_*.csv")) for lang in str_folders(d)
        ):
            return d
    raise ReleaseError(
        source,
        "not a SemEval-2024 Task 1 checkout: expected 'Track A/<lang>/<lang>_train.csv', "
        "'<lang>_dev_with_labels.csv', '<lang>_test_with_labels.csv' ...",
    )


def _holds_languages(d: Path) -> bool:
    return d.is_dir() and any(
        (d / lang).is_dir() and any((d / lang).glob(f"{lang}_*.csv")) for lang in str_folders(d)
    )


def track_bases(source: Path) -> dict[str, Path]:
    """The folder of each track the checkout holds (`Track A`, `Track B`, `Track C`); a folder
    of one folder per language on its own is Track A."""
    found = {t: source / f"Track {t}" for t in TRACKS if _holds_languages(source / f"Track {t}")}
    return found or {"A": str_base(source)}


def str_folders(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def _sentences(path: Path, line: int, text: str) -> tuple[str, str]:
    """The two sentences of a `Text` field, each stripped of the spaces around it: Algerian Arabic's
    files (arq) put a space after the separating newline, and a few pairs end in spaces."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if "\n" not in text and text.count("\t") == 1:  # afr's test gold and dev inputs: a tab
        text = text.replace("\t", "\n")
    parts = [s.strip() for s in text.split("\n")]
    if len(parts) != 2:
        raise ReleaseError(
            path,
            f"Text must hold two sentences separated by a newline, found {len(parts)} "
            f"line{'s' if len(parts) != 1 else ''}",
            line,
        )
    return parts[0], parts[1]


def read_pairs(path: Path, labelled: bool, language: str) -> list[dict]:
    """The pairs of one upstream file (`PairID,Text[,Score]` in any column order, BOM and CRLF
    allowed, the two sentences in one quoted field), checked: ids unique and non-empty, scores
    finite and in [0, 1]."""
    rows, seen = [], {}
    for line, r in read_table(path, COLUMNS, ","):
        if labelled and "Score" not in r and "score" in r:  # afr's dev gold: `score`
            r["Score"] = r["score"]
        if labelled and "Score" not in r:
            raise ReleaseError(path, f"the header lacks column(s) Score (found {', '.join(r)})", 1)
        pid = r["PairID"].strip()
        if not pid:
            raise ReleaseError(path, "empty PairID", line)
        if pid in seen:
            raise ReleaseError(path, f"PairID {pid!r} repeats line {seen[pid]}", line)
        seen[pid] = line
        s1, s2 = _sentences(path, line, r["Text"])
        row = {"PairID": pid, "language": language, "sentence1": s1, "sentence2": s2}
        if labelled:
            score = as_float(path, line, "Score", r["Score"])
            if not 0.0 <= score <= 1.0:
                raise ReleaseError(path, f"Score must be in [0, 1], found {r['Score']!r}", line)
            row["score"] = score
        if r.get("SourceID", "").strip():  # STR-2022's file: the pair's source
            row["source"] = r["SourceID"].strip()
        rows.append(row)
    return rows
