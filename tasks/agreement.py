"""Human agreement from a release's own annotations: the ceiling a board shows as a reference row.

TRoTR (`judgments/TRoTR.tsv`: instanceID, label 1-4 or "-", comment, annotator): Krippendorff's
alpha (ordinal) and the mean of the pairwise Spearman correlations between annotators, each pair
weighted by the instances both judged; "-" (no judgment) is left out. On the whole release this
gives the paper's .420 and .506 (6,300 pairs); with the paper's filter (section 4.2: an instance is
left out when its judgments span 2 or more, or when their mean lies strictly between 2 and 3) its
.709 / .811 over 3,821 pairs. Beside them the chance-corrected family of tasks/agreement_measures.py
(multi-kappa as Manjavacas et al. 2021 measure it, Fleiss' pi, Cohen's kappa per annotator pair,
alpha) on the four labels and on a declared binarisation, each with a seeded bootstrap interval,
and the same within each level of the contextual factors (the quoted passage, its biblical book,
the annotator pair, the lexical overlap of the two contexts in quartiles).
"""

from __future__ import annotations

import collections
import csv
import hashlib
import itertools
import json
import re
from pathlib import Path

import krippendorff
import numpy as np

from tasks.agreement_bayes import BINS, compare_models, fit
from tasks.agreement_measures import (
    EXPECTED_NOTE,
    KAPPA_NOTE,
    Table,
    agreement,
    by_annotator_pair,
    by_factor,
    quantile_levels,
    table_from_rows,
)
from tasks.agreement_swissgov import why
from tasks.base import resolve
from tasks.release import locate

PAPER = {
    "trotr": {
        "alpha": 0.420,
        "spearman": 0.506,
        "pairs": 6300,
        "filtered": {"alpha": 0.709, "spearman": 0.811, "pairs": 3821},
    }
}
SEED = 2024  # the bootstrap's; recorded beside every interval
BOOT = 1000
# TRoTR's judgments on the DURel scale: 1-2 unrelated, 3-4 related topics
TROTR_BINARY = {1.0: 0.0, 2.0: 0.0, 3.0: 1.0, 4.0: 1.0}
# TRoTR's sampler set-up (tasks/agreement_bayes.py, docs/agreement.md; the model is the
# paper's): the annotator pairs' intercepts centred around the fixed intercept (hierarchical
# centring) and relative to the books' mean, the books' centred and rotated (their mean one
# coordinate): the ridges the data leave (alpha and the pairs' mean; the pairs' and the books'
# means) become coordinates, so a diagonal mass matrix mixes (bulk ESS about 2,000 from 4 x 1,000
# draws, where the dense one reached 600-800 at L_book and cost twice as much a step); the three
# pairs with about 250 pairs of judgments each (under `sparse_below`) non-centred (centred, their
# correlations' funnel made 2-4 divergent transitions a seed); alpha non-centred about the
# centred pairs' mean (`alpha_about`: alpha and the pairs' scales made a funnel, whose neck asked
# for a target of 0.99 and 72-127 leapfrog steps a draw); target acceptance 0.99 (at 0.98 the
# first attempt made one divergent transition on 4 of 20 seeds, at 0.99 on 1 of 20, at 63-75
# leapfrog steps a draw against 55-63: 7 % more CPU a first attempt, less a seed with the refits
# counted; docs/agreement.md); 4 chains of 750 warm-up + 1,000 kept draws (500 + 500 and
# 750 + 500 were refused for seeds 5 and 15: R-hat 1.010-1.017); a fit with divergent
# transitions is run again at target 0.995, resumed from where its chains ended
# (tasks/agreement_bayes.py), before it is refused
TROTR_SAMPLER = {
    "warmup": 750,
    "centred": ("pair", "book"),
    "around": "pair",
    "sparse_below": 1000,
    "dense_mass": False,
    "alpha_about": True,
    "target_accept": 0.99,
    "retry_accept": 0.995,
}
TROTR_BINARY_TEXT = "judgments 1-2 -> 0 (unrelated topics), 3-4 -> 1 (related)"
TROTR_FILTER = (
    "an instance is left out when its highest and lowest judgments differ by 2 or more, or when "
    "the mean of its judgments lies strictly between 2 and 3 (TRoTR, section 4.2 and note 3)"
)
FACTORS = ("book", "passage", "annotator_pair", "overlap")
_PASSAGE = re.compile(r"\((?P<passage>(?P<book>.+?)\s+\d+:\d+)\)\s*$")
_WORD = re.compile(r"\w+")


def trotr_judgments(path: Path) -> list[tuple[str, str, float]]:
    """(annotator, instance, label) for every numeric judgment."""
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            try:
                v = float(r["label"])
            except (TypeError, ValueError):
                continue  # "-": the annotator gave no judgment
            out.append((r["annotator"], r["instanceID"], v))
    return out


def trotr_release(source: Path) -> dict:
    """The agreement of a TRoTR checkout (its `judgments/TRoTR.tsv`)."""
    return trotr_agreement(locate(Path(source), "datasets", "TRoTR") / "judgments" / "TRoTR.tsv")


def trotr_filter(rows: list[tuple[str, str, float]]) -> set[str]:
    """The instances TRoTR's paper keeps for its filtered agreement (`TROTR_FILTER`)."""
    by: dict[str, list[float]] = collections.defaultdict(list)
    for _, i, v in rows:
        by[i].append(v)
    return {i for i, v in by.items() if max(v) - min(v) < 2 and not 2 < sum(v) / len(v) < 3}


def alpha_and_spearman(
    rows: list[tuple[str, str, float]],
) -> tuple[float | None, float | None]:
    """TRoTR's two figures: Krippendorff's alpha (ordinal), weighted mean pairwise Spearman.
    Alpha is undefined (None) where every judgment is the same value (a passage whose pairs were
    all judged alike): its expected disagreement is zero."""
    annotators = sorted({a for a, _, _ in rows})
    instances = sorted({i for _, i, _ in rows})
    ai = {a: k for k, a in enumerate(annotators)}
    ii = {x: k for k, x in enumerate(instances)}
    M = np.full((len(annotators), len(instances)), np.nan)
    for a, i, v in rows:
        M[ai[a], ii[i]] = v
    alpha = (
        float(krippendorff.alpha(reliability_data=M, level_of_measurement="ordinal"))
        if np.unique(M[~np.isnan(M)]).size > 1
        else None
    )
    # here, not at import: scipy.stats costs every process that imports the server 0.7 s of CPU
    from scipy import stats

    num = den = 0.0
    for a, b in itertools.combinations(range(len(annotators)), 2):
        both = ~np.isnan(M[a]) & ~np.isnan(M[b])
        n = int(both.sum())
        if n < 2:
            continue
        rho = float(stats.spearmanr(M[a][both], M[b][both]).statistic)
        if np.isfinite(rho):
            num += rho * n
            den += n
    return alpha, (num / den if den else None)


def trotr_targets(rows: list[tuple[str, str, float]]) -> list[dict]:
    """TRoTR's Appendix H (Table 5) per quoted passage: Krippendorff's alpha (ordinal), the
    weighted mean pairwise Spearman and the number of pairs, on all of the passage's pairs and on
    those the paper's filter keeps (`trotr_filter`, applied over the whole release as the paper
    applies it), in the order of the passages' first judgment."""
    kept = trotr_filter(rows)
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(passage_of(r[1])[0], []).append(r)
    out = []
    for passage, rs in by.items():
        alpha, rho = alpha_and_spearman(rs)
        fr = [r for r in rs if r[1] in kept]
        f_alpha, f_rho = alpha_and_spearman(fr) if fr else (None, None)
        out.append(
            {
                "passage": passage,
                "book": passage_of(rs[0][1])[1],
                "pairs": len({r[1] for r in rs}),
                "alpha": alpha,
                "spearman": rho,
                "pairs_filtered": len({r[1] for r in fr}),
                "alpha_filtered": f_alpha,
                "spearman_filtered": f_rho,
            }
        )
    return out


def weighted_jaccard(a: str, b: str) -> float:
    """Lexical overlap of two texts: the weighted Jaccard of their lower-cased word counts (the sum
    of the smaller counts over the sum of the larger, Manjavacas et al. 2021, note 8)."""
    ca = collections.Counter(_WORD.findall(a.lower()))
    cb = collections.Counter(_WORD.findall(b.lower()))
    words = ca.keys() | cb.keys()
    top = sum(max(ca[w], cb[w]) for w in words)
    return sum(min(ca[w], cb[w]) for w in words) / top if top else 0.0


def trotr_overlap(root: Path) -> dict[str, float]:
    """Each instance's lexical overlap between its two contexts (`data/instances.tsv` and
    `data/uses.tsv` of the checkout; empty when it has none)."""
    inst, uses = root / "data" / "instances.tsv", root / "data" / "uses.tsv"
    if not inst.is_file() or not uses.is_file():
        return {}
    # the csv module's field limit is process-wide (the submission reader's bound relies on it):
    # raised for the release's long contexts only while they are read
    before = csv.field_size_limit(1 << 24)
    try:
        with open(uses, encoding="utf-8", newline="") as f:
            text = {r["dataID"]: r["context"] for r in csv.DictReader(f, delimiter="\t")}
    finally:
        csv.field_size_limit(before)
    out = {}
    with open(inst, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            ids = (r.get("dataIDs") or "").split(",")
            if len(ids) == 2 and all(x in text for x in ids):
                out[r["instanceID"]] = weighted_jaccard(text[ids[0]], text[ids[1]])
    return out


def passage_of(instance: str) -> tuple[str, str]:
    """(passage, book) quoted by a TRoTR instance id such as `pair_7_(1 Corinthians 13:4)`."""
    m = _PASSAGE.search(instance)
    return (m["passage"], m["book"]) if m else ("?", "?")


def _levels(ids: list[str], key) -> dict[str, np.ndarray]:
    names = [key(i) for i in ids]
    return {n: np.array([x == n for x in names]) for n in sorted(set(names))}


def trotr_factors(
    table: Table, ids: list[str], overlap: dict[str, float], level: str, n_boot: int, seed: int
) -> dict[str, list[dict]]:
    """The measures within each level of TRoTR's contextual factors."""
    out = {
        "book": by_factor(table, _levels(ids, lambda i: passage_of(i)[1]), level, n_boot, seed),
        "passage": by_factor(table, _levels(ids, lambda i: passage_of(i)[0]), level, n_boot, seed),
        "annotator_pair": by_annotator_pair(table, level, n_boot, seed),
    }
    if overlap and all(i in overlap for i in ids):
        levels = quantile_levels(np.array([overlap[i] for i in ids]), 4)
        out["overlap"] = by_factor(table, levels, level, n_boot, seed)
    return out


def trotr_agreement(path: Path, n_boot: int = BOOT, seed: int = SEED) -> dict:
    """TRoTR's agreement figures (the paper's, filtered and not) and the kappa family with its
    intervals, overall and by contextual factor."""
    path = Path(path)
    rows = trotr_judgments(path)
    annotators = sorted({a for a, _, _ in rows})
    instances = sorted({i for _, i, _ in rows})
    alpha, spearman = alpha_and_spearman(rows)
    kept = trotr_filter(rows)
    f_alpha, f_spearman = alpha_and_spearman([r for r in rows if r[1] in kept])
    overlap = trotr_overlap(path.parent.parent)
    labelled, ids = table_from_rows(rows, labels=[1.0, 2.0, 3.0, 4.0])
    bin_rows = [(a, i, TROTR_BINARY[v]) for a, i, v in rows]
    binary, bin_ids = table_from_rows(bin_rows, labels=[0.0, 1.0])
    return {
        "source": "judgments/TRoTR.tsv",
        "annotators": len(annotators),
        "pairs": len(instances),
        "judgments": len(rows),
        "alpha_ordinal": round(alpha, 6),
        "weighted_mean_pairwise_spearman": round(spearman, 6) if spearman is not None else None,
        "filtered": {
            "filter": TROTR_FILTER,
            "pairs": len(kept),
            "alpha_ordinal": round(f_alpha, 6),
            "weighted_mean_pairwise_spearman": round(f_spearman, 6)
            if f_spearman is not None
            else None,
        },
        "kappa": {
            "labels": agreement(labelled, "ordinal", n_boot, seed),
            "binary": agreement(binary, "nominal", n_boot, seed),
            "binarisation": TROTR_BINARY_TEXT,
            "note": KAPPA_NOTE,
        },
        "factors": {
            "labels": trotr_factors(labelled, ids, overlap, "ordinal", n_boot, seed),
            "binary": trotr_factors(binary, bin_ids, overlap, "nominal", n_boot, seed),
            "overlap": "weighted Jaccard of the two contexts' lower-cased word counts",
            "expected": {
                "multi_kappa": EXPECTED_NOTE["level"],
                "multi_kappa_dataset_expected": EXPECTED_NOTE["dataset"],
            },
        },
        "paper": PAPER["trotr"],
        # Appendix H's per-passage table (`trotr_targets`; the paper's in tasks/trotr_paper.py)
        "targets": trotr_targets(rows),
    }


def trotr_bayes_inputs(path: Path) -> tuple[Table, dict, dict]:
    """What the Bayesian model is fitted on, from a release's judgments (`path`): the binarised
    judgments' table, the biblical book of each item (the grouping factor) and the lexical overlap
    of its two contexts (the covariate, where the release has the contexts)."""
    path = Path(path)
    rows = [(a, i, TROTR_BINARY[v]) for a, i, v in trotr_judgments(path)]
    table, ids = table_from_rows(rows, labels=[0.0, 1.0])
    overlap = trotr_overlap(path.parent.parent)
    covariates = {"overlap": np.array([overlap[i] for i in ids])} if overlap else {}
    return table, {"book": np.array([passage_of(i)[1] for i in ids])}, covariates


def trotr_bayes(
    path: Path,
    seed: int = SEED,
    chains: int | None = None,
    warmup: int | None = None,
    samples: int | None = None,
    target_accept: float | None = None,
    correlated: bool = True,
    bins: int | None = BINS,
    **options,
) -> dict:
    """The Bayesian multilevel model (tasks/agreement_bayes.py, its defaults unless given) on
    TRoTR's binarised judgments: random intercepts for the annotator pair and the biblical book,
    lexical overlap as the fixed effect (the release has no known-passage flag nor retrieval
    method); the empirical multi-kappa (eq. 7-8) and its pair-weighted generalisation beside it."""
    table, groups, covariates = trotr_bayes_inputs(path)
    overlap = bool(covariates)
    given = {
        "chains": chains,
        "warmup": warmup,
        "samples": samples,
        "target_accept": target_accept,
    }
    got = fit(
        table,
        groups=groups,
        covariates=covariates,
        seed=seed,
        curve="overlap" if overlap else None,
        correlated=correlated,
        bins=bins,
        **(TROTR_SAMPLER | {key: v for key, v in given.items() if v is not None} | options),
    )
    measured = agreement(table, "nominal", BOOT, seed)
    return got | {
        "source": "judgments/TRoTR.tsv",
        "binarisation": TROTR_BINARY_TEXT,
        "empirical": measured["multi_kappa"],
        "empirical_pair_weighted": measured["multi_kappa_weighted"],
    }


def trotr_compare(path: Path, seed: int = SEED, **options) -> dict:
    """The paper's Table 2 on TRoTR: nested models compared by PSIS-LOO, as far as the release
    has the paper's factors (no retrieval method, no known-passage flag): `m` (the annotator
    pairs' intercepts only), `m.B` (+ the book's intercepts), `m.lB` (+ lexical overlap), each
    with the model's defaults and TRoTR's sampler set-up (tasks/agreement_bayes.py)."""
    table, book, overlap = trotr_bayes_inputs(path)
    ladder = {"m": ({}, {}), "m.B": (book, {})}
    if overlap:
        ladder["m.lB"] = (book, overlap)
    got = compare_models(table, ladder, seed=seed, **(TROTR_SAMPLER | options))
    return got | {"source": "judgments/TRoTR.tsv", "binarisation": TROTR_BINARY_TEXT}


def trotr_bayes_release(source: Path, seed: int = SEED, compare: bool = False, **sampler) -> dict:
    """`palimpsest agreement tric-* --bayes [--compare] [--draws N] --from CHECKOUT` (`sampler`:
    the sampler's `warmup` and `samples` per chain)."""
    root = locate(Path(source), "datasets", "TRoTR")
    if compare:
        return trotr_compare(root / "judgments" / "TRoTR.tsv", seed=seed, **sampler)
    return trotr_bayes(root / "judgments" / "TRoTR.tsv", seed=seed, **sampler)


AGREEMENT_FILE = "agreement.json"  # the full figures, factors included, beside task.json
# what the figures of a TRoTR release are computed from: the cache key hashes these files and the
# code that computes them, so a re-import of the same release by the same code reuses them
_TROTR_INPUTS = ("judgments/TRoTR.tsv", "data/instances.tsv", "data/uses.tsv")
_AGREEMENT_CODE = ("agreement.py", "agreement_measures.py")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def trotr_agreement_key(judgments: Path, n_boot: int = BOOT, seed: int = SEED) -> str:
    """The cache key of a release's agreement: the checksums of the files it is computed from,
    the computing code's and the bootstrap's settings."""
    root = Path(judgments).parent.parent
    here = Path(__file__).parent
    parts = [f"boot={n_boot} seed={seed}"]
    for rel in _TROTR_INPUTS:
        p = Path(judgments) if rel.startswith("judgments/") else root / rel
        parts.append(f"{rel}={_sha256(p) if p.is_file() else '-'}")
    parts += [f"code:{name}={_sha256(here / name)}" for name in _AGREEMENT_CODE]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def trotr_agreement_cached(judgments: Path, task_root: Path | None) -> dict:
    """`trotr_agreement`, reused from the task's cached figures (`agreement.json`) when their key
    (`trotr_agreement_key`) is this release's and this code's; else computed and keyed."""
    key = trotr_agreement_key(judgments)
    if task_root is not None:
        try:
            before = load_agreement(task_root)
        except (OSError, ValueError):
            before = None  # unreadable: computed again
        if before and before.get("cache_key") == key:
            return before
    return trotr_agreement(judgments) | {"cache_key": key}


BAYES_FILE = "agreement-bayes.json"  # the last converged Bayesian fit, when one was run


def save_agreement(root: Path, got: dict) -> dict:
    """Write the full agreement (factors included) into a task's directory; return what the
    manifest keeps (all but the factor tables, which only the agreement page and command read)."""
    (Path(root) / AGREEMENT_FILE).write_text(
        json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    return {k: v for k, v in got.items() if k != "factors"}


def load_agreement(root: Path) -> dict | None:
    """The full agreement an import cached in a task's directory, or None."""
    p = Path(root) / AGREEMENT_FILE
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def reference_rows(task, agreement: dict | None) -> list[dict]:
    """The board's human rows for a task: label, the values they stand beside, and a note, made by
    the function the task declares (`Task.agreement_rows`; none: no rows)."""
    if not agreement or not getattr(task, "agreement_rows", ""):
        return []

    return resolve(task.agreement_rows)(agreement)


def trotr_rows(agreement: dict) -> list[dict]:
    """TRoTR: the annotators' weighted mean pairwise Spearman, the paper's filtered figures
    recomputed with its filter beside the unfiltered ones, and the binary multi-kappa."""
    a, s = agreement.get("alpha_ordinal"), agreement.get("weighted_mean_pairwise_spearman")
    p = agreement.get("paper", {})
    pf = p.get("filtered", {})
    f = agreement.get("filtered")
    filtered = (
        f"with the paper's filter ({f['filter']}): Spearman "
        f"{f['weighted_mean_pairwise_spearman']:.3f}, alpha {f['alpha_ordinal']:.3f} over "
        f"{f['pairs']} pairs (the paper: {pf.get('spearman')} / {pf.get('alpha')} over "
        f"{pf.get('pairs')})"
        if f
        else "the paper's filtered figures were not recomputed (an import before they were)"
    )
    binary = (agreement.get("kappa") or {}).get("binary", {})
    k, w = binary.get("multi_kappa"), binary.get("multi_kappa_weighted")
    kappa = (
        f"; multi-kappa of the binarised judgments {k['value']:.3f} [{k['low']:.3f}, "
        f"{k['high']:.3f}]"
        if k and k.get("value") is not None and k.get("low") is not None
        else ""
    )
    if kappa and w and w.get("value") is not None:
        kappa += (
            f" (Manjavacas et al.'s eq. 7-8, annotator pairs counted alike; pair-weighted "
            f"{w['value']:.3f} [{w['low']:.3f}, {w['high']:.3f}])"
        )
    note = (
        f"annotators against each other, not against the gold mean: weighted mean pairwise "
        f"Spearman {s:.3f}, Krippendorff's alpha (ordinal) {a:.3f} over {agreement.get('pairs')} "
        f"pairs and {agreement.get('annotators')} annotators (the paper: {p.get('spearman')} / "
        f"{p.get('alpha')}); {filtered}{kappa}; not ranked"
    )
    values = {"all/spearman": s}
    return [
        {
            "team": "Human agreement (TRoTR annotators)",
            "method_name": "weighted mean pairwise Spearman",
            "values": values,
            "note": note,
            "link": "agreement",
        }
    ]


def swissgov_rows(agreement: dict) -> list[dict]:
    """One row per language pair: annotator 1 against annotator 2 in that pair's column only (the
    pairs' documents differ, so a macro over them would be no one's agreement)."""
    rows = []
    for pair, a in sorted(agreement.get("language_pairs", {}).items()):
        if a.get("spearman") is None:
            continue
        note = (
            f"annotator 1 against annotator 2, Spearman over the {a['tokens']} tokens "
            f"(punctuation left out) of the {a['documents']} documents both annotated that the "
            f"release keeps ({a['overlapping']} shared); {why(pair, a)}; other columns: not "
            "measured for annotators; not ranked"
        )
        rows.append(
            {
                "team": f"Human agreement {pair.upper()}",
                "method_name": "annotator vs annotator",
                "values": {f"{pair}/spearman": a["spearman"]},
                "note": note,
            }
        )
    return rows


def str_rows(agreement: dict) -> list[dict]:
    """STR: one row per language whose raw BWS annotations the checkout holds, the split-half
    reliability (`tasks/agreement_str.py`) under Spearman and Pearson of that language only."""
    rows = []
    for lang, a in sorted(agreement.get("languages", {}).items()):
        g = a.get("gold_check", {})
        if "spearman" in g:
            gold = (
                "these annotations reproduce the release's Score"
                if g.get("reproduced")
                else "the scores from all these annotations do not reproduce the release's "
                f"Score (Spearman {g['spearman']:.3f} with it, {g['within_rounding'] * 100:.0f}% "
                f"of {g['matched']} pairs within rounding; {g['cannot_be_counts']} of its values "
                "are no counting score over at most the appearances the file records), so the gold "
                "rests on annotations the file does not hold, or on another computation"
            )
        else:
            gold = "the release's Score was not at hand to check them against"
        note = (
            f"ours, from the release's raw annotations ({', '.join(a['files'])}): split-half "
            "reliability, each tuple's annotations split at random into two halves, "
            f"{a['splits']} splits (seed {a['seed']}), BWS counting scores of the {a['items']} "
            f"items from each half correlated: Spearman {a['spearman']:.3f} ± "
            f"{a['spearman_sd']:.3f}, Pearson {a['pearson']:.3f} ± {a['pearson_sd']:.3f} "
            f"({a['annotations']} annotations of {a['tuples']} tuples); {gold}; "
            "the 0.84 reference is STR-2022's split-half reliability (Spearman, 1,000 splits "
            "averaged) on English, another language and dataset; not ranked"
        )
        rows.append(
            {
                "team": f"Human agreement {lang.upper()} (split-half)",
                "method_name": "split-half reliability (BWS)",
                "values": {f"{lang}/spearman": a["spearman"], f"{lang}/pearson": a["pearson"]},
                "note": note,
            }
        )
    return rows


__all__ = [
    "AGREEMENT_FILE",
    "BAYES_FILE",
    "PAPER",
    "load_agreement",
    "reference_rows",
    "save_agreement",
    "str_rows",
    "swissgov_rows",
    "trotr_agreement",
    "trotr_agreement_cached",
    "trotr_agreement_key",
    "trotr_bayes",
    "trotr_bayes_inputs",
    "trotr_compare",
    "trotr_bayes_release",
    "trotr_filter",
    "trotr_judgments",
    "trotr_rows",
]
