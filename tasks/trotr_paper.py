"""The TRoTR authors' published bi-encoder results (Periti et al., EMNLP 2024): their per-fold test
figures, from `TRiC-stats.tsv` in github.com/FrancescoPeriti/TRoTR (its last version, commit
1b7e632, unchanged at b74015d; the columns test-spearman_corr and test-f1_score of the rows <model>
and <model>_mask), whose all-MiniLM-L6-v2 means are the paper's Table 6. Their F1 without MASK uses
the threshold tuned on the +MASK distances (their script passes mask_distances to set_threshold for
both), so it is not comparable with a system tuned on its own scores.

The cross-validated boards show the rows `authors_rows` makes of them (`paper_rows` of
tasks/specs/tric-*.yaml; tests/test_task_specs.py checks the two agree);
benchmarks/reproduce_trotr.py reads them.
"""

from __future__ import annotations

import math

from tasks.base import PaperRow

SOURCE = (
    "their per-fold test figures in TRiC-stats.tsv (github.com/FrancescoPeriti/TRoTR, commit "
    "1b7e632); the mean and std (np.std) over the ten folds computed here"
)
NOTE_F1 = (
    "their plain model's threshold is tuned on the +MASK distances, so its F1 is not comparable "
    "with a system tuned on its own dev scores"
)
KEYS = ("spearman", "spearman_mask", "f1", "f1_mask")

# fold: (spearman, spearman +MASK, weighted F1, weighted F1 +MASK)
PER_FOLD = {
    "all-MiniLM-L6-v2": {
        1: (0.586, 0.699, 0.5304742186944241, 0.7920178827261024),
        2: (0.376, 0.724, 0.5066311743388822, 0.8284763264092889),
        3: (0.554, 0.707, 0.46624272764172636, 0.8401496247987201),
        4: (0.665, 0.691, 0.672745860802784, 0.8526389201090496),
        5: (0.414, 0.653, 0.4675061569502965, 0.863699681427595),
        6: (0.635, 0.698, 0.7002553602800473, 0.7604571813198683),
        7: (0.531, 0.656, 0.6079350524958932, 0.8367339087519131),
        8: (0.508, 0.602, 0.5335722910776857, 0.8574238476753986),
        9: (0.459, 0.579, 0.4677160374729351, 0.8246410506985684),
        10: (0.607, 0.696, 0.6262415526593388, 0.8346002972817622),
    },
    "all-mpnet-base-v2": {
        1: (0.552, 0.682, 0.6388568871262671, 0.8194185709557389),
        2: (0.391, 0.62, 0.582012322472849, 0.748136288587582),
        3: (0.527, 0.656, 0.4255068028507673, 0.7088329591730348),
        4: (0.685, 0.719, 0.7533610004122578, 0.8614258029523073),
        5: (0.433, 0.657, 0.45978078992433064, 0.836667676201364),
        6: (0.674, 0.735, 0.7415116212858096, 0.7778154205607476),
        7: (0.581, 0.629, 0.6913124756001316, 0.8423099498462423),
        8: (0.473, 0.625, 0.5856401588824212, 0.8349092389393632),
        9: (0.415, 0.529, 0.5143922992760201, 0.8101922236784621),
        10: (0.585, 0.702, 0.7303310938500781, 0.8136622108499816),
    },
}
AUTHORS: dict[str, dict[int, dict[str, float]]] = {
    m: {f: dict(zip(KEYS, v, strict=True)) for f, v in folds.items()}
    for m, folds in PER_FOLD.items()
}


def authors_rows(metric: str, split: str = "cv") -> tuple[PaperRow, ...]:
    """One row per model and MASK variant: the primary metric (`spearman` or `f1`) on `all` as the
    mean over the folds, its std, and each fold's figure, keyed as a cross-validated board's
    columns."""
    rows = []
    for model, folds in AUTHORS.items():
        for mask in ("", "_mask"):
            per = {f: v[metric + mask] for f, v in sorted(folds.items())}
            vals = list(
                per.values()
            )  # no numpy here: the task registry loads with `palimpsest --help`
            mean = math.fsum(vals) / len(vals)
            std = math.sqrt(
                math.fsum((v - mean) ** 2 for v in vals) / len(vals)
            )  # np.std: population
            values = (
                (f"all/{metric}", mean),
                (f"all/{metric}@std", std),
                *((f"all/{metric}@fold{f}", float(v)) for f, v in per.items()),
            )
            method = f"bi-encoder{'-mask' if mask else ''} ({model})"
            note = NOTE_F1 if metric == "f1" and not mask else ""
            rows.append(
                PaperRow(
                    team="TRoTR authors",
                    method=method,
                    split=split,
                    values=values,
                    source=SOURCE,
                    note=note,
                )
            )
    return tuple(rows)
