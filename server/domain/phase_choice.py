"""Which phase an upload goes to when it names none, and whether a file belongs to its phase's
split: one rule for the web's form, the API and so the CLI (which asks the API).

The default is chosen by the phases' splits and dates, never by their names: among the open phases
that take this kind of upload, one on the test split, else one on the dev split, else any other
open one; with none open, the last phase (whose refusal then says it is closed). A file whose ids
are all another split's is refused at once, naming that split and the phase to choose, instead of
being stored and failing with one problem per row."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import datetime
from typing import BinaryIO

from scorer import SubmissionInvalid, validate_bytes, validate_file
from server import models
from server.domain.lifecycle import phase_state
from server.exceptions import WrongSplit
from tasks.errors import PalimpsestError

# the order splits are preferred in when no phase is named
SPLIT_ORDER = ("test", "dev")
# the most of an upload read to tell its split: its first CHECK_ROWS lines (another split's file
# shows it in its first rows), within its first CHECK_BYTES (of a larger one, cut at the last line
# end there). The request's bounded share, whatever the file's length: the worker validates every
# file in full once (docs/development.md)
CHECK_BYTES = 2 * 1024
CHECK_ROWS = 8


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
    every split is left to the scorer, which names each problem. Only its beginning is read: its
    first CHECK_ROWS lines within its first CHECK_BYTES (of a file larger than that, what ends at a
    line end there), validated in memory; a compressed or zipped file no larger than CHECK_BYTES
    is read whole (through a temporary file, which the reader decompresses), a larger one left to
    the scorer."""
    others = []
    for p in phases:
        if p.split != phase.split and p.split not in others and p.accepts == "predictions":
            others.append(p.split)
    if not others:
        return
    cap = min(CHECK_BYTES, task.format.max_bytes or CHECK_BYTES)
    start = stream.tell()
    head = _read_up_to(stream, cap + 1)
    stream.seek(start)
    suffix = _suffix(filename)
    if suffix.endswith((".gz", ".zip")):
        if len(head) > cap:
            return
        with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
            tmp.write(head)
            tmp.flush()
            _refuse_if_another(task, home, phase, phases, others, tmp.name, None)
        return
    head = _first_rows(head, cap)
    if head is not None:
        _refuse_if_another(task, home, phase, phases, others, head, "upload" + suffix)


def _refuse_if_another(task, home, phase, phases, others, source, name) -> None:
    if not _rows_refused(task.id, source, name, phase.split, home):
        return
    for split in others:
        if _rows_refused(task.id, source, name, split, home) is not False:
            continue
        fits = [p for p in phases if p.split == split and p.accepts == "predictions"]
        choose = default_phase(fits)
        raise WrongSplit(
            f"these ids are the {split} split's, not the {phase.split} split's of phase "
            f"{phase.name}; choose phase {choose.name}"
        )


def _rows_refused(task_id: str, source, name: str | None, split: str, home) -> bool | None:
    """Whether validating the file (`source`: its bytes, named `name`, or else its path) on
    `split` refuses any of its rows (a problem with a line): ids missing from it do not count (a
    file's beginning misses most). None for a split the task was imported without (the intake
    and the scorer say so)."""
    try:
        if name is None:
            validate_file(task_id, source, split, home)
        else:
            validate_bytes(task_id, source, name, split, home)
    except SubmissionInvalid as e:
        return any(p.line is not None for p in e.problems)
    except PalimpsestError:  # the split not imported
        return None
    return False


def _first_rows(head: bytes, cap: int) -> bytes | None:
    """The first CHECK_ROWS lines of a plain text file's first bytes (`head`: at most cap + 1 of
    them): the file whole where it is shorter; else up to a line end within `cap`; None where no
    line ends there (no whole row to judge)."""
    end = 0
    for _ in range(CHECK_ROWS):
        nl = head.find(b"\n", end, cap)
        if nl < 0:
            break
        end = nl + 1
    else:
        return head[:end]
    if len(head) <= cap:
        return head
    return head[:end] if end else None


def _suffix(filename: str) -> str:
    """The upload's own extension, which tells the reader its format (.csv, .gz, .zip...)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return "." + base.split(".", 1)[1] if "." in base else ".jsonl"


def _read_up_to(stream: BinaryIO, n: int) -> bytes:
    """At most `n` bytes of a stream (fewer only at its end)."""
    parts, left = [], n
    while left > 0 and (chunk := stream.read(left)):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
