"""Reading STR's upstream release (SemEval-2024 Task 1, Track A): its languages and pair files.

Shared by the task's importer (tasks/semrel.py) and its human rows (tasks/agreement_str.py).
"""

from __future__ import annotations

from pathlib import Path

from tasks.errors import ReleaseError
from tasks.release import as_float, read_table

LANGUAGES = ("amh", "arq", "ary", "eng", "esp", "hau", "kin", "mar", "tel")
"""Track A's languages, by their upstream codes (the folders of `Track A/`)."""


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


def str_folders(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def _sentences(path: Path, line: int, text: str) -> tuple[str, str]:
    """The two sentences of a `Text` field, each stripped of the spaces around it: Algerian Arabic's
    files (arq) put a space after the separating newline, and a few pairs end in spaces."""
    parts = [s.strip() for s in text.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")]
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
    for line, r in read_table(path, COLUMNS + (("Score",) if labelled else ()), ","):
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
        rows.append(row)
    return rows
