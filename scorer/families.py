"""How each kind of task is validated and scored.

A family reads the task's public inputs (what a valid submission must cover) and, for scoring
only, its gold. Validation never reads gold, so no message can reveal a gold value.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scorer import metrics
from scorer.errors import Problems
from scorer.reader import (
    BadRow,
    Text,
    arrow_links,
    csv_reader,
    id_array,
    iter_records,
    link_columns,
    open_text,
)
from tasks.base import Task, unit_id
from tasks.store import TaskStore

SHOW_MISSING = 5


def cache_key(path: Path) -> tuple:
    st = path.stat()
    return (str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _read_jsonl_cached(key: tuple) -> list[dict]:
    with open(key[0], encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_jsonl(path: Path) -> list[dict]:
    """A task file's rows, parsed once per version of the file."""
    return _read_jsonl_cached(cache_key(path))


@functools.lru_cache(maxsize=32)
def _reference_of(key: tuple, keys: tuple[str, ...] | None) -> tuple[tuple[str, ...], dict]:
    """A keyed split's ids (its file's `target` column where `keys` is None, else each row's
    `unit_id`) and each id's place, once per version of the file (never changed by a caller)."""
    rows = _read_jsonl_cached(key)
    ids = (
        tuple(r["target"] for r in rows) if keys is None else tuple(unit_id(r, keys) for r in rows)
    )
    return ids, {k: i for i, k in enumerate(ids)}


def _fmt_value(v) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# ---------------------------------------------------------------- value conversion


class Bad(Exception):
    """A value that does not fit its column."""


def _as_id(v, csv: bool) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    raise Bad(f"must be a string or an integer, found {_fmt_value(v)}")


def _as_float(v, csv: bool) -> float:
    if csv:
        try:
            x = float(v)
        except ValueError:
            raise Bad(f"must be a number, found {_fmt_value(v)}") from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            x = float(v)
        except OverflowError:  # a JSON integer of hundreds of digits
            raise Bad("must be a number no larger than 1.8e308") from None
    else:
        raise Bad(f"must be a number, found {_fmt_value(v)}")
    if math.isnan(x):
        raise Bad("is NaN")
    if math.isinf(x):
        raise Bad("is infinite")
    return x


def _as_label01(v, csv: bool) -> int:
    x = _as_float(v, csv)
    if x not in (0.0, 1.0):
        raise Bad(f"must be 0 or 1, found {_fmt_value(v)}")
    return int(x)


def _as_floats(v, csv: bool) -> np.ndarray:
    if csv and isinstance(v, str):
        s = v.strip()
        try:
            v = (
                json.loads(s)
                if s.startswith("[")
                else [float(x) for x in s.replace(",", " ").split()]
            )
        except ValueError:
            raise Bad("must be a JSON list of numbers or numbers separated by spaces") from None
    if not isinstance(v, list):
        raise Bad(f"must be a list of numbers, found {_fmt_value(v)}")
    try:
        a = np.asarray(v, dtype=np.float64)
    except OverflowError:
        raise Bad("must hold only numbers no larger than 1.8e308") from None
    except (TypeError, ValueError):
        bad = next((x for x in v if isinstance(x, (str, list, dict)) or x is None), None)
        raise Bad(f"must hold only numbers, found {_fmt_value(bad)}") from None
    if a.ndim != 1:
        raise Bad("must be a flat list of numbers")
    finite = np.isfinite(a)
    if not finite.all():
        i = int(np.argmin(finite))
        raise Bad(f"value {i + 1} is {'NaN' if np.isnan(a[i]) else 'infinite'}")
    return a


def _as_int(v, csv: bool) -> int:
    x = _as_float(v, csv)
    if x != int(x):
        raise Bad(f"must be an integer, found {_fmt_value(v)}")
    return int(x)


CONVERT = {
    "id": _as_id,
    "float": _as_float,
    "label01": _as_label01,
    "floats": _as_floats,
    "int": _as_int,
}


@dataclass
class Rejected:
    """The rows `read_rows` turned down: the ids they named (not missing from the file, only
    wrong on their line), and how many named no id that could be read."""

    ids: set = field(default_factory=set)
    unnamed: int = 0

    def note(self, rid) -> None:
        if isinstance(rid, str):
            self.ids.add(rid)
        elif isinstance(rid, int) and not isinstance(rid, bool):
            self.ids.add(str(rid))
        else:
            self.unnamed += 1


def _canonical_names(records, alias: dict):
    """Records with each aliased column under its field's name (unless the row has both)."""
    for line, rec in records:
        if isinstance(rec, dict) and any(k in alias for k in rec):
            rec = {
                (alias[k] if k in alias and alias[k] not in rec else k): v for k, v in rec.items()
            }
        yield line, rec


def read_rows(
    text: Text, task: Task, problems: Problems, rejected: Rejected | None = None
) -> list[tuple[int, dict]]:
    """Rows of a keyed submission with typed values; every bad row or value becomes a problem
    (and, given `rejected`, is recorded there)."""
    rejected = rejected if rejected is not None else Rejected()
    fields = task.format.fields
    names = [f.name for f in fields]
    required = [f.name for f in fields if f.name not in task.format.optional]
    keys = task.format.key
    is_csv = text.format != "jsonl"
    header, records = iter_records(text.text, text.format)
    alias = {a: f.name for f in fields for a in f.aliases}
    if alias:
        records = _canonical_names(records, alias)
        if header is not None:
            header = [alias.get(h, h) if alias.get(h) not in header else h for h in header]
    if header is not None:
        missing = [c for c in required if c not in header]
        if missing:
            problems.add(
                f"the header lacks column(s) {', '.join(missing)}; expected "
                f"{', '.join(names)}, found {', '.join(header) or 'nothing'}",
                line=1,
            )
            problems.raise_if_any()
        extra = [c for c in header if c not in names]
        if extra:
            problems.add(
                f"unexpected column(s) {', '.join(extra)}; expected {', '.join(names)}", line=1
            )
    out = []
    for line, rec in records:
        if isinstance(rec, BadRow):
            problems.add(rec.message, line=line)
            rejected.unnamed += 1
            continue
        rid = _raw_id(rec, keys)
        rid_s = rid if isinstance(rid, str) else None
        if header is None:
            missing = [c for c in required if c not in rec]
            extra = [c for c in rec if c not in names]
            if missing:
                problems.add(f"missing field(s) {', '.join(missing)}", line=line, id=rid_s)
                rejected.note(rid)
                continue
            if extra:
                problems.add(
                    f"unexpected field(s) {', '.join(extra)}; expected {', '.join(names)}",
                    line=line,
                    id=rid_s,
                )
        row, ok = {}, True
        for f in fields:
            if f.name not in rec:
                continue
            v = rec[f.name]
            if is_csv and f.name in task.format.optional and v == "":
                continue
            try:
                row[f.name] = CONVERT[f.kind](v, is_csv)
            except Bad as e:
                problems.add(f"{f.name} {e}", line=line, id=rid_s)
                ok = False
        if ok:
            out.append((line, row))
        else:
            rejected.note(rid)
    return out


def _raw_id(rec: dict, keys: tuple[str, ...]):
    """What a raw record names as its id: the key's value, or for a composite key (fold and
    instance) its columns joined by "/" when each is a string or an integer; None otherwise."""
    if len(keys) == 1:
        return rec.get(keys[0])
    parts = [rec.get(k) for k in keys]
    if all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)) for v in parts):
        return "/".join(str(v) for v in parts)
    return None


def _check_keys(
    rows, key, known: dict, problems: Problems, what: str
) -> dict[str, tuple[int, dict]]:
    """Index rows by key (a column name, or a tuple of them for a composite id), reporting
    duplicates and unknown ids."""
    keys = (key,) if isinstance(key, str) else tuple(key)
    key = "/".join(keys)
    by_id: dict[str, tuple[int, dict]] = {}
    for line, row in rows:
        k = unit_id(row, keys)
        if k in by_id:
            problems.add(f"duplicate {key}: also on line {by_id[k][0]}", line=line, id=k)
            continue
        if k not in known:
            problems.add(f"unknown {key}: not among the {what}", line=line, id=k)
            continue
        by_id[k] = (line, row)
    return by_id


def _report_missing(
    missing: list[str], key: str, problems: Problems, scope: str = "", unreadable: int = 0
) -> None:
    """One whole-file problem naming the first few missing ids; ids on rows rejected for
    another problem are not missing (the caller leaves them out)."""
    if missing:
        first = ", ".join(repr(m) for m in missing[:SHOW_MISSING])
        more = f" and {len(missing) - SHOW_MISSING} more" if len(missing) > SHOW_MISSING else ""
        hint = (
            (
                f" (some may be on the {unreadable} line{'s' if unreadable != 1 else ''} whose "
                f"{key} could not be read)"
            )
            if unreadable
            else ""
        )
        problems.add(
            f"{len(missing)} {key}(s){scope} missing from the submission: {first}{more}{hint}",
            whole=True,
        )


# ---------------------------------------------------------------- families


@dataclass
class Scored:
    """A family's result: metrics per subset, and the reasons for any null value."""

    metrics: dict
    notes: list[str] = field(default_factory=list)
    extra: dict = field(
        default_factory=dict
    )  # more of the result (a cross-validated split's folds)


class Family:
    """Validation and scoring for one kind of task."""

    def __init__(self, task: Task, store: TaskStore, split: str):
        # on a cross-validated split the task's key includes the fold (`Task.for_split`)
        self.task, self.store, self.split = task.for_split(split), store, split

    def validate(self, text: Text):  # pragma: no cover - interface
        raise NotImplementedError

    def units(self) -> list[str]:  # pragma: no cover - interface
        """The ids that a public/private partition of the gold splits (instances, targets,
        documents, queries)."""
        raise NotImplementedError

    def strata(self) -> list[tuple[str, str]]:
        """(unit, stratum) for every unit, in the order of `units()`: the groups a stratified
        public/private partition divides in the same proportion, so that a metric defined on the
        whole gold is defined on both parts. Server side only: it may read gold. One stratum
        unless a family knows better."""
        return [(u, "all") for u in self.units()]

    def score(self, parsed, only: frozenset | None = None) -> Scored:  # pragma: no cover
        """Metrics against the gold; `only` restricts them to those units."""
        raise NotImplementedError


def _no_unit_note(subset: str, unit: str, only) -> str:
    """Why a subset has no value when the gold (or the part of it being scored) has none of its
    units: not the same thing as a submission that lacks them."""
    where = "this part of the gold" if only is not None else "the gold"
    return f"{subset}: no {unit} of {subset} in {where}"


def _group_scores(
    task: Task, metric_names, groups_in_gold: dict, only, result: dict, notes: list
) -> None:
    """Add `macro` (when declared) over the groups the gold, or the part of it scored, holds."""
    if "macro" not in task.subsets:
        return
    present = {g: result[g] for g in task.groups if g in groups_in_gold}
    result["macro"] = metrics.macro(present, metric_names)
    if not present:
        notes.append(_no_unit_note("macro", task.unit_name, only))
    elif any(v is None for k, v in result["macro"].items() if k != "n"):
        notes.append(f"macro: undefined unless every {task.group_name} in the gold has a value")


class Keyed(Family):
    """One value per id of the inputs (tric-binary, tric-ranking, trac, str). On a task's
    cross-validated split a unit is named by its fold and its id, and each fold is scored on its
    own (`score`)."""

    inputs_name = "inputs.jsonl"

    @property
    def keys(self) -> tuple[str, ...]:
        return self.task.format.key

    @property
    def key_name(self) -> str:
        return "/".join(self.keys)

    @property
    def value_field(self) -> str:
        return next(f.name for f in self.task.format.fields if f.name not in self.keys)

    def reference_ids(self) -> list[str]:
        return list(self._reference()[0])

    def _reference(self) -> tuple[tuple[str, ...], dict[str, int]]:
        """The split's ids in order and each one's place, built once per version of the split's
        file (`_reference_of`): every validation (the request's split check, the worker's) reads
        them, and a split's thousands of ids need not be rebuilt for a file's few dozen rows."""
        if self.task.kind == "targets":
            return _reference_of(cache_key(self.store.public(self.split, "targets.jsonl")), None)
        return _reference_of(cache_key(self.store.public(self.split, self.inputs_name)), self.keys)

    def _groups_of_inputs(self) -> dict[str, str]:
        gf = self.task.group_field
        return {
            unit_id(r, self.keys): r.get(gf)
            for r in read_jsonl(self.store.public(self.split, self.inputs_name))
        }

    def validate(self, text: Text) -> dict[str, float]:
        problems = Problems()
        key = self.key_name
        value = self.value_field
        ids, index = self._reference()
        rejected = Rejected()
        rows = read_rows(text, self.task, problems, rejected)
        by_id = _check_keys(rows, self.keys, index, problems, f"{len(ids)} {self.split} {key}s")
        if self.task.partial_groups:
            # a group left out entirely is allowed; within a group the file covers (even by a row
            # rejected above) every unit is needed
            group_of = self._groups_of_inputs()
            named = by_id.keys() | {k for k in rejected.ids if k in index}
            covered = {group_of.get(k) for k in named}
            for g in self.task.groups:
                if g in covered:
                    _report_missing(
                        [k for k in ids if group_of.get(k) == g and k not in named],
                        key,
                        problems,
                        f" of {g}",
                        unreadable=rejected.unnamed,
                    )
            if not by_id and not problems:
                problems.add(f"the submission covers no {self.task.group_name}", whole=True)
        else:
            _report_missing(
                [k for k in ids if k not in by_id and k not in rejected.ids],
                key,
                problems,
                unreadable=rejected.unnamed,
            )
        problems.raise_if_any()
        return {k: row[value] for k, (_, row) in by_id.items()}

    def units(self) -> list[str]:
        return self.reference_ids()

    def strata(self) -> list[tuple[str, str]]:
        """The group each unit is scored in (TRiC: `oov` or `iov`; STR: its language), as the gold
        records it; one stratum when the task declares no group (TRaC). On a cross-validated
        split, the fold as well ("3/oov")."""
        declared = self.task.groups
        cv = self.task.cross_validation if self.task.is_cross_validated(self.split) else None
        if not declared and cv is None:
            return super().strata()
        gf = self.task.group_field
        gold = read_jsonl(self.store.gold(self.split, "gold.jsonl"))
        group_of = {unit_id(r, self.keys): r.get(gf) for r in gold}
        fold_of = {unit_id(r, self.keys): r.get(cv.field) for r in gold} if cv else {}
        out = []
        for u in self.units():
            g = (group_of[u] if group_of.get(u) in declared else "other") if declared else "all"
            out.append((u, f"{fold_of[u]}/{g}" if cv else g))
        return out

    def score(self, parsed: dict[str, float], only: frozenset | None = None) -> Scored:
        gold_rows = read_jsonl(self.store.gold(self.split, "gold.jsonl"))
        if only is not None:
            gold_rows = [r for r in gold_rows if unit_id(r, self.keys) in only]
        if self.task.is_cross_validated(self.split):
            return self._score_folds(gold_rows, parsed, only)
        return self._score_rows(gold_rows, parsed, only)

    def _score_rows(self, gold_rows: list[dict], parsed: dict[str, float], only) -> Scored:
        task = self.task
        gf = task.group_field
        ids = [unit_id(r, self.keys) for r in gold_rows]
        gold = np.array([r[task.gold_field] for r in gold_rows], dtype=np.float64)
        pred = np.array([parsed.get(k, np.nan) for k in ids], dtype=np.float64)
        covered = np.array([k in parsed for k in ids], dtype=bool)
        group = [r.get(gf) for r in gold_rows]
        names = task.metrics
        result, notes, in_gold = {}, [], {}
        for name in task.subsets:
            if name == "macro":
                continue
            sl = task.slice_of(name)
            if sl is not None:  # a source, an annotator: a field of the gold beside the group
                mask = np.array([sl.holds(r, gf) for r in gold_rows], dtype=bool)
            elif name == "all":
                mask = np.ones(gold.size, dtype=bool)
            else:
                mask = np.array([g == name for g in group], dtype=bool)
            if not mask.any():  # the same keys as a value would have, each None
                result[name] = metrics.per_item(names, gold[:0], gold[:0])[0]
                notes.append(_no_unit_note(name, task.unit_name, only))
                continue
            if sl is None:
                in_gold[name] = True
            if not covered[mask].all():  # only with partial_groups: validation requires the rest
                result[name] = metrics.per_item(names, gold[:0], gold[:0])[0]
                notes.append(f"{name}: not in the submission")
                continue
            vals, why = metrics.per_item(names, gold[mask], pred[mask])
            result[name] = vals
            notes += [f"{name}: {w}" for w in why]
        _group_scores(task, names, in_gold, only, result, notes)
        return Scored({s: result[s] for s in task.subsets}, notes)

    def _score_folds(self, gold_rows: list[dict], parsed: dict[str, float], only) -> Scored:
        """Each fold scored as its own split; the metrics are the means over the folds (a count,
        `n`, their sum), `cross_validation` holds each fold's metrics and the standard
        deviations."""
        field_ = self.task.cross_validation.field
        by_fold: dict[str, list[dict]] = {}
        for r in gold_rows:
            by_fold.setdefault(str(r[field_]), []).append(r)
        folds = {
            f: self._score_rows(rows, parsed, only)
            for f, rows in sorted(by_fold.items(), key=lambda kv: metrics.fold_key(kv[0]))
        }
        return fold_summary(self.task, folds, field_)


def _fold_notes(task: Task, folds: dict[str, Scored]) -> list[str]:
    """The folds' notes, each prefixed by its fold; a subset that no fold's gold holds (a language
    a one-language import lacks) is named once, not once per fold."""
    absent = {
        _no_unit_note(sub, task.unit_name, only): sub
        for sub in task.subsets
        for only in (None, True)
    }
    everywhere = [
        absent[n]
        for n in dict.fromkeys(n for sc in folds.values() for n in sc.notes)
        if n in absent and all(n in sc.notes for sc in folds.values())
    ]
    out = [
        f"fold {f}: {n}"
        for f, sc in folds.items()
        for n in sc.notes
        if n not in absent or absent[n] not in everywhere
    ]
    if everywhere:
        out.insert(
            0, f"{', '.join(everywhere)}: no {task.unit_name} of these in any fold of the gold"
        )
    return out


def fold_summary(task: Task, folds: dict[str, Scored], field_: str) -> Scored:
    """The folds' scores as one result: each metric's mean over the folds (a count, their sum),
    with each fold's metrics and the population standard deviations (`np.std`) beside them."""
    mean, std = {}, {}
    notes = _fold_notes(task, folds)
    for sub in task.subsets:
        mean[sub], std[sub] = {}, {}
        for m in task.metrics:
            vals = [sc.metrics.get(sub, {}).get(m) for sc in folds.values()]
            if not vals or any(v is None for v in vals):
                mean[sub][m] = std[sub][m] = None
                if vals and m != "n" and (sub, m) == task.primary:
                    notes.append(f"{sub}: {m} undefined unless every fold has a value")
                continue
            a = np.asarray(vals, dtype=np.float64)
            mean[sub][m] = int(a.sum()) if m in metrics.COUNT_METRICS else float(a.mean())
            std[sub][m] = None if m in metrics.COUNT_METRICS else float(a.std())
    return Scored(
        mean,
        notes,
        extra={
            "cross_validation": {
                "field": field_,
                "folds": {f: sc.metrics for f, sc in folds.items()},
                "std": std,
                "aggregate": "mean over folds; std is the population standard deviation (np.std)",
            }
        },
    )


class Tokens(Family):
    """A score per whitespace token of both documents of each pair (swissgov-rsd); the groups
    (language pairs) are the task's declared subsets."""

    def validate(self, text: Text) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        problems = Problems()
        gf = self.task.group_field
        inputs = read_jsonl(self.store.public(self.split, "inputs.jsonl"))
        ref = {r["id"]: r for r in inputs}
        rejected = Rejected()
        rows = read_rows(text, self.task, problems, rejected)
        by_id = _check_keys(rows, "id", ref, problems, f"{len(ref)} {self.split} document pairs")
        out = {}
        for rid, (line, row) in by_id.items():
            r, ok = ref[rid], True
            for side in ("a", "b"):
                n_tok = _n_tokens(r[f"text_{side}"])
                n_val = row[f"labels_{side}"].size
                if n_val != n_tok:
                    problems.add(
                        f"{rid}: labels_{side} has {n_val} values, text_{side} has {n_tok} tokens",
                        line=line,
                        id=rid,
                    )
                    ok = False
            if ok:
                out[rid] = (row["labels_a"], row["labels_b"])
        # a group (language pair) left out entirely is allowed; within a pair the file covers (even
        # by a row rejected above) every document is needed
        named = by_id.keys() | {k for k in rejected.ids if k in ref}
        covered = {ref[k][gf] for k in named}
        for pair in self.task.groups:
            if pair in covered:
                _report_missing(
                    [r["id"] for r in inputs if r[gf] == pair and r["id"] not in named],
                    "id",
                    problems,
                    f" of {pair}",
                    unreadable=rejected.unnamed,
                )
        if not by_id and not problems:
            problems.add("the submission covers no document pair", whole=True)
        problems.raise_if_any()
        return out

    def units(self) -> list[str]:
        return [r["id"] for r in read_jsonl(self.store.public(self.split, "inputs.jsonl"))]

    def strata(self) -> list[tuple[str, str]]:
        """Each document's group (language pair), as the inputs record it."""
        gf = self.task.group_field
        return [(r["id"], r[gf]) for r in read_jsonl(self.store.public(self.split, "inputs.jsonl"))]

    def score(self, parsed, only: frozenset | None = None) -> Scored:
        task = self.task
        gold = token_gold(
            cache_key(self.store.gold(self.split, "gold.jsonl")),
            only,
            task.groups,
            task.group_field,
        )
        names = task.metrics
        result, notes, in_gold = {}, [], {}
        for pair in task.groups:
            ids, gvec, mask = gold.get(pair, ([], None, None))
            if ids:
                in_gold[pair] = True
            if not ids or not all(i in parsed for i in ids):
                result[pair] = metrics.per_item(names, [], [])[0]
                notes.append(
                    f"{pair}: not in the submission"
                    if ids
                    else _no_unit_note(pair, task.unit_name, only)
                )
                continue
            pvec = np.concatenate([np.concatenate(parsed[i]) for i in ids])[mask]
            vals, why = metrics.per_item(names, gvec, pvec)
            result[pair] = vals
            notes += [f"{pair}: {w}" for w in why]
        self._score_slices(parsed, only, result, notes)
        _group_scores(task, names, in_gold, only, result, notes)
        return Scored({s: result[s] for s in task.subsets if s in result}, notes)

    def slice_docs(self, sl, only: frozenset | None) -> tuple[str, frozenset]:
        """A slice's language pair and documents (within `only`): its group's documents whose gold
        row has the slice's field value (SwissGov-RSD: one annotator's documents of a pair)."""
        gf = self.task.group_field
        rows = _read_jsonl_cached(cache_key(self.store.gold(self.split, "gold.jsonl")))
        docs = frozenset(
            r["id"] for r in rows if sl.holds(r, gf) and (only is None or r["id"] in only)
        )
        pairs = {r[gf] for r in rows if r["id"] in docs}
        return (sl.group or (next(iter(pairs)) if len(pairs) == 1 else "")), docs

    def _score_slices(self, parsed, only, result: dict, notes: list) -> None:
        """Each declared slice, scored as its group is on the slice's documents alone; a slice
        over several groups pools their tokens."""
        task, names = self.task, self.task.metrics
        path = cache_key(self.store.gold(self.split, "gold.jsonl"))
        for sl in task.slices:
            _pair, docs = self.slice_docs(sl, only)
            gold = token_gold(path, docs, task.groups, task.group_field) if docs else {}
            ids = [i for g in task.groups for i in gold.get(g, ([], None, None))[0]]
            if not ids or not all(i in parsed for i in ids):
                result[sl.subset] = metrics.per_item(names, [], [])[0]
                notes.append(
                    f"{sl.subset}: not in the submission"
                    if ids
                    else _no_unit_note(sl.subset, task.unit_name, only)
                )
                continue
            gvec = np.concatenate([gold[g][1] for g in task.groups if g in gold])
            pvec = np.concatenate(
                [
                    np.concatenate([np.concatenate(parsed[i]) for i in gold[g][0]])[gold[g][2]]
                    for g in task.groups
                    if g in gold
                ]
            )
            vals, why = metrics.per_item(names, gvec, pvec)
            result[sl.subset] = vals
            notes += [f"{sl.subset}: {w}" for w in why]


def _n_tokens(text: str) -> int:
    return len(text.split())


@functools.lru_cache(maxsize=8)
def token_gold(
    key: tuple, only: frozenset | None, groups: tuple[str, ...], group_field: str
) -> dict:
    """Per group: document order, the gold vector without -1 tokens, and its mask."""
    rows = _read_jsonl_cached(key)
    out = {}
    for pair in groups:
        docs = [r for r in rows if r[group_field] == pair and (only is None or r["id"] in only)]
        if not docs:
            continue
        full = np.concatenate(
            [
                np.concatenate([np.asarray(r["labels_a"], float), np.asarray(r["labels_b"], float)])
                for r in docs
            ]
        )
        mask = full != -1
        out[pair] = ([r["id"] for r in docs], full[mask], mask)
    return out


@dataclass
class Links:
    """Predicted links as index arrays into the query and source id lists."""

    q: np.ndarray
    s: np.ndarray
    score: np.ndarray | None


class LinkFamily(Family):
    """Predicted (query, source) links over all query x source pairs (loci-similes)."""

    def ids(self) -> tuple[dict, dict]:
        """Query and source id -> index; from the server's index, else from the public CSVs
        (a participant's download has only those)."""
        return _segment_ids(self.store, self.split, "query"), _segment_ids(
            self.store, self.split, "source"
        )

    def validate_path(self, path, limits) -> tuple[Links, str]:
        """Validate a link file straight from its path: the columnar reader (pyarrow's CSV reader
        and hash joins, `scorer.reader.arrow_links`) takes a well-formed CSV/TSV table; any other
        file (JSON Lines, or one with a problem) is loaded and validated row by row by `validate`,
        which reports every problem by line and id."""
        known = _id_arrays(self.store, self.split)
        fast = None
        if known is not None:
            fast = arrow_links(path, known[0], known[1], limits)
        if fast is None:
            # read as a stream: a file the columnar reader does not take costs what its rows keep
            # (and stops after the problem cap), never the whole file decompressed at once
            text = open_text(path, limits)
            return self.validate(text), text.format
        q, s, sc, fmt = fast
        return self._finish(q, s, sc, Problems(), None, len(known[1])), fmt

    def validate(self, text: Text) -> Links:
        problems = Problems()
        qidx, sidx = self.ids()
        if text.format == "jsonl":
            return self._validate_records(text, qidx, sidx, problems)
        reader = csv_reader(text.text, text.format)
        header = []
        try:
            for header in reader:
                if any(c.strip() for c in header):
                    break
        except csv.Error as e:
            problems.add(f"cannot parse the header ({e})", line=reader.line_num)
            problems.raise_if_any()
        header = [h.strip().lstrip("\ufeff") for h in header]
        for c in ("query_id", "source_id"):
            if c not in header:
                problems.add(
                    f"the header lacks column {c}; expected query_id,source_id[,score], "
                    f"found {','.join(header) or 'nothing'}",
                    line=1,
                )
        extra = [c for c in header if c not in ("query_id", "source_id", "score")]
        if extra:
            problems.add(
                f"unexpected column(s) {', '.join(extra)}; expected query_id,source_id[,score]",
                line=1,
            )
        problems.raise_if_any()
        iq, isrc = header.index("query_id"), header.index("source_id")
        isc = header.index("score") if "score" in header else None
        ncol = len(header)
        fast = link_columns(reader, ncol, iq, isrc, isc, qidx, sidx)
        if fast is not None:
            return self._finish(*fast, problems, text, len(sidx))
        # Something in the file is wrong: read it again row by row to report every problem.
        reader = csv_reader(text.text, text.format)
        for header in reader:
            if any(c.strip() for c in header):
                break
        qs, ss, scores = [], [], []
        qget, sget = qidx.get, sidx.get
        qappend, sappend, scappend = qs.append, ss.append, scores.append
        line = reader.line_num
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                break
            except Exception as e:  # csv.Error
                problems.add(f"cannot parse the row ({e})", line=reader.line_num)
                continue
            if len(cells) != ncol:
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue
                problems.add(f"expected {ncol} columns, found {len(cells)}", line=reader.line_num)
                continue
            q, s = qget(cells[iq]), sget(cells[isrc])
            if q is None or s is None:
                line = reader.line_num
                if q is None:
                    problems.add(
                        "unknown query_id: not a query segment of the task", line=line, id=cells[iq]
                    )
                if s is None:
                    problems.add(
                        "unknown source_id: not a source segment of the task",
                        line=line,
                        id=cells[isrc],
                    )
                continue
            if isc is not None:
                try:
                    x = float(cells[isc])
                except ValueError:
                    problems.add(
                        f"score must be a number, found {_fmt_value(cells[isc])}",
                        line=reader.line_num,
                        id=cells[iq],
                    )
                    continue
                if x != x or x in (math.inf, -math.inf):
                    problems.add(
                        f"score is {'NaN' if x != x else 'infinite'}",
                        line=reader.line_num,
                        id=cells[iq],
                    )
                    continue
                scappend(x)
            qappend(q)
            sappend(s)
        return self._finish(qs, ss, scores if isc is not None else None, problems, text, len(sidx))

    def _validate_records(self, text, qidx, sidx, problems) -> Links:
        header, records = iter_records(text.text, text.format)
        qs, ss, scores, has_score = [], [], [], None
        for line, rec in records:
            if isinstance(rec, BadRow):
                problems.add(rec.message, line=line)
                continue
            qv, sv = rec.get("query_id"), rec.get("source_id")
            # an id must be a string: a list or object would not even be hashable
            q = qidx.get(qv) if isinstance(qv, str) else None
            s = sidx.get(sv) if isinstance(sv, str) else None
            if q is None or s is None:
                problems.add(
                    "unknown or missing query_id/source_id", line=line, id=str(rec.get("query_id"))
                )
                continue
            sc = "score" in rec
            if has_score is None:
                has_score = sc
            elif sc != has_score:
                problems.add("either every row has a score or none does", line=line)
                continue
            if sc:
                try:
                    scores.append(_as_float(rec["score"], False))
                except Bad as e:
                    problems.add(f"score {e}", line=line, id=rec.get("query_id"))
                    continue
            qs.append(q)
            ss.append(s)
        return self._finish(qs, ss, scores if has_score else None, problems, text, len(sidx))

    def _finish(self, qs, ss, scores, problems: Problems, text: Text, n_sources: int) -> Links:
        q = np.asarray(qs, dtype=np.int64)
        s = np.asarray(ss, dtype=np.int64)
        keys = q * n_sources + s
        if keys.size:
            srt = np.sort(keys)
            if (srt[1:] == srt[:-1]).any():
                uniq, counts = np.unique(srt, return_counts=True)
                dup = np.flatnonzero(counts > 1)
                qnames, snames = _names(self.store, self.split)
                for d in dup[: problems.cap]:
                    k = uniq[d]
                    problems.add(
                        f"duplicate link ({qnames[k // n_sources]!r}, {snames[k % n_sources]!r}) "
                        f"appears {counts[d]} times"
                    )
                problems.count_unlisted(dup.size - problems.cap)
        # no links at all is valid: "predict nothing" is SMR's reference point
        problems.raise_if_any()
        sc = np.asarray(scores, dtype=np.float64) if scores is not None else None
        return Links(q, s, sc)

    def units(self) -> list[str]:
        return list(self.ids()[0])

    def strata(self) -> list[tuple[str, str]]:
        """`linked` for a query with at least one gold link, else `unlinked` (reads the gold)."""
        gold_q, _ = link_gold(
            cache_key(self.store.gold(self.split, "links.csv")),
            cache_key(self.store.root / "index" / self.split / "query_ids.txt"),
            cache_key(self.store.root / "index" / self.split / "source_ids.txt"),
        )
        linked = set(gold_q.tolist())
        return [(q, "linked" if i in linked else "unlinked") for q, i in self.ids()[0].items()]

    def folds(self) -> dict[str, str]:
        """On the cross-validated split, each query's fold (the split's `folds.csv`)."""
        with open(self.store.public(self.split, "folds.csv"), encoding="utf-8", newline="") as f:
            return {r["query_id"]: str(r["fold"]) for r in csv.DictReader(f)}

    def score(self, parsed: Links, only: frozenset | None = None) -> Scored:
        if self.task.is_cross_validated(self.split):
            return self._score_folds(parsed, only)
        return score_links(self, parsed, only)

    def _score_folds(self, parsed: Links, only) -> Scored:
        """Each fold's queries scored as their own test set (`score_links` restricted to them);
        the mean and std over the folds as `fold_summary` takes them, and a ranking cut's figures
        averaged over the folds, as the paper's Table 3 reports them (each fold's beside)."""
        by: dict[str, set] = {}
        for q, f in self.folds().items():
            if only is None or q in only:
                by.setdefault(f, set()).add(q)
        folds = {
            f: score_links(self, parsed, frozenset(by[f])) for f in sorted(by, key=metrics.fold_key)
        }
        out = fold_summary(self.task, folds, "query")
        cuts = [sc.extra.get("cuts") for sc in folds.values()]
        if cuts and all(cuts):
            out.extra["cuts"] = {
                k: {
                    c: (
                        None
                        if any(cut[k][c] is None for cut in cuts)
                        else float(np.mean([cut[k][c] for cut in cuts]))
                    )
                    for c in metrics.CUT_COLUMNS
                }
                for k in cuts[0]
            }
            out.extra["cross_validation"]["cuts"] = dict(zip(folds, cuts, strict=True))
        return out


def score_links(fam: LinkFamily, parsed: Links, only: frozenset | None = None) -> Scored:
    """Loci Similes as its package scores it (`metrics.loci_links`), and the IR ranking metrics
    when the submission has scores (`metrics.link_ranking_ir`); `only` keeps those queries."""
    known = _id_arrays(fam.store, fam.split)
    if known is not None and only is None:
        n_q, n_s = len(known[0]), len(known[1])  # no dict of 170k ids to build
    else:
        qidx, sidx = fam.ids()
        n_q, n_s = len(qidx), len(sidx)
    index = fam.store.root / "index" / fam.split
    if known is not None:
        gold_q, gold_s = _link_gold_arrow(
            cache_key(fam.store.gold(fam.split, "links.csv")),
            cache_key(index / "query_ids.txt"),
            cache_key(index / "source_ids.txt"),
        )
    else:
        gold_q, gold_s = link_gold(
            cache_key(fam.store.gold(fam.split, "links.csv")),
            cache_key(index / "query_ids.txt"),
            cache_key(index / "source_ids.txt"),
        )
    keep = None
    if only is not None:
        keep = np.zeros(n_q, dtype=bool)
        keep[[qidx[k] for k in only if k in qidx]] = True
    vals, notes = metrics.loci_links(gold_q, gold_s, parsed.q, parsed.s, n_q, n_s, keep)
    if parsed.score is not None:
        ranking, why = metrics.link_ranking_ir(
            gold_q,
            gold_s,
            parsed.q,
            parsed.s,
            parsed.score,
            n_q,
            n_s,
            source_order_of(cache_key(index / "source_ids.txt")),
            keep,
        )
    else:
        ranking = dict.fromkeys(metrics.ir_names())
        why = ["recall@k, map@k, mrr@k and ndcg@k need a score column"]
    vals.update(ranking)
    extra = {}
    cut_at = fam.task.cut_at
    if cut_at and parsed.score is not None:  # the top k of each query's ranking, as a set
        extra["cuts"] = metrics.ranking_cuts(
            gold_q,
            gold_s,
            parsed.q,
            parsed.s,
            parsed.score,
            n_q,
            n_s,
            source_order_of(cache_key(index / "source_ids.txt")),
            cut_at,
            keep,
        )
    judged_path = fam.store.gold(fam.split, JUDGED)
    if judged_path.is_file():  # a campaign judged some pairs: the condensed-list variants too
        judged_q, judged_s = link_gold(
            cache_key(judged_path),
            cache_key(index / "query_ids.txt"),
            cache_key(index / "source_ids.txt"),
        )
        extra["condensed"] = condensed_links(
            gold_q, gold_s, judged_q, judged_s, parsed, n_q, n_s, index, keep
        )
    return Scored({"all": vals}, [f"all: {w}" for w in notes + why], extra)


def condensed_links(gold_q, gold_s, judged_q, judged_s, parsed, n_q, n_s, index, keep) -> dict:
    """The ranking metrics on condensed lists (Sakai 2007): each query's ranked list with every
    prediction that is neither a gold link nor a pair judged not to be one dropped, then the same
    metrics; and how many predictions (of the queries scored) were unjudged."""
    n = np.int64(n_s)
    pq = np.asarray(parsed.q, dtype=np.int64)
    judged = np.concatenate(
        [gold_q.astype(np.int64) * n + gold_s, judged_q.astype(np.int64) * n + judged_s]
    )
    # only a query with a judged pair can have a judged prediction: look those up alone
    judged_query = np.zeros(n_q, dtype=bool)
    judged_query[judged // n] = True
    mask = judged_query[pq]
    near = np.flatnonzero(mask)
    mask[near] = np.isin(pq[near] * n + np.asarray(parsed.s, dtype=np.int64)[near], judged)
    scored_q = np.ones(len(mask), dtype=bool) if keep is None else keep[np.asarray(parsed.q)]
    out: dict = {"unjudged": int((~mask & scored_q).sum()), "judged": int((mask & scored_q).sum())}
    if parsed.score is None:
        out["metrics"] = {"all": dict.fromkeys(metrics.ir_names())}
        out["notes"] = ["condensed ranking metrics need a score column"]
        return out
    ranking, why = metrics.link_ranking_ir(
        gold_q,
        gold_s,
        np.asarray(parsed.q)[mask],
        np.asarray(parsed.s)[mask],
        np.asarray(parsed.score)[mask],
        n_q,
        n_s,
        source_order_of(cache_key(index / "source_ids.txt")),
        keep,
    )
    out["metrics"] = {"all": ranking}
    out["notes"] = why
    return out


JUDGED = "judged.csv"  # beside a links gold: the pairs an assessment campaign judged not links


def _id_arrays(store: TaskStore, split: str):
    """The query and source ids as pyarrow binary arrays (for `arrow_links`), from the server's
    index or else the public segment files; None where neither is there or pyarrow is not."""
    index = store.root / "index" / split
    q, s = index / "query_ids.txt", index / "source_ids.txt"
    try:
        if q.is_file() and s.is_file():
            return _id_array_cached(cache_key(q)), _id_array_cached(cache_key(s))
        q, s = store.public(split, "queries.csv"), store.public(split, "sources.csv")
        if q.is_file() and s.is_file():  # a participant's download: the public segment files
            return _public_id_array(cache_key(q)), _public_id_array(cache_key(s))
    except ImportError:
        pass
    return None


@functools.lru_cache(maxsize=8)
def _public_id_array(key: tuple):
    """The seg_id column of a public segment file, in file order (as `_public_ids` numbers it)."""
    # heavy: pyarrow loads only when a link table is read
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(
        key[0],
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            include_columns=["seg_id"],
            column_types={"seg_id": pa.binary()},
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    return table.column("seg_id").combine_chunks()


@functools.lru_cache(maxsize=8)
def _id_array_cached(key: tuple):
    with open(key[0], "rb") as f:
        return id_array(f.read())


@functools.lru_cache(maxsize=8)
def source_order_of(key: tuple) -> np.ndarray:
    """Each source's position among the source ids sorted by byte order (trec_eval's tie rule)."""
    try:
        # heavy: pyarrow loads only when a link table is read
        import pyarrow.compute as pc

        ranked = pc.sort_indices(_id_array_cached(key))  # binary values: byte order
        sorted_ids = np.frombuffer(ranked.buffers()[1], np.uint64, len(ranked), ranked.offset * 8)
    except ImportError:
        ids = [i.encode("utf-8") for i in _id_index(key)]
        sorted_ids = np.asarray(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
    order = np.empty(len(sorted_ids), dtype=np.int64)
    order[sorted_ids] = np.arange(len(sorted_ids))
    return order


@functools.lru_cache(maxsize=8)
def _link_gold_arrow(key: tuple, qkey: tuple, skey: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The gold links as index arrays, read like a submission (the gold is a link table too)."""
    got = arrow_links(key[0], _id_array_cached(qkey), _id_array_cached(skey))
    if got is None:  # pragma: no cover - a gold file the importer wrote is always well-formed
        return link_gold(key, qkey, skey)
    return got[0], got[1]


@functools.lru_cache(maxsize=8)
def _id_index(key: tuple) -> dict[str, int]:
    with open(key[0], encoding="utf-8") as f:
        return {line[:-1]: i for i, line in enumerate(f)}


def _segment_ids(store: TaskStore, split: str, role: str) -> dict[str, int]:
    index = store.root / "index" / split / f"{role}_ids.txt"
    if index.is_file():
        return _id_index(cache_key(index))
    return _public_ids(
        cache_key(store.public(split, {"query": "queries.csv", "source": "sources.csv"}[role]))
    )


@functools.lru_cache(maxsize=8)
def _public_ids(key: tuple) -> dict[str, int]:
    with open(key[0], encoding="utf-8", newline="") as f:
        reader = csv_reader(f.read(), "csv")
    next(reader, None)
    return {row[0]: i for i, row in enumerate(r for r in reader if r)}


def _names(store: TaskStore, split: str) -> tuple[list[str], list[str]]:
    return list(_segment_ids(store, split, "query")), list(_segment_ids(store, split, "source"))


@functools.lru_cache(maxsize=8)
def link_gold(key: tuple, qkey: tuple, skey: tuple) -> tuple[np.ndarray, np.ndarray]:
    qidx, sidx = _id_index(qkey), _id_index(skey)
    with open(key[0], encoding="utf-8", newline="") as f:
        reader = csv_reader(f.read(), "csv")
    next(reader)
    pairs = [(qidx[r[0]], sidx[r[1]]) for r in reader if r]
    arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return arr[:, 0].copy(), arr[:, 1].copy()


FAMILIES = {
    "instances": Keyed,
    "targets": Keyed,
    "tokens": Tokens,
    "links": LinkFamily,
}  # the row families; scorer.kinds adds the spans family, which builds on Family

__all__ = ["FAMILIES", "Family", "Links", "Scored"]
