"""STR: Semantic Textual Relatedness of sentence pairs (SemEval-2024 Task 1, Tracks A, B and C;
STR-2022)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from tasks.base import Task
from tasks.bundle import ReleaseBundle
from tasks.errors import ReleaseError
from tasks.store import TaskStore
from tasks.str_release import (
    LANGUAGES,
    SOURCES,
    TRACKS,
    read_pairs,
    str_folders,
    track_bases,
)

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


def _split_of(bases: dict[str, Path], lang: str, split: str, notes: list[str]) -> list[dict] | None:
    """A language's pairs of `split` with their gold, or None (with a note) when the release has no
    gold for it. The unlabelled file, when present too, must hold the same pairs; a language in
    several tracks has the same pairs and gold in each (upstream's files are identical), else the
    release is refused naming the file that differs."""
    rows, first = None, None
    for track, base in bases.items():
        d = base / lang
        if not d.is_dir():
            continue
        gold_path, plain_path = d / f"{lang}_{split}_with_labels.csv", d / f"{lang}_{split}.csv"
        if not gold_path.is_file():
            if rows is None and first is None:
                first = "inputs only" if plain_path.is_file() else "no file"
            continue
        got = read_pairs(gold_path, True, lang)
        if plain_path.is_file():
            plain = {r["PairID"] for r in read_pairs(plain_path, False, lang)}
            if plain != {r["PairID"] for r in got}:
                raise ReleaseError(plain_path, f"its PairIDs differ from those of {gold_path.name}")
        if rows is None:
            rows, first = got, f"Track {track}"
            continue
        theirs = {r["PairID"]: r["score"] for r in rows}
        ours = {r["PairID"]: r["score"] for r in got}
        if theirs != ours:
            what = "PairIDs" if theirs.keys() != ours.keys() else "scores"
            raise ReleaseError(
                gold_path,
                f"its {what} differ from {first}'s {gold_path.name} (a language's {split} gold "
                "is the same in every track)",
            )
    if rows is None:
        notes.append(
            f"{lang}: no {split} gold ({lang}_{split}_with_labels.csv absent; "
            f"{first or 'no file'}), imported without a {split} split for {lang}"
        )
    return rows


HELD_OUT, CROSS_VALIDATED = "held-out", "cross-validated"
CV_SEED = "str-2022:5-fold"
"""The seed of the cross-validated protocol's folds (STR-2022 publishes none): the English pairs'
ids sorted, shuffled by `random.Random(CV_SEED)` and dealt to the folds in turn."""


def cv_folds(ids, folds: int, seed: str = CV_SEED) -> dict[str, int]:
    """Each id's fold (1..folds): the ids sorted, shuffled with a generator seeded by `seed`, dealt
    in turn, so that fold sizes differ by one at most and the draw depends on the ids alone."""
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    return {pid: i % folds + 1 for i, pid in enumerate(order)}


def _write_cv(b: ReleaseBundle, cv, pairs: list[dict]) -> dict:
    """The cross-validated split: every English pair in the test set of one fold (what a submission
    answers, with its fold), and each fold's training pairs with their scores (the other folds'
    pairs, public: the protocol trains on them). Every pair is in the training data of the other
    folds, so this gold is no secret: its board ranks on all of it."""
    fold_of = cv_folds([r["PairID"] for r in pairs], cv.folds)
    rows = sorted(pairs, key=lambda r: (fold_of[r["PairID"]], r["PairID"]))
    keep = ("PairID", "language", "sentence1", "sentence2")
    b.write_jsonl(
        cv.split,
        "inputs.jsonl",
        [{cv.field: fold_of[r["PairID"]], **{k: r[k] for k in keep}} for r in rows],
    )
    b.write_jsonl(
        cv.split,
        "train.jsonl",
        [
            {
                cv.field: f,
                **{k: r[k] for k in keep},
                "score": r["score"],
                # public in STR-2022's file: a leave-one-source-out system trains on it
                **({"source": r["source"]} if "source" in r else {}),
            }
            for f in range(1, cv.folds + 1)
            for r in rows
            if fold_of[r["PairID"]] != f
        ],
    )
    b.write_jsonl(
        cv.split,
        "gold.jsonl",
        [
            {
                cv.field: fold_of[r["PairID"]],
                "PairID": r["PairID"],
                "language": r["language"],
                "score": r["score"],
                **({"source": r["source"]} if "source" in r else {}),
            }
            for r in rows
        ],
    )
    sizes = {
        str(f): sum(1 for r in rows if fold_of[r["PairID"]] == f) for f in range(1, cv.folds + 1)
    }
    return {
        "split": cv.split,
        "folds": list(range(1, cv.folds + 1)),
        "counts": {f: {"test": {"all": n}, "train": len(rows) - n} for f, n in sizes.items()},
        "seed": CV_SEED,
        "note": "",
    }


def import_str(task: Task, *, source, store: TaskStore, languages=None, protocol=None, **_) -> dict:
    """Build `str` from a SemEval-2024 Task 1 checkout (`Track A/<lang>/<lang>_{train,dev,
    dev_with_labels,test,test_with_labels}.csv`) or from one STR-2022-style CSV file (English,
    imported as the test split). A language without dev or test gold is imported without that split,
    and the manifest's notes say so. With `protocol="cross-validated"`, the English labelled pairs
    (the STR-2022 file, or the checkout's `eng_train.csv`, the same 5,500 texts) also make the
    cross-validated split, STR-2022's five folds (`cv_folds`); from a file, they make it alone (no
    hidden test split, its gold being every fold's training data)."""
    source = Path(source)
    protocol = protocol or HELD_OUT
    if protocol not in (HELD_OUT, CROSS_VALIDATED):
        raise ReleaseError(
            source, f"unknown protocol {protocol!r} ({HELD_OUT} or {CROSS_VALIDATED})"
        )
    cv = task.cross_validation if protocol == CROSS_VALIDATED else None
    cv_pairs: list[dict] = []
    notes: list[str] = []
    per_split: dict[str, list[dict]] = {s: [] for s in SPLITS}
    train: list[dict] = []
    counts: dict = {"train": {}, "dev": {}, "test": {}}
    tracks: dict[str, list[str]] = {}
    if source.is_file():  # STR-2022: one English file, PairID,Score,Text
        if languages and list(languages) != ["eng"]:
            raise ReleaseError(source, "an STR-2022 file holds English (eng) pairs only")
        chosen = ["eng"]
        if cv is not None:
            cv_pairs = read_pairs(source, True, "eng")
            notes.append(
                f"eng: one STR-2022 file ({source.name}), imported as the {cv.split} split's "
                f"{cv.folds} folds; no train, dev or test split"
            )
        else:
            per_split["test"] = read_pairs(source, True, "eng")
            counts["test"]["eng"] = len(per_split["test"])
            notes.append(
                f"eng: one STR-2022 file ({source.name}), imported as the test split; "
                "no train or dev split"
            )
        origin = "STR-2022"
    else:
        bases = track_bases(source)
        held = {
            t: [f for f in str_folders(b) if any((b / f).glob(f"{f}_*.csv"))]
            for t, b in bases.items()
        }
        found = sorted({f for fs in held.values() for f in fs})
        unknown = [f for f in found if f not in LANGUAGES]
        where = ", ".join(str(b) for b in bases.values())
        if languages:
            chosen = list(dict.fromkeys(languages))
            bad = [lang for lang in chosen if lang not in LANGUAGES]
            if bad:
                raise ReleaseError(
                    source,
                    f"unknown language(s) {', '.join(bad)} (str declares {', '.join(LANGUAGES)})",
                )
            absent = [lang for lang in chosen if lang not in found]
            if absent:
                raise ReleaseError(
                    source,
                    f"no folder for language(s) {', '.join(absent)} in {where} "
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
                source,
                f"no language of str found (expected folders such as {', '.join(LANGUAGES)})",
            )
        for lang in chosen:
            for t, b in bases.items():
                p = b / lang / f"{lang}_train.csv"
                if not p.is_file():
                    continue
                if t != "A":  # B and C forbid labelled data of the language: upstream has none
                    notes.append(f"{lang}: Track {t} holds {p.name}, left out (Track A's alone)")
                    continue
                rows = read_pairs(p, True, lang)
                train += rows
                counts["train"][lang] = len(rows)
                if cv is not None and lang == "eng":
                    cv_pairs = rows
            for split in SPLITS:
                rows = _split_of(bases, lang, split, notes)
                if rows is not None:
                    per_split[split] += rows
                    counts[split][lang] = len(rows)
        tracks = {t: [lang for lang in chosen if lang in held[t]] for t in TRACKS if t in bases}
        origin = f"SemEval-2024 Task 1 (Track{'s' if len(bases) > 1 else ''} {', '.join(bases)})"
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
    if cv is not None and not cv_pairs:
        raise ReleaseError(
            source,
            "the cross-validated protocol needs the English labelled pairs (an STR-2022 file, or "
            "eng/eng_train.csv in the checkout)",
        )
    if not splits and not cv_pairs:
        raise ReleaseError(source, "no language has dev or test gold: nothing to score")
    with ReleaseBundle(task, store) as b:
        for split in splits:
            rows = per_split[split]
            inputs = [
                {k: r[k] for k in ("PairID", "language", "sentence1", "sentence2")} for r in rows
            ]
            gold = [
                {
                    "PairID": r["PairID"],
                    "language": r["language"],
                    "score": r["score"],
                    # STR-2022's source of the pair, where the file names it: the source slices
                    **({"source": r["source"]} if "source" in r else {}),
                }
                for r in rows
            ]
            b.write_jsonl(split, "inputs.jsonl", inputs)
            b.write_jsonl(split, "gold.jsonl", gold)  # dev's is public: the spec says so
        if train:
            b.write_jsonl("train", "train.jsonl", train)
        folds = None
        if cv is not None:
            folds = _write_cv(b, cv, cv_pairs)
            splits.append(cv.split)
            counts[cv.split] = {"eng": len(cv_pairs), "folds": cv.folds}
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": origin,
            "protocol": protocol,
            "languages": chosen,
            "splits": splits,
            "counts": {k: v for k, v in counts.items() if v},
            "notes": notes,
        }
        if tracks:  # the languages of each track the checkout holds: its boards (`track_boards`)
            manifest["tracks"] = tracks
        if folds is not None:
            manifest["cross_validation"] = folds
        # STR-2022's sources each split's gold names (its source slices and boards)
        found = {sp: {r["source"] for r in per_split[sp] if "source" in r} for sp in SPLITS}
        if cv is not None:
            found[cv.split] = {r["source"] for r in cv_pairs if "source" in r}
        sources = {sp: [x for x in SOURCES if x in got] for sp, got in found.items() if got}
        if sources:
            manifest["sources"] = sources
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
        return b.install(manifest)


# ---------------------------------------------------------------- tracks and their boards

TRACK_FACTS = [
    {
        "key": "track",
        "label": "SemEval-2024 track",
        "kind": "choice",
        "choices": list(TRACKS),
        "help": "A: supervised (labelled data allowed); B: unsupervised (no labelled relatedness "
        "data); C: cross-lingual (no labelled data in the target language)",
        "rules": [
            {
                "when": ["B"],
                "fact": "labelled_data",
                "only": ["none"],
                "message": "Track B uses no labelled relatedness data",
            },
            {  # a run of Track C is ranked on each language whose labelled data it did not use
                "when": ["C"],
                "fact": "labelled_data",
                "forbid_board_subset": True,
                "message": "Track C uses no labelled data in the target language",
            },
        ],
    },
    {
        "key": "labelled_data",
        "label": "Labelled relatedness data used",
        "kind": "text",
        "help": "The languages whose labelled pairs (train or dev with labels) the system learned "
        "from, by their upstream codes (eng, esp, ...), comma separated, or none; Track B answers "
        "none; a Track C run is not ranked on the board of a language it names",
    },
]
"""The fact sheet's questions the track boards filter on (added to the task's competition when its
phases are made, where it does not ask them yet)."""


def track_boards(task: Task, manifest: dict, phase_name: str, split: str) -> dict:
    """The boards of a phase on `split` from what the import found: for each track the checkout
    holds, one board per language with gold in the split (`a-amh`, `b-afr`, ...: ranked by
    Spearman, Pearson and the pair count beside it, over the runs whose fact sheet names the
    track), as SemEval-2024 ranked them, and, where a track has two languages or more there, one
    board of their mean (`a-macro`, ...: not a SemEval ranking, titled so) and an overall board of
    the language boards (`a-overall`: the mean of each team's ranked run on each, docs/boards.md);
    on the cross-validated split of an STR-2022 file, one board per source (`source-goodreads`,
    ...), the paper's Table 6. A language's runs of another
    track never enter its board; the main board stays the macro over every language."""
    held = set((manifest.get("counts") or {}).get(split, {}))
    boards, overall_boards = [], []
    for t, langs in (manifest.get("tracks") or {}).items():
        scored = [lang for lang in langs if lang in held]
        if len(scored) > 1:
            # not a SemEval ranking (it ranked each language apart): the mean of the track's
            # languages, declared beside them and titled so; a team that covered some of them is
            # shown unranked with its own mean over those, said as such
            over = {"subset": f"macro-{t.lower()}", "over": scored}
            boards.append(
                {
                    "name": f"{t.lower()}-macro",
                    "title": f"Track {t}: mean over its {len(scored)} languages "
                    "(not a SemEval-2024 ranking)",
                    "ranking": {**over, "metric": "spearman"},
                    "columns": [{**over, "metric": "pearson"}, {**over, "metric": "n"}],
                    "filter": {"fact": "track", "equals": [t]},
                }
            )
        names = [f"{t.lower()}-{lang}" for lang in scored]
        if len(scored) > 1:
            # the same mean over each team's ranked run on each language's board (a team may
            # submit one run per language): an overall board, its intervals from the language
            # boards' resamples; a team missing a language is shown unranked
            overall_boards.append(
                {
                    "name": f"{t.lower()}-overall",
                    "title": f"Track {t}: mean over its {len(scored)} language boards "
                    "(not a SemEval-2024 ranking)",
                    "overall": {"boards": names, "rule": "mean", "missing": "unranked"},
                }
            )
        for lang in langs:
            if lang in held:
                boards.append(
                    {
                        "name": f"{t.lower()}-{lang}",
                        "title": f"Track {t}: {lang}",
                        "ranking": {"subset": lang, "metric": "spearman"},
                        "columns": [
                            {"subset": lang, "metric": "pearson"},
                            {"subset": lang, "metric": "n"},
                        ],
                        "filter": {"fact": "track", "equals": [t]},
                    }
                )
    for src in manifest.get("sources", {}).get(split, []):
        boards.append(
            {
                "name": f"source-{src.lower()}",
                "title": f"Source: {src}",
                "ranking": {"subset": src.lower(), "metric": "spearman"},
                "columns": [
                    {"subset": src.lower(), "metric": "pearson"},
                    {"subset": src.lower(), "metric": "n"},
                ],
            }
        )
    boards += overall_boards
    return {"boards": boards, "facts": TRACK_FACTS if manifest.get("tracks") else []}


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


def write_tracks(root: Path, size: int = 120, seed: int = 4) -> Path:
    """A made-up checkout with Tracks A, B and C in the upstream layout (commit 3c5941d): Track A
    as `write_track_a` (eng, esp, kin); Track B with eng and kin (the same dev and test files as
    Track A's, no training file) and afr; Track C with eng, afr (the same files as Track B's) and
    hin (Track C's alone here). afr has upstream's quirks: its test gold and dev inputs separate
    the two sentences by a tab, its dev gold names the score column `score`, and a pilot file
    (`afr_pilot_dev_labels.csv`) lies beside them, not read."""
    write_track_a(root, size, seed)
    rng = random.Random(seed + 1)
    for track, shared, own in (("B", ("eng", "kin"), ("afr",)), ("C", ("eng",), ("afr", "hin"))):
        base = root / f"Track {track}"
        for lang in shared:
            (base / lang).mkdir(parents=True, exist_ok=True)
            for f in (root / "Track A" / lang).glob(f"{lang}_*.csv"):
                if not f.name.endswith("_train.csv"):
                    shutil.copyfile(f, base / lang / f.name)
        for lang in own:
            d = base / lang
            d.mkdir(parents=True, exist_ok=True)
            other = root / "Track B" / lang
            if track == "C" and other.is_dir():  # the same files in every track
                for f in other.glob("*.csv"):
                    shutil.copyfile(f, d / f.name)
                continue
            for split, n in (("dev", max(4, size // 6)), ("test", max(6, size // 3))):
                pairs = [(f"{lang.upper()}-{split}-{i}", *_pair(rng)) for i in range(n)]
                tab = lang == "afr"

                def cell(s1, s2, sep):
                    return '"' + (s1 + sep + s2).replace('"', '""') + '"'

                plain = [
                    f"{pid},{cell(s1, s2, chr(9) if tab and split == 'dev' else chr(10))}"
                    for pid, s1, s2, _ in pairs
                ]
                gold = [
                    f"{pid},{cell(s1, s2, chr(9) if tab and split == 'test' else chr(10))},{sc}"
                    for pid, s1, s2, sc in pairs
                ]
                score = "score" if tab and split == "dev" else "Score"
                (d / f"{lang}_{split}.csv").write_text(
                    "PairID,Text\n" + "\n".join(plain) + "\n", encoding="utf-8"
                )
                (d / f"{lang}_{split}_with_labels.csv").write_text(
                    f"PairID,Text,{score}\n" + "\n".join(gold) + "\n", encoding="utf-8"
                )
            if lang == "afr":
                (d / "afr_pilot_dev_labels.csv").write_text(
                    'PairID,Text,score\nAFR-pilot-1,"a\nb",0.5\n', encoding="utf-8"
                )
    return root


def demo_release(root: Path, size: int = 120) -> dict:
    return {"source": write_track_a(root / "Semantic_Relatedness_SemEval2024", size)}
