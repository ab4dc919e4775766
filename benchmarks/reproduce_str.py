"""Reproduce the STR baselines (SemEval-2024 Task 1 Track A; STR-2022) beside the organisers'
figures.

    python benchmarks/reproduce_str.py --from path/to/Semantic_Relatedness_SemEval2024
        [--languages amh,eng,...] [--bi-encoder-languages eng|all|...]
        [--str2022 sem_text_rel_ranked.csv]
        [--json out.json]

The checkout is imported into a temporary data directory by the project's importer; the `lexical`
baseline writes its submission for every language with test gold and the `bi-encoder` one
(all-MiniLM-L6-v2, an English model) for `--bi-encoder-languages`; the project's scorer scores
them on the test split. Beside them, the organisers' own lexical procedure (their Dice differs from
ours: whitespace tokens, case kept) is run here and scored the same way, and their recorded figures
are printed for comparison. With `--str2022`, STR-2022's file is imported as the English test
split and the Pearson correlation of its starter notebook's Dice is compared with the 0.58 it
printed. Nothing of the data is written outside the temporary directory.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tasks.semrel import ORGANISERS_LEXICAL  # noqa: E402 — importable once REPO is on sys.path

UPSTREAM = "github.com/semantic-textual-relatedness/Semantic_Relatedness_SemEval2024"
# The organisers' lexical-overlap baseline, test split, Spearman: tasks.semrel.ORGANISERS_LEXICAL
# (the files semrel_baselines/results/results_lexical/<lang>/<lang>_lexical_overlap.json of UPSTREAM
# at commit 6c38f37bcec0b068e153db699b7f56db111c79b5, 2024-02-04, "semrel_baselines added"; the next
# commits removed the results), written by semrel_baselines/src/evaluate_lexical_overlap.py. Their
# number_samples are the test sizes of Track A (esp included: its test gold was not released).
# The organisers' sentence-transformers baseline with LaBSE (not fine-tuned), test split, Spearman
# of the cosines: semrel_baselines/results/sbert_results/
# similarity_evaluation_all_langs_test_sentence_bert_results.csv at the same commit. Another model
# than ours (all-MiniLM-L6-v2): context, not a reproduction target.
ORGANISERS_LABSE = {
    "amh": 0.785491227576239,
    "arq": 0.4001595191882878,
    "ary": 0.3763232223830959,
    "eng": 0.8182692159591411,
    "esp": 0.6510376404478234,
    "hau": 0.4769676639430302,
    "kin": 0.4534538354186325,
    "mar": 0.8182085523062139,
    "tel": 0.8023837884093983,
}
# STR-2022 (5,500 English pairs, sem_text_rel_ranked.csv of github.com/Priya22/
# semantic-textual-relatedness): the starter notebook STR_Baseline.ipynb of UPSTREAM (commit
# 3c5941ddffdc9d833a5528f49dd13ed9087c0dba) prints "Pearson Correlation: 0.58" for its Dice.
STARTER_STR2022_PEARSON = 0.58

_STARTER_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def organisers_dice(s1: str, s2: str) -> float:
    """evaluate_lexical_overlap.py's Dice: sets of whitespace-separated tokens, case kept."""
    a, b = set(s1.split()), set(s2.split())
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


def starter_dice(s1: str, s2: str) -> float:
    """STR_Baseline.ipynb's score: lowercased words and punctuation marks as sets, |A∩B| / (|A|+|B|)
    (half of Dice), rounded to 2 decimals as the notebook does."""
    a, b = set(_STARTER_TOKEN.findall(s1.lower())), set(_STARTER_TOKEN.findall(s2.lower()))
    return round(len(a & b) / (len(a) + len(b)), 2) if a or b else 0.0


def _write_predictions(path: Path, pairs: list[dict], score) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("PairID", "Pred_Score"))
        w.writerows((p["PairID"], f"{score(p['sentence1'], p['sentence2']):.6f}") for p in pairs)
    return path


def _metrics(result: dict, lang: str) -> dict:
    m = result["metrics"][lang]
    return {"spearman": m["spearman"], "pearson": m["pearson"], "n": m["n"]}


def run(
    source: Path,
    languages: list[str] | None,
    bi_languages: list[str],
    str2022: Path | None,
    device: str,
    batch_size: int,
) -> dict:
    from baselines.systems import Models, Options, _read_jsonl, write_submission
    from scorer import score_file
    from tasks.importers import import_task
    from tasks.store import TaskStore

    models = Models(Options(device=device, batch_size=batch_size, progress=False))
    out: dict = {"source": str(source), "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "all"
        manifest = import_task("str", home, source=source, languages=languages)
        out["manifest"] = manifest
        st = TaskStore("str", home)
        pairs = _read_jsonl(st.public("test", "inputs.jsonl"))
        t0 = time.perf_counter()
        lexical = score_file(
            "str", write_submission("str", "lexical", st, Path(tmp) / "out", models), "test", home
        )
        theirs = score_file(
            "str",
            _write_predictions(
                Path(tmp) / "out" / "organisers-lexical.csv", pairs, organisers_dice
            ),
            "test",
            home,
        )
        seconds = {"lexical": round(time.perf_counter() - t0, 1)}
        bi = None
        tested = sorted(manifest["counts"].get("test", {}))
        bi_langs = (
            tested if bi_languages == ["all"] else [lang for lang in bi_languages if lang in tested]
        )
        if bi_langs:
            t0 = time.perf_counter()
            bi_home = Path(tmp) / "bi"
            import_task("str", bi_home, source=source, languages=bi_langs)
            path = write_submission(
                "str", "bi-encoder", TaskStore("str", bi_home), Path(tmp) / "out-bi", models
            )
            bi = score_file("str", path, "test", bi_home)
            seconds["bi-encoder"] = round(time.perf_counter() - t0, 1)
            enc = models.loaded[("bi", None)]
            out["encoder"] = {
                "device": str(enc.device),
                "sentences": enc.sentences_encoded,
                "seconds": round(enc.seconds_encoding, 1),
            }
        for lang in tested:
            row = {
                "language": lang,
                "lexical": _metrics(lexical, lang),
                "organisers_procedure": _metrics(theirs, lang),
                "bi_encoder": _metrics(bi, lang) if bi and lang in bi_langs else None,
                "organisers_lexical": ORGANISERS_LEXICAL.get(lang),
                "organisers_labse": ORGANISERS_LABSE.get(lang),
            }
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
        out["macro"] = {
            "lexical": lexical["metrics"]["macro"]["spearman"],
            "bi_encoder": bi["metrics"]["macro"]["spearman"] if bi and bi_langs == tested else None,
        }
        out["seconds"] = seconds
        untested = [lang for lang in manifest["languages"] if lang not in tested]
        out["without_test_gold"] = untested
        if str2022:
            h = Path(tmp) / "str2022"
            import_task("str", h, source=str2022)
            st = TaskStore("str", h)
            p = _read_jsonl(st.public("test", "inputs.jsonl"))
            ours = score_file(
                "str",
                write_submission("str", "lexical", st, Path(tmp) / "out-2022", models),
                "test",
                h,
            )
            starter = score_file(
                "str",
                _write_predictions(Path(tmp) / "out-2022" / "starter.csv", p, starter_dice),
                "test",
                h,
            )
            out["str2022"] = {
                "file": str2022.name,
                "lexical": _metrics(ours, "eng"),
                "starter_procedure": _metrics(starter, "eng"),
                "starter_pearson_printed": STARTER_STR2022_PEARSON,
            }
            print(json.dumps(out["str2022"]), flush=True)
    return out


def table(out: dict) -> str:
    """Markdown: per language, ours beside the organisers' procedure run here and their figures."""

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    header = (
        "| language | pairs | lexical (ours: Dice, `\\w+` lowercased) | organisers' Dice run here "
        "| organisers' Dice, their figure | bi-encoder all-MiniLM-L6-v2 (ours) | organisers' "
        "LaBSE, their figure |"
    )
    lines = [header, "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["rows"]:
        bi = r["bi_encoder"]
        lines.append(
            f"| {r['language']} | {r['lexical']['n']} | {f(r['lexical']['spearman'])} | "
            f"{f(r['organisers_procedure']['spearman'])} | {f(r['organisers_lexical'])} | "
            f"{f(bi['spearman']) if bi else '-'} | {f(r['organisers_labse'])} |"
        )
    for lang in out.get("without_test_gold", []):
        lines.append(
            f"| {lang} | no test gold | - | - | {f(ORGANISERS_LEXICAL.get(lang))} | - | "
            f"{f(ORGANISERS_LABSE.get(lang))} |"
        )
    macro = out.get("macro", {})
    lines.append(
        f"| macro ({len(out['rows'])} languages) | | {f(macro.get('lexical'))} | | | "
        f"{f(macro.get('bi_encoder'))} | |"
    )
    text = "\n".join(lines) + "\n\nSpearman on the test split, scored by the project's scorer."
    if out.get("str2022"):
        s = out["str2022"]
        text += (
            f"\n\nSTR-2022 ({s['lexical']['n']} English pairs, {s['file']}), Pearson: our lexical "
            f"{s['lexical']['pearson']:.3f} (Spearman {s['lexical']['spearman']:.3f}); the starter "
            f"notebook's Dice run here {s['starter_procedure']['pearson']:.3f}; the notebook "
            f"printed {s['starter_pearson_printed']:.2f}."
        )
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="A checkout of the task's repository (or its Track A).",
    )
    ap.add_argument(
        "--languages", help="Comma-separated languages to import (default: every one found)."
    )
    ap.add_argument(
        "--bi-encoder-languages",
        default="eng",
        help="Languages the bi-encoder is run on, or `all` (default: eng; all-MiniLM-L6-v2 "
        "is English).",
    )
    ap.add_argument(
        "--str2022",
        type=Path,
        help="STR-2022's sem_text_rel_ranked.csv, for the starter notebook's figure.",
    )
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    ap.add_argument(
        "--table-from", type=Path, help="Only print the table of results saved by --json."
    )
    a = ap.parse_args()
    if a.table_from:
        print(table(json.loads(a.table_from.read_text(encoding="utf-8"))))
        return
    if not a.source:
        ap.error("--from is required (or --table-from)")
    langs = [x for x in a.languages.split(",") if x] if a.languages else None
    bi = [x for x in a.bi_encoder_languages.split(",") if x]
    out = run(a.source, langs, bi, a.str2022, a.device, a.batch_size)
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(table(out))


if __name__ == "__main__":
    main()
