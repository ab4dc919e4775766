"""STR: Semantic Textual Relatedness of sentence pairs (SemEval-2024 Task 1, Track A; STR-2022)."""

from __future__ import annotations

import random
from pathlib import Path

from tasks.base import Demo, Field, ImportOption, Reference, SubmissionFormat, Task
from tasks.errors import ReleaseError
from tasks.store import StagedImport, TaskStore
from tasks.str_release import LANGUAGES, _base, _folders, read_pairs

SPLITS = ("dev", "test")

ORGANISERS_LEXICAL = {
    "amh": 0.6332274072109575,
    "arq": 0.3998773304549135,
    "ary": 0.6265404923149984,
    "eng": 0.6699271199323151,
    "esp": 0.6695605460838244,
    "hau": 0.3058496890295216,
    "kin": 0.33267433874761376,
    "mar": 0.6186827655440841,
    "tel": 0.6971881950641237,
}
"""The organisers' lexical-overlap baseline on each language's test split (Spearman), as their
repository's semrel_baselines/results/results_lexical/<lang>/<lang>_lexical_overlap.json held them
at commit 6c38f37 (2024-02-04; later commits removed the results). Their procedure, Dice over
whitespace-separated tokens with case kept, is rerun by `benchmarks/reproduce_str.py`."""

CITATION = """@inproceedings{ousidhoum-etal-2024-semeval,
  title = {{SemEval}-2024 Task 1: Semantic Textual Relatedness for African and Asian Languages},
  author = {Ousidhoum, Nedjma and Muhammad, Shamsuddeen Hassan and Abdalla, Mohamed and others},
  booktitle = {Proceedings of the 18th International Workshop on Semantic Evaluation
               (SemEval-2024)},
  year = {2024},
  publisher = {Association for Computational Linguistics}
}
@inproceedings{abdalla-etal-2023-makes,
  title = {What Makes Sentences Semantically Related? A Textual Relatedness Dataset and
           Empirical Study},
  author = {Abdalla, Mohamed and Vishnubhotla, Krishnapriya and Mohammad, Saif M.},
  booktitle = {Proceedings of the 17th Conference of the European Chapter of the Association for
               Computational Linguistics},
  year = {2023},
  publisher = {Association for Computational Linguistics}
}"""

STR = Task(
    id="str",
    version=1,
    title="STR: how semantically related are two sentences? (SemEval-2024 Task 1, Track A)",
    description=(
        "Semantic Textual Relatedness. Each item pairs two sentences of one language; predict how "
        "related they are in meaning (any scale; only ranks count). The gold is the "
        "Best-Worst-Scaling relatedness in [0, 1]. Scored per language (upstream codes: amh, arq, "
        "ary, eng, esp, hau, kin, mar, tel) by Spearman's rank correlation, matched on PairID as "
        "the official evaluation script does, with Pearson beside it; the primary metric is the "
        "macro average over the languages the gold holds. A submission may cover some languages "
        "only (then its macro is empty, and the result's notes say why)."
    ),
    citation=CITATION,
    licence=(
        "SemEval-2024 Task 1 and STR-2022 data: their licences are not clear enough for Palimpsest "
        "to redistribute them; organizers import them from their own checkout of the release."
    ),
    source="https://github.com/semantic-textual-relatedness/Semantic_Relatedness_SemEval2024",
    kind="instances",
    format=SubmissionFormat(
        fields=(
            Field("PairID", "id", "the pair id from the inputs, e.g. ENG-test-0000"),
            Field(
                "Pred_Score",
                "float",
                "predicted relatedness (any scale; only ranks count); `score` in JSON Lines",
                aliases=("score",),
            ),
        ),
        native="csv",
        example="PairID,Pred_Score\nENG-test-0000,0.71\nENG-test-0001,0.18\n",
        key=("PairID",),
    ),
    metrics=("spearman", "pearson", "n"),
    subsets=LANGUAGES + ("macro",),
    primary=("macro", "spearman"),
    greater_is_better=True,
    splits=SPLITS,
    importer="tasks.semrel:import_str",
    agreement="tasks.agreement_str:str_release",
    agreement_rows="tasks.agreement:str_rows",
    import_help=(
        "palimpsest tasks import str --from path/to/Semantic_Relatedness_SemEval2024 "
        "[--languages eng,esp,...]"
    ),
    import_options=(
        ImportOption(
            "--from",
            "source",
            "path",
            "An official release checkout (TRoTR, SwissGov-RSD, ...).",
            required=True,
        ),
        ImportOption(
            "--languages",
            "languages",
            "list",
            "STR: the languages to import, comma separated (default: every one found).",
        ),
    ),
    group_field="language",
    group_name="language",
    partial_groups=True,
    unit="pair",
    gold_value="score",
    demo=Demo(release="tasks.semrel:demo_release", predictions="tasks.demo:keyed_predictions"),
    references=(
        Reference(
            name="human (split-half reliability of the BWS annotations, STR-2022)",
            subset="eng",
            metric="spearman",
            value=0.84,
            source="Abdalla, Vishnubhotla and Mohammad (EACL 2023), section 4 and Table 3: split-"
            "half reliability measured by Spearman correlation, 1,000 repetitions averaged "
            "(arXiv:2110.04845)",
            note="On STR-2022's 5,500 English pairs, which are SemEval-2024's eng training split "
            "(the same texts), not its test set. The coefficient is split-half reliability: each "
            "4-tuple's annotations split into two halves, a Best-Worst-Scaling score of every pair "
            "from each half, the Spearman correlation of the two score lists, repeated 1,000 times "
            "and averaged (STR-2022, section 4, Table 3). No per-language reliability of the "
            "SemEval-2024 sets could be sourced; where a checkout holds the raw annotations "
            "(BWS_annotations/, arq at commit 3c5941d), the board adds our split-half reliability "
            "for that language (a different language and dataset).",
        ),
        Reference(
            name="lexical overlap (Dice), STR-2022's figure",
            subset="eng",
            metric="spearman",
            value=0.57,
            source="Abdalla, Vishnubhotla and Mohammad (EACL 2023), Table 4 row Q1 and Table 5 "
            "row 1: the Dice coefficient of the two sentences' unique unigrams against the gold, "
            "Spearman (arXiv:2110.04845)",
            note="On STR-2022's 5,500 English pairs (SemEval-2024's eng training texts), not the "
            "eng test split the board scores: a reference for the `lexical` baseline here, not a "
            "score on the same pairs.",
        ),
        *(
            Reference(
                name="lexical overlap (Dice), the organisers' figure",
                subset=lang,
                metric="spearman",
                value=value,
                source="SemEval-2024 Task 1 organisers: semrel_baselines/results/results_lexical/"
                f"{lang}/{lang}_lexical_overlap.json, github.com/semantic-textual-relatedness/"
                "Semantic_Relatedness_SemEval2024 at commit 6c38f37 (2024-02-04)",
                note="Their Dice is over whitespace-separated tokens with case kept; the `lexical` "
                "baseline here lowercases \\w+ words (README: reproduction)."
                + (" esp's test gold was not released: not scored here." if lang == "esp" else ""),
            )
            for lang, value in ORGANISERS_LEXICAL.items()
        ),
    ),
)


def _split_of(base: Path, lang: str, split: str, notes: list[str]) -> list[dict] | None:
    """A language's pairs of `split` with their gold, or None (with a note) when the release has no
    gold for it. The unlabelled file, when present too, must hold the same pairs."""
    d = base / lang
    gold_path, plain_path = d / f"{lang}_{split}_with_labels.csv", d / f"{lang}_{split}.csv"
    if not gold_path.is_file():
        what = "inputs only" if plain_path.is_file() else "no file"
        notes.append(
            f"{lang}: no {split} gold ({gold_path.name} absent; {what}), imported without a "
            f"{split} split for {lang}"
        )
        return None
    rows = read_pairs(gold_path, True, lang)
    if plain_path.is_file():
        plain = {r["PairID"] for r in read_pairs(plain_path, False, lang)}
        if plain != {r["PairID"] for r in rows}:
            raise ReleaseError(plain_path, f"its PairIDs differ from those of {gold_path.name}")
    return rows


def import_str(task: Task, *, source, store: TaskStore, languages=None, **_) -> dict:
    """Build `str` from a SemEval-2024 Task 1 checkout (`Track A/<lang>/<lang>_{train,dev,
    dev_with_labels,test,test_with_labels}.csv`) or from one STR-2022-style CSV file (English,
    imported as the test split). A language without dev or test gold is imported without that split,
    and the manifest's notes say so."""
    source = Path(source)
    notes: list[str] = []
    per_split: dict[str, list[dict]] = {s: [] for s in SPLITS}
    train: list[dict] = []
    counts: dict = {"train": {}, "dev": {}, "test": {}}
    if source.is_file():  # STR-2022: one English file, PairID,Score,Text
        if languages and list(languages) != ["eng"]:
            raise ReleaseError(source, "an STR-2022 file holds English (eng) pairs only")
        per_split["test"] = read_pairs(source, True, "eng")
        counts["test"]["eng"] = len(per_split["test"])
        chosen = ["eng"]
        notes.append(
            f"eng: one STR-2022 file ({source.name}), imported as the test split; "
            "no train or dev split"
        )
        origin = "STR-2022"
    else:
        base = _base(source)
        found = [f for f in _folders(base) if any((base / f).glob(f"{f}_*.csv"))]
        unknown = [f for f in found if f not in LANGUAGES]
        if languages:
            chosen = list(dict.fromkeys(languages))
            bad = [lang for lang in chosen if lang not in LANGUAGES]
            if bad:
                raise ReleaseError(
                    base,
                    f"unknown language(s) {', '.join(bad)} (str declares {', '.join(LANGUAGES)})",
                )
            absent = [lang for lang in chosen if lang not in found]
            if absent:
                raise ReleaseError(
                    base,
                    f"no folder for language(s) {', '.join(absent)} "
                    f"(found {', '.join(found) or 'none'})",
                )
        else:
            chosen = [f for f in found if f in LANGUAGES]
            if unknown:
                notes.append(
                    f"folder(s) {', '.join(unknown)} are not among str's languages, left out"
                )
        if not chosen:
            raise ReleaseError(
                base, f"no language of str found (expected folders such as {', '.join(LANGUAGES)})"
            )
        for lang in chosen:
            p = base / lang / f"{lang}_train.csv"
            if p.is_file():
                rows = read_pairs(p, True, lang)
                train += rows
                counts["train"][lang] = len(rows)
            for split in SPLITS:
                rows = _split_of(base, lang, split, notes)
                if rows is not None:
                    per_split[split] += rows
                    counts[split][lang] = len(rows)
        origin = "SemEval-2024 Task 1 (Track A)"
    for split, rows in per_split.items():
        seen: dict[str, str] = {}
        for r in rows:
            if r["PairID"] in seen:
                raise ReleaseError(
                    source,
                    f"PairID {r['PairID']!r} is in both {seen[r['PairID']]} and "
                    f"{r['language']} ({split})",
                )
            seen[r["PairID"]] = r["language"]
    splits = [s for s in SPLITS if per_split[s]]
    if not splits:
        raise ReleaseError(source, "no language has dev or test gold: nothing to score")
    with StagedImport(store) as st:
        for split in splits:
            rows = per_split[split]
            inputs = [
                {k: r[k] for k in ("PairID", "language", "sentence1", "sentence2")} for r in rows
            ]
            gold = [
                {"PairID": r["PairID"], "language": r["language"], "score": r["score"]}
                for r in rows
            ]
            st.write_jsonl("public", split, "inputs.jsonl", inputs)
            st.write_jsonl("gold", split, "gold.jsonl", gold)
            if split == "dev":  # dev labels are public
                st.write_jsonl("public", split, "gold.jsonl", gold)
        if train:
            st.write_jsonl("public", "train", "train.jsonl", train)
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": origin,
            "languages": chosen,
            "splits": splits,
            "counts": {k: v for k, v in counts.items() if v},
            "notes": notes,
        }
        if (
            not source.is_file()
        ):  # the raw BWS annotations, where the checkout has them: the human rows
            # heavy numpy: only an import that computes human rows loads it (`--help` stays light)
            from tasks.agreement_str import str_agreement

            try:
                agreement = str_agreement(source, chosen)
            except (
                ReleaseError,
                OSError,
                ValueError,
                KeyError,
                IndexError,
                UnicodeDecodeError,
            ) as e:
                agreement = None  # the task itself imported fine
                notes.append(f"human agreement (split-half reliability) not computed: {e}")
            if agreement is not None and agreement["languages"]:
                manifest["agreement"] = agreement
        st.commit(manifest)
    return manifest


# ---------------------------------------------------------------- demo data and test fixtures

_WORDS = (
    "river stone light garden word voice bread house road fire letter mountain city star "
    "harvest door window shepherd lamp seed field tree sea wind path"
).split()


def _pair(rng: random.Random) -> tuple[str, str, float]:
    """Two sentences sharing a random share of their words, scored by that share plus noise."""
    a = [rng.choice(_WORDS) for _ in range(rng.randint(5, 9))]
    keep = rng.random()
    b = [w if rng.random() < keep else rng.choice(_WORDS) for w in a]
    score = min(1.0, max(0.0, round(keep + rng.gauss(0, 0.15), 3)))
    return " ".join(a) + ".", "Is it " + " ".join(b) + ', "really"?', score


def write_track_a(root: Path, size: int = 120, seed: int = 4) -> Path:
    """A made-up checkout in the upstream layout, with the quirks of the real files (Track A at
    commit 3c5941d of the task's repository) and a few more: the two sentences in one quoted field
    with a newline (and quotes inside); a space after that newline (esp here, as in every arq file
    upstream); CRLF line ends with a bare newline inside the field and no line end after the last
    row (esp's `_dev.csv`, as upstream's esp_dev.csv and ary_dev.csv); a language without test gold
    (kin: `kin_test.csv` only; upstream it is esp). Not upstream in Track A but seen elsewhere: a
    BOM and CRLF throughout (esp) and STR-2022's column order PairID,Score,Text (eng's test
    gold)."""
    rng = random.Random(seed)
    base = root / "Track A"
    sizes = {"train": max(4, size // 3), "dev": max(4, size // 6), "test": max(6, size // 3)}
    for lang in ("eng", "esp", "kin"):
        d = base / lang
        d.mkdir(parents=True, exist_ok=True)
        bom, eol = ("\ufeff", "\r\n") if lang == "esp" else ("", "\n")
        for split, n in sizes.items():
            pairs = [(f"{lang.upper()}-{split}-{i:04d}", *_pair(rng)) for i in range(n)]

            # bom, eol and d bound as defaults: a closure would read the loop's latest values.
            def write(name, header, cells, last_eol=True, bom=bom, eol=eol, d=d):
                lines = [",".join(header)] + [",".join(c) for c in cells]
                text = bom + eol.join(lines) + (eol if last_eol else "")
                (d / name).write_text(text, encoding="utf-8", newline="")

            def q(s1, s2, sep="\n " if lang == "esp" else "\n"):
                return '"' + (s1 + sep + s2).replace('"', '""') + '"'

            labelled = [(pid, q(s1, s2), f"{sc}") for pid, s1, s2, sc in pairs]
            if split == "train":
                write(f"{lang}_train.csv", ("PairID", "Text", "Score"), labelled)
                continue
            write(
                f"{lang}_{split}.csv",
                ("PairID", "Text"),
                [(pid, t) for pid, t, _ in labelled],
                last_eol=not (lang == "esp" and split == "dev"),
            )
            if lang == "kin" and split == "test":
                continue  # no released test gold
            if lang == "eng" and split == "test":
                write(
                    f"{lang}_{split}_with_labels.csv",
                    ("PairID", "Score", "Text"),
                    [(pid, sc, t) for pid, t, sc in labelled],
                )
            else:
                write(f"{lang}_{split}_with_labels.csv", ("PairID", "Text", "Score"), labelled)
    return root


def demo_release(root: Path, size: int = 120) -> dict:
    return {"source": write_track_a(root / "Semantic_Relatedness_SemEval2024", size)}
