"""Human agreement from a release's own annotations: the ceiling a board shows as a reference row.

TRoTR (`judgments/TRoTR.tsv`: instanceID, label 1-4 or "-", comment, annotator): Krippendorff's
alpha (ordinal, the `krippendorff` package) and the mean of the pairwise Spearman correlations
between annotators, each pair weighted by the instances both judged; "-" (no judgment) is left out.
On the whole release this gives the paper's .420 and .506 (6,300 pairs); its .709 / .811 are after
a filtering of pairs the release does not record, so they are quoted, not recomputed.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import krippendorff
import numpy as np
from scipy import stats

from tasks.agreement_swissgov import why
from tasks.base import resolve
from tasks.release import locate

PAPER = {
    "trotr": {
        "alpha": 0.420,
        "spearman": 0.506,
        "pairs": 6300,
        "filtered": {"alpha": 0.709, "spearman": 0.811},
    }
}


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


def trotr_agreement(path: Path) -> dict:
    rows = trotr_judgments(path)
    annotators = sorted({a for a, _, _ in rows})
    instances = sorted({i for _, i, _ in rows})
    ai = {a: k for k, a in enumerate(annotators)}
    ii = {x: k for k, x in enumerate(instances)}
    M = np.full((len(annotators), len(instances)), np.nan)
    for a, i, v in rows:
        M[ai[a], ii[i]] = v
    alpha = float(krippendorff.alpha(reliability_data=M, level_of_measurement="ordinal"))
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
    return {
        "source": "judgments/TRoTR.tsv",
        "annotators": len(annotators),
        "pairs": len(instances),
        "judgments": len(rows),
        "alpha_ordinal": round(alpha, 6),
        "weighted_mean_pairwise_spearman": round(num / den, 6) if den else None,
        "paper": PAPER["trotr"],
    }


def reference_rows(task, agreement: dict | None) -> list[dict]:
    """The board's human rows for a task: label, the values they stand beside, and a note, made by
    the function the task declares (`Task.agreement_rows`; none: no rows)."""
    if not agreement or not getattr(task, "agreement_rows", ""):
        return []

    return resolve(task.agreement_rows)(agreement)


def trotr_rows(agreement: dict) -> list[dict]:
    """TRoTR: the annotators' weighted mean pairwise Spearman, beside the paper's figures."""
    a, s = agreement.get("alpha_ordinal"), agreement.get("weighted_mean_pairwise_spearman")
    p = agreement.get("paper", {})
    note = (
        f"annotators against each other, not against the gold mean: weighted mean pairwise Spearman "
        f"{s:.3f}, Krippendorff's alpha (ordinal) {a:.3f} over {agreement.get('pairs')} pairs and "
        f"{agreement.get('annotators')} annotators (the paper: {p.get('spearman')} / {p.get('alpha')}; "
        f"{p.get('filtered', {}).get('spearman')} / {p.get('filtered', {}).get('alpha')} after a filtering "
        "the release does not record, so not recomputed); not ranked"
    )
    return [
        {
            "team": "Human agreement (TRoTR annotators)",
            "method_name": "weighted mean pairwise Spearman",
            "values": {"all/spearman": s},
            "note": note,
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
            f"annotator 1 against annotator 2, Spearman over the {a['tokens']} tokens (punctuation left "
            f"out) of the {a['documents']} documents both annotated that the release keeps "
            f"({a['overlapping']} shared); {why(pair, a)}; other columns: not measured for "
            "annotators; not ranked"
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
                else f"the scores from all these annotations do not reproduce the release's Score (Spearman "
                f"{g['spearman']:.3f} with it, {g['within_rounding'] * 100:.0f}% of {g['matched']} pairs within "
                f"rounding; {g['cannot_be_counts']} of its values are no counting score over at most the "
                "appearances the file records), so the gold rests on annotations the file does not hold, or "
                "on another computation"
            )
        else:
            gold = "the release's Score was not at hand to check them against"
        note = (
            f"ours, from the release's raw annotations ({', '.join(a['files'])}): split-half reliability, "
            f"each tuple's annotations split at random into two halves, {a['splits']} splits (seed "
            f"{a['seed']}), BWS counting scores of the {a['items']} items from each half correlated: "
            f"Spearman {a['spearman']:.3f} ± {a['spearman_sd']:.3f}, Pearson {a['pearson']:.3f} ± "
            f"{a['pearson_sd']:.3f} ({a['annotations']} annotations of {a['tuples']} tuples); {gold}; "
            "the 0.84 reference is STR-2022's English, another language and dataset; not ranked"
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
    "PAPER",
    "reference_rows",
    "str_rows",
    "swissgov_rows",
    "trotr_agreement",
    "trotr_judgments",
    "trotr_rows",
]
