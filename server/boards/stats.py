"""A board's statistics: bootstrap intervals, rank ranges, significance and clusters, computed in
the worker and read by the pages.

What is kept where, under the data directory's `stats/`, and, on a site with an object store, in
the store under the same keys (the data directory then a cache of it: a web process or a worker on
another machine, with an empty data directory of its own, reads what any worker wrote):

- `units/<submission>-<attempt>.npz`: the per-unit predictions the bootstrap resamples
  (`scorer.bootstrap.unit_arrays`), written by the scoring job from the file it has just parsed.
  Re-parsing the upload instead would cost about a second per SwissGov-RSD file on every board
  change (a 50-row board: most of the 30 s budget); the arrays load in milliseconds. A submission
  scored before they existed is re-parsed once, in the worker, and its arrays written then.
- `samples/<part key>/<submission>-<attempt>.npy`: that run's B resampled primary scores on a part
  of the gold. The part key holds everything the values depend on (task, split, the part's units,
  the seed, B, the gold and scorer versions), so a new submission costs only its own row.
- `boards/<phase>-<version>.json`: the statistics of the public board at one version of the phase
  (its revision, freeze, publication and provenance: the key of the page cache), written once.

`compute_board_stats(phase_id)` runs as a queued job on the `stats` queue: each scoring job asks
for one after recording its scores, and so do the pages when a board version has no statistics
yet; requests coalesce (a burst of scores costs one or two jobs), and a request never computes any.
A published snapshot carries its statistics frozen with it (`for_snapshot`, from
`publication.publish`).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
from sqlmodel import Session

from scorer import validate_file
from scorer.bootstrap import Bootstrap, _group_mean, intervals, rank_statistics, unit_arrays
from scorer.overall import boards_won, combine
from scorer.ranksets import rank_sets, top_set
from scorer.release import Rule, _round_to, resolution
from server import objectstore
from server.boards import ladder
from server.boards import leaderboard as lb
from server.boards.leaderboard import STALE_NOTE
from server.db import get_engine
from server.domain import boards
from server.domain.partitions import bootstrap_seed, draw, phase_fingerprint
from server.domain.provenance import current_provenance
from server.jobs.queue import STATS, connect, enqueue_once
from server.models import GoldPartition, Phase, Submission
from server.settings import get_settings
from tasks import catalogue, get_task
from tasks.store import TaskStore

log = logging.getLogger(__name__)

ALPHA = 0.05
METHOD = (
    "95 % percentile intervals from B paired bootstrap resamples of the task's unit; rank "
    "ranges from the same resamples; pairwise two-sided p-values of the paired difference (its "
    "bootstrap standard error, normal approximation) with Holm's correction; a cluster holds the "
    "systems not significantly different (alpha 0.05) from its best"
)
UNIT_NAMES = {f.name: f.resampled for f in catalogue.FAMILY_LIST}


def stats_dir(home) -> Path:
    return Path(home) / "stats"


def _rel(path: Path, home) -> str:
    return Path(path).relative_to(Path(home)).as_posix()


def _share(settings, path: Path, data: bytes | None) -> None:
    """Write a file of `stats/` locally (`data`; None: the file is already in place) and, on a
    site with a store, into the store too."""
    if data is not None:
        _atomic_write(path, data)
    store = objectstore.store_for(settings)
    if store is not None:
        try:
            store.put_file(_rel(path, settings.home), path)
        except BaseException:
            # not here either, then: a file only this machine has would pass for shared (a board
            # version "ready" here that the web never sees); the job is retried
            path.unlink(missing_ok=True)
            raise


def _shared(settings, path: Path, *, fetch: bool = True) -> Path | None:
    """A file of `stats/` here, fetched from the store when another machine wrote it; None when
    it is in neither (or the store does not answer: the caller computes, or waits)."""
    if path.is_file():
        return path
    store = objectstore.store_for(settings) if fetch else None
    if store is None:
        return None
    try:
        return store.download(_rel(path, settings.home), path)
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 — a store that does not answer: "being computed"
        log.warning("statistics file %s not fetched (%s)", path.name, e)
        return None


def _atomic_write(path: Path, data) -> None:
    """`data` (bytes, or an iterable of byte pieces written as they come) whole at `path` or not
    at all: a temporary file beside it, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in (data,) if isinstance(data, (bytes, bytearray)) else data:
                f.write(piece)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- per-unit predictions


def units_path(home, submission_id: int, attempt: int) -> Path:
    return stats_dir(home) / "units" / f"{int(submission_id)}-{int(attempt)}.npz"


def save_units(
    home, submission_id: int, attempt: int, task, store, split: str, parsed, settings=None
) -> None:
    """Keep what the bootstrap needs of a scored file (the scoring job calls this); with
    `settings` of a site with an object store, in the store too."""
    buf = io.BytesIO()
    np.savez(buf, **unit_arrays(task, store, split, parsed))
    p = units_path(home, submission_id, attempt)
    if settings is None:
        _atomic_write(p, buf.getvalue())
    else:
        _share(settings, p, buf.getvalue())


def load_units(settings, task, split: str, submission_id: int, attempt: int) -> dict:
    """The per-unit arrays of a scored run, re-parsed from its upload (and kept) if absent."""
    p = units_path(settings.home, submission_id, attempt)
    if _shared(settings, p) is None:
        with Session(get_engine(settings.sqlalchemy_url())) as s:
            key = s.get(Submission, submission_id).storage_key
        v = validate_file(
            task.id,
            objectstore.local_upload(settings, key),  # fetched from the store when not here
            split,
            settings.home,
            settings.limits(),
        )
        save_units(
            settings.home,
            submission_id,
            attempt,
            task,
            TaskStore(task.id, settings.home),
            split,
            v.parsed,
            settings=settings,
        )
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


# ----------------------------------------------------------------------------- a part of the gold


class Part:
    """One part of a phase's gold with its resamples: the units, the seed, B and the matrix of
    multiplicities shared by every row."""

    _cache: ClassVar[dict[str, Part]] = {}

    def __init__(
        self,
        settings,
        task,
        split: str,
        part: str,
        units: frozenset | None,
        seed: int,
        B: int,
        provenance: dict | None,
    ):
        self.task, self.split, self.part, self.seed, self.B = task, split, part, int(seed), int(B)
        self.boot = Bootstrap(task, TaskStore(task.id, settings.home), split, units)
        digest = hashlib.sha256("\n".join(self.boot.units).encode("utf-8")).hexdigest()
        key = [task.id, task.version, split, part, digest, self.seed, self.B, provenance]
        if self.boot.resampling != "units":
            # another scheme draws other resamples from the same seed; the ordinary one stays out
            # of the key, so that the samples kept before the schemes had names stay valid
            key.append(self.boot.resampling)
        ident = json.dumps(key, sort_keys=True)
        self.key = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:20]
        self.W = self.boot.weights(self.B, self.seed)
        self.units_of = units
        self._boots: dict[tuple[str, str], Bootstrap] = {tuple(task.primary): self.boot}
        self._arrays: dict[tuple[int, int], dict] = {}  # per-unit predictions read in this job

    def boot_of(self, settings, value: tuple[str, str]) -> Bootstrap:
        """The resampling of another value a board ranks by (subset, metric): its own masks, the
        same units, resampled by this part's one matrix `W` (a board never draws its own)."""
        value = tuple(value)
        got = self._boots.get(value)
        if got is None:
            got = Bootstrap(
                self.task, TaskStore(self.task.id, settings.home), self.split, self.units_of, value
            )
            if got.units != self.boot.units:  # pragma: no cover - one gold, one order of units
                raise ValueError("a board's units differ from the phase's")
            self._boots[value] = got
        return got

    @classmethod
    def get(cls, settings, engine, task, phase, part: str) -> Part:
        units = _gold_part(engine, phase, settings, part)
        seed = bootstrap_seed(engine, phase.id)
        fp = phase_fingerprint(engine, phase.id, settings.secret_key) if part != "all" else None
        prov = current_provenance(task, phase.split, settings.home)
        ck = json.dumps(
            [
                str(settings.home),
                task.id,
                phase.split,
                part,
                seed,
                settings.bootstrap_samples,
                prov,
                hashlib.sha256("\n".join(sorted(units or ())).encode()).hexdigest(),
            ]
        )
        hit = cls._cache.get(ck)
        if hit is None:
            if len(cls._cache) > 16:
                cls._cache.clear()
            hit = cls._cache[ck] = cls(
                settings, task, phase.split, part, units, seed, settings.bootstrap_samples, prov
            )
        hit.fingerprint = fp
        return hit

    def samples_path(
        self, home, submission_id: int, attempt: int, value: tuple[str, str] | None = None
    ) -> Path:
        base = stats_dir(home) / "samples" / self.key
        if value is not None and tuple(value) != tuple(self.task.primary):
            # another value a board ranks by: beside the primary's, under a digest of its name
            tag = hashlib.sha256("/".join(value).encode("utf-8")).hexdigest()[:12]
            base = base / f"v-{tag}"
        return base / f"{int(submission_id)}-{int(attempt)}.npy"

    def samples(
        self,
        settings,
        submission_id: int,
        attempt: int,
        *,
        compute: bool = True,
        value: tuple[str, str] | None = None,
    ) -> np.ndarray | None:
        """The run's B resampled scores of `value` (default: the primary) on this part (computed
        once, then read); the run's predictions are read once per job, whatever the boards."""
        if value is not None and len(value) == 3:
            return self._mean_samples(settings, submission_id, attempt, value, compute)
        p = self.samples_path(settings.home, submission_id, attempt, value)
        if _shared(settings, p) is not None:
            return np.load(p)
        if not compute:
            return None
        ak = (int(submission_id), int(attempt))
        arrays = self._arrays.get(ak)
        if arrays is None:
            if len(self._arrays) > 256:
                self._arrays.clear()
            arrays = self._arrays[ak] = load_units(
                settings, self.task, self.split, submission_id, attempt
            )
        boot = self.boot if value is None else self.boot_of(settings, value)
        boot.group_samples = None
        x = boot.samples(arrays, self.W)
        if boot.group_samples and boot.subset == "macro":
            # a macro's groups were resampled on the way (each within its stratum, with this
            # part's matrix): kept as the samples of the boards ranked by one group, which then
            # cost nothing more (bit for bit what they would compute)
            for group, g in boot.group_samples.items():
                q = self.samples_path(settings.home, submission_id, attempt, (group, boot.metric))
                if not q.is_file():
                    buf = io.BytesIO()
                    np.save(buf, g)
                    _share(settings, q, buf.getvalue())
        buf = io.BytesIO()
        np.save(buf, x)
        _share(settings, p, buf.getvalue())
        return x

    def _mean_samples(self, settings, submission_id, attempt, value, compute) -> np.ndarray | None:
        """A board's own mean over groups (`value`: subset, metric, groups) on each resample: the
        mean of the groups' resampled values (each kept as a language's board's, from this part's
        one matrix) over the groups the resample holds, as `macro` is taken."""
        _, metric, over = value
        per, held = {}, {}
        for g in over:
            x = self.samples(settings, submission_id, attempt, compute=compute, value=(g, metric))
            if x is None:
                return None
            masks = self.boot_of(settings, (g, metric)).masks
            if g not in masks:  # a cross-validated split: its masks are the folds
                raise ValueError("a mean over groups has no bootstrap on a cross-validated split")
            per[g], held[g] = x, self.W[:, masks[g]].sum(axis=1)
        return _group_mean(per, held, self.B)


def value_key(col) -> tuple:
    """The value a board's column resamples: (subset, metric), or (subset, metric, groups) for a
    board's own mean over groups."""
    over = tuple(getattr(col, "over", None) or ())
    return (col.subset, col.metric, over) if over else (col.subset, col.metric)


# ----------------------------------------------------------------------------- a board


class NoPartition(LookupError):
    """A phase with a hidden part whose partition was never drawn: nothing was scored on it."""


def _gold_part(engine, phase, settings, part: str) -> frozenset | None:
    """The units of a part of the phase's gold, reading (never drawing) its partition: this runs
    inside publication's transaction too."""
    if part == "all":
        return None
    with Session(engine) as s:
        pid = s.get(Phase, phase.id).partition_id
        gp = s.get(GoldPartition, pid) if pid is not None else None
    if gp is None:
        raise NoPartition(f"phase {phase.id} has no gold partition yet")
    public, private = draw(gp, settings.home)
    return frozenset(public if part == "public" else private)


def _stat_rows(board):
    """The rows that get an interval (scored, current) and, among them, the ranked ones."""
    prim = board.primary.key
    rows = [
        r
        for r in board.rows
        if r.attempt is not None
        and r.values.get(prim) is not None
        and r.note != STALE_NOTE
        and r.row_type in ("team", "baseline")
    ]
    return rows, [r for r in rows if r.rank is not None]


def statistics(
    settings,
    part: Part,
    board,
    *,
    value_of=None,
    full: bool | None = None,
    matrices: dict | None = None,
) -> dict:
    """Intervals for every current row, rank ranges, clusters and the p-values between neighbours
    and against each cluster's head for the ranked ones, from one matrix of the rows' resampled
    scores; the full pairwise matrices (`p`, `p_holm`, in the order of `order`) only on a small
    board or when `full` asks (see `scorer.bootstrap.rank_statistics`). `matrices`, a dict, gets
    the ranked rows' labels (`teams`) and both full matrices as arrays (`p`, `p_holm`) whatever the
    board's size: what `server.boards.pairwise` writes as the board's matrix file."""
    t0 = time.perf_counter()
    prim = board.primary
    overall = getattr(board, "overall", None)
    if overall:
        rows, ranked, M, points = _overall_matrix(settings, part, board, value_of)
        value_of = points.__getitem__
    else:
        value_of = value_of or (lambda r: r.values[prim.key])
        rows, ranked = _stat_rows(board)
    out_rows: dict[str, dict] = {}
    order, teams, p, p_holm, neighbours, top_sets = [], [], None, None, None, {}
    if rows:
        at = {r.submission_id: i for i, r in enumerate(rows)}
        if not overall:
            value = value_key(prim)
            M = np.vstack(
                [part.samples(settings, r.submission_id, r.attempt, value=value) for r in rows]
            )
        for r, ci in zip(rows, intervals(M, ALPHA), strict=True):
            out_rows[str(r.submission_id)] = {"ci": ci}
        if ranked:
            idx = [at[r.submission_id] for r in ranked]
            st = rank_statistics(
                M[idx],
                np.array([value_of(r) for r in ranked], dtype=np.float64),
                prim.greater_is_better,
                ALPHA,
                full=full,
                arrays=matrices is not None,
            )
            sets = rank_sets(
                M[idx], np.array([value_of(r) for r in ranked]), prim.greater_is_better, ALPHA
            )
            for i, r in enumerate(ranked):
                out_rows[str(r.submission_id)].update(
                    rank_range=st["rank_range"][i],
                    cluster=st["cluster"][i],
                    rank_set=_rank_set(sets["marginal"][i], "marginal", sets["method"]),
                    rank_set_simultaneous=_rank_set(
                        sets["simultaneous"][i], "simultaneous", sets["method"]
                    ),
                )
            top_sets = {
                str(k): [ranked[j].submission_id for j in top_set(sets["simultaneous"], k)]
                for k in TOP_SETS
                if k < len(ranked)
            }
            order = [r.submission_id for r in ranked]
            teams = [r.team for r in ranked]
            neighbours = {
                k: [_round1(st[k][i]) for i in range(len(ranked))]
                for k in ("p_next", "p_holm_next", "p_head", "p_holm_head")
            }
            if "p" in st:
                p, p_holm = _round(st["p"]), _round(st["p_holm"])
            if matrices is not None:
                matrices.update(teams=teams, p=st["p_array"], p_holm=st["p_holm_array"])
    if not overall and ladder.is_paired(getattr(board, "release_rule", None)):
        _release_paired(settings, part, board, out_rows)
    return {
        "part": part.part,
        "method": METHOD + (OVERALL_METHOD.format(**overall) if overall else ""),
        "unit": (
            "instances (each drawn with its copies in every fold)"
            if part.boot.clusters is not None
            else UNIT_NAMES.get(part.task.kind, "units")
        ),
        "B": part.B,
        "seed": part.seed,
        "partition": getattr(part, "fingerprint", None),
        "alpha": ALPHA,
        "metric": prim.key,
        "rows": out_rows,
        "order": order,
        "teams": teams,
        "p": p,
        "p_holm": p_holm,
        "neighbours": neighbours,
        "top_sets": top_sets,
        "boards_won": points.boards_won if overall else None,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _release_paired(settings, part: Part, board, out_rows: dict) -> None:
    """The parameter-free ladder's released value of each team row (server.boards.ladder), from
    the resamples of the team's runs on this part (each computed once, then read), as `released`
    beside the row's interval; attached onto the row in place of its value."""
    prim = board.primary
    value, sgn = value_key(prim), 1.0 if prim.greater_is_better else -1.0

    def samples_of(sid: int, attempt: int) -> np.ndarray:
        return sgn * part.samples(settings, sid, attempt, value=value)

    for r in board.rows:
        if r.row_type == "team" and r.ladder_runs:
            got = ladder.release(r.ladder_runs, samples_of, len(part.boot.units))
            out_rows.setdefault(str(r.submission_id), {})["released"] = (
                None if got is None else sgn * got
            )


OVERALL_METHOD = (
    "; overall: the rule ({rule}) applied to the boards' values on each of the same resamples "
    "(one draw of the gold for every board), a team missing a board {missing}; the boards "
    "themselves are not resampled"
)


def _overall_matrix(settings, part: Part, board, value_of=None):
    """An overall board's rows with a value, its ranked ones, their resampled overall values and
    their point values (by row): each component board's ranked rows' resampled values (the
    phase's one matrix of resamples) combined by the board's rule on every resample
    (scorer.overall). `value_of`: a component row's point value (default: its board's value)."""
    o = board.overall
    comps = board._components
    team_rows = [r for r in board.rows if r.row_type == "team"]
    K, n = len(comps), len(team_rows)
    X = np.full((K, n, part.B), np.nan)
    V = np.full((K, n), np.nan)
    present = np.zeros((K, n), dtype=bool)
    for k, c in enumerate(comps):
        on = {r.team_id: r for r in c.rows if r.row_type == "team" and r.rank is not None}
        value = value_key(c.primary)
        for i, row in enumerate(team_rows):
            r = on.get(row.team_id)
            if r is None:
                continue
            v = value_of(r) if value_of is not None else r.values[c.primary.key]
            if v is None or v != v:
                continue
            present[k, i] = True
            V[k, i] = v
            X[k, i] = part.samples(settings, r.submission_id, r.attempt, value=value)
    gib = [c.greater_is_better for c in board.columns[1:]]
    pts = combine(V, present, gib, o["rule"], o["missing"]) if n else np.zeros(0)
    S = combine(X, present, gib, o["rule"], o["missing"]) if n else np.zeros((0, part.B))
    keep = [i for i in range(n) if np.isfinite(pts[i])]
    rows = [team_rows[i] for i in keep]
    ranked = [r for r in rows if r.rank is not None]
    points = _ById({id(team_rows[i]): float(pts[i]) for i in keep})
    if len(ranked) <= BOARDS_WON_ROWS:
        # per pair of ranked rows: on how many boards one is better (family-wise, TACL 2017)
        at = [team_rows.index(r) for r in ranked]
        points.boards_won = {
            "K": K,
            "alpha": ALPHA,
            "counts": boards_won(V[:, at], X[:, at], present[:, at], gib, ALPHA).tolist(),
        }
    return rows, ranked, S[keep], points


BOARDS_WON_ROWS = 60
"""The most ranked rows of an overall board whose pairs get their count of boards won (the
significance page's matrix, as its full p-value matrix)."""


class _ById(dict):
    """Point values by row object (and, on an overall board, `boards_won`)."""

    boards_won = None

    def __getitem__(self, row):
        return dict.__getitem__(self, id(row))


TOP_SETS = (1, 3)
"""The tau of the top-tau sets a board's statistics carry (`top_sets`: the rows that may be among
the tau best, with the simultaneous sets' coverage)."""


def _rank_set(bounds, kind: str, method: str) -> dict:
    """A row's rank set as the board's JSON carries it."""
    return {
        "low": bounds[0],
        "high": bounds[1],
        "coverage": round(1.0 - ALPHA, 6),
        "kind": kind,
        "method": method,
    }


def _board_statistics(settings, part: Part, board) -> dict:
    """A declared board's statistics, or why it has none (a ranking value the bootstrap does
    not resample, e.g. a count)."""
    try:
        return statistics(settings, part, board)
    except ValueError as e:
        return {"part": part.part, "metric": board.primary.key, "rows": {}, "unavailable": str(e)}


def board_body(body: dict | None, name: str | None) -> dict | None:
    """The statistics of one board of a phase's statistics file (None: the default board's)."""
    if body is None or name in (None, "", "main"):
        return body
    got = (body.get("boards") or {}).get(name)
    return None if got is None else {**got, "version": body.get("version")}


def _round1(x):
    return None if x is None else round(float(x), 6)


def _round(m) -> list:
    return [[round(float(x), 6) for x in row] for row in m]


def board_path(home, phase_id: int, version: str) -> Path:
    return stats_dir(home) / "boards" / f"{int(phase_id)}-{version}.json"


def read_board_stats(settings, phase_id: int, version: str) -> dict | None:
    """The statistics of a board version, from this machine's data directory or the store."""
    p = _shared(settings, board_path(settings.home, phase_id, version))
    if p is None:
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def ready(settings, phase_id: int, version: str) -> bool:
    """Whether a worker has written the statistics of a board version (here or in the store: one
    found in the store is kept here, so it is asked once)."""
    return _shared(settings, board_path(settings.home, phase_id, version)) is not None


def phase_version(settings, engine, task, phase_id: int) -> str | None:
    """The phase's board version as the pages compute it (the key of their cache)."""
    for st in lb.phase_states(
        engine, task.id, provenance=lambda split: current_provenance(task, split, settings.home)
    ):
        if st.id == phase_id:
            return st.version
    return None


def part_of(board, phase) -> str:
    """The part of the gold a phase's public board is ranked on, as its statistics resample it."""
    if board.part == "private":
        return "private"
    if board.part == "whole":  # the whole split: every unit of the gold
        return "all"
    return "public" if phase.public_fraction < 1.0 else "all"


def job_start(phase_id: int, settings=None) -> tuple:
    """What a statistics job starts from: (settings, engine, the phase, its task, the phase's
    current board version or None). A worker that never scored the task fetches the store's
    files of it first: the board's version names their provenance."""
    settings = settings or get_settings()
    engine = get_engine(settings.sqlalchemy_url())
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        task = get_task(phase.task_id)
    objectstore.ensure_task(settings, task.id)
    return settings, engine, phase, task, phase_version(settings, engine, task, phase_id)


def compute_board_stats(phase_id: int, settings=None) -> dict:
    """Compute and keep the statistics of a phase's public board at its current version, and the
    samples of every part its runs were scored on (so that publication finds them ready)."""
    t0 = time.perf_counter()
    settings, engine, phase, task, version = job_start(phase_id, settings)
    if version is not None and ready(settings, phase_id, version):
        return {"phase": phase_id, "version": version, "cached": True}
    prov = current_provenance(task, phase.split, settings.home)
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        board = lb.build_board(
            s, task, phase, audience="public", include_closed=True, provenance=prov
        )
    part_name = part_of(board, phase)
    part = Part.get(settings, engine, task, phase, part_name)
    body = statistics(settings, part, board)
    # every declared board from the same part and its one matrix of resamples: a board adds its
    # rows' resampled values (each run's predictions read once) and its own ranking statistics
    declared = []
    with Session(engine, expire_on_commit=False) as s:
        phase = s.get(Phase, phase_id)
        for spec in boards.of_phase(phase):
            declared.append(
                lb.build_board(
                    s,
                    task,
                    phase,
                    audience="public",
                    include_closed=True,
                    provenance=prov,
                    board=spec,
                )
            )
    if declared:
        body["boards"] = {b.board: _board_statistics(settings, part, b) for b in declared}
    if phase.public_fraction < 1.0 and part_name == "public":
        # the private samples too, computed now in the worker, for the published snapshot
        private = Part.get(settings, engine, task, phase, _hidden_part(phase))
        for b in (board, *declared):
            if getattr(b, "overall", None):
                continue  # its boards' samples: the main board's or a declared one's
            value = value_key(b.primary)
            for r in _stat_rows(b)[0]:
                try:
                    private.samples(settings, r.submission_id, r.attempt, value=value)
                except ValueError:  # a value with no bootstrap: that board has no intervals
                    break
    body["version"] = version
    if version is not None and phase_version(settings, engine, task, phase_id) != version:
        # the board moved while this ran: these figures are not that version's; the change that
        # moved it asks for new ones (a score, or the page of the new version)
        return {"phase": phase_id, "version": version, "moved": True}
    if version is not None:
        _share(
            settings,
            board_path(settings.home, phase_id, version),
            json.dumps(body, separators=(",", ":")).encode("utf-8"),
        )
    log.info(
        "board statistics of phase %s (%s rows) in %.2f s",
        phase_id,
        len(body["rows"]),
        time.perf_counter() - t0,
    )
    return {
        "phase": phase_id,
        "version": version,
        "rows": len(body["rows"]),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def enqueue(settings, phase_id: int, conn=None) -> bool:
    """Ask a worker for a phase's board statistics. Requests coalesce: while a job for the phase
    waits in the queue it will read the latest version anyway, so nothing is added; while one runs
    (it may have read an earlier version) one follow-up is queued. False when Redis is away."""
    try:
        enqueue_once(
            conn or connect(settings),
            settings,
            "server.boards.stats.board_stats_job",
            f"stats-{int(phase_id)}",
            args=(int(phase_id),),
            description=f"board statistics of phase {phase_id}",
            queue=STATS,
        )
        return True
    except Exception as e:  # noqa: BLE001 — the page says "being computed" and asks again
        log.warning(
            "board statistics of phase %s not enqueued (%s: %s)", phase_id, type(e).__name__, e
        )
        return False


def board_stats_job(phase_id: int) -> dict:
    """The queued job."""
    return compute_board_stats(phase_id)


# ----------------------------------------------------------------------------- onto a board


PENDING_NOTE = "being computed"


def attach(board, body: dict | None, *, reason: str = "") -> None:
    """Put a statistics body onto a board's rows (by submission id); rows it does not cover get
    none, with the reason."""
    board.stats = body
    rows = (body or {}).get("rows", {})
    for r in board.rows:
        got = rows.get(str(r.submission_id))
        if got:
            r.ci, r.rank_range, r.cluster = got.get("ci"), got.get("rank_range"), got.get("cluster")
            r.rank_set = got.get("rank_set")
            r.rank_set_simultaneous = got.get("rank_set_simultaneous")
        elif r.row_type == "human":
            r.ci_note = "a reference figure: no interval"
        elif r.row_type == "paper":
            r.ci_note = "a published figure: no interval"
        elif body is not None and body.get("unavailable"):
            r.ci_note = f"no interval: {body['unavailable']}"
        elif body is not None:
            r.ci_note = (
                "no interval: not on the public board"
                if r.values.get(board.primary.key) is not None
                else "no score"
            )
        else:
            r.ci_note = reason
    if getattr(board, "release_rule", None) is not None:
        _released(board)


WITHHELD = "no interval on the live board: the phase's release rule shows released scores only"


def _released(board) -> None:
    """A live board under a release rule (scorer.release): `rounded` shows each team row's value
    rounded to the resolution of its interval (none until the interval is computed) and ranks by
    it; `ladder-paired` shows the value the statistics job released (server.boards.ladder; none
    until then, none on an overall board) and ranks by it; under any rule the intervals, rank
    ranges, rank sets, clusters and p-values (which would tell the exact scores) are withheld."""
    rule = Rule.parse(board.release_rule)
    prim = board.primary
    body_rows = (board.stats or {}).get("rows") or {}
    for r in board.rows:
        if r.row_type != "team":
            continue
        if rule.kind == ladder.KIND:
            # the statistics job's released value; an overall board has none (its boards' values
            # would tell their exact scores): shown at publication
            v = r.values.get(prim.key)
            shown = None
            if not getattr(board, "overall", None):
                shown = (body_rows.get(str(r.submission_id)) or {}).get("released")
            r.values = {c.key: None for c in board.columns} | {prim.key: shown}
            if v is not None and shown is None:
                r.why_empty = (
                    ladder.PENDING
                    if not getattr(board, "overall", None)
                    else "an overall board shows no value under the parameter-free ladder "
                    "before publication"
                )
            if lb.RELEASE_NOTE not in r.chosen_by:
                r.chosen_by = (r.chosen_by + "; " if r.chosen_by else "") + lb.RELEASE_NOTE
        elif rule.kind == "rounded":
            v, ci = r.values.get(prim.key), r.ci
            shown = None
            if v is not None and ci and None not in ci:
                shown = _round_to(v, resolution((ci[1] - ci[0]) / 2))
            r.values = {c.key: None for c in board.columns} | {prim.key: shown}
            if v is not None and shown is None:
                r.why_empty = "shown once its interval is computed (rounded to its resolution)"
            if lb.RELEASE_NOTE not in r.chosen_by:
                r.chosen_by = (r.chosen_by + "; " if r.chosen_by else "") + lb.RELEASE_NOTE
        r.ci = r.rank_range = r.cluster = r.rank_set = r.rank_set_simultaneous = None
        r.ci_note = WITHHELD
    if rule.kind in ("rounded", ladder.KIND):
        ranked = [r for r in board.rows if r.row_type == "team" and r.note in ("", "not public")]
        for r, rk in zip(
            ranked,
            lb._rank([r.values[prim.key] for r in ranked], prim.greater_is_better),
            strict=True,
        ):
            r.rank = rk
        gib = prim.greater_is_better
        board.rows.sort(
            key=lambda r: (
                r.values.get(prim.key) is None,
                -(r.values.get(prim.key) or 0.0) if gib else (r.values.get(prim.key) or 0.0),
                r.row_type != "team",
                r.submitted_at,
                r.submission_id or 0,
            )
        )
    if board.stats is not None:
        board.stats = {"part": board.stats.get("part"), "method": WITHHELD, "unavailable": WITHHELD}


def _hidden_part(phase) -> str:
    """The part of the gold whose samples the published snapshot resamples: the private part, or
    every unit for a phase that publishes on the whole split."""
    return "all" if phase.published_on == "whole" else "private"


def for_snapshot(settings, engine, task, phase, board, *, matrices: dict | None = None) -> dict:
    """The statistics frozen into a published snapshot: the private ranking's (or the whole
    gold's) and the public part's intervals beside them; samples the worker has not computed yet
    are computed here. `matrices`: see `statistics` (the ranking's, not the public part's)."""
    name = board.part if board.part == "private" else "all"
    gold_has_parts = phase.public_fraction < 1.0
    main = statistics(
        settings,
        Part.get(settings, engine, task, phase, name if gold_has_parts else "all"),
        board,
        matrices=matrices,
    )
    out = {"ranked": main}
    if gold_has_parts:
        pub = Part.get(settings, engine, task, phase, "public")
        out["public"] = statistics(
            settings,
            pub,
            board,
            value_of=lambda r: r.public_value if r.public_value is not None else np.nan,
        )
    return out
