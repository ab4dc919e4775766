"""Helpers for the tests: raw release readers (independent of the importers) and submission
writers."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
from conftest import LOCI, REPO, SWISSGOV, TROTR, need

LANGS = {"de": "en-de", "fr": "en-fr", "it": "en-it"}


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def trotr_pairs(
    kind: str, split: str = "test", subset: str | None = None, fold: int = 1
) -> list[dict]:
    """The raw pair-by-line records of a TRoTR fold file."""
    name = f"{split}.{subset}.{kind}.jsonl" if subset else f"{split}.{kind}.jsonl"
    return read_jsonl(need(TROTR / "datasets" / f"FOLD_{fold}" / "pair-by-line" / name))


def trac_gold() -> dict[str, float]:
    with open(need(TROTR / "datasets" / "trac_gold_scores.tsv"), encoding="utf-8", newline="") as f:
        return {r["lemma"]: float(r["topic_variation"]) for r in csv.DictReader(f)}


def swissgov_docs(split: str = "test") -> list[dict]:
    """Raw SwissGov-RSD gold records of a split, each with its language pair added."""
    out = []
    for lang, pair in LANGS.items():
        for r in read_jsonl(
            need(
                SWISSGOV
                / "data"
                / "evaluation"
                / "gold_labels"
                / split
                / f"gold_admin_{lang}.jsonl"
            )
        ):
            out.append({**r, "pair": pair})
    return out


def loci_files() -> dict:
    return {
        "query": need(LOCI / "hieronymus_samples.csv"),
        "source": LOCI / "vergil_samples.csv",
        "gold": LOCI / "ground_truth.csv",
    }


def _cell(v) -> str:
    if isinstance(v, (list, tuple)):
        return " ".join(repr(float(x)) for x in v)
    return str(v)


def encode_rows(rows: list[dict], fmt: str, columns: list[str] | None = None) -> bytes:
    """The bytes of a submission in 'jsonl', 'csv' or 'tsv' (lists become space-separated cells)."""
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")
    columns = columns or (list(rows[0]) if rows else [])
    buf = io.StringIO()
    if fmt == "tsv":
        w = csv.writer(
            buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\"
        )
    else:
        w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r[c]) for c in columns])
    return buf.getvalue().encode("utf-8")


def write_submission(
    dir: Path, rows: list[dict], fmt: str, name: str = "sub", columns: list[str] | None = None
) -> Path:
    """Write rows as `fmt`, which is jsonl/csv/tsv optionally followed by .gz or .zip."""
    base, _, wrap = fmt.partition(".")
    data = encode_rows(rows, base, columns)
    inner = f"{name}.{base}"
    os.makedirs(dir, exist_ok=True)
    if wrap == "gz":
        path = Path(dir) / f"{inner}.gz"
        path.write_bytes(gzip.compress(data, mtime=0))
    elif wrap == "zip":
        path = Path(dir) / f"{name}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(inner, data)
    else:
        path = Path(dir) / inner
        path.write_bytes(data)
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root by relative path, for byte-for-byte comparisons."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def register_everywhere(s, user) -> None:
    """Register `user` (approved, the current terms accepted) in every competition, as if they had
    accepted each competition's terms on its page; flushes."""
    from sqlmodel import select

    from server.models import Competition, Registration, utcnow

    for c in s.exec(select(Competition)).all():
        s.add(
            Registration(
                competition_id=c.id,
                user_id=user.id,
                status="approved",
                terms_version=c.terms_version,
                terms_accepted_at=utcnow(),
            )
        )
    s.flush()


def fresh_python(code: str, home: Path, *, stdin: str = "", **env: str) -> str:
    """Run `code` in a new interpreter on the embedded default (no DATABASE_URL or REDIS_URL from
    this process) with `home` as its data directory; its stdout, once it exited 0."""
    e = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    e.update(PALIMPSEST_HOME=str(home), PYTHONPATH=str(REPO), **env)
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        env=e,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _parsed(task, store, split, rng):
    from scorer.families import Links, cache_key, read_jsonl
    from scorer.kinds import family
    from scorer.spans import Spans

    fam = family(task, store, split)
    if task.kind in ("instances", "targets"):
        ids = fam.reference_ids()
        if task.format.fields[1].kind == "label01":
            return {i: int(rng.integers(0, 2)) for i in ids}
        return {i: float(rng.integers(0, 5)) for i in ids}
    if task.kind == "tokens":
        return {
            r["id"]: (
                np.round(rng.random(len(r["text_a"].split())), 1),
                rng.random(len(r["text_b"].split())),
            )
            for r in read_jsonl(store.public(split, "inputs.jsonl"))
        }
    if task.kind == "spans":  # the gold's cases, some shifted, some left out, some made up
        from scorer.span_family import span_gold

        cases, _rows = span_gold(
            cache_key(store.gold(split, "gold.jsonl")),
            cache_key(store.public(split, "pairs.jsonl")),
            cache_key(store.public(split, "documents.jsonl")),
        )
        keep = rng.random(len(cases)) < 0.7
        shift = rng.integers(0, 20, len(cases))
        return Spans(
            cases.pair[keep],
            cases.this_offset[keep] + shift[keep],
            cases.this_length[keep],
            cases.source_offset[keep],
            cases.source_length[keep],
        )
    qidx, sidx = fam.ids()
    keys = np.unique(rng.integers(0, len(qidx), 300) * len(sidx) + rng.integers(0, len(sidx), 300))
    return Links(keys // len(sidx), keys % len(sidx), rng.random(keys.size))


def board_json(client, task="tric-binary", phase="dev"):
    r = client.get(f"/tasks/{task}/leaderboard.json?phase={phase}")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    return r.get_json()


def printed_as(shown: str, value: float, digits: int, slack: float = 1e-6) -> bool:
    """Whether `shown`, a number printed with `digits` decimals, is `value` at that precision.
    Compared as numbers, not as strings: a naive computation that agrees with the server's to
    1e-6 may still round the other way when the value sits on a rounding boundary (0.0025 printed
    as 0.002 by one, 0.003 by the other); `slack` is that agreement."""
    return abs(float(shown) - value) <= 0.5 * 10**-digits + slack
