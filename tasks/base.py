"""What a task is: its metadata, submission format, metrics, subsets, importer and demo data, as
one declaration. Generic code (the scorer's families, the CLI, the server, the demo) reads these
fields and never branches on a task's id."""

from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass, field, replace
from typing import Callable

from tasks.catalogue import METRIC_LIST


@dataclass(frozen=True)
class Field:
    """One column of a submission file; `aliases` are other names it may have (e.g. the JSON Lines
    `score` of a CSV's `Pred_Score`)."""

    name: str
    kind: str  # "id", "label01", "float", "floats", "int"
    description: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubmissionFormat:
    """The shape of a submission: its columns, native format and a small example."""

    fields: tuple[Field, ...]
    native: str  # "jsonl" or "csv"
    example: str
    key: tuple[str, ...]  # the columns that identify a row
    optional: tuple[str, ...] = ()
    # what one file may weigh uncompressed (and on disk): enough for the task's largest valid file,
    # and no more, so that an invalid one costs bounded time and memory
    max_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class ImportOption:
    """One option of `palimpsest tasks import`: `flag` on the command line, `dest` the importer's
    keyword argument. `kind` is "path" (file or directory), "dir", "file", "int", "list" (comma
    separated) or "choice" (one of `choices`)."""

    flag: str
    dest: str
    kind: str
    help: str
    required: bool = False
    default: object = None
    range: tuple[int, int] | None = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Demo:
    """Synthetic data for the demo and the contract tests: `release` is "module:function",
    `(root: Path, size: int) -> dict`, writing a made-up release in the upstream layout under `root`
    and returning the importer's keyword arguments; `predictions` is "module:function",
    `(task, store, split, noise: float, rng: random.Random) -> (bytes, filename)`, a plausible
    submission (the gold with `noise`, 0 = perfect)."""

    release: str
    predictions: str


@dataclass(frozen=True)
class Reference:
    """A declared reference value shown beside the systems, e.g. a human ceiling: `value` of
    `metric` on `subset`, with its `source`. `value` None means not yet sourced (`note` says
    why)."""

    name: str
    subset: str
    metric: str
    value: float | None
    source: str
    note: str = ""
    split: str = ""  # the split whose boards show it ("cv": a 10-fold mean); "" for every board


@dataclass(frozen=True)
class CrossValidation:
    """A split holding every fold's test units (TRoTR's ten published folds), scored fold by fold.

    A submission names each unit's fold in `field` beside the task's key (the same instance may be
    in the test set of several folds); each fold is scored as the split would be, and the result
    is the mean over the folds with their standard deviation (population, `np.std`, as the TRoTR
    authors' `aggregate_TRiC_statistics.py` takes it), each fold's scores kept beside them."""

    split: str = "cv"
    # the submission's fold column; "" where the folds partition the units (Loci Similes' queries:
    # each in one fold's test set, its fold among the split's inputs) and the file has none
    field: str = "fold"
    folds: int = 10  # the protocol's folds; an import records the folds its release holds


@dataclass(frozen=True)
class Slice:
    """A subset that is not a group: the units (of `group`, or of every group when "") whose gold
    row has `field` equal to `equals` (STR-2022's pairs of one source, SwissGov-RSD's documents of
    one annotator in one language pair). It has its own column like a group; `macro` never
    averages it (the groups alone make the macro), and a submission's coverage is its groups'."""

    subset: str
    field: str
    equals: str
    group: str = ""

    def holds(self, row: dict, group_field: str) -> bool:
        """Whether a gold row is one of the slice's units."""
        if self.group and row.get(group_field) != self.group:
            return False
        v = row.get(self.field)
        return v is not None and str(v) == self.equals


@dataclass(frozen=True)
class PaperRow:
    """A published system's results shown as an unranked row of the boards on `split` (e.g. the
    authors' per-fold figures on a cross-validated board): `values` maps board column keys
    ("all/spearman", "all/spearman@fold3", ...) to the published figures."""

    team: str
    method: str
    split: str
    values: tuple[tuple[str, float], ...]
    source: str
    note: str = ""


AGGREGATES = ("all", "macro")
"""Subsets computed over the others: `all` pools every unit, `macro` averages the groups."""
# the splits whose gold is hidden unless a task declares otherwise (`Task.hidden_splits`)
HIDDEN_SPLITS = ("test",)


@dataclass(frozen=True)
class Task:
    """A shared task as participants and organizers see it.

    `kind` names the scorer family in `scorer.families` that validates and scores it;
    `primary` is (subset, metric) and `greater_is_better` its direction. `metrics` name entries
    of the registry in `scorer.metrics`. `subsets` are groups of units (a unit's group is its
    `group_field` in the inputs and gold: TRiC's `oov`/`iov`, a language, a language pair) and the
    aggregates `all` and `macro`; with `partial_groups` a submission may leave out whole groups.
    `importer` is "module:function", called as `(task, store=..., **options)`.
    """

    id: str
    version: int
    title: str
    description: str
    citation: str
    licence: str
    source: str
    kind: str
    format: SubmissionFormat
    metrics: tuple[str, ...]
    subsets: tuple[str, ...]
    primary: tuple[str, str]
    greater_is_better: bool
    splits: tuple[str, ...]
    importer: str
    import_help: str
    secondary: tuple[tuple[str, str, bool], ...] = field(default=())
    import_options: tuple[ImportOption, ...] = ()
    group_field: str = "subset"
    group_name: str = "subset"  # what a group is called in messages: "language pair", "language"
    partial_groups: bool = False
    unit: str = ""  # what a unit is called in messages (default: from `kind`)
    gold_value: str = ""  # the gold's value field (default: `label` for instances, else `score`)
    demo: Demo | None = None
    references: tuple[Reference, ...] = ()
    # the few columns ("subset/metric") a board shows beside the primary one; the rest are a click
    # away
    key_columns: tuple[str, ...] = field(default=())
    # "module:function" computing the annotators' agreement from a release (`palimpsest agreement`)
    agreement: str = ""
    # "module:function" turning that agreement (as the import recorded it) into the board's human
    # rows
    agreement_rows: str = ""
    # "module:function" fitting the Bayesian agreement model on a release (`agreement --bayes`)
    agreement_bayes: str = ""
    # a split scored fold by fold (TRoTR's protocol), or None
    cross_validation: CrossValidation | None = None
    # what its phases' published rankings are computed on where the split has a private part:
    # "private" (that part), or "whole" (the whole split, as the task's own ranking was: STR's
    # SemEval-2024 ranked each language on its whole test set); a phase keeps what it was made with
    published_on: str = "private"
    # published systems' results, shown unranked beside the baselines on their split's boards
    paper_rows: tuple[PaperRow, ...] = ()
    # links: the depths k at which a scored run is also cut and scored as a set of links
    cut_at: tuple[int, ...] = ()
    # subsets by another field of the gold than the group's (a source, an annotator)
    slices: tuple[Slice, ...] = ()
    # "module:function" giving the boards of a phase from what the import found, and the facts
    # their filters ask: `(task, manifest, phase_name, split) -> {"boards": [...], "facts": [...]}`
    # (STR: each track's languages, `tasks.semrel:track_boards`); a declared phase's boards win
    import_boards: str = ""
    # the boards each declared phase has beside its default one: (phase name, its boards as the
    # JSON of tasks.bundle_models.BoardSpec), recorded on the phase when it is made
    phase_boards: tuple[tuple[str, str], ...] = ()
    # the splits whose gold has a private part: never downloadable, scored on a public part only
    # until publication
    hidden_splits: tuple[str, ...] = HIDDEN_SPLITS

    @property
    def primary_metric(self) -> str:
        return self.primary[1]

    @property
    def primary_subset(self) -> str:
        return self.primary[0]

    @property
    def groups(self) -> tuple[str, ...]:
        """The subsets that group units (every declared subset but the aggregates and the
        slices)."""
        sliced = {sl.subset for sl in self.slices}
        return tuple(s for s in self.subsets if s not in AGGREGATES and s not in sliced)

    def slice_of(self, subset: str) -> "Slice | None":
        """The declared slice named `subset`, or None (a group or an aggregate)."""
        return next((sl for sl in self.slices if sl.subset == subset), None)

    @property
    def unit_name(self) -> str:
        return self.unit or self.kind.rstrip("s")

    @property
    def gold_field(self) -> str:
        return self.gold_value or ("label" if self.kind == "instances" else "score")

    def boards_of_phase(self, name: str) -> list[dict]:
        """The boards the task declares for its phase `name` (none: the default board only)."""
        for phase, text in self.phase_boards:
            if phase == name:
                return json.loads(text)
        return []

    def is_cross_validated(self, split: str) -> bool:
        """Whether `split` is this task's cross-validated split (scored fold by fold)."""
        return self.cross_validation is not None and split == self.cross_validation.split

    def has_private_part(self, split: str) -> bool:
        """Whether `split`'s gold is hidden: phases on it score with a public and a private part."""
        return split in self.hidden_splits

    def for_split(self, split: str) -> "Task":
        """The task as a submission on `split` sees it: on the cross-validated split, the fold
        field comes first and is part of the key (`fold` + `instanceID` name a unit)."""
        if self.is_cross_validated(split) and self.cross_validation.field:
            return _for_split(self, split)
        return self  # folds that partition the units (`field` ""): the file is the same

    def metric_direction(self, metric: str) -> bool:
        """True when a larger value of `metric` is better."""
        return metric not in LOWER_IS_BETTER


@functools.lru_cache(maxsize=64)
def _for_split(task: Task, split: str) -> Task:
    cv = task.cross_validation
    fmt = task.format
    fold = Field(cv.field, "id", f"the fold (1-{cv.folds}) whose test set the row answers for")
    example = (
        "".join(
            json.dumps({cv.field: f, **json.loads(line)}) + "\n"
            for f, line in zip((1, 2), fmt.example.splitlines(), strict=False)
        )
        if fmt.native == "jsonl"
        else "".join(
            f"{cv.field if i == 0 else (i - 1) % 2 + 1},{line}\n"
            for i, line in enumerate(fmt.example.splitlines())
        )
    )
    return replace(
        task,
        format=replace(
            fmt, fields=(fold,) + fmt.fields, key=(cv.field,) + fmt.key, example=example
        ),
    )


def unit_id(row: dict, key: tuple[str, ...]) -> str:
    """The id of a unit named by the columns `key`: the key itself, or for a composite key (a fold
    and an instance) the columns joined by "/" ("3/pair_0")."""
    if len(key) == 1:
        return row[key[0]]
    return "/".join(str(row[k]) for k in key)


LOWER_IS_BETTER = frozenset(m.name for m in METRIC_LIST if m.greater_is_better is False)
"""smr, fpr, fnr, granularity: as the catalogue declares them."""

Importer = Callable[..., dict]


def resolve(spec: str) -> Callable:
    """The function a declaration names as "module:function"."""
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"expected 'module:function', found {spec!r}")
    return getattr(importlib.import_module(module), name)
