"""Competition bundles: a competition and its tasks as data (docs/bundles.md).

A bundle is a directory (or a zip of one) holding `competition.yaml` (a `CompetitionSpec`) and the
files it names: pages in Markdown, each task's public inputs and gold. `read_bundle` validates all
of it and reports every problem at once, each located by its YAML path and line or by its file and
line; `install_tasks` writes the tasks into the data directory in the layout their scorer family
reads, through the exposure rule; `export_task` writes an installed task back out as bundle files.
A bundle never carries code: no key names a function, and `.py` files are refused.
"""

from __future__ import annotations

import copy
import csv
import difflib
import io
import json
import os
import posixpath
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError

from tasks import builtin_ids, catalogue, register_declared, safezip, unregister_declared
from tasks.base import AGGREGATES, Task
from tasks.builtin import builtin_spec
from tasks.bundle_models import (
    GOLD_NAME,
    KNOWN_METRICS,
    NAME,
    REQUIRED_INPUTS,
    BoardSpec,
    CompetitionSpec,
    FactField,
    FormatSpec,
    PageSpec,
    PhaseSpec,
    SplitSpec,
    TaskSpec,
    board_problems,
    task_from_spec,
)
from tasks.declared import DECLARATION, declaration_path, declared_tasks, read_declaration
from tasks.errors import PalimpsestError
from tasks.exposure import check_tree, exposure_of_tree
from tasks.safezip import ZipLimits
from tasks.store import StagedImport, TaskStore, write_jsonl

MANIFEST = "competition.yaml"
MiB = 1024 * 1024
MAX_ZIP_BYTES = 64 * MiB
MAX_UNZIPPED_BYTES = 512 * MiB
MAX_FILES = 2000
MAX_RATIO = 100  # uncompressed / compressed, per member: above it, a bomb
MAX_PAGE_CHARS = 50_000  # the server's MAX_MARKDOWN
MAX_ROW_PROBLEMS = 20  # per file: then "and N more"
SHOW_IDS = 5


class BundleProblem(NamedTuple):
    """One thing wrong with a bundle: `path` is a YAML path ("tasks[0].metrics[1]") or a file
    path inside the bundle; `line` its line (in competition.yaml, or in that file)."""

    path: str
    line: int | None
    message: str


class BundleInvalid(PalimpsestError):
    """A bundle with problems; carries every one of them."""

    def __init__(self, problems: list[BundleProblem], files: frozenset[str] = frozenset()):
        self.problems = list(problems)
        self.files = frozenset(files)  # the problem paths that are files of the bundle
        super().__init__(str(self))

    def render(self, p: BundleProblem) -> str:
        line = "" if p.line is None else f"{p.line}:"
        if p.path in self.files:
            return f"{p.path}:{line} {p.message}"
        return f"{MANIFEST}:{line} {p.path}: {p.message}"

    def __str__(self) -> str:
        return "\n".join(self.render(p) for p in self.problems)

    def to_list(self) -> list[dict]:
        return [p._asdict() for p in self.problems]


@dataclass
class Bundle:
    """A bundle that passed validation: its root directory, spec, pages and built tasks."""

    root: Path
    spec: CompetitionSpec
    pages: dict[str, tuple[str, str]] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)


# ----------------------------------------------------------------------------- problems


def yaml_path(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top)"


class _Found:
    """The problems found so far, located by the YAML node map of competition.yaml."""

    def __init__(self) -> None:
        self.problems: list[BundleProblem] = []
        self.files: set[str] = set()
        self.lines: dict[tuple, int] = {}

    def at(self, loc: tuple, message: str) -> None:
        loc = tuple(loc)
        probe = loc
        while probe and probe not in self.lines:
            probe = probe[:-1]
        self.problems.append(BundleProblem(yaml_path(loc), self.lines.get(probe, 1), message))

    def in_file(self, rel: str, line: int | None, message: str) -> None:
        self.files.add(rel)
        self.problems.append(BundleProblem(rel, line, message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise BundleInvalid(self.problems, frozenset(self.files))


MAX_YAML_DEPTH = 64  # nested mappings and lists: a competition.yaml needs about 8


class YamlRefused(yaml.MarkedYAMLError):
    """A YAML document read in bounded work refuses what would make it unbounded: an alias or an
    anchor (a bundle has no need of them, and aliases expand), nesting deeper than
    MAX_YAML_DEPTH. `problem` names it, `problem_mark` where it is."""


def _refusal(event, depth: int) -> YamlRefused | None:
    """What is wrong with one parser event at a nesting depth (None: nothing)."""
    if isinstance(event, yaml.AliasEvent):
        return YamlRefused(
            None,
            None,
            f"an alias (*{event.anchor}): aliases and anchors are not allowed here; write the "
            "value out",
            event.start_mark,
        )
    if getattr(event, "anchor", None) is not None:
        return YamlRefused(
            None,
            None,
            f"an anchor (&{event.anchor}): aliases and anchors are not allowed here; write the "
            "value out",
            event.start_mark,
        )
    if depth > MAX_YAML_DEPTH:
        return YamlRefused(
            None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark
        )
    return None


def _check_events(text: str) -> None:
    """The document's parser events through libyaml (when PyYAML has it), refused at the first
    alias, anchor or level too deep: in C, because PyYAML's own scanner spends a moment per token
    on a line of hundreds of open brackets before its composer could stop it."""
    loader_class = getattr(yaml, "CSafeLoader", None)
    if loader_class is None:
        return
    loader = loader_class(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            problem = _refusal(event, depth)
            if problem is not None:
                raise problem
    except yaml.MarkedYAMLError as e:
        if isinstance(e, YamlRefused) or "nesting depth" not in str(e.problem):
            raise
        # libyaml's own bound (1,000 levels) met while it scans ahead
        raise YamlRefused(
            None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", e.problem_mark
        ) from None
    finally:
        loader.dispose()


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader without aliases or anchors and with bounded nesting: the text's events are
    checked first (`_check_events`), and the composer refuses them again before anything is built,
    so that every document costs work linear in its size."""

    def __init__(self, stream):
        if isinstance(stream, str):
            _check_events(stream)
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise YamlRefused(
                None,
                None,
                f"an alias (*{event.anchor}): aliases and anchors are not allowed here; write the "
                "value out",
                event.start_mark,
            )
        if getattr(event, "anchor", None) is not None:
            raise YamlRefused(
                None,
                None,
                f"an anchor (&{event.anchor}): aliases and anchors are not allowed here; write "
                "the value out",
                event.start_mark,
            )
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._depth += 1
            if self._depth > MAX_YAML_DEPTH:
                raise YamlRefused(
                    None,
                    None,
                    f"nested more than {MAX_YAML_DEPTH} levels deep",
                    event.start_mark,
                )
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)


class _PlainDumper(yaml.SafeDumper):
    """SafeDumper that writes a value used twice out twice (no anchors, no aliases)."""

    def ignore_aliases(self, data) -> bool:
        return True


def load_yaml(text: str):
    """One YAML document read in bounded work (`BoundedLoader`): YamlRefused (a YAMLError) for an
    alias, an anchor or nesting too deep, YAMLError for anything else that is not YAML."""
    loader = BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _node_lines(node, loc: tuple, out: dict) -> None:
    """Each YAML path's line (1-based): a mapping entry's is its key's line."""
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark)
            out[loc + (key,)] = k.start_mark.line + 1
            _node_lines(v, loc + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _node_lines(v, loc + (i,), out)


def _duplicate_keys(node, loc: tuple, found: _Found) -> None:
    """A key given twice in one mapping (YAML keeps the last silently): a problem on its line."""
    if isinstance(node, yaml.MappingNode):
        seen: dict = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else None
            if key is not None and key in seen:
                found.problems.append(
                    BundleProblem(
                        yaml_path(loc + (key,)),
                        k.start_mark.line + 1,
                        f"{key!r} given twice (first on line {seen[key]}): YAML would keep the "
                        "last one silently",
                    )
                )
            elif key is not None:
                seen[key] = k.start_mark.line + 1
            _duplicate_keys(v, loc + (key if key is not None else str(k.start_mark),), found)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _duplicate_keys(v, loc + (i,), found)


def problem_message(err: dict) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key (not part of the bundle format; a bundle names no code)"
    if kind == "missing":
        return "required key missing"
    return err["msg"].removeprefix("Value error, ")


def _schema_errors(e: ValidationError, prefix: tuple, found: _Found) -> None:
    for err in e.errors():
        found.at(prefix + tuple(err["loc"]), problem_message(err))


def _drop(data, loc: list) -> bool:
    """Remove what `loc` names from `data` (a key, or a list item), or, when it names nothing
    there (a missing key), what holds it; False when only the whole would go."""
    while loc:
        parent = data
        try:
            for part in loc[:-1]:
                parent = parent[part]
        except (KeyError, IndexError, TypeError):
            loc = loc[:-1]
            continue
        last = loc[-1]
        if isinstance(parent, dict) and isinstance(last, str) and last in parent:
            del parent[last]
            return True
        if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
            del parent[last]
            return True
        loc = loc[:-1]
    return False


def _salvage(model: type[BaseModel], data, rounds: int = 8):
    """The model validated from `data` without what it refuses (reported apart), for the checks
    that need a typed spec; None when nothing can be kept. A list item dropped here shifts the
    items after it: the checks that report list items by index read the raw lists."""
    data = copy.deepcopy(data)
    for _ in range(rounds):
        try:
            return model.model_validate(data)
        except ValidationError as e:
            # the last list items first, so that one round's drops leave the others' places
            locs = sorted((list(err["loc"]) for err in e.errors()), key=repr, reverse=True)
            dropped = [_drop(data, loc) for loc in locs]
            if not any(dropped):
                return None
    return None


# ----------------------------------------------------------------------------- zips


ZIP_LIMITS = ZipLimits(MAX_ZIP_BYTES, MAX_UNZIPPED_BYTES, MAX_FILES, MAX_RATIO, noun="bundle")


# the `public_files` folder of a starting kit: its files may be code (a baseline script, a
# notebook), which the server never runs and serves as files; Python anywhere else is refused
KIT_FOLDER = "starting_kit"
MAX_MANIFEST_BYTES = 1024 * 1024  # what of a zipped competition.yaml is read to find its kit


def kit_paths(data) -> frozenset[str]:
    """The files a manifest (as read, unchecked) names in its tasks' starting kits, normalized."""
    out = set()
    tasks = data.get("tasks") if isinstance(data, dict) else None
    for t in tasks if isinstance(tasks, list) else []:
        pf = t.get("public_files") if isinstance(t, dict) else None
        kit = pf.get(KIT_FOLDER) if isinstance(pf, dict) else None
        for rel in kit if isinstance(kit, list) else []:
            if isinstance(rel, str) and ".." not in rel.replace("\\", "/").split("/"):
                out.add(posixpath.normpath(rel.replace("\\", "/")))
    return frozenset(out)


def _zipped_kit(source: Path) -> tuple[str, frozenset[str]]:
    """(the folder of competition.yaml in the zip, the kit files it names); nothing when it
    cannot be read within the bounds (the full check then reports why)."""
    try:
        with zipfile.ZipFile(source) as zf:
            names = [i for i in zf.infolist() if i.filename.rsplit("/", 1)[-1] == MANIFEST]
            (info,) = sorted(names, key=lambda i: i.filename.count("/"))[:1] or [None]
            if info is None or info.file_size > MAX_MANIFEST_BYTES:
                return "", frozenset()
            text = zf.read(info).decode("utf-8")
        loader = BoundedLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except (zipfile.BadZipFile, OSError, ValueError, yaml.YAMLError, YamlRefused):
        return "", frozenset()
    return info.filename[: -len(MANIFEST)], kit_paths(data)


def _no_code(allowed: frozenset[str], prefix: str = ""):
    def refuse(name: str) -> str | None:
        if not name.endswith(".py"):
            return None
        if name.startswith(prefix) and name[len(prefix) :] in allowed:
            return None  # a starting kit's script: served as a file, never run
        return "a bundle carries no Python outside its starting kit (.py files refused)"

    return refuse


def _zip_problems(source: Path) -> tuple[list[BundleProblem], list[zipfile.ZipInfo]]:
    """Everything refused in a zip before anything is extracted (bombs, slips, links, code)."""
    prefix, kit = _zipped_kit(source)
    problems, members = safezip.check(source, ZIP_LIMITS, _no_code(kit, prefix))
    return [BundleProblem(n, None, m) for n, m in problems], members


def _extract(source: Path, work_dir: Path | None) -> Path:
    """The zip's files in a new directory under `work_dir` (else a temporary one), after every
    member was checked; the bundle's root there."""
    problems, members = _zip_problems(source)
    if problems:
        raise BundleInvalid(problems, frozenset(p.path for p in problems))
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    dest = Path(tempfile.mkdtemp(prefix="bundle-", dir=work_dir))
    try:
        _write_members(source, members, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    if not (dest / MANIFEST).is_file():  # a zip of the bundle's folder
        tops = list(dest.iterdir())
        if len(tops) == 1 and (tops[0] / MANIFEST).is_file():
            return tops[0]
    return dest


def _write_members(source: Path, members: list[zipfile.ZipInfo], dest: Path) -> None:
    try:
        safezip.write(source, members, dest, ZIP_LIMITS)
    except safezip.ZipRefused as e:
        problems = [BundleProblem(n, None, m) for n, m in e.problems]
        raise BundleInvalid(problems, frozenset({source.name})) from None


# ----------------------------------------------------------------------------- files


class _Files:
    """The bundle's files as competition.yaml names them: checked once, read once."""

    def __init__(self, root: Path, found: _Found):
        self.root = root
        self.real = root.resolve()
        self.found = found
        self.texts: dict[str, str] = {}

    def read(self, rel, loc: tuple, code: bool = False) -> str | None:
        """The relative path, normalized, when it names a readable UTF-8 file inside the bundle;
        else None, with the problem reported at `loc`."""
        if not isinstance(rel, str):
            return None
        if rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", rel):
            self.found.at(loc, f"{rel!r}: an absolute path; name files relative to the bundle")
            return None
        parts = rel.replace("\\", "/").split("/")
        if ".." in parts:
            self.found.at(loc, f"{rel!r}: a path outside the bundle")
            return None
        norm = posixpath.normpath("/".join(parts))
        if norm in self.texts:
            return norm
        p = self.root / norm
        if not os.path.lexists(p):
            self.found.at(loc, f"{rel!r}: no such file in the bundle")
            return None
        real = p.resolve()
        if not real.is_relative_to(self.real):
            self.found.at(loc, f"{rel!r}: a symbolic link to a file outside the bundle")
            return None
        if not real.is_file():
            self.found.at(loc, f"{rel!r}: not a file")
            return None
        if norm.endswith(".py") and not code:
            self.found.at(loc, f"{rel!r}: a bundle carries no Python outside its starting kit")
            return None
        try:
            data = real.read_bytes()
        except OSError as e:
            self.found.at(loc, f"{rel!r}: unreadable ({e.strerror})")
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            self.found.at(loc, f"{rel!r}: not UTF-8 (line {line}, byte {e.start})")
            return None
        self.texts[norm] = text.removeprefix("\ufeff")
        return norm


def _tree_problems(root: Path, found: _Found, kit: frozenset[str] = frozenset()) -> None:
    """Files no bundle may hold, wherever they are: Python outside the starting kits (`kit`),
    and links leading out of it."""
    real = root.resolve()
    for d, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            p = Path(d) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink() and not p.resolve().is_relative_to(real):
                found.in_file(rel, None, "a symbolic link leading outside the bundle (refused)")
            elif name.endswith(".py") and name in files and rel not in kit:
                found.in_file(
                    rel, None, "a bundle carries no Python outside its starting kit (refused)"
                )


def _rows(text: str, rel: str, found: _Found, required: tuple[str, ...], numeric: str | None):
    """The JSON Lines rows of a task file, each checked to hold `required` (and a number in
    `numeric`): [(line, row)] of the good ones; the rest are problems naming file, line, field."""
    out, bad = [], 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            msg = f"not JSON ({e.msg})"
            row = None
        else:
            msg = None if isinstance(row, dict) else "a row must be a JSON object"
        if msg is None:
            missing = [f for f in required if f not in row]
            if missing:
                msg = f"missing field(s) {', '.join(missing)}"
            elif numeric and (
                isinstance(row[numeric], bool) or not isinstance(row[numeric], (int, float))
            ):
                msg = f"field {numeric}: a number expected, found {json.dumps(row[numeric])[:40]}"
            else:
                bad_key = [f for f in required if isinstance(row[f], (dict, list))]
                if bad_key:
                    msg = f"field {bad_key[0]}: a string or a number expected"
        if msg is not None:
            bad += 1
            if bad <= MAX_ROW_PROBLEMS:
                found.in_file(rel, n, msg)
            continue
        out.append((n, row))
    if bad > MAX_ROW_PROBLEMS:
        found.in_file(rel, None, f"and {bad - MAX_ROW_PROBLEMS} more bad row(s)")
    return out


def _ids(rows, key: list[str], rel: str, found: _Found) -> list[str]:
    seen: dict[str, int] = {}
    for n, row in rows:
        k = "/".join(str(row[f]) for f in key)
        if k in seen:
            found.in_file(rel, n, f"{'/'.join(key)} {k!r} repeats line {seen[k]}")
        else:
            seen[k] = n
    return list(seen)


def _examples(ids) -> str:
    ids = sorted(ids)
    more = f" and {len(ids) - SHOW_IDS} more" if len(ids) > SHOW_IDS else ""
    return ", ".join(repr(i) for i in ids[:SHOW_IDS]) + more


# ----------------------------------------------------------------------------- checks


def _closest(name: str, names) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _board_or_none(raw) -> BoardSpec | None:
    try:
        return BoardSpec.model_validate(raw)
    except ValidationError:
        return None


def _raw_list(raw: dict, key: str) -> list:
    v = raw.get(key)
    return v if isinstance(v, list) else []


def _check_names(spec: TaskSpec, raw: dict, at: tuple, found: _Found) -> None:
    """Metrics, subsets and splits named consistently (list items by their place in the file)."""
    value = [f for f in spec.format.fields if f.name not in spec.format.key]
    value_kind = value[0].kind if value else None
    for j, m in enumerate(_raw_list(raw, "metrics")):
        if isinstance(m, str) and m not in KNOWN_METRICS:
            found.at(at + ("metrics", j), f"unknown metric {m!r}{_closest(m, KNOWN_METRICS)}")
        elif isinstance(m, str) and (bad := catalogue.metric_problem(spec.family, m, value_kind)):
            found.at(at + ("metrics", j), bad)
    if spec.primary.metric in spec.metrics and not catalogue.metric_problem(
        spec.family, spec.primary.metric
    ):
        bad = catalogue.primary_problem(spec.family, spec.primary.metric)
        if bad:
            found.at(at + ("primary", "metric"), bad)
    if spec.primary.metric not in spec.metrics:
        found.at(
            at + ("primary", "metric"),
            f"the primary metric {spec.primary.metric!r} is not among the metrics "
            f"({', '.join(spec.metrics)})",
        )
    subsets = set(spec.subsets)
    if spec.primary.subset not in subsets:
        found.at(
            at + ("primary", "subset"),
            f"the primary subset {spec.primary.subset!r} is not among the subsets "
            f"({', '.join(spec.subsets)})",
        )
    if "macro" in subsets and not [s for s in spec.subsets if s not in AGGREGATES]:
        found.at(at + ("subsets",), "macro averages the groups: declare the groups beside it")
    for j, s in enumerate(spec.secondary):
        if s.metric not in spec.metrics:
            found.at(at + ("secondary", j, "metric"), f"{s.metric!r} is not among the metrics")
        if s.subset not in subsets:
            found.at(at + ("secondary", j, "subset"), f"{s.subset!r} is not among the subsets")
    for j, r in enumerate(spec.references):
        if r.metric not in spec.metrics:
            found.at(at + ("references", j, "metric"), f"{r.metric!r} is not among the metrics")
        if r.subset not in subsets:
            found.at(at + ("references", j, "subset"), f"{r.subset!r} is not among the subsets")
    names = set()
    for j, ph in enumerate(_raw_list(raw, "phases")):
        name, split = (ph.get("name"), ph.get("split")) if isinstance(ph, dict) else (None, None)
        if isinstance(name, str):
            if name in names:
                found.at(at + ("phases", j, "name"), f"phase {name!r} declared twice")
            names.add(name)
        if not isinstance(split, str):
            continue
        if split not in spec.splits:
            found.at(
                at + ("phases", j, "split"),
                f"unknown split {split!r}{_closest(split, spec.splits)} "
                f"(splits: {', '.join(spec.splits)})",
            )
        elif spec.splits[split].gold is None:
            found.at(at + ("phases", j, "split"), f"the {split} split has no gold to score")
        elif ph.get("published_on") == "whole" and (
            not spec.splits[split].hidden or ph.get("public_fraction") == 1
        ):
            # only a phase with a private part has a choice: its split's gold hidden, a part of
            # it private
            found.at(
                at + ("phases", j, "published_on"),
                f"'whole' names the whole test split beside its private part: the {split} "
                "split has no private part (its gold is not hidden, or public_fraction is 1)",
            )
    if spec.family in ("instances", "targets"):
        value = next(f for f in spec.format.fields if f.name not in spec.format.key)
        if value.kind not in ("float", "label01"):
            found.at(
                at + ("format", "fields"),
                f"the predicted value {value.name} is a {value.kind}: float or label01 expected",
            )


def _gold_field(spec: TaskSpec) -> str:
    return spec.gold_value or ("label" if spec.family == "instances" else "score")


def _check_split(
    spec: TaskSpec, name: str, split: SplitSpec, at: tuple, files: _Files, found: _Found
) -> bool:
    """A split's files: inside the bundle, readable, the names its family reads, rows with the
    declared fields, the same ids in inputs and gold. True when its files could all be read."""
    at = at + ("splits", name)
    ok = True
    inputs = []
    for j, rel in enumerate(split.inputs):
        norm = files.read(rel, at + ("inputs", j))
        ok &= norm is not None
        inputs.append(norm)
    base = [posixpath.basename(r) for r in split.inputs]
    for dup in sorted({b for b in base if base.count(b) > 1}):
        found.at(at + ("inputs",), f"two inputs named {dup}: a split's files need distinct names")
    needed = [n for n in REQUIRED_INPUTS[spec.family] if n not in base]
    if needed:
        found.at(
            at + ("inputs",),
            f"the {spec.family} family reads {', '.join(needed)}: name the file(s) so",
        )
        ok = False
    if split.hidden:
        for rel in inputs:
            if rel is not None:
                _check_hidden_inputs(spec, name, rel, files.texts[rel], found)
    gold_name = GOLD_NAME[spec.family]
    if gold_name in base and split.gold is not None and published(split):
        found.at(at + ("inputs",), f"an input is named {gold_name}, the name of the public gold")
    gold = files.read(split.gold, at + ("gold",)) if split.gold is not None else None
    ok &= split.gold is None or gold is not None
    if spec.family not in ("instances", "targets") or not ok:
        return ok
    key = list(spec.format.key)
    cv = spec.cross_validation
    if cv is not None and name == cv.split:  # a unit is a fold's instance: both name it
        key = [cv.field, *key]
    groups = [s for s in spec.subsets if s not in AGGREGATES]
    grouped = (spec.group_field,) if groups else ()
    first = "targets.jsonl" if spec.family == "targets" else "inputs.jsonl"
    rel = inputs[base.index(first)]
    in_key = ["target"] if spec.family == "targets" else key
    in_rows = _rows(files.texts[rel], rel, found, tuple(in_key) + grouped, None)
    in_ids = _ids(in_rows, in_key, rel, found)
    if gold is None:
        return ok
    g_rows = _rows(files.texts[gold], gold, found, tuple(key) + grouped, _gold_field(spec))
    g_ids = _ids(g_rows, key, gold, found)
    only_gold, only_inputs = set(g_ids) - set(in_ids), set(in_ids) - set(g_ids)
    if spec.family == "instances" and (only_gold or only_inputs):
        parts = []
        if only_gold:
            parts.append(f"{len(only_gold)} only in the gold ({_examples(only_gold)})")
        if only_inputs:
            parts.append(f"{len(only_inputs)} only in the inputs ({_examples(only_inputs)})")
        found.at(
            at + ("gold",),
            f"the gold and the inputs of {name} name different {'/'.join(key)}s: "
            + "; ".join(parts),
        )
    return ok


def _is_text(v) -> bool:
    """A value that is text and could not be a score: a string that does not read as a number."""
    if not isinstance(v, str):
        return False
    try:
        float(v.strip())
    except ValueError:
        return True
    return False


def _check_hidden_inputs(spec: TaskSpec, split: str, rel: str, text: str, found: _Found) -> None:
    """The public inputs of a split whose gold is hidden carry only what the family declares as
    inputs (tasks.catalogue): a CSV family's columns; otherwise, besides the key, the group and
    the fold, text. Anything else could carry the gold under any name, and is refused."""
    fam = catalogue.FAMILIES[spec.family]
    bad: list[tuple[int, str]] = []
    if rel.endswith(".csv"):
        header = next(csv.reader(io.StringIO(text)), [])
        extra = [c for c in header if c not in fam.input_columns]
        if extra and fam.input_columns:
            found.in_file(
                rel,
                1,
                f"column(s) {', '.join(map(repr, extra))}: the public inputs of the hidden {split} "
                f"split carry only {', '.join(fam.input_columns)}",
            )
        return
    if not rel.endswith(".jsonl"):
        return
    free = {*spec.format.key, spec.group_field, "target" if spec.family == "targets" else ""}
    if spec.cross_validation is not None:
        free.add(spec.cross_validation.field)
    for n, line in enumerate(text.splitlines(), 1):
        try:
            row = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # reported by the rows' own check
        if not isinstance(row, dict):
            continue
        for k, v in row.items():
            if k in free or (fam.input_columns and k in fam.input_columns) or _is_text(v):
                continue
            bad.append((n, f"field {k!r} holds {json.dumps(v)[:40]}"))
    for n, what in bad[:3]:
        found.in_file(
            rel,
            n,
            f"{what}: the public inputs of the hidden {split} split carry only text besides "
            f"{', '.join(sorted(f for f in free if f))} (a value here could be the gold)",
        )
    if len(bad) > 3:
        found.in_file(rel, None, f"{len(bad) - 3} more such field(s) in the hidden {split} split")


def published(split: SplitSpec) -> bool:
    """Whether a split's gold is published beside its inputs: by default when it is not hidden;
    never when it is."""
    return not split.hidden and (split.publish_gold is None or split.publish_gold)


def _check_public_files(spec: TaskSpec, at: tuple, files: _Files, found: _Found) -> bool:
    """The files published beside the splits: readable, in folders that are not splits."""
    ok = True
    for folder, rels in spec.public_files.items():
        where = at + ("public_files", folder)
        if not re.fullmatch(NAME, folder) or folder in spec.splits:
            found.at(where, f"folder {folder!r}: letters, digits, _.- and not a split's name")
            ok = False
        names = folder_names(rels)
        for dup in sorted({b for b in names if names.count(b) > 1}):
            found.at(where, f"the file {dup} twice: a folder's files need distinct paths")
        for j, rel in enumerate(rels):
            ok &= files.read(rel, where + (j,), code=folder == KIT_FOLDER) is not None
    return ok


def folder_names(rels: list[str]) -> list[str]:
    """Each file's path in its public folder: its path in the bundle below the deepest folder
    the files share, so that a folder's own folders are kept (`kit/README.md` and
    `kit/system/system.yaml` are `README.md` and `system/system.yaml`), and one file is its
    name."""
    parts = [posixpath.normpath(r).split("/") for r in rels]
    common = 0
    if parts:
        shortest = min(len(p) for p in parts) - 1  # never a file's own name
        while common < shortest and len({p[common] for p in parts}) == 1:
            common += 1
    return ["/".join(p[common:]) for p in parts]


def stage_bundle(spec: TaskSpec, root: Path, put) -> None:
    """Each file of a task where its family reads it: `put(area, split, name, source)`."""
    for name, split in spec.splits.items():
        for rel in split.inputs:
            put("public", name, posixpath.basename(rel), root / rel)
        if split.gold is not None:
            put("gold", name, GOLD_NAME[spec.family], root / split.gold)
            if published(split):  # public gold: participants may download it
                put("public", name, GOLD_NAME[spec.family], root / split.gold)
    for folder, rels in spec.public_files.items():
        for rel, name in zip(rels, folder_names(rels), strict=True):
            put("public", folder, name, root / rel)


def copy_into(base: Path):
    def put(area: str, split: str, name: str, source: Path) -> None:
        p = base / area / split / name
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, p)

    return put


def _check_exposure(spec: TaskSpec, task: Task, root: Path, at: tuple, found: _Found) -> None:
    """The exposure rule on the files the install would write (tasks.exposure)."""
    with tempfile.TemporaryDirectory(prefix="bundle-stage-") as tmp:
        stage_bundle(spec, root, copy_into(Path(tmp)))
        ex = exposure_of_tree(task, Path(tmp))
    for area in sorted(ex.labelled):
        for hidden, n in ex.leaks(area).items():
            found.at(
                at + ("splits", area),
                f"its public files label {n} instance(s) of the hidden {hidden} split "
                "(they would publish hidden gold)",
            )
    for split in sorted(ex.gold):
        if split in ex.hidden:
            continue
        for hidden, n in ex.scored_in_public(split).items():
            found.at(
                at + ("splits", split),
                f"its gold scores {n} instance(s) of the hidden {hidden} split in public",
            )


def _installed(task_id: str, home: Path | None) -> bool:
    return home is not None and (
        TaskStore(task_id, home).exists() or declaration_path(task_id, home).is_file()
    )


# ----------------------------------------------------------------------------- reading


def read_bundle(
    source: Path, *, work_dir: Path | None = None, home: Path | None = None, updating: bool = False
) -> Bundle:
    """Read and validate a bundle (a directory, or a .zip extracted under `work_dir`, else a new
    temporary directory); every problem is reported at once in one BundleInvalid. Given `home`,
    task ids already installed there are problems too, unless `updating` (an edited bundle of
    installed tasks: `tasks.taskversions`)."""
    source = Path(source)
    if source.is_dir():
        root = source
    elif source.is_file() and zipfile.is_zipfile(source):
        root = _extract(source, work_dir)
    else:
        raise BundleInvalid(
            [BundleProblem(str(source), None, "not a bundle: a directory or a .zip expected")],
            frozenset({str(source)}),
        )
    found = _Found()
    manifest = root / MANIFEST

    def stop() -> None:  # the manifest unread: Python anywhere is reported with its problem
        _tree_problems(root, found)
        found.raise_if_any()

    if not manifest.is_file():
        found.in_file(MANIFEST, None, "missing: a bundle's root holds competition.yaml")
        stop()
    try:
        text = manifest.read_bytes().decode("utf-8")
        loader = BoundedLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except UnicodeDecodeError as e:
        found.in_file(MANIFEST, None, f"not UTF-8 (byte {e.start})")
        stop()
    except YamlRefused as e:
        found.in_file(MANIFEST, e.problem_mark.line + 1, e.problem)
        stop()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        found.in_file(MANIFEST, mark.line + 1 if mark else None, f"not YAML: {e}")
        stop()
    _tree_problems(root, found, kit_paths(data))
    if not isinstance(data, dict):
        found.in_file(MANIFEST, 1, "must be a mapping (id, title, pages, tasks, ...)")
        found.raise_if_any()
    _node_lines(node, (), found.lines)
    _duplicate_keys(node, (), found)

    try:
        CompetitionSpec.model_validate(data)
    except ValidationError as e:
        _schema_errors(e, (), found)

    files = _Files(root, found)
    pages: dict[str, tuple[str, str]] = {}
    raw_pages = data.get("pages") if isinstance(data.get("pages"), list) else []
    for i, raw in enumerate(raw_pages):
        page = _salvage(PageSpec, raw) if isinstance(raw, dict) else None
        if page is None:
            continue
        if page.slug in pages:
            found.at(("pages", i, "slug"), f"page {page.slug!r} declared twice")
            continue
        rel = files.read(page.file, ("pages", i, "file"))
        if rel is None:
            continue
        body = files.texts[rel]
        if len(body) > MAX_PAGE_CHARS:
            found.at(("pages", i, "file"), f"{len(body)} characters: over {MAX_PAGE_CHARS}")
            continue
        pages[page.slug] = (page.title, body)

    raw_tasks = data.get("tasks") if isinstance(data.get("tasks"), list) else []
    built: list[Task] = []
    declared: list[tuple[tuple, dict, Task]] = []
    ids: dict[str, int] = {}
    phase_names: set[str] = set()
    builtin = set(builtin_ids())
    for i, raw in enumerate(raw_tasks):
        at = ("tasks", i)
        spec = _salvage(TaskSpec, raw) if isinstance(raw, dict) else None
        if spec is None:
            continue
        phase_names |= {p.get("name") for p in _raw_list(raw, "phases") if isinstance(p, dict)}
        if spec.id in ids:
            found.at(at + ("id",), f"task {spec.id!r} declared twice (also tasks[{ids[spec.id]}])")
        elif spec.id in builtin:
            found.at(at + ("id",), f"{spec.id!r} is the id of a built-in task")
        elif not updating and _installed(spec.id, home):
            found.at(at + ("id",), f"a task {spec.id!r} is already installed on this server")
        ids.setdefault(spec.id, i)
        _check_names(spec, raw, at, found)
        readable = all(
            [_check_split(spec, name, sp, at, files, found) for name, sp in spec.splits.items()]
            + [_check_public_files(spec, at, files, found)]
        )
        task = task_from_spec(spec)
        if readable:
            _check_exposure(spec, task, root, at, found)
        built.append(task)
        declared.append((at, raw, task))

    raw_facts = data.get("fact_fields") if isinstance(data.get("fact_fields"), list) else []
    keys: set[str] = set()
    facts: list[dict] = []
    for i, raw in enumerate(raw_facts):
        fact = _salvage(FactField, raw) if isinstance(raw, dict) else None
        if fact is None:
            continue
        if fact.key in keys:
            found.at(("fact_fields", i, "key"), f"fact field {fact.key!r} declared twice")
        keys.add(fact.key)
        facts.append(fact.model_dump(mode="json"))
        for j, ph in enumerate(fact.phases):
            if ph not in phase_names:
                found.at(
                    ("fact_fields", i, "phases", j),
                    f"unknown phase {ph!r}{_closest(ph, phase_names)}",
                )
    # each phase's boards against its task and the competition's fact sheet (a track's filter)
    # (read from the file's own lists: a board or phase its schema refused keeps its index)
    for at, raw, task in declared:
        for j, ph in enumerate(_raw_list(raw, "phases")):
            if not isinstance(ph, dict):
                continue
            specs = [_board_or_none(b) for b in _raw_list(ph, "boards")]
            for loc, message in board_problems(specs, task, facts):
                found.at(at + ("phases", j) + loc, message)
    found.raise_if_any()
    spec = CompetitionSpec.model_validate(data)
    return Bundle(root=root, spec=spec, pages=pages, tasks=built)


# ----------------------------------------------------------------------------- installing


def canonical(spec: TaskSpec) -> TaskSpec:
    """The declaration as installed: each file named where `export_task` writes it
    (`<task>/<split>/<name>`, the gold under the name its family reads)."""
    splits = {
        name: SplitSpec(
            inputs=[f"{spec.id}/{name}/{posixpath.basename(r)}" for r in sp.inputs],
            gold=f"{spec.id}/{name}/{GOLD_NAME[spec.family]}" if sp.gold is not None else None,
            hidden=sp.hidden,
            publish_gold=sp.publish_gold,
        )
        for name, sp in spec.splits.items()
    }
    public_files = {
        folder: [f"{spec.id}/{folder}/{name}" for name in folder_names(rels)]
        for folder, rels in spec.public_files.items()
    }
    return spec.model_copy(update={"splits": splits, "public_files": public_files})


def declaration_text(spec: TaskSpec) -> str:
    data = canonical(spec).model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _links_index(st: StagedImport, spec: TaskSpec) -> None:
    """The links family's id index, `index/<split>/query_ids.txt` and `source_ids.txt`: the
    segment files' `seg_id`s in file order, one a line (the scorer numbers links by them)."""
    for name in spec.splits:
        for segments, ids in (("queries.csv", "query_ids.txt"), ("sources.csv", "source_ids.txt")):
            with (st.tmp / "public" / name / segments).open(encoding="utf-8", newline="") as f:
                rows = csv.DictReader(f)
                st.write_text("index", name, ids, "".join(r["seg_id"] + "\n" for r in rows))


def install_one(
    spec: TaskSpec,
    task: Task,
    root: Path,
    store: TaskStore,
    origin: str,
    manifest: dict | None = None,
    derived: Callable[[StagedImport], None] | None = None,
) -> dict:
    """Install one task of a bundle: its files where its family reads them, its declaration, a
    manifest (a built-in importer's, else one recording the bundle), the files an importer
    derives (`derived`: an index, the human agreement); then the exposure rule, then the swap."""
    store.before_commit = lambda staged: check_tree(task.id, staged, store.home)
    with StagedImport(store) as st:

        def put(area: str, split: str, name: str, src: Path) -> None:
            shutil.copyfile(src, st.path(area, split, name))

        stage_bundle(spec, root, put)
        if spec.family == "links":
            _links_index(st, spec)
        (st.tmp / DECLARATION).write_text(declaration_text(spec), encoding="utf-8")
        if derived is not None:
            derived(st)
        if manifest is not None:
            st.commit(manifest)
            return manifest
        scored = [s for s, sp in spec.splits.items() if sp.gold is not None]
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": f"bundle:{task.id}",
            "bundle": origin,
            "splits": scored,
            "counts": {
                s: sum(1 for line in (root / sp.gold).open(encoding="utf-8") if line.strip())
                for s, sp in spec.splits.items()
                if sp.gold is not None
            },
            "notes": [],
        }
        st.commit(manifest)
    return manifest


def install_tasks(bundle: Bundle, home: Path) -> list[str]:
    """Write each task of a validated bundle into `home` (through the exposure rule), keep its
    declaration beside its files and register it; all or nothing. Returns the ids."""
    done: list[str] = []
    try:
        for spec, task in zip(bundle.spec.tasks, bundle.tasks, strict=True):
            register_declared(task)
            done.append(task.id)
            install_one(spec, task, bundle.root, TaskStore(task.id, home), bundle.spec.id)
    except BaseException:
        uninstall_tasks(done, home)
        raise
    return done


def uninstall_tasks(task_ids: list[str], home: Path) -> None:
    """Undo `install_tasks`: remove the tasks' files and unregister them."""
    for task_id in task_ids:
        root = TaskStore(task_id, home).root
        if root.exists():
            shutil.rmtree(root)
        unregister_declared(task_id)


def import_declared(task: Task, *, store: TaskStore, **_) -> dict:
    """A bundle task's importer: re-install it from its stored copy (its declaration and files
    in the data directory)."""
    with tempfile.TemporaryDirectory(prefix="bundle-export-") as tmp:
        data = export_task(task.id, store.home, Path(tmp), include_gold=True)
        spec = TaskSpec.model_validate(data)
        return install_one(spec, task_from_spec(spec), Path(tmp), store, "re-installed")


def load_declared(home: Path) -> list[str]:
    """Register every bundle-declared task installed in `home` (idempotent); their ids."""
    out = []
    for task in declared_tasks(home):
        if task.id not in builtin_ids():
            register_declared(task)
            out.append(task.id)
    return out


class ReleaseBundle:
    """What a built-in task's importer writes: the task's bundle, its spec (tasks/specs/<id>.yaml)
    and the files it names in the layout an export writes (`<task>/<split>/<name>`), staged beside
    the data directory, then installed by `install` through the path every bundle task takes (the
    declaration kept beside the files, the exposure rule, all or nothing).

    The importer writes the splits it imports (a protocol or an option may leave some out); the
    spec keeps those, each with the inputs written."""

    def __init__(self, task: Task, store: TaskStore):
        self.task, self.store = task, store
        store.root.parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix=f".{task.id}-bundle-", dir=store.root.parent))

    def path(self, folder: str, name: str) -> Path:
        p = self.root / self.task.id / folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write_jsonl(self, folder: str, name: str, rows) -> Path:
        return write_jsonl(self.path(folder, name), rows)

    def write_text(self, folder: str, name: str, text: str) -> Path:
        p = self.path(folder, name)
        p.write_text(text, encoding="utf-8", newline="\n")
        return p

    def spec(self) -> TaskSpec:
        """The task's spec, with the splits and files written; a file the spec does not name is
        an importer's mistake, refused."""
        data = copy.deepcopy(builtin_spec(self.task.id))
        written = {p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()}
        splits = {
            name: dict(sp, inputs=[r for r in sp["inputs"] if r in written])
            for name, sp in data["splits"].items()
            if sp["gold"] in written
        }
        files = {
            folder: [r for r in rels if r in written]
            for folder, rels in data["public_files"].items()
        }
        data.update(splits=splits, public_files={f: rels for f, rels in files.items() if rels})
        named = {
            r for sp in splits.values() for r in (*sp["inputs"], sp["gold"]) if r is not None
        } | {r for rels in files.values() for r in rels}
        if written - named:
            raise PalimpsestError(
                f"{self.task.id}: the importer wrote {', '.join(sorted(written - named))}, "
                f"which tasks/specs/{self.task.id}.yaml does not name"
            )
        return TaskSpec.model_validate(data)

    def install(
        self, manifest: dict, derived: Callable[[StagedImport], None] | None = None
    ) -> dict:
        """Install the bundle into the task's store with the importer's `manifest`."""
        return install_one(
            self.spec(), self.task, self.root, self.store, "release", manifest, derived
        )

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "ReleaseBundle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------- exporting


def export_task(task_id: str, home: Path, dest: Path, *, include_gold: bool) -> dict:
    """Write an installed bundle task's files under `dest/<task_id>/` and return its declaration
    (files relative to `dest`). A hidden split's gold only with `include_gold`; without, the
    split has no gold (and stays hidden)."""
    path = declaration_path(task_id, home)
    if not path.is_file():
        raise PalimpsestError(
            f"{task_id}: no bundle declaration in {Path(home) / 'tasks' / task_id} "
            "(only tasks installed from a bundle can be exported)"
        )
    spec = TaskSpec.model_validate(read_declaration(path))
    store = TaskStore(task_id, home)
    splits = {}
    for name, sp in spec.splits.items():
        for rel in sp.inputs:
            out = Path(dest) / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.public(name, posixpath.basename(rel)), out)
        gold = sp.gold
        if gold is not None and (include_gold or not sp.hidden):
            out = Path(dest) / gold
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.gold(name, GOLD_NAME[spec.family]), out)
        else:
            gold = None
        splits[name] = SplitSpec(
            inputs=sp.inputs, gold=gold, hidden=sp.hidden, publish_gold=sp.publish_gold
        )
    for folder, rels in spec.public_files.items():
        for rel, name in zip(rels, folder_names(rels), strict=True):
            out = Path(dest) / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.public(folder, name), out)
    data = spec.model_copy(update={"splits": splits}).model_dump(mode="json", exclude_none=False)
    for sp in data["splits"].values():  # the default says it (and older bundles lack the key)
        if sp["publish_gold"] is None:
            del sp["publish_gold"]
    return data


def write_bundle_zip(spec: dict, root: Path, out: Path) -> None:
    """A bundle as one zip: `spec` as competition.yaml and every file under `root` (the same
    bytes give the same zip)."""
    # a value used twice is written out twice: a bundle holds no anchors or aliases
    text = yaml.dump(spec, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=100)
    root = Path(root)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo(MANIFEST, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, text.encode("utf-8"))
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if not p.is_file() or p.is_symlink() or rel == MANIFEST:
                continue
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, p.read_bytes())


def bundle_schema() -> dict:
    """The JSON Schema of competition.yaml."""
    schema = CompetitionSpec.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Palimpsest competition bundle (competition.yaml)",
        **{k: v for k, v in schema.items() if k != "title"},
    }


__all__ = [
    "Bundle",
    "BundleInvalid",
    "BundleProblem",
    "CompetitionSpec",
    "FactField",
    "FormatSpec",
    "PageSpec",
    "BoardSpec",
    "PhaseSpec",
    "ReleaseBundle",
    "SplitSpec",
    "TaskSpec",
    "bundle_schema",
    "export_task",
    "import_declared",
    "install_tasks",
    "load_declared",
    "read_bundle",
    "uninstall_tasks",
    "write_bundle_zip",
]


if __name__ == "__main__":  # python -m tasks.bundle > docs/bundle.schema.json
    print(json.dumps(bundle_schema(), indent=2, sort_keys=True))
