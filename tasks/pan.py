"""PAN's text alignment (plagiarism detection across documents, PAN 2009-2015): its corpus layout
read into the spans family's files, and a seeded generator of small corpora in that layout.

PAN's corpus layout (PAN 2013-2015 text alignment): `susp/` and `src/` hold the documents
(`suspicious-documentNNNNN.txt`, `source-documentNNNNN.txt`), `pairs` one document pair a line
(`SUSP SRC`), and an XML file per pair, `SUSPSTEM-SRCSTEM.xml`, at the top or in a folder per
obfuscation type (`02-no-obfuscation/`, ...), holding
`<document reference="SUSP"><feature name="plagiarism" this_offset=... this_length=...
source_reference="SRC" source_offset=... source_length=... obfuscation=.../></document>`.

Nothing here imports the scorer.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from xml.parsers import expat

from tasks.base import Task
from tasks.bundle import ReleaseBundle
from tasks.errors import ReleaseError
from tasks.store import TaskStore

SPAN_KEYS = ("this_offset", "this_length", "source_offset", "source_length")
NO_PLAGIARISM = "no-plagiarism"
MIXED = "mixed"
OBFUSCATIONS = ("none", "random", "translation")
SUBCORPUS = {
    NO_PLAGIARISM: "01-no-plagiarism",
    "none": "02-no-obfuscation",
    "random": "03-random-obfuscation",
    "translation": "04-translation-obfuscation",
}


def stem(name: str) -> str:
    return name[:-4] if name.endswith(".txt") else name


def pair_id(susp: str, src: str) -> str:
    """A pair's id: the stem of PAN's file for it
    (`suspicious-document00001-source-document00002`)."""
    return f"{stem(susp)}-{stem(src)}"


# ----------------------------------------------------------------------------- reading XML


def read_features(path: Path, tag: str = "plagiarism") -> tuple[str | None, list[tuple[int, dict]]]:
    """The document reference of one of PAN's XML files and its features whose name ends with
    `tag`, each with its line. No DTD is accepted (nothing is expanded)."""
    parser = expat.ParserCreate()
    ref: list[str | None] = [None]
    feats: list[tuple[int, dict]] = []

    def start(name, attrs):
        if name == "document" and ref[0] is None:
            ref[0] = attrs.get("reference")
        elif name == "feature" and str(attrs.get("name", "")).endswith(tag):
            feats.append((parser.CurrentLineNumber, dict(attrs)))

    def refuse(*_a):
        raise ValueError("a DTD is not allowed")

    parser.StartElementHandler = start
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(path.read_bytes(), True)
    except expat.ExpatError as e:
        raise ReleaseError(
            path, f"not well-formed XML: {expat.errors.messages[e.code]}", e.lineno
        ) from None
    except ValueError as e:
        raise ReleaseError(path, str(e), parser.CurrentLineNumber) from None
    return ref[0], feats


def _int(path: Path, line: int, attrs: dict, key: str) -> int:
    v = attrs.get(key)
    if v is None or not re.fullmatch(r"\d+", v.strip()):
        raise ReleaseError(path, f"{key} must be a non-negative integer, found {v!r}", line)
    return int(v)


def read_corpus(root: Path) -> dict:
    """A PAN text alignment corpus: its documents, pairs and cases, checked (each case of a pair
    of `pairs`, its spans inside its documents, its lengths positive)."""
    root = Path(root)
    for need in ("susp", "src", "pairs"):
        if not (root / need).exists():
            raise ReleaseError(root, f"not a PAN text alignment corpus: no {need} in it")
    docs: dict[str, str] = {}
    for folder in ("susp", "src"):
        for p in sorted((root / folder).glob("*.txt")):
            docs[p.name] = p.read_text(encoding="utf-8-sig")
    pairs: list[tuple[str, str]] = []
    seen = set()
    pairs_file = root / "pairs"
    for n, line in enumerate(pairs_file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ReleaseError(pairs_file, f"expected 'SUSP SRC', found {line[:80]!r}", n)
        susp, src = parts
        for d, folder in ((susp, "susp"), (src, "src")):
            if d not in docs:
                raise ReleaseError(pairs_file, f"{d!r} is not in {folder}/", n)
        if (susp, src) in seen:
            raise ReleaseError(pairs_file, f"the pair {susp} {src} is listed twice", n)
        seen.add((susp, src))
        pairs.append((susp, src))
    cases: dict[tuple[str, str], list[dict]] = {p: [] for p in pairs}
    xmls = sorted([*root.glob("*.xml"), *root.glob("*/*.xml")])
    for path in xmls:
        ref, feats = read_features(path)
        for line, a in feats:
            if ref is None:
                raise ReleaseError(path, "a feature outside a <document reference=...>", line)
            src = a.get("source_reference")
            if src is None:
                raise ReleaseError(path, "a plagiarism feature without source_reference", line)
            if (ref, src) not in cases:
                raise ReleaseError(path, f"{ref} {src} is not a pair of the pairs file", line)
            case = {k: _int(path, line, a, k) for k in SPAN_KEYS}
            for side, doc in (("this", ref), ("source", src)):
                end = case[f"{side}_offset"] + case[f"{side}_length"]
                if case[f"{side}_length"] == 0:
                    raise ReleaseError(path, f"{side}_length is 0", line)
                if end > len(docs[doc]):
                    raise ReleaseError(
                        path, f"{side} span ends at {end}, past {doc} ({len(docs[doc])})", line
                    )
            extra = {
                k: v
                for k, v in a.items()
                if k not in (*SPAN_KEYS, "name", "source_reference") and re.fullmatch(r"\w+", k)
            }
            cases[(ref, src)].append({**case, **extra})
    return {"docs": docs, "pairs": pairs, "cases": cases}


def pair_attributes(cases: list[dict]) -> dict:
    """A pair's own attributes from its cases': each attribute every case has, its value where
    they agree, `mixed` where not; `obfuscation` is `no-plagiarism` for a pair without a case."""
    if not cases:
        return {"obfuscation": NO_PLAGIARISM}
    keys = set.intersection(*(set(c) for c in cases)) - set(SPAN_KEYS)
    out = {}
    for k in sorted(keys):
        vals = {str(c[k]) for c in cases}
        out[k] = vals.pop() if len(vals) == 1 else MIXED
    return out


def spans_rows(corpus: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """The spans family's files of a corpus (`read_corpus`): `pairs.jsonl`, `documents.jsonl`
    (the documents of some pair) and `gold.jsonl` (a pair's attributes and its cases)."""
    c = corpus
    used = sorted({d for p in c["pairs"] for d in p})
    pairs = [{"id": pair_id(s, t), "suspicious": s, "source": t} for s, t in c["pairs"]]
    docs = [{"id": d, "text": c["docs"][d]} for d in used]
    gold = []
    for susp, src in c["pairs"]:
        cs = sorted(c["cases"][(susp, src)], key=lambda x: (x["this_offset"], x["source_offset"]))
        gold.append({"id": pair_id(susp, src), **pair_attributes(cs), "cases": cs})
    return pairs, docs, gold


def import_pan(task: Task, *, source, store: TaskStore, **_) -> dict:
    """Build pan-text-alignment from a PAN corpus: its one split, `test`, with hidden gold."""
    pairs, docs, gold = spans_rows(read_corpus(Path(source)))
    split = "test"
    with ReleaseBundle(task, store) as b:
        b.write_jsonl(split, "pairs.jsonl", pairs)
        b.write_jsonl(split, "documents.jsonl", docs)
        b.write_jsonl(split, "gold.jsonl", gold)
        n_cases = sum(len(g["cases"]) for g in gold)
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "PAN text alignment corpus",
            "splits": [split],
            "counts": {split: {"pairs": len(gold), "documents": len(docs), "cases": n_cases}},
        }
        return b.install(manifest)


# ----------------------------------------------------------------------------- generating

_SYLLABLES = (
    "ka ri to ma ne su lo vi da pe ru sa mi ko te no ha gi bu fe zo la xi qu ce wo ny ju "
    "tra ble sto pri gan mor vel tis cor pan"
).split()


def _lexicon(rng: random.Random, n: int) -> list[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
    return sorted(words)


def _sentence(rng: random.Random, lex: list[str]) -> str:
    ws = [rng.choice(lex) for _ in range(rng.randint(6, 16))]
    ws[0] = ws[0].capitalize()
    return " ".join(ws) + "."


def _text(rng: random.Random, lex: list[str], sentences: int) -> str:
    return " ".join(_sentence(rng, lex) for _ in range(sentences))


def obfuscate(passage: str, kind: str, rng: random.Random, lex: list[str], synonyms: dict) -> str:
    """`none`: the passage as it is; `random`: PAN's random obfuscation (words shuffled within a
    short window, replaced, dropped and added); `translation`: like a cyclic translation (most
    words mapped to another word of the same meaning, a few reordered, some dropped)."""
    if kind == "none":
        return passage
    words = passage.split()
    if kind == "random":
        out = []
        for w in words:
            r = rng.random()
            if r < 0.12:
                continue
            if r < 0.30:
                w = rng.choice(lex)
            out.append(w)
            if rng.random() < 0.08:
                out.append(rng.choice(lex))
        for i in range(0, len(out) - 3, 4):
            if rng.random() < 0.5:
                window = out[i : i + 3]
                rng.shuffle(window)
                out[i : i + 3] = window
    else:
        out = [synonyms.get(w.strip(".").lower(), w) for w in words if rng.random() > 0.1]
        for i in range(0, len(out) - 1, 5):
            if rng.random() < 0.4:
                out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out or words[:1])


def generate(
    root: Path,
    seed: int = 0,
    n_susp: int = 30,
    n_src: int = 30,
    pairs_per_susp: int = 2,
    kinds: tuple[str, ...] = OBFUSCATIONS,
) -> dict:
    """Write a PAN-format corpus under `root` from `seed`: source and suspicious documents of
    made-up words, each suspicious document paired with `pairs_per_susp` sources; in most pairs
    one to three passages of the source copied into the suspicious document with one obfuscation
    (`kinds`), at recorded offsets; the rest pairs without reuse. Returns counts."""
    rng = random.Random(f"pan-corpus:{seed}")
    root = Path(root)
    (root / "susp").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(parents=True, exist_ok=True)
    lex = _lexicon(rng, 600)
    synonyms = {w: rng.choice(lex) for w in lex}
    srcs = [f"source-document{i:05d}.txt" for i in range(1, n_src + 1)]
    src_text = {s: _text(rng, lex, rng.randint(25, 50)) for s in srcs}
    for s in srcs:
        (root / "src" / s).write_text(src_text[s], encoding="utf-8")
    pair_lines, n_cases = [], 0
    for i in range(1, n_susp + 1):
        susp = f"suspicious-document{i:05d}.txt"
        chosen = rng.sample(srcs, min(pairs_per_susp, len(srcs)))
        own = [_sentence(rng, lex) for _ in range(rng.randint(20, 40))]
        # the passages to insert: (position among the own sentences, source, passage, kind)
        inserts = []
        plan = {}
        for src in chosen:
            r = rng.random()
            kind = None if r < 0.25 else rng.choice(kinds)
            plan[src] = kind
            if kind is None:
                continue
            sents = re.findall(r"[^.]+\.", src_text[src])
            for _ in range(rng.randint(1, 3)):
                a = rng.randrange(len(sents))
                b = min(len(sents), a + rng.randint(2, 6))
                start = sum(len(x) for x in sents[:a]) + (1 if a else 0)
                end = sum(len(x) for x in sents[:b])
                passage = src_text[src][start:end]
                if any(start < e and s < end for s_, s, e, *_ in inserts if s_ == src):
                    continue
                inserts.append((src, start, end, passage, kind, rng.randrange(len(own) + 1)))
        # build the suspicious text, recording each inserted passage's offset
        by_pos: dict[int, list] = {}
        for ins in inserts:
            by_pos.setdefault(ins[5], []).append(ins)
        parts, feats, off = [], {s: [] for s in chosen}, 0
        for k in range(len(own) + 1):
            for src, start, end, passage, kind, _pos in by_pos.get(k, []):
                text = obfuscate(passage, kind, rng, lex, synonyms)
                if parts:
                    parts.append(" ")
                    off += 1
                feats[src].append((off, len(text), start, end - start, kind))
                parts.append(text)
                off += len(text)
            if k < len(own):
                if parts:
                    parts.append(" ")
                    off += 1
                parts.append(own[k])
                off += len(own[k])
        susp_text = "".join(parts)
        (root / "susp" / susp).write_text(susp_text, encoding="utf-8")
        for src in chosen:
            pair_lines.append(f"{susp} {src}")
            fs = feats[src]
            n_cases += len(fs)
            folder = SUBCORPUS[plan[src] if fs else NO_PLAGIARISM]
            (root / folder).mkdir(exist_ok=True)
            lines = ['<?xml version="1.0" encoding="UTF-8"?>', f'<document reference="{susp}">']
            for this_off, this_len, src_off, src_len, kind in fs:
                lines.append(
                    f'<feature name="plagiarism" obfuscation="{kind}" source_language="xx" '
                    f'source_length="{src_len}" source_offset="{src_off}" '
                    f'source_reference="{src}" this_language="xx" this_length="{this_len}" '
                    f'this_offset="{this_off}" type="artificial" />'
                )
            lines.append("</document>")
            (root / folder / f"{pair_id(susp, src)}.xml").write_text(
                "\n".join(lines) + "\n", encoding="utf-8"
            )
    (root / "pairs").write_text("\n".join(pair_lines) + "\n", encoding="utf-8")
    return {"pairs": len(pair_lines), "cases": n_cases, "suspicious": n_susp, "sources": n_src}


def detection_xml(susp: str, src: str, detections) -> str:
    """One of PAN's detection files: `detections` as (this_offset, this_length, source_offset,
    source_length)."""
    lines = [f'<document reference="{susp}">']
    for to, tl, so, sl in detections:
        lines.append(
            f'<feature name="detected-plagiarism" this_offset="{to}" this_length="{tl}" '
            f'source_reference="{src}" source_offset="{so}" source_length="{sl}" />'
        )
    lines.append("</document>")
    return "\n".join(lines) + "\n"


def jsonl_detections(rows) -> str:
    """Detections as the spans family's JSON Lines: rows of (susp, src, to, tl, so, sl)."""
    return "".join(
        json.dumps(
            {
                "this_reference": t,
                "this_offset": to,
                "this_length": tl,
                "source_reference": s,
                "source_offset": so,
                "source_length": sl,
            }
        )
        + "\n"
        for t, s, to, tl, so, sl in rows
    )


# ----------------------------------------------------------------------------- the demo


def demo_release(root: Path, size: int = 120) -> dict:
    """The demo's and the contract tests' corpus: about `size` pairs."""
    n = max(4, size // 4)
    generate(root / "pan", seed=size, n_susp=n, n_src=n, pairs_per_susp=2)
    return {"source": str(root / "pan")}


def demo_predictions(task, store, split: str, noise: float, rng: random.Random):
    """The gold's cases as detections, each kept with probability 1 - noise and shifted by up
    to `noise` of its length; a few false detections with noise."""
    pairs = [json.loads(x) for x in store.public(split, "pairs.jsonl").read_text().splitlines()]
    length = {}
    for line in store.public(split, "documents.jsonl").read_text().splitlines():
        r = json.loads(line)
        length[r["id"]] = len(r["text"])
    gold = {
        r["id"]: r
        for r in map(json.loads, store.gold(split, "gold.jsonl").read_text().splitlines())
    }
    rows = []
    for p in pairs:
        t, s = p["suspicious"], p["source"]
        for c in gold[p["id"]]["cases"]:
            if rng.random() < noise:
                continue
            shift = int(c["this_length"] * noise * rng.random())
            tl = max(1, min(c["this_length"], length[t] - c["this_offset"] - shift))
            rows.append(
                (t, s, c["this_offset"] + shift, tl, c["source_offset"], c["source_length"])
            )
        if noise and rng.random() < noise:
            to = rng.randrange(length[t])
            so = rng.randrange(length[s])
            rows.append((t, s, to, min(50, length[t] - to), so, min(50, length[s] - so)))
    if not rows:
        p = pairs[0]
        rows.append((p["suspicious"], p["source"], 0, 1, 0, 1))
    return jsonl_detections(rows).encode(), "detections.jsonl"
