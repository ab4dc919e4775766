"""The spans family: detections of reused text as pairs of character spans, per document pair
(PAN's text alignment), read from JSON Lines or PAN's detection XML and scored by
`scorer.spans`.

A split's public inputs are `pairs.jsonl` (`id`, `suspicious`, `source`: the pair and its two
documents' ids) and `documents.jsonl` (`id`, `text`); its gold, `gold.jsonl`, one row per pair:
`id`, `cases` (each `this_offset`, `this_length`, `source_offset`, `source_length` and the case's
other attributes) and the pair's own attributes (`obfuscation`: the cases' when they agree,
`mixed` when not, `no-plagiarism` for a pair without a case), which slices select pairs by.

A detection, one JSON object a line:
`{"this_reference": "suspicious-document00001.txt", "this_offset": 120, "this_length": 800,
"source_reference": "source-document00042.txt", "source_offset": 4000, "source_length": 790}`;
or PAN's XML: `<document reference="SUSP">` holding `<feature name="detected-plagiarism"
this_offset=... this_length=... source_reference=... source_offset=... source_length=.../>`, one
such document (a file of PAN's output) or several under one root element, or a zip of PAN's output
files (`SUSP-SRC.xml`, one per pair).
"""

from __future__ import annotations

import functools
import json
import operator
import posixpath
import re
import zipfile
from pathlib import Path
from xml.parsers import expat

import numpy as np

from scorer import spans
from scorer.errors import Problem, Problems, SubmissionInvalid, cut
from scorer.families import Family, Scored, cache_key, read_jsonl
from scorer.reader import Limits, _np, iter_jsonl, load

FIELDS = (
    "this_reference",
    "this_offset",
    "this_length",
    "source_reference",
    "source_offset",
    "source_length",
)
INTS = ("this_offset", "this_length", "source_offset", "source_length")
DET_TAG = "detected-plagiarism"

# a detection as PAN's evaluator writes it (its attributes in PAN's order, in double quotes, no
# entity, no blank inside a value): PAN XML of such features only is read by one pass of this
_PAN_FEATURE = re.compile(
    r'<feature\s+name="(?:[^"<&\t\n\r]*)?detected-plagiarism"\s+this_offset="(\d{1,18})"\s+'
    r'this_length="(\d{1,18})"\s+source_reference="([^"<&\t\n\r]*)"\s+'
    r'source_offset="(\d{1,18})"\s+source_length="(\d{1,18})"\s*(?:/>|>\s*</feature\s*>)'
)
_NUMBERS = operator.itemgetter(0, 1, 3, 4)  # of a `_PAN_FEATURE` match, the four integers
_PAN_DOCUMENT = re.compile(r'\s+reference="([^"<&\t\n\r]*)"\s*>')
MAX_ZIP_MEMBERS = 200_000


def _arrow_jsonl(path: Path, columns: dict):
    """A file's columns read by pyarrow's JSON reader."""
    import pyarrow as pa  # pyarrow (columns) loads only when a spans run is read
    from pyarrow import json as pj  # likewise

    schema = pa.schema([(k, v) for k, v in columns.items()])
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    # one thread: the scorer's worker shares its cores, and threads cost more CPU than they save
    return pj.read_json(path, read_options=pj.ReadOptions(use_threads=False), parse_options=opts)


def _ints(col) -> np.ndarray:
    """An int64 column without nulls as numpy (`to_numpy` on a chunked array imports pandas)."""
    parts = [_np(c, "int64") for c in col.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


@functools.lru_cache(maxsize=8)
def _corpus(pairs_key: tuple, docs_key: tuple):
    """The split's pairs ((suspicious, source) -> index, in file order), each pair's two
    documents as indices, and each document's length in characters."""
    import pyarrow as pa  # pyarrow (columns) loads only when a spans run is read

    docs = _arrow_jsonl(Path(docs_key[0]), {"id": pa.string(), "text": pa.string()})
    length = {
        d: len(t) for d, t in zip(docs["id"].to_pylist(), docs["text"].to_pylist(), strict=True)
    }
    del docs
    doc_index = {d: i for i, d in enumerate(length)}
    rows = read_jsonl(Path(pairs_key[0]))
    index = {(r["suspicious"], r["source"]): i for i, r in enumerate(rows)}
    susp = np.array([doc_index.get(r["suspicious"], -1) for r in rows], dtype=np.int64)
    src = np.array([doc_index.get(r["source"], -1) for r in rows], dtype=np.int64)
    return [r["id"] for r in rows], index, susp, src, length


@functools.lru_cache(maxsize=8)
def span_gold(gold_key: tuple, pairs_key: tuple, docs_key: tuple):
    """The gold's cases as `Spans` over the split's pairs, and the gold rows by pair index."""
    ids, _index, _s, _t, _l = _corpus(pairs_key, docs_key)
    at = {p: i for i, p in enumerate(ids)}
    rows = read_jsonl(Path(gold_key[0]))
    by_pair: list[dict] = [{} for _ in ids]
    pair, cols = [], {k: [] for k in INTS}
    for r in rows:
        i = at[r["id"]]
        by_pair[i] = r
        for c in r.get("cases", []):
            pair.append(i)
            for k in INTS:
                cols[k].append(int(c[k]))
    a = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    cases = spans.Spans(np.asarray(pair, dtype=np.int64), *(a[k] for k in INTS))
    return cases, by_pair


def _bad_int(v) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return None
        return f"must be an integer, found {cut(json.dumps(v), 40)}"
    return None


class SpanFamily(Family):
    """Detections of reused text per document pair (pan-text-alignment)."""

    def _keys(self):
        return (
            cache_key(self.store.public(self.split, "pairs.jsonl")),
            cache_key(self.store.public(self.split, "documents.jsonl")),
        )

    def corpus(self):
        return _corpus(*self._keys())

    # ------------------------------------------------------------------------------- reading

    def validate_path(self, path, limits: Limits) -> tuple[spans.Spans, str]:
        """A zip of PAN's output files (several XML files) is read member by member; any other
        file (JSON Lines, one XML file, either compressed) as a text."""
        path = Path(path)
        try:  # a file that cannot be read is the reader's to refuse (`load`, below)
            size = path.stat().st_size
            with open(path, "rb") as f:
                magic = f.read(4)
        except OSError:
            size, magic = 0, b""
        if magic in (b"PK\x03\x04", b"PK\x05\x06") and size <= limits.max_bytes:
            try:
                with zipfile.ZipFile(path) as zf:
                    members = [i for i in zf.infolist() if not i.is_dir()]
            except (zipfile.BadZipFile, OSError, ValueError):
                members = []
            if len(members) > 1:
                return self._validate_zip(path, members, limits), "xml"
        text = load(path, limits)
        return self.validate(text), ("xml" if text.text.lstrip().startswith("<") else "jsonl")

    def validate(self, text) -> spans.Spans:
        problems = Problems()
        rows: list[tuple[int, dict, str]] = []  # (line, record, where)
        body = text.text if hasattr(text, "text") else text
        if body.lstrip().startswith("<"):
            fast = self._fast_xml(body)
            if fast is not None:
                return fast
            self._xml_rows(body, "", rows, problems)
            fast = None if problems.total else self._fast_rows(rows)
            if fast is not None:
                return fast
        else:
            fast = self._fast_jsonl(body)
            if fast is not None:
                return fast
            for line, rec in iter_jsonl(body):
                if not isinstance(rec, dict):
                    problems.add(getattr(rec, "message", "not a JSON object"), line=line)
                    continue
                rows.append((line, rec, ""))
        return self._check(rows, problems)

    def _fast_jsonl(self, body: str) -> spans.Spans | None:
        """A valid JSON Lines run read by columns (pyarrow's reader, the checks on arrays); None
        for any file with a problem, which the row-by-row reader then reports line by line."""
        import pyarrow as pa  # pyarrow (columns) loads only when a spans run is read

        cols = {f: (pa.int64() if f in INTS else pa.string()) for f in FIELDS}
        try:
            table = _arrow_jsonl(pa.BufferReader(body.encode("utf-8")), cols)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        if any(table[f].null_count for f in FIELDS):
            return None
        t_ref, s_ref = table["this_reference"].to_pylist(), table["source_reference"].to_pylist()
        return self._fast_columns(t_ref, s_ref, np.stack([_ints(table[f]) for f in INTS], axis=1))

    def _fast_xml(self, body: str) -> spans.Spans | None:
        """A valid PAN XML run whose features are written as PAN writes them, read by one regular
        expression pass over each document element (expat, with no handler of its own, says the
        whole is well-formed XML); None for any other file, which `_xml_rows` then reads through
        expat's callbacks (naming the line of each problem). The two read the same detections:
        the pass is taken only where nothing could read differently (no entity, comment, CDATA
        or DTD; each document element closed before the next opens, no feature outside one;
        every feature of the document matched)."""
        if "&" in body or "<!" in body:
            return None
        parser = expat.ParserCreate()  # well-formed, nothing called back
        try:
            parser.Parse(body, True)
        except expat.ExpatError:
            return None
        parts = body.split("<document")
        if "<feature" in parts[0]:
            return None
        t_ref: list[str] = []
        for part in parts[1:]:
            head = _PAN_DOCUMENT.match(part)
            inner, close, rest = part.partition("</document")
            if head is None or not close or "<feature" in rest or "</document" in rest:
                return None
            t_ref.extend([head.group(1)] * inner.count("<feature"))
        # one match a feature, in order: a match is one tag, which holds no other "<feature"
        cols = _PAN_FEATURE.findall(body)
        if not cols or len(cols) != len(t_ref):
            return None
        s_ref = [f[2] for f in cols]
        # the digits (nothing else: the expression took at most 18 of them) parsed in one call
        digits = " ".join(map(" ".join, map(_NUMBERS, cols)))
        flat = np.fromstring(digits, dtype=np.int64, sep=" ")
        if flat.size != 4 * len(cols):
            return None
        return self._fast_columns(t_ref, s_ref, flat.reshape(-1, 4))

    def _fast_rows(self, rows) -> spans.Spans | None:
        """`rows` (PAN XML's) checked by columns; None when any has a problem."""
        try:
            t_ref = [r["this_reference"] for _l, r, _w in rows]
            s_ref = [r["source_reference"] for _l, r, _w in rows]
            v = np.array([[r[k] for k in INTS] for _l, r, _w in rows], dtype=np.int64)
        except (KeyError, ValueError, TypeError, OverflowError):
            return None
        return self._fast_columns(t_ref, s_ref, v.reshape(-1, 4))

    def _fast_columns(self, t_ref: list, s_ref: list, v: np.ndarray) -> spans.Spans | None:
        _ids, index, _s, _t, length = self.corpus()
        pair = np.fromiter(
            (index.get(k, -1) for k in zip(t_ref, s_ref, strict=True)), np.int64, len(t_ref)
        )
        if (pair < 0).any() or (v < 0).any() or (v[:, 1] == 0).any() or (v[:, 3] == 0).any():
            return None
        if not all(isinstance(x, str) for x in t_ref) or not all(isinstance(x, str) for x in s_ref):
            return None
        t_len = np.fromiter((length[x] for x in t_ref), np.int64, len(t_ref))
        s_len = np.fromiter((length[x] for x in s_ref), np.int64, len(s_ref))
        if (v[:, 0] + v[:, 1] > t_len).any() or (v[:, 2] + v[:, 3] > s_len).any():
            return None
        return spans.Spans(pair, v[:, 0], v[:, 1], v[:, 2], v[:, 3])

    def _validate_zip(self, path: Path, members, limits: Limits) -> spans.Spans:
        problems = Problems()
        if len(members) > MAX_ZIP_MEMBERS:
            raise SubmissionInvalid([Problem(f"a zip of more than {MAX_ZIP_MEMBERS} files")])
        total = sum(i.file_size for i in members)
        if total > limits.max_uncompressed_bytes:
            raise SubmissionInvalid(
                [Problem(f"the archive holds {total} bytes uncompressed, over the limit")]
            )
        rows: list[tuple[int, dict, str]] = []
        with zipfile.ZipFile(path) as zf:
            for info in members:
                name = posixpath.basename(info.filename.replace("\\", "/"))
                if not name.lower().endswith(".xml"):
                    problems.add(f"{cut(name)}: a zip of several files holds PAN's XML files only")
                    continue
                if info.flag_bits & 0x1:
                    problems.add(f"{cut(name)}: encrypted")
                    continue
                try:
                    data = zf.read(info)
                except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
                    problems.add(f"{cut(name)}: cannot be extracted ({e})")
                    continue
                try:
                    body = data.decode("utf-8-sig")
                except UnicodeDecodeError:
                    problems.add(f"{cut(name)}: not valid UTF-8")
                    continue
                self._xml_rows(body, f"{cut(name)}: ", rows, problems)
        fast = None if problems.total else self._fast_rows(rows)
        return fast if fast is not None else self._check(rows, problems)

    def _xml_rows(self, body: str, where: str, rows: list, problems: Problems) -> None:
        """PAN's detection XML: each `detected-plagiarism` feature of a `document` element a
        row, with the document's `reference` as its `this_reference`. A DTD is refused (no
        entity is ever expanded)."""
        parser = expat.ParserCreate()
        stack: list[str | None] = []

        def start(name, attrs):
            line = parser.CurrentLineNumber
            if name == "document":
                ref = attrs.get("reference")
                if ref is None:
                    problems.add(f"{where}a document without its reference attribute", line=line)
                stack.append(ref)
                return
            if name != "feature" or not str(attrs.get("name", "")).endswith(DET_TAG):
                return
            ref = next((r for r in reversed(stack) if r is not None), None)
            if not stack:
                problems.add(f"{where}a feature outside a <document reference=...>", line=line)
                return
            rec = {k: v for k, v in attrs.items() if k != "name"}
            if ref is not None:
                rec["this_reference"] = ref
            rows.append((line, rec, where))

        def end(name):
            if name == "document" and stack:
                stack.pop()

        def doctype(*_a):
            raise ValueError("a DTD is not allowed in a detection file")

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.StartDoctypeDeclHandler = doctype
        parser.EntityDeclHandler = doctype
        try:
            parser.Parse(body, True)
        except (expat.ExpatError, ValueError) as e:
            msg = str(e) if isinstance(e, ValueError) else expat.errors.messages[e.code]
            problems.add(f"{where}not well-formed XML: {msg}", line=parser.CurrentLineNumber)

    def _check(self, rows, problems: Problems) -> spans.Spans:
        """Every detection checked against the inputs: its fields, its pair (one of the split's),
        its spans (non-negative offsets, positive lengths, within the document)."""
        _ids, index, _s, _t, length = self.corpus()
        pair = np.full(len(rows), -1, dtype=np.int64)
        vals = np.zeros((len(rows), 4), dtype=np.int64)
        ok = np.zeros(len(rows), dtype=bool)
        for n, (line, rec, where) in enumerate(rows):
            missing = [f for f in FIELDS if f not in rec]
            if missing:
                problems.add(f"{where}missing field(s) {', '.join(missing)}", line=line)
                continue
            good = True
            for j, k in enumerate(INTS):
                bad = _bad_int(rec[k])
                if bad:
                    problems.add(f"{where}{k} {bad}", line=line)
                    good = False
                    continue
                v = int(rec[k])
                if v < 0:
                    problems.add(f"{where}{k} is negative ({v})", line=line)
                    good = False
                elif k.endswith("length") and v == 0:
                    problems.add(f"{where}{k} is 0: a span holds at least one character", line=line)
                    good = False
                vals[n, j] = v
            t, s = rec["this_reference"], rec["source_reference"]
            if not isinstance(t, str) or not isinstance(s, str):
                problems.add(f"{where}this_reference and source_reference are strings", line=line)
                continue
            p = index.get((t, s))
            if p is None:
                which = (
                    f"no document {cut(t)!r}"
                    if t not in length
                    else f"no document {cut(s)!r}"
                    if s not in length
                    else f"the documents {cut(t)!r} and {cut(s)!r} are not a pair of the corpus"
                )
                problems.add(f"{where}this_reference/source_reference: {which}", line=line)
                continue
            if not good:
                continue
            for side, ref, j in (("this", t, 0), ("source", s, 2)):
                end = vals[n, j] + vals[n, j + 1]
                if end > length[ref]:
                    problems.add(
                        f"{where}{side}_offset + {side}_length = {end}, past the end of "
                        f"{cut(ref)!r} ({length[ref]} characters)",
                        line=line,
                    )
                    good = False
            if good:
                pair[n], ok[n] = p, True
        problems.raise_if_any()
        keep = np.flatnonzero(ok)
        v = vals[keep]
        return spans.Spans(pair[keep], v[:, 0], v[:, 1], v[:, 2], v[:, 3])

    # ------------------------------------------------------------------------------- scoring

    def _gold(self):
        return span_gold(cache_key(self.store.gold(self.split, "gold.jsonl")), *self._keys())

    def units(self) -> list[str]:
        return list(self.corpus()[0])

    def strata(self) -> list[tuple[str, str]]:
        """A pair with a case and one without: both parts hold cases (server side: reads gold)."""
        _cases, by_pair = self._gold()
        return [
            (p, "plagiarism" if r.get("cases") else "no-plagiarism")
            for p, r in zip(self.units(), by_pair, strict=True)
        ]

    def stats(self, parsed: spans.Spans, keep: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per-pair statistics; with `keep`, exact over those pairs (the micro counts recomputed
        over them alone where two pairs share characters of a document)."""
        ids, _index, susp, src, _length = self.corpus()
        cases, _rows = self._gold()
        key = id(parsed)
        held = getattr(self, "_full", None)
        if held is None or held[0] != key or held[1] is not parsed:
            self._full = (key, parsed, spans.pair_stats(len(ids), susp, src, cases, parsed))
        stats, info = self._full[2]
        if keep is None or keep.all() or not info["shared_chars"]:
            return stats
        c, d = spans.restrict(cases, keep), spans.restrict(parsed, keep)
        return spans.pair_stats(len(ids), susp, src, c, d)[0]

    def subset_masks(self, only: frozenset | None) -> dict[str, np.ndarray]:
        """Each declared subset's pairs (`all`, and each slice: the pairs whose gold row has the
        slice's value), within `only`."""
        ids = self.corpus()[0]
        _cases, by_pair = self._gold()
        base = np.array([only is None or p in only for p in ids], dtype=bool)
        out = {}
        for s in self.task.subsets:
            sl = self.task.slice_of(s)
            if sl is None:
                out[s] = base
            else:
                out[s] = base & np.array([sl.holds(r, "") for r in by_pair], dtype=bool)
        return out

    def score(self, parsed, only: frozenset | None = None) -> Scored:
        names = self.task.metrics
        result, notes = {}, []
        for subset, keep in self.subset_masks(only).items():
            if not keep.any():
                result[subset] = {k: (0 if k == "n" else None) for k in names}
                where = "this part of the gold" if only is not None else "the gold"
                notes.append(f"{subset}: no document pair of {subset} in {where}")
                continue
            st = self.stats(parsed, keep)
            vals = spans.point(st, [k for k in names if k != "n"], keep)
            vals["n"] = int(keep.sum())
            for k in names:
                if vals.get(k) is None:
                    notes.append(f"{subset}: {k} undefined: no case in these document pairs")
            result[subset] = {k: vals[k] for k in names}
        return Scored(result, notes)
