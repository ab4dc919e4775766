"""A board's full pairwise matrix as a file: every pair of ranked rows with the two-sided p-value
of their paired bootstrap difference, raw and Holm-corrected over every pair.

The board's statistics (`server.boards.stats`) keep the full matrices only on a small board; on a
large one the pages show each row against the next and against its cluster's best. The whole
matrix is built when someone asks for it (`/tasks/<task>/leaderboard/significance.csv`), by a job
on the `stats` queue, from the per-row resampled scores the statistics job keeps; a published
version's is written at publication, frozen with the snapshot. Either is a gzipped CSV in the
data directory (`stats/pairwise/`, a cache; a published one under `rankings/pairwise/`, kept by
backups), and in the store under the same key on a site with one, so that a web process on
another machine, with an empty data directory, serves it; the web streams the file and never
builds the matrix.

The CSV has one line per pair `a < b` of the board's positions (1 = best, in the board's order, as
the significance page numbers them): `a,team_a,b,team_b,p,p_holm`, the p-values as Python writes
a float (every digit). The team names are the board's: on an anonymous board, its labels.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
import time
import zlib
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path

import numpy as np
from sqlmodel import Session

from server.boards import leaderboard as lb
from server.boards import stats
from server.domain import boards
from server.domain.provenance import current_provenance
from server.jobs.queue import STATS, connect, enqueue_once
from server.models import Phase

log = logging.getLogger(__name__)

HEADER = "a,team_a,b,team_b,p,p_holm\n"
CHUNK = 1 << 18


def _board_tag(board: str | None) -> str:
    name = board or boards.MAIN_BOARD
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        return name
    return "h" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


def current_path(home, phase_id: int, version: str, board: str | None) -> Path:
    """The matrix of a board at one version of its phase (the key of the pages' cache)."""
    name = f"{int(phase_id)}-{version}-{_board_tag(board)}.csv.gz"
    return stats.stats_dir(home) / "pairwise" / name


def published_path(home, phase_id: int, version: int, sha256: str, board: str | None) -> Path:
    """The matrix frozen with a published version (`sha256`: its snapshot's, so that a
    publication whose transaction did not commit never passes for the one that did). Under
    `rankings/`, not `stats/`: a backup keeps it with the snapshot (the caches of `stats/` are
    left out and made again; a published matrix is not made again)."""
    name = f"{int(phase_id)}-v{int(version)}-{sha256[:16]}-{_board_tag(board)}.csv.gz"
    return Path(home) / "rankings" / "pairwise" / name


def _cell(team: str | None) -> str:
    """A team's name as one CSV field (quoted where it must be; never a spreadsheet formula)."""
    v = lb._csv_safe(team or "")  # as the board's CSV writes it
    if any(ch in v for ch in ',"\r\n'):
        v = '"' + v.replace('"', '""') + '"'
    return v


def lines(teams: list, p, p_holm) -> Iterator[bytes]:
    """The CSV in pieces (a row of the matrix at a time): the header, then every pair a < b."""
    yield HEADER.encode("utf-8")
    heads = [f"{i},{_cell(t)}," for i, t in enumerate(teams, 1)]
    R = len(teams)
    for a in range(R - 1):
        # C-level joins: 2,000 rows are 1,999,000 lines
        yield "".join(
            map(
                "".join,
                zip(
                    repeat(heads[a]),
                    heads[a + 1 :],
                    map(repr, p[a, a + 1 :].tolist()),
                    repeat(","),
                    map(repr, p_holm[a, a + 1 :].tolist()),
                    repeat("\n"),
                    strict=False,
                ),
            )
        ).encode("utf-8")


def write(settings, path: Path, matrices: dict) -> int:
    """Write a board's matrix file (gzip) here and, on a site with a store, into the store; its
    size in bytes."""
    teams = matrices.get("teams") or []
    p = matrices.get("p", np.ones((0, 0)))
    p_holm = matrices.get("p_holm", np.ones((0, 0)))

    def gzipped():
        z = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip stream; level 1: the fast one
        for piece in lines(teams, p, p_holm):
            yield z.compress(piece)
        yield z.flush()

    stats._atomic_write(path, gzipped())
    stats._share(settings, path, None)
    return path.stat().st_size


def find(settings, path: Path) -> Path | None:
    """A matrix file here, fetched from the store when another machine wrote it; None if none."""
    return stats._shared(settings, path)


def read(path: Path, gzipped: bool) -> Iterator[bytes]:
    """A matrix file in pieces: as stored (gzip) or decompressed, never whole in memory."""
    opener = open if gzipped else gzip.open
    with opener(path, "rb") as f:
        while piece := f.read(CHUNK):
            yield piece


def from_body(body: dict) -> Iterator[bytes]:
    """The CSV of a statistics body that carries its full matrices (a small board's, as
    snapshots published before the matrix files hold them: rounded to six decimals)."""
    teams = body.get("teams") or []
    p = np.asarray(body.get("p") or np.ones((0, 0)), dtype=np.float64)
    ph = np.asarray(body.get("p_holm") or np.ones((0, 0)), dtype=np.float64)
    return lines(teams, p, ph)


# ----------------------------------------------------------------------------- on request


def compute_pairwise(phase_id: int, board: str | None = None, settings=None) -> dict:
    """Write the matrix file of a board (None or "main": the default one) at its phase's current
    version, from the rows' resampled scores (those not kept yet are computed)."""
    t0 = time.perf_counter()
    settings, engine, phase, task, version = stats.job_start(phase_id, settings)
    if version is None:
        return {"phase": phase_id, "board": board, "version": None}
    path = current_path(settings.home, phase_id, version, board)
    if find(settings, path) is not None:
        return {"phase": phase_id, "board": board, "version": version, "cached": True}
    prov = current_provenance(task, phase.split, settings.home)
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        spec = boards.resolve(phase, board)
        built = lb.build_board(
            s, task, phase, audience="public", include_closed=True, provenance=prov, board=spec
        )
    part = stats.Part.get(settings, engine, task, phase, stats.part_of(built, phase))
    matrices: dict = {}
    try:
        stats.statistics(settings, part, built, matrices=matrices)
    except ValueError as e:  # a value the bootstrap does not resample: the board has no p-values
        return {"phase": phase_id, "board": board, "version": version, "unavailable": str(e)}
    if stats.phase_version(settings, engine, task, phase_id) != version:
        # the board moved meanwhile: not that version's matrix (the next request asks again)
        return {"phase": phase_id, "board": board, "version": version, "moved": True}
    size = write(settings, path, matrices)
    return {
        "phase": phase_id,
        "board": board,
        "version": version,
        "rows": len(matrices.get("teams") or ()),
        "bytes": size,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def pairwise_job(phase_id: int, board: str | None = None) -> dict:
    """The queued job."""
    return compute_pairwise(phase_id, board)


def enqueue(settings, phase_id: int, board: str | None = None, conn=None) -> bool:
    """Ask a worker for a board's matrix file (requests coalesce, as the statistics' do); False
    when Redis is away."""
    tag = _board_tag(board)
    try:
        enqueue_once(
            conn or connect(settings),
            settings,
            "server.boards.pairwise.pairwise_job",
            f"pairwise-{int(phase_id)}-{tag}",
            args=(int(phase_id), board),
            description=f"pairwise matrix of phase {phase_id}, board {tag}",
            queue=STATS,
        )
        return True
    except Exception as e:  # noqa: BLE001 — the answer says "being computed" and asks again
        log.warning("pairwise matrix of phase %s not enqueued (%s: %s)", phase_id, type(e), e)
        return False


def freeze(settings, phase_id: int, version: int, sha256: str, board, matrices: dict) -> None:
    """Write a published version's matrix (publication calls this; a failure is logged, never
    the publication's: the version's matrix then answers that it was not kept)."""
    if "p" not in matrices:
        return
    try:
        write(settings, published_path(settings.home, phase_id, version, sha256, board), matrices)
    except Exception as e:  # noqa: BLE001
        log.warning(
            "pairwise matrix of phase %s version %s not written (%s: %s)",
            phase_id,
            version,
            type(e).__name__,
            e,
        )
