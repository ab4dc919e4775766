"""Which phase an upload goes to when it names none, and whether a file belongs to its phase's
split: one rule for the web's form, the API and so the CLI (which asks the API).

The default is chosen by the phases' splits and dates, never by their names: among the open phases
that take this kind of upload, one on the test split, else one on the dev split, else any other
open one; with none open, the last phase (whose refusal then says it is closed). A file whose ids
are all another split's is refused at once, naming that split and the phase to choose, instead of
being stored and failing with one problem per row."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from typing import BinaryIO

from scorer import SubmissionInvalid, validate_file
from server import models
from server.domain.lifecycle import phase_state
from server.exceptions import WrongSplit
from tasks.errors import PalimpsestError

# the order splits are preferred in when no phase is named
SPLIT_ORDER = ("test", "dev")
# the most of an upload read to tell its split (of a larger one, its beginning, cut at a line): the
# request's bounded share, a few dozen rows whatever the file's length (another split's file shows
# it in its first rows; 8 KiB, some 170 rows of TRoTR's shape, cost a 411-row upload 0.6-0.8 ms
# more than a 60-row one); the worker validates every file in full once (docs/development.md)
CHECK_BYTES = 2 * 1024


def _rank(phase: models.Phase) -> int:
    return SPLIT_ORDER.index(phase.split) if phase.split in SPLIT_ORDER else len(SPLIT_ORDER)


def default_phase(
    phases: Sequence[models.Phase], *, accepts: str | None = None, now: datetime | None = None
) -> models.Phase:
    """The phase an upload goes to when it names none (`phases` in the order they were made,
    never empty): the open one on the test split, else on dev, else any open one, else the last;
    `accepts` ("predictions" or "code") prefers the phases that take that kind of upload."""
    fitting = [p for p in phases if accepts is None or p.accepts == accepts] or list(phases)
    open_ = [p for p in fitting if phase_state(p, now) == "open"]
    if open_:
        return min(open_, key=_rank)  # min keeps the first made among equals
    return fitting[-1]


def refuse_other_split(
    task,
    home,
    phase: models.Phase,
    phases: Sequence[models.Phase],
    stream: BinaryIO,
    filename: str = "",
) -> None:
    """Raise WrongSplit when the upload (a seekable stream, left at its start) has rows refused on
    its phase's split but none on another split a phase takes (ids merely missing there do not
    count): "these ids are the test split's; choose phase evaluation". A file with rows refused on
    every split is left to the scorer, which names each problem. At most CHECK_BYTES are read: of
    a larger file (a large upload's completion), its first CHECK_BYTES cut at the last line end,
    the same rule on that beginning (a compressed or zipped one is left to the scorer)."""
    others = []
    for p in phases:
        if p.split != phase.split and p.split not in others and p.accepts == "predictions":
            others.append(p.split)
    if not others:
        return
    cap = min(CHECK_BYTES, task.format.max_bytes or CHECK_BYTES)
    start = stream.tell()
    with tempfile.NamedTemporaryFile(suffix=_suffix(filename)) as tmp:
        shutil.copyfileobj(_bounded(stream, cap + 1), tmp)
        stream.seek(start)
        tmp.flush()
        if tmp.tell() > cap and not _cut_at_a_line(tmp, cap, filename):
            return
        if not _rows_refused(task.id, tmp.name, phase.split, home):
            return
        for split in others:
            if _rows_refused(task.id, tmp.name, split, home) is not False:
                continue
            fits = [p for p in phases if p.split == split and p.accepts == "predictions"]
            choose = default_phase(fits)
            raise WrongSplit(
                f"these ids are the {split} split's, not the {phase.split} split's of phase "
                f"{phase.name}; choose phase {choose.name}"
            )


def _rows_refused(task_id: str, path: str, split: str, home) -> bool | None:
    """Whether validating the file on `split` refuses any of its rows (a problem with a line):
    ids missing from it do not count (a file's beginning misses most). None for a split the task
    was imported without (the intake and the scorer say so)."""
    try:
        validate_file(task_id, path, split, home)
    except SubmissionInvalid as e:
        return any(p.line is not None for p in e.problems)
    except PalimpsestError:  # the split not imported
        return None
    return False


def _cut_at_a_line(tmp, cap: int, filename: str) -> bool:
    """Keep the first `cap` bytes of a plain text file up to its last line end (the beginning of
    a large upload, whole rows only); False for a compressed or zipped one (left to the scorer)."""
    if _suffix(filename).endswith((".gz", ".zip")):
        return False
    tmp.seek(0)
    head = tmp.read(cap)
    end = head.rfind(b"\n")
    if end < 0:
        return False
    tmp.seek(0)
    tmp.truncate(end + 1)
    tmp.flush()
    return True


def _suffix(filename: str) -> str:
    """The upload's own extension, which tells the reader its format (.csv, .gz, .zip...)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return "." + base.split(".", 1)[1] if "." in base else ".jsonl"


class _bounded:
    """At most `n` bytes of a stream."""

    def __init__(self, stream: BinaryIO, n: int):
        self.stream, self.left = stream, n

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size < 0 else min(size, self.left)
        data = self.stream.read(size)
        self.left -= len(data)
        return data
