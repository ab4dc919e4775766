"""The declared shape of a competition bundle's `competition.yaml` (pydantic models), and how a
bundle's task declaration becomes a `Task`.

A bundle is data only: no key names code (an importer, an agreement hook), so a bundle task's
`Task.importer` is always `tasks.bundle:import_declared`, which re-installs it from its files.
The server's fact-sheet field (`FactField`) is declared here, once, for the bundle and the API.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks import catalogue
from tasks.base import Task
from tasks.declared import task_from_declaration

# C0 controls but tab, newline and carriage return, and DEL (server.domain.bounds.CONTROL's set)
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
SLUG = r"^[a-z0-9][a-z0-9-]{0,63}$"
TASK_ID = r"^[a-z][a-z0-9-]{1,39}$"
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"
EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"

FIELD_KINDS = ("id", "label01", "float", "floats", "int")

# Families and metrics are declared once, in tasks.catalogue; these are views of it.
FAMILIES: tuple[str, ...] = tuple(catalogue.FAMILIES)
KNOWN_METRICS: tuple[str, ...] = tuple(catalogue.METRICS)
IR_CUTOFFS = catalogue.IR_CUTOFFS
# The files each family reads: the inputs a split must hold under these names, and the name its
# gold is installed under (gold/<split>/<name>; public/<split>/<name> too when it is not hidden).
REQUIRED_INPUTS = {f.name: f.inputs for f in catalogue.FAMILY_LIST}
GOLD_NAME = {f.name: f.gold for f in catalogue.FAMILY_LIST}


def _no_control(v: str | None) -> str | None:
    if v is not None and CONTROL.search(v):
        raise ValueError("control characters are not allowed")
    return v


class Spec(BaseModel):
    """Every part of a bundle refuses keys it does not declare (a typo, or code)."""

    # built when first used (a bundle read), not when the module loads: the server's answers
    # name one of these models (FactField), and a command that lists competitions reads no bundle
    model_config = ConfigDict(extra="forbid", defer_build=True)


# ----------------------------------------------------------------------------- fact sheets

FactKind = Literal["text", "long_text", "choice", "yes_no", "url"]
FACT_KEY = r"^[a-z][a-z0-9_]{0,39}$"


class FactRule(Spec):
    """A rule of a choice field (a track) the server checks: when the field answers one of
    `when`, the fact `fact` may not declare any of `forbid`, or may declare only values among
    `only` (an unanswered fact breaks an `only` rule), both checked at upload; or, with
    `forbid_board_subset`, may not declare the subset a board of that track ranks on: the run
    then stays off that board (checked where each board is built: the run is entered on the
    track's other boards). A text answer declares the items it lists, separated by commas; values
    compare without case. E.g. Track B forbids declaring training files with labels:
    `{when: [B], fact: training_files, forbid: [train]}`; Track C (cross-lingual) no labelled data
    in the language a board ranks: `{when: [C], fact: labelled_data, forbid_board_subset: true}`."""

    when: list[str] = Field(min_length=1, max_length=50)
    fact: str = Field(pattern=FACT_KEY)
    forbid: list[str] = Field(default_factory=list, max_length=200)
    only: list[str] = Field(default_factory=list, max_length=200)
    forbid_board_subset: bool = Field(
        False,
        description="The fact may not declare the subset a board filtered on this field ranks "
        "on (a language's board: the target language); the run stays off that board.",
    )
    message: str = Field("", max_length=300, description="Said with the refusal (why the rule).")

    _message = field_validator("message")(_no_control)

    @field_validator("forbid", "only")
    @classmethod
    def _values(cls, v):
        for x in v:
            if not x.strip() or len(x) > 200 or CONTROL.search(x) or "," in x:
                raise ValueError("a value is 1 to 200 characters, no comma or control character")
        return v

    @model_validator(mode="after")
    def _one_kind(self):
        if sum((bool(self.forbid), bool(self.only), self.forbid_board_subset)) != 1:
            raise ValueError(
                "a rule gives one of forbid, only or forbid_board_subset: true (one of them)"
            )
        return self


def board_subset_forbidden(fields, sheet: dict, board) -> str | None:
    """Why a run whose fact sheet is `sheet` stays off `board` (a BoardSpec filtered on a choice
    field) by a `forbid_board_subset` rule of that field, or None: e.g. "Track C: labelled_data
    declares eng". `fields`: the competition's fact fields (dicts)."""
    f = getattr(board, "filter", None)
    if f is None:
        return None
    answer = (sheet or {}).get(f.fact)
    field = next((x for x in fields or () if x.get("key") == f.fact), None)
    if field is None or answer is None:
        return None
    # a board's own mean over groups ranks on each of them
    ranked = [x.lower() for x in (board.ranking.over or [board.ranking.subset])]
    for r in field.get("rules") or ():
        if not r.get("forbid_board_subset") or str(answer) not in (r.get("when") or ()):
            continue
        declared = fact_items(sheet.get(r["fact"]))
        bad = [x for x in ranked if x in declared]
        if bad:
            return f"{field.get('label') or field['key']} {answer}: {r['fact']} declares {bad[0]}"
    return None


def board_lets_in(board, facts: dict | None, fields) -> bool:
    """Whether a run whose fact sheet is `facts` passes a declared board's filter, and the rules
    of the filter's field that depend on the board (`board_subset_forbidden`)."""
    f = board.filter
    if f is None:
        return True
    facts = facts or {}
    v = facts.get(f.fact)
    if v is None or str(v) not in f.equals:
        return False
    return board_subset_forbidden(fields, facts, board) is None


def fact_items(value) -> list[str]:
    """The values an answer declares, for a rule: a yes/no as yes or no, a text's comma-separated
    items, each stripped and lowercased."""
    if value is None or value == "":
        return []
    if isinstance(value, bool):
        return ["yes" if value else "no"]
    return [x.strip().lower() for x in str(value).split(",") if x.strip()]


def fact_rule_problems(fields) -> list[tuple[tuple, str]]:
    """What is wrong with the rules of a list of fact fields (FactField or dicts) against one
    another: (path, message) pairs, e.g. (("fact_fields", 0, "rules", 1, "fact"), "...")."""
    rows = [f.model_dump() if isinstance(f, BaseModel) else f for f in fields]
    by_key = {f.get("key"): f for f in rows}
    out: list[tuple[tuple, str]] = []
    for i, f in enumerate(rows):
        for j, r in enumerate(f.get("rules") or ()):
            at = ("fact_fields", i, "rules", j)
            other = by_key.get(r.get("fact"))
            if other is None or r.get("fact") == f.get("key"):
                known = ", ".join(k for k in by_key if k != f.get("key")) or "none"
                out.append((at + ("fact",), f"{r.get('fact')!r}: not another fact field ({known})"))
            elif other.get("kind") == "choice":
                bad = [
                    x
                    for x in (r.get("forbid") or []) + (r.get("only") or [])
                    if x not in other.get("choices", ())
                ]
                if bad:
                    out.append(
                        (
                            at + ("forbid" if r.get("forbid") else "only",),
                            f"{', '.join(map(repr, bad))} not among the choices of {other['key']}",
                        )
                    )
    return out


class FactField(Spec):
    """A field of the fact sheet a submission carries (an overview paper's questions)."""

    key: str = Field(pattern=FACT_KEY, json_schema_extra={"examples": ["affiliation"]})
    label: str = Field(min_length=1, max_length=200)
    kind: FactKind = "text"
    choices: list[str] = Field(
        default_factory=list, max_length=50, description="The allowed values of a choice."
    )
    required: bool = False
    phases: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="The phases where a required field is required (empty: every phase).",
    )
    help: str = Field("", max_length=500)
    rules: list[FactRule] = Field(
        default_factory=list,
        max_length=20,
        description="A choice field's rules, checked at upload (a track's: what a run of it may "
        "declare of another fact).",
    )

    _label = field_validator("label", "help")(_no_control)

    @model_validator(mode="after")
    def _choices(self):
        if self.kind == "choice" and not self.choices:
            raise ValueError("a choice field lists its choices")
        if self.kind != "choice" and self.choices:
            raise ValueError("only a choice field has choices")
        if self.rules and self.kind != "choice":
            raise ValueError("only a choice field (a track) has rules")
        for r in self.rules:
            bad = [x for x in r.when if x not in self.choices]
            if bad:
                raise ValueError(
                    f"rules: when {', '.join(map(repr, bad))} is not among the choices "
                    f"({', '.join(self.choices)})"
                )
        return self


# ----------------------------------------------------------------------------- competition parts


class PageSpec(Spec):
    """A page of the competition: its Markdown is the bundle file `file`."""

    slug: str = Field(pattern=SLUG)
    title: str = Field(min_length=1, max_length=200)
    file: str = Field(min_length=1, max_length=300)


class RegistrationSpec(Spec):
    approval: Literal["auto", "manual"] = "auto"
    allowed_domains: list[str] = Field(default_factory=list, max_length=100)
    data_public: bool = False


class TeamsSpec(Spec):
    size_cap: int = Field(0, ge=0, le=1000, description="0: no cap.")
    join_needs_captain: bool = False


class RoleSpec(Spec):
    email: str = Field(pattern=EMAIL, max_length=254)
    role: Literal["owner", "organizer", "assessor"]


# ----------------------------------------------------------------------------- tasks


class FieldSpec(Spec):
    """One column of a submission file."""

    name: str = Field(min_length=1, max_length=64)
    kind: Literal["id", "label01", "float", "floats", "int"]
    description: str = Field("", max_length=500)
    aliases: list[str] = Field(default_factory=list, max_length=10)


class FormatSpec(Spec):
    """What a submission looks like: its columns, native format, key and a small example."""

    fields: list[FieldSpec] = Field(min_length=2, max_length=20)
    native: Literal["jsonl", "csv"]
    key: list[str] = Field(min_length=1, max_length=3)
    optional: list[str] = Field(default_factory=list)
    max_bytes: int = Field(64 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024)
    example: str = Field(min_length=1, max_length=2000)

    @model_validator(mode="after")
    def _names(self):
        names = [f.name for f in self.fields]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"field(s) {', '.join(dup)} declared twice")
        for what, cols in (("key", self.key), ("optional", self.optional)):
            unknown = [c for c in cols if c not in names]
            if unknown:
                raise ValueError(
                    f"{what} names {', '.join(unknown)}, not among the fields {', '.join(names)}"
                )
        if all(n in self.key for n in names):
            raise ValueError("a submission needs a field beside its key (the predicted value)")
        return self


class PrimarySpec(Spec):
    subset: str = "all"
    metric: str


class SecondarySpec(Spec):
    subset: str
    metric: str
    greater_is_better: bool = True


class ReferenceSpec(Spec):
    """A declared reference value shown beside the systems (e.g. a human ceiling)."""

    name: str = Field(min_length=1, max_length=200)
    subset: str = "all"
    metric: str
    value: Optional[float] = None
    source: str = Field(min_length=1, max_length=1000)
    note: str = Field("", max_length=2000)
    split: str = ""


class SplitSpec(Spec):
    """A split's files, relative to the bundle's root: the public inputs and the gold. A split's
    gold is hidden (never downloadable, scored in public and private parts) unless `hidden` is
    false."""

    inputs: list[str] = Field(min_length=1, max_length=20)
    gold: Optional[str] = None
    hidden: bool = True
    publish_gold: Optional[bool] = Field(
        None,
        description="Whether the gold is published beside the inputs (default: when not hidden); "
        "false keeps the gold of a split that is not hidden on the server (a cross-validated "
        "split's answers).",
    )

    @model_validator(mode="after")
    def _published(self):
        if self.hidden and self.publish_gold:
            raise ValueError("a hidden split's gold is never published")
        return self


class CrossValidationSpec(Spec):
    """A split holding every fold's test units, scored fold by fold (a submission names each
    unit's fold in `field`; `field` "" where the folds partition the units, a links split's
    queries, their folds in the split's `folds.csv`); the result is the mean over the folds."""

    split: str = "cv"
    field: str = "fold"
    folds: int = Field(10, ge=2, le=100)


class SliceSpec(Spec):
    """A subset by another field of the gold than the group's: the units (of `group`, or of every
    group when empty) whose gold row has `field` equal to `equals`. Listed among `subsets` under
    `subset`; `macro` never averages it."""

    subset: str = Field(min_length=1, max_length=64)
    field: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    equals: str = Field(min_length=1, max_length=200)
    group: str = ""


class PaperRowSpec(Spec):
    """A published system's results, shown unranked on the boards of `split`: `values` maps board
    column keys ("all/spearman", "all/spearman@fold3") to the published figures."""

    team: str = Field(min_length=1, max_length=200)
    method: str = Field(min_length=1, max_length=200)
    split: str
    values: dict[str, float] = Field(min_length=1, max_length=200)
    source: str = Field(min_length=1, max_length=1000)
    note: str = Field("", max_length=2000)


BOARD_NAME = r"^[a-z0-9][a-z0-9-]{0,31}$"
MAIN_BOARD = "main"


class BoardValue(Spec):
    """A value a board shows: a declared metric on a declared subset; or, with `over`, the mean
    of the metric over those groups of the task (those the gold holds), named by `subset` (a name
    of the board's own, not a declared subset: e.g. `macro-a`, a track's languages). A run that
    leaves one of them out has no such mean: it is shown unranked, saying what it covers."""

    subset: str = Field("all", min_length=1, max_length=64)
    metric: str = Field(min_length=1, max_length=64)
    over: Optional[list[str]] = Field(
        None,
        max_length=100,
        description="The groups (e.g. languages) this value is the mean over; empty: a declared "
        "subset's value.",
    )

    @model_validator(mode="after")
    def _named_mean(self):
        if self.over:
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", self.subset):
                raise ValueError(
                    "a mean over groups is named by a slug (a-z, 0-9 and -, at most 32)"
                )
            dup = sorted({g for g in self.over if self.over.count(g) > 1})
            if dup:
                raise ValueError(f"over: {', '.join(dup)} named twice")
        return self


class BoardFilter(Spec):
    """The runs a board ranks: those whose fact sheet answers `fact` with one of `equals` (a
    track: `{fact: track, equals: [B]}`)."""

    fact: str = Field(pattern=FACT_KEY)
    equals: list[str] = Field(min_length=1, max_length=50)

    @field_validator("equals")
    @classmethod
    def _values(cls, v):
        for x in v:
            if not x or len(x) > 200 or CONTROL.search(x):
                raise ValueError("a value is 1 to 200 characters, no control characters")
        return v


def phase_release_rule(v):
    """A phase's release rule as given, checked (scorer.release names them): None, "exact",
    "ladder", "ladder-paired", "rounded" or {rule: ladder, eta}; a ValueError says what is
    wrong."""
    if v is None or v in ("exact", "ladder", "ladder-paired", "rounded"):
        return v
    if isinstance(v, dict) and v.get("rule", "ladder") == "ladder" and set(v) <= {"rule", "eta"}:
        eta = v.get("eta", 0.01)
        if isinstance(eta, (int, float)) and not isinstance(eta, bool) and 0 < eta < 1:
            return {"rule": "ladder", "eta": float(eta)}
    raise ValueError(
        'a phase\'s release rule is "exact", "ladder", "ladder-paired", "rounded" or {rule: '
        "ladder, eta: a number in (0, 1)}"
    )


class OverallSpec(Spec):
    """An overall ranking over some of the phase's boards (scorer/overall.py, docs/boards.md):
    each team's values on `boards` combined by `rule`, with `missing` saying where a team absent
    from one of them stands; its intervals and rank sets carry the boards' own resamples through
    the rule."""

    boards: list[str] = Field(
        min_length=2,
        max_length=40,
        description='The boards combined: declared boards of the phase, or "main".',
    )
    rule: Literal["mean", "borda", "mean-rank"] = Field(
        "mean",
        description="mean: of the boards' values (one direction); borda: the teams beaten on "
        "each board, summed; mean-rank: the mean of the team's ranks on the boards.",
    )
    missing: Literal["leave-out", "unranked", "last"] = Field(
        "unranked",
        description="A team absent from one of the boards: no row (leave-out), a row without a "
        "rank (unranked), or ranked last on each board it misses (last).",
    )

    @field_validator("boards")
    @classmethod
    def _twice(cls, v):
        dup = sorted({b for b in v if v.count(b) > 1})
        if dup:
            raise ValueError(f"board(s) {', '.join(dup)} named twice")
        return v


class BoardSpec(Spec):
    """A board of a phase beside its default one (`main`, ranked by the task's primary value):
    ranked by `ranking`, with the extra `columns`, over the runs `filter` lets in (every run when
    absent) that have the ranking value; or, with `overall` instead of `ranking`, an overall
    ranking over other boards of the phase."""

    name: str = Field(
        pattern=BOARD_NAME,
        description='A slug, unique in the phase; not "main" (the default board).',
        json_schema_extra={"examples": ["prose", "track-b"]},
    )
    title: str = Field(min_length=1, max_length=200)
    ranking: Optional[BoardValue] = None
    columns: list[BoardValue] = Field(default_factory=list, max_length=30)
    filter: Optional[BoardFilter] = None
    overall: Optional[OverallSpec] = None

    _title = field_validator("title")(_no_control)

    @model_validator(mode="after")
    def _ranking_or_overall(self):
        if (self.ranking is None) == (self.overall is None):
            raise ValueError("a board declares either `ranking` or `overall`")
        if self.overall is not None and (self.columns or self.filter is not None):
            raise ValueError("an overall board has no `columns` or `filter` of its own")
        return self

    @field_validator("name")
    @classmethod
    def _not_main(cls, v):
        if v == MAIN_BOARD:
            raise ValueError('"main" is the phase\'s default board: name another one')
        return v


class PhaseSpec(Spec):
    name: str = Field(min_length=1, max_length=32)
    split: str
    opens: Optional[datetime] = None
    closes: Optional[datetime] = None
    daily_limit: Optional[int] = Field(None, ge=0)
    total_limit: Optional[int] = Field(None, ge=0)
    concurrent_limit: Optional[int] = Field(None, ge=0)
    public_fraction: Optional[float] = Field(None, gt=0, le=1)
    accepts: Literal["predictions", "code", "both"] = Field(
        "predictions",
        description="What the phase takes: prediction files, participants' systems run on the "
        "server (docs/blind-runs.md), or both.",
    )
    blind: bool = Field(
        False,
        description="The split's inputs are never downloadable: systems run on them on the server.",
    )
    compute_budget_seconds: Optional[int] = Field(
        None, ge=0, description="CPU seconds of system runs each team may use in the phase."
    )
    release_rule: Optional[Union[str, dict]] = Field(
        None,
        description="What the live public board shows of each run's public score "
        '(docs/statistics.md): "exact" (default), "rounded", "ladder", "ladder-paired" or '
        "{rule: ladder, eta: 0.01}.",
    )
    published_on: Optional[Literal["private", "whole"]] = Field(
        None,
        description="What the phase's published ranking is computed on where its split has a "
        'private part (docs/organizers.md): "private" (that part) or "whole" (the whole test '
        "split, as SemEval and most shared tasks publish); default: the task's `published_on`.",
    )
    boards: list[BoardSpec] = Field(
        default_factory=list,
        max_length=40,  # SemEval-2024 Task 1: 33 (Track A x 9 languages, B and C x 12)
        description="Boards beside the default one (docs/boards.md): each its own ranking, "
        "columns and filter on a fact (a track).",
    )

    @field_validator("boards")
    @classmethod
    def _board_names(cls, v):
        names = [b.name for b in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"board(s) {', '.join(dup)} declared twice")
        return v

    @field_validator("release_rule")
    @classmethod
    def _release_rule(cls, v):
        return phase_release_rule(v)

    @model_validator(mode="after")
    def _order(self):
        if self.opens and self.closes and self.closes <= self.opens:
            raise ValueError("closes must be after opens")
        return self


class TaskSpec(Spec):
    """A task, as data: what the scorer's family `family` reads, from the files of `splits`."""

    id: str = Field(pattern=TASK_ID)
    version: int = Field(1, ge=1)
    title: str = Field(min_length=1, max_length=300)
    description: str = Field(min_length=1, max_length=20_000)
    citation: str = Field("", max_length=20_000)
    licence: str = Field(min_length=1, max_length=2000)
    source: str = Field("", max_length=1000)
    family: Literal[FAMILIES]  # type: ignore[valid-type]
    format: FormatSpec
    metrics: list[str] = Field(min_length=1, max_length=60)
    primary: PrimarySpec
    greater_is_better: bool = True
    secondary: list[SecondarySpec] = Field(default_factory=list)
    subsets: list[str] = Field(default_factory=lambda: ["all"], min_length=1, max_length=200)
    group_field: str = "subset"
    group_name: str = "subset"
    partial_groups: bool = False
    unit: str = ""
    gold_value: str = Field(
        "", description="The gold's value field (default: label for instances, else score)."
    )
    splits: dict[str, SplitSpec] = Field(min_length=1, max_length=10)
    references: list[ReferenceSpec] = Field(default_factory=list)
    phases: list[PhaseSpec] = Field(default_factory=list, max_length=20)
    published_on: Literal["private", "whole"] = Field(
        "private",
        description="What the published rankings of the task's phases are computed on where the "
        'split has a private part: "private" (that part) or "whole" (the whole test split, as '
        "SemEval and most shared tasks publish); a phase may say otherwise (its `published_on`).",
    )
    key_columns: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="The few columns (subset/metric) a board shows beside the primary one.",
    )
    cross_validation: Optional[CrossValidationSpec] = None
    paper_rows: list[PaperRowSpec] = Field(default_factory=list, max_length=50)
    cut_at: list[int] = Field(
        default_factory=list,
        max_length=20,
        description="Links family: the depths k at which a scored run's ranking is also cut, its "
        "top k sources per query taken as predicted links and scored as a set (TP, FP, FN, F1, "
        "FPR and SMR x 10^4).",
    )
    slices: list[SliceSpec] = Field(
        default_factory=list,
        max_length=100,
        description="Subsets by another field of the gold than the group's (a source, an "
        "annotator): each its own column, never averaged into macro.",
    )
    public_files: dict[str, list[str]] = Field(
        default_factory=dict,
        max_length=10,
        description="Files published beside the splits, by folder (e.g. training data): "
        "participants download them; nothing scores them.",
    )

    _text = field_validator("title", "description", "citation", "licence", "source")(_no_control)

    @field_validator("cut_at")
    @classmethod
    def _cuts(cls, v):
        bad = [k for k in v if not 1 <= k <= 1_000_000]
        if bad:
            raise ValueError(f"cut_at: {', '.join(map(str, bad))} not in 1..1000000")
        if len(set(v)) != len(v):
            raise ValueError("cut_at: a depth repeats")
        return v

    @model_validator(mode="after")
    def _cuts_of_links(self):
        if self.cut_at and self.family != "links":
            raise ValueError("cut_at applies to the links family only")
        return self

    @model_validator(mode="after")
    def _slices_declared(self):
        seen, sliced = set(), {sl.subset for sl in self.slices}
        for sl in self.slices:
            if sl.subset in seen:
                raise ValueError(f"slices: {sl.subset!r} declared twice")
            seen.add(sl.subset)
            if sl.subset not in self.subsets or sl.subset in ("all", "macro"):
                raise ValueError(f"slices: {sl.subset!r} is not among the subsets (list it there)")
            if sl.group and (sl.group not in self.subsets or sl.group in sliced | {"all", "macro"}):
                raise ValueError(f"slices: {sl.subset!r}: its group {sl.group!r} is not a group")
            if self.family == "tokens" and not sl.group:
                raise ValueError(f"slices: {sl.subset!r}: a tokens slice names its group")
            if sl.field in (self.group_field,):
                raise ValueError(
                    f"slices: {sl.subset!r} names the group field {sl.field!r} (declare a group)"
                )
        return self

    @model_validator(mode="after")
    def _folds_of_queries(self):
        cv = self.cross_validation
        if cv is None:
            return self
        if (self.family == "links") != (cv.field == ""):
            raise ValueError(
                "cross_validation.field is empty for the links family (its folds partition the "
                "queries) and names a column for any other"
            )
        split = self.splits.get(cv.split)
        if self.family == "links" and split is not None:
            if not any(r.rsplit("/", 1)[-1] == "folds.csv" for r in split.inputs):
                raise ValueError(
                    f"the cross-validated links split {cv.split!r} needs a folds.csv "
                    "(query_id,fold) among its inputs"
                )
        return self

    @field_validator("splits")
    @classmethod
    def _split_names(cls, v):
        bad = [s for s in v if not re.fullmatch(NAME, s)]
        if bad:
            raise ValueError(f"split name(s) {', '.join(map(repr, bad))}: letters, digits, _.-")
        return v


class CompetitionSpec(Spec):
    """A whole competition: its pages, settings, people and tasks."""

    id: str = Field(pattern=SLUG, json_schema_extra={"examples": ["sts-latin-2027"]})
    title: str = Field(min_length=1, max_length=200)
    state: Literal["draft", "visible"] = "draft"
    pages: list[PageSpec] = Field(default_factory=list, max_length=30)
    registration: RegistrationSpec = Field(default_factory=RegistrationSpec)
    teams: TeamsSpec = Field(default_factory=TeamsSpec)
    anonymous_board: bool = False
    fact_fields: list[FactField] = Field(default_factory=list, max_length=50)
    roles: list[RoleSpec] = Field(default_factory=list, max_length=100)
    tasks: list[TaskSpec] = Field(min_length=1, max_length=20)

    _title = field_validator("title")(_no_control)

    @model_validator(mode="after")
    def _fact_rules(self):
        problems = fact_rule_problems(self.fact_fields)
        if problems:
            raise ValueError("; ".join(f"{'.'.join(map(str, at))}: {m}" for at, m in problems))
        return self


# ----------------------------------------------------------------------------- to a Task


def task_from_spec(spec: TaskSpec) -> Task:
    """The `Task` a bundle declares (its files are read by the family `spec.family`)."""
    return task_from_declaration(spec.model_dump(mode="json"))


# ----------------------------------------------------------------------------- boards


def _overall_problems(b, declared: dict, task: Task, at: tuple) -> list[tuple[tuple, str]]:
    """What is wrong with an overall board: boards it names that the phase does not have (or
    that are overall boards themselves), a mean over boards ranked in opposite directions."""
    out, directions = [], []
    for k, name in enumerate(b.overall.boards):
        if name == MAIN_BOARD:
            directions.append(bool(task.greater_is_better))
            continue
        other = declared.get(name)
        if other is None or other.overall is not None or name == b.name:
            known = ", ".join([MAIN_BOARD] + [n for n, x in declared.items() if x.overall is None])
            out.append(
                (at + ("boards", k), f"{name!r} is not a ranked board of the phase ({known})")
            )
            continue
        directions.append(bool(task.metric_direction(other.ranking.metric)))
    if b.overall.rule == "mean" and len(set(directions)) > 1:
        out.append(
            (
                at + ("rule",),
                "a mean over boards ranked in opposite directions is undefined: use borda or "
                "mean-rank",
            )
        )
    return out


def board_problems(
    boards: list[BoardSpec | None], task: Task, facts: list[dict] | None
) -> list[tuple[tuple, str]]:
    """What is wrong with a phase's declared boards against the task (its subsets and metrics)
    and the competition's fact sheet (`facts`: FactField dicts; None: not checked, a task not yet
    in a competition): (path under the phase, message) pairs, every problem at once. A board
    given as None (one its schema refused, named apart) keeps its place in the paths."""
    out: list[tuple[tuple, str]] = []
    subsets, metrics = set(task.subsets), set(task.metrics)

    groups = list(getattr(task, "groups", ()) or ())

    def value(v: BoardValue, at: tuple) -> None:
        if v.over:
            if v.subset in subsets:
                out.append(
                    (
                        at + ("subset",),
                        f"{v.subset!r} is a declared subset: a mean over groups is named apart",
                    )
                )
            for k, g in enumerate(v.over):
                if g not in groups:
                    known = ", ".join(groups) or "the task declares none"
                    out.append(
                        (
                            at + ("over", k),
                            f"{g!r} is not a {getattr(task, 'group_name', 'group')} of the task "
                            f"({known})",
                        )
                    )
        elif v.subset not in subsets:
            out.append(
                (
                    at + ("subset",),
                    f"{v.subset!r} is not a declared subset ({', '.join(task.subsets)})",
                )
            )
        if v.metric not in metrics:
            out.append(
                (
                    at + ("metric",),
                    f"{v.metric!r} is not a declared metric ({', '.join(task.metrics)})",
                )
            )

    by_key = {f["key"]: f for f in facts or ()}
    declared = {b.name: b for b in boards if b is not None}
    for i, b in enumerate(boards):
        if b is None:
            continue
        at = ("boards", i)
        if b.overall is not None:
            out.extend(_overall_problems(b, declared, task, at + ("overall",)))
            continue
        value(b.ranking, at + ("ranking",))
        for j, c in enumerate(b.columns):
            value(c, at + ("columns", j))
        if b.filter is None or facts is None:
            continue
        f = by_key.get(b.filter.fact)
        if f is None:
            known = ", ".join(by_key) or "none"
            out.append(
                (
                    at + ("filter", "fact"),
                    f"{b.filter.fact!r} is not a declared fact field (fact fields: {known})",
                )
            )
        elif f.get("kind") == "choice":
            bad = [x for x in b.filter.equals if x not in f.get("choices", ())]
            if bad:
                out.append(
                    (
                        at + ("filter", "equals"),
                        f"{', '.join(map(repr, bad))} not among the choices of "
                        f"{f['key']} ({', '.join(f.get('choices', ()))})",
                    )
                )
    return out
